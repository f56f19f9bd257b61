"""The `.pth` start-up hook: free when both variables are unset, active when one is set."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import timeit
from pathlib import Path

from triton_invariance.startup import PTH_LINE

SRC_PTH = Path(__file__).parents[1] / "src" / "triton_invariance_startup.pth"

_PROBE = """
import json, sys
before = sorted(m for m in sys.modules if m.startswith(("triton", "triton_invariance")))
import triton
from triton_invariance import hooks
print(json.dumps({"before_triton_import": before, "installed": hooks.is_installed()}))
"""


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_INVARIANCE_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "TRITON_DEFAULT_FP_FUSION": "1", **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_shipped_pth_is_the_documented_line_and_is_installed() -> None:
    assert SRC_PTH.read_text().strip() == PTH_LINE
    installed = [Path(d) / SRC_PTH.name for d in site.getsitepackages()]
    assert any(p.exists() and p.read_text().strip() == PTH_LINE for p in installed)


def test_unset_vars_import_nothing_and_install_nothing() -> None:
    done = _python(_PROBE)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == {"before_triton_import": [], "installed": False}


def test_set_var_installs_hooks_at_triton_import_without_importing_triton_early() -> None:
    done = _python(_PROBE, TRITON_INVARIANCE_COMPARE="1")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # Start-up loaded only the small activation module, not Triton and not the hooks.
    assert "triton" not in result["before_triton_import"]
    assert "triton_invariance.hooks" not in result["before_triton_import"]
    assert "triton_invariance.startup" in result["before_triton_import"]
    assert result["installed"] is True


def test_hooks_are_the_ones_triton_calls() -> None:
    code = (
        "import triton\nfrom triton.runtime.autotuner import Autotuner\n"
        "from triton_invariance import hooks\n"
        "assert triton.knobs.compilation.listener is hooks._on_compiled\n"
        "assert getattr(Autotuner.run, '__triton_invariance_wrapper__', False)\nprint('ok')"
    )
    done = _python(code, TRITON_INVARIANCE_COMMIT="1")
    assert done.stdout.strip() == "ok", done.stderr


def test_both_vars_set_fail_the_triton_import_with_one_clear_error() -> None:
    done = _python("import triton", TRITON_INVARIANCE_COMMIT="1", TRITON_INVARIANCE_COMPARE="1")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("triton_invariance.errors.InvarianceConfigError:")
    assert "both set" in last


def test_pth_line_costs_well_under_a_millisecond_when_unset() -> None:
    env_backup = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("TRITON_INV")}
    try:
        code = compile(PTH_LINE, "triton_invariance_startup.pth", "exec")
        runs = 2000
        per_run = min(timeit.repeat(lambda: exec(code, {}), number=runs, repeat=5)) / runs
    finally:
        os.environ.update(env_backup)
    assert per_run < 1e-3 / 10, f"{per_run * 1e6:.1f} us per start-up"
