"""Locating inside a command workload's Python processes, without changing their scripts.

`aorta_locate_startup.pth` runs at every interpreter start-up of the environment aorta is
installed in. Its one line reads `AORTA_LOCATE_DIR` and does nothing else when it is unset,
so processes outside a locating trial pay nothing measurable. When aorta sets it for a
trial, `activate()` registers an exit handler and waits for the first `import torch` (it
never imports torch itself: a process that does not use torch stays torch-free); right after
torch has initialised, a `Locator` is installed that counts optimizer steps. The process
writes `process_<pid>.json` into the directory as soon as a location is found, and at exit
when none was (with whether it imported torch at all). aorta stops a trial with SIGTERM (at
the failure line, for instance): where the process left SIGTERM at its default, a handler
writes the record first and then lets the signal kill the process as before.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import tempfile
import threading

from toolkit_core.after_import import call_after_import

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: this module runs at interpreter start-up
    from aorta.instrumentation.locate import Locator

PTH_LINE = (
    "import os; os.environ.get('AORTA_LOCATE_DIR') and "
    "__import__('aorta.instrumentation.locate_startup').instrumentation.locate_startup.activate()"
)
"""The single line of the shipped `.pth` file (a test keeps the two in sync)."""


class _Session:
    """This process's locating state (one per interpreter)."""

    active = False
    written = False
    locator: Locator | None = None


_session = _Session()


def _write(record: dict[str, object]) -> None:
    """Atomically write this process's record (temp file + rename; never half a file)."""
    from pathlib import Path  # only when writing: start-up stays lean

    variable = os.environ.get("AORTA_LOCATE_DIR")
    if not variable:
        return
    directory = Path(variable)
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".process_", suffix=".tmp", dir=directory)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle)
    Path(tmp).replace(directory / f"process_{os.getpid()}.json")


def _install() -> None:
    from aorta.instrumentation.locate import Locator
    from aorta.instrumentation.locate_record import Location, process_record

    def found(location: Location) -> None:
        _session.written = True
        _write(process_record(imported_torch=True, location=location))

    _session.locator = Locator(count_optimizer_steps=True, on_found=found)
    _session.locator.install()


def _at_exit() -> None:
    if _session.locator is not None:
        # The last step's checks and gradients (a script that stops at a NaN loss or grad norm
        # without an optimizer step).
        _session.locator.check_gradients()
    if _session.written:
        return
    _session.written = True
    from aorta.instrumentation.locate_record import process_record

    _write(process_record(imported_torch="torch" in sys.modules, location=None))


def _on_sigterm(signum: int, frame: object) -> None:
    """aorta stops a trial with SIGTERM (e.g. at the failure line): write the record first,
    then die of SIGTERM as the process would have without this handler."""
    _at_exit()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _catch_sigterm() -> None:
    # Only where the process left SIGTERM at its default (dying): a handler of the script's
    # own is never replaced, and signal handlers can only be set from the main thread.
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


def activate() -> None:
    """Locate in this process: now if torch is loaded, else as soon as it is imported."""
    if _session.active:
        return
    _session.active = True
    atexit.register(_at_exit)
    _catch_sigterm()
    call_after_import("torch", _install)
