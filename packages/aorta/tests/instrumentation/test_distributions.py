"""`system.installed_distributions` reads Name and Version without the email parser: it must
give what `importlib.metadata` gives, for every distribution installed here and for the
metadata shapes where a plain header scan could differ (folded values, CRLF, a body, a
non-header line, an empty METADATA next to a PKG-INFO, a missing Version)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from aorta.instrumentation import system
from toolkit_core.metadata_headers import plain_headers


def _expected(dist: importlib.metadata.Distribution) -> tuple[str | None, str | None]:
    return dist.metadata["Name"], dist.version


def test_every_installed_distribution_reads_as_importlib_reads_it() -> None:
    dists = list(importlib.metadata.distributions())
    assert len(dists) > 10  # the test venv: aorta, click, pytest, ...
    for dist in dists:
        assert system._name_and_version(dist) == _expected(dist), dist._path  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"METADATA": "Metadata-Version: 2.1\nName: plain\nVersion: 1.0\n\nName: body\n"},
            ("plain", "1.0"),
        ),
        ({"METADATA": "Name: crlf\r\nVersion: 2.0 \r\n\r\nbody"}, ("crlf", "2.0 ")),
        ({"METADATA": "Name: lone-cr\rVersion:\t3.0\r\r"}, ("lone-cr", "3.0")),
        ({"METADATA": "Name: folded\nVersion: 4.0\n  .post1\n\n"}, None),  # importlib redents it
        ({"METADATA": "Name: other-fold\nSummary: a\n  b\nVersion: 5.0\n"}, ("other-fold", "5.0")),
        ({"METADATA": "Name: twice\nVersion: 6.0\nVersion: 7.0\n"}, ("twice", "6.0")),
        (
            {"METADATA": "Name: licence\nVersion: 1\nLicense: a\n  b\nnot a header\n"},
            ("licence", "1"),
        ),
        ({"METADATA": "name: lower\nVERSION: 8.0"}, ("lower", "8.0")),
        ({"METADATA": "Name: no-version\n"}, ("no-version", None)),
        ({"METADATA": "not a header\nName: after\nVersion: 1\n"}, None),
        ({"METADATA": "From someone\nName: unixfrom\nVersion: 1\n"}, None),
        ({"METADATA": "", "PKG-INFO": "Name: pkg-info\nVersion: 9.0\n"}, ("pkg-info", "9.0")),
    ],
)
def test_header_shapes_match_importlib(
    tmp_path: Path, files: dict[str, str], expected: tuple[str | None, str | None] | None
) -> None:
    meta = tmp_path / "x-0.dist-info"
    meta.mkdir()
    for name, text in files.items():
        (meta / name).write_bytes(text.encode())
    dist = importlib.metadata.PathDistribution(meta)
    assert system._name_and_version(dist) == _expected(dist)
    # None: a shape left to the email parser; otherwise the scan's own answer.
    text = files.get("METADATA") or files["PKG-INFO"]
    headers = plain_headers(text)
    if expected is None:
        assert headers is None
    else:
        assert headers is not None
        assert (headers.get("name"), headers.get("version")) == expected == _expected(dist)


def test_a_broken_distribution_is_a_problem_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = tmp_path / "good-1.0.dist-info"
    good.mkdir()
    (good / "METADATA").write_text("Name: good\nVersion: 1.0\n", encoding="utf-8")
    bad = tmp_path / "bad-1.0.dist-info"
    bad.mkdir()
    (bad / "METADATA").write_bytes(b"Name: bad\nVersion: \xff\n")  # not UTF-8
    monkeypatch.setattr(
        importlib.metadata,
        "distributions",
        lambda: [importlib.metadata.PathDistribution(p) for p in (bad, good)],
    )
    found, problems = system.installed_distributions()
    assert found == {"good": "1.0"}
    assert len(problems) == 1 and problems[0].startswith("UnicodeDecodeError")
