"""The library's layering (issue 16 §5): no library module reaches up into the CLI or planner."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "oellm_autoexp"


def _imports(path: Path) -> set[str]:
    """Every module `path` imports (at any level, including function-local imports)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_only_the_cli_package_imports_the_cli() -> None:
    offenders = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "cli" not in path.relative_to(SRC).parts[:1]
        and any(
            m == "oellm_autoexp.cli" or m.startswith("oellm_autoexp.cli.") for m in _imports(path)
        )
    ]
    assert offenders == []


def test_the_monitor_never_imports_the_planner() -> None:
    offenders = [
        str(path.relative_to(SRC))
        for path in (SRC / "monitor").rglob("*.py")
        if any(m.startswith("oellm_autoexp.planning") for m in _imports(path))
    ]
    assert offenders == []


def test_monitor_submodules_import_without_the_controller() -> None:
    code = (
        "import sys, oellm_autoexp.monitor.settings, oellm_autoexp.monitor.policies; "
        "print('oellm_autoexp.monitor.controller' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_documented_api_example_runs(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parents[4] / "docs" / "oellm-autoexp.md"
    text = docs.read_text(encoding="utf-8")
    section = text[text.index("## Python API") :]
    example = section[
        section.index("```python\n") + 10 : section.index("\n```", section.index("```python"))
    ]
    example = example.replace("/tmp/autoexp-api-demo", str(tmp_path / "demo"))
    done = subprocess.run(
        [sys.executable, "-c", example],
        capture_output=True,
        text=True,
        check=False,
        cwd=docs.parents[1],
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if " completed " in line]
    assert len(rows) == 4 and all(row[2].startswith("1000_") for row in rows), done.stdout
