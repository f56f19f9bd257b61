"""The shared error base, `ExitCode` and the timestamp formats."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from toolkit_core.errors import ExitCode, ToolkitError, UnknownNameError, UsageError
from toolkit_core.timestamps import dir_stamp, iso_stamp


def test_exit_codes_are_the_documented_numbers() -> None:
    assert [int(code) for code in ExitCode] == [0, 1, 2, 130]
    assert ToolkitError.exit_code == ExitCode.RUN_FAILED
    assert UsageError.exit_code == ExitCode.USAGE


class _UnknownColourError(UnknownNameError):
    kind = "colour"


def test_an_unknown_name_lists_the_known_ones_and_suggests_the_closest() -> None:
    error = _UnknownColourError("gren", ["red", "green"], key="style.colour")
    assert str(error) == (
        "style.colour: unknown colour 'gren'; did you mean 'green'? (known: green, red)"
    )
    assert isinstance(error, LookupError) and error.exit_code == ExitCode.USAGE
    assert "(none registered)" in str(_UnknownColourError("x", []))


def test_moments_are_written_in_utc_whatever_their_zone() -> None:
    moment = datetime(2026, 4, 28, 16, 12, 3, tzinfo=timezone(timedelta(hours=2)))
    assert dir_stamp(moment) == "2026-04-28T14-12-03"
    assert iso_stamp(moment) == "2026-04-28T14:12:03Z"
    assert iso_stamp(datetime(2026, 4, 28, 14, 12, 3)) == "2026-04-28T14:12:03Z"  # naive = UTC
