"""The two ways the tools write a moment: as a directory or file name and as ISO text.

One helper so that run directories, archives and the timestamps recorded in JSON cannot drift
apart in format or time zone.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["dir_stamp", "iso_stamp", "utc", "utc_now"]

_DIR_FORMAT = "%Y-%m-%dT%H-%M-%S"  # no ':' in names (Windows, scp, make, tar's host:path)
_ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> datetime:
    """The current moment, timezone-aware, in UTC."""
    return datetime.now(UTC)


def utc(moment: datetime) -> datetime:
    """`moment` in UTC; a naive value is taken as UTC already.

    Converting a naive value with astimezone() would treat it as local time and shift every
    name by the machine's UTC offset.
    """
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def dir_stamp(moment: datetime) -> str:
    """`moment` as a name: `2026-04-28T14-12-03` (UTC, sorts in time order)."""
    return utc(moment).strftime(_DIR_FORMAT)


def iso_stamp(moment: datetime) -> str:
    """`moment` as ISO UTC text to the second: `2026-04-28T14:12:03Z`."""
    return utc(moment).strftime(_ISO_FORMAT)
