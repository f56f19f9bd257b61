"""serialise: the command line Megatron's parser reads back to exactly the configured values."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oellm_autoexp.backends.megatron.argspec import ArgSchema, ArgSpec
from oellm_autoexp.backends.megatron.cmdline import check_with_parser, serialise, serialise_one
from oellm_autoexp.backends.megatron.validate import normalise_args
from oellm_autoexp.errors import ConfigError

PREFIX = "backend.megatron"


def test_booleans_follow_the_parser_action(schema: ArgSchema) -> None:
    argv = serialise(
        {
            "swiglu": True,  # store_true
            "check_for_nan_in_loss_and_grad": False,  # store_false behind --no-...
            "overlap_moe_expert_parallel_comm": True,  # BooleanOptionalAction
            "calculate_per_token_loss": False,
            "use_flash_attn": False,  # the default: left out
            "overlap_grad_reduce": True,  # the default of a store_false: left out
        },
        schema,
    )
    assert argv == [
        "--swiglu",
        "--no-check-for-nan-in-loss-and-grad",
        "--overlap-moe-expert-parallel-comm",
        "--no-calculate-per-token-loss",
    ]


def test_values_lists_and_defaults(schema: ArgSchema, parser: argparse.ArgumentParser) -> None:
    args = normalise_args(
        {
            "num_layers": 24,
            "lr": -1e-05,
            "wandb_exp_name": "-starts-with-dash",
            "recompute_modules": [],  # nargs="*": the bare option gives []
            "hierarchical_context_parallel_sizes": [2, -4],
            "loss_weights": [-1e-05, 2.5],
            "log_interval": 100,  # default
            "cp_comm_type": ["p2p"],  # default list
        },
        schema,
        key_prefix=PREFIX,
    )
    argv = serialise(args, schema)
    assert argv == [
        "--num-layers=24",
        "--lr=-1e-05",
        "--wandb-exp-name=-starts-with-dash",
        "--recompute-modules",
        "--hierarchical-context-parallel-sizes",
        "2",
        "-4",
        "--loss-weights",
        "-0.00001",
        "2.5",
    ]
    ns = parser.parse_args(argv)
    assert ns.lr == -1e-05 and ns.loss_weights == [-1e-05, 2.5]
    assert ns.wandb_exp_name == "-starts-with-dash" and ns.recompute_modules == []


def test_type_bool_options_get_a_text_bool_reads_back(
    schema: ArgSchema, parser: argparse.ArgumentParser
) -> None:
    argv = serialise({"use_tp_pp_dp_mapping": True}, schema)
    assert argv == ["--use-tp-pp-dp-mapping=True"]
    assert parser.parse_args(argv).use_tp_pp_dp_mapping is True
    spec = schema.get("use_tp_pp_dp_mapping")
    assert spec is not None
    false_spec = dataclasses.replace(spec, default=True)  # as if the default were True
    assert serialise_one(false_spec, False) == ["--use-tp-pp-dp-mapping="]
    assert parser.parse_args(["--use-tp-pp-dp-mapping="]).use_tp_pp_dp_mapping is False
    with pytest.raises(ConfigError, match="expected true or false"):
        normalise_args({"use_tp_pp_dp_mapping": "False"}, schema, key_prefix=PREFIX)


def test_parser_check_maps_a_custom_type_failure_to_its_key(
    schema: ArgSchema, parser: argparse.ArgumentParser
) -> None:
    args = normalise_args({"pipeline_model_parallel_layout": "1,x"}, schema, key_prefix=PREFIX)
    with pytest.raises(ConfigError) as err:
        check_with_parser(
            parser,
            serialise(args, schema),
            schema,
            key_prefix=PREFIX,
            extra_key="backend.extra_args",
        )
    assert err.value.key == "backend.megatron.pipeline_model_parallel_layout"
    assert "invalid tuple_type value" in str(err.value)
    ok = normalise_args({"pipeline_model_parallel_layout": "(1,2,3)"}, schema, key_prefix=PREFIX)
    ns = check_with_parser(
        parser, serialise(ok, schema), schema, key_prefix=PREFIX, extra_key="backend.extra_args"
    )
    assert ns.pipeline_model_parallel_layout == (1, 2, 3)


def test_parser_check_reports_unknown_extra_tokens_on_extra_args(
    schema: ArgSchema, parser: argparse.ArgumentParser
) -> None:
    with pytest.raises(ConfigError) as err:
        check_with_parser(
            parser,
            ["--num-layers=2", "--no-such-flag"],
            schema,
            key_prefix=PREFIX,
            extra_key="backend.extra_args",
        )
    assert err.value.key == "backend.extra_args"
    assert "unrecognized arguments: --no-such-flag" in str(err.value)


# --- property: parse(serialise(args)) == args over the stand-in parser ------------------------

_NUMBER_INT = st.integers(min_value=-(10**15), max_value=10**15)
_FLOAT = st.floats(allow_nan=False, allow_infinity=True)
_LIST_FLOAT = st.floats(allow_nan=False, allow_infinity=False)
_TEXT = st.text(max_size=12)
_LIST_TEXT = _TEXT.filter(lambda s: not s.startswith("-"))


def _scalar(spec: ArgSpec, *, in_list: bool) -> st.SearchStrategy[Any]:
    if spec.choices is not None:
        return st.sampled_from([c for c in spec.choices if c is not None])
    if spec.value_type == "int":
        return _NUMBER_INT
    if spec.value_type == "float":
        return _LIST_FLOAT if in_list else _FLOAT
    if spec.value_type == "bool":
        return st.booleans()
    return _LIST_TEXT if in_list else _TEXT


def _value(spec: ArgSpec) -> st.SearchStrategy[Any] | None:
    if spec.kind == "bool_optional":
        return st.booleans()
    if spec.kind == "flag":
        options = [v for v in (spec.default, spec.const) if isinstance(v, bool)]
        return st.sampled_from(options)
    if spec.kind == "list":
        low = spec.nargs if isinstance(spec.nargs, int) else (1 if spec.nargs == "+" else 0)
        high = spec.nargs if isinstance(spec.nargs, int) else 4
        return st.lists(_scalar(spec, in_list=True), min_size=low, max_size=high)
    if spec.kind == "value" and spec.value_type != "custom":
        return _scalar(spec, in_list=False)
    return None  # custom type functions and unsupported actions are tested separately


def _args_strategy(schema: ArgSchema) -> st.SearchStrategy[dict[str, Any]]:
    optional = {s.dest: strat for s in schema if (strat := _value(s)) is not None}
    return st.fixed_dictionaries({}, optional=optional)


def test_parse_of_serialise_is_identity(schema: ArgSchema, parser: argparse.ArgumentParser) -> None:
    defaults = vars(parser.parse_args([]))
    dumped = ArgSchema.from_json(schema.to_json(), source="dumped schema")

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_args_strategy(schema))
    def check(args: dict[str, Any]) -> None:
        # generated values are already in normal form: validation accepts them unchanged
        assert normalise_args(args, schema, key_prefix=PREFIX) == args
        argv = serialise(args, schema)
        parsed = vars(parser.parse_args(argv))
        assert parsed == {**defaults, **args}
        # a schema dumped to JSON (the no-Megatron path) validates and writes the same argv
        assert normalise_args(args, dumped, key_prefix=PREFIX) == args
        assert serialise(args, dumped) == argv

    check()
