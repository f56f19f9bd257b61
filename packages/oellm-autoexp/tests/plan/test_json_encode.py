"""`reusable_encoder` writes what `json.JSONEncoder` writes, and survives a failed encode."""

from __future__ import annotations

import json
import math

import pytest

from oellm_autoexp.json_encode import reusable_encoder

SAMPLES = [
    {"lr": 1e-07, "seed": 3, "name": 'a\u00e9"b\n', "nested": {"z": [1, 2.5, None], "a": True}},
    [1, "two", {"b": False, "a": -0.0}],
    "plain",
    12345678901234567890,
    0.1,
]


@pytest.mark.parametrize("options", [{}, {"sort_keys": True, "separators": (",", ":")}])
def test_same_text_as_the_standard_encoder(options: dict) -> None:
    encode = reusable_encoder(**options)
    reference = json.JSONEncoder(allow_nan=False, **options)
    for sample in SAMPLES:
        assert encode(sample) == reference.encode(sample)


def test_rejects_what_the_standard_encoder_rejects_and_stays_usable() -> None:
    encode = reusable_encoder()
    circular: dict = {"a": [1]}
    circular["a"].append(circular)
    with pytest.raises(ValueError, match="Circular"):
        encode(circular)
    with pytest.raises(ValueError):
        encode({"x": math.nan})
    with pytest.raises(TypeError):
        encode({"x": object()})
    # The objects of the failed encodes are no longer in the circular-reference table.
    circular["a"].pop()
    assert encode(circular) == '{"a": [1]}'
