"""The resolvers upstream oellm-autoexp configs use: same values as upstream, and a safe oc.eval."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from oellm_autoexp.config.loader import load_config
from oellm_autoexp.config.resolvers import RESOLVERS, register_resolvers
from oellm_autoexp.errors import ConfigError

MINIMAL = {
    "project": {"name": "p", "base_output_dir": "out"},
    "backend": {"class_name": "CommandBackend", "argv": ["echo", "{name}"]},
}


def resolve(value: str, **context: Any) -> Any:
    from omegaconf import OmegaConf

    register_resolvers()
    cfg = OmegaConf.create({**context, "value": value})
    return OmegaConf.to_container(cfg, resolve=True)["value"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # the step count upstream's staged sweeps compute: ceil(tokens / (seq * gbs)) * 0.8
        ("${oc.eval:'int(((1000000+4096*256-1)//(4096*256))*(1-0.2))'}", 0),
        ("${oc.eval:'int(((50000000000+4096*256-1)//(4096*256))*(1-0.2))'}", 38147),
        ("${oc.eval:'(7+2-1)//2'}", 4),
        ("${oc.eval:'32*4'}", 128),
        ("${oc.eval:'round(2.567, 2)'}", 2.57),
        ("${oc.eval:'max(1, 3) if 2 > 1 else 0'}", 3),
        ("${oc.join:'-',[a,1,2.5]}", "a-1-2.5"),
        ("${oc.split:a/b/c,/}", ["a", "b", "c"]),
        ("${oc.slice:[1,2,3,4],1,3}", [2, 3]),
        ("${oc.tmpl:'run_%_x',7}", "run_7_x"),
        ("${oc.maptmpl:'--tag=%',[a,b]}", ["--tag=a", "--tag=b"]),
        ("${oc.mapkeytmpl:name,'n%',[1,2]}", [{"name": "n1"}, {"name": "n2"}]),
        ("${oc.mapkeyvaltmpl:'--%k=%v',{lr: 0.1, bs: 4}}", ["--lr=0.1", "--bs=4"]),
        ("${oc.mapvaltmpl:'v%v',{a: 1, b: 2}}", {"a": "v1", "b": "v2"}),
        ("${oc.mapextractkey:t,[{t: 1},{t: 5}]}", [1, 5]),
        ("${oc.mapcondtmpl:'\\-\\-.*','| %',' %',[--lr,0.1]}", ["| --lr", " 0.1"]),
        ("${oc.mapeval:${oc.maptmpl:'int(%*0.8)',[10,25]}}", [8, 20]),
        ("${oc.eq:3,3}", True),
        ("${oc.neq:a,a}", False),
        ("${oc.lt:1,2}", True),
        ("${oc.gt:1,2}", False),
        ("${oc.leq:2,2}", True),
        ("${oc.geq:1,2}", False),
        ("${oc.slurmtime:90061}", "1-1:1:1"),  # unpadded, as upstream writes it
        ("${oc.slurmtime:3600}", "0-1:0:0"),
        ("${oc.pad_iter:1000}", "iter_0001000"),
        ("${oc.if:false,yes,no}", "no"),  # upstream: the text false is false
        ("${oc.if:${flag},yes,no}", "yes"),
    ],
)
def test_resolvers_give_upstreams_values(expression: str, expected: Any) -> None:
    assert resolve(expression, flag=True) == expected


def test_timestring_is_fixed_within_a_process_and_shaped_like_upstreams() -> None:
    first = resolve("${oc.timestring:}")
    assert re.fullmatch(r"\d{8}_\d{6}_\d{3}", first)
    assert resolve("${oc.timestring:}") == first


def test_registering_twice_is_a_no_op_and_every_upstream_name_is_there() -> None:
    from omegaconf import OmegaConf

    register_resolvers()
    register_resolvers()
    upstream_names = ["slurmtime", "timestring", "join", "split", "slice", "eq", "neq", "lt"]
    upstream_names += ["gt", "leq", "geq", "tmpl", "maptmpl", "mapkeytmpl", "mapkeyvaltmpl"]
    upstream_names += ["mapvaltmpl", "mapextractkey", "mapcondtmpl", "mapeval", "pad_iter", "eval"]
    for name in (f"oc.{n}" for n in upstream_names):
        assert name in RESOLVERS and OmegaConf.has_resolver(name), name


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('touch PWNED')",  # a call of a name not in the table
        "open('/etc/passwd')",
        "().__class__.__bases__[0].__subclasses__()",  # attribute access and dunders
        "(1).__class__",
        "str(1).zfill(7)",  # a method of a value is an attribute access too
        "(lambda: 1)()",
        "import os",
        "[x for x in (1, 2)]",
        "int(x=1)",
        "os.getcwd",
        "eval('1')",
        "exec('1')",
    ],
)
def test_oc_eval_refuses_code_with_one_line_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expression: str
) -> None:
    monkeypatch.chdir(tmp_path)
    quoted = expression.replace("\\", "\\\\").replace("'", "\\'")
    data = {**MINIMAL, "metadata": {"steps": f"${{oc.eval:'{quoted}'}}"}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: metadata.steps: oc.eval: ")
    assert "not allowed" in message or "not a valid expression" in message or "name" in message
    assert not (tmp_path / "PWNED").exists()


def test_oc_eval_in_a_config_computes_a_megatron_style_step_count(tmp_path: Path) -> None:
    data = {
        **MINIMAL,
        "metadata": {
            "tokens": 10_000_000,
            "seq": 2048,
            "gbs": 64,
            "iters": "${oc.eval:'int((${metadata.tokens}+${metadata.seq}*${metadata.gbs}-1)"
            "//(${metadata.seq}*${metadata.gbs}))'}",
            "time": "${oc.slurmtime:${oc.muli:${metadata.iters},10}}",
        },
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    metadata = load_config(path).root.metadata
    assert metadata["iters"] == 77  # ceil(1e7 / 131072)
    assert metadata["time"] == "0-0:12:50"


def test_oc_eval_refuses_huge_numbers_and_texts() -> None:
    with pytest.raises(Exception, match="too large"):
        resolve("${oc.eval:'2 ** 10 ** 10'}")
    with pytest.raises(Exception, match="arithmetic needs numbers"):
        resolve("${oc.eval:'\"9\" * 100000'}")


def test_exclude_nodes_reads_a_node_list_file_each_time(tmp_path: Path) -> None:
    nodes = tmp_path / "exclude.txt"
    expression = f"${{oc.exclude_nodes:{nodes}}}"
    assert resolve(expression) is None  # no file yet: no --exclude at all
    nodes.write_text("# bad ones\nlrdn0001, lrdn0002\n\nlrdn0001 lrdn0003\n")
    assert resolve(expression) == "lrdn0001,lrdn0002,lrdn0003"
    nodes.write_text("lrdn0009\n")  # not cached: a monitor may have grown the list
    assert resolve(expression) == "lrdn0009"
    assert resolve(f"${{oc.exclude_nodes:{nodes},' '}}") == "lrdn0009"
    nodes.write_text("# only a comment\n")
    assert resolve(expression) is None
