#!/usr/bin/env python3
"""Inspect and clean up monitoring sessions (``<base_output_dir>/monitoring_state``).

    manage_monitoring.py --monitoring-state-dir DIR list
    manage_monitoring.py --monitoring-state-dir DIR show ID
    manage_monitoring.py --monitoring-state-dir DIR remove ID [--force]
    manage_monitoring.py --monitoring-state-dir DIR dump-config ID

`remove` refuses a session that still has live jobs unless --force, and never removes a
session a monitor is driving (its lock is held). Exit codes: 0 ok, 1 failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from oellm_autoexp.errors import EXIT_USAGE, AutoexpError, AutoexpUsageError
from oellm_autoexp.persistence import Session, SessionStore


def _summary(session: Session) -> str:
    counts: dict[str, int] = {}
    for job in session.jobs.values():
        counts[job.state] = counts.get(job.state, 0) + 1
    states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no jobs"
    head = f"{session.session_id}  {session.project:<20} {session.created_at}"
    return f"{head}  {session.status:<8} {states}"


def _list(store: SessionStore) -> None:
    ids = store.ids()
    if not ids:
        print(f"no sessions in {store.state_dir}")
    for sid in ids:
        try:
            print(_summary(store.load(sid)))
        except AutoexpError as exc:  # one bad file must not hide the others
            print(f"{sid}  unreadable: {exc}")


def _show(store: SessionStore, sid: str) -> None:
    session = store.load(sid)
    print(_summary(session))
    print(f"base_output_dir: {session.base_output_dir}")
    for job in session.jobs.values():
        last = job.last_slurm_id or "-"
        restarts = sum(job.restarts.values())
        outcome = job.outcome
        detail = f"{outcome.mode} {outcome.error_type or ''}".strip() if outcome else ""
        print(
            f"  {job.name:<30} {last!s:<12} {job.state:<10} {job.slurm_state or '-':<11} "
            f"restarts={restarts} {detail}"
        )


def _remove(store: SessionStore, sid: str, force: bool) -> None:
    with store.lock(sid):
        session = store.load(sid)
        live = [j.job_id for j in session.jobs.values() if j.job_id and not j.finished]
        if live and not force:
            raise AutoexpUsageError(
                f"session {sid} still has {len(live)} live job(s) ({', '.join(live[:5])}); "
                "cancel them (oellm-autoexp cleanup) or pass --force"
            )
    store.remove(sid)
    print(f"removed session {sid}")


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run one management command."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--monitoring-state-dir", type=Path, required=True)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="all sessions")
    for name in ("show", "dump-config"):
        sub.add_parser(name).add_argument("session_id")
    remove = sub.add_parser("remove")
    remove.add_argument("session_id")
    remove.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    store = SessionStore(args.monitoring_state_dir)
    try:
        if args.command == "list":
            _list(store)
        elif args.command == "show":
            _show(store, args.session_id)
        elif args.command == "remove":
            _remove(store, args.session_id, args.force)
        else:
            print(json.dumps(store.load(args.session_id).config, indent=2))
    except AutoexpError as exc:
        print(f"manage_monitoring: error: {exc}", file=sys.stderr)
        return exc.exit_code if exc.exit_code else EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
