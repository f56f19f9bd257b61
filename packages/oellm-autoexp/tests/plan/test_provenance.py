"""provenance.json: what produced a plan (config, git state, versions, SLURM, host, time)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from oellm_autoexp import provenance
from oellm_autoexp.cli import main
from oellm_autoexp.provenance import (
    ConfigSource,
    backend_sources,
    collect_provenance,
    git_state,
    provenance_path,
    slurm_version,
    write_provenance,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "exp.yaml").write_text(
        yaml.safe_dump(
            {
                "project": {"name": "prov", "base_output_dir": str(tmp_path / "out")},
                "backend": {"class_name": "CommandBackend", "argv": ["train", "{lr}"]},
                "sweep": {"axes": {"lr": [0.1, 0.2]}},
                "slurm": {"use_srun": False, "test_only": "never"},
            }
        )
    )
    _git(repo, "add", "exp.yaml")
    _git(repo, "commit", "-q", "-m", "config")
    return repo


def test_git_state_records_commit_branch_dirty_files_and_the_diff(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    clean = git_state(repo)
    assert clean["commit"] == _git(repo, "rev-parse", "HEAD")
    assert clean["branch"] == "main" and clean["dirty"] is False and clean["diff"] == ""
    (repo / "exp.yaml").write_text((repo / "exp.yaml").read_text().replace("0.2", "0.5"))
    (repo / "notes.txt").write_text("untracked\n")
    dirty = git_state(repo / ".")
    assert dirty["dirty"] is True
    assert sorted(dirty["changed_files"]) == [" M exp.yaml", "?? notes.txt"]
    assert "-    - 0.2\n+    - 0.5" in dirty["diff"]
    assert dirty["diff_truncated"] is False
    assert git_state(tmp_path)["git"] is False  # not a work tree


def test_git_diff_runs_only_when_a_tracked_file_changed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    calls: list[list[str]] = []

    def recording(argv: Sequence[str], cwd: Path | None) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return provenance._run(argv, cwd)

    def diffs() -> int:
        return sum(1 for argv in calls if argv[:2] == ["git", "diff"])

    assert git_state(repo, run=recording)["diff"] == ""  # clean tree
    (repo / "notes.txt").write_text("untracked\n")
    untracked = git_state(repo, run=recording)
    assert untracked["changed_files"] == ["?? notes.txt"] and untracked["diff"] == ""
    assert _git(repo, "diff", "HEAD") == ""  # what the skipped call would have said
    assert diffs() == 0
    (repo / "staged.txt").write_text("staged line\n")
    _git(repo, "add", "staged.txt")
    staged = git_state(repo, run=recording)
    assert diffs() == 1 and "+staged line" in staged["diff"]


def test_a_huge_diff_is_cut_and_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(tmp_path)
    (repo / "exp.yaml").write_text("x: 1\n" * 500)
    monkeypatch.setattr(provenance, "MAX_DIFF_BYTES", 100)
    state = git_state(repo)
    assert state["diff_truncated"] is True and len(state["diff"].encode()) <= 100


def test_backend_source_is_the_megatron_checkout_when_set() -> None:
    assert backend_sources({"backend": {"megatron_path": "/src/Megatron-LM"}}) == {
        "backend.megatron_path": "/src/Megatron-LM"
    }
    assert backend_sources({"backend": {"class_name": "CommandBackend"}}) == {}


def test_slurm_version_reports_why_it_is_unknown() -> None:
    def failing(argv: Sequence[str], _cwd: Path | None) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 1, "", "sbatch: error: boom\n")

    assert slurm_version("definitely-not-a-command-xyz") == {
        "version": None,
        "error": "'definitely-not-a-command-xyz' is not on PATH",
    }
    assert slurm_version("true", run=failing) == {"version": None, "error": "sbatch: error: boom"}


def test_the_record_holds_config_as_given_and_resolved_and_a_backend_checkout(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    megatron = tmp_path / "megatron"
    megatron.mkdir()
    _git(megatron, "init", "-q")
    record = collect_provenance(
        ConfigSource(str(repo / "exp.yaml"), ("sweep.axes.lr=[0.3]",)),
        {"backend": {"megatron_path": str(megatron)}, "project": {"name": "p"}},
        plan_id="abc",
        submit_cmd="definitely-not-a-command-xyz",
        now=lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    assert record["created"] == "2026-01-02T03:04:05Z"
    assert record["config"]["overrides"] == ["sweep.axes.lr=[0.3]"]
    assert record["config"]["cwd"] == str(Path.cwd())
    assert record["config"]["text"] == (repo / "exp.yaml").read_text()
    assert record["resolved_config"]["project"] == {"name": "p"}
    assert record["git"]["config"]["commit"] == _git(repo, "rev-parse", "HEAD")
    unborn = record["git"]["backend.megatron_path"]
    assert unborn["git"] is True and unborn["commit"] is None  # no commit yet
    assert record["packages"]["oellm-autoexp"] == metadata.version("oellm-autoexp")
    assert record["slurm"]["version"] is None
    json.dumps(record, allow_nan=False)  # strict JSON


def test_plan_writes_provenance_next_to_plan_json_and_keeps_an_earlier_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    (repo / "exp.yaml").write_text((repo / "exp.yaml").read_text() + "# local edit\n")
    assert main(["plan", str(repo / "exp.yaml")]) == 0
    out = capsys.readouterr().out
    (plan_json,) = (tmp_path / "out").glob("plans/*/plan.json")
    record_path = plan_json.with_name("provenance.json")
    assert "provenance.json" in out
    record = json.loads(record_path.read_text())
    plan = json.loads(plan_json.read_text())
    assert record["plan_id"] == plan["plan_id"]
    assert record["config"]["ref"] == str(repo / "exp.yaml")
    assert record["git"]["config"]["dirty"] is True
    assert "+# local edit" in record["git"]["config"]["diff"]
    resolved = yaml.safe_load(plan_json.with_name("config.yaml").read_text())
    assert record["resolved_config"] == resolved
    # Without a cluster config even `sbatch --version` fails: the record says why. The real
    # version is checked against the test cluster in integration/test_real_accounting.py.
    slurm = record["slurm"]
    assert slurm["version"] is None and slurm["error"]
    # The same config again: same plan directory, the first record is kept.
    assert main(["plan", str(repo / "exp.yaml")]) == 0
    kept = sorted(plan_json.parent.glob("provenance-*.json"))
    assert len(kept) == 1
    assert json.loads(kept[0].read_text()) == record
    assert provenance_path(plan_json.parent) == record_path


def test_write_provenance_never_overwrites_within_the_same_second(tmp_path: Path) -> None:
    record = {"created": "2026-01-02T03:04:05Z", "n": 1}
    for n in range(3):
        write_provenance(tmp_path, {**record, "n": n})
    names = sorted(p.name for p in tmp_path.glob("provenance*.json"))
    assert names == [
        "provenance-20260102T030405Z-2.json",
        "provenance-20260102T030405Z.json",
        "provenance.json",
    ]
    assert json.loads((tmp_path / "provenance.json").read_text())["n"] == 2
    assert provenance_path(tmp_path / "missing") is None


def test_package_versions_agree_with_importlib_metadata() -> None:
    names = (*provenance.PACKAGES, "pytest", "PyYAML", "no-such-distribution-xyz")
    expected: dict[str, str | None] = {}
    for name in names:
        try:
            expected[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected[name] = None
    assert provenance.package_versions(names) == expected
    assert expected["oellm-autoexp"] and expected["no-such-distribution-xyz"] is None


def test_package_versions_read_dist_info_and_egg_info_in_path_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "Some_Pkg-2.0.dist-info").mkdir(parents=True)
    (first / "Some_Pkg-2.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: some-pkg\nVersion: 2.0\n\nVersion: not-a-header\n"
    )
    (second / "some_pkg-1.0.dist-info").mkdir(parents=True)
    (second / "some_pkg-1.0.dist-info" / "METADATA").write_text("Name: some-pkg\nVersion: 1.0\n")
    (second / "legacy.egg-info").write_text("Metadata-Version: 1.0\nName: legacy\nVersion: 0.3\n")
    monkeypatch.setattr("sys.path", [str(first), str(second)])
    found = provenance.package_versions(("some.pkg", "legacy", "absent"))
    assert found == {"some.pkg": "2.0", "legacy": "0.3", "absent": None}
    for name, version in found.items():  # what importlib.metadata says on the same path
        try:
            assert metadata.version(name) == version
        except metadata.PackageNotFoundError:
            assert version is None
