"""Hostile-input corpus: secrets found by value, in linear time (issue 23 §2).

Each case is a secret of a known shape under a name that says nothing (`NOTES`, a positional
argument): it must be redacted wherever aorta writes or prints it. Then the whole path for
real: a command workload whose process environment, `extra_env` and argv carry all of them,
grepped for in every file of the run directory, in `--dry-run` and in the output. And the
redaction of a megabyte of hostile text stays well under a second or two (it was quadratic:
a 29 KB base64 variable took 10.8 s).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import yaml

from aorta.instrumentation.redaction import REDACTED, redact_argv, redact_environ, redact_value

AORTA = str(Path(sys.executable).with_name("aorta"))
BEHAVE = str(Path(__file__).parents[1] / "runner" / "command" / "scripts" / "behave.py")

PEM_BODY = "MIIEowIBAAKCAQEA1x2y3zPemBodyLineThatIsSecret0123456789"

# (case, text as it appears, the secret part that must not survive)
SHAPES: list[tuple[str, str, str]] = [
    ("github", "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "A1b2C3d4E5f6G7h8I9j0K1l2"),
    ("github_pat", "github_pat_11ABCDEFG0_abcdefghijklmnopqrstuvwxyz01", "abcdefghijklmnopqrstu"),
    ("slack_bot", "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOp", "AbCdEfGhIjKlMnOp"),
    ("slack_user", "xoxp-2234567890-2234567890123-QrStUvWxYz012345", "QrStUvWxYz012345"),
    ("openai", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12", "Ab12Cd34Ef56Gh78Ij90"),
    ("anthropic", "sk-ant-api03-Zy98Xw76Vu54Ts32Rq10Po98", "Zy98Xw76Vu54Ts32Rq10"),
    ("huggingface", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "AbCdEfGhIjKlMnOpQrSt"),
    ("google", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "SyA1b2C3d4E5f6G7h8I9"),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    ),
    ("aws_key_id", "AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("aws_secret", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG"),
    (
        "pem",
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        PEM_BODY,
    ),
    (
        "pem_cut_short",
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}Cut",
        PEM_BODY,
    ),
    (
        "service_account_json",
        '{"type": "service_account", "private_key": "Svc\\nAcct\\nKeyMaterial42", "x": 1}',
        "KeyMaterial42",
    ),
    ("bearer", "Authorization: Bearer abcdef0123456789BearerTok", "abcdef0123456789Bearer"),
    (
        "amz_signature",
        "https://b.s3.amazonaws.com/k?X-Amz-Signature=5ig0123456789abcdef&X-Amz-Date=1",
        "5ig0123456789abcdef",
    ),
    ("netrc", "machine h.example login u password n3trcS3cretPw", "n3trcS3cretPw"),
    ("conn_pwd", "Server=db;Database=x;User Id=u;Pwd=c0nnS3cretA;", "c0nnS3cretA"),
    ("conn_password", "Server=db;Password=c0nnS3cretB;Encrypt=yes", "c0nnS3cretB"),
    (
        "slack_webhook",
        "https://hooks.slack.com/services/T00000000/B00000000/WebhookS3cretPath",
        "WebhookS3cretPath",
    ),
    ("token_query", "https://api.example/v1?token=qu3ryT0kenValue&x=1", "qu3ryT0kenValue"),
    ("url_password", "https://bob:UrlPassw0rd@example.org/x", "UrlPassw0rd"),
]

IDS = [case for case, _, _ in SHAPES]


@pytest.mark.parametrize(("case", "text", "secret"), SHAPES, ids=IDS)
def test_a_secret_is_found_by_its_value_under_any_name(case: str, text: str, secret: str) -> None:
    recorded = redact_value("NOTES", text)
    assert secret not in recorded and REDACTED in recorded


@pytest.mark.parametrize(("case", "text", "secret"), SHAPES, ids=IDS)
def test_a_secret_in_argv_is_found_by_its_value(case: str, text: str, secret: str) -> None:
    shown = redact_argv(["train.py", "--notes", text])
    assert not any(secret in word for word in shown)


@pytest.mark.parametrize(
    "argv",
    [
        ["--hf-token", "plainS3cret"],
        ["--api-key=plainS3cret"],
        ["--wandb_key", "plainS3cret"],
        ["-p", "x", "--db-password", "plainS3cret"],
    ],
)
def test_the_word_after_a_sensitive_flag_is_redacted(argv: list[str]) -> None:
    shown = redact_argv(["train.py", *argv, "--lr", "0.1"])
    assert "plainS3cret" not in " ".join(shown)
    assert shown[-2:] == ["--lr", "0.1"]  # the rest stays readable


def test_ordinary_values_stay_readable() -> None:
    environ = {
        "GIT_COMMIT": "3f786850e387550fdab836ed7e6dc881de23001b",  # 40 hex: not an AWS key
        "MODEL": "meta-llama/Llama-3-8B",
        "SKIP": "sk-1",  # too short to be a key
        "LOG": "loss 2.31 basic training step 10",
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    assert redact_environ(environ) == dict(sorted(environ.items()))


HOSTILE = {
    "base64_run": "QUJD" * 262_144,  # the shape that once took 10.8 s at 29 KB
    "key_chars_no_equals": "a" * 1_000_000,
    "dots_and_letters": "a." * 500_000,
    "dashes": "-" * 1_000_000,
    "flag_runs": "-a " * 333_333,
    "schemes": "a://" * 250_000,
    "schemes_with_colons": "a://b:" * 166_666 + "@",
    "jwt_prefixes": "eyJ" * 333_333,
    "pem_begins": "-----BEGIN PRIVATE KEY-----" * 37_000,
    "private_key_strings": '"private_key": "\\' * 60_000,
    "bearers": "bearer " * 140_000,
    "ats": "x@" * 500_000,
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_redaction_is_linear_on_a_megabyte_of_hostile_text(
    case: str, bounded: Callable[..., AbstractContextManager[None]]
) -> None:
    value = HOSTILE[case]
    # Linear: well under a second here; quadratic on 1 MB would take hours.
    with bounded(cpu_s=5):
        redact_value("NOTES", value)
        redact_argv(["--x", value])


def test_every_file_the_run_writes_is_free_of_every_secret(tmp_path: Path) -> None:
    extra_env = {f"EXTRA_{i}": text for i, (_, text, _) in enumerate(SHAPES)}
    argv_secrets = ["--hf-token", "argvS3cretOne", "--api-key=argvS3cretTwo"]
    recipe = {
        "schema_version": 1,
        "workload": {
            "command": [sys.executable, BEHAVE, "steps", "{steps}", *argv_secrets],
            "step_time": "jsonl",
        },
        "trials": 1,
        "steps": 3,
        "cells": [
            {"name": "base", "mitigations": ["none"], "environment": "local"},
            {
                "name": "extra",
                "mitigations": ["none"],
                "environment": "local",
                "extra_env": extra_env,
                "command_args": ["--wandb_key", "argvS3cretThree", "--notes", SHAPES[0][1]],
            },
        ],
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        **{f"HOST_{i}": text for i, (_, text, _) in enumerate(SHAPES)},
    }
    out = tmp_path / "out"
    outputs = []
    for extra in (["--dry-run"], []):
        done = subprocess.run(
            [AORTA, "triage", "run", "--recipe", str(path), "--output-dir", str(out), *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        outputs.append(done.stdout + done.stderr)
    (run_dir,) = [p.parent for p in out.rglob("recipe.resolved.yaml")]
    needles = [secret for _, _, secret in SHAPES] + [
        "argvS3cretOne",
        "argvS3cretTwo",
        "argvS3cretThree",
    ]
    # The recipe keeps the real values (a resume re-runs exactly what ran): owner-only.
    resolved = run_dir / "recipe.resolved.yaml"
    assert stat.S_IMODE(resolved.stat().st_mode) == 0o600
    checked = set()
    for written in run_dir.rglob("*"):
        if not written.is_file() or written == resolved:
            continue
        text = written.read_bytes().decode("utf-8", "replace")
        for needle in needles:
            assert needle not in text, f"{needle!r} in {written}"
        if written.suffix == ".json":
            assert stat.S_IMODE(written.stat().st_mode) & 0o077 == 0, written
        checked.add(written.name)
    assert {"host_env.json", "env.json", "trial_0.json", "matrix.json", "matrix.md"} <= checked
    for output in outputs:
        for needle in needles:
            assert needle not in output, needle
