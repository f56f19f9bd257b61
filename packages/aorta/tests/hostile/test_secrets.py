"""Hostile-input corpus: secrets never reach a record (issue 18 §6).

Each case is a variable a real cluster job carries; the secret text must not survive
redaction, while harmless neighbours (`PATH`, `PWD`, a URL without credentials) stay readable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aorta.cli.main import main
from aorta.instrumentation.redaction import REDACTED, redact_environ, redact_value

SECRET = "hunter2s3cret"

# (variable name, value): the value holds SECRET somewhere.
LEAKS: list[tuple[str, str]] = [
    ("GITHUB_PAT", SECRET),
    ("GH_PAT", SECRET),
    ("PGPASS", SECRET),
    ("PGPASSWORD", SECRET),
    ("DOCKER_PASS", SECRET),
    ("SSH_PASSPHRASE", SECRET),
    ("CI_JOB_JWT", SECRET),
    ("SLACK_WEBHOOK_URL", f"https://hooks.slack.com/services/T0/B0/{SECRET}"),
    ("DB_PWD", SECRET),
    (
        "AZURE_STORAGE_CONNECTION_STRING",
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={SECRET};"
        "EndpointSuffix=core.windows.net",
    ),
    ("AZURE_SAS", f"https://acct.blob.core.windows.net/c?sv=2020&sig={SECRET}&se=2030"),
    ("DATABASE_URL", f"jdbc:postgresql://db:5432/x?user=bob&password={SECRET}"),
    ("TRAIN_ARGS", f"--lr 0.1 --api-secret={SECRET} --steps 3"),
    ("TRAIN_ARGS2", f"--lr 0.1 --api-secret {SECRET} --steps 3"),
    ("HTTPS_PROXY", f"http://alice:p@ss{SECRET}@proxy.example:3128"),
    ("HTTP_PROXY", f"http://alice:pa/ss{SECRET}@proxy.example:3128/path"),
    ("PIP_EXTRA_INDEX_URL", f"https://u:{SECRET}@pypi.example/simple https://pypi.org/simple"),
]


@pytest.mark.parametrize(("name", "value"), LEAKS, ids=[n for n, _ in LEAKS])
def test_secret_is_redacted(name: str, value: str) -> None:
    recorded = redact_value(name, value)
    assert SECRET not in recorded
    assert REDACTED in recorded


def test_readable_parts_stay_readable() -> None:
    environ = {
        "PATH": "/usr/bin:/bin",
        "PWD": "/home/u",
        "OLDPWD": "/tmp",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "XLA_FLAGS": "--xla_gpu_autotune_level=0",
        "DOCS": "https://example.com/users/a@b",
        "HTTPS_PROXY": "http://alice:pa@ss@proxy.example:3128/x",
        "AZURE": "AccountName=acct;AccountKey=k;EndpointSuffix=core.windows.net",
    }
    recorded = redact_environ(environ)
    for name in ("PATH", "PWD", "OLDPWD", "CUDA_VISIBLE_DEVICES", "XLA_FLAGS", "DOCS"):
        assert recorded[name] == environ[name]
    assert recorded["HTTPS_PROXY"] == f"http://{REDACTED}@proxy.example:3128/x"
    assert recorded["AZURE"] == (
        f"AccountName=acct;AccountKey={REDACTED};EndpointSuffix=core.windows.net"
    )


@pytest.mark.usefixtures("plugin")
def test_extra_env_secret_stays_out_of_trial_jsons_and_matrix_json(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema_version: 1\nworkload: toy\ntrials: 2\nsteps: 2\ncells:\n"
        "  - name: base\n    mitigations: [none]\n    environment: local\n"
        f"    extra_env: {{HF_TOKEN: {SECRET}, MY_URL: 'https://u:{SECRET}@h/x', "
        "AORTA_TOY_FAIL_AT: '9'}\n"
    )
    out = tmp_path / "out"
    assert main(["triage", "run", "--recipe", str(recipe), "--output-dir", str(out)]) == 0
    written = [p for p in out.rglob("*.json")]
    assert any(p.name == "matrix.json" for p in written)
    assert any(p.parent.name == "base" or "trial" in p.name for p in written)
    for path in written:
        assert SECRET not in path.read_text(), path
    matrix = json.loads(next(p for p in written if p.name == "matrix.json").read_text())
    cell = matrix["cells"][0]
    assert cell["extra_env"]["HF_TOKEN"] == REDACTED
    assert cell["extra_env"]["AORTA_TOY_FAIL_AT"] == "9"  # harmless values stay readable
    assert cell["trials"][0]["env_applied"]["MY_URL"] == f"https://{REDACTED}@h/x"
