"""A real single-node SLURM (munge + slurmctld + slurmd) started in a temporary directory.

Used by the `slurm_cluster` and `slurm_accounting_cluster` pytest fixtures (the `pytest11` plugin
`oellm_autoexp.testing.pytest_plugin`) and runnable by hand:
``python -m oellm_autoexp.testing.slurm_cluster [--accounting] DIR`` starts a
cluster under DIR and prints the ``SLURM_CONF`` to export (Ctrl-C stops it). Everything lives under
the given directory: munge key and socket, slurm.conf, state, spool and logs. The daemons run in
the foreground as children of this process; `stop()` terminates exactly those PIDs and nothing
else.

Facts this relies on (Debian ``slurm-wlm`` 22.05 + ``munge``, as root): one node named after this
host, ``proctrack/linuxproc`` and ``task/none`` (no cgroups needed), non-default ports picked free
at start. Without accounting, finished jobs stay visible in ``squeue``/``scontrol`` for
``MinJobAge`` seconds and are then gone for good.

With ``accounting=True`` (Debian ``slurmdbd`` + ``mariadb-server``) the cluster also runs a
MariaDB server and ``slurmdbd``, so ``sacct`` answers for jobs slurmctld has purged, as on a real
cluster. MariaDB gets a fresh, empty data directory and ``--skip-grant-tables`` (no system tables
to install: ``mariadb-install-db`` alone takes 8-10 s here) and ``--skip-networking``: it listens
only on a unix socket inside a root-only (0700) directory, so only root can reach it. slurmdbd finds
that socket through ``MYSQL_UNIX_PORT``, which MariaDB's client library reads.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# The daemons and client commands the cluster needs; all must be on PATH (or in /usr/sbin).
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel")
# What accounting adds (Debian packages slurmdbd, mariadb-server and slurm-client for sacct*).
ACCOUNTING_DAEMONS = ("mariadbd", "slurmdbd")
ACCOUNTING_CLIENTS = ("sacct", "sacctmgr")
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/sbin"])

# Finished jobs stay in slurmctld's memory (visible to squeue -t all and scontrol) this long;
# long enough for a monitor polling every second to see every terminal state.
MIN_JOB_AGE_S = 120
CLUSTER_NAME = "autoexp-test"
# The node advertises more CPUs than this machine has, so a 4-task array runs at once even on a
# 2-core CI runner (the test jobs sleep and write logs; they are not CPU bound).
NODE_CPUS = 8


class SlurmUnavailableError(RuntimeError):
    """SLURM cannot be started here (binaries missing, not root, a daemon failed)."""


def _programs(accounting: bool) -> tuple[str, ...]:
    extra = (*ACCOUNTING_DAEMONS, *ACCOUNTING_CLIENTS) if accounting else ()
    return (*DAEMONS, *CLIENTS, *extra)


def missing_binaries(*, accounting: bool = False) -> list[str]:
    """The SLURM/munge (and with `accounting`, slurmdbd/MariaDB) programs that are not installed."""
    return [name for name in _programs(accounting) if shutil.which(name, path=SEARCH_PATH) is None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SlurmCluster:
    """Handle on a running local cluster: its config, environment and daemon processes."""

    root: Path
    conf: Path
    node: str
    partition: str
    env: dict[str, str]
    bin_paths: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def run(self, *args: str, check: bool = True, timeout: float = 30.0) -> str:
        """Run a SLURM client command against this cluster; returns stdout."""
        done = subprocess.run(
            [self.bin_paths.get(args[0], args[0]), *args[1:]],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}"
            )
        return done.stdout

    def cli(
        self, *args: str, cwd: Path | None = None, timeout: float = 180.0
    ) -> subprocess.CompletedProcess[str]:
        """Run ``oellm-autoexp *args`` (of this interpreter's environment) against the cluster."""
        return subprocess.run(
            [str(Path(sys.executable).with_name("oellm-autoexp")), *args],
            env=self.env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def log_tail(self, lines: int = 30) -> str:
        """The end of each daemon log, for failure messages."""
        parts = []
        for name in self.processes:
            path = self.root / "log" / f"{name}.log"
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path} ---\n" + "\n".join(text))
        return "\n".join(parts)

    def stop(self) -> None:
        """Terminate exactly the daemons this handle started (SIGTERM, then SIGKILL)."""
        # Jobs first, so slurmd does not leave orphaned job steps behind.
        with contextlib.suppress(Exception):
            self.run("scancel", "--full", "--quiet", f"--partition={self.partition}", timeout=10)
        # Reverse start order: slurmctld flushes job records to slurmdbd, slurmdbd to MariaDB.
        for name in reversed(list(self.processes)):
            proc = self.processes.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _write_conf(
    root: Path,
    node: str,
    partition: str,
    munge_socket: Path,
    *,
    min_job_age_s: int,
    dbd_port: int | None,
    spare_node: bool = False,
) -> Path:
    ctld_port, slurmd_port = _free_port(), _free_port()
    conf = root / "slurm.conf"
    if dbd_port is None:
        accounting = ["AccountingStorageType=accounting_storage/none"]
    else:
        accounting = [
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={dbd_port}",
            # Connections to slurmdbd authenticate through this munge socket (default: the
            # system's /run/munge one), not through AuthInfo.
            f"AccountingStoragePass={munge_socket}",
            # sacct's Comment column: the monitor's submission token lives there.
            "AccountingStoreFlags=job_comment",
        ]
    lines = [
        f"ClusterName={CLUSTER_NAME}",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "SwitchType=switch/none",
        # Servers of this fixture listen on loopback only: with these, slurmctld and slurmd
        # bind the address this host's name resolves to (SLURM's slurm_setup_addr), not
        # INADDR_ANY; test_slurm_cluster.py checks that it is loopback here.
        "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
        "JobCompType=jobcomp/none",
        *accounting,
        "JobAcctGatherType=jobacct_gather/none",
        "ReturnToService=2",
        # Use the node definition below even though this machine has fewer CPUs.
        "SlurmdParameters=config_overrides",
        f"MinJobAge={min_job_age_s}",
        # The time-limit tests need a job killed soon after its limit (default grace is 30 s).
        "OverTimeLimit=0",
        "KillWait=2",
        "InactiveLimit=0",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "SchedulerParameters=sched_interval=1",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} RealMemory=2048 State=UNKNOWN",
    ]
    nodes = node
    if spare_node:
        # A second node that is configured but down: a job that excludes the real node is
        # accepted and waits (sbatch refuses a request no configured node could satisfy).
        # Its own port, where nothing listens: on the real node's port, the real slurmd
        # answered slurmctld's messages to it and ReturnToService=2 brought it back up.
        spare = f"{node}-spare"
        lines.append(
            f"NodeName={spare} NodeAddr=127.0.0.1 Port={_free_port()} CPUs={NODE_CPUS} "
            "RealMemory=2048 State=DOWN"
        )
        nodes = f"{node},{spare}"
    lines.append(f"PartitionName={partition} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP")
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _spawn(root: Path, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    out = (root / "log" / f"{name}.out").open("wb")
    try:
        # start_new_session: Ctrl-C in the terminal of a hand-run cluster reaches only us, and
        # we stop the daemons in order instead of them dying mid-write.
        return subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    finally:
        out.close()


def _wait_for(predicate: object, timeout: float, what: str, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in cluster.processes.items():
            if proc.poll() is not None:
                raise SlurmUnavailableError(
                    f"{name} exited with {proc.returncode} while waiting for {what}\n"
                    + cluster.log_tail()
                )
        if callable(predicate) and predicate():
            return
        time.sleep(0.2)
    raise SlurmUnavailableError(
        f"timed out after {timeout:.0f} s waiting for {what}\n{cluster.log_tail()}"
    )


def start_cluster(
    root: Path,
    timeout: float = 60.0,
    *,
    accounting: bool = False,
    min_job_age_s: int = MIN_JOB_AGE_S,
    spare_node: bool = False,
) -> SlurmCluster:
    """Start munged, slurmctld and slurmd under `root`; return when the node is idle.

    With `accounting`, MariaDB and slurmdbd start first and slurmctld stores every job there,
    so `sacct` knows jobs long after `MinJobAge` (`min_job_age_s`) purged them from squeue.
    """
    missing = missing_binaries(accounting=accounting)
    if missing:
        raise SlurmUnavailableError(f"SLURM is not installed (missing: {', '.join(missing)})")
    if os.geteuid() != 0:
        raise SlurmUnavailableError("a local SLURM needs root (slurmd runs jobs as their user)")
    bins = {name: str(shutil.which(name, path=SEARCH_PATH)) for name in _programs(accounting)}
    for sub in ("munge", "state", "spool", "log", "run"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    # munged refuses keys and sockets in group/world-writable directories.
    (root / "munge").chmod(0o700)
    root.chmod(0o755)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge_socket = root / "munge" / "munge.socket"
    node = socket.gethostname().split(".")[0]
    partition = "autoexp"
    dbd_port = _free_port() if accounting else None
    conf = _write_conf(
        root,
        node,
        partition,
        munge_socket,
        min_job_age_s=min_job_age_s,
        dbd_port=dbd_port,
        spare_node=spare_node,
    )
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": SEARCH_PATH}
    cluster = SlurmCluster(root, conf, node, partition, env, bins)
    try:
        cluster.processes["munged"] = _spawn(
            root,
            "munged",
            [
                bins["munged"],
                "--foreground",
                "--force",
                f"--socket={munge_socket}",
                f"--key-file={key}",
                f"--pid-file={root / 'run' / 'munged.pid'}",
                f"--log-file={root / 'log' / 'munged.log'}",
                f"--seed-file={root / 'munge' / 'munged.seed'}",
            ],
            env,
        )
        _wait_for(munge_socket.exists, 15, "the munge socket", cluster)
        if dbd_port is not None:
            _start_accounting(cluster, munge_socket, dbd_port, timeout)
        cluster.processes["slurmctld"] = _spawn(
            root, "slurmctld", [bins["slurmctld"], "-D", "-i", "-f", str(conf)], env
        )
        _wait_for(lambda: _ping(cluster), timeout, "slurmctld to answer", cluster)
        cluster.processes["slurmd"] = _spawn(
            root, "slurmd", [bins["slurmd"], "-D", "-f", str(conf), "-N", node], env
        )
        _wait_for(lambda: _node_idle(cluster), timeout, f"node {node} to be idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_accounting(
    cluster: SlurmCluster, munge_socket: Path, dbd_port: int, timeout: float
) -> None:
    """MariaDB on a private unix socket, then slurmdbd on `dbd_port`; the cluster registered."""
    root, bins = cluster.root, cluster.bin_paths
    db_dir = root / "mariadb"
    (db_dir / "data").mkdir(parents=True, exist_ok=True)
    # The socket's directory is the access control: only root may enter it.
    db_dir.chmod(0o700)
    db_socket = db_dir / "mysqld.sock"
    cluster.processes["mariadbd"] = _spawn(
        root,
        "mariadbd",
        [
            bins["mariadbd"],
            "--no-defaults",  # nothing from /etc/mysql (system socket, port, datadir)
            f"--datadir={db_dir / 'data'}",
            f"--socket={db_socket}",
            f"--pid-file={root / 'run' / 'mariadbd.pid'}",
            f"--log-error={root / 'log' / 'mariadbd.log'}",
            "--user=root",
            "--skip-networking",
            "--skip-grant-tables",
            # A throwaway database: small files and no fsync keep start-up under a second.
            "--innodb-buffer-pool-size=16M",
            "--innodb-log-file-size=4M",
            "--innodb-data-file-path=ibdata1:4M:autoextend",
            "--innodb-flush-method=nosync",
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
            "--innodb-log-file-buffering=ON",
            "--skip-sync-frm",
            "--innodb-fast-shutdown=2",
        ],
        cluster.env,
    )
    _wait_for(db_socket.exists, timeout, "the MariaDB socket", cluster)
    dbd_conf = root / "slurmdbd.conf"  # slurmdbd reads it next to $SLURM_CONF
    dbd_conf.write_text(
        "\n".join(
            [
                "AuthType=auth/munge",
                f"AuthInfo=socket={munge_socket}",
                "DbdHost=localhost",
                "DbdAddr=127.0.0.1",
                "CommunicationParameters=NoInAddrAny",  # bind, as slurm.conf says for the others
                f"DbdPort={dbd_port}",
                "SlurmUser=root",
                f"PidFile={root / 'run' / 'slurmdbd.pid'}",
                f"LogFile={root / 'log' / 'slurmdbd.log'}",
                "StorageType=accounting_storage/mysql",
                "StorageHost=localhost",  # with MYSQL_UNIX_PORT: our socket, not TCP
                "StorageUser=root",
                "StorageLoc=slurm_acct_db",
            ]
        )
        + "\n"
    )
    dbd_conf.chmod(0o600)  # slurmdbd refuses a config others can read
    dbd_env = {**cluster.env, "MYSQL_UNIX_PORT": str(db_socket)}
    cluster.processes["slurmdbd"] = _spawn(root, "slurmdbd", [bins["slurmdbd"], "-D"], dbd_env)
    _wait_for(lambda: _dbd_answers(cluster), timeout, "slurmdbd to answer", cluster)
    cluster.run("sacctmgr", "-i", "add", "cluster", CLUSTER_NAME)


def _dbd_answers(cluster: SlurmCluster) -> bool:
    try:
        done = subprocess.run(
            [cluster.bin_paths["sacctmgr"], "-n", "-P", "show", "cluster"],
            env=cluster.env,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _ping(cluster: SlurmCluster) -> bool:
    try:
        out = cluster.run("scontrol", "ping", check=False, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return "UP" in out


def _node_idle(cluster: SlurmCluster) -> bool:
    try:
        out = cluster.run("scontrol", "show", "node", cluster.node, "-o", check=False, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return "State=IDLE" in out


def main(argv: list[str]) -> int:
    """Start a cluster under the DIR argument and keep it up until interrupted."""
    accounting = "--accounting" in argv
    rest = [arg for arg in argv if arg != "--accounting"]
    if len(rest) != 1:
        print(
            "usage: python -m oellm_autoexp.testing.slurm_cluster [--accounting] DIR",
            file=sys.stderr,
        )
        return 2
    root = Path(rest[0]).resolve()
    try:
        cluster = start_cluster(root, accounting=accounting)
    except SlurmUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"export SLURM_CONF={cluster.conf}", flush=True)

    def _interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    # Explicit handlers: a background job inherits SIGINT ignored, and `kill` sends SIGTERM.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
