"""Where the Megatron argument schema comes from: Megatron-LM's own parser, or a schema file.

Megatron-LM's parser lives in `megatron.training.arguments` (a Megatron-LM checkout or a training
container; the `megatron-core` wheel does not ship it). Importing it imports torch, so this module
imports it only when asked, never at import time.

The parser is built without parsing anything: newer Megatron-LM exposes
``add_megatron_arguments(parser)``; older versions only have ``parse_args(extra_args_provider)``,
which builds the full parser and then hands it to the provider before reading ``sys.argv`` — the
provider here stops it at that point, so nothing is parsed and no global state is touched.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import subprocess
import sys
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from oellm_autoexp.backends.megatron.argspec import ArgSchema, schema_from_parser
from oellm_autoexp.backends.megatron.chatter import captured_output
from oellm_autoexp.errors import ConfigError

DEFAULT_MODULE = "megatron.training.arguments"


class MegatronUnavailableError(Exception):
    """Megatron-LM's argument module cannot be imported here (the reason is the message)."""


@dataclass(frozen=True)
class ArgumentSource:
    """A schema plus, when Megatron-LM itself was importable, its parser for a final check.

    `parsed_shapes` remembers which argv shapes the parser already accepted, with the namespace
    it produced (see `cmdline.parse_outcome_key`), and `argv_memo` the argv built for given
    arguments, so that a 10,000-point sweep runs the parser a handful of times, not 10,000.
    """

    schema: ArgSchema
    parser: argparse.ArgumentParser | None
    # What validated the plan (recorded in plan.json): parser or schema file, Megatron's
    # version and commit when known.
    provenance: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # The module whose `validate_args` runs per distinct argument set (real parser only).
    module: str | None = None
    # (argv, world size, env) sets already run through validate_args / the static rules.
    validated: set[Hashable] = field(default_factory=set, compare=False, repr=False)
    parsed_shapes: dict[Hashable, argparse.Namespace] = field(
        default_factory=dict, compare=False, repr=False
    )
    argv_memo: dict[Hashable, tuple[tuple[str, ...], dict[str, Any], Hashable]] = field(
        default_factory=dict, compare=False, repr=False
    )


class MegatronBrokenError(Exception):
    """Megatron-LM's argument module is there but failed (not an import error): never skipped."""


class _ParserCapturedError(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__("parser captured")
        self.parser = parser


def _capture(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    raise _ParserCapturedError(parser)


def load_megatron_parser(
    module: str = DEFAULT_MODULE, megatron_path: str | None = None
) -> argparse.ArgumentParser:
    """Build Megatron-LM's argument parser from `module` without parsing anything.

    `megatron_path` is a Megatron-LM checkout to put on `sys.path` first (e.g. the repository's
    `submodules/megatron`). Raises `MegatronUnavailableError` when the module cannot be imported
    (Megatron or one of its own imports such as torch is missing here) and `MegatronBrokenError`
    when importing it or building the parser fails otherwise.
    """
    return _load_parser(module, megatron_path)  # one cache entry whatever the call spelling


@cache
def _load_parser(module: str, megatron_path: str | None) -> argparse.ArgumentParser:
    if megatron_path is not None and megatron_path not in sys.path:
        sys.path.insert(0, megatron_path)
    try:
        with captured_output(f"importing {module}"):
            return _build_parser(module)
    except (MegatronUnavailableError, MegatronBrokenError):
        raise
    except ImportError as exc:  # megatron missing, or one of its own imports (torch, ...)
        raise MegatronUnavailableError(f"cannot import {module}: {exc}") from exc
    except Exception as exc:  # a broken install must not pass for an absent one
        raise MegatronBrokenError(
            f"loading Megatron's arguments from {module} failed: {type(exc).__name__}: {exc}"
        ) from exc


def megatron_provenance(module: str, megatron_path: str | None) -> dict[str, Any]:
    """Megatron's version and git commit (when its checkout is a git tree), for plan.json."""
    record: dict[str, Any] = {"module": module, "megatron_path": megatron_path}
    mod = sys.modules.get(module)
    location = getattr(mod, "__file__", None)
    record["module_file"] = location
    info = sys.modules.get("megatron.core.package_info")
    version = getattr(info, "__version__", None)
    if version is None:
        with contextlib.suppress(Exception):
            version = importlib.import_module("megatron.core.package_info").__version__
    record["megatron_version"] = version
    record["megatron_commit"] = _git_commit(Path(location).parent) if location else None
    return record


def _git_commit(directory: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def _build_parser(module: str) -> argparse.ArgumentParser:
    mod = importlib.import_module(module)
    add = getattr(mod, "add_megatron_arguments", None)
    if callable(add):
        parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
        built = add(parser)
        return built if isinstance(built, argparse.ArgumentParser) else parser
    parse_args = getattr(mod, "parse_args", None)
    if not callable(parse_args):
        raise MegatronUnavailableError(
            f"{module} has neither add_megatron_arguments nor parse_args"
        )
    try:
        parse_args(extra_args_provider=_capture)
    except _ParserCapturedError as captured:
        return captured.parser
    raise MegatronUnavailableError(
        f"{module}.parse_args did not offer its parser to extra_args_provider"
    )


@cache
def resolve_source(
    *,
    mode: str,
    module: str,
    megatron_path: str | None,
    schema_file: str | None,
    key_prefix: str,
) -> ArgumentSource:
    """Pick the argument source for `mode` (``auto``, ``megatron`` or ``schema``).

    ``auto`` prefers Megatron-LM's parser and falls back to `schema_file`; with neither, planning
    stops with a message saying how to get one. Validation is never skipped silently. An
    explicitly set `megatron_path` that does not import is an error, not a fallback to a schema
    that may be stale. Cached: the planner builds one backend per distinct sweep point, and
    they all share one source.
    """
    if mode not in ("auto", "megatron", "schema"):
        raise ConfigError(
            f"expected 'auto', 'megatron' or 'schema', got {mode!r}", key=f"{key_prefix}.arg_source"
        )
    reason = "arg_source is 'schema'"
    if mode in ("auto", "megatron"):
        try:
            parser = load_megatron_parser(module, megatron_path)
        except MegatronBrokenError as exc:
            raise ConfigError(str(exc), key=f"{key_prefix}.megatron_module") from None
        except MegatronUnavailableError as exc:
            if mode == "megatron":
                raise ConfigError(
                    f"{exc} (arg_source is 'megatron')", key=f"{key_prefix}.arg_source"
                ) from None
            if megatron_path is not None:
                raise ConfigError(
                    f"{exc} from megatron_path {megatron_path} (set explicitly, so no fallback "
                    "to schema_file; fix the path or remove it)",
                    key=f"{key_prefix}.megatron_path",
                ) from None
            reason = str(exc)
        else:
            provenance = {"validated_by": "megatron", **megatron_provenance(module, megatron_path)}
            return ArgumentSource(
                schema=schema_from_parser(parser, origin=f"Megatron-LM parser ({module})"),
                parser=parser,
                provenance=provenance,
                module=module,
            )
    if schema_file is None:
        raise ConfigError(
            f"cannot validate Megatron arguments: {reason}, and no schema_file is set. "
            "Plan inside the training container (scripts/run_autoexp_container.py), set "
            "megatron_path to a Megatron-LM checkout, or dump a schema there with "
            "`python -m oellm_autoexp.backends.megatron dump-schema` and set schema_file",
            key=f"{key_prefix}.schema_file",
        )
    schema = _load_schema(schema_file, key_prefix)
    provenance = {
        "validated_by": "schema_file",
        "schema_file": str(Path(schema_file).resolve()),
        "schema_origin": schema.origin,
        "schema_sha256": _sha256(Path(schema_file)),
        "fallback_reason": reason,
        **schema.provenance,
    }
    return ArgumentSource(schema=schema, parser=None, provenance=provenance)


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_schema(schema_file: str, key_prefix: str) -> ArgSchema:
    try:
        return ArgSchema.load(Path(schema_file))
    except ConfigError as exc:
        raise ConfigError(exc.detail, key=f"{key_prefix}.schema_file", file=exc.file) from None


def clear_caches() -> None:
    """Forget loaded parsers and resolved sources (tests that change what is importable)."""
    from oellm_autoexp.backends.megatron.runtime import _microbatch_builder

    _load_parser.cache_clear()
    resolve_source.cache_clear()
    _microbatch_builder.cache_clear()
