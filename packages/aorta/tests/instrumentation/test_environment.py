"""`collect_env`: real values on this machine, redaction, fail-soft sections, scopes, JSON."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from aorta.instrumentation import EnvSnapshot, collect_env, environment, rocm, system, torch_probe
from aorta.instrumentation.gpus import parse_nvidia_smi, parse_rocm_smi
from aorta.instrumentation.redaction import (
    REDACTED,
    SENSITIVE_NAME_PARTS,
    redact_environ,
    redact_url_credentials,
)

GIB = 1024**3


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _roundtrip(snapshot: EnvSnapshot) -> EnvSnapshot:
    text = json.dumps(snapshot.to_dict(), allow_nan=False)
    return EnvSnapshot.from_dict(json.loads(text))


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An otherwise empty PATH, so that no real nvidia-smi / rocm-smi takes part."""
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", str(directory))
    return directory


def _fake_tool(bin_dir: Path, name: str, body: str) -> Path:
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nimport sys, time\n{textwrap.dedent(body)}\n")
    path.chmod(0o755)
    return path


# --- real probe on this machine ----------------------------------------------------------


def test_host_probe_reports_this_machine() -> None:
    snap = collect_env()

    assert snap.schema_version == 1
    assert snap.scope == "host"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", snap.collected_at)
    assert snap.duration_ms > 0
    assert snap.pid == os.getpid()
    assert snap.hostname == socket.gethostname()

    assert snap.python is not None
    assert snap.python.version == "{}.{}.{}".format(*sys.version_info[:3])
    assert snap.python.implementation == platform.python_implementation()
    assert snap.python.executable == sys.executable

    assert snap.platform is not None
    assert snap.platform.system == platform.system()
    assert snap.platform.machine == platform.machine()

    assert snap.cpu is not None
    assert snap.cpu.logical_count == os.cpu_count()
    if hasattr(os, "sched_getaffinity"):
        assert snap.cpu.affinity_count == len(os.sched_getaffinity(0))

    assert snap.memory is not None
    assert snap.memory.total_bytes > 0
    assert snap.memory.available_bytes is None or (
        0 < snap.memory.available_bytes <= snap.memory.total_bytes
    )

    assert snap.distributions is not None
    assert snap.distributions["aorta"] == importlib.metadata.version("aorta")
    assert snap.distributions.get("pytest") == importlib.metadata.version("pytest")
    torch_version = _installed("torch")
    if torch_version is not None:
        assert snap.distributions["torch"] == torch_version
        assert snap.torch is not None
        assert snap.torch.version == torch_version
    else:
        assert snap.torch is None

    # The probe may be partial on a host with a broken GPU tool, but never in these sections.
    assert snap.partial == bool(snap.partial_reasons)
    core = ("python", "platform", "cpu", "memory", "distributions", "torch", "env_vars")
    assert not [r for r in snap.partial_reasons if r.startswith(core)]


def test_torch_build_is_read_without_importing_torch() -> None:
    pytest.importorskip("torch")
    code = (
        "import json, sys\n"
        "from aorta.instrumentation import collect_env\n"
        "snap = collect_env('host')\n"
        "print(json.dumps({'imported': 'torch' in sys.modules, 'torch': snap.to_dict()['torch']}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    result = json.loads(proc.stdout)
    import torch

    reported = result["torch"]
    assert reported["version"] == torch.__version__
    assert reported["cuda"] == torch.version.cuda
    assert reported["hip"] == torch.version.hip
    assert reported["git_version"] == torch.version.git_version
    if torch.version.cuda is None and torch.version.hip is None:
        # A CPU-only build has no devices, so the host probe skips the 1 s import.
        assert result["imported"] is False
        assert reported["runtime"] is None
    else:
        assert result["imported"] is True
        assert reported["runtime"]["device_count"] == torch.cuda.device_count()


def test_probe_cost() -> None:
    collect_env("host")  # first call pays one-off imports (importlib.metadata, email, ...)
    start = time.perf_counter()
    collect_env("host")
    host_s = time.perf_counter() - start
    assert host_s < 2.0

    pytest.importorskip("torch")
    start = time.perf_counter()
    snap = collect_env("trial")
    trial_s = time.perf_counter() - start
    assert snap.torch is not None and snap.torch.runtime is not None
    assert trial_s < 0.05


# --- redaction ---------------------------------------------------------------------------


def test_environ_argument_is_recorded_redacted() -> None:
    environ = {
        "MY_API_KEY": "sk-123",
        "GITHUB_TOKEN": "ghp_abc",
        "db_password": "hunter2",
        "AWS_SECRET_ACCESS_KEY": "x",
        "PATH": "/usr/local/bin:/usr/bin",
        "HTTPS_PROXY": "http://alice:s3cret@proxy.example:3128",
        "PIP_EXTRA_INDEX_URL": "https://tok@pypi.example/simple https://pypi.org/simple",
        "DOCS": "https://example.com/users/a@b",
    }
    snap = collect_env("trial", environ=environ)

    assert set(snap.env_vars) == set(environ)  # os.environ is not consulted
    for name in ("MY_API_KEY", "GITHUB_TOKEN", "db_password", "AWS_SECRET_ACCESS_KEY"):
        assert snap.env_vars[name] == REDACTED
    assert snap.env_vars["PATH"] == environ["PATH"]
    assert snap.env_vars["HTTPS_PROXY"] == f"http://{REDACTED}@proxy.example:3128"
    assert snap.env_vars["PIP_EXTRA_INDEX_URL"] == (
        f"https://{REDACTED}@pypi.example/simple https://pypi.org/simple"
    )
    assert snap.env_vars["DOCS"] == environ["DOCS"]  # an "@" in a path is no credential
    assert "s3cret" not in json.dumps(snap.to_dict())


@pytest.mark.parametrize("part", SENSITIVE_NAME_PARTS)
def test_every_sensitive_name_part_redacts_case_insensitively(part: str) -> None:
    name = f"x_{part.lower()}_y"
    assert redact_environ({name: "value", "HOME": "/home/u"}) == {
        "HOME": "/home/u",
        name: REDACTED,
    }


def test_url_without_credentials_is_unchanged() -> None:
    for value in ("https://pypi.org/simple", "mailto:a@b.c", "git@github.com:x/y.git", ""):
        assert redact_url_credentials(value) == value


# --- fail-soft ---------------------------------------------------------------------------


def test_unreadable_meminfo_is_partial_and_the_rest_is_filled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(system, "MEMINFO_PATH", tmp_path)  # a directory: reading it fails
    snap = collect_env("host")

    assert snap.memory is None
    assert snap.partial is True
    assert any(r.startswith("memory: IsADirectoryError: ") for r in snap.partial_reasons)
    assert snap.python is not None and snap.cpu is not None
    assert snap.distributions is not None and "aorta" in snap.distributions
    assert _roundtrip(snap) == snap


@pytest.mark.parametrize(
    ("target", "attribute", "section"),
    [
        (system, "python_info", "python"),
        (system, "platform_info", "platform"),
        (system, "cpu_info", "cpu"),
        (system, "memory_info", "memory"),
        (system, "installed_distributions", "distributions"),
        (torch_probe, "read_build", "torch"),
        (rocm, "find_rocm_versions", "hipblaslt"),
        (environment, "redact_environ", "env_vars"),
        (socket, "gethostname", "hostname"),
    ],
)
def test_any_failing_section_is_recorded_not_raised(
    monkeypatch: pytest.MonkeyPatch, target: ModuleType, attribute: str, section: str
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(target, attribute, broken)
    snap = collect_env("host", environ={"PATH": "/bin"})

    assert snap.partial is True
    assert f"{section}: RuntimeError: injected" in snap.partial_reasons
    json.dumps(snap.to_dict(), allow_nan=False)
    if section != "python":
        assert snap.python is not None
    if section != "env_vars":
        assert snap.env_vars == {"PATH": "/bin"}


def test_one_unreadable_distribution_does_not_hide_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Broken:
        def read_text(self, filename: str) -> str | None:
            return None  # what importlib answers for a file that is gone

        @property
        def metadata(self) -> Any:
            raise OSError("METADATA vanished")

    real = list(importlib.metadata.distributions())
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: [Broken(), *real])
    snap = collect_env("host")

    assert snap.distributions is not None
    assert snap.distributions["aorta"] == importlib.metadata.version("aorta")
    assert "distributions: OSError: METADATA vanished" in snap.partial_reasons


def test_hanging_nvidia_smi_is_killed_at_the_timeout(bin_dir: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "smi.pid"
    _fake_tool(
        bin_dir,
        "nvidia-smi",
        f"""
        import os
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
        """,
    )
    start = time.perf_counter()
    snap = collect_env("host", smi_timeout_s=1.0)
    elapsed = time.perf_counter() - start

    assert elapsed < 10
    assert snap.partial is True
    assert "gpus: GpuToolError: nvidia-smi timed out after 1 s" in snap.partial_reasons
    assert snap.memory is not None and snap.distributions is not None
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(int(pid_file.read_text()), 0)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("print('this is not csv at all')", "nvidia-smi printed an unexpected line"),
        (
            "print('NVIDIA-SMI has failed', file=sys.stderr); sys.exit(9)",
            "nvidia-smi exited with code 9: NVIDIA-SMI has failed",
        ),
    ],
)
def test_failing_nvidia_smi_is_partial(bin_dir: Path, body: str, expected: str) -> None:
    _fake_tool(bin_dir, "nvidia-smi", body)
    snap = collect_env("host")

    assert snap.partial is True
    (reason,) = [r for r in snap.partial_reasons if r.startswith("gpus: ")]
    assert expected in reason
    assert snap.python is not None and snap.memory is not None


def test_nvidia_smi_output_becomes_gpu_records(bin_dir: Path) -> None:
    _fake_tool(
        bin_dir,
        "nvidia-smi",
        """
        assert sys.argv[1:] == [
            "--query-gpu=index,name,memory.total,driver_version",
            "--format=csv,noheader,nounits",
        ], sys.argv
        print("0, NVIDIA H100 80GB HBM3, 81559, 550.54.15")
        print("1, Odd, Name, With Commas, [N/A], 550.54.15")
        """,
    )
    snap = collect_env("host")

    smi = [gpu for gpu in snap.gpus if gpu.source == "nvidia-smi"]
    assert [(g.index, g.name, g.memory_total_bytes, g.driver_version) for g in smi] == [
        (0, "NVIDIA H100 80GB HBM3", 81559 * 1024 * 1024, "550.54.15"),
        (1, "Odd, Name, With Commas", None, "550.54.15"),
    ]
    assert snap.partial is False
    assert _roundtrip(snap) == snap


ROCM_SMI_JSON = {
    "card0": {
        "Card Series": "AMD Instinct MI300X",
        "Card Model": "0x74a1",
        "GFX Version": "gfx942",
        "VRAM Total Memory (B)": "205822885888",
    },
    "card1": {"Card series": "AMD Instinct MI300X", "VRAM Total Memory (B)": "N/A"},
    "system": {"Driver version": "6.8.5"},
}


def test_rocm_smi_output_becomes_gpu_records(bin_dir: Path) -> None:
    _fake_tool(
        bin_dir,
        "rocm-smi",
        f"""
        print("WARNING: some rocm-smi versions chat before the JSON")
        print({json.dumps(ROCM_SMI_JSON)!r})
        """,
    )
    snap = collect_env("host")

    rocm_gpus = [gpu for gpu in snap.gpus if gpu.source == "rocm-smi"]
    assert [
        (g.index, g.name, g.memory_total_bytes, g.arch, g.driver_version) for g in rocm_gpus
    ] == [
        (0, "AMD Instinct MI300X", 205822885888, "gfx942", "6.8.5"),
        (1, "AMD Instinct MI300X", None, None, "6.8.5"),
    ]
    assert snap.partial is False


def test_unparsable_rocm_smi_is_partial(bin_dir: Path) -> None:
    _fake_tool(bin_dir, "rocm-smi", "print('no json here')")
    snap = collect_env("host")

    assert any(
        r.startswith("gpus: GpuToolError: rocm-smi printed unparsable output")
        for r in snap.partial_reasons
    )


def test_parsers_accept_empty_listings() -> None:
    assert parse_nvidia_smi("\n") == []
    assert parse_rocm_smi("{}") == []


# --- ROCm / hipBLASLt --------------------------------------------------------------------


def test_no_rocm_is_not_partial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rocm, "OPT_DIR", tmp_path / "no-opt")
    snap = collect_env("host", environ={})

    assert snap.hipblaslt_version is None
    assert snap.rocm_version is None
    assert not [r for r in snap.partial_reasons if r.startswith("hipblaslt")]


def test_hipblaslt_version_from_library_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opt = tmp_path / "opt"
    real = opt / "rocm-6.2.0"
    (real / "lib").mkdir(parents=True)
    (real / ".info").mkdir()
    (real / ".info" / "version").write_text("6.2.0-66\n")
    for name in ("libhipblaslt.so", "libhipblaslt.so.0", "libhipblaslt.so.0.10.60200"):
        (real / "lib" / name).touch()
    (opt / "rocm").symlink_to(real)
    monkeypatch.setattr(rocm, "OPT_DIR", opt)

    snap = collect_env("host", environ={})
    assert (snap.hipblaslt_version, snap.rocm_version) == ("0.10.60200", "6.2.0-66")


def test_hipblaslt_version_from_rocm_path_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "custom-rocm"
    header = root / "include" / "hipblaslt" / "hipblaslt-version.h"
    header.parent.mkdir(parents=True)
    header.write_text(
        "#define hipblasltVersionMajor 0\n#define hipblasltVersionMinor 8\n"
        "#define hipblasltVersionPatch 0\n#define hipblasltVersionTweak abc\n"
    )
    monkeypatch.setattr(rocm, "OPT_DIR", tmp_path / "no-opt")

    snap = collect_env("host", environ={"ROCM_PATH": str(root)})
    assert snap.hipblaslt_version == "0.8.0"


# --- scopes and torch runtime ------------------------------------------------------------


def test_trial_scope_records_precision_flags_and_skips_expensive_sections(
    bin_dir: Path,
) -> None:
    torch = pytest.importorskip("torch")
    # A tool that would make the probe partial if the trial scope ran it.
    _fake_tool(bin_dir, "nvidia-smi", "sys.exit(1)")
    old = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    try:
        torch.backends.cuda.matmul.allow_tf32 = not old[0]
        torch.backends.cudnn.allow_tf32 = not old[1]
        torch.set_float32_matmul_precision("medium" if old[2] != "medium" else "high")
        snap = collect_env("trial")
        expected = (
            torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32,
            torch.get_float32_matmul_precision(),
        )
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old[0]
        torch.backends.cudnn.allow_tf32 = old[1]
        torch.set_float32_matmul_precision(old[2])

    assert snap.scope == "trial"
    assert snap.distributions is None
    assert snap.partial is False  # nvidia-smi was not run
    assert snap.cpu is not None and snap.cpu.model is None
    assert snap.hipblaslt_version is None
    assert snap.torch is not None and snap.torch.runtime is not None
    runtime = snap.torch.runtime
    flags = (runtime.matmul_allow_tf32, runtime.cudnn_allow_tf32, runtime.float32_matmul_precision)
    assert flags == expected
    assert flags != old
    data = json.loads(json.dumps(snap.to_dict(), allow_nan=False))
    assert data["distributions"] is None
    assert data["torch"]["runtime"]["matmul_allow_tf32"] == expected[0]
    assert EnvSnapshot.from_dict(data) == snap


class _FakeCuda:
    """torch.cuda of a CUDA build with two GPUs; counts the calls that initialise CUDA."""

    def __init__(self, initialized: bool) -> None:
        self.initialized = initialized
        self.device_queries = 0

    def is_initialized(self) -> bool:
        return self.initialized

    def _init(self) -> None:
        self.device_queries += 1
        self.initialized = True

    def is_available(self) -> bool:
        self._init()
        return True

    def device_count(self) -> int:
        self._init()
        return 2

    def current_device(self) -> int:
        self._init()
        return 1

    def get_device_properties(self, index: int) -> SimpleNamespace:
        self._init()
        return SimpleNamespace(name=f"Fake GPU {index}", total_memory=80 * GIB, major=9, minor=0)


def _install_fake_cuda_torch(monkeypatch: pytest.MonkeyPatch, cuda: _FakeCuda) -> None:
    fake = ModuleType("torch")
    fake.version = SimpleNamespace(  # type: ignore[attr-defined]
        __version__="9.9.9+cu124", cuda="12.4", hip=None, git_version="f00"
    )
    fake.cuda = cuda  # type: ignore[attr-defined]
    fake.get_float32_matmul_precision = lambda: "high"  # type: ignore[attr-defined]
    backends_cuda = ModuleType("torch.backends.cuda")
    backends_cuda.matmul = SimpleNamespace(allow_tf32=True)  # type: ignore[attr-defined]
    backends_cudnn = ModuleType("torch.backends.cudnn")
    backends_cudnn.allow_tf32 = False  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "torch.backends.cuda", backends_cuda)
    monkeypatch.setitem(sys.modules, "torch.backends.cudnn", backends_cudnn)


def test_trial_scope_does_not_initialise_cuda(
    monkeypatch: pytest.MonkeyPatch, bin_dir: Path
) -> None:
    cuda = _FakeCuda(initialized=False)
    _install_fake_cuda_torch(monkeypatch, cuda)
    snap = collect_env("trial")

    assert cuda.device_queries == 0
    assert snap.partial is False
    assert snap.torch is not None and snap.torch.cuda == "12.4"
    runtime = snap.torch.runtime
    assert runtime is not None
    assert (runtime.cuda_available, runtime.device_count, runtime.devices) == (None, None, ())
    assert runtime.matmul_allow_tf32 is True and runtime.cudnn_allow_tf32 is False
    assert snap.torch.runtime_note is not None and "not initialised" in snap.torch.runtime_note


def test_trial_scope_reads_devices_once_cuda_is_initialised(
    monkeypatch: pytest.MonkeyPatch, bin_dir: Path
) -> None:
    _install_fake_cuda_torch(monkeypatch, _FakeCuda(initialized=True))
    snap = collect_env("trial")

    assert snap.torch is not None and snap.torch.runtime is not None
    assert snap.torch.runtime.current_device == 1
    assert [(g.source, g.name, g.arch) for g in snap.gpus] == [
        ("torch", "Fake GPU 0", "sm_90"),
        ("torch", "Fake GPU 1", "sm_90"),
    ]


def test_host_scope_queries_devices_of_a_gpu_build(
    monkeypatch: pytest.MonkeyPatch, bin_dir: Path
) -> None:
    cuda = _FakeCuda(initialized=False)
    _install_fake_cuda_torch(monkeypatch, cuda)
    snap = collect_env("host")

    assert snap.torch is not None and snap.torch.runtime is not None
    runtime = snap.torch.runtime
    assert (runtime.cuda_available, runtime.device_count) == (True, 2)
    assert [d.total_memory_bytes for d in runtime.devices] == [80 * GIB, 80 * GIB]
    assert [d.capability for d in runtime.devices] == ["9.0", "9.0"]
    assert len([g for g in snap.gpus if g.source == "torch"]) == 2
    assert _roundtrip(snap) == snap


def test_broken_torch_runtime_keeps_the_build_info(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(torch_probe, "query_runtime", broken)
    snap = collect_env("trial")

    assert "torch.runtime: RuntimeError: driver exploded" in snap.partial_reasons
    assert snap.torch is not None and snap.torch.version == importlib.metadata.version("torch")
    assert snap.torch.runtime is None


def _write_fake_torch_package(root: Path, *, cuda: str | None) -> None:
    """A torch whose __init__ fails loudly, to prove which probes import it."""
    package = root / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('fake torch imported')\n")
    (package / "version.py").write_text(
        f"__version__ = '0.0.1'\ncuda = {cuda!r}\nhip = None\ngit_version = 'deadbeef'\n"
    )


@pytest.mark.parametrize(
    ("scope", "cuda", "imported"),
    [("host", None, False), ("trial", "12.4", False), ("host", "12.4", True)],
)
def test_when_the_probe_imports_torch(
    tmp_path: Path, scope: str, cuda: str | None, imported: bool
) -> None:
    _write_fake_torch_package(tmp_path, cuda=cuda)
    code = (
        "import json, sys\n"
        "from aorta.instrumentation import collect_env\n"
        f"print(json.dumps(collect_env({scope!r}).to_dict()))"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    data = json.loads(proc.stdout)

    assert (data["torch"]["version"], data["torch"]["cuda"]) == ("0.0.1", cuda)
    import_failures = [r for r in data["partial_reasons"] if "fake torch imported" in r]
    assert bool(import_failures) is imported
    if imported:
        assert import_failures == ["torch.runtime: ImportError: fake torch imported"]


def test_no_torch_installed_is_not_partial(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_probe, "read_build", lambda: None)
    snap = collect_env("host")

    assert snap.torch is None
    assert not [r for r in snap.partial_reasons if r.startswith("torch")]


# --- serialisation -----------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["host", "environment", "trial"])
def test_to_dict_from_dict_round_trip(scope: str) -> None:
    snap = collect_env(scope)  # type: ignore[arg-type]
    data = snap.to_dict()

    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert EnvSnapshot.from_dict(data) == snap
    assert _roundtrip(snap) == snap
    assert data["scope"] == scope


def test_from_dict_rejects_another_schema_version() -> None:
    data = collect_env("trial").to_dict()
    with pytest.raises(ValueError, match="schema_version"):
        EnvSnapshot.from_dict({**data, "schema_version": 2})


def test_snapshot_is_frozen() -> None:
    snap = collect_env("trial")
    with pytest.raises(AttributeError):
        snap.partial = True  # type: ignore[misc]


def test_importing_instrumentation_does_not_import_torch() -> None:
    code = "import sys, aorta.instrumentation; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"
