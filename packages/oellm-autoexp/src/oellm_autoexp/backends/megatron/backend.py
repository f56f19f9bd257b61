"""The Megatron-LM backend: config, validation against Megatron's parser, and the launch command.

YAML shape (``backend:`` section)::

    class_name: MegatronBackend
    entrypoint: pretrain_gpt.py
    launcher: [torchrun, --nproc-per-node=gpu]
    megatron:                 # Megatron arguments by destination name (args.<name> in Megatron)
      num_layers: 24
      lr: 3.0e-4
      save: "{output_dir}/checkpoints"

Sweeps set Megatron arguments as ``backend.megatron.<name>``. String values may use the job's
fields (``{output_dir}``, ``{name}``, ``{job_id}``, ``{index}``, ``{project}`` and the sweep params
with dots as underscores); ``{{`` / ``}}`` are literal braces. A value that is exactly one
placeholder (``lr: "{lr}"``) takes the field's value with its type.

Nothing here imports megatron or torch at import time; Megatron-LM's parser is imported when a
plan with this backend is validated (see `source`).
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from compoconf import register

from oellm_autoexp.backends.base import BackendConfig, BackendInterface, JobContext, LaunchCommand
from oellm_autoexp.backends.megatron.argspec import ArgSchema
from oellm_autoexp.backends.megatron.chatter import log as megatron_log
from oellm_autoexp.backends.megatron.cmdline import (
    check_with_parser,
    parse_outcome_key,
    serialise_tokens,
)
from oellm_autoexp.backends.megatron.rules import PARALLEL_SIZES, check_rules
from oellm_autoexp.backends.megatron.runtime import namespace_for, validate_with_megatron
from oellm_autoexp.backends.megatron.source import DEFAULT_MODULE, ArgumentSource, resolve_source
from oellm_autoexp.backends.megatron.validate import normalise_args
from oellm_autoexp.errors import ConfigError

log = logging.getLogger("oellm_autoexp.monitor")

KEY = "backend"
# The argument schema the plan was validated with, kept in the plan directory for restarts.
PLAN_SCHEMA_FILE = "megatron_schema.json"
# Megatron-LM's checkpoint tracker file, written into the `save` directory.
TRACKER_FILE = "latest_checkpointed_iteration.txt"
ARGS_KEY = f"{KEY}.megatron"
_PARAM_PREFIX = f"{ARGS_KEY}."


@dataclass
class MegatronBackendConfig(BackendConfig):
    """Config of `MegatronBackend` (see the module docstring for the YAML shape)."""

    megatron: dict[str, Any] = field(default_factory=dict)
    entrypoint: str = "pretrain_gpt.py"
    launcher: list[str] = field(default_factory=lambda: ["torchrun", "--nproc-per-node=gpu"])
    env: dict[str, str] = field(default_factory=dict)
    # Tokens appended verbatim after the serialised arguments (checked by Megatron's parser when
    # it is importable), for options a config value cannot express.
    extra_args: list[str] = field(default_factory=list)
    # "auto": Megatron-LM's parser when importable, else schema_file;
    # "megatron" / "schema": only that source.
    arg_source: str = "auto"
    megatron_module: str = DEFAULT_MODULE
    megatron_path: str | None = None  # a Megatron-LM checkout to import the parser from
    # JSON written by `python -m oellm_autoexp.backends.megatron dump-schema`
    schema_file: str | None = None
    # Run Megatron-LM's own validate_args per distinct argument set when it is importable.
    validate_args: bool = True


@register
class MegatronBackend(BackendInterface):
    """Runs `<launcher> <entrypoint> <Megatron args>` per job, checked by Megatron's parser."""

    config_class = MegatronBackendConfig
    config: MegatronBackendConfig

    def __init__(self, config: MegatronBackendConfig, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.config = config
        self._source: ArgumentSource | None = None

    def argument_source(self) -> ArgumentSource:
        """The schema (and parser, when Megatron-LM is importable) arguments are checked by."""
        if self._source is None:
            self._source = resolve_source(
                mode=self.config.arg_source,
                module=self.config.megatron_module,
                megatron_path=self.config.megatron_path,
                schema_file=self.config.schema_file,
                key_prefix=KEY,
            )
        return self._source

    def validation_record(self) -> dict[str, Any]:
        """What validated the plan (parser or schema file, Megatron version/commit)."""
        source = self.argument_source()
        return {
            **source.provenance,
            "validate_args": bool(source.parser is not None and self.config.validate_args),
        }

    def validate(self, jobs: Sequence[JobContext]) -> None:
        """Check every job's Megatron arguments; the first problem is a `ConfigError`."""
        for job in jobs:
            self._megatron_argv(job)

    def build_launch(self, job: JobContext) -> LaunchCommand:
        """`launcher + [entrypoint] + Megatron args + extra_args`, and the configured env."""
        megatron_argv = self._megatron_argv(job)  # memoised by the argument source
        fields_ = job.format_fields()
        launcher = [
            _format(tok, fields_, key=f"{KEY}.launcher[{i}]")
            for i, tok in enumerate(self.config.launcher)
        ]
        entrypoint = _format(self.config.entrypoint, fields_, key=f"{KEY}.entrypoint")
        env = {
            k: _format(str(v), fields_, key=f"{KEY}.env.{k}") for k, v in self.config.env.items()
        }
        return LaunchCommand(argv=(*launcher, entrypoint, *megatron_argv), env=env)

    def megatron_args(self, job: JobContext) -> dict[str, Any]:
        """The job's Megatron arguments (config + sweep values, placeholders filled), unchecked."""
        return self._merged_args(job, job.format_fields())

    def restart_overrides(self, job: JobContext, metadata: Mapping[str, Any]) -> Mapping[str, Any]:
        """``--load <save dir>`` once the job's `save` dir holds a complete checkpoint.

        Megatron-LM writes ``<save>/latest_checkpointed_iteration.txt`` (an iteration number, or
        ``release``) after the checkpoint directory ``iter_NNNNNNN`` (or ``release``) is
        complete, and ``--load`` takes the directory holding that tracker file. Without a
        tracker, or when it names a directory that is not there, the job restarts as planned.
        """
        _ = metadata
        save = self.megatron_args(job).get("save")
        if not save:
            return {}
        tracker = Path(str(save)) / TRACKER_FILE
        try:
            text = tracker.read_text(encoding="utf-8").strip()
        except OSError:
            return {}
        if text == "release":
            latest = Path(str(save)) / "release"
        elif text.isdigit():
            latest = Path(str(save)) / f"iter_{int(text):07d}"
        else:
            log.warning(
                "job %s: %s holds %r, not an iteration; not resuming", job.name, tracker, text
            )
            return {}
        if not latest.is_dir():
            log.warning(
                "job %s: %s names %s, which is missing; not resuming", job.name, tracker, latest
            )
            return {}
        return {f"{ARGS_KEY}.load": str(save)}

    def plan_artifacts(self) -> Mapping[str, str]:
        """The argument schema this plan was validated with (``megatron_schema.json``)."""
        return {PLAN_SCHEMA_FILE: self.argument_source().schema.to_json()}

    def restart_config(self, data: Mapping[str, Any], plan_dir: Path) -> dict[str, Any]:
        """Rebuild restart commands against the plan's own schema: no Megatron needed here.

        A plan made inside the training image is monitored on the host, where Megatron-LM is
        usually not importable; the schema stored with the plan validates the restart command
        (``--load``) exactly as the plan's commands were validated.
        """
        schema = plan_dir / PLAN_SCHEMA_FILE
        if not schema.is_file():  # a plan written before schemas were kept
            return dict(data)
        return {**data, "arg_source": "schema", "schema_file": str(schema), "megatron_path": None}

    def _merged_args(self, job: JobContext, fields_: Mapping[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = dict(self.config.megatron)
        for key, value in job.params.items():
            if key.startswith(_PARAM_PREFIX):
                merged[key[len(_PARAM_PREFIX) :]] = value
        return {
            dest: _format_value(value, fields_, key=f"{ARGS_KEY}.{dest}")
            for dest, value in merged.items()
        }

    def _megatron_argv(self, job: JobContext) -> tuple[str, ...]:
        source = self.argument_source()
        fields_ = job.format_fields()
        try:
            args = self._merged_args(job, fields_)
            extra = tuple(
                _format(t, fields_, key=f"{KEY}.extra_args[{i}]")
                for i, t in enumerate(self.config.extra_args)
            )
            # The planner builds one backend per distinct sweep point and asks each for the
            # command it already validated: the same arguments give the same argv.
            memo_key = (repr(list(args.items())), extra)
            cached = source.argv_memo.get(memo_key)
            if cached is None:
                cached = self._checked_argv(source, args, extra)
                source.argv_memo[memo_key] = cached
            argv, normalised, shape = cached
            self._check_startup(source, job, argv, normalised, shape, fields_)
        except ConfigError as exc:
            if self._varies_per_job(exc.key, job):
                raise ConfigError(
                    f"{exc.detail} (the value of job {job.name})", key=exc.key, file=exc.file
                ) from None
            raise
        return argv

    def _checked_argv(
        self, source: ArgumentSource, args: Mapping[str, Any], extra: tuple[str, ...]
    ) -> tuple[tuple[str, ...], dict[str, Any], Hashable]:
        """Normalise, serialise and (with Megatron's parser) parse one argument set."""
        normalised = normalise_args(
            args, source.schema, key_prefix=ARGS_KEY, other_keys=_config_field_names()
        )
        check_extra_args(extra, normalised, source.schema, key=f"{KEY}.extra_args")
        tokens = serialise_tokens(normalised, source.schema)
        argv = (*(t for _, spec_tokens in tokens for t in spec_tokens), *extra)
        shape = parse_outcome_key(tokens, extra)
        if source.parser is not None and shape not in source.parsed_shapes:
            source.parsed_shapes[shape] = check_with_parser(
                source.parser,
                argv,
                source.schema,
                key_prefix=ARGS_KEY,
                extra_key=f"{KEY}.extra_args",
            )
        return argv, normalised, shape

    def _check_startup(
        self,
        source: ArgumentSource,
        job: JobContext,
        argv: tuple[str, ...],
        normalised: Mapping[str, Any],
        shape: Hashable,
        fields_: Mapping[str, Any],
    ) -> None:
        """What Megatron checks at start-up, once per distinct (argv, world size, env).

        With Megatron-LM importable: its own `validate_args`; otherwise (or where that stopped
        at a GPU query) the documented rules of `rules`.
        """
        env = {
            **job.cluster_env,
            **{
                k: _format(str(v), fields_, key=f"{KEY}.env.{k}")
                for k, v in self.config.env.items()
            },
        }
        marker = (argv, job.world_size, tuple(sorted(env.items())))
        if marker in source.validated:
            return
        run_rules = True
        if source.parser is not None and source.module is not None and self.config.validate_args:
            verdict = validate_with_megatron(
                source.module,
                namespace_for(source.parsed_shapes[shape], normalised, source.schema),
                world_size=job.world_size or _model_parallel_size(normalised, source),
                env=env,
            )
            if verdict is not None and verdict.rejection is not None:
                raise ConfigError(
                    f"Megatron's validate_args rejects job {job.name} "
                    f"(world size {_world_text(job.world_size)}): {verdict.rejection}",
                    key=_blamed_key(verdict.dests, normalised),
                )
            run_rules = verdict is None or verdict.stopped_at is not None
            if verdict is not None and verdict.stopped_at is not None:
                megatron_log.info(
                    "job %s: Megatron's validate_args stopped at a GPU query (%s); the "
                    "documented rules were checked instead",
                    job.name,
                    verdict.stopped_at,
                )
        if run_rules:
            violation = check_rules(normalised, source.schema, world_size=job.world_size)
            if violation is not None:
                raise ConfigError(
                    f"Megatron would refuse job {job.name} at start-up "
                    f"(world size {_world_text(job.world_size)}): {violation.message}",
                    key=f"{ARGS_KEY}.{violation.dest}",
                )
        source.validated.add(marker)

    def _varies_per_job(self, key: str | None, job: JobContext) -> bool:
        """Whether the value at `key` comes from the sweep (directly or through a placeholder)."""
        if key is None or not key.startswith(_PARAM_PREFIX):
            return False
        dest = key[len(_PARAM_PREFIX) :].split("[")[0]
        configured = self.config.megatron.get(dest)
        templated = "{" in str(configured) if configured is not None else False
        return f"{_PARAM_PREFIX}{dest}" in job.params or templated


def check_extra_args(
    extra: Sequence[str], normalised: Mapping[str, Any], schema: ArgSchema, *, key: str
) -> None:
    """An `extra_args` option that repeats a configured argument is an error.

    argparse keeps the last occurrence, so the configured value would be silently replaced.
    """
    for i, token in enumerate(extra):
        if not token.startswith("--"):
            continue
        option = token.split("=", 1)[0]
        for spec in schema:
            if option in (spec.option, spec.negative_option) and spec.dest in normalised:
                raise ConfigError(
                    f"{option} repeats {ARGS_KEY}.{spec.dest} (Megatron would keep only the "
                    "last one); set it in one place",
                    key=f"{key}[{i}]",
                )


def _model_parallel_size(normalised: Mapping[str, Any], source: ArgumentSource) -> int:
    """TP x PP x CP: the smallest world the arguments accept (data-parallel size 1)."""
    size = 1
    for dest in PARALLEL_SIZES:
        spec = source.schema.get(dest)
        size *= int(normalised.get(dest, spec.default if spec else 1) or 1)
    return size


def _world_text(world_size: int | None) -> str:
    return str(world_size) if world_size is not None else "unknown, data-parallel size 1 assumed"


def _blamed_key(dests: Sequence[str], normalised: Mapping[str, Any]) -> str:
    """The config key of the first configured argument on Megatron's failing statement."""
    for dest in dests:
        if dest in normalised:
            return f"{ARGS_KEY}.{dest}"
    if "world_size" in dests:
        return "slurm.sbatch"  # the world size comes from nodes x processes per node
    return ARGS_KEY


def _config_field_names() -> list[str]:
    return [f.name for f in fields(MegatronBackendConfig) if f.name != "megatron"]


class _Fields(dict[str, Any]):
    def __init__(self, data: Mapping[str, Any], key: str) -> None:
        super().__init__(data)
        self.key = key

    def __missing__(self, name: str) -> Any:
        known = ", ".join(sorted(k for k in self if "." not in k))
        raise ConfigError(
            f"unknown placeholder {{{name}}} (known: {known}; write {{{{ for a literal brace)",
            key=self.key,
        )


_FORMATTER = string.Formatter()
_WHOLE_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _format(text: str, fields_: Mapping[str, Any], *, key: str) -> str:
    if "{" not in text and "}" not in text:
        return text
    try:
        return _FORMATTER.vformat(text, (), _Fields(fields_, key))
    except (ValueError, IndexError, AttributeError, KeyError) as exc:
        raise ConfigError(f"bad placeholder in {text!r}: {exc}", key=key) from None


def _format_value(value: Any, fields_: Mapping[str, Any], *, key: str) -> Any:
    if isinstance(value, str):
        whole = _WHOLE_PLACEHOLDER.fullmatch(value)
        if whole is not None:
            # `lr: "{lr}"` takes the sweep value itself, keeping its type (a float stays a float).
            return _Fields(fields_, key)[whole.group(1)]
        return _format(value, fields_, key=key)
    if isinstance(value, list | tuple):
        return [_format_value(v, fields_, key=f"{key}[{i}]") for i, v in enumerate(value)]
    return value
