"""Megatron-LM's own ``validate_args`` at plan time, without a GPU or a distributed group.

Megatron's `parse_args` reads the command line and then takes ``rank`` / ``world_size`` from
the environment that torchrun sets; `validate_args(args, defaults)` checks the combination
(parallel sizes against the world size, batch sizes, mutually exclusive options, ...) with bare
``assert`` statements and fills in derived values; then start-up builds the micro-batch
calculator, whose constructor checks that the global batch is a multiple of micro batch x
data-parallel size. Both run here. Here the parsed namespace gets the world size
the job's SLURM settings imply and rank 0, the job's environment is applied for the duration
of the call (some checks read e.g. ``CUDA_DEVICE_MAX_CONNECTIONS``), and Megatron's prints and
warnings are captured (logged, shown with ``-v``). Nothing distributed is initialised:
`validate_args` itself never calls `torch.distributed.init_process_group`.

Where `validate_args` asks the GPU (``torch.cuda.get_device_properties``) on a machine without
one, the call stops there; the result says so, and the caller checks the documented rules
(`rules`) instead of guessing the device.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import importlib
import linecache
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from oellm_autoexp.backends.megatron.argspec import ArgSchema
from oellm_autoexp.backends.megatron.chatter import captured_output

_ARGS_ATTR = re.compile(r"\bargs\.([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one `validate_args` call.

    `rejection` is Megatron's complaint (one line) or None; `dests` the ``args.<dest>`` names on
    the failing statement, in order (to name the config key); `stopped_at` is set when the
    check could not finish because it queried a GPU that this machine lacks.
    """

    rejection: str | None = None
    dests: tuple[str, ...] = ()
    stopped_at: str | None = None


class _DeviceQueryError(Exception):
    """validate_args asked for GPU properties on a machine without a GPU."""


def namespace_for(
    shape_namespace: argparse.Namespace, normalised: Mapping[str, Any], schema: ArgSchema
) -> argparse.Namespace:
    """What Megatron's parser returns for this argument set, without parsing it again.

    `shape_namespace` is the parser's result for an argv of the same shape
    (`cmdline.parse_outcome_key`): the same options, the same flags, custom-typed values and
    `extra_args` token for token. The values that differ between such argvs are ones the schema
    checks completely (int, float, str, bool, their lists), and for those the parser returns the
    normalised value itself (the round-trip property of `cmdline`, property-tested), so they are
    set directly.
    """
    # validate_args assigns attributes and may edit lists/dicts in place: copy those, share the
    # rest (scalars, enums, functions) as a deep copy would have to anyway.
    namespace = argparse.Namespace(
        **{
            k: copy.copy(v) if isinstance(v, list | dict | set) else v
            for k, v in vars(shape_namespace).items()
        }
    )
    for dest, value in normalised.items():
        spec = schema.get(dest)
        if spec is None or spec.value_type == "custom" or spec.kind not in ("value", "list"):
            continue  # identical in every argv of this shape
        setattr(namespace, dest, list(value) if isinstance(value, list | tuple) else value)
    return namespace


def validate_with_megatron(
    module: str,
    namespace: argparse.Namespace,
    *,
    world_size: int,
    env: Mapping[str, str],
) -> Verdict | None:
    """Run `module.validate_args` on a parsed `namespace` (not shared: it is modified) as a job
    of `world_size` processes would.

    Returns None when the module has no `validate_args` (nothing to run).
    """
    mod = importlib.import_module(module)
    validate = getattr(mod, "validate_args", None)
    if not callable(validate):
        return None
    # What Megatron's parse_args adds after parsing (rank and world size from torchrun's env).
    namespace.rank = 0
    namespace.world_size = world_size
    if hasattr(namespace, "global_batch_size"):
        namespace._is_global_batch_size_explicitly_specified = (
            namespace.global_batch_size is not None
        )
    with (
        _environment(env),
        _without_device(),
        _no_listing(mod),
        captured_output("Megatron validate_args", log_prints=False) as out,
    ):
        try:
            validate(namespace, {})
        except _DeviceQueryError as exc:
            return Verdict(stopped_at=str(exc))
        except SystemExit:  # Megatron calls exit() after printing why (e.g. removed options)
            printed = [ln for ln in out.getvalue().splitlines() if ln.strip()]
            return Verdict(rejection=printed[-1] if printed else "validate_args exited")
        except Exception as exc:  # Megatron's asserts, ValueErrors, RuntimeErrors
            return _rejection(exc)
        return _check_microbatches(namespace)


@functools.cache
def _microbatch_builder() -> Callable[..., Any] | str:
    """Megatron's calculator builder, or why there is none (looked up once per process)."""
    try:
        module = importlib.import_module(_MICROBATCHES_MODULE)
    except ImportError:
        return f"{_MICROBATCHES_MODULE} is not importable"
    build = getattr(module, "_build_num_microbatches_calculator", None)
    if not callable(build):
        return f"{_MICROBATCHES_MODULE} has no calculator builder"
    return build  # type: ignore[no-any-return]


# Megatron's start-up builds this right after validate_args (set_global_variables); its
# constructor asserts that the global batch is a multiple of micro batch x data-parallel size.
_MICROBATCHES_MODULE = "megatron.core.num_microbatches_calculator"


def _check_microbatches(namespace: argparse.Namespace) -> Verdict:
    build = _microbatch_builder()
    if isinstance(build, str):
        # Without Megatron's calculator the batch rule is not checked by Megatron: say so, so
        # that the caller checks the documented rules instead.
        return Verdict(stopped_at=build)
    try:
        build(
            0,
            getattr(namespace, "rampup_batch_size", None),
            namespace.global_batch_size,
            namespace.micro_batch_size,
            namespace.data_parallel_size,
            getattr(namespace, "decrease_batch_size_if_needed", False),
        )
    except Exception as exc:
        verdict = _rejection(exc)
        return Verdict(rejection=verdict.rejection, dests=("global_batch_size", "micro_batch_size"))
    return Verdict()


def _rejection(exc: BaseException) -> Verdict:
    statement = _failing_statement(exc.__traceback__)
    dests = tuple(dict.fromkeys(_ARGS_ATTR.findall(statement)))
    text = " ".join(str(exc).split())
    if not text:  # a bare `assert not args.bf16`: the statement is the message
        text = " ".join(statement.split()) or type(exc).__name__
    elif not isinstance(exc, AssertionError):
        text = f"{type(exc).__name__}: {text}"
    return Verdict(rejection=text, dests=dests)


def _failing_statement(tb: TracebackType | None) -> str:
    """The source of the innermost statement on the way that mentions ``args.<name>``."""
    frames = traceback.extract_tb(tb)
    for frame in reversed(frames):
        if frame.lineno is None:
            continue
        end = getattr(frame, "end_lineno", None) or frame.lineno
        text = "\n".join(
            linecache.getline(frame.filename, n).strip() for n in range(frame.lineno, end + 1)
        )
        if _ARGS_ATTR.search(text):
            return text
    return frames[-1].line or "" if frames else ""


@contextlib.contextmanager
def _no_listing(mod: Any) -> Iterator[None]:
    """Skip `validate_args`' final listing of every argument (output only; half its time)."""
    original = getattr(mod, "_print_args", None)
    if original is None:
        yield
        return
    mod._print_args = lambda *args, **kwargs: None
    try:
        yield
    finally:
        mod._print_args = original


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _without_device() -> Iterator[None]:
    """Turn GPU property queries into `_DeviceQueryError` when this machine has no GPU."""
    # Megatron imports torch with its arguments module; never import it here for a parser
    # that did not (planning must not pay for torch when it is not needed).
    torch = sys.modules.get("torch")
    if torch is None or torch.cuda.is_available():
        yield
        return

    def refuse(*args: Any, **kwargs: Any) -> Any:
        outer, query, _ = traceback.extract_stack(limit=3)
        raise _DeviceQueryError(f"{query.name} at {Path(outer.filename).name}:{outer.lineno}")

    names = ("get_device_properties", "get_device_capability")
    saved = {name: getattr(torch.cuda, name) for name in names}
    for name in names:
        setattr(torch.cuda, name, refuse)
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(torch.cuda, name, original)
