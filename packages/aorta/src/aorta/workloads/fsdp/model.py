"""A small decoder-only transformer LM and its FSDP2 (`fully_shard`) wrapping."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812  # the conventional alias
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from aorta.workloads.fsdp.config import FsdpConfig

_PARAM_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class Block(nn.Module):
    """Pre-LayerNorm block: causal multi-head self-attention, then a GELU MLP."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln_attn = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.attn_out = nn.Linear(d_model, d_model)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.mlp_in = nn.Linear(d_model, 4 * d_model)
        self.mlp_out = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [batch, seq, d_model] -> same shape."""
        batch, seq, width = x.shape
        qkv = self.qkv(self.ln_attn(x)).view(batch, seq, 3, self.n_heads, width // self.n_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each [batch, heads, seq, head_dim]
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_out(attn.transpose(1, 2).reshape(batch, seq, width))
        mlp: torch.Tensor = self.mlp_out(F.gelu(self.mlp_in(self.ln_mlp(x))))
        return x + mlp


class TinyLM(nn.Module):
    """Token + learnt positional embeddings, N blocks, final LayerNorm, untied LM head."""

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int, seq_len: int):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_final = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: [batch, seq] long -> logits [batch * seq, vocab_size].

        Flat logits, straight from the head's matmul: FSDP2 warns when a wrapped module returns
        a view (an in-place op on it would skip the pre-backward hook), and a [batch, seq, vocab]
        result would be one.
        """
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.head(self.ln_final(x).flatten(0, 1))
        return logits


def build_model(config: FsdpConfig, mesh: DeviceMesh, device: torch.device) -> TinyLM:
    """Build the LM, initialised from torch's global RNG, and shard it with FSDP2.

    The caller seeds the RNG (`torch.manual_seed`). The model is created on the CPU and then
    moved, so one seed gives the same initial weights on every device and every rank (each rank
    then keeps only its shard). Each block is one `fully_shard` unit and the root wraps the
    rest (embeddings, final norm, head), as FSDP2 recommends. The returned object is the same
    module, now also an `FSDPModule` whose parameters are `DTensor`s sharded on dim 0.
    """
    model = TinyLM(
        config.vocab_size, config.d_model, config.n_layers, config.n_heads, config.seq_len
    ).to(device)
    # Sharded parameters, optimizer state and the gradient reduce stay float32 in any case.
    policy = MixedPrecisionPolicy(
        param_dtype=_PARAM_DTYPES[config.param_dtype], reduce_dtype=torch.float32
    )
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model
