"""A config dry run loads only what it uses (issue 26: the dry run's 0.25 s budget)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml"
# Each was imported by every dry run before; none is needed for this config.
UNUSED = (
    "jinja2",  # the built-in template is written without it (slurm.default_script)
    "re2",  # no log signal of its own: the pre-registered ones are compiled at the first scan
    "importlib.metadata",  # package versions read from the dist-info directories
    "difflib",  # only for "did you mean" hints
    "socket",
    "getpass",
    "oellm_autoexp.api",
    "oellm_autoexp.backends.megatron",
    "oellm_autoexp.persistence",
    "oellm_autoexp.monitor.policies",
    "oellm_autoexp.monitor.triage_launch",
    # Not imported at all (issue 26, fourth pass): the other commands, the Hydra-tree file
    # selection, the monitor's Action type.
    "oellm_autoexp.cli.monitor",
    "oellm_autoexp.cli.migrate",
    "oellm_autoexp.config.selection",
    "oellm_autoexp.reporting",
    "hashlib",  # its OpenSSL library: ids are hashed with `_blake2` (sweep.ids.hex_digest)
)


def test_a_dry_run_of_the_hello_sweep_imports_none_of_the_unused_modules(tmp_path: Path) -> None:
    code = (
        "import contextlib, io, json, sys\n"
        "from oellm_autoexp.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    code = main(['submit', {str(HELLO)!r}, '--dry-run', '--test-only', 'never'])\n"
        f"print(json.dumps([code, 'AUTOEXP_CMD=(' in out.getvalue(), "
        f"sorted(m for m in {UNUSED!r} if m in sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [0, True, []]
    (provenance,) = tmp_path.glob("autoexp_runs/hello/plans/*/provenance.json")
    record = json.loads(provenance.read_text())
    assert record["packages"]["oellm-autoexp"] and record["host"] and record["user"]


def test_the_console_script_freezes_the_heap_before_exit_and_main_does_not() -> None:
    code = (
        "import contextlib, gc, io, sys\n"
        "from oellm_autoexp.cli import console_main, main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    first = main(['--help'])\n"
        "    frozen_by_main = gc.get_freeze_count()\n"
        "    sys.argv = ['oellm-autoexp', '--help']\n"
        "    second = console_main()\n"
        "print(first, second, frozen_by_main, gc.get_freeze_count() > 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "0", "0", "True"]
