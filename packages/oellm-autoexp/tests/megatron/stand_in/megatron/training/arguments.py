"""A pared-down stand-in for Megatron-LM's `megatron.training.arguments` (test fixture).

It has the same shape as the real module, so the backend's import path is exercised for real:
`add_megatron_arguments(parser)` calls one `_add_*_args(parser)` function per argument group, and
`parse_args(extra_args_provider, ignore_unknown_args)` builds the parser, hands it to the provider,
then reads `sys.argv`. The arguments cover every argparse pattern the real parser uses:

- `type=int/float/str` with `default=None` or a value, `choices` (strings and ints), and the
  `type=bool` trap (argparse calls `bool(text)`, so "False" reads as True);
- `store_true` flags, and `--no-...` options that are `store_false` with an explicit `dest`;
- `argparse.BooleanOptionalAction` (`--x` / `--no-x`);
- `nargs="*"` / `"+"` / an int, with and without an element type;
- an option whose `dest` differs from its spelling, and two options sharing one `dest`;
- an enum chosen by name through a `type=` lambda, an enum that is its own type function (chosen
  by value), and a custom type function (`tuple_type`);
- an `append` action (not writable from a config);
- list options whose default is `[]` or a scalar, and a `--x` / `--no-x` pair of flags sharing
  one `dest` (store_true with default None plus store_false).

`validate_args(args, defaults)` mirrors the shape of Megatron's: bare `assert`s over
`args.<dest>` (world size against TP x PP x CP, fp16 with bf16, warm-up fraction with warm-up
iterations), derived values set on `args`, a print and a warning. The module also prints and
warns when imported, as Megatron-LM does (e.g. when Apex is missing).

Only argument *definitions* are mirrored; no Megatron code or help text is copied.
"""

from __future__ import annotations

import argparse
import enum
import warnings

print("stand-in Megatron: importing arguments")
warnings.warn("stand-in Megatron: Apex is not installed", stacklevel=1)


class AttnBackend(enum.Enum):
    """Stand-in for megatron.core's attention backend enum (choices by member name)."""

    flash = 1
    fused = 2
    unfused = 3
    local = 4
    auto = 5


class CheckpointScope(enum.Enum):
    """An enum whose option takes member *values* (the enum itself is the type function)."""

    GLOBAL = "global"
    LOCAL = "local"


def tuple_type(text: str) -> tuple[int, ...]:
    """Comma-separated integers, optionally in parentheses (like Megatron's tuple_type)."""
    return tuple(int(part) for part in text.strip("()").split(","))


def add_megatron_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add every stand-in argument group to `parser`."""
    parser = _add_network_size_args(parser)
    parser = _add_regularization_args(parser)
    parser = _add_training_args(parser)
    parser = _add_learning_rate_args(parser)
    parser = _add_checkpointing_args(parser)
    parser = _add_mixed_precision_args(parser)
    parser = _add_distributed_args(parser)
    parser = _add_data_args(parser)
    parser = _add_logging_args(parser)
    return parser


def parse_args(extra_args_provider=None, ignore_unknown_args=False):  # type: ignore[no-untyped-def]
    """Build the parser, let `extra_args_provider` extend it, then parse `sys.argv`."""
    parser = argparse.ArgumentParser(description="stand-in Megatron arguments", allow_abbrev=False)
    parser = add_megatron_arguments(parser)
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    if ignore_unknown_args:
        args, _ = parser.parse_known_args()
        return args
    return parser.parse_args()


def validate_args(args, defaults={}):  # type: ignore[no-untyped-def]  # noqa: B006
    """Check the parsed arguments the way Megatron's validate_args does (asserts on args)."""
    _ = defaults
    model_size = (
        args.tensor_model_parallel_size
        * args.pipeline_model_parallel_size
        * args.context_parallel_size
    )
    assert args.world_size % model_size == 0, (
        f"world size ({args.world_size}) is not divisible by total_model_size ({model_size})"
    )
    args.data_parallel_size = args.world_size // model_size
    print(f"using world size: {args.world_size}, data-parallel size: {args.data_parallel_size}")
    if args.fp16:
        assert not args.bf16
    if args.train_iters and args.lr_warmup_fraction is not None:
        assert args.lr_warmup_iters == 0, (
            "can only specify one of lr-warmup-fraction and lr-warmup-iters"
        )
    if args.yarn_correction_range_round_to_int is False:
        warnings.warn("stand-in Megatron: YaRN correction range is not rounded", stacklevel=1)
    return args


def _add_network_size_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(title="network size")
    group.add_argument("--num-layers", type=int, default=None)
    group.add_argument("--hidden-size", type=int, default=None)
    group.add_argument("--ffn-hidden-size", type=int, default=None)
    group.add_argument("--num-attention-heads", type=int, default=None)
    group.add_argument("--num-query-groups", type=int, default=1)
    group.add_argument("--group-query-attention", action="store_true")
    group.add_argument("--max-position-embeddings", type=int, default=None)
    group.add_argument(
        "--position-embedding-type",
        type=str,
        default="learned_absolute",
        choices=["learned_absolute", "rope", "none"],
    )
    group.add_argument("--rotary-base", type=int, default=10000)
    group.add_argument("--yarn-correction-range-round-to-int", action="store_true", default=None)
    group.add_argument(
        "--no-yarn-correction-range-round-to-int",
        action="store_false",
        dest="yarn_correction_range_round_to_int",
    )
    group.add_argument("--normalization", default="LayerNorm", choices=["LayerNorm", "RMSNorm"])
    group.add_argument("--swiglu", action="store_true")
    group.add_argument("--untie-embeddings-and-output-weights", action="store_true")
    group.add_argument("--no-bias-swiglu-fusion", action="store_false", dest="bias_swiglu_fusion")
    group.add_argument(
        "--attention-backend",
        type=lambda name: AttnBackend[name],
        default=AttnBackend.auto,
        choices=list(AttnBackend),
    )
    return parser


def _add_regularization_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(title="regularization")
    group.add_argument("--attention-dropout", type=float, default=0.1)
    group.add_argument("--hidden-dropout", type=float, default=0.1)
    group.add_argument("--weight-decay", type=float, default=0.01)
    group.add_argument("--start-weight-decay", type=float)
    group.add_argument("--clip-grad", type=float, default=1.0)
    group.add_argument("--adam-beta1", type=float, default=0.9)
    group.add_argument("--adam-beta2", type=float, default=0.999)
    group.add_argument("--adam-eps", type=float, default=1e-08)
    group.add_argument(
        "--muon-no-split-qkv", action="store_false", default=True, dest="muon_split_qkv"
    )
    return parser


def _add_training_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(title="training")
    group.add_argument("--micro-batch-size", type=int, default=None)
    group.add_argument("--global-batch-size", type=int, default=None)
    group.add_argument("--rampup-batch-size", nargs="*", default=None)
    group.add_argument(
        "--recompute-granularity", type=str, default=None, choices=["full", "selective"]
    )
    group.add_argument("--recompute-modules", nargs="*", type=str, default=None)
    group.add_argument(
        "--no-check-for-nan-in-loss-and-grad",
        action="store_false",
        dest="check_for_nan_in_loss_and_grad",
    )
    group.add_argument("--train-iters", type=int, default=None)
    group.add_argument("--train-samples", type=int, default=None)
    group.add_argument("--exit-interval", type=int, default=None)
    group.add_argument("--optimizer", type=str, default="adam", choices=["adam", "sgd", "muon"])
    group.add_argument("--use-flash-attn", action="store_true")
    group.add_argument(
        "--overlap-moe-expert-parallel-comm", action=argparse.BooleanOptionalAction, default=False
    )
    group.add_argument(
        "--calculate-per-token-loss", action=argparse.BooleanOptionalAction, default=None
    )
    group.add_argument("--cuda-graph-scope", type=str, default="full", choices=["full", "attn"])
    group.add_argument(
        "--inference-max-requests", type=int, default=8, dest="inference_max_batch_size"
    )
    group.add_argument(
        "--inference-max-batch-size", type=int, default=None, dest="inference_max_batch_size"
    )
    group.add_argument("--unified-memory-level", type=int, default=0, choices=[0, 1])
    group.add_argument("--cuda-graph-modules", nargs="+", type=str, default=[])
    group.add_argument("--moe-aux-loss-coeff", type=float, nargs="+", default=0.0)
    return parser


def _add_learning_rate_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(title="learning rate")
    group.add_argument("--lr", type=float, default=None)
    group.add_argument("--min-lr", type=float, default=0.0)
    group.add_argument(
        "--lr-decay-style",
        type=str,
        default="linear",
        choices=["constant", "linear", "cosine", "WSD"],
    )
    group.add_argument("--lr-decay-iters", type=int, default=None)
    group.add_argument("--lr-warmup-iters", type=int, default=0)
    group.add_argument("--lr-warmup-fraction", type=float, default=None)
    group.add_argument("--lr-warmup-samples", type=int, default=0)
    group.add_argument("--override-opt-param-scheduler", action="store_true")
    return parser


def _add_checkpointing_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(title="checkpointing")
    group.add_argument("--save", type=str, default=None)
    group.add_argument("--save-interval", "--persistent-save-interval", type=int, default=None)
    group.add_argument("--no-save-optim", action="store_true", default=None)
    group.add_argument("--load", type=str, default=None)
    group.add_argument("--no-load-rng", action="store_true", default=None)
    group.add_argument(
        "--ckpt-format", default="torch_dist", choices=["torch", "torch_dist", "zarr"]
    )
    group.add_argument(
        "--non-persistent-ckpt-scope",
        type=CheckpointScope,
        default=CheckpointScope.GLOBAL,
        choices=list(CheckpointScope),
    )
    return parser


def _add_mixed_precision_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(title="mixed precision")
    group.add_argument("--fp16", action="store_true")
    group.add_argument("--bf16", action="store_true")
    group.add_argument("--loss-scale", type=float, default=None)
    group.add_argument("--fp8-format", default=None, choices=["e4m3", "hybrid"], dest="fp8")
    return parser


def _add_distributed_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(title="distributed")
    group.add_argument("--tensor-model-parallel-size", type=int, default=1)
    group.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    group.add_argument("--context-parallel-size", type=int, default=1)
    group.add_argument("--distributed-backend", default="nccl", choices=["nccl", "gloo"])
    group.add_argument("--use-distributed-optimizer", action="store_true")
    group.add_argument("--no-overlap-grad-reduce", action="store_false", dest="overlap_grad_reduce")
    group.add_argument("--cp-comm-type", nargs="+", type=str, default=["p2p"])
    group.add_argument("--hierarchical-context-parallel-sizes", nargs="+", type=int, default=None)
    group.add_argument("--pipeline-model-parallel-layout", type=tuple_type, default=None)
    group.add_argument("--distributed-timeout-minutes", type=int, default=10)
    group.add_argument("--use-tp-pp-dp-mapping", type=bool, default=False)
    return parser


def _add_data_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(title="data and dataloader")
    group.add_argument("--data-path", nargs="*", default=None)
    group.add_argument("--split", type=str, default=None)
    group.add_argument("--seq-length", type=int, default=None)
    group.add_argument(
        "--tokenizer-type",
        type=str,
        default=None,
        choices=["GPT2BPETokenizer", "HuggingFaceTokenizer", "NullTokenizer"],
    )
    group.add_argument("--vocab-size", type=int, default=None)
    group.add_argument("--data-cache-path", default=None)
    group.add_argument("--mock-data", action="store_true")
    group.add_argument("--num-workers", type=int, default=2)
    group.add_argument("--mid-level-dataset-surplus", type=float, default=0.005)
    group.add_argument("--per-split-data-args-path", type=str, default=None)
    group.add_argument("--loss-weights", nargs=2, type=float, default=None)
    group.add_argument("--extra-dataset", action="append", default=None)
    return parser


def _add_logging_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group(title="logging")
    group.add_argument("--log-interval", type=int, default=100)
    group.add_argument("--tensorboard-dir", type=str, default=None)
    group.add_argument("--timing-log-level", type=int, default=0, choices=range(0, 3))
    group.add_argument(
        "--no-log-loss-scale-to-tensorboard",
        action="store_false",
        dest="log_loss_scale_to_tensorboard",
    )
    group.add_argument("--wandb-project", type=str, default="")
    group.add_argument("--wandb-exp-name", type=str, default="")
    group.add_argument("--log-throughput", action="store_true")
    return parser
