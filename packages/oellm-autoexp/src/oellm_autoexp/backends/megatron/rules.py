"""Megatron's documented start-up rules, checked from the argument schema alone.

Used where Megatron-LM itself is not importable (a dumped `schema_file`), and where its
`validate_args` stopped at a GPU query. Each rule is one that Megatron-LM's `validate_args` (or
the micro-batch calculator it feeds) asserts at start-up, i.e. after the queue wait:

- options that exclude each other (`EXCLUSIVE`): ``fp16`` / ``bf16``; ``lr_warmup_fraction``
  with ``lr_warmup_iters`` or ``lr_warmup_samples``; ``train_iters`` / ``train_samples``;
- ``min_lr`` not above ``lr``;
- ``seq_length`` not above ``max_position_embeddings`` (Megatron-LM asserts it in
  `validate_args`, whatever the position embedding type);
- sizes: tensor x pipeline x context parallel size divides the world size, and the global batch
  size is a multiple of micro batch size x data-parallel size (world / (TP x PP x CP)).

A rule applies only when the schema has its arguments. Values are the configured ones, else
the schema's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oellm_autoexp.backends.megatron.argspec import ArgSchema

# (first, second, why): setting both is refused at start-up.
EXCLUSIVE: tuple[tuple[str, str, str], ...] = (
    ("fp16", "bf16", "fp16 and bf16 are both set; Megatron trains in one of them"),
    (
        "lr_warmup_fraction",
        "lr_warmup_iters",
        "lr_warmup_fraction and lr_warmup_iters are both set; Megatron takes only one",
    ),
    (
        "lr_warmup_fraction",
        "lr_warmup_samples",
        "lr_warmup_fraction and lr_warmup_samples are both set; Megatron takes only one",
    ),
    (
        "train_iters",
        "train_samples",
        "train_iters and train_samples are both set; train by iterations or by samples",
    ),
)
PARALLEL_SIZES = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "context_parallel_size",
)


@dataclass(frozen=True)
class RuleViolation:
    """A broken rule: the destination to blame (a config key) and one line saying why."""

    dest: str
    message: str


def check_rules(
    args: Mapping[str, Any], schema: ArgSchema, *, world_size: int | None
) -> RuleViolation | None:
    """The first rule `args` (normalised, by destination) break, or None.

    `world_size` is the number of processes the job starts; None when the SLURM settings do not
    say (then the batch rule assumes a data-parallel size of 1, and the divisibility of the
    world size is not checked).
    """

    def value(dest: str) -> Any:
        if dest in args:
            return args[dest]
        spec = schema.get(dest)
        return None if spec is None else spec.default

    for first, second, why in EXCLUSIVE:
        if (
            first in schema
            and second in schema
            and _is_set(value(first))
            and _is_set(value(second))
        ):
            return RuleViolation(second if second in args else first, why)
    lr, min_lr = value("lr"), value("min_lr")
    if isinstance(lr, float) and isinstance(min_lr, float) and min_lr > lr:
        return RuleViolation(
            "min_lr" if "min_lr" in args else "lr",
            f"min_lr {min_lr!r} is above lr {lr!r}; Megatron requires min_lr <= lr",
        )
    seq_length, max_positions = value("seq_length"), value("max_position_embeddings")
    if _is_int(seq_length) and _is_int(max_positions) and seq_length > max_positions:
        return RuleViolation(
            "seq_length" if "seq_length" in args else "max_position_embeddings",
            f"seq_length {seq_length} is above max_position_embeddings {max_positions}; "
            "Megatron requires max_position_embeddings >= seq_length",
        )
    sizes = [(dest, value(dest)) for dest in PARALLEL_SIZES if dest in schema]
    model = 1
    for _, size in sizes:
        model *= int(size or 1)
    data_parallel = 1
    if world_size is not None and sizes:
        if world_size % model:
            blamed = next((d for d, _ in sizes if d in args), sizes[0][0])
            product = " x ".join(f"{d}={int(s or 1)}" for d, s in sizes)
            return RuleViolation(
                blamed,
                f"{product} = {model} does not divide the world size {world_size} "
                "(nodes x processes per node from the SLURM settings)",
            )
        data_parallel = world_size // model
    global_batch, micro_batch = value("global_batch_size"), value("micro_batch_size")
    if isinstance(global_batch, int) and isinstance(micro_batch, int) and micro_batch > 0:
        per_step = micro_batch * data_parallel
        if global_batch % per_step:
            dp_text = f" x data-parallel size {data_parallel} = {per_step}" if world_size else ""
            return RuleViolation(
                "global_batch_size",
                f"global_batch_size {global_batch} is not a multiple of micro_batch_size "
                f"{micro_batch}{dp_text}",
            )
    return None


def _is_set(value: Any) -> bool:
    # Megatron's "unset" values: None, False, and 0 for the warm-up counters (their default).
    return value is not None and value is not False and value != 0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
