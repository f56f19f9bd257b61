"""Property-based fuzzer for the four file loaders users and colleagues hand each other.

    python fuzz/loaders.py [--seconds 60] [--loader recipe|config|monitor|baseline ...]
                           [--findings DIR]

Targets: aorta's recipe loader (`load_recipe`), oellm-autoexp's config loader (`load_config`),
its MONITOR.yaml parser (`read_yaml` + `parse_monitor_file`, as `oellm-autoexp monitor FILE`
does) and triton-invariance's baseline reader (`read_baseline_file`). Hypothesis mutates a
valid seed document per loader (the shipped examples and recipes): wrong types at known keys,
huge ints and floats, lone surrogates, format strings such as `{x.__class__}`, random nesting,
then the rendered text: anchor/alias bombs, duplicate keys, binary bytes, truncation, deep
brackets, unsafe YAML tags.

Each example runs in a worker process (one per loader kind, restarted after any finding) with
its address space capped (RLIMIT_AS) and a per-example wall-clock limit. A finding is any
exception that is not the package's user-error type, a user error with a line that does not name the
file, a hang longer than `HANG_S`, or a worker whose RSS passes `RSS_LIMIT`. Every
finding's input is kept under --findings; the exit status is 1 when there is one.

Not collected by pytest and not run by `.ci/run` (CI runs the hostile corpora);
`make fuzz` runs it, and one fast test runs the driver itself for a few seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 5.0
RSS_LIMIT = 1 << 30  # bytes
LOADERS = ("recipe", "config", "monitor", "baseline")


# --- worker side ------------------------------------------------------------------------------


def _load_recipe(path: Path) -> None:
    from aorta.triage.recipe import load_recipe

    load_recipe(path)


def _load_config(path: Path) -> None:
    from oellm_autoexp.config.loader import load_config

    load_config(path)


def _load_monitor(path: Path) -> None:
    from oellm_autoexp.config.loader import read_yaml
    from oellm_autoexp.monitor.standalone import is_monitor_file, parse_monitor_file

    data = read_yaml(path)
    if is_monitor_file(data):
        parse_monitor_file(data, path)


def _load_baseline(path: Path) -> None:
    from triton_invariance.storage import read_baseline_file

    read_baseline_file(path)


def _user_error(loader: str) -> type[BaseException]:
    """The package's own user-error type: the CLI prints it as one line and exits 2."""
    if loader == "recipe":
        from aorta.errors import AortaUsageError

        return AortaUsageError
    if loader == "baseline":
        from triton_invariance.errors import InvarianceUsageError

        return InvarianceUsageError
    from oellm_autoexp.errors import AutoexpUsageError

    return AutoexpUsageError


_TARGETS: dict[str, Callable[[Path], None]] = {
    "recipe": _load_recipe,
    "config": _load_config,
    "monitor": _load_monitor,
    "baseline": _load_baseline,
}


def _vm_size() -> int:
    """This process's current virtual size in bytes (Linux)."""
    with Path("/proc/self/statm").open() as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def worker(loader: str) -> None:
    """Serve one loader: read a path per line on stdin, answer one JSON line on stdout."""
    target, user_error = _TARGETS[loader], _user_error(loader)
    _load_probe(loader, target)
    # Cap the address space at what the imports took plus the RSS budget: a blow-up then
    # fails inside this worker (MemoryError) instead of taking the machine down.
    limit = _vm_size() + RSS_LIMIT
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = sys.stdout
    for line in sys.stdin:
        path = Path(line.rstrip("\n"))
        kind, detail = "ok", ""
        try:
            target(path)
        except user_error as exc:
            message = str(exc)
            kind = "user_error"
            # Several problems may be reported at once (aorta's RecipeProblemsError), one line
            # each: every line must stand alone and name the file.
            if any(str(path) not in part for part in message.split("\n")):
                kind, detail = "bad_message", message[:2000]
        except RecursionError as exc:
            kind, detail = "traceback", f"RecursionError: {exc}"
        except MemoryError:
            kind, detail = "memory", "MemoryError under RLIMIT_AS"
        except Exception:
            kind, detail = "traceback", traceback.format_exc(limit=-8)[-4000:]
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        out.write(json.dumps({"kind": kind, "detail": detail, "rss": rss}) + "\n")
        out.flush()


def _load_probe(loader: str, target: Callable[[Path], None]) -> None:
    """Import everything the loader imports lazily before the address space is capped."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / ("probe.json" if loader == "baseline" else "probe.yaml")
        probe.write_text("{}")
        with contextlib.suppress(Exception):  # the probe is an invalid document on purpose
            target(probe)


# --- generator side ---------------------------------------------------------------------------


def _seed_docs() -> dict[str, list[Any]]:
    import yaml

    def yaml_file(path: Path) -> Any:
        return yaml.safe_load(path.read_text())

    recipes = sorted((ROOT / "packages/aorta/recipes").glob("*.yaml"))
    configs = sorted((ROOT / "packages/oellm-autoexp/examples").glob("*.yaml"))
    monitor = {
        "monitoring": {
            "termination_str": "TRAINING DONE",
            "inactivity_threshold_seconds": 900,
            "log_signals": [{"name": "loss_spike", "pattern": "loss [0-9]{3,}"}],
        },
        "watch": [
            {"name": "gpt-7b", "job_id": "4711", "log": "/runs/gpt/logs/gpt_%j.out"},
            {"name": "eval", "log": "/runs/eval/eval.log"},
        ],
        "actions": {
            "checkpoint_saved": "/opt/tools/convert.sh {job} {line}",
            "run_ended": 'echo "$AUTOEXP_JOB ended: $AUTOEXP_LINE" >> /runs/ended.txt',
        },
    }
    return {
        "recipe": [yaml_file(p) for p in recipes],
        "config": [yaml_file(p) for p in configs],
        "monitor": [monitor],
        "baseline": [_real_baseline()],
    }


def _real_baseline() -> dict[str, Any]:
    """A baseline document written by the package itself, so the seed is valid as is."""
    from triton_invariance.data import HwConfig, InvarianceData
    from triton_invariance.storage import commit_invariance

    inv = InvarianceData(
        kernel_name="my_kernel",
        dtype_signature="input0:!tt.ptr<f32>,input1:i32->",
        hw_config=HwConfig(target="cuda:80", num_warps=4, num_ctas=1, threads_per_warp=32),
        ops=("%0 = arith.addf %a, %b : tensor<128xf32>", "tt.return"),
        op_layouts=("#0", ""),
        layouts=("#ttg.blocked<{sizePerThread = [1]}>",),
    )
    with tempfile.TemporaryDirectory() as tmp:
        sig = "0123456789abcdef"
        commit_invariance("my_kernel", sig, inv, config_hash="cfg0", base=tmp)
        doc: dict[str, Any] = json.loads((Path(tmp) / f"my_kernel_{sig}.json").read_text())
        return doc


HOSTILE_STRINGS = (
    "\ud800",
    "a\udfffb",
    "{x.__class__}",
    "{0.__globals__}",
    "{job.__init__.__globals__}",
    "%j",
    "%(x)s",
    "${oc.env:HOME}",
    "${oc.env:AUTOEXP_SECRET}",
    "${undefined}",
    "${",
    "$(touch /tmp/pwned)",
    "`id`",
    "\x00",
    "a\nb",
    "a\rb",
    "\x1b[2J",
    "../../etc/passwd",
    "/dev/zero",
    "/proc/self/mem",
    "9" * 5000,
    "1e999",
    "-0",
    "0x_1",
    "1:2:3",
    "~",
    "null",
    "yes",
    "NaN",
    ".inf",
    "",
    " ",
    "\u202e",
    "x" * 100_000,
)


_SPECIAL = (10**400, -(10**5000), 2**63, -(2**63) - 1, 0, -1, True, False, None)


@functools.cache
def _strategies() -> Any:
    from hypothesis import strategies as st

    scalars = st.one_of(
        st.integers(),
        # Indices, not the values: hypothesis reprs a sampled_from, and a 5000-digit int has none.
        st.integers(0, len(_SPECIAL) - 1).map(_SPECIAL.__getitem__),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(HOSTILE_STRINGS),
        st.text(max_size=20),
    )
    values = st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4),
        ),
        max_leaves=12,
    )
    return st, values


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every container path in `doc` (the root included)."""
    found = [prefix]
    items: list[tuple[Any, Any]] = []
    if isinstance(doc, dict):
        items = list(doc.items())
    elif isinstance(doc, list):
        items = list(enumerate(doc))
    for key, value in items:
        found.append((*prefix, key))
        if isinstance(value, dict | list):
            found.extend(_paths(value, (*prefix, key))[1:])
    return found


def _mutate(draw: Callable[[Any], Any], doc: Any) -> Any:
    st, values = _strategies()
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(0, 4))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        if not path:
            if draw(st.booleans()):
                doc = draw(values)
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        op = draw(st.sampled_from(["replace", "delete", "unknown", "wrap", "nest"]))
        if op == "replace":
            parent[key] = draw(values)
        elif op == "delete":
            del parent[key]
        elif op == "unknown" and isinstance(parent, dict):
            parent[draw(st.sampled_from(HOSTILE_STRINGS[:12]))] = draw(values)
        elif op == "wrap":
            parent[key] = [parent[key]]
        else:
            nested: Any = parent[key]
            for _ in range(draw(st.sampled_from([20, 200]))):
                nested = [nested]
            parent[key] = nested
    return doc


def _render(draw: Callable[[Any], Any], doc: Any, as_json: bool) -> bytes:
    import yaml
    from hypothesis import strategies as st

    try:
        if as_json:
            text = json.dumps(doc, allow_nan=True)
        else:
            text = yaml.safe_dump(doc, allow_unicode=False, sort_keys=False, width=10**6)
    except (RecursionError, ValueError, yaml.YAMLError):
        # Too deep for the emitters: deeper nesting still comes from the "brackets" mutation.
        text = "x: " + "[" * 5000 + "]" * 5000
    data = text.encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(0, 2))):
        op = draw(
            st.sampled_from(
                [
                    "bomb",
                    "dup",
                    "bytes",
                    "truncate",
                    "brackets",
                    "tag",
                    "directive",
                    "bom",
                    "merge",
                    "surrogate",
                ]
            )
        )
        data = _text_mutation(draw, op, data)
    return data


_BOMB = b"a: &a [x, x, x, x, x, x, x, x, x]\n" + b"".join(
    b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n"
    % ((ord("a") + i + 1,) * 2 + (ord("a") + i,) * 9)
    for i in range(8)
)


def _text_mutation(draw: Callable[[Any], Any], op: str, data: bytes) -> bytes:
    from hypothesis import strategies as st

    lines = data.split(b"\n")
    where = draw(st.integers(0, max(len(data), 0)))
    if op == "bomb":
        return _BOMB + data
    if op == "dup" and lines:
        line = draw(st.sampled_from(lines))
        return data + b"\n" + line + b"\n"
    if op == "bytes":
        junk = draw(st.binary(min_size=1, max_size=16))
        return data[:where] + junk + data[where:]
    if op == "truncate":
        return data[:where]
    if op == "brackets":
        depth = draw(st.sampled_from([100, 1000, 20_000]))
        return b"x: " + b"[" * depth + b"]" * depth + b"\n" + data
    if op == "tag":
        return b"x: !!python/object/apply:os.system ['true']\n" + data
    if op == "directive":
        return b"%YAML 1.1\n%TAG ! tag:evil.com,2000:\n---\n" + data
    if op == "bom":
        return b"\xef\xbb\xbf" + data
    if op == "merge":
        return b"base: &b {trials: 1}\n" + data + b"\nextra: {<<: *b, <<: *b}\n"
    return data[:where] + b'"\\ud800"' + data[where:]


# --- driver ------------------------------------------------------------------------------------


@dataclass
class Finding:
    """One input that broke a loader."""

    loader: str
    kind: str
    detail: str
    saved: Path


class Worker:
    """A child process serving one loader; killed and restarted after a hang or finding."""

    def __init__(self, loader: str) -> None:
        self.loader = loader
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--worker", self.loader],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        return self.proc

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def run(self, path: Path) -> dict[str, Any]:
        proc = self.start()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(f"{path}\n")
            proc.stdin.flush()
        except BrokenPipeError:
            self.stop()
            return {"kind": "crash", "detail": "worker died before the example", "rss": 0}
        ready, _, _ = select.select([proc.stdout], [], [], HANG_S)
        if not ready:
            self.stop()
            return {"kind": "hang", "detail": f"no answer within {HANG_S:.0f} s", "rss": 0}
        line = proc.stdout.readline()
        if not line:
            code = proc.wait()
            self.proc = None
            return {"kind": "crash", "detail": f"worker exited with {code}", "rss": 0}
        answer: dict[str, Any] = json.loads(line)
        if answer["rss"] > RSS_LIMIT:
            answer = {"kind": "memory", "detail": f"RSS {answer['rss'] >> 20} MiB", "rss": 0}
        if answer["kind"] not in ("ok", "user_error"):
            self.stop()  # a fresh worker: no state or RSS high-water mark carried over
        return answer


def fuzz_loader(
    loader: str, seconds: float, findings_dir: Path, log: Callable[[str], None]
) -> tuple[int, list[Finding]]:
    """Run hypothesis batches against one loader until `seconds` pass."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    seeds = _seed_docs()[loader]
    worker_proc = Worker(loader)
    findings: list[Finding] = []
    count = 0
    deadline = time.monotonic() + seconds
    work = Path(tempfile.mkdtemp(prefix=f"fuzz-{loader}-"))

    @settings(
        max_examples=10,  # small batches: the deadline is checked between them
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def one(data: Any) -> None:
        nonlocal count
        as_json = loader == "baseline" or (loader == "recipe" and data.draw(st.booleans()))
        doc = _mutate(data.draw, data.draw(st.sampled_from(seeds)))
        raw = _render(data.draw, doc, as_json=as_json)
        path = work / ("doc.json" if as_json else "doc.yaml")
        path.write_bytes(raw)
        answer = worker_proc.run(path)
        count += 1
        if answer["kind"] in ("ok", "user_error"):
            return
        findings_dir.mkdir(parents=True, exist_ok=True)
        saved = findings_dir / f"{loader}-{len(findings):03d}{path.suffix}"
        saved.write_bytes(raw)
        findings.append(Finding(loader, answer["kind"], answer["detail"], saved))
        first = answer["detail"].strip().splitlines()[-1:] or [""]
        log(f"FINDING {loader} {answer['kind']}: {first[0][:200]} (input: {saved})")

    try:
        while time.monotonic() < deadline:
            one()
    finally:
        worker_proc.stop()
        for leftover in work.iterdir():
            leftover.unlink()
        work.rmdir()
    return count, findings


def main(argv: list[str] | None = None) -> int:
    """Fuzz the chosen loaders for `--seconds` in total; exit 1 when anything was found."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=float(os.environ.get("FUZZ_SECONDS", "60"))
    )
    parser.add_argument("--loader", action="append", choices=LOADERS)
    parser.add_argument("--findings", type=Path, default=ROOT / "fuzz-findings")
    parser.add_argument("--worker", choices=LOADERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    loaders = args.loader or list(LOADERS)
    share = args.seconds / len(loaders)
    total: list[Finding] = []
    for loader in loaders:
        count, found = fuzz_loader(loader, share, args.findings, print)
        kinds = sorted({f.kind for f in found})
        print(f"{loader}: {count} examples in {share:.0f} s, {len(found)} finding(s) {kinds}")
        total.extend(found)
    if total:
        print(f"{len(total)} finding(s); inputs kept under {args.findings}")
        return 1
    print("no findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
