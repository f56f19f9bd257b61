"""ArgSchema: what introspecting a Megatron-style parser yields, and its JSON form."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from oellm_autoexp.backends.megatron.argspec import ArgSchema, schema_from_parser
from oellm_autoexp.backends.megatron.source import MegatronUnavailableError, load_megatron_parser
from oellm_autoexp.errors import ConfigError


def test_store_false_no_options_are_flags_on_their_dest(schema: ArgSchema) -> None:
    spec = schema.get("check_for_nan_in_loss_and_grad")
    assert spec is not None
    assert (spec.option, spec.kind, spec.const, spec.default) == (
        "--no-check-for-nan-in-loss-and-grad",
        "flag",
        False,
        True,
    )
    # the option spelling is not a destination
    assert "no_check_for_nan_in_loss_and_grad" not in schema


def test_boolean_optional_action_records_its_negative_form(schema: ArgSchema) -> None:
    spec = schema.get("overlap_moe_expert_parallel_comm")
    assert spec is not None
    assert spec.kind == "bool_optional"
    assert spec.negative_option == "--no-overlap-moe-expert-parallel-comm"


def test_lists_values_types_and_choices(schema: ArgSchema) -> None:
    hcp = schema.get("hierarchical_context_parallel_sizes")
    assert hcp is not None and (hcp.kind, hcp.nargs, hcp.value_type) == ("list", "+", "int")
    weights = schema.get("loss_weights")
    assert weights is not None and (weights.nargs, weights.value_type) == (2, "float")
    level = schema.get("timing_log_level")
    assert level is not None and level.choices == (0, 1, 2)
    fp8 = schema.get("fp8")  # --fp8-format stores into args.fp8
    assert fp8 is not None and fp8.option == "--fp8-format"


def test_enum_choices_are_member_names_and_custom_types_are_named(schema: ArgSchema) -> None:
    backend = schema.get("attention_backend")
    assert backend is not None
    assert backend.value_type == "custom"
    assert backend.choices == ("flash", "fused", "unfused", "local", "auto")
    assert backend.default == "auto"
    by_value = schema.get("non_persistent_ckpt_scope")  # type=CheckpointScope: built from values
    assert by_value is not None
    assert (by_value.choices, by_value.default) == (("global", "local"), "global")
    layout = schema.get("pipeline_model_parallel_layout")
    assert layout is not None and layout.type_name == "tuple_type"


def test_shared_dest_keeps_the_first_option_like_argparse(
    schema: ArgSchema, parser: argparse.ArgumentParser
) -> None:
    spec = schema.get("inference_max_batch_size")
    assert spec is not None
    assert (spec.option, spec.default) == ("--inference-max-requests", 8)
    assert parser.parse_args([]).inference_max_batch_size == spec.default


def test_append_action_is_marked_unsupported(schema: ArgSchema) -> None:
    spec = schema.get("extra_dataset")
    assert spec is not None and spec.kind == "unsupported" and spec.type_name == "_AppendAction"


def test_schema_covers_every_destination_of_the_parser(
    schema: ArgSchema, parser: argparse.ArgumentParser
) -> None:
    expected = set(vars(parser.parse_args([]))) - {"help"}
    assert set(schema.dests()) == expected


def test_json_round_trip_is_lossless(schema: ArgSchema, tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    path.write_text(schema.to_json(), encoding="utf-8")
    again = ArgSchema.load(path)
    assert again.specs == schema.specs
    assert again.origin == schema.origin


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "not a JSON argument schema"),
        ('{"format": "something-else", "args": []}', "not a Megatron argument schema"),
        (
            '{"format": "oellm-autoexp/megatron-args/1", "args": [{"dest": "x", "kind": "weird"}]}',
            "unknown kind 'weird'",
        ),
    ],
)
def test_malformed_schema_files_are_one_line_config_errors(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        ArgSchema.load(path)
    assert expected in str(err.value)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_legacy_parse_args_is_stopped_before_reading_argv(
    megatron_importable: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An older Megatron-LM offers only parse_args(extra_args_provider); its parser must be
    # captured without parsing sys.argv (which here would make argparse exit).
    legacy = tmp_path / "legacy_megatron_args.py"
    legacy.write_text(
        "import argparse\n"
        "from megatron.training import arguments as full\n"
        "def parse_args(extra_args_provider=None, ignore_unknown_args=False):\n"
        "    parser = argparse.ArgumentParser(allow_abbrev=False)\n"
        "    parser = full._add_network_size_args(parser)\n"
        "    parser = full._add_training_args(parser)\n"
        "    if extra_args_provider is not None:\n"
        "        parser = extra_args_provider(parser)\n"
        "    return parser.parse_args()\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", "--definitely-not-an-option"])
    try:
        parser = load_megatron_parser("legacy_megatron_args")
    finally:
        sys.modules.pop("legacy_megatron_args", None)
    schema = schema_from_parser(parser, origin="legacy")
    assert "num_layers" in schema and "train_iters" in schema
    assert "lr" not in schema  # only the groups the legacy module added


def test_missing_megatron_is_reported_not_raised_as_import_error(megatron_absent: None) -> None:
    with pytest.raises(
        MegatronUnavailableError, match=r"cannot import megatron\.training\.arguments"
    ):
        load_megatron_parser()
