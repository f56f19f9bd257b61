"""Hostile baseline files (issue 18): every one is a one-line error naming the file, exit 2."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_data import sample_inv

from triton_invariance.cli import main
from triton_invariance.data import FORMAT_VERSION
from triton_invariance.errors import BaselineError
from triton_invariance.storage import Baseline, commit_invariance, read_baseline_file

SIG = "0123456789abcdef"
_VERSION = f'"format_version": {FORMAT_VERSION}'


def _valid(tmp_path: Path) -> dict[str, Any]:
    commit_invariance("my_kernel", SIG, sample_inv(), config_hash="c", base=tmp_path / "ok")
    doc: dict[str, Any] = json.loads((tmp_path / "ok" / f"my_kernel_{SIG}.json").read_text())
    return doc


def _replace_first(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


# name -> (edit of the valid file's text, what the one line must say)
CORPUS = {
    "huge_integer_version": (
        lambda t: _replace_first(t, _VERSION, '"format_version": ' + "9" * 5000),
        "not a usable JSON document",
    ),
    "huge_integer_warps": (
        lambda t: _replace_first(t, '"num_warps": 4', '"num_warps": ' + "4" * 5000),
        "not a usable JSON document",
    ),
    "deep_nesting": (lambda t: "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "deep_nesting_inside": (
        lambda t: _replace_first(t, '"config": {}', '"config": ' + "[" * 50_000 + "]" * 50_000),
        "nested too deeply",
    ),
    "version_true": (
        lambda t: _replace_first(t, _VERSION, '"format_version": true'),
        "format_version: expected an integer, got bool",
    ),
    "version_float": (
        lambda t: _replace_first(t, _VERSION, f'"format_version": {FORMAT_VERSION}.0'),
        "format_version: expected an integer, got float",
    ),
    "version_huge_float": (
        lambda t: _replace_first(t, _VERSION, '"format_version": 1e999'),
        "format_version: expected an integer, got float",
    ),
    "warps_true": (
        lambda t: _replace_first(t, '"num_warps": 4', '"num_warps": true'),
        "invariance.hw_config.num_warps: expected int, got bool",
    ),
    "lone_surrogate_name": (
        lambda t: t.replace('"my_kernel"', '"my_\\ud800kernel"'),
        "kernel_name: expected",
    ),
    "not_utf8": (lambda t: "\udcff", "cannot read"),
    "array_document": (lambda t: "[]", "expected a JSON object, got list"),
}


@pytest.mark.parametrize("case", sorted(CORPUS))
@pytest.mark.parametrize("command", ["show", "list"])
def test_hostile_baseline_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, command: str
) -> None:
    edit, message = CORPUS[case]
    text = json.dumps(_valid(tmp_path), indent=2)
    bad = tmp_path / "bad" / f"my_kernel_{SIG}.json"
    bad.parent.mkdir()
    if case == "not_utf8":
        bad.write_bytes(b"\xff\xfe{")
    else:
        bad.write_text(edit(text), encoding="utf-8", errors="surrogatepass")
    argv = ["show", str(bad)] if command == "show" else ["list", "--dir", str(bad.parent)]
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == (1 if command == "show" else 2), err
    assert len(lines[0]) < 500 and str(bad) in lines[0] and message in lines[0], lines[0]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_baselines_are_a_baseline_error_or_valid(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    # Start from a valid file and damage it: replace one value anywhere in the document by
    # random JSON, or splice random characters into the text.
    doc = Baseline("my_kernel", SIG, "c", sample_inv()).to_dict()
    path = tmp_path_factory.mktemp("fuzz") / f"my_kernel_{SIG}.json"
    if data.draw(st.booleans()):
        target: Any = doc
        keys = data.draw(st.lists(st.integers(0, 30), min_size=1, max_size=4))
        for k in keys[:-1]:
            children = [v for _, v in sorted(target.items()) if isinstance(v, dict) and v]
            if not children:
                break
            target = children[k % len(children)]
        victim = sorted(target)[keys[-1] % len(target)]
        target[victim] = data.draw(_JSON)
        path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    else:
        text = json.dumps(doc, indent=2)
        at = data.draw(st.integers(0, len(text)))
        path.write_text(text[:at] + data.draw(st.text(max_size=8)) + text[at:], errors="replace")
    try:
        read_baseline_file(path)
    except BaselineError as exc:
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)


@pytest.mark.parametrize("field", ["kernel_name", "signature_hash"])
def test_a_trailing_newline_in_a_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    doc = _valid(tmp_path)
    doc[field] += "\n"
    bad = tmp_path / f"my_kernel_{SIG}.json"
    bad.write_text(json.dumps(doc))
    assert main(["show", str(bad)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{field}: expected" in line and str(bad) in line


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link", "directory"])
@pytest.mark.parametrize("command", ["show", "check"])
def test_a_non_regular_baseline_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, command: str
) -> None:
    """A FIFO would block `show`/`check` forever; a link to /dev/zero would read gigabytes."""
    current = tmp_path / "current"
    commit_invariance("my_kernel", SIG, sample_inv(), config_hash="c", base=current)
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    planted = baselines / f"my_kernel_{SIG}.json"
    if kind == "fifo":
        os.mkfifo(planted)
    elif kind == "dev-zero-link":
        planted.symlink_to("/dev/zero")
    else:
        planted.mkdir()
    argv = ["show", str(planted)] if command == "show" else ["check", str(current)]
    started = time.monotonic()
    code = main([*argv, "--dir", str(baselines)] if command == "check" else argv)
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = err.splitlines()
    assert str(planted) in line and "not a regular file" in line, line
