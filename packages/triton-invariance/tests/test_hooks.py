"""Phases 6-7 on stock Triton: the compile listener and the Autotuner.run wrapper.

Kernels really compile (CUDA sm80 target) through Triton's JIT, autotuner and on-disk cache.
Only launching and timing -- the part that needs a GPU -- is replaced, by
`triton_invariance.compile_only` (timings chosen per test to pick the winner).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from triton_invariance import hooks
from triton_invariance.api import compute_config_hash, compute_signature_hash
from triton_invariance.cache import _invariance_cache
from triton_invariance.compile_only import compile_only
from triton_invariance.errors import FingerprintUnavailableError, NumericalInvarianceMismatchError
from triton_invariance.fingerprint import compute_invariance
from triton_invariance.storage import load_baseline

EXAMPLES = Path(__file__).parents[1] / "examples"
SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
SM80 = GPUTarget("cuda", 80, 32)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask))


CONFIGS = [triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=8)]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask))


@pytest.fixture
def triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty Triton kernel cache for this test."""
    path = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(path))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    return path


@pytest.fixture
def installed(reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The conftest's `reported` hooks, with baselines under tmp_path/baselines."""
    monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(tmp_path / "baselines"))
    return reported


def _compile(fn: Any, block: int, **options: Any) -> Any:
    return triton.compile(ASTSource(fn, SIG, {"BLOCK": block}), target=SM80, options=options)


def test_listener_fingerprints_every_compiled_variant(
    triton_cache: Path, installed: list[str]
) -> None:
    k4 = _compile(add_kernel, 128, num_warps=4)
    k8 = _compile(add_kernel, 128, num_warps=8)
    # Outside an autotuner no constexpr is tuned: BLOCK is a specialisation (signature hash)
    # and the config is the launch options alone.
    variants = _invariance_cache.configs("add_kernel", compute_signature_hash(SIG, {"BLOCK": 128}))
    cfg4 = compute_config_hash(triton.Config({}, num_warps=4, num_stages=3))
    cfg8 = compute_config_hash(triton.Config({}, num_warps=8, num_stages=3))
    assert set(variants) == {cfg4, cfg8}
    assert variants[cfg4] == compute_invariance(
        k4.asm["ttgir"], "add_kernel", metadata=k4.metadata._asdict()
    )
    assert variants[cfg8] == compute_invariance(
        k8.asm["ttgir"], "add_kernel", metadata=k8.metadata._asdict()
    )
    assert variants[cfg4].fingerprint != variants[cfg8].fingerprint


def test_warm_cache_hit_is_fingerprinted_from_the_cache_files(
    triton_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hits: list[bool] = []
    triton.knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
    try:
        monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(tmp_path / "b"))
        hooks.install(report=lambda line: None)
        cold = _compile(add_kernel, 128)
        sig = compute_signature_hash(SIG, {"BLOCK": 128})
        cold_inv = _invariance_cache.configs("add_kernel", sig)
        _invariance_cache.clear()
        warm = _compile(add_kernel, 128)  # same process, on-disk cache: no stage runs
        warm_inv = _invariance_cache.configs("add_kernel", sig)
    finally:
        hooks.uninstall()
        triton.knobs.compilation.listener = None
    assert hits == [False, True]  # the previous listener was chained, and saw the hit
    assert warm is not cold
    assert warm_inv == cold_inv and len(warm_inv) == 1


def test_uninstall_restores_the_previous_listener_and_autotuner() -> None:
    from triton.runtime.autotuner import Autotuner

    def mine(**kw: Any) -> None:
        pass

    original_run = Autotuner.run
    triton.knobs.compilation.listener = mine
    try:
        hooks.install(report=lambda line: None)
        assert triton.knobs.compilation.listener is not mine
        assert Autotuner.run is not original_run
        hooks.install()  # idempotent: does not wrap twice
        assert Autotuner.run.__wrapped__ is original_run  # type: ignore[attr-defined]
        hooks.uninstall()
        assert triton.knobs.compilation.listener is mine
        assert Autotuner.run is original_run
    finally:
        hooks.uninstall()
        triton.knobs.compilation.listener = None


def test_binary_only_cache_is_a_clear_error(
    triton_cache: Path, installed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_STORE_BINARY_ONLY", "1")
    with pytest.raises(FingerprintUnavailableError, match="TRITON_STORE_BINARY_ONLY"):
        _compile(add_kernel, 64)


def _launch(timings: Any) -> Any:
    n = 4096
    x, y, out = torch.ones(n), torch.ones(n), torch.empty(n)
    with compile_only(SM80, timings=timings):
        return tuned_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)


def _fresh_decision() -> None:
    """Like a new process for the winner logic: the autotuner has no tuned config and no
    winner has been decided (the compiled variants stay known, as a new process would
    recompile or reload them)."""
    tuned_add.cache.clear()
    hooks._state.decided.clear()


def _by_warps(fast: int) -> Any:
    return lambda metadata: 1.0 if metadata.num_warps == fast else 5.0


def test_autotuner_commits_the_winner_then_compares(
    triton_cache: Path, installed: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INVARIANCE_COMMIT", "1")
    tuned_add.cache.clear()
    kernel = _launch(_by_warps(8))
    assert tuned_add.best_config.num_warps == 8
    # Every argument is 16-aligned / divisible by 16 (4096): Triton's specialisation, which the
    # signature hash includes next to the types.
    specialization = {
        f"{a}.attrs": "tt.divisibility=16" for a in ("x_ptr", "y_ptr", "out_ptr", "n")
    }
    sig = compute_signature_hash(SIG, specialization)
    # Filed per autotune key (key=["n"]): each key's winner has its own baseline.
    per_key = compute_signature_hash(SIG, {**specialization, "n.autotune_key": 4096})
    baseline = load_baseline("tuned_add", per_key, base=tmp_path / "baselines")
    assert baseline is not None
    assert baseline.recorded["autotune_key"] == {"n": 4096}
    assert baseline.recorded["family"] == sig
    assert baseline.specialization == specialization
    assert baseline.config == {"BLOCK": 256, "num_ctas": 1, "num_stages": 3, "num_warps": 8}
    # Config hash = the spec's compute_config_hash(winner).
    assert baseline.config_hash == compute_config_hash(tuned_add.best_config)
    assert baseline.invariance == compute_invariance(
        kernel.asm["ttgir"], "tuned_add", metadata=kernel.metadata._asdict()
    )
    assert len(installed) == 1 and ": created," in installed[0]
    _launch(_by_warps(8))  # a second launch with a tuned key decides nothing new
    assert len(installed) == 1

    monkeypatch.delenv("TRITON_INVARIANCE_COMMIT")
    monkeypatch.setenv("TRITON_INVARIANCE_COMPARE", "1")
    _fresh_decision()
    _launch(_by_warps(8))
    assert ": match," in installed[-1]


def test_autotuner_reports_when_only_the_winner_changed(
    triton_cache: Path, installed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INVARIANCE_COMMIT", "1")
    tuned_add.cache.clear()
    _launch(_by_warps(8))
    monkeypatch.delenv("TRITON_INVARIANCE_COMMIT")
    monkeypatch.setenv("TRITON_INVARIANCE_COMPARE", "1")
    _fresh_decision()
    with pytest.raises(NumericalInvarianceMismatchError) as info:
        _launch(_by_warps(4))  # timing noise: the other config wins this time
    report = info.value.report
    assert "layout_hash" in report or "hw_config_hash" in report
    assert "only the winner changed" in report


def _run_program(workdir: Path, env_var: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_INVARIANCE_")}
    env.update({env_var: "1", "TRITON_CACHE_DIR": str(cache), "TRITON_DEFAULT_FP_FUSION": "1"})
    return subprocess.run(
        [sys.executable, str(EXAMPLES / "kernel_program.py")],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.slow
def test_warm_triton_cache_in_a_new_process_compares_without_compiling(tmp_path: Path) -> None:
    """Commit in one process (cold cache), compare in another: Triton compiles nothing the
    second time (its cache directory is unchanged) and the fingerprint still matches."""
    cache = tmp_path / "triton-cache"
    commit = _run_program(tmp_path, "TRITON_INVARIANCE_COMMIT", cache)
    assert commit.returncode == 0, commit.stderr
    assert ": created," in commit.stderr
    before = sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))
    compare = _run_program(tmp_path, "TRITON_INVARIANCE_COMPARE", cache)
    assert compare.returncode == 0, compare.stderr
    assert ": match," in compare.stderr
    assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) == before


@triton.autotune(configs=CONFIGS, key=["n"], cache_results=True)
@triton.jit
def disk_tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask))


def test_winner_from_tritons_on_disk_autotune_cache(
    triton_cache: Path, installed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `cache_results=True` a later run takes the winner from Triton's autotune cache file
    and benchmarks nothing; the winner is still compared (and matches)."""
    n = 4096
    x, y, out = torch.ones(n), torch.ones(n), torch.empty(n)

    def launch(fast: int) -> None:
        with compile_only(SM80, timings=_by_warps(fast)) as fake:
            disk_tuned_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
        launches.append(len(fake.launched))

    launches: list[int] = []
    monkeypatch.setenv("TRITON_INVARIANCE_COMMIT", "1")
    launch(8)
    assert disk_tuned_add.best_config.num_warps == 8
    monkeypatch.delenv("TRITON_INVARIANCE_COMMIT")
    monkeypatch.setenv("TRITON_INVARIANCE_COMPARE", "1")
    disk_tuned_add.cache.clear()
    hooks._state.decided.clear()
    launch(4)  # these timings would pick the other config, but nothing is benchmarked
    assert disk_tuned_add.best_config.num_warps == 8
    assert launches == [3, 1]  # two benchmark launches + the real one; then the real one only
    assert ": match," in installed[-1]


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2)], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % 64 == 0})
@triton.jit
def heuristic_scale(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr, EVEN: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * scale)
    else:
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


def test_single_config_with_heuristics_records_every_constexpr(
    triton_cache: Path, installed: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One config (no benchmarking) under @heuristics: the winner is still committed. The
    heuristic constexpr is a specialisation, not a tuned value: EVEN=True and EVEN=False get
    their own baseline files instead of overwriting each other."""
    monkeypatch.setenv("TRITON_INVARIANCE_COMMIT", "1")
    for n in (4096, 4000, 8192):  # EVEN, not EVEN, EVEN again (same kernel: nothing new)
        x, out = torch.ones(n), torch.empty(n)
        with compile_only(SM80):
            heuristic_scale[(triton.cdiv(n, 64),)](x, out, n, 0.5)
    docs = [json.loads(p.read_text()) for p in (tmp_path / "baselines").glob("heuristic_*.json")]
    assert sorted(d["specialization"]["EVEN"] for d in docs) == [False, True]
    assert all(
        d["config"] == {"BLOCK": 64, "num_ctas": 1, "num_stages": 3, "num_warps": 2} for d in docs
    )
    assert len({d["signature_hash"] for d in docs}) == 2
    assert [": created," in line for line in installed] == [True, True]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def hip_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask))


def test_autotuned_kernel_for_an_amd_target(
    triton_cache: Path, installed: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INVARIANCE_COMMIT", "1")
    n = 4096
    x, y, out = torch.ones(n), torch.ones(n), torch.empty(n)
    with compile_only(GPUTarget("hip", "gfx942", 64), timings=_by_warps(4)):
        hip_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
    [path] = (tmp_path / "baselines").glob("hip_add_*.json")
    doc = json.loads(path.read_text())
    assert doc["invariance"]["hw_config"]["target"] == "hip:gfx942"
    assert doc["invariance"]["hw_config"]["threads_per_warp"] == 64
    assert doc["config"]["num_warps"] == 4


def test_sizes_that_specialise_differently_get_their_own_baselines(
    triton_cache: Path, installed: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """n=4096 (divisible by 16) and n=4001 compile to different kernels; each autotune key's
    winner is committed to its own file and both compare clean afterwards."""

    def launch_all() -> None:
        for n in (4096, 4001):
            x, y, out = torch.ones(n), torch.ones(n), torch.empty(n)
            with compile_only(SM80, timings=_by_warps(4)):
                tuned_add[(triton.cdiv(n, 128),)](x, y, out, n)

    monkeypatch.setenv("TRITON_INVARIANCE_COMMIT", "1")
    tuned_add.cache.clear()
    launch_all()
    files = sorted((tmp_path / "baselines").glob("tuned_add_*.json"))
    assert len(files) == 2, installed
    n_attrs = sorted(json.loads(f.read_text())["specialization"].get("n.attrs", "") for f in files)
    assert n_attrs == ["", "tt.divisibility=16"]
    monkeypatch.delenv("TRITON_INVARIANCE_COMMIT")
    monkeypatch.setenv("TRITON_INVARIANCE_COMPARE", "1")
    _fresh_decision()
    launch_all()
    assert [": match," in line for line in installed[-2:]] == [True, True]
