"""Drawing `matrix.png` in a child process, so that the matrix is not kept waiting for it.

matplotlib costs about a second to import and a few hundred milliseconds to render on the 2-core
machine: more than a one-trial matrix of a short command costs in all. `aorta triage run` writes
`matrix.json` and `matrix.md` first (the md's plot line saying the picture is being drawn), then
`start` (the `plot_drawer` the CLI hands to `run_recipe`) gives the report to
`python -m aorta.cli.plot_job` on its stdin and returns without
waiting. The child draws the picture (`writer.draw_plot`) and rewrites the plot line of
`matrix.md`, atomically, to link it or say why it was not drawn, but only while `matrix.md` is
still the text the parent wrote: a newer matrix.md (a resumed run) is never overwritten with an
older one. If the child dies, the plot line keeps saying how to draw the picture by hand.

It lives in the CLI, not in `aorta.triage`, which starts no processes of its own. The child
runs in its own session (a Ctrl-C meant for the next command does not reach it), with
stdout and stderr discarded: it has nobody to talk to once the run has exited.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import subprocess
import sys
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aorta.triage.report.output import MatrixReport

# Started children, so that tests and benchmarks can wait for them (`wait`) and the interpreter
# does not warn about a Popen collected while its child still runs.
_started: list[subprocess.Popen[bytes]] = []


def start(report: MatrixReport, pending_md: str) -> int:
    """Start the child that draws `report`'s picture; return its pid without waiting for it.

    `pending_md` is the `matrix.md` text just written (with the pending plot line).
    """
    payload = _dumps((report, pending_md))  # before the child exists: a failure leaves none
    child = subprocess.Popen(  # our own interpreter and module, no shell
        [sys.executable, "-m", "aorta.cli.plot_job"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert child.stdin is not None  # stdin=PIPE
    child.stdin.write(payload)
    child.stdin.close()
    _started.append(child)
    return child.pid


def _dumps(value: object) -> bytes:
    # The report's frozen mappings are MappingProxyType, which pickle refuses; they travel as
    # dicts and come back frozen. A local dispatch table: no global copyreg registration.
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer)
    pickler.dispatch_table = {**copyreg.dispatch_table, MappingProxyType: _reduce_proxy}
    pickler.dump(value)
    return buffer.getvalue()


def _reduce_proxy(proxy: MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _frozen, (dict(proxy),)


def _frozen(mapping: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(mapping)


def wait(timeout: float | None = None) -> list[int]:
    """Wait for every child started by this process; return their exit codes."""
    codes = [child.wait(timeout) for child in _started]
    _started.clear()
    return codes


def main() -> int:
    """The child: read `(report, pending_md)` from stdin, draw, update the plot line."""
    from aorta.triage.report.writer import draw_plot

    report, pending_md = pickle.loads(sys.stdin.buffer.read())  # from our parent
    draw_plot(report, pending_md=pending_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
