"""B3: built-ins, entry points from a really installed plugin, and error reporting."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from aorta.registry import (
    Environment,
    Mitigation,
    UnknownEnvironmentError,
    UnknownMitigationError,
    UnknownWorkloadError,
    get_environment,
    get_mitigation,
    get_workload,
    load_environments,
    load_mitigations,
    load_workloads,
)


def test_builtin_mitigations_use_variables_real_libraries_read() -> None:
    catalog = load_mitigations()
    assert dict(catalog["none"].env) == {}
    assert catalog["tf32_off"].env["NVIDIA_TF32_OVERRIDE"] == "0"
    assert catalog["tf32_off"].env["HIPBLASLT_ALLOW_TF32"] == "0"
    assert dict(catalog["xnack"].env) == {"HSA_XNACK": "1"}
    # Both are read when the runtime initialises, so they must ask for a fresh process.
    assert catalog["tf32_off"].process_scoped and catalog["xnack"].process_scoped
    assert not catalog["none"].process_scoped
    assert {catalog[n].source_package for n in ("none", "tf32_off", "xnack")} == {"aorta"}


def test_triton_mitigations_set_the_variables_the_installed_triton_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    knobs = pytest.importorskip("triton.knobs")
    catalog = load_mitigations()
    ieee, no_fusion = catalog["triton_fp32_ieee"], catalog["triton_no_fp_fusion"]
    assert ieee.process_scoped and no_fusion.process_scoped
    # Unset, Triton keeps its defaults: tf32 where supported, FMA fusion on.
    for key in (*ieee.env, *no_fusion.env):
        monkeypatch.delenv(key, raising=False)
    assert knobs.language.fp32_default is None
    assert knobs.language.fp_fusion_enabled(True) is True
    # Set to the mitigations' values, Triton's own knobs read them.
    for key, value in {**ieee.env, **no_fusion.env}.items():
        monkeypatch.setenv(key, value)
    assert knobs.language.fp32_default == "ieee"
    assert knobs.language.fp_fusion_enabled(True) is False
    # The switch Triton 3.6 and older have (no force knob there): kernels that do not ask.
    assert knobs.language.default_fp_fusion is False


def test_builtin_local_environment() -> None:
    local = get_environment("local")
    assert local.kind == "local"
    assert local.source_package == "aorta"


def test_in_tree_workload_and_its_mitigations_come_through_entry_points() -> None:
    fsdp = get_workload("fsdp")
    assert fsdp.source_package == "aorta"
    assert fsdp.validate is not None
    mitigations = load_mitigations()
    assert mitigations["fsdp_grad_clip"].env == {"AORTA_FSDP_GRAD_CLIP": "1.0"}
    assert mitigations["fsdp_amp_bf16"].source_package == "aorta"


def test_unknown_names_list_known_names_and_suggest_a_close_match() -> None:
    with pytest.raises(UnknownMitigationError) as info:
        get_mitigation("tf32-off")
    message = str(info.value)
    assert "'tf32-off'" in message
    assert "did you mean 'tf32_off'?" in message
    assert "none" in message and "xnack" in message
    assert info.value.suggestion == "tf32_off"

    with pytest.raises(UnknownEnvironmentError, match="did you mean 'local'"):
        get_environment("lokal")
    with pytest.raises(UnknownWorkloadError, match=r"known: .*fsdp"):
        get_workload("zzz")


def test_unknown_name_without_close_match_has_no_suggestion() -> None:
    with pytest.raises(UnknownMitigationError) as info:
        get_mitigation("qqqqqqqq")
    assert info.value.suggestion is None
    assert "did you mean" not in str(info.value)


def test_plugin_entries_are_merged_with_source_package(plugin: Path) -> None:
    mitigations = load_mitigations()
    assert mitigations["plugin_fix"].env == {"AORTA_TOY_FIX": "1"}
    assert mitigations["plugin_fix"].source_package == "aorta-test-plugin"
    # A factory callable is called to produce the entry.
    assert mitigations["plugin_factory"].env == {"AORTA_TOY_FACTORY": "1"}
    assert mitigations["plugin_process"].process_scoped
    envs = load_environments()
    assert envs["plugin_docker"].kind == "docker"
    assert envs["plugin_docker"].image == "busybox:latest"
    assert envs["plugin_docker"].source_package == "aorta-test-plugin"
    workloads = load_workloads()
    assert set(workloads) >= {"fsdp", "toy", "crash"}
    assert get_workload("toy").source_package == "aorta-test-plugin"


def test_broken_plugin_entries_are_reported_by_name_and_skipped(plugin: Path) -> None:
    catalog = load_mitigations()
    broken = {entry.name: entry for entry in catalog.broken}
    assert set(broken) == {"plugin_broken", "plugin_wrong_type", "plugin_misnamed", "none"}
    assert "ModuleNotFoundError" in broken["plugin_broken"].reason
    assert "expected a Mitigation, got dict" in broken["plugin_wrong_type"].reason
    assert "provides 'plugin_fix'" in broken["plugin_misnamed"].reason
    assert "already registered by aorta" in broken["none"].reason
    assert all(entry.source_package == "aorta-test-plugin" for entry in catalog.broken)
    line = broken["plugin_broken"].describe()
    assert "plugin_broken" in line and "aorta-test-plugin" in line
    # The clash did not replace the built-in, and the good entries still loaded.
    assert catalog["none"].source_package == "aorta"
    assert dict(catalog["none"].env) == {}
    assert "plugin_fix" in catalog and "plugin_broken" not in catalog


def test_plugin_not_installed_means_not_listed() -> None:
    assert "plugin_fix" not in load_mitigations()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "bad/name", "env": {}}, "invalid registry name"),
        ({"name": "..", "env": {}}, "invalid registry name"),
        ({"name": "ok", "env": {"1BAD": "x"}}, "invalid environment variable name"),
        ({"name": "ok", "env": {"GOOD": 1}}, "value must be a string"),
    ],
)
def test_mitigation_rejects_bad_fields(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Mitigation(description="d", **kwargs)  # type: ignore[arg-type]


def test_mitigation_env_is_read_only() -> None:
    mitigation = Mitigation(name="m", env={"A": "1"}, description="d")
    with pytest.raises(TypeError):
        mitigation.env["A"] = "2"  # type: ignore[index]


def test_environment_kinds_require_their_fields() -> None:
    with pytest.raises(ValueError, match="needs an image"):
        Environment(name="d", kind="docker", description="x")
    with pytest.raises(ValueError, match="needs a python"):
        Environment(name="v", kind="venv", description="x")
    with pytest.raises(ValueError, match="unknown kind"):
        Environment(name="k", kind="k8s", description="x")  # type: ignore[arg-type]
    image = Environment(name="nightly", kind="docker", image="rocm/pytorch:nightly", description="")
    assert image.image == "rocm/pytorch:nightly"


def _fake_distribution(site: Path, dist: str, mitigation: str) -> None:
    """A minimal installed distribution declaring one `aorta.mitigations` entry point."""
    module = f"{dist}_mod"
    (site / f"{module}.py").write_text(
        "from aorta.registry.models import Mitigation\n"
        f"M = Mitigation(name={mitigation!r}, env={{'X_{dist.upper()}': '1'}}, description='d')\n"
    )
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[aorta.mitigations]\n{mitigation} = {module}:M\n")


def test_the_entry_point_scan_is_reused_and_sees_plugins_installed_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    scans: list[int] = []
    real = importlib.metadata.entry_points

    def counting() -> object:
        scans.append(1)
        return real()

    # The loader imports entry_points when it scans (not at import: --help stays cheap).
    monkeypatch.setattr(importlib.metadata, "entry_points", counting)
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_distribution(tmp_path, "fakeone", "fake_one")
    assert "fake_one" in load_mitigations()
    load_environments()
    load_workloads()
    load_mitigations()
    assert len(scans) == 1  # one scan of the installed distributions for all catalogs
    _fake_distribution(tmp_path, "faketwo", "fake_two")  # installed into the same folder
    os.utime(tmp_path, ns=(time.time_ns(), time.time_ns() + 10**9))  # coarse-mtime filesystems
    assert {"fake_one", "fake_two"} <= set(load_mitigations())
    assert len(scans) == 2
