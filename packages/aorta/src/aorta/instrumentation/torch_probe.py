"""What torch is installed and, where it is cheap and safe to ask, what it reports at runtime.

`import torch` costs over a second, so the build facts (version, CUDA/HIP build, git
commit) come from executing only `torch/version.py`, found through `importlib.util`
without running `torch/__init__.py`. The runtime (devices, precision flags) is read from a
torch that is already imported, or that the caller decided to import.

Touching a device initialises CUDA in the calling process, after which a forked child can
no longer use CUDA, and a probe must not change the process it observes. `query_runtime`
therefore reads device facts only with `initialize_cuda=True` or when CUDA is already
initialised; the precision flags never need CUDA and are always read.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from aorta.instrumentation.models import TorchDevice, TorchRuntime

# Not a real module name, so that loading version.py cannot shadow anything in sys.modules.
_VERSION_MODULE_NAME = "_aorta_probe_torch_version"


@dataclass(frozen=True)
class TorchBuild:
    """The facts in `torch.version`."""

    version: str
    cuda: str | None
    hip: str | None
    git_version: str | None

    @property
    def is_gpu_build(self) -> bool:
        """True for a CUDA or ROCm build."""
        return self.cuda is not None or self.hip is not None


def imported_torch() -> ModuleType | None:
    """The torch module if this process has imported it already, else None."""
    return sys.modules.get("torch")


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _build_from(version_module: object) -> TorchBuild:
    return TorchBuild(
        version=str(getattr(version_module, "__version__")),  # noqa: B009 (a dunder, not a typo)
        cuda=_opt_str(getattr(version_module, "cuda", None)),
        hip=_opt_str(getattr(version_module, "hip", None)),
        git_version=_opt_str(getattr(version_module, "git_version", None)),
    )


def read_build() -> TorchBuild | None:
    """torch's build facts without importing torch; None when torch is not installed.

    Raises when torch is installed but its version.py cannot be found or executed.
    """
    torch = imported_torch()
    if torch is not None and hasattr(torch, "version"):
        return _build_from(torch.version)
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        raise FileNotFoundError(f"torch at {spec.origin} is not a package")
    path = Path(locations[0]) / "version.py"
    # version.py only assigns constants (it imports nothing from torch), so executing it
    # on its own is safe and takes well under a millisecond.
    version_spec = importlib.util.spec_from_file_location(_VERSION_MODULE_NAME, path)
    if version_spec is None or version_spec.loader is None:
        raise FileNotFoundError(f"cannot load {path}")
    module = importlib.util.module_from_spec(version_spec)
    version_spec.loader.exec_module(module)
    return _build_from(module)


def import_torch() -> ModuleType:
    """Import torch (slow: over a second on a cold cache)."""
    return importlib.import_module("torch")


def _flag(owner: object, name: str) -> bool | None:
    value = getattr(owner, name, None)
    return None if value is None else bool(value)


def query_runtime(torch: ModuleType, *, initialize_cuda: bool) -> tuple[TorchRuntime, str | None]:
    """Runtime facts from an imported torch, and a note on what was deliberately skipped.

    With `initialize_cuda=False` a GPU build whose CUDA is not yet initialised reports
    `cuda_available`, `device_count` and `current_device` as None and no devices.
    """
    backends_cuda = importlib.import_module("torch.backends.cuda")
    backends_cudnn = importlib.import_module("torch.backends.cudnn")
    matmul = backends_cuda.matmul
    # Start from "nothing about devices known" and fill in what may be asked below.
    unqueried = TorchRuntime(
        cuda_available=None,
        device_count=None,
        current_device=None,
        devices=(),
        matmul_allow_tf32=_flag(matmul, "allow_tf32"),
        cudnn_allow_tf32=_flag(backends_cudnn, "allow_tf32"),
        float32_matmul_precision=str(torch.get_float32_matmul_precision()),
        matmul_fp32_precision=_opt_str(getattr(matmul, "fp32_precision", None)),
        cudnn_fp32_precision=_opt_str(getattr(backends_cudnn, "fp32_precision", None)),
    )
    version = torch.version
    cuda = torch.cuda
    if version.cuda is None and getattr(version, "hip", None) is None:
        # A CPU-only build has no CUDA to initialise; the answer is known without asking.
        return replace(unqueried, cuda_available=False, device_count=0), None
    if not initialize_cuda and not cuda.is_initialized():
        return (
            unqueried,
            "CUDA not initialised in this process; device queries skipped to keep it so",
        )
    available = bool(cuda.is_available())
    count = int(cuda.device_count()) if available else 0
    return replace(
        unqueried,
        cuda_available=available,
        device_count=count,
        current_device=int(cuda.current_device()) if count else None,
        devices=tuple(_device(torch, index) for index in range(count)),
    ), None


def _device(torch: ModuleType, index: int) -> TorchDevice:
    props = torch.cuda.get_device_properties(index)
    # gcnArchName ("gfx942:sramecc+:xnack-") is meaningful on ROCm builds only.
    arch = getattr(props, "gcnArchName", None) if torch.version.hip else None
    return TorchDevice(
        index=index,
        name=str(props.name),
        total_memory_bytes=int(props.total_memory),
        capability=f"{props.major}.{props.minor}",
        gcn_arch_name=str(arch) if arch else None,
    )
