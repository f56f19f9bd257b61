#!/usr/bin/env python3
"""Plan inside the training container, submit with sbatch on the host, then monitor on the host.

    run_autoexp_container.py CONFIG [OVERRIDES ...] [--image IMAGE]
                             [--no-run | --no-monitor | --monitor-only]

Container choice: `--image` (with `--runtime`, else apptainer or singularity from PATH); without
it the config's `container.image` / `container.runtime`; with `container: null` (or no image)
everything runs on the host. See docs/oellm-autoexp.md, section "Containers".

Exit codes: 0 ok, 1 the run failed (plan step or sbatch), 2 usage or config error, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_INTERRUPTED = 130
EXIT_USAGE = 2

try:
    from oellm_autoexp.container import RunnerOptions, run_workflow
    from oellm_autoexp.errors import AutoexpError
except ImportError:
    # Run from a checkout without installing: use the package source next to this script,
    # and the shared foundations it imports (packages/toolkit-core).
    _PACKAGES = Path(__file__).resolve().parents[2]
    sys.path[:0] = [
        str(_PACKAGES / "oellm-autoexp" / "src"),
        str(_PACKAGES / "toolkit-core" / "src"),
    ]
    try:
        from oellm_autoexp.container import RunnerOptions, run_workflow
        from oellm_autoexp.errors import AutoexpError
    except ImportError as exc:
        print(
            f"run_autoexp_container.py: error: {exc}; install oellm-autoexp into this Python "
            f"({sys.executable}) or run the script with the Python that has it",
            file=sys.stderr,
        )
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The runner's command line."""
    cli = argparse.ArgumentParser(
        prog="run_autoexp_container.py",
        description="Plan inside the container (when configured), submit on the host, monitor.",
    )
    cli.add_argument("config", help="config YAML path or config name (as for oellm-autoexp plan)")
    cli.add_argument("overrides", nargs="*", help="Hydra-style overrides, e.g. sweep=lr_grid")
    cli.add_argument("--config-dir", type=Path, default=None, help="Hydra config tree for names")
    cli.add_argument("--image", default=None, help="container image (overrides container.image)")
    cli.add_argument("--runtime", choices=["apptainer", "singularity"], default=None)
    cli.add_argument(
        "--bind", action="append", default=[], metavar="SRC[:DST]", help="extra bind (repeatable)"
    )
    cli.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="env inside the container"
    )
    cli.add_argument(
        "--container-python", default="python3", help="python inside the image (default python3)"
    )
    mode = cli.add_mutually_exclusive_group()
    mode.add_argument("--no-run", action="store_true", help="plan and print sbatch commands only")
    mode.add_argument("--no-monitor", action="store_true", help="submit, then return")
    mode.add_argument("--monitor-only", action="store_true", help="only monitor submitted jobs")
    return cli


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the workflow, map errors to exit codes."""
    ns = build_parser().parse_args(argv)
    opts = RunnerOptions(
        config=ns.config,
        overrides=tuple(ns.overrides),
        config_dir=ns.config_dir,
        image=ns.image,
        runtime=ns.runtime,
        binds=tuple(ns.bind),
        env=tuple(ns.env),
        container_python=ns.container_python,
        no_run=ns.no_run,
        no_monitor=ns.no_monitor,
        monitor_only=ns.monitor_only,
    )
    try:
        return run_workflow(opts, say=print)
    except KeyboardInterrupt:
        print("run_autoexp_container.py: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except AutoexpError as exc:
        print(f"run_autoexp_container.py: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ImportError as exc:  # the host lacks a dependency of the step it reached
        print(
            f"run_autoexp_container.py: error: {exc} on this host; install oellm-autoexp here "
            "(planning-only runs need just --image and --no-run)",
            file=sys.stderr,
        )
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
