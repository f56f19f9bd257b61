"""Phase 3: InvarianceCache (spec tests plus concurrent access from threads)."""

from __future__ import annotations

import threading

from sample_data import sample_inv

from triton_invariance.cache import InvarianceCache


def test_cache_put_and_get() -> None:
    cache = InvarianceCache()
    inv = sample_inv()
    cache.put("kernel", "sig123", "cfg456", inv)
    assert cache.get("kernel", "sig123", "cfg456") == inv
    assert cache.get("kernel", "sig123", "other") is None


def test_cache_get_missing_returns_none() -> None:
    assert InvarianceCache().get("nonexistent", "a", "b") is None


def test_cache_clear_kernel_drops_only_that_signature() -> None:
    cache = InvarianceCache()
    cache.put("kernel1", "sig", "cfg1", sample_inv("arith.addf"))
    cache.put("kernel1", "sig", "cfg2", sample_inv("arith.subf"))
    cache.put("kernel1", "sig2", "cfg1", sample_inv("arith.mulf"))
    cache.put("kernel2", "sig", "cfg1", sample_inv("arith.divf"))
    assert cache.clear_kernel("kernel1", "sig") == 2
    assert cache.get("kernel1", "sig", "cfg1") is None
    assert cache.get("kernel1", "sig", "cfg2") is None
    assert cache.get("kernel1", "sig2", "cfg1") is not None
    assert cache.get("kernel2", "sig", "cfg1") is not None
    assert len(cache) == 2


def test_configs_lists_every_variant_of_one_signature() -> None:
    cache = InvarianceCache()
    a, b = sample_inv("arith.addf"), sample_inv("arith.subf")
    cache.put("k", "s", "c1", a)
    cache.put("k", "s", "c2", b)
    cache.put("k", "other", "c3", a)
    assert cache.configs("k", "s") == {"c1": a, "c2": b}


def test_cache_thread_safety() -> None:
    """8 threads put, read back and clear their own kernels at once; nothing is lost or mixed."""
    cache = InvarianceCache()
    invs = [sample_inv(f"arith.op{i}") for i in range(8)]
    errors: list[str] = []
    barrier = threading.Barrier(8)

    def worker(t: int) -> None:
        barrier.wait()
        for round_ in range(200):
            for cfg in range(5):
                cache.put(f"k{t}", "sig", f"c{cfg}", invs[t])
            got = cache.configs(f"k{t}", "sig")
            if set(got) != {f"c{c}" for c in range(5)} or any(v != invs[t] for v in got.values()):
                errors.append(f"thread {t} round {round_}: {sorted(got)}")
            if round_ % 2:
                cache.clear_kernel(f"k{t}", "sig")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(cache) == 0  # every thread ends on an odd round, which clears its kernel
