"""Load a config: a plain YAML path or a Hydra config name, plus `key=value` overrides.

`load_config` returns the typed `RootConfig` (through `parse_config`, a thin wrapper around
`compoconf.parse_config` that turns its errors into one-line `ConfigError`s naming the key
path). Hydra is imported only when composition is needed (a config name, or a YAML file with a
`defaults:` list); a self-contained YAML file needs only PyYAML and OmegaConf.
"""

from __future__ import annotations

import ast
import logging
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oellm_autoexp.config.registrations import load_registrations_for
from oellm_autoexp.config.schema import RootConfig
from oellm_autoexp.config.yaml_text import load_text, read_yaml
from oellm_autoexp.errors import ConfigError, closest, one_line

log = logging.getLogger(__name__)
_CONTROL = r"[\x00-\x08\x0a-\x1f\x7f]"  # tab is fine in a value; compiled on first use

_INTERFACE_FIELDS = {"backend": "backend", "monitoring": "monitor"}


@dataclass(frozen=True)
class LoadedConfig:
    """A parsed config and where it came from."""

    root: RootConfig
    source: str  # the YAML path or "<config dir>/<name>.yaml"
    data: dict[str, Any]  # the resolved plain mapping that was parsed


def package_config_dir() -> Path:
    """The Hydra config tree shipped with the package (source tree or installed copy)."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[1] / "_config_tree", here.parents[3] / "config"):
        if (candidate / "autoexp.yaml").is_file():
            return candidate
    raise ConfigError("the packaged Hydra config tree (config/autoexp.yaml) is missing")


def load_config(
    ref: str | Path, overrides: Sequence[str] = (), *, config_dir: Path | None = None
) -> LoadedConfig:
    """Load `ref` (a YAML path or a config name in `config_dir`) with Hydra-style overrides."""
    from oellm_autoexp.config.resolvers import register_resolvers

    register_resolvers()
    for override in overrides:
        if re.search(_CONTROL, override):
            raise ConfigError(
                f"override {one_line(repr(override))} contains a control character (newline, "
                "NUL, ...); no config value can carry one",
                file=str(ref),
            )
    path = Path(ref)
    looks_like_path = path.suffix in (".yaml", ".yml") or path.is_file() or "/" in str(ref)
    if looks_like_path:
        if not path.exists():
            raise ConfigError(f"config file not found: {path}")
        raw = read_yaml(path)
        if isinstance(raw, dict) and "defaults" in raw:
            data = _compose(path.parent.resolve(), path.stem, overrides, source=str(path))
        else:
            data = _resolve_plain(raw, overrides, source=str(path))
        source = str(path)
    else:
        directory = config_dir or package_config_dir()
        source = str(directory / f"{ref}.yaml")
        data = _compose(directory.resolve(), str(ref), overrides, source=source)
    return LoadedConfig(root=parse_config(data, source=source), source=source, data=data)


def _resolve_plain(raw: Any, overrides: Sequence[str], *, source: str) -> dict[str, Any]:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping at the top level", file=source)
    try:
        # create() already parses interpolations: a bad `${` is an OmegaConf error here too.
        cfg = OmegaConf.create(raw)
        for override in overrides:
            _apply_override(cfg, override, source=source)
        data = _resolve_with_derived(cfg, source=source)
    except OmegaConfBaseException as exc:
        raise _omegaconf_error(exc, source) from None
    return _flatten(data, source=source)


def _resolve_with_derived(cfg: Any, *, source: str) -> dict[str, Any]:
    """Resolve `cfg` to plain data, recording interpolations that follow the sweep.

    Values that depend on swept keys are resolved here with the first sweep point's values
    (keys only the sweep sets are added for that and removed again), so the base config parses;
    `derived` keeps their interpolations for the planner to resolve per job.
    """
    from omegaconf import OmegaConf

    from oellm_autoexp.config.derived import interpolations, split_derived
    from oellm_autoexp.sweep.expand import expand

    unresolved = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(unresolved, dict)
    outside_sweep = {str(k): v for k, v in unresolved.items() if k != "sweep"}
    if not interpolations(outside_sweep):  # nothing can follow the sweep: resolve as is
        plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        assert isinstance(plain, dict)
        return {str(k): v for k, v in plain.items()}
    # A scalar `sweep:` is not a config node; the schema rejects it later with one line.
    sweep_node = cfg.get("sweep")
    sweep = (
        OmegaConf.to_container(sweep_node, resolve=True)
        if OmegaConf.is_config(sweep_node)
        else None
    )
    points: list[dict[str, Any]] = []
    if isinstance(sweep, dict):
        base = sweep.get("base") or {}
        if not isinstance(base, dict):
            raise ConfigError(
                f"expected a mapping of key -> value, got {type(base).__name__}",
                key="sweep.base",
                file=source,
            )
        odd = next((k for k in base if not isinstance(k, str)), None)
        if odd is not None:  # YAML reads `1410:` as an int key; a parameter name is text
            raise ConfigError(
                f"expected parameter names (text) as keys, got {type(odd).__name__} {odd!r:.40}",
                key="sweep.base",
                file=source,
            )
        try:
            points = [{**base, **point} for point in expand(sweep.get("axes"))]
        except ConfigError as exc:
            raise exc.with_file(source) from None
    split = split_derived(outside_sweep, points, source=source)
    for key, value in split.placeholders.items():
        OmegaConf.update(cfg, key, value, merge=False, force_add=True)
    resolved = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    assert isinstance(resolved, dict)
    data = {str(k): v for k, v in resolved.items()}
    for key in split.placeholders:
        _delete_path(data, key)
    if split.derived:
        data["derived"] = {**(data.get("derived") or {}), **split.derived}
    return data


def _delete_path(data: dict[str, Any], dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if not rest:
        data.pop(head, None)
    elif isinstance(data.get(head), dict):
        _delete_path(data[head], rest)


def _apply_override(cfg: Any, override: str, *, source: str) -> None:
    """Apply one Hydra-style override to a plain YAML config: `a.b=v`, `+a.b=v`, `~a.b`."""
    from omegaconf import OmegaConf

    if override.startswith("~"):
        key = override[1:].split("=", 1)[0]
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        if node is None or leaf not in node:
            raise ConfigError(f"override {override!r}: no key {key!r} to delete", file=source)
        del node[leaf]
        return
    if "=" not in override:
        raise ConfigError(f"override {override!r}: expected key=value", file=source)
    key, value_text = override.split("=", 1)
    adding = key.startswith("+")
    key = key.lstrip("+")
    if not re.fullmatch(r"[A-Za-z_][\w-]*(\.[\w-]+)*", key):
        raise ConfigError(f"override {override!r}: {key!r} is not a dotted key", file=source)
    if not adding and OmegaConf.select(cfg, key, default=_MISSING) is _MISSING:
        parent = key.rpartition(".")[0]
        node = OmegaConf.select(cfg, parent) if parent else cfg
        known = list(node.keys()) if hasattr(node, "keys") else []
        hint = closest(key.rpartition(".")[2], [str(k) for k in known])
        typo = f"; did you mean {hint!r}?" if hint else ""
        raise ConfigError(
            f"override {override!r}: key not in config{typo}; to add it, write +{key}={value_text}",
            file=source,
        )
    try:
        value = load_text(value_text) if value_text else ""
    except yaml.YAMLError:
        value = value_text
    OmegaConf.update(cfg, key, value, merge=True, force_add=True)


_MISSING = object()


def _compose(
    directory: Path, name: str, overrides: Sequence[str], *, source: str
) -> dict[str, Any]:
    """Compose `name` from the Hydra tree at `directory` and resolve it to a plain dict."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from oellm_autoexp.config.selection import check_selected, raise_malformed_selected

    if not (directory / f"{name}.yaml").is_file():
        raise ConfigError(f"no config named {name!r} in {directory}")
    # Hydra reads files with OmegaConf's loader, which turns 10:00:00 into 36000 and expands
    # alias bombs: the files it will read (and only those) go through our loader first.
    base60 = check_selected(directory, name, overrides)
    if base60 is not None:
        path, line, value = base60
        raise ConfigError(
            f"unquoted {value} is read by YAML as a base-60 number; quote it ('{value}')",
            file=f"{path}:{line}",
        )
    try:
        # Hydra's UserWarnings (file, line and source on stderr) become one log line each, and
        # none at all when composition fails: then the error is what the user needs to see.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with initialize_config_dir(config_dir=str(directory), version_base=None):
                cfg = compose(config_name=name, overrides=list(overrides))
        data = _resolve_with_derived(cfg, source=source)
    except (HydraException, OmegaConfBaseException, yaml.YAMLError, ValueError) as exc:
        raise_malformed_selected(directory, name, overrides)
        if isinstance(exc, OmegaConfBaseException) and getattr(exc, "full_key", None):
            raise _omegaconf_error(exc, source) from None
        raise ConfigError(_hydra_message(exc), file=source) from None
    for warning in caught:
        log.warning("%s: warning: %s", source, one_line(_first_line(warning.message)))
    return _flatten(data, source=source)


def _hydra_message(exc: Exception) -> str:
    """Hydra's message on one line: what failed, why (its cause), and the available options."""
    text = str(exc)
    match = re.search(r"Available options in '([^']+)':\n((?:\t.*\n?)+)", text)
    if match:
        options = [line.strip() for line in match[2].splitlines() if line.strip()]
        return f"{_first_line(text)} (available in {match[1]}: {', '.join(options)})"
    parts = [_first_line(text).rstrip(".")]
    if exc.__cause__ is not None:
        parts.append(_first_line(exc.__cause__))
    hints = [line.strip() for line in text.splitlines()[1:] if line.strip().startswith("To ")]
    parts += [hint[0].lower() + hint[1:] for hint in hints]
    return ": ".join(parts[:2]) + "".join(f"; {hint}" for hint in parts[2:])


def _omegaconf_error(exc: Exception, source: str) -> ConfigError:
    from omegaconf.errors import MissingMandatoryValue

    key = getattr(exc, "full_key", None) or None
    if isinstance(exc, MissingMandatoryValue) and key:
        # `???` in a preset marks a value only the user knows (e.g. the cluster account)
        return ConfigError(
            f"required value is not set ('???' in the config); set it, e.g. {key}=<value>",
            key=str(key),
            file=source,
        )
    message = getattr(exc, "msg", None) or _first_line(exc)
    # A resolver's own error (`oc.eval: ...`) is the message; OmegaConf's wrapper adds nothing.
    message = re.sub(_RESOLVER_WRAPPER, "", _first_line(message))
    return ConfigError(message, key=str(key) if key else None, file=source)


_RESOLVER_WRAPPER = r"^\w+ raised while resolving interpolation: "


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _flatten(data: dict[str, Any], *, source: str) -> dict[str, Any]:
    """`restart: {policies: [...]}` (a Hydra group must be a mapping) -> `restart_policies`."""
    data.pop("defaults", None)
    # A Hydra group option cannot be null; an empty option (monitoring=none) means "absent".
    for key in ("monitoring", "container"):
        if data.get(key) == {}:
            data[key] = None
    if "restart" in data:
        restart = data.pop("restart")
        if restart is None:
            restart = {}
        if not isinstance(restart, dict) or set(restart) - {"policies"}:
            raise ConfigError("expected a mapping with only 'policies'", key="restart", file=source)
        if "restart_policies" in data:
            raise ConfigError(
                "set restart.policies or restart_policies, not both", key="restart", file=source
            )
        data["restart_policies"] = restart.get("policies") or []
    return data


# --------------------------------------------------------------------------------------------
# typed parsing


def parse_config(data: Mapping[str, Any], *, source: str | None = None) -> RootConfig:
    """Parse a plain mapping into `RootConfig` (strict keys, strict scalar types).

    A thin wrapper around `compoconf.parse_config`; its errors become one-line `ConfigError`s.
    """
    from compoconf import parse_config as compoconf_parse

    load_registrations_for(data)
    _check_class_names(data, source)
    # compoconf logs a warning for every interface with no implementation yet (e.g. no restart
    # policy installed); that is not the user's problem, so keep it off their terminal.
    compoconf_log = logging.getLogger("compoconf")
    level = compoconf_log.level
    compoconf_log.setLevel(logging.ERROR)
    try:
        root = compoconf_parse(RootConfig, dict(data), strict=True, strict_types=True)
    except (ValueError, KeyError, TypeError) as exc:
        raise translate_parse_error(exc, source) from None
    except ConfigError as exc:  # raised by a config class's own __post_init__ check
        raise exc.with_file(source) if source else exc from None
    finally:
        compoconf_log.setLevel(level)
    assert isinstance(root, RootConfig)
    return root


def _known_names(kind: str) -> list[str]:
    from compoconf import registered

    from oellm_autoexp.backends.base import BackendInterface
    from oellm_autoexp.config.interfaces import MonitorInterface, RestartPolicyInterface

    interface = {
        "backend": BackendInterface,
        "monitor": MonitorInterface,
        "restart policy": RestartPolicyInterface,
    }[kind]
    return list(registered(interface))


def _check_class_names(data: Mapping[str, Any], source: str | None) -> None:
    """An unknown `class_name` gets its own message (compoconf's is a repr of the union)."""
    entries: list[tuple[str, str, Any]] = [
        (key, kind, data.get(key)) for key, kind in _INTERFACE_FIELDS.items()
    ]
    policies = data.get("restart_policies")
    if isinstance(policies, list):
        entries += [(f"restart_policies[{i}]", "restart policy", p) for i, p in enumerate(policies)]
    for key, kind, value in entries:
        if not isinstance(value, Mapping):
            continue
        known = _known_names(kind)
        name = value.get("class_name")
        if name is None:
            if len(known) != 1:
                raise ConfigError(
                    f"missing class_name (one of: {', '.join(known) or 'none registered'})",
                    key=key,
                    file=source,
                )
            continue
        if name not in known:
            hint = closest(str(name), known)
            extra = f"; did you mean {hint!r}?" if hint else ""
            raise ConfigError(
                f"unknown {kind} {name!r}{extra} (known: {', '.join(known) or 'none'})",
                key=f"{key}.class_name",
                file=source,
            )


# The patterns of compoconf's messages, as text: `re` compiles (and caches) one when a parse
# error first needs it, so a config that parses pays nothing for them.
_UNDEFINED = (
    r"(?s)Undefined keys (?P<undefined>set\(\)|\{.*?\}) and unset keys (?P<unset>set\(\)|\{.*?\}) "
    r"in data .* at key (?P<key>\S*) for <class '(?P<cls>[^']+)'>: (?P<fields>\[.*\])$"
)
_CLASS_MISMATCH = (
    r"Bad data (?P<name>\S+)/config_class (?P<cls>\S+) match\.?(?: at key:? (?P<key>\S+))?"
)
_EXPECTED = r"^(?P<what>Expected .*?) at key (?P<key>\S+)"
_ANY_OF = r"^Could not parse into any of \((?P<types>.*?)\) at key: (?P<key>\S+)"
_NOT_PARSED = r"^Could not parse (?P<value>.*) in (?P<type>\w+) at key:? (?P<key>\S+)"
_AT_KEY = r"^(?P<what>.+?) at key:? (?P<key>\S+)"


def _names(text: str) -> list[str]:
    return [] if text == "set()" else sorted(str(x) for x in ast.literal_eval(text))


def translate_parse_error(exc: Exception, source: str | None) -> ConfigError:
    """One clear line from a compoconf parse error, naming the dotted key path."""
    text = str(exc.args[0]) if exc.args else str(exc)
    match = re.search(_UNDEFINED, text)
    if match:
        return _key_set_error(match, source)
    match = re.search(_CLASS_MISMATCH, text)
    if match:  # a class_name that is not the config class expected at that key
        return ConfigError(
            f"class_name {match['name']!r} does not name {match['cls']} (the implementation "
            "expected here; a sweep cannot switch it)",
            key=f"{match['key']}.class_name" if match["key"] else None,
            file=source,
        )
    for pattern, render in _SCALAR_ERRORS:
        match = re.search(pattern, text)
        if match:
            return ConfigError(render(match, text), key=match["key"], file=source)
    match = re.search(_AT_KEY, _first_line(text))
    if match:
        return ConfigError(match["what"], key=match["key"], file=source)
    return ConfigError(_first_line(text), file=source)


def _key_set_error(match: re.Match[str], source: str | None) -> ConfigError:
    """An unknown key (with a close match) or a missing required key."""
    key = match["key"] or None
    fields = [f for f in ast.literal_eval(match["fields"]) if f != "class_name"]
    undefined, unset = _names(match["undefined"]), _names(match["unset"])
    if undefined:
        bad = undefined[0]
        hint = closest(bad, fields)
        extra = f"did you mean {hint!r}? " if hint else ""
        where = f"{key}.{bad}" if key else bad
        return ConfigError(
            f"unknown key ({extra}known keys: {', '.join(fields)})", key=where, file=source
        )
    where = f"{key}.{unset[0]}" if key else unset[0]
    return ConfigError("required key is missing", key=where, file=source)


def _expected(match: re.Match[str], _text: str) -> str:
    what = match["what"].replace(" (strict_types=True disables silent coercion)", "")
    return what[0].lower() + what[1:]


def _any_of(match: re.Match[str], text: str) -> str:
    names = [a or b for a, b in re.findall(r"<class '([\w.]+)'>|(None)", match["types"])]
    got = re.search(r"got (\w+ \(.*?\))", text)
    return f"expected one of {', '.join(names)}" + (f", got {got[1]}" if got else "")


def _not_parsed(match: re.Match[str], _text: str) -> str:
    return f"expected {match['type']}, got {match['value']}"


_SCALAR_ERRORS: tuple[tuple[str, Callable[[re.Match[str], str], str]], ...] = (
    (_EXPECTED, _expected),
    (_ANY_OF, _any_of),
    (_NOT_PARSED, _not_parsed),
)


def dump_config(root: RootConfig) -> dict[str, Any]:
    """The config as plain data that `parse_config` reads back to an equal `RootConfig`.

    compoconf writes ``class_name: ''`` for sections that are not registry members; those are
    dropped so the dump reads like the YAML a user writes, and so is an empty `derived`.
    """
    from compoconf import dump_config as compoconf_dump

    data: dict[str, Any] = _drop_empty_class_names(compoconf_dump(root))
    if not data.get("derived"):  # as absent: configs without derived values keep their plan ids
        data.pop("derived", None)
    if not data.get("stages"):  # likewise: single-stage configs keep their plan ids
        data.pop("stages", None)
    return data


def _drop_empty_class_names(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _drop_empty_class_names(v)
            for k, v in value.items()
            if not (k == "class_name" and v == "")
        }
    if isinstance(value, list):
        return [_drop_empty_class_names(v) for v in value]
    return value
