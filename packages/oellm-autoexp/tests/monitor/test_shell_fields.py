"""Command templates whose values travel through the environment (issue 18 §1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oellm_autoexp.monitor.shell_fields import (
    CommandTemplateError,
    compile_command,
    run_with_fields,
)

FIELDS = ("job", "line")
HOSTILE = ["$(touch PWNED)", "`touch PWNED`", "a'b\"c", "x; touch PWNED", "a\nb", "{line}", "\\"]


def test_placeholders_become_references_for_their_quoting_context() -> None:
    assert compile_command("echo {job} {line}", FIELDS).text == (
        'echo "${AUTOEXP_JOB}" "${AUTOEXP_LINE}"'
    )
    assert compile_command('echo "job={job}"', FIELDS).text == 'echo "job=${AUTOEXP_JOB}"'
    assert compile_command("echo {{literal}} \\'{job}", FIELDS).text == (
        'echo {literal} \\\'"${AUTOEXP_JOB}"'
    )
    assert compile_command("echo {job} {job}", FIELDS).fields == ("job",)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("echo {nope}", "unknown placeholder '{nope}'"),
        ("echo {job", "unknown placeholder '{'"),
        ("echo job}", "single '}'"),
        ("echo '{line}'", "inside single quotes"),
    ],
)
def test_bad_templates_are_refused(command: str, message: str) -> None:
    with pytest.raises(CommandTemplateError, match=message):
        compile_command(command, FIELDS)


def test_hostile_values_arrive_exactly_and_run_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    command = f'printf "%s\\0" {{line}} "q:{{line}}" "$AUTOEXP_LINE" > {out}; cd {tmp_path}'
    for value in HOSTILE:
        done = run_with_fields(command, FIELDS, {"job": "j", "line": value}, timeout=30)
        assert done.returncode == 0, done.stderr
        assert out.read_bytes().decode().split("\0")[:-1] == [value, f"q:{value}", value]
    assert not list(tmp_path.rglob("PWNED"))
    assert not Path("PWNED").exists()


def test_a_nul_in_a_value_is_replaced_not_a_crash() -> None:
    done = run_with_fields('printf %s "$AUTOEXP_LINE"', FIELDS, {"line": "a\0b"}, timeout=30)
    assert done.stdout == "a\ufffdb"
