"""Translate an upstream experiment into one config of ours (see `docs/oellm-autoexp.md`).

Every upstream job is resolved as upstream would resolve it (`upstream_jobs`); what is the same
for all jobs goes into the config's sections, what differs goes into one explicit sweep point
per job, so the migrated config plans the same jobs, in upstream's order, with the same
arguments. Values are written resolved: upstream's interpolations (``${job.base_output_dir}``
...) name keys ours does not have. Whatever has no counterpart is left out with one note
(``key: why``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oellm_autoexp.errors import ConfigError
from oellm_autoexp.migrate.upstream_jobs import (
    UnresolvedError,
    UpstreamExperiment,
    UpstreamJob,
    load_experiment,
)
from oellm_autoexp.migrate.upstream_numeric import upstream_arithmetic

NAME_PARAM = "job_name"
# Directives our planner sets itself (it refuses them in config).
_PLANNER_DIRECTIVES = frozenset(
    {"output", "error", "job_name", "array", "parsable", "wrap", "test_only"}
)
# torchrun options that form the rendezvous: ours sets them (`slurm.distributed.mode: torchrun`).
_RENDEZVOUS = frozenset(
    {
        "nproc_per_node",
        "nnodes",
        "rdzv_endpoint",
        "rdzv_backend",
        "rdzv_id",
        "node_rank",
        "master_addr",
        "master_port",
        "standalone",
    }
)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._+=-]")
_SHELL_CODE = re.compile(r"[$`;|&<>()\\]")
_DEFAULTS_FILE = Path("backend") / "megatron" / "base_defaults.yaml"


@dataclass
class Migration:
    """The translated config, the notes, and the job counts they were made from."""

    config: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    upstream_points: int = 0  # points of upstream's sweep before its filter
    filtered: int = 0  # dropped by upstream's sweep.filter / group filters
    dependent: int = 0  # wait on a sibling stage: not translated (see the notes)

    @property
    def jobs(self) -> int:
        """Jobs the migrated config plans."""
        return self.upstream_points - self.filtered - self.dependent


class _Notes:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, key: str, why: str) -> None:
        line = f"{key}: {why}"
        if line not in self.lines:
            self.lines.append(line)


def migrate_file(path: Path, *, config_dir: Path | None = None) -> Migration:
    """Translate the upstream experiment config at `path` (see module docs)."""
    with upstream_arithmetic() as changed:
        migration = _migrate(path, config_dir)
    for change in dict.fromkeys(changed):
        migration.notes.append(f"{change}: as upstream does (the value is written out)")
    return migration


def _migrate(path: Path, config_dir: Path | None) -> Migration:
    experiment = load_experiment(path, config_dir)
    notes = _Notes()
    if experiment.dependent:
        stages = sorted({s for _, names in experiment.dependent for s in names})
        notes.add(
            "stage/sibling.*",
            f"{len(experiment.dependent)} job(s) wait on sibling stage(s) {', '.join(stages)} "
            "(start/cancel conditions on another job's files); left out — write them as "
            "`stages:` with `after:` and `start: checkpoint`",
        )
    kept = [job for job in experiment.jobs if _passes_filters(job, path)]
    if not kept:
        raise ConfigError("upstream's sweep keeps no job to translate", key="sweep", file=str(path))
    translated = [_translate_job(job, experiment, notes) for job in kept]
    config = _assemble(translated, experiment, notes)
    return Migration(
        config=config,
        notes=notes.lines,
        upstream_points=len(experiment.jobs) + len(experiment.dependent),
        filtered=len(experiment.jobs) - len(kept),
        dependent=len(experiment.dependent),
    )


def _passes_filters(job: UpstreamJob, path: Path) -> bool:
    """Upstream's sweep.filter and group filters: a boolean, or resolved in the job's config."""
    from omegaconf import OmegaConf

    for expression in job.point.filters:
        if isinstance(expression, bool):
            if not expression:
                return False
            continue
        OmegaConf.update(job.cfg, "sweep.filter", expression, force_add=True)
        try:
            result = job.value("sweep.filter")
        except UnresolvedError as exc:
            raise ConfigError(
                f"cannot evaluate: {exc}", key="sweep.filter", file=str(path)
            ) from None
        if not isinstance(result, bool):
            raise ConfigError(
                f"{expression!r} gives {result!r}, expected true or false",
                key="sweep.filter",
                file=str(path),
            )
        if not result:
            return False
    return True


@dataclass
class _Job:
    """One translated job: sweepable values (dotted keys of ours) and per-section values."""

    params: dict[str, Any]
    sections: dict[str, Any]


def _translate_job(job: UpstreamJob, experiment: UpstreamExperiment, notes: _Notes) -> _Job:
    params: dict[str, Any] = {NAME_PARAM: _job_name(job, notes)}
    sections: dict[str, Any] = {}
    backend_class = _get(job, "backend.class_name", notes)
    if backend_class == "MegatronBackend":
        _megatron(job, experiment, params, sections, notes)
    elif backend_class == "BashBackend":
        command = _get(job, "backend.command", notes) or ""
        params["backend.argv"] = ["bash", "-c", _braces(str(command))]
        sections["backend"] = {
            "class_name": "CommandBackend",
            "env": _env(job, "backend.env", notes),
        }
    else:
        raise ConfigError(
            f"{backend_class!r} has no counterpart here (MegatronBackend and BashBackend "
            "translate)",
            key="backend.class_name",
            file=str(experiment.source),
        )
    _slurm(job, params, sections, notes)
    _job_section(job, notes)
    _container(job, sections, notes)
    return _Job(params=params, sections=sections)


def _get(job: UpstreamJob, key: str, notes: _Notes) -> Any:
    try:
        return job.value(key)
    except UnresolvedError as exc:
        notes.add(key, f"cannot be resolved here ({exc}); left out")
        return None


def _job_name(job: UpstreamJob, notes: _Notes) -> str:
    name = str(_get(job, "job.name", notes) or "job")
    safe = _SAFE_NAME.sub("_", name)
    if safe != name:
        notes.add(
            "job.name",
            "characters outside letters, digits and ._+=- became _ (names are paths here)",
        )
    return safe


def _megatron(
    job: UpstreamJob,
    experiment: UpstreamExperiment,
    params: dict[str, Any],
    sections: dict[str, Any],
    notes: _Notes,
) -> None:
    raw = job.raw("backend.megatron") or {}
    if "aux" in raw:
        notes.add(
            "backend.megatron.aux",
            "free values for interpolations; their results are written out, aux itself is dropped",
        )
    defaults = _megatron_defaults(experiment.config_dir)
    for dest in raw if isinstance(raw, Mapping) else ():
        if dest == "aux":
            continue
        value = _get(job, f"backend.megatron.{dest}", notes)
        if value is None or (dest in defaults and defaults[dest] == value):
            continue  # upstream renders only arguments that differ from Megatron's defaults
        if defaults.get(dest) is None and (value is False or value == []):
            continue  # an unset flag, an empty list: upstream writes no option for either
        params[f"backend.megatron.{dest}"] = _braces(value)
    if not defaults:
        notes.add(
            "backend.megatron",
            f"no {_DEFAULTS_FILE} in the tree: every argument is written, also those at "
            "Megatron's default",
        )
    backend: dict[str, Any] = {
        "class_name": "MegatronBackend",
        "env": _env(job, "backend.env", notes),
    }
    script = _get(job, "backend.launcher_script", notes)
    if script:
        backend["entrypoint"] = str(script)
    dist_cmd = str(job.raw("backend.dist_cmd") or "")
    if dist_cmd.lstrip().startswith("torchrun") or "torch.distributed.run" in dist_cmd:
        torchrun = _get(job, "backend.torchrun_args", notes) or {}
        options = [
            f"--{k.replace('_', '-')}={v}" for k, v in torchrun.items() if k not in _RENDEZVOUS
        ]
        shell = [o for o in options if _needs_shell(o)]
        if shell:
            notes.add(
                "backend.torchrun_args",
                f"{', '.join(shell)} need the shell to expand them; ours quotes launcher tokens, "
                "so they are left out",
            )
        runner = ["torchrun"]
        if "torch.distributed.run" in dist_cmd:
            python = _get(job, "backend.python_cmd", notes) or "python"
            runner = [*shlex.split(str(python)), "-m", "torch.distributed.run"]
        backend["launcher"] = [*runner, *(o for o in options if not _needs_shell(o))]
        sections["distributed"] = "torchrun"
        dropped = sorted(k for k in torchrun if k in _RENDEZVOUS)
        if dropped:
            notes.add(
                "backend.torchrun_args",
                f"{', '.join(dropped)} form the rendezvous, which slurm.distributed.mode=torchrun "
                "sets up here (one task per node)",
            )
    else:
        python = _get(job, "backend.python_cmd", notes) or "python"
        backend["launcher"] = shlex.split(str(python))
        notes.add(
            "backend.dist_cmd",
            f"{dist_cmd!r} launches the script per SLURM task; translated as launcher "
            f"{backend['launcher']} with slurm.distributed.mode none (set srun if every task is "
            "one rank)",
        )
    sections["backend"] = backend


def _megatron_defaults(config_dir: Path | None) -> dict[str, Any]:
    if config_dir is None or not (config_dir / _DEFAULTS_FILE).is_file():
        return {}
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(OmegaConf.load(config_dir / _DEFAULTS_FILE), resolve=False)
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else {}


def _env(job: UpstreamJob, key: str, notes: _Notes) -> dict[str, str]:
    """Each entry resolved on its own, so one unset variable drops one entry, not all."""
    raw = job.raw(key) or {}
    env: dict[str, str] = {}
    for name in raw if isinstance(raw, Mapping) else ():
        value = _get(job, f"{key}.{name}", notes)
        if value is not None:
            env[str(name)] = str(value)
    return env


def _slurm(
    job: UpstreamJob, params: dict[str, Any], sections: dict[str, Any], notes: _Notes
) -> None:
    sbatch = job.raw("slurm.sbatch") or {}
    for name in sbatch if isinstance(sbatch, Mapping) else ():
        if name in _PLANNER_DIRECTIVES:
            notes.add(
                f"slurm.sbatch.{name}",
                "set by our planner (logs go to <output_dir>/<name>/slurm-%A_%a.log); dropped",
            )
            continue
        value = _get(job, f"slurm.sbatch.{name}", notes)
        if value is not None:
            params[f"slurm.sbatch.{name}"] = value
    env = _env(job, "slurm.env", notes)
    # Upstream writes `export K=V` unquoted, so the shell expands $VARS and `cmd` in V; ours
    # quotes env values. Such values become prologue lines, which the shell runs as written.
    plain = {k: v for k, v in env.items() if not _needs_shell(v)}
    shell = {k: v for k, v in env.items() if _needs_shell(v)}
    sections["slurm_env"] = plain
    sections["prologue"] = [f"export {k}={v}" for k, v in shell.items()]  # upstream's line
    sections["array"] = bool(_get(job, "slurm.array", notes))
    launcher = re.sub(r"\\\n", " ", str(_get(job, "slurm.launcher_cmd", notes) or "")).strip()
    if launcher and launcher not in ("python", "bash"):
        if _SHELL_CODE.search(launcher):
            notes.add(
                "slurm.launcher_cmd",
                "shell code (pipes, ;, $...) runs in upstream's script; ours takes a command "
                "prefix only: move the shell part into slurm.prologue and the wrapper into "
                "slurm.launcher_cmd; not translated",
            )
        else:
            sections["launcher_cmd"] = launcher
    # Upstream's script takes `srun_opts` (a string); its `srun` mapping reaches no script.
    sections["srun_args"] = str(_get(job, "slurm.srun_opts", notes) or "").strip()
    if job.raw("slurm.srun"):
        notes.add(
            "slurm.srun",
            "upstream's scripts use slurm.srun_opts, not this mapping; srun_opts is translated "
            "(slurm.srun_args)",
        )
    template = job.raw("slurm.template_path")
    if template and not str(template).endswith("templates/base.sbatch"):
        notes.add(
            "slurm.template_path",
            f"{template!r} is upstream's template format; ours uses its own (slurm.template); not "
            "translated",
        )
    chain = job.raw("job.chain_repeat")
    if isinstance(chain, int) and chain > 1:
        notes.add(
            "job.chain_repeat", f"{chain}: not a config key here; submit with --chain {chain}"
        )


def _job_section(job: UpstreamJob, notes: _Notes) -> None:
    for key, why in (
        (
            "job.start_condition",
            "a start condition on files of another job; use stages with start: checkpoint",
        ),
        ("job.cancel_condition", "use a stage's cancel_if_file or monitoring log_signals"),
        ("job.log_events", "use monitoring.log_signals (mode, on_match) and restart_policies"),
        ("job.state_events", "state transitions restart by restart_policies here"),
    ):
        if job.raw(key):
            notes.add(key, f"not translated; {why}")


def _container(job: UpstreamJob, sections: dict[str, Any], notes: _Notes) -> None:
    container = job.raw("container") or {}
    if not isinstance(container, Mapping) or not container.get("image"):
        if isinstance(container, Mapping) and container.get("class_name") in ("Conda", "Venv"):
            notes.add(
                "container",
                f"{container['class_name']} environments are not translated; activate it in "
                "slurm.prologue",
            )
        return
    image = _get(job, "container.image", notes)
    runtime = str(_get(job, "container.runtime", notes) or "singularity")
    bind = [str(b) for b in (_get(job, "container.bind", notes) or [])]
    sections["container"] = {"image": str(image), "runtime": runtime, "bind": bind}
    notes.add(
        "container",
        "ours plans inside the container and submits on the host; wrap each job's command with "
        "slurm.launcher_cmd (e.g. '<runtime> exec --nv <image>') if it must run inside",
    )


def _needs_shell(value: str) -> bool:
    return any(ch in value for ch in "$`")


def _braces(value: Any) -> Any:
    """Literal braces for our `str.format` templates (backend argv, env, Megatron strings)."""
    if isinstance(value, str):
        return value.replace("{", "{{").replace("}", "}}")
    if isinstance(value, list):
        return [_braces(v) for v in value]
    return value


def _note_differences(jobs: list[_Job], notes: _Notes) -> None:
    """Sections ours sets once per config, where upstream's jobs differ."""
    for section in (
        "backend",
        "slurm_env",
        "prologue",
        "array",
        "launcher_cmd",
        "srun_args",
        "container",
        "distributed",
    ):
        values = [job.sections.get(section) for job in jobs]
        if any(v != values[0] for v in values):
            notes.add(
                _section_key(section),
                "differs between jobs; ours sets it once for the config: took the first job's",
            )


def _assemble(jobs: list[_Job], experiment: UpstreamExperiment, notes: _Notes) -> dict[str, Any]:
    first = jobs[0]
    _note_differences(jobs, notes)
    keys = list(dict.fromkeys(k for job in jobs for k in job.params))
    common = {
        k: first.params[k]
        for k in keys
        if all(k in job.params and job.params[k] == first.params[k] for job in jobs)
    }
    varying = [k for k in keys if k not in common]
    names = [job.params[NAME_PARAM] for job in jobs]
    unique = len(set(names)) == len(names)
    if not unique:
        notes.add("job.name", "not unique across jobs; names here are <job.name>_<index>")
    backend = dict(first.sections["backend"])
    slurm: dict[str, Any] = {"array": first.sections["array"], "sbatch": {}}
    # Varying values get the first job's value as the section's own, so the base config is
    # complete on its own (e.g. a CommandBackend's argv); each sweep point overrides it.
    for key in keys:
        _place(key, common.get(key, first.params.get(key)), backend, slurm)
    for section, key in (
        ("slurm_env", "env"),
        ("prologue", "prologue"),
        ("launcher_cmd", "launcher_cmd"),
        ("srun_args", "srun_args"),
    ):
        if first.sections.get(section):
            slurm[key] = first.sections[section]
    if first.sections.get("distributed"):
        slurm["distributed"] = {"mode": first.sections["distributed"]}
        slurm["sbatch"]["ntasks_per_node"] = 1
        for job in jobs:
            job.params.pop("slurm.sbatch.ntasks_per_node", None)
        varying = [k for k in varying if k != "slurm.sbatch.ntasks_per_node"]
    if not first.sections["array"]:
        notes.add(
            "slurm.array", "false upstream (its default); kept false — ours defaults to job arrays"
        )
    project = _SAFE_NAME.sub("_", experiment.source.stem)
    config: dict[str, Any] = {
        "project": {"name": project, "base_output_dir": "${oc.env:OUTPUT_DIR,./output}"},
        "backend": backend,
        "slurm": slurm,
        "sweep": {
            "name_template": "{" + NAME_PARAM + "}" + ("" if unique else "_{index}"),
            "base": {k: v for k, v in common.items() if _is_free(k)},
        },
    }
    if varying:
        config["sweep"]["axes"] = {
            "jobs": [
                # a key a job lacks is written null: it must not inherit the first job's value
                {k: _point_value(job.params.get(k)) for k in varying}
                for job in jobs
            ]
        }
    if first.sections.get("container"):
        config["container"] = first.sections["container"]
    escaped: dict[str, Any] = _escape_interpolations(config)
    return escaped


def _place(key: str, value: Any, backend: dict[str, Any], slurm: dict[str, Any]) -> None:
    """A value shared by every job goes into its section (free params stay in sweep.base)."""
    if key.startswith("backend.megatron."):
        backend.setdefault("megatron", {})[key.removeprefix("backend.megatron.")] = value
    elif key.startswith("backend."):
        backend[key.removeprefix("backend.")] = value
    elif key.startswith("slurm.sbatch."):
        slurm["sbatch"][key.removeprefix("slurm.sbatch.")] = value


def _is_free(key: str) -> bool:
    return not key.startswith(("backend.", "slurm."))


def _point_value(value: Any) -> Any:
    # In a sweep point a list is an axis; a list *value* is written as a one-element axis.
    return [value] if isinstance(value, list) else value


def _section_key(section: str) -> str:
    return {
        "slurm_env": "slurm.env",
        "prologue": "slurm.env",
        "array": "slurm.array",
        "launcher_cmd": "slurm.launcher_cmd",
        "srun_args": "slurm.srun",
        "distributed": "backend.dist_cmd",
    }.get(section, section)


def _escape_interpolations(value: Any) -> Any:
    """Resolved text must stay text: ``${`` in a value is written ``\\${`` for our loader."""
    return _walk(
        value, lambda s: s.replace("${", "\\${") if s != "${oc.env:OUTPUT_DIR,./output}" else s
    )


def _walk(value: Any, on_text: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return on_text(value)
    if isinstance(value, dict):
        return {k: _walk(v, on_text) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, on_text) for v in value]
    return value
