"""normalise_args: closest valid name for unknown ones; type and choice checks, one line each."""

from __future__ import annotations

from typing import Any

import pytest

from oellm_autoexp.backends.megatron.argspec import ArgSchema
from oellm_autoexp.backends.megatron.validate import normalise_args
from oellm_autoexp.errors import ConfigError

PREFIX = "backend.megatron"


def _error(schema: ArgSchema, args: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        normalise_args(args, schema, key_prefix=PREFIX)
    assert "\n" not in str(err.value)
    return err.value


def test_unknown_argument_names_the_key_and_the_closest_valid_name(schema: ArgSchema) -> None:
    err = _error(schema, {"num_layers": 2, "num_atention_heads": 4})
    assert err.key == "backend.megatron.num_atention_heads"
    assert (
        "unknown Megatron argument 'num_atention_heads'; did you mean 'num_attention_heads'?"
        in str(err)
    )
    assert "stand-in Megatron parser" in str(err)  # which parser said so


def test_option_spelling_is_pointed_at_its_destination_name(schema: ArgSchema) -> None:
    err = _error(schema, {"no-check-for-nan-in-loss-and-grad": True})
    assert "did you mean" in str(err) or "write it as" in str(err)
    err = _error(schema, {"global-batch-size": 8})
    assert "write it as 'global_batch_size'" in str(err)
    assert "--global-batch-size" in str(err)


def test_names_valid_elsewhere_are_suggested_too(schema: ArgSchema) -> None:
    with pytest.raises(ConfigError, match="did you mean 'entrypoint'"):
        normalise_args({"entrypont": "x.py"}, schema, key_prefix=PREFIX, other_keys=["entrypoint"])
    with pytest.raises(ConfigError) as err:
        normalise_args({"entrypoint": "x.py"}, schema, key_prefix=PREFIX, other_keys=["entrypoint"])
    assert str(err.value) == (
        "backend.megatron.entrypoint: 'entrypoint' is not a Megatron argument but a setting of "
        "the enclosing section; move it one level up"
    )


@pytest.mark.parametrize(
    ("args", "key", "fragment"),
    [
        ({"num_layers": "24"}, "num_layers", "expected an integer for --num-layers, got '24'"),
        ({"num_layers": 2.5}, "num_layers", "expected an integer"),
        ({"num_layers": True}, "num_layers", "got the boolean True"),
        ({"lr": "3e-4"}, "lr", "expected a number for --lr, got '3e-4'"),
        ({"swiglu": "yes"}, "swiglu", "expected true or false for --swiglu"),
        ({"optimizer": "adamw"}, "optimizer", "'adamw' is not a valid choice for --optimizer"),
        ({"timing_log_level": 5}, "timing_log_level", "choose from 0, 1, 2"),
        (
            {"attention_backend": "flashy"},
            "attention_backend",
            "not a valid choice for --attention-backend",
        ),
        ({"cp_comm_type": "p2p"}, "cp_comm_type", "expected a list for --cp-comm-type"),
        ({"cp_comm_type": []}, "cp_comm_type", "needs at least one value"),
        ({"loss_weights": [1.0]}, "loss_weights", "takes exactly 2 values, got 1"),
        (
            {"hierarchical_context_parallel_sizes": [2, "x"]},
            "hierarchical_context_parallel_sizes[1]",
            "expected an integer",
        ),
        ({"data_path": ["0.5", "--weird"]}, "data_path[1]", "would read it as an option"),
        (
            {"no_save_optim": False},
            "no_save_optim",
            "can only be switched to True (its default is None)",
        ),
        ({"extra_dataset": "a"}, "extra_dataset", "_AppendAction"),
    ],
)
def test_bad_values_are_one_line_with_the_key_path(
    schema: ArgSchema, args: dict[str, Any], key: str, fragment: str
) -> None:
    err = _error(schema, args)
    assert err.key == f"{PREFIX}.{key}"
    assert fragment in str(err)


def test_values_are_normalised_to_what_megatron_parses(schema: ArgSchema) -> None:
    out = normalise_args(
        {
            "num_layers": 24.0,  # an integral float, e.g. from a resolver
            "lr": 3,  # an int for a float option
            "split": 98,  # a number for a string option becomes its text
            "data_path": [0.3, "/data/a", 0.7, "/data/b"],
            "save": None,  # None: leave Megatron's default
            "bias_swiglu_fusion": False,
            "attention_backend": "flash",
        },
        schema,
        key_prefix=PREFIX,
    )
    assert out == {
        "num_layers": 24,
        "lr": 3.0,
        "split": "98",
        "data_path": ["0.3", "/data/a", "0.7", "/data/b"],
        "bias_swiglu_fusion": False,
        "attention_backend": "flash",
    }
    assert type(out["num_layers"]) is int and type(out["lr"]) is float
