"""`python -m oellm_autoexp.backends.megatron dump-schema OUT.json`: save Megatron's arguments.

Run it where Megatron-LM's parser is importable (the training container or a checkout); the JSON
file then validates configs on a host without Megatron (`backend.schema_file`). Exit 0 on success,
2 on a usage error (Megatron not importable, output exists).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from oellm_autoexp.atomic import write_text_atomic
from oellm_autoexp.backends.megatron.argspec import schema_from_parser
from oellm_autoexp.backends.megatron.source import (
    DEFAULT_MODULE,
    MegatronBrokenError,
    MegatronUnavailableError,
    load_megatron_parser,
    megatron_provenance,
)
from oellm_autoexp.errors import EXIT_USAGE, AutoexpUsageError


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    cli = argparse.ArgumentParser(prog="python -m oellm_autoexp.backends.megatron")
    sub = cli.add_subparsers(dest="command", required=True)
    dump = sub.add_parser("dump-schema", help="write Megatron-LM's argument schema as JSON")
    dump.add_argument("out", type=Path)
    dump.add_argument(
        "--module", default=DEFAULT_MODULE, help="module that defines Megatron's arguments"
    )
    dump.add_argument("--megatron-path", default=None, help="Megatron-LM checkout to import from")
    dump.add_argument("--force", action="store_true", help="replace an existing file")
    ns = cli.parse_args(argv)
    try:
        parser = load_megatron_parser(ns.module, ns.megatron_path)
        schema = schema_from_parser(parser, origin=f"schema dumped from {ns.module}")
        schema = replace(schema, provenance=megatron_provenance(ns.module, ns.megatron_path))
        if ns.out.exists() and not ns.force:
            raise AutoexpUsageError(f"{ns.out} already exists; pass --force to replace it")
        write_text_atomic(ns.out, schema.to_json(), overwrite=True, mode=0o600)
    except (MegatronUnavailableError, MegatronBrokenError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except AutoexpUsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {len(schema)} Megatron arguments to {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
