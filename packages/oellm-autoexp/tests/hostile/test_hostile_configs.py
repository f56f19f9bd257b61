"""Hostile configs (issue 18 §3, §4): each is refused with exit 2 and ONE line naming the file
and the key (or line:column), quickly and without allocating what the file asks for."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from oellm_autoexp.cli import main

EXE = Path(sys.executable).with_name("oellm-autoexp")


def _config(**sections: object) -> dict[str, object]:
    base: dict[str, object] = {
        "project": {"name": "p", "base_output_dir": "out"},
        "backend": {"class_name": "CommandBackend", "argv": ["echo", "{lr}"]},
        "sweep": {"axes": {"lr": [1, 2]}},
    }
    base.update(sections)
    return base


def _billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
        previous = name
    return "\n".join(lines) + "\n"


def _alias_chain() -> str:
    lines = ["a: &a " + "[" * 30 + "]" * 30]
    for i in range(40):
        previous = f"b{i - 1}" if i else "a"
        lines.append(f"b{i}: &b{i} " + "[" * 30 + f"*{previous}" + "]" * 30)
    return "\n".join(lines) + "\n"


def _write(text: str | bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / "bad.yaml"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    return make


def _fifo(folder: Path) -> Path:
    path = folder / "fifo.yaml"
    os.mkfifo(path)
    return path


def _dev_zero(folder: Path) -> Path:
    path = folder / "zero.yaml"
    path.symlink_to("/dev/zero")
    return path


def _directory(folder: Path) -> Path:
    path = folder / "dir.yaml"
    path.mkdir()
    return path


# (id, how to make the file, what the one line must say after "<file>")
FILE_CORPUS = [
    ("alias-bomb", _write(_billion_laughs()), ":7:4: more YAML nodes once aliases are expanded"),
    ("recursive-alias", _write("a: &x [*x]\n"), ":1:4: recursive alias"),
    (
        "alias-chain-depth",  # each document level is shallow; the expanded nesting is not
        _write(_alias_chain()),
        ":2:5: nested too deeply once aliases are expanded (limit 64;",
    ),
    ("deep-flow", _write("a: " + "[" * 5000 + "]" * 5000 + "\n"), ":1:67: nested too deeply"),
    (
        "deep-block",
        _write("".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "x: 1\n"),
        ":64:127: nested too deeply (limit 64; raise it with OELLM_AUTOEXP_MAX_YAML_DEPTH=N)",
    ),
    ("int-5000-digits", _write("a: " + "9" * 5000 + "\n"), ":1:4: integer of 5,000 characters"),
    ("huge-float", _write("a: 1e999\n"), ":1:4: number 1e999 overflows a float"),
    ("lone-surrogate", _write('a: "\\ud800"\n'), ":1:4: string holds a lone surrogate"),
    ("utf-16", _write("a: 1\n".encode("utf-16")), ": not UTF-8 text (byte 0)"),
    ("binary", _write(b"\x00\x01\x02\xff"), ": not UTF-8 text (byte 3)"),
    ("unhashable-key", _write("? [a]\n: 1\n"), ":1:3: malformed YAML: found unhashable key"),
    ("fifo", _fifo, ": not a regular file"),
    ("dev-zero-link", _dev_zero, ": not a regular file"),
    ("directory", _directory, ": not a regular file"),
]


@pytest.mark.parametrize(
    ("make", "expected"), [c[1:] for c in FILE_CORPUS], ids=[c[0] for c in FILE_CORPUS]
)
def test_a_hostile_config_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], Path], expected: str
) -> None:
    path = make(tmp_path)
    code = main(["plan", str(path), "--test-only", "never"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert err.startswith(f"oellm-autoexp: error: {path}{expected}"), err


def _plan_subprocess(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`plan <folder>/main.yaml` in its own process: a hang fails by timeout, not forever."""
    return subprocess.run(
        [str(EXE), "plan", str(folder / "main.yaml"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=folder,
    )


def test_a_selected_fifo_in_a_defaults_tree_does_not_hang_plan(tmp_path: Path) -> None:
    # Hydra would block forever opening it: we refuse it before Hydra runs.
    (tmp_path / "grp").mkdir()
    (tmp_path / "grp" / "o.yaml").write_text("a: 1\n")
    os.mkfifo(tmp_path / "grp" / "stale.yaml")
    (tmp_path / "main.yaml").write_text(
        yaml.safe_dump({"defaults": ["_self_", {"grp": "o"}], **_config()})
    )
    done = _plan_subprocess(tmp_path, "--test-only", "never", "grp=stale")
    assert done.returncode == 2
    assert (
        done.stderr == f"oellm-autoexp: error: {tmp_path / 'grp' / 'stale.yaml'}: not a regular "
        "file (a FIFO, device or directory)\n"
    )


def test_an_alias_bomb_in_a_hydra_group_file_is_refused_before_hydra_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "grp").mkdir()
    (tmp_path / "grp" / "bomb.yaml").write_text(_billion_laughs())
    (tmp_path / "main.yaml").write_text(
        yaml.safe_dump({"defaults": ["_self_", {"grp": "bomb"}], **_config()})
    )
    code = main(["plan", str(tmp_path / "main.yaml"), "--test-only", "never"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"oellm-autoexp: error: {tmp_path / 'grp' / 'bomb.yaml'}:7:4: more YAML")


def test_the_files_the_defaults_select_are_bounded_and_the_limit_can_be_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "grp").mkdir()
    for i in range(4):  # a chain: main -> grp/o0 -> grp/o1 -> grp/o2 -> grp/o3
        defaults = {"defaults": [f"o{i + 1}"]} if i < 3 else {}
        text = yaml.safe_dump({**defaults, "metadata": {f"x{i}": 1}})
        (tmp_path / "grp" / f"o{i}.yaml").write_text("# @package _global_\n" + text)
    for i in range(20):  # options nobody selects do not count (and are never read)
        (tmp_path / "grp" / f"other{i}.yaml").write_text("x: 1\n")
    out = {"project": {"name": "p", "base_output_dir": str(tmp_path / "out")}}
    (tmp_path / "main.yaml").write_text(
        yaml.safe_dump({"defaults": ["_self_", {"grp": "o0"}], **_config(**out)})
    )
    monkeypatch.setenv("OELLM_AUTOEXP_MAX_TREE_FILES", "4")
    assert main(["plan", str(tmp_path / "main.yaml"), "--test-only", "never"]) == 2
    assert (
        "the defaults lists select more YAML files than the limit 4; raise it with "
        "OELLM_AUTOEXP_MAX_TREE_FILES=N" in capsys.readouterr().err
    )
    monkeypatch.setenv("OELLM_AUTOEXP_MAX_TREE_FILES", "5")
    assert main(["plan", str(tmp_path / "main.yaml"), "--test-only", "never"]) == 0
    composed = yaml.safe_load(next((tmp_path / "out").rglob("config.yaml")).read_text())
    assert composed["metadata"] == {"x0": 1, "x1": 1, "x2": 1, "x3": 1}  # the whole chain


def _hostile_option_tree(tmp_path: Path) -> dict[str, Path]:
    """A config folder whose group `grp` offers one good option and hostile ones."""
    grp = tmp_path / "grp"
    grp.mkdir()
    (grp / "good.yaml").write_text("# @package _global_\nmetadata: {chosen: good}\n")
    os.mkfifo(grp / "fifo.yaml")
    with (grp / "huge.yaml").open("wb") as handle:  # sparse: 100 MB that cost no disk
        handle.truncate(100 << 20)
    (grp / "bomb.yaml").write_text(_billion_laughs())
    (grp / "broken.yaml").write_text("a: [1, 2\n")
    (tmp_path / "stray").mkdir()
    os.mkfifo(tmp_path / "stray" / "pipe.yaml")  # not even a group the config names
    out = {"project": {"name": "p", "base_output_dir": str(tmp_path / "out")}}
    (tmp_path / "main.yaml").write_text(
        yaml.safe_dump({"defaults": ["_self_", {"grp": "good"}], **_config(**out)})
    )
    return {name: grp / f"{name}.yaml" for name in ("fifo", "huge", "bomb", "broken")}


def test_hostile_files_no_defaults_list_selects_are_never_read(tmp_path: Path) -> None:
    _hostile_option_tree(tmp_path)
    started = time.monotonic()
    done = _plan_subprocess(tmp_path, "--test-only", "never")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30  # a read of the FIFO would block forever
    composed = yaml.safe_load(next((tmp_path / "out").rglob("config.yaml")).read_text())
    assert composed["metadata"] == {"chosen": "good"}


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("huge", ": file of 104,857,600 bytes is larger than the limit 16,777,216"),
        ("bomb", ":7:4: more YAML nodes once aliases are expanded than the limit"),
        ("broken", ":2:1: malformed YAML: "),
    ],
)
def test_a_hostile_option_selected_on_the_command_line_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, expected: str
) -> None:
    files = _hostile_option_tree(tmp_path)
    code = main(["plan", str(tmp_path / "main.yaml"), "--test-only", "never", f"grp={option}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"oellm-autoexp: error: {files[option]}{expected}"), err
    assert err.count("\n") == 1


def test_an_option_the_command_line_replaces_is_not_read(tmp_path: Path) -> None:
    _hostile_option_tree(tmp_path)
    main_yaml = tmp_path / "main.yaml"
    data = yaml.safe_load(main_yaml.read_text())
    data["defaults"] = ["_self_", {"grp": "fifo"}]  # the default would block ...
    main_yaml.write_text(yaml.safe_dump(data))
    # ... but the command line picks another option, so Hydra never opens it, nor do we.
    done = _plan_subprocess(tmp_path, "--test-only", "never", "grp=good")
    assert done.returncode == 0, done.stderr


def test_a_selected_file_linking_outside_the_config_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configs, outside = tmp_path / "configs", tmp_path / "elsewhere.yaml"
    (configs / "grp").mkdir(parents=True)
    outside.write_text("a: 1\n")
    (configs / "grp" / "o.yaml").symlink_to(outside)
    (configs / "main.yaml").write_text(
        yaml.safe_dump({"defaults": ["_self_", {"grp": "o"}], **_config()})
    )
    assert main(["plan", str(configs / "main.yaml"), "--test-only", "never"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"oellm-autoexp: error: {configs / 'grp' / 'o.yaml'}: a link to {outside}, outside the "
        f"config folder {configs}; copy the file in\n"
    )


def _plan_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: dict[str, object]
) -> tuple[int, str]:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    code = main(
        ["plan", str(path), f"project.base_output_dir={tmp_path / 'out'}", "--test-only", "never"]
    )
    err = capsys.readouterr().err
    assert err.count("\n") <= 1, err
    return code, err


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            {
                "restart_policies": [
                    {
                        "class_name": "CheckpointRestartPolicy",
                        "checkpoint_glob": "{output_dir.__class__}/x",
                    }
                ]
            },
            "checkpoint_glob: bad template '{output_dir.__class__}/x': {output_dir.__class__}: "
            "attribute and index access are not allowed",
        ),
        (
            {"sweep": {"axes": {"lr": [1, 2]}, "name_template": "{lr.__class__}"}},
            "sweep.name_template: cannot render '{lr.__class__}' for job 0: ValueError "
            "{lr.__class__}: attribute and index access are not allowed",
        ),
        (
            {"sweep": {"axes": {"lr": [1, 2]}, "name_template": "j{lr[0]}"}},
            "attribute and index access are not allowed",
        ),
        (
            {
                "backend": {
                    "class_name": "CommandBackend",
                    "argv": ["echo", "{name.__init__.__globals__}"],
                }
            },
            "backend.argv[1]: bad template",
        ),
        (
            {"backend": {"class_name": "CommandBackend", "argv": ["echo", "{lr:>1500000000}"]}},
            "width or precision above the limit 1,000; raise it with "
            "OELLM_AUTOEXP_MAX_FORMAT_WIDTH=N",
        ),
        (
            {"sweep": {"axes": {"lr": [1, 2]}, "name_template": "j{lr:.{index}}"}},
            "nested fields in a format spec are not allowed",
        ),
        (
            {
                "sweep": {"axes": {f"a{i}": list(range(10)) for i in range(7)}},
                "backend": {"class_name": "CommandBackend", "argv": ["echo"]},
            },
            "sweep.axes: the sweep has 10,000,000 combinations, more than the limit 100,000; "
            "raise it with OELLM_AUTOEXP_MAX_JOBS=N",
        ),
        (
            {
                "sweep": {"axes": {f"a{i}": list(range(10)) for i in range(30)}},
                "backend": {"class_name": "CommandBackend", "argv": ["echo"]},
            },
            "the sweep has about 10^30 combinations",
        ),
        (
            {"slurm": {"sbatch": {"nodes": -2}}},
            "slurm.sbatch.nodes: expected a count of at least 1",
        ),
        (
            {"slurm": {"sbatch": {"nodes": 0}}},
            "slurm.sbatch.nodes: expected a count of at least 1",
        ),
        (
            {
                "monitoring": {
                    "class_name": "LogMonitor",
                    "termination_str": "ok",
                    "poll_interval_seconds": 0,
                }
            },
            "monitoring.poll_interval_seconds: must be at least 0.1 seconds, got 0",
        ),
        (
            {
                "monitoring": {
                    "class_name": "LogMonitor",
                    "termination_str": "ok",
                    "poll_interval_seconds": -5,
                }
            },
            "monitoring.poll_interval_seconds: must be at least 0.1 seconds",
        ),
        (
            {
                "monitoring": {
                    "class_name": "LogMonitor",
                    "termination_str": "ok",
                    "restart_backoff_seconds": -1,
                }
            },
            "monitoring.restart_backoff_seconds: must be >= 0",
        ),
        (
            {
                "monitoring": {
                    "class_name": "LogMonitor",
                    "termination_str": "ok",
                    "log_signals": [{"name": "x", "pattern": "(a)\\1"}],
                }
            },
            "monitoring.log_signals[0].pattern: invalid regex for RE2 (no backreferences or "
            "lookaround): invalid escape sequence: \\1",
        ),
    ],
    ids=[
        "checkpoint-glob-attribute",
        "attribute-access",
        "index-access",
        "argv-attribute-access",
        "format-width",
        "nested-spec",
        "sweep-10^7",
        "sweep-10^30",
        "nodes-negative",
        "nodes-zero",
        "poll-zero",
        "poll-negative",
        "backoff-negative",
        "regex-backreference",
    ],
)
def test_hostile_values_are_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], section: dict[str, object], expected: str
) -> None:
    code, err = _plan_config(tmp_path, capsys, _config(**section))
    assert code == 2
    assert expected in err, err
    assert err.startswith(f"oellm-autoexp: error: {tmp_path / 'c.yaml'}: "), err
    assert not (tmp_path / "out" / "plans").exists()


def test_the_sweep_limit_can_be_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _config(sweep={"axes": {"lr": list(range(12))}})
    monkeypatch.setenv("OELLM_AUTOEXP_MAX_JOBS", "10")
    code, err = _plan_config(tmp_path, capsys, data)
    assert code == 2 and "12 combinations, more than the limit 10" in err
    monkeypatch.setenv("OELLM_AUTOEXP_MAX_JOBS", "12")
    assert _plan_config(tmp_path, capsys, data)[0] == 0


def test_a_newline_in_an_override_is_shown_escaped_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _plan_config(tmp_path, capsys, _config())
    assert code == 0
    path = tmp_path / "c.yaml"
    assert main(["plan", str(path), "project.name=a\nb"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"oellm-autoexp: error: {path}: override 'project.name=a\\nb' contains a control "
        "character (newline, NUL, ...); no config value can carry one\n"
    )


def test_a_300_kb_bad_name_is_shortened(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _plan_config(
        tmp_path, capsys, _config(project={"name": "x" * 300_000 + "/", "base_output_dir": "out"})
    )
    assert code == 2
    assert "project.name" in err and "characters cut]" in err
    assert len(err) < 1200


def test_a_bad_flag_value_is_one_line_without_the_usage_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "c.yaml", "--test-only", "bogus"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "oellm-autoexp: error: Invalid value for '--test-only': 'bogus' is not one of 'auto', "
        "'always', 'never'. (see oellm-autoexp plan --help)\n"
    )


def test_hydra_user_warnings_do_not_reach_the_user_when_composition_fails(tmp_path: Path) -> None:
    (tmp_path / "grp").mkdir()
    (tmp_path / "grp" / "o.yaml").write_text("a: 1\n")
    (tmp_path / "main.yaml").write_text(yaml.safe_dump({"defaults": [{"grp": "o"}], **_config()}))
    done = _plan_subprocess(tmp_path, "no.such.key=1")
    assert done.returncode == 2
    assert "UserWarning" not in done.stderr and "warnings.warn" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_a_selected_link_loop_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "grp").mkdir()
    (tmp_path / "grp" / "a.yaml").symlink_to(tmp_path / "grp" / "b.yaml")
    (tmp_path / "grp" / "b.yaml").symlink_to(tmp_path / "grp" / "a.yaml")
    (tmp_path / "main.yaml").write_text(
        yaml.safe_dump({"defaults": ["_self_", {"grp": "a"}], **_config()})
    )
    assert main(["plan", str(tmp_path / "main.yaml"), "--test-only", "never"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"oellm-autoexp: error: {tmp_path / 'grp' / 'a.yaml'}: cannot resolve")
    assert err.count("\n") == 1


def test_a_sweep_base_with_a_number_as_key_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by `make fuzz`: with an interpolation in the config, the derived-value split
    # walked the keys as dotted text and crashed on the int.
    data = _config(
        sweep={"axes": {"lr": [1, 2]}, "base": {1410: "x"}},
        slurm={"env": {"TOTAL": "${oc.env:HOME}"}},
    )
    code, err = _plan_config(tmp_path, capsys, data)
    assert code == 2
    assert err.endswith(
        "c.yaml: sweep.base: expected parameter names (text) as keys, got int 1410\n"
    )


def _searchpath_tree(tmp_path: Path, searchpath: list[str] | None) -> Path:
    """main.yaml selecting `grp: bomb`, a file only the search-path folder `extra` has."""
    extra = tmp_path / "extra"
    (extra / "grp").mkdir(parents=True)
    (extra / "grp" / "bomb.yaml").write_text(_billion_laughs())
    config = tmp_path / "conf"
    config.mkdir()
    hydra = {"hydra": {"searchpath": searchpath}} if searchpath is not None else {}
    (config / "main.yaml").write_text(
        yaml.safe_dump({"defaults": ["_self_", {"grp": "bomb"}], **hydra, **_config()})
    )
    return extra / "grp" / "bomb.yaml"


@pytest.mark.parametrize("form", ["file-url", "plain-path", "command-line"])
def test_an_alias_bomb_found_through_hydra_searchpath_is_refused(tmp_path: Path, form: str) -> None:
    """Hydra reads group files from `hydra.searchpath` folders with its own loader; they must
    pass ours first (a 10^6-node bomb there hung `plan` for minutes)."""
    extra = str(tmp_path / "extra")
    entry = {"file-url": f"file://{extra}", "plain-path": extra, "command-line": "pkg://nowhere"}
    bomb = _searchpath_tree(tmp_path, [entry[form]])
    args = [f"hydra.searchpath=[file://{extra}]"] if form == "command-line" else []
    started = time.monotonic()
    done = _plan_subprocess(tmp_path / "conf", "--test-only", "never", *args)
    assert time.monotonic() - started < 30
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"oellm-autoexp: error: {bomb}:7:4: more YAML nodes"), done.stderr
    assert done.stderr.count("\n") == 1


def test_a_hydra_searchpath_interpolation_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _searchpath_tree(tmp_path, ["file://${oc.env:HOME}/configs"])
    code = main(["plan", str(tmp_path / "conf" / "main.yaml"), "--test-only", "never"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "hydra.searchpath" in err and "is an interpolation" in err


def test_a_plain_group_file_through_hydra_searchpath_still_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the plan goes to ./out
    bomb = _searchpath_tree(tmp_path, [f"file://{tmp_path / 'extra'}"])
    bomb.write_text("# @package _global_\nproject:\n  name: from_searchpath\n")
    code = main(["plan", str(tmp_path / "conf" / "main.yaml"), "--test-only", "never"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "from_searchpath" in out + err


def test_an_output_dir_below_a_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "main.yaml").write_text(yaml.safe_dump(_config()))
    argv = ["plan", str(tmp_path / "main.yaml"), "--test-only", "never"]
    code = main([*argv, "project.base_output_dir=/dev/null/x"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("oellm-autoexp: error: cannot write the plan: /dev/null/x: Not a dir")
