"""In which order a matrix runs its trials: the rounds of interleaved order.

Interleaved order runs round k (trial id k) of every cell before round k+1, the cells of each
round in a fresh random order drawn from the recipe's `order_seed` and the round number. So
machine drift (a neighbour starting a job, thermal throttling, a page cache warming up) hits
every cell alike instead of landing between cells, and the matrix can compare cells round by
round. The order depends only on (seed, round, cell names): every torchrun rank and every
resume of a run computes the same rounds.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["round_order"]


def round_order(seed: int, round_index: int, names: Sequence[str]) -> list[str]:
    """The cells of round `round_index` in the order they run (a seeded shuffle of `names`)."""
    # A string seed goes through SHA-512 in `random.seed`: the same in every process, unlike
    # hash() of a tuple, which is salted per interpreter.
    rng = random.Random(f"aorta-triage-order:{seed}:{round_index}")
    shuffled = list(names)
    rng.shuffle(shuffled)
    return shuffled
