"""Fixtures: the stand-in `megatron.training.arguments` put on sys.path for one test only.

The stand-in (``stand_in/megatron/training/arguments.py``) mirrors the structure of Megatron-LM's
argument module, so the backend imports and introspects it through the same code path it uses
for the real one. It is never on sys.path outside these fixtures.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from oellm_autoexp.backends.megatron.argspec import ArgSchema, schema_from_parser
from oellm_autoexp.backends.megatron.source import clear_caches, load_megatron_parser

STAND_IN = Path(__file__).with_name("stand_in")


def _forget_megatron() -> None:
    clear_caches()
    for name in [n for n in sys.modules if n == "megatron" or n.startswith("megatron.")]:
        del sys.modules[name]


@pytest.fixture
def megatron_importable(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Make the stand-in importable as `megatron.training.arguments` for this test."""
    _forget_megatron()
    monkeypatch.syspath_prepend(str(STAND_IN))
    yield STAND_IN
    _forget_megatron()


@pytest.fixture
def megatron_absent() -> Iterator[None]:
    """Make sure no `megatron` is importable (and none is cached) for this test."""
    _forget_megatron()
    try:
        import megatron  # noqa: F401
    except ImportError:
        pass
    else:  # a real Megatron-LM on this machine: the "absent" tests do not apply
        pytest.skip("a real megatron package is importable here")
    yield None
    _forget_megatron()


@pytest.fixture
def parser(megatron_importable: Path) -> argparse.ArgumentParser:
    """The stand-in Megatron parser, built through the backend's loader."""
    return load_megatron_parser()


@pytest.fixture
def schema(parser: argparse.ArgumentParser) -> ArgSchema:
    """The schema of the stand-in parser."""
    return schema_from_parser(parser, origin="stand-in Megatron parser")


@pytest.fixture
def schema_file(tmp_path: Path) -> Path:
    """The stand-in parser's schema, dumped as on a host where Megatron imports.

    Loaded from its file, not from sys.path, so that `megatron_absent` still holds.
    """
    spec = importlib.util.spec_from_file_location(
        "stand_in_arguments", STAND_IN / "megatron" / "training" / "arguments.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        spec.loader.exec_module(module)
    parser = module.add_megatron_arguments(argparse.ArgumentParser())
    path = tmp_path / "megatron-args.json"
    path.write_text(schema_from_parser(parser, origin="stand-in").to_json(), encoding="utf-8")
    return path
