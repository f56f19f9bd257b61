"""Phase 5: environment modes, deterministic hashes, cache_invariance and on_winner_selected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import triton
import triton.language as tl
from sample_data import sample_inv

from triton_invariance.api import (
    cache_invariance,
    compute_config_hash,
    compute_signature_hash,
    config_mapping,
    mode_from_env,
    on_winner_selected,
)
from triton_invariance.cache import InvarianceCache
from triton_invariance.errors import (
    BaselineNotFoundError,
    InvarianceConfigError,
    NumericalInvarianceMismatchError,
    TritonInvarianceError,
)
from triton_invariance.storage import load_baseline

SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}


@pytest.mark.parametrize(
    ("env", "mode"),
    [
        ({}, "off"),
        ({"TRITON_INVARIANCE_COMMIT": "1"}, "commit"),
        ({"TRITON_INVARIANCE_COMPARE": "true"}, "compare"),
        ({"TRITON_INVARIANCE_COMMIT": "0", "TRITON_INVARIANCE_COMPARE": "yes"}, "compare"),
        ({"TRITON_INVARIANCE_COMMIT": "", "TRITON_INVARIANCE_COMPARE": "off"}, "off"),
    ],
)
def test_mode_from_env(env: dict[str, str], mode: str) -> None:
    assert mode_from_env(env) == mode


def test_both_modes_or_a_bad_value_is_a_config_error() -> None:
    both = {"TRITON_INVARIANCE_COMMIT": "1", "TRITON_INVARIANCE_COMPARE": "1"}
    with pytest.raises(InvarianceConfigError, match="both set"):
        mode_from_env(both)
    with pytest.raises(InvarianceConfigError, match="TRITON_INVARIANCE_COMMIT='maybe'"):
        mode_from_env({"TRITON_INVARIANCE_COMMIT": "maybe"})


def test_signature_hash_is_deterministic_and_type_sensitive() -> None:
    assert compute_signature_hash(SIG) == compute_signature_hash(dict(SIG))
    assert len(compute_signature_hash(SIG)) == 16
    assert compute_signature_hash(SIG) != compute_signature_hash({**SIG, "x_ptr": "*fp16"})
    reordered = dict(reversed(list(SIG.items())))
    assert compute_signature_hash(SIG) != compute_signature_hash(reordered)


def test_signature_hash_of_kernel_params() -> None:
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):  # noqa: N803
        pass

    assert compute_signature_hash(k.params) == compute_signature_hash(["x_ptr", "n", "BLOCK"])


def test_config_hash_of_a_triton_config_equals_its_mapping() -> None:
    cfg = triton.Config({"BLOCK": 128}, num_warps=4, num_stages=2)
    assert compute_config_hash(cfg) == compute_config_hash(cfg)
    assert config_mapping(cfg) == {"BLOCK": 128, "num_ctas": 1, "num_stages": 2, "num_warps": 4}
    assert compute_config_hash(cfg) == compute_config_hash(
        {"num_warps": 4, "num_stages": 2, "num_ctas": 1, "BLOCK": 128, "maxnreg": None}
    )
    assert compute_config_hash(cfg) != compute_config_hash(
        triton.Config({"BLOCK": 128}, num_warps=8, num_stages=2)
    )
    assert compute_config_hash({"x": 1}) != compute_config_hash({"x": 1.0})


def test_config_hash_refuses_values_whose_text_has_an_address() -> None:
    with pytest.raises(InvarianceConfigError, match="memory address"):
        compute_config_hash({"fn": object()})
    with pytest.raises(InvarianceConfigError, match=r"expected a triton\.Config"):
        compute_config_hash(42)


_HASH_PROBE = """
import json, triton, triton.language as tl
from triton_invariance.api import compute_config_hash, compute_signature_hash
sig = {sig!r}
print(json.dumps([
    compute_signature_hash(sig),
    compute_config_hash(triton.Config({{"BLOCK": 128, "DTYPE": tl.float16}}, num_warps=4)),
    compute_config_hash({{"A": (1, 2), "B": 0.5, "C": "x"}}),
]))
"""


def test_hashes_are_equal_across_processes_with_different_hash_seeds() -> None:
    outputs = []
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _HASH_PROBE.format(sig=SIG)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0][0] == compute_signature_hash(SIG)


def test_cache_invariance_fingerprints_real_ttgir(ttgir: Callable[..., str]) -> None:
    cache = InvarianceCache()
    text = ttgir("add", "cuda:80")
    inv = cache_invariance(text, "add_kernel", "sig", "cfg", cache=cache)
    assert inv.kernel_name == "add_kernel"
    assert inv.hw_config.target == "cuda:80"
    assert cache.get("add_kernel", "sig", "cfg") == inv
    # the same text gives the same fingerprint (content hashes, no per-call state)
    assert cache_invariance(text, "add_kernel", "sig", "cfg2", cache=cache) == inv


def test_cache_invariance_raises_on_broken_ttgir() -> None:
    cache = InvarianceCache()
    with pytest.raises(ValueError):
        cache_invariance("module { this is not mlir", "k", "sig", "cfg", cache=cache)
    assert len(cache) == 0


def test_on_winner_selected_commits_in_commit_mode(tmp_path: Path) -> None:
    cache = InvarianceCache()
    inv = sample_inv(kernel="kernel")
    cache.put("kernel", "0123456789abcdef", "cfg1", inv)
    outcome = on_winner_selected(
        "kernel", "0123456789abcdef", "cfg1", mode="commit", base=tmp_path, cache=cache
    )
    assert outcome is not None and outcome.outcome == "created"
    baseline = load_baseline("kernel", "0123456789abcdef", base=tmp_path)
    assert baseline is not None and baseline.invariance == inv


def test_on_winner_selected_reads_the_mode_from_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INVARIANCE_COMMIT", "1")
    monkeypatch.delenv("TRITON_INVARIANCE_COMPARE", raising=False)
    cache = InvarianceCache()
    cache.put("kernel", "0123456789abcdef", "cfg", sample_inv(kernel="kernel"))
    on_winner_selected("kernel", "0123456789abcdef", "cfg", base=tmp_path, cache=cache)
    assert (tmp_path / "kernel_0123456789abcdef.json").exists()


def test_on_winner_selected_compares_and_raises_on_mismatch(tmp_path: Path) -> None:
    sig = "0123456789abcdef"
    cache = InvarianceCache()
    cache.put("kernel", sig, "cfg", sample_inv(kernel="kernel"))
    on_winner_selected("kernel", sig, "cfg", mode="commit", base=tmp_path, cache=cache)
    cache.put("kernel", sig, "cfg", sample_inv(kernel="kernel"))
    same = on_winner_selected("kernel", sig, "cfg", mode="compare", base=tmp_path, cache=cache)
    assert same is not None and same.outcome == "match"
    cache.put("kernel", sig, "cfg", sample_inv("arith.subf", kernel="kernel"))
    with pytest.raises(NumericalInvarianceMismatchError, match=r"arith\.subf"):
        on_winner_selected("kernel", sig, "cfg", mode="compare", base=tmp_path, cache=cache)
    assert len(cache) == 0  # cleared even though it raised


def test_on_winner_selected_clears_cache() -> None:
    cache = InvarianceCache()
    cache.put("kernel", "sig", "cfg1", sample_inv("arith.addf"))
    cache.put("kernel", "sig", "cfg2", sample_inv("arith.subf"))
    assert on_winner_selected("kernel", "sig", "cfg1", mode="off", cache=cache) is None
    assert cache.get("kernel", "sig", "cfg1") is None
    assert cache.get("kernel", "sig", "cfg2") is None


def test_on_winner_selected_errors(tmp_path: Path) -> None:
    cache = InvarianceCache()
    with pytest.raises(TritonInvarianceError, match="no fingerprint cached"):
        on_winner_selected("kernel", "0123456789abcdef", "cfg", mode="commit", cache=cache)
    cache.put("kernel", "0123456789abcdef", "cfg", sample_inv(kernel="kernel"))
    with pytest.raises(BaselineNotFoundError, match="no baseline for kernel 'kernel'"):
        on_winner_selected(
            "kernel", "0123456789abcdef", "cfg", mode="compare", base=tmp_path, cache=cache
        )


def test_compare_against_a_baseline_without_compile_options_matches_with_a_note(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    sig = "0123456789abcdef"
    cache = InvarianceCache()
    cache.put("kernel", sig, "cfg", sample_inv(kernel="kernel"))
    on_winner_selected("kernel", sig, "cfg", mode="commit", base=tmp_path, cache=cache)
    now = replace(sample_inv(kernel="kernel"), compile_options=(("enable_fp_fusion", "true"),))
    cache.put("kernel", sig, "cfg", now)
    outcome = on_winner_selected("kernel", sig, "cfg", mode="compare", base=tmp_path, cache=cache)
    assert outcome is not None and outcome.outcome == "match"
    assert len(outcome.notes) == 1 and "re-commit to record them" in outcome.notes[0]
    assert outcome.describe().endswith(f"({outcome.notes[0]})")
    assert "\n" not in outcome.describe()
