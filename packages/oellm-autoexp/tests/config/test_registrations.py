"""A config imports only the registering modules its class names need (fresh interpreters)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from oellm_autoexp.config.registrations import REGISTERED_IN

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _fresh(code: str) -> object:
    """Run `code` in a new interpreter; the JSON it prints last."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_map_names_exactly_what_importing_every_module_registers() -> None:
    registered = _fresh(
        """
        import json
        from compoconf import registered
        from oellm_autoexp.backends.base import BackendInterface
        from oellm_autoexp.config.interfaces import MonitorInterface, RestartPolicyInterface
        from oellm_autoexp.config.registrations import load_registrations
        load_registrations()
        print(json.dumps(sorted(
            name
            for interface in (BackendInterface, MonitorInterface, RestartPolicyInterface)
            for name in registered(interface)
        )))
        """
    )
    assert registered == sorted(REGISTERED_IN)


@pytest.mark.parametrize("module", sorted(set(REGISTERED_IN.values())))
def test_importing_a_mapped_module_alone_registers_its_names(module: str) -> None:
    names = sorted(name for name, where in REGISTERED_IN.items() if where == module)
    registered = _fresh(
        f"""
        import importlib, json
        from compoconf import registered
        importlib.import_module({module!r})
        print(json.dumps(sorted(n for names in registered().values() for n in names)))
        """
    )
    assert isinstance(registered, list)
    assert set(names) <= set(registered)


def test_a_command_backend_config_leaves_megatron_and_the_session_store_unimported() -> None:
    loaded = _fresh(
        f"""
        import json, sys
        from oellm_autoexp.config.loader import load_config
        root = load_config({str(EXAMPLES / "hello_sweep.yaml")!r}).root
        print(json.dumps([type(root.backend).__name__, type(root.monitoring).__name__,
                          sorted(m for m in sys.modules if m.startswith((
                              "oellm_autoexp.backends.megatron", "oellm_autoexp.persistence")))]))
        """
    )
    assert loaded == ["CommandBackendConfig", "LogMonitorConfig", []]


def test_an_unknown_class_name_still_lists_every_builtin_name(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "project: {name: p, base_output_dir: out}\n"
        "backend: {class_name: CommandBackend, argv: [echo]}\n"
        "restart_policies: [{class_name: AlwaysRestart}]\n"
    )
    message = _fresh(
        f"""
        import json
        from oellm_autoexp.config.loader import load_config
        from oellm_autoexp.errors import ConfigError
        try:
            load_config({str(config)!r})
        except ConfigError as exc:
            print(json.dumps(str(exc)))
        """
    )
    assert isinstance(message, str)
    assert "restart_policies[0].class_name" in message
    assert "did you mean 'AlwaysRestartPolicy'" in message
    assert "CheckpointRestartPolicy" in message  # the whole list, not only what was imported
