"""Hostile-input corpus for recipe files (issue 18 §3, §4, §5).

Every case runs `aorta triage run --recipe FILE --dry-run` in-process and must give exit 2
and one line naming the file (and the key where there is one), quickly: no hang, no
traceback, no gigabytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from aorta.cli.main import main

pytestmark = pytest.mark.usefixtures("plugin")

HEAD = "schema_version: 1\nworkload: toy\n"
CELLS = "cells:\n  - {name: a, mitigations: [none], environment: local}\n"
GOOD = HEAD + "trials: 2\nsteps: 2\n" + CELLS

LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(c)}: &{chr(c)} [{', '.join(['*' + chr(c - 1)] * 9)}]\n"
    for c in range(ord("b"), ord("j"))
)

# (file name, content as bytes, text expected in the one line)
CORPUS: list[tuple[str, bytes, str]] = [
    ("laughs.yaml", (LAUGHS + GOOD).encode(), "aliases are expanded"),
    ("deep.yaml", (HEAD + "trials: " + "[" * 5000 + "]" * 5000 + "\n").encode(), "nested"),
    ("deep.json", ("[" * 100000 + "]" * 100000).encode(), "nested"),
    ("deep2.json", ('{"a":' * 70 + "1" + "}" * 70).encode(), "nested deeper than 64"),
    ("unhashable.yaml", (HEAD + "? [a, b]\n: 1\n").encode(), "not a list or mapping"),
    ("bigint.yaml", (HEAD + "trials: " + "9" * 5000 + "\n").encode(), "invalid value"),
    ("bigint.json", ('{"trials": ' + "9" * 5000 + "}").encode(), "invalid value"),
    ("inf.yaml", (GOOD + "confound: {threshold: .inf}\n").encode(), "threshold: expected a finite"),
    (
        "hugefloat.json",
        b'{"schema_version": 1, "workload": "toy", "trials": 1e999, "steps": 2, "cells": '
        b'[{"name": "a", "mitigations": ["none"], "environment": "local"}]}',
        "trials: expected a positive integer, got inf",
    ),
    ("surrogate.yaml", (HEAD + 'ticket: "\\ud800"\n').encode(), "ticket: string holds a lone"),
    ("surrogate.json", b'{"ticket": "\\ud800"}', "ticket: string holds a lone"),
    ("utf16.yaml", GOOD.encode("utf-16"), "expected UTF-8"),
    ("binary.yaml", bytes(range(256)), "expected UTF-8"),
    ("dup.json", b'{"trials": 1, "trials": 2}', "duplicate key 'trials'"),
    ("base60.yaml", (HEAD + "trials: 1:30\nsteps: 2\n" + CELLS).encode(), "base-60"),
    (
        "huge.yaml",
        (HEAD + "trials: " + str(10**21) + "\nsteps: 2\n" + CELLS).encode(),
        "trials: expected at most 10000 (raise it with AORTA_MAX_TRIALS)",
    ),
    (
        "steps.yaml",
        (HEAD + "trials: 1\nsteps: " + str(10**12) + "\n" + CELLS).encode(),
        "steps: expected at most",
    ),
    (
        "mitigation.yaml",
        (
            HEAD
            + "trials: 1\nsteps: 1\ncells:\n  - {name: a, environment: local, mitigations: ["
            + "x" * 300_000
            + "]}\n"
        ).encode(),
        "unknown mitigation 'xxx",
    ),
    (
        "ticket.yaml",
        (HEAD + "ticket: " + "/" * 300_000 + "\n" + GOOD[len(HEAD) :]).encode(),
        "ticket",
    ),
]


def _one_line(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert str(path) in line
    assert len(line) < 1000, line[:200]  # a 300 KB bad value is shortened
    return line


@pytest.mark.parametrize(("name", "content", "expected"), CORPUS, ids=[c[0] for c in CORPUS])
def test_hostile_recipe_is_one_line_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bounded: Callable[..., AbstractContextManager[None]],
    name: str,
    content: bytes,
    expected: str,
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with bounded(cpu_s=5):
        assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    assert expected in _one_line(capsys, path)


def test_the_corpus_baseline_recipe_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 0


def test_limit_can_be_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(HEAD + "trials: 20000\nsteps: 2\n" + CELLS)
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    capsys.readouterr()
    monkeypatch.setenv("AORTA_MAX_TRIALS", "20000")
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 0


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
def test_non_regular_recipe_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = tmp_path / "special.yaml"
    if kind == "fifo":
        os.mkfifo(path)  # reading it would block forever
    else:
        path.symlink_to("/dev/zero")  # reading it would never end
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    assert "not a regular file" in _one_line(capsys, path)


@pytest.mark.parametrize("value", ["inf", "nan", "1e999"])
def test_confound_threshold_inf_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    flags = ["--mode", "matrix", "--workload", "toy", "--mitigation-axis", "none"]
    flags += ["--environment-axis", "local", "--trials", "1", "--dry-run"]
    assert main(["triage", "run", *flags, "--confound-threshold", value]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert "confound-threshold" in line and "finite" in line


@pytest.mark.parametrize(
    ("extra_env", "expected"),
    [("AORTA_FSDP_LR: banana", "AORTA_FSDP_LR"), ("AORTA_FSDP_STEPS_X: '1'", "AORTA_FSDP_")],
)
def test_dry_run_checks_workload_parameters_like_the_real_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra_env: str, expected: str
) -> None:
    path = tmp_path / "fsdp.yaml"
    path.write_text(
        "schema_version: 1\nworkload: fsdp\ntrials: 1\nsteps: 1\ncells:\n"
        "  - {name: ok, mitigations: [none], environment: local}\n"
        f"  - {{name: bad, mitigations: [none], environment: local, extra_env: {{{extra_env}}}}}\n"
    )
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    line = _one_line(capsys, path)
    assert "cells[1] (bad)" in line and expected in line


def test_dry_run_output_redacts_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text(
        HEAD
        + "trials: 1\nsteps: 1\n"
        + CELLS.replace("local}", "local, extra_env: {HF_TOKEN: hunter2}}")
    )
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "HF_TOKEN=<redacted>" in out and "hunter2" not in out
