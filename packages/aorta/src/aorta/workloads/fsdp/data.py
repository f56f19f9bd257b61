"""Deterministic synthetic token data: a fixed random Markov chain, sharded by rank.

The language is learnable but not trivial: every token has `BRANCHES` possible successors
(drawn once from the data seed), each equally likely. A model that has learnt the chain
reaches a loss of ln(BRANCHES) ~ 1.39 nats, down from ln(vocab_size) at initialisation.

Everything is drawn from CPU `torch.Generator`s seeded from (data seed, step, rank) only, so
the same triple gives the same batch on any machine, whatever the model seed or device.
"""

from __future__ import annotations

import hashlib

import torch

# Successors per token. Small enough that the loss falls visibly within a few dozen steps.
BRANCHES = 4


def _derived_seed(*parts: int) -> int:
    # A stable hash (unlike Python's `hash`, which is salted per process) of the parts.
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


class MarkovTokens:
    """Batches of token sequences from one fixed random Markov chain."""

    def __init__(self, vocab_size: int, seq_len: int, data_seed: int) -> None:
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.data_seed = data_seed
        generator = torch.Generator().manual_seed(_derived_seed(data_seed, -1))
        # successors[token, branch] -> next token.
        self.successors = torch.randint(
            vocab_size, (vocab_size, BRANCHES), generator=generator, dtype=torch.long
        )

    def batch(self, step: int, rank: int, batch_size: int) -> torch.Tensor:
        """Rank `rank`'s shard of step `step`: a CPU long tensor [batch_size, seq_len + 1].

        Column 0..seq_len-1 are the inputs; column 1..seq_len the next-token targets.
        """
        generator = torch.Generator().manual_seed(_derived_seed(self.data_seed, step, rank))
        length = self.seq_len + 1
        choices = torch.randint(BRANCHES, (batch_size, length), generator=generator)
        tokens = torch.empty(batch_size, length, dtype=torch.long)
        tokens[:, 0] = torch.randint(self.vocab_size, (batch_size,), generator=generator)
        for position in range(1, length):
            tokens[:, position] = self.successors[tokens[:, position - 1], choices[:, position]]
        return tokens
