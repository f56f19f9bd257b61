"""Loading configs: YAML paths, Hydra names with overrides, resolvers, typed parsing, dump."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oellm_autoexp.backends.command import CommandBackendConfig
from oellm_autoexp.config.loader import dump_config, load_config, package_config_dir, parse_config
from oellm_autoexp.config.schema import RootConfig
from oellm_autoexp.config.yaml_text import dump_text
from oellm_autoexp.errors import ConfigError

PACKAGE = Path(__file__).resolve().parents[2]
EXAMPLES = PACKAGE / "examples"
GOLDEN = Path(__file__).parent / "golden"

MINIMAL = {
    "project": {"name": "p", "base_output_dir": "out"},
    "backend": {"class_name": "CommandBackend", "argv": ["echo", "{name}"]},
}


def write(tmp_path: Path, data: object, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def test_yaml_path_loads_into_typed_sections_with_backend_chosen_by_class_name(
    tmp_path: Path,
) -> None:
    loaded = load_config(write(tmp_path, MINIMAL))
    root = loaded.root
    assert isinstance(root, RootConfig)
    assert isinstance(root.backend, CommandBackendConfig)
    assert root.backend.argv == ["echo", "{name}"]
    assert root.slurm.array is True and root.slurm.max_array_size == 1000  # defaults
    assert root.monitoring is None and root.restart_policies == []


def test_hydra_name_composes_groups_and_applies_overrides() -> None:
    root = load_config(
        "autoexp", ["sweep=lr_grid", "slurm=local", "project.name=run1", "+slurm.sbatch.qos=high"]
    ).root
    assert root.project.name == "run1"
    # the interpolation ${project.name} in the project group sees the override
    assert root.project.base_output_dir == "./autoexp_runs/run1"
    assert root.sweep.axes == {"lr": [1e-4, 3e-4, 1e-3], "seed": [1, 2]}
    assert root.slurm.use_srun is False  # from slurm/local.yaml, which extends slurm/default
    assert root.slurm.sbatch["qos"] == "high"
    assert root.slurm.sbatch["ntasks_per_node"] == 1  # inherited from slurm/default


def test_overrides_on_a_plain_yaml_path(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    root = load_config(path, ["project.name=q", "+slurm.array=false", "+sweep.axes.lr=[1,2]"]).root
    assert root.project.name == "q"
    assert root.slurm.array is False
    assert root.sweep.axes == {"lr": [1, 2]}
    with pytest.raises(ConfigError, match=r"override 'project.nam=x': key not in config; did you"):
        load_config(path, ["project.nam=x"])
    removed = load_config(write(tmp_path, {**MINIMAL, "metadata": {"a": 1}}), ["~metadata.a"])
    assert removed.root.metadata == {}


def test_yaml_file_with_defaults_is_composed_from_its_own_directory(tmp_path: Path) -> None:
    (tmp_path / "slurm").mkdir()
    write(tmp_path / "slurm", {"sbatch": {"time": "01:00:00"}, "use_srun": False}, "mine.yaml")
    path = write(tmp_path, {"defaults": [{"slurm@slurm": "mine"}, "_self_"], **MINIMAL})
    root = load_config(path).root
    assert root.slurm.sbatch == {"time": "01:00:00"}
    assert root.slurm.use_srun is False


def test_custom_resolvers_compute_derived_values(tmp_path: Path) -> None:
    data = {
        **MINIMAL,
        "metadata": {
            "gbs": 256,
            "tokens": "${oc.muli:${metadata.gbs},4096}",
            "steps": "${oc.cdivi:1000001,${metadata.tokens}}",
            "lr": "${oc.mul:3,1e-4}",
            "half": "${oc.div:1,2}",
        },
    }
    meta = load_config(write(tmp_path, data)).root.metadata
    assert meta["tokens"] == 1048576
    assert meta["steps"] == 1
    assert meta["lr"] == pytest.approx(3e-4)
    assert meta["half"] == 0.5


def test_resolver_with_non_numeric_argument_is_a_config_error(tmp_path: Path) -> None:
    data = {**MINIMAL, "metadata": {"x": "${oc.muli:abc,2}"}}
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, data))
    assert info.value.key == "metadata.x"
    assert "expected a number" in str(info.value)


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"slurm": {"arary": True}}, "slurm.arary", "did you mean 'array'"),
        ({"slurm": {"max_array_size": "many"}}, "slurm.max_array_size", "expected int, got str"),
        ({"slurm": {"array": 3}}, "slurm.array", "expected bool"),
        ({"backend": {"class_name": "CommandBakend"}}, "backend.class_name", "'CommandBackend'"),
        ({"backend": {"class_name": "CommandBackend", "argv": "echo"}}, "backend.argv", "list"),
        ({"project": {"name": "p"}}, "project.base_output_dir", "required key is missing"),
        ({"sweep": {"base": {"a": 1}, "oops": 2}}, "sweep.oops", "unknown key"),
    ],
)
def test_type_and_key_errors_name_file_and_key_path(
    tmp_path: Path, change: dict[str, object], key: str, words: str
) -> None:
    path = write(tmp_path, {**MINIMAL, **change})
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == key, str(info.value)
    assert words in str(info.value)
    assert str(info.value).startswith(f"{path}: {key}: ")
    assert "\n" not in str(info.value)


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "project:\n  name: p\n  base_output_dir: [unclosed\nbackend: {}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}:4:")
    assert "malformed YAML" in str(info.value)


def test_malformed_yaml_inside_a_hydra_tree_names_that_file(tmp_path: Path) -> None:
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "bad.yaml").write_text("axes: {lr: [1, 2}\n")
    write(tmp_path, {"defaults": [{"sweep@sweep": "bad"}, "_self_"], **MINIMAL}, "top.yaml")
    with pytest.raises(ConfigError) as info:
        load_config("top", config_dir=tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'sweep' / 'bad.yaml'}:1:")


def test_unknown_group_option_lists_the_available_ones() -> None:
    with pytest.raises(ConfigError) as info:
        load_config("autoexp", ["sweep=nope"])
    message = str(info.value)
    assert "Could not find 'sweep/nope'" in message
    assert "available in sweep: lr_grid, single" in message
    with pytest.raises(ConfigError, match="no config named 'nosuch'"):
        load_config("nosuch")


def test_unknown_group_or_key_override_on_a_config_name_is_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        load_config("autoexp", ["clusterr=big"])
    assert str(info.value).endswith(
        "Could not override 'clusterr': Key 'clusterr' is not in struct; "
        "to append to your config use +clusterr=big"
    )
    with pytest.raises(ConfigError, match="Key 'nme' is not in struct"):
        load_config("autoexp", ["project.nme=x"])


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.yaml")


# ---------------------------------------------------------------------------------------------
# dump_config round trip and golden files

SAMPLES = {
    "hello_sweep": (str(EXAMPLES / "hello_sweep.yaml"), []),
    "autoexp_default": ("autoexp", []),
    "autoexp_booster_grid": (
        "autoexp",
        [
            "slurm=juwels_booster",
            "sweep=lr_grid",
            "slurm.sbatch.account=my_budget",
            "slurm.sbatch.partition=booster",
        ],
    ),
    "autoexp_monitored": ("autoexp", ["monitoring=log", "restart=selective", "slurm=local"]),
}


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_dump_config_round_trips_and_matches_golden(
    sample: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref, overrides = SAMPLES[sample]
    root = load_config(ref, overrides).root
    dumped = dump_config(root)
    assert parse_config(dumped) == root
    assert dump_config(parse_config(yaml.safe_load(yaml.safe_dump(dumped)))) == dumped
    golden = GOLDEN / f"{sample}.yaml"
    assert dump_text(dumped) == golden.read_text()
    assert load_config(golden).root == root  # the golden file is itself a loadable config


def test_packaged_config_tree_is_found() -> None:
    assert (package_config_dir() / "autoexp.yaml").is_file()


def test_monitor_and_restart_groups_select_registered_implementations() -> None:
    root = load_config("autoexp", ["monitoring=log", "restart=selective"]).root
    assert type(root.monitoring).__name__ == "LogMonitorConfig"
    assert [type(p).__name__ for p in root.restart_policies] == [
        "SelectiveRestartPolicyConfig",
        "TimeLimitRestartPolicyConfig",
    ]
    assert root.restart_policies[0].exclude_error_types == [
        "oom",
        "exception",
        "usage",
        "cannot_execute",
    ]


def test_a_config_class_check_is_reported_with_the_config_file() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(
            "autoexp",
            ["monitoring=log", "restart=selective", "restart.policies.0.default_action=x"],
        )
    assert str(info.value).startswith(str(package_config_dir() / "autoexp.yaml"))
    assert "expected 'restart' or 'stop'" in str(info.value)


def test_the_log_monitor_preset_waits_for_the_marker_the_default_template_prints() -> None:
    marker = load_config("autoexp", ["monitoring=log"]).root.monitoring.termination_str
    template = PACKAGE / "src/oellm_autoexp/slurm/templates/default.sbatch.j2"
    assert f'echo "{marker} ${{AUTOEXP_JOB_NAME}}"' in template.read_text()


def test_unquoted_wall_clock_time_stays_a_string_in_plain_yaml_and_overrides(
    tmp_path: Path,
) -> None:
    # YAML 1.1 reads 10:00:00 as 36000 (base 60); --time=36000 would be 25 days.
    text = yaml.safe_dump(MINIMAL) + "slurm:\n  sbatch:\n    time: 10:00:00\n"
    root = load_config(write(tmp_path, text)).root
    assert root.slurm.sbatch["time"] == "10:00:00"
    over = load_config(write(tmp_path, MINIMAL), ["+slurm.sbatch.time=2:30:00"]).root
    assert over.slurm.sbatch["time"] == "2:30:00"
    floats = load_config(
        write(tmp_path, {**MINIMAL, "metadata": {"lr": "X"}}), ["metadata.lr=1e-4"]
    )
    assert floats.root.metadata["lr"] == 1e-4  # read as OmegaConf would: a float


def test_unquoted_wall_clock_time_in_a_hydra_tree_is_refused_with_file_and_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "x.yaml").write_text("sbatch:\n  time: 10:00:00\n")
    write(tmp_path, {"defaults": [{"slurm@slurm": "x"}, "_self_"], **MINIMAL}, "top.yaml")
    with pytest.raises(ConfigError) as info:
        load_config("top", config_dir=tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'slurm' / 'x.yaml'}:2: unquoted 10:00:00 is read by YAML as a base-60 "
        "number; quote it ('10:00:00')"
    )


def test_duplicate_key_is_an_error_not_last_one_wins(tmp_path: Path) -> None:
    path = write(tmp_path, "project:\n  name: a\n  name: b\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}:3:3: malformed YAML: found duplicate key 'name'")


def test_scalar_sweep_next_to_interpolations_is_a_config_error(tmp_path: Path) -> None:
    # Found by fuzz/loaders.py: `sweep: false` in a config with interpolations reached
    # OmegaConf.to_container with a bool and raised ValueError instead of a one-line error.
    path = tmp_path / "c.yaml"
    path.write_text(
        "project: {name: x, base_output_dir: ./out}\n"
        "backend: {class_name: CommandBackend, argv: [echo, '{name}']}\n"
        "sweep: false\n"
        "slurm: {env: {T: '${oc.muli:2,3}'}}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    # The same one line as a scalar sweep in a config without interpolations.
    assert str(info.value) == f"{path}: argument of type 'bool' is not iterable"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        # Found by fuzz/loaders.py: OmegaConf.create parses interpolations and raised
        # GrammarParseError outside the loader's OmegaConf error handling.
        ("slurm: {env: {T: '${'}}\n", ": slurm.env.T: "),
        # Found by fuzz/loaders.py: a list as sweep.base raised TypeError ({**base}).
        (
            "sweep: {axes: {lr: [1, 2]}, base: [{steps: 1}]}\n"
            "slurm: {env: {T: '${oc.muli:2,3}'}}\n",
            ": sweep.base: expected a mapping of key -> value, got list",
        ),
    ],
)
def test_fuzz_findings_in_the_config_loader_are_one_line(
    tmp_path: Path, extra: str, expected: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "project: {name: x, base_output_dir: ./out}\n"
        "backend: {class_name: CommandBackend, argv: [echo, '{name}']}\n" + extra
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path)) and expected in message


def test_override_of_a_key_not_in_the_config_suggests_the_plus_form(tmp_path: Path) -> None:
    megatron = {
        **MINIMAL,
        "backend": {"class_name": "MegatronBackend", "megatron": {"num_layers": 2}},
    }
    path = write(tmp_path, megatron)
    with pytest.raises(ConfigError) as plain:
        load_config(path, ["backend.megatron_path=/opt/Megatron-LM"])
    assert "\n" not in str(plain.value)
    assert str(plain.value).endswith("to add it, write +backend.megatron_path=/opt/Megatron-LM")
    # a Hydra config name: Hydra's own refusal, on one line, with the same suggestion
    with pytest.raises(ConfigError) as composed:
        load_config("autoexp", ["backend=command", "backend.megatron_path=/opt/Megatron-LM"])
    assert "\n" not in str(composed.value)
    assert "+backend.megatron_path=/opt/Megatron-LM" in str(composed.value)
