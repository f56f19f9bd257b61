"""Phase 4: baseline files -- format, atomic locked commits, clear errors on bad baselines."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import stat
from pathlib import Path

import pytest
from sample_data import sample_inv

from triton_invariance.compare import compare_and_report
from triton_invariance.data import FORMAT_VERSION
from triton_invariance.errors import (
    BaselineError,
    BaselineNotFoundError,
    BaselineVersionError,
    CorruptBaselineError,
    InvarianceConfigError,
    InvarianceUsageError,
    NumericalInvarianceMismatchError,
)
from triton_invariance.storage import (
    BASELINE_DIR_ENV,
    DEFAULT_BASELINE_DIR,
    LOCK_NAME,
    baseline_path,
    commit_invariance,
    get_baselines_dir,
    load_baseline,
    read_baseline_file,
)

SIG = "0123456789abcdef"


def test_commit_creates_file_in_the_spec_format(tmp_path: Path) -> None:
    inv = sample_inv()
    outcome = commit_invariance(
        "my_kernel", SIG, inv, config_hash="cfg0", config={"BLOCK": 128}, base=tmp_path
    )
    assert outcome == "created"
    doc = json.loads((tmp_path / f"my_kernel_{SIG}.json").read_text())
    assert doc["format_version"] == FORMAT_VERSION
    assert doc["kernel_name"] == "my_kernel"
    assert doc["signature_hash"] == SIG
    assert doc["config"] == {"BLOCK": 128}
    spec_keys = {
        "fingerprint",
        "computation_dag_hash",
        "dtype_signature",
        "layout_hash",
        "hw_config_hash",
        "config_hash",
    }
    assert spec_keys <= doc["invariance"].keys()
    assert doc["invariance"]["fingerprint"] == inv.fingerprint
    assert doc["invariance"]["config_hash"] == "cfg0"
    assert not list(tmp_path.glob("*.tmp"))  # no temp file left behind


def test_load_baseline_round_trips(tmp_path: Path) -> None:
    inv = sample_inv()
    spec = {"EVEN": True, "n.attrs": "tt.divisibility=16"}
    commit_invariance("my_kernel", SIG, inv, config_hash="cfg0", specialization=spec, base=tmp_path)
    loaded = load_baseline("my_kernel", SIG, base=tmp_path)
    assert loaded is not None
    assert loaded.invariance == inv
    assert loaded.config_hash == "cfg0"
    assert loaded.specialization == spec


def test_load_baseline_missing_returns_none(tmp_path: Path) -> None:
    assert load_baseline("nonexistent", SIG, base=tmp_path) is None


def test_recommit_reports_unchanged_then_updated(tmp_path: Path) -> None:
    path = tmp_path / f"my_kernel_{SIG}.json"
    assert commit_invariance("my_kernel", SIG, sample_inv(), config_hash="c", base=tmp_path) == (
        "created"
    )
    before = path.stat().st_mtime_ns
    same = commit_invariance("my_kernel", SIG, sample_inv(), config_hash="c", base=tmp_path)
    assert same == "unchanged"
    assert path.stat().st_mtime_ns == before  # untouched
    new = sample_inv("arith.subf")
    assert commit_invariance("my_kernel", SIG, new, config_hash="c", base=tmp_path) == "updated"
    loaded = load_baseline("my_kernel", SIG, base=tmp_path)
    assert loaded is not None and loaded.invariance == new


def test_compare_and_report_match_returns_true(tmp_path: Path) -> None:
    commit_invariance("kernel", SIG, sample_inv(kernel="kernel"), config_hash="c", base=tmp_path)
    assert compare_and_report("kernel", SIG, sample_inv(kernel="kernel"), base=tmp_path) is True


def test_compare_and_report_mismatch_raises_with_the_diff(tmp_path: Path) -> None:
    commit_invariance("kernel", SIG, sample_inv(kernel="kernel"), config_hash="c", base=tmp_path)
    with pytest.raises(NumericalInvarianceMismatchError) as info:
        compare_and_report("kernel", SIG, sample_inv("arith.subf", kernel="kernel"), base=tmp_path)
    err = info.value
    assert "computation_dag_hash" in err.report
    assert "arith.addf" in err.report and "arith.subf" in err.report
    assert str(err.path) in str(err)
    assert err.baseline.fingerprint != err.current.fingerprint


def test_compare_notes_when_only_the_autotuner_winner_changed(tmp_path: Path) -> None:
    baseline = sample_inv(kernel="kernel", num_warps=4)
    commit_invariance(
        "kernel", SIG, baseline, config_hash="cfgA", config={"num_warps": 4}, base=tmp_path
    )
    other_winner = sample_inv(kernel="kernel", num_warps=8)
    with pytest.raises(NumericalInvarianceMismatchError) as info:
        compare_and_report(
            "kernel",
            SIG,
            other_winner,
            config_hash="cfgB",
            alternatives={"cfgA": baseline, "cfgB": other_winner},
            base=tmp_path,
        )
    assert "hw_config_hash" in info.value.report
    assert "picked config cfgB" in info.value.report
    assert "only the winner changed" in info.value.report


def test_a_changed_winner_and_changed_code_are_told_apart_by_the_baselines_config(
    tmp_path: Path,
) -> None:
    # Seen on a real H200: the changed program's autotuner also picked the other config, and the
    # diff of winner against baseline began at the block-size constant, not at the subf.
    baseline = sample_inv(kernel="kernel", num_warps=4)
    commit_invariance(
        "kernel", SIG, baseline, config_hash="cfgA", config={"num_warps": 4}, base=tmp_path
    )
    same_config_now = sample_inv("arith.subf", kernel="kernel", num_warps=4)
    other_winner = sample_inv("arith.subf", kernel="kernel", num_warps=8)
    with pytest.raises(NumericalInvarianceMismatchError) as info:
        compare_and_report(
            "kernel",
            SIG,
            other_winner,
            config_hash="cfgB",
            alternatives={"cfgA": same_config_now, "cfgB": other_winner},
            base=tmp_path,
        )
    report = info.value.report
    assert "only the winner changed" not in report
    assert "the kernel code changed, not only the winner" in report
    same_config_part = report.split("Same config, before -> now:")[1]
    assert "arith.subf" in same_config_part and "hw_config_hash" not in same_config_part


def test_compare_without_baseline_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BaselineNotFoundError, match="TRITON_INVARIANCE_COMMIT=1"):
        compare_and_report("kernel", SIG, sample_inv(kernel="kernel"), base=tmp_path)


def _committed(tmp_path: Path) -> Path:
    commit_invariance("my_kernel", SIG, sample_inv(), config_hash="c", base=tmp_path)
    return tmp_path / f"my_kernel_{SIG}.json"


def test_corrupt_json_names_the_file_and_position(tmp_path: Path) -> None:
    path = _committed(tmp_path)
    path.write_text(path.read_text()[:40])
    with pytest.raises(CorruptBaselineError) as info:
        load_baseline("my_kernel", SIG, base=tmp_path)
    assert str(path) in str(info.value) and "not valid JSON" in str(info.value)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("kernel_name"), "kernel_name: expected a string, missing"),
        (lambda d: d["invariance"].pop("config_hash"), "invariance.config_hash"),
        (lambda d: d["invariance"].update(layout_hash="0" * 32), "invariance.layout_hash"),
        (lambda d: d["invariance"]["ops"].append(3), "invariance.ops"),
        (lambda d: d.update(config=[1]), "config: expected an object"),
        (lambda d: d.update(specialization=3), "specialization: expected an object"),
        (lambda d: d.pop("format_version"), "format_version: missing"),
    ],
)
def test_bad_keys_are_rejected_with_the_key_path(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    path = _committed(tmp_path)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(CorruptBaselineError, match=message.replace("[", r"\[")):
        read_baseline_file(path)


def test_wrong_format_version_is_its_own_error(tmp_path: Path) -> None:
    path = _committed(tmp_path)
    doc = json.loads(path.read_text())
    doc["format_version"] = FORMAT_VERSION + 1
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineVersionError, match="re-commit"):
        load_baseline("my_kernel", SIG, base=tmp_path)


def test_file_holding_another_kernel_is_rejected(tmp_path: Path) -> None:
    path = _committed(tmp_path)
    path.rename(tmp_path / f"other_{SIG}.json")
    with pytest.raises(CorruptBaselineError, match="not the 'other'"):
        load_baseline("other", SIG, base=tmp_path)


def test_missing_file_read_directly(tmp_path: Path) -> None:
    with pytest.raises(BaselineNotFoundError):
        read_baseline_file(tmp_path / "nope.json")


def test_unsafe_names_cannot_escape_the_directory(tmp_path: Path) -> None:
    with pytest.raises(InvarianceConfigError):
        baseline_path("../evil", SIG, tmp_path)
    with pytest.raises(InvarianceConfigError):
        baseline_path("kernel", "../../x", tmp_path)


def test_base_dir_argument_beats_env_beats_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(BASELINE_DIR_ENV, raising=False)
    assert get_baselines_dir() == DEFAULT_BASELINE_DIR
    assert DEFAULT_BASELINE_DIR.parts == ("baselines", "numerical_invariance")
    monkeypatch.setenv(BASELINE_DIR_ENV, str(tmp_path / "env"))
    assert get_baselines_dir() == tmp_path / "env"
    assert get_baselines_dir(tmp_path / "arg") == tmp_path / "arg"
    commit_invariance("my_kernel", SIG, sample_inv(), config_hash="c")
    assert (tmp_path / "env" / f"my_kernel_{SIG}.json").exists()


def _commit_many(base: str, index: int, rounds: int) -> None:
    inv = sample_inv(f"arith.op{index}")
    for _ in range(rounds):
        commit_invariance(
            "my_kernel", SIG, inv, config_hash=f"cfg{index}", config={"i": index}, base=base
        )


def test_four_processes_committing_concurrently_leave_one_valid_file(tmp_path: Path) -> None:
    """Each process commits its own fingerprint 25 times; the file always ends up being exactly
    one process's complete document, and no temp file is left behind."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_commit_many, args=(str(tmp_path), i, 25)) for i in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    path = tmp_path / f"my_kernel_{SIG}.json"
    baseline = read_baseline_file(path)  # valid JSON, every hash re-derived and checked
    winner = baseline.config["i"]
    assert baseline.config_hash == f"cfg{winner}"
    assert baseline.invariance == sample_inv(f"arith.op{winner}")
    # No temp file left behind (the lock file stays: removing it would race with waiters).
    assert [p.name for p in tmp_path.iterdir() if p.name != LOCK_NAME] == [path.name]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640)])
def test_baselines_honour_the_umask_on_create_and_update(
    tmp_path: Path, umask: int, mode: int
) -> None:
    old = os.umask(umask)
    try:
        commit_invariance("my_kernel", SIG, sample_inv(), config_hash="c", base=tmp_path)
        path = tmp_path / f"my_kernel_{SIG}.json"
        assert stat.S_IMODE(path.stat().st_mode) == mode
        outcome = commit_invariance(
            "my_kernel", SIG, sample_inv("arith.mulf"), config_hash="c", base=tmp_path
        )
        assert outcome == "updated"
        assert stat.S_IMODE(path.stat().st_mode) == mode
    finally:
        os.umask(old)


def test_commit_into_a_read_only_directory_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "ro"
    base.mkdir()
    base.chmod(0o555)
    if os.geteuid() == 0:  # root ignores the mode bits: refuse the lock file the way the OS would
        import triton_invariance.storage as storage

        def refuse(path: Path, **kwargs: object) -> None:
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr(storage, "hold_lock", refuse)
    try:
        with pytest.raises(BaselineError) as info:
            commit_invariance("my_kernel", SIG, sample_inv(), config_hash="c", base=base)
    finally:
        base.chmod(0o755)
    message = str(info.value)
    assert message == f"{base}: cannot write baselines here (Permission denied)"
    assert isinstance(info.value, InvarianceUsageError)


def test_baseline_without_compile_options_is_read_with_a_note(tmp_path: Path) -> None:
    old = sample_inv()  # recorded from TTGIR alone, as every baseline before the component
    commit_invariance("my_kernel", SIG, old, config_hash="c", base=tmp_path)
    doc = json.loads((tmp_path / f"my_kernel_{SIG}.json").read_text())
    assert "compile_options" not in doc["invariance"]
    current = dataclasses.replace(old, compile_options=(("enable_fp_fusion", "false"),))
    notes: list[str] = []
    assert compare_and_report("my_kernel", SIG, current, base=tmp_path, notes=notes)
    assert notes == old.comparison_notes(current)
    assert "baseline records no compile options" in notes[0] and "re-commit" in notes[0]
    # Once recorded, a change of the component is a mismatch.
    commit_invariance("my_kernel", SIG, current, config_hash="c", base=tmp_path)
    fused = dataclasses.replace(old, compile_options=(("enable_fp_fusion", "true"),))
    with pytest.raises(NumericalInvarianceMismatchError, match="changed: compile_options_hash"):
        compare_and_report("my_kernel", SIG, fused, base=tmp_path)


def test_format_1_baseline_asks_for_a_recommit_and_says_why(tmp_path: Path) -> None:
    path = _committed(tmp_path)
    doc = json.loads(path.read_text())
    doc["format_version"] = 1
    doc["invariance"]["version"] = 1
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineVersionError) as info:
        load_baseline("my_kernel", SIG, base=tmp_path)
    message = str(info.value)
    assert message.startswith(f"{path}: format_version 1 is not supported")
    assert "hashes the data-flow graph" in message and "re-commit" in message
