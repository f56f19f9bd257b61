"""`provenance.json`: where a plan came from, written next to its `plan.json`.

The record answers "what exactly produced these jobs?" months later: the config as given (file,
overrides, the file's text) and as resolved, the git commit and uncommitted diff of the
config's repository and of the backend's source checkout (Megatron-LM, `backend.megatron_path`)
when they are git work trees, the versions of the packages that shaped the plan, the SLURM
version, host, user and time.

Collecting is best effort and bounded: each external command has a timeout, a failure becomes
an ``"error"`` entry in the record instead of failing the plan, and a diff is cut at
`MAX_DIFF_BYTES` (with ``"diff_truncated": true``). Package versions come from installed
metadata, so torch or Megatron are never imported.

Re-planning an unchanged config reuses its plan directory (the plan id is a hash of the
resolved config). The earlier record is then kept as ``provenance-<its time>.json`` before the
new one is written: the code behind jobs submitted from the earlier plan stays on record.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toolkit_core.metadata_headers import plain_headers
from toolkit_core.timestamps import iso_stamp, utc_now

PROVENANCE_FILE = "provenance.json"
FORMAT = 1
MAX_DIFF_BYTES = 1_000_000
COMMAND_TIMEOUT_S = 15.0  # git on a large work tree
SLURM_TIMEOUT_S = 5.0  # `sbatch --version` answers at once, or hangs on DNS / config lookups
# Distributions whose versions decide what a plan contains (metadata only: nothing imported).
PACKAGES = (
    "oellm-autoexp",
    "compoconf",
    "hydra-core",
    "omegaconf",
    "jinja2",
    "pyyaml",
    "click",
    "megatron-core",
    "torch",
)

Runner = Callable[[Sequence[str], Path | None], subprocess.CompletedProcess[str]]


def _run(argv: Sequence[str], cwd: Path | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S if argv[0] == "git" else SLURM_TIMEOUT_S,
        check=False,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
    )


@dataclass(frozen=True)
class ConfigSource:
    """The config as the user gave it."""

    ref: str  # the YAML path or "<config dir>/<name>.yaml"
    overrides: tuple[str, ...] = ()
    config_dir: str | None = None


def collect_provenance(
    source: ConfigSource,
    resolved: Mapping[str, Any],
    *,
    plan_id: str,
    submit_cmd: str = "sbatch",
    run: Runner = _run,
    now: Callable[[], datetime] = utc_now,
) -> dict[str, Any]:
    """The provenance record of one plan (see module docs); `run` executes git / sbatch."""
    config_path = Path(source.ref)
    text: str | None = None
    if config_path.is_file():
        try:
            text = config_path.read_text(encoding="utf-8")
        except OSError as exc:
            text = f"<unreadable: {exc.strerror or exc}>"
    repos: dict[str, Any] = {"config": git_state(config_path.resolve().parent, run=run)}
    for name, directory in backend_sources(resolved).items():
        repos[name] = git_state(Path(directory).expanduser(), run=run)
    return {
        "format": FORMAT,
        "plan_id": plan_id,
        "created": iso_stamp(now()),
        "host": os.uname().nodename,  # gethostname(), without importing socket
        "user": _user(),
        "python": platform.python_version(),
        "config": {
            "ref": source.ref,
            "cwd": str(Path.cwd()),  # a relative `ref` and output dir are relative to it
            "overrides": list(source.overrides),
            "config_dir": source.config_dir,
            "text": text,
        },
        "resolved_config": dict(resolved),
        "git": repos,
        "packages": package_versions(),
        "slurm": slurm_version(submit_cmd, run=run),
    }


def backend_sources(resolved: Mapping[str, Any]) -> dict[str, str]:
    """Source checkouts the backend runs from, by name (today: ``backend.megatron_path``)."""
    backend = resolved.get("backend")
    if not isinstance(backend, Mapping):
        return {}
    path = backend.get("megatron_path")
    return {"backend.megatron_path": str(path)} if path else {}


def git_state(directory: Path, *, run: Runner = _run) -> dict[str, Any]:
    """Commit, branch, dirty files and uncommitted diff of the git tree holding `directory`.

    ``{"git": false}`` when `directory` is not inside a work tree (or git is not installed).
    """
    if shutil.which("git") is None:
        return {"path": str(directory), "git": False, "error": "git is not installed"}
    if not directory.is_dir():
        return {"path": str(directory), "git": False, "error": "no such directory"}
    try:
        # Work tree, commit and branch in one call; it fails outside a work tree and before
        # the first commit (HEAD names nothing), which the separate calls then tell apart.
        both = run(
            ["git", "rev-parse", "--show-toplevel", "HEAD", "--abbrev-ref", "HEAD"], directory
        )
        lines = both.stdout.splitlines()
        commit: str | None
        branch: str | None
        if both.returncode == 0 and len(lines) == 3:
            root, commit, branch = Path(lines[0]), lines[1].strip(), lines[2].strip()
        else:
            top = run(["git", "rev-parse", "--show-toplevel"], directory)
            if top.returncode != 0:
                return {"path": str(directory), "git": False}
            root = Path(top.stdout.strip())
            head = run(["git", "rev-parse", "--verify", "-q", "HEAD"], root)
            named = run(["git", "rev-parse", "--abbrev-ref", "HEAD"], root)
            commit = head.stdout.strip() if head.returncode == 0 else None
            branch = named.stdout.strip() if named.returncode == 0 else None
        status = run(["git", "status", "--porcelain=v1", "--untracked-files=normal"], root)
        changed = [line for line in status.stdout.splitlines() if line.strip()]
        patch = ""
        # Against HEAD: staged and unstaged changes together (an unborn branch has no HEAD).
        # Untracked files (`??`) are not in it, so with no other change the diff is empty
        # and is not asked for (one git process less per plan of a clean tree).
        if any(not line.startswith("??") for line in changed):
            diff = run(["git", "diff", "HEAD" if commit else "--cached", "--no-color"], root)
            patch = diff.stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"path": str(directory), "git": True, "error": f"git failed: {exc}"}
    truncated = len(patch.encode()) > MAX_DIFF_BYTES
    if truncated:
        patch = patch.encode()[:MAX_DIFF_BYTES].decode(errors="ignore")
    return {
        "path": str(directory),
        "git": True,
        "root": str(root),
        "commit": commit,
        "branch": branch,
        "dirty": bool(changed),
        "changed_files": changed,
        "diff": patch,
        "diff_truncated": truncated,
    }


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed versions by distribution name (None: not installed).

    The same lookup as `importlib.metadata.version` (the first ``*.dist-info`` / ``*.egg-info``
    of that name on `sys.path`, its ``Version`` header), without importing `importlib.metadata`
    and the email parser it reads headers with: that import alone cost a config dry run ~40 ms.
    A name this cannot settle (metadata inside a zip or an ``.egg``, no ``Version`` line) is
    asked of `importlib.metadata`.
    """
    entries = [Path(entry or ".") for entry in sys.path]  # "" is the working directory
    if any(entry.is_file() or entry.suffix == ".egg" for entry in entries):
        return _metadata_versions(names)  # zipped or egg distributions: importlib's own search
    found = _metadata_paths(entries)
    versions: dict[str, str | None] = {}
    for name in names:
        paths = found.get(_normalized(name))
        version = _version_header(paths[0]) if paths and len(paths) == 1 else None
        if paths and version is None:  # several in one directory (importlib takes the
            versions.update(_metadata_versions([name]))  # first listed), or unreadable
        else:
            versions[name] = version
    return versions


def _normalized(name: str) -> str:
    """PEP 503 normalisation with underscores (how importlib.metadata matches names)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata_paths(entries: Sequence[Path]) -> dict[str, list[Path]]:
    """Normalised distribution name -> its metadata paths in the first entry that has any."""
    found: dict[str, list[Path]] = {}
    for entry in entries:
        try:
            # Names, not Path objects: the standard library's directory alone has hundreds of
            # entries, and only the few metadata directories among them are wanted.
            with os.scandir(entry) as listing:
                children = [child.name for child in listing]
        except OSError:
            continue
        here: dict[str, list[Path]] = {}
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                name = _normalized(low.rpartition(".")[0].partition("-")[0])
                here.setdefault(name, []).append(entry / child)
        for name, paths in here.items():
            found.setdefault(name, paths)
    return found


def _version_header(path: Path) -> str | None:
    """The ``Version:`` header of a metadata directory (METADATA / PKG-INFO) or PKG-INFO file;
    None where it cannot be read plainly (`toolkit_core.metadata_headers`)."""
    for candidate in (path / "METADATA", path / "PKG-INFO", path):
        try:
            text = candidate.read_text(encoding="utf-8", errors="replace")
        except (IsADirectoryError, FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return None
        headers = plain_headers(text)
        return None if headers is None else headers.get("version")
    return None


def _metadata_versions(names: Sequence[str]) -> dict[str, str | None]:
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def slurm_version(submit_cmd: str = "sbatch", *, run: Runner = _run) -> dict[str, Any]:
    """``sbatch --version`` (e.g. ``slurm 22.05.8``), or why it is unknown."""
    argv = shlex.split(submit_cmd)
    if not argv or shutil.which(argv[0]) is None:
        return {"version": None, "error": f"{argv[0] if argv else submit_cmd!r} is not on PATH"}
    try:
        done = run([*argv, "--version"], None)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"version": None, "error": f"{argv[0]} --version failed: {exc}"}
    if done.returncode != 0:
        return {"version": None, "error": " ".join(done.stderr.split()) or "non-zero exit"}
    return {"version": done.stdout.strip()}


def _user() -> str:
    """`getpass.getuser()` (its variables, in its order), without importing getpass."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if os.environ.get(name):
            return os.environ[name]
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # no passwd entry (containers)
        return str(os.getuid())


def write_provenance(plan_dir: Path, record: Mapping[str, Any]) -> Path:
    """Write `record` to ``<plan_dir>/provenance.json`` atomically; keep an earlier record.

    An existing record (from an earlier plan of the same config) is renamed to
    ``provenance-<its created time>.json`` first, never overwritten.
    """
    import json

    from oellm_autoexp.atomic import write_json_atomic

    path = plan_dir / PROVENANCE_FILE
    if path.exists():
        try:
            created = str(json.loads(path.read_text())["created"])
        except (OSError, ValueError, KeyError, TypeError):
            created = iso_stamp(datetime.fromtimestamp(path.stat().st_mtime, UTC))
        stamp = "".join(c for c in created if c.isalnum())
        kept = plan_dir / f"provenance-{stamp}.json"
        number = 1
        while kept.exists():  # two plans within one second
            number += 1
            kept = plan_dir / f"provenance-{stamp}-{number}.json"
        path.rename(kept)
    return write_json_atomic(path, dict(record), overwrite=True, mode=0o600)


def provenance_path(plan_dir: Path) -> Path | None:
    """The provenance file of the plan in `plan_dir`, if it was written."""
    path = plan_dir / PROVENANCE_FILE
    return path if path.is_file() else None
