"""Start and stop a real one-node Slurm cluster for tests, in a private directory.

Everything the daemons write (config, state, spool, pid and log files) lives under the folder
given to `start_cluster`, and the daemons listen on free ports picked at start, so test
sessions that run at the same time on one box do not meet. Job ids count from 1 in a new
folder and keep counting when a folder is used again (state is recovered). munged is shared
by the whole box: it is started if it is not running and left running afterwards.

Slurm accounting is real too: a private MariaDB server and slurmdbd under the same folder, so
`sacct` (which submitit reads a job's state from) answers. Each folder names its cluster anew
(job ids restart from 1 in a new folder, and the accounting must not mix two clusters' job 1).

Needs root (the config says `SlurmUser=root`) and Debian 12's `slurm-wlm`, `slurmdbd`,
`mariadb-server` and `munge` (`.ci/install-schedulers` installs them).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
NODE = "localhost"
START_TIMEOUT = 20.0
# In the order they stop (pid files under run/, logs under log/); they start in reverse.
DAEMONS = ("slurmd", "slurmctld", "slurmdbd", "mariadbd")


def _binary(name: str) -> str | None:
    """The path of an executable, looking in the sbin folders too (root's PATH may lack them)."""
    return shutil.which(name) or next(
        (
            str(path)
            for path in (Path("/usr/sbin") / name, Path("/sbin") / name)
            if os.access(path, os.X_OK)
        ),
        None,
    )


def available() -> str | None:
    """None when a cluster can be started here, else the reason to skip the tests that need one."""
    if os.name != "posix" or os.geteuid() != 0:
        return "starting a Slurm cluster needs root (SlurmUser=root)"
    missing = [
        name
        for name in (
            "slurmctld",
            "slurmd",
            "munged",
            "munge",
            "sinfo",
            "srun",
            "sbatch",
            "squeue",
            "scontrol",
            "runuser",
            "slurmdbd",
            "sacct",
            "sacctmgr",
            "mariadbd",
            "mariadb-install-db",
        )
        if not _binary(name)
    ]
    if missing:
        return (
            f"Slurm/munge not installed (missing {', '.join(missing)}); run .ci/install-schedulers"
        )
    return None


@dataclass
class SlurmCluster:
    """A running one-node cluster: its config file and the environment its commands need."""

    conf: Path
    env: dict[str, str] = field(default_factory=dict)
    partitions: tuple[str, ...] = ("debug", "short")

    @property
    def base(self) -> Path:
        """The folder holding the cluster's config, state, spool, pid and log files."""
        return self.conf.parent

    def client_env(self) -> dict[str, str]:
        """os.environ plus `env`: what to pass to srun, sbatch, squeue...

        submitit runs sbatch/scancel with the calling process's own environment, so code that
        uses it needs `env` in os.environ (e.g. pytest's monkeypatch.setenv).
        """
        return {**os.environ, **self.env}

    def logs(self, lines: int = 40) -> str:
        """The last lines of both daemons' logs, for error messages."""
        return _log_tails(self.base, lines)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel the cluster's jobs, stop slurmd and slurmctld by their pid files, and wait.

        munged is left running (other clusters on the box may use it).
        """
        if _read_pid(_paths(self.base)["slurmctld.pid"]) is not None:
            try:  # best effort: jobs still running would leave slurmstepd processes behind
                subprocess.run(
                    ["scancel", "--user=root"],
                    capture_output=True,
                    env=self.client_env(),
                    timeout=5,
                )
            except (OSError, subprocess.SubprocessError):
                pass
        _stop_daemons(self.base, timeout)


def _paths(base: Path) -> dict[str, Path]:
    return {
        "conf": base / "slurm.conf",
        "dbd.conf": base / "slurmdbd.conf",  # beside slurm.conf: where slurmdbd and sacct look
        "name": base / "cluster_name",
        "db": base / "db",
        "state": base / "state",
        "spool": base / "spool",
        "log": base / "log",
        **{f"{name}.pid": base / "run" / f"{name}.pid" for name in DAEMONS},
        **{f"{name}.log": base / "log" / f"{name}.log" for name in DAEMONS},
    }


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cluster_name(base: Path) -> str:
    """The folder's cluster name: made once, kept with the folder's job ids."""
    path = _paths(base)["name"]
    if not path.exists():
        path.write_text(f"cb{os.urandom(4).hex()}")
    return path.read_text().strip()


def _config(base: Path, cpus: int, ports: dict[str, int]) -> str:
    paths = _paths(base)
    return "\n".join(
        [
            "# One-node test cluster written by tests/launchers/slurm_cluster.py",
            f"ClusterName={_cluster_name(base)}",
            f"SlurmctldHost={NODE}",
            f"SlurmctldPort={ports['slurmctld']}",
            f"SlurmdPort={ports['slurmd']}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/slurmdbd",
            f"AccountingStorageHost={NODE}",
            f"AccountingStoragePort={ports['slurmdbd']}",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            # lets a 2-core box advertise `cpus` CPUs; with its real count a 4-task job pends forever
            "SlurmdParameters=config_overrides",
            f"StateSaveLocation={paths['state']}",
            f"SlurmdSpoolDir={paths['spool']}",
            f"SlurmctldPidFile={paths['slurmctld.pid']}",
            f"SlurmdPidFile={paths['slurmd.pid']}",
            f"SlurmctldLogFile={paths['slurmctld.log']}",
            f"SlurmdLogFile={paths['slurmd.log']}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=1",
            "MinJobAge=300",
            "KillWait=2",
            "InactiveLimit=0",
            f"NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=20000 State=UNKNOWN",
            f"PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
            f"PartitionName=short Nodes={NODE} Default=NO MaxTime=5 State=UP",
            "",
        ]
    )


def _dbd_config(base: Path, ports: dict[str, int]) -> str:
    paths = _paths(base)
    return "\n".join(
        [
            "# Accounting of the one-node test cluster (tests/launchers/slurm_cluster.py)",
            "AuthType=auth/munge",
            f"DbdHost={NODE}",
            f"DbdPort={ports['slurmdbd']}",
            "SlurmUser=root",
            f"PidFile={paths['slurmdbd.pid']}",
            f"LogFile={paths['slurmdbd.log']}",
            "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1",
            f"StoragePort={ports['mariadbd']}",
            "StorageUser=root",
            "StorageLoc=slurm_acct_db",
            "",
        ]
    )


def _answers(argv: list[str], env: dict[str, str]) -> str | None:
    """A command's output when it exits 0, else None."""
    done = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, **env}, timeout=30
    )
    return done.stdout if done.returncode == 0 else None


def _wait_until(ready: Callable[[], object], what: str, base: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start in {START_TIMEOUT:.0f} s\n{_log_tails(base, 40)}")


def _start_accounting(base: Path, env: dict[str, str], ports: dict[str, int]) -> None:
    """A private MariaDB (no grant tables: only this cluster's slurmdbd uses its port) and
    slurmdbd over it, with the cluster registered; returns once sacctmgr lists the cluster."""
    paths = _paths(base)
    if not paths["db"].exists():
        install = [_binary("mariadb-install-db") or "mariadb-install-db", "--user=root"]
        install += [f"--datadir={paths['db']}", "--skip-test-db"]
        subprocess.run(install, check=True, capture_output=True, timeout=60)
    server = [_binary("mariadbd") or "mariadbd", "--user=root", f"--datadir={paths['db']}"]
    server += [f"--port={ports['mariadbd']}", "--bind-address=127.0.0.1"]
    server += [f"--socket={paths['db']}.sock", f"--pid-file={paths['mariadbd.pid']}"]
    server += [f"--log-error={paths['mariadbd.log']}", "--skip-grant-tables", "--skip-log-bin"]
    subprocess.Popen(
        server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    client = [_binary("mariadb") or "mariadb", "-h", "127.0.0.1", f"-P{ports['mariadbd']}"]
    _wait_until(lambda: _answers([*client, "-uroot", "-e", "select 1"], env), "mariadbd", base)
    paths["dbd.conf"].write_text(_dbd_config(base, ports))
    paths["dbd.conf"].chmod(0o600)  # slurmdbd refuses a config others may read
    daemon = [_binary("slurmdbd") or "slurmdbd"]
    subprocess.run(daemon, check=True, env={**os.environ, **env}, cwd=base, timeout=30)
    name, sacctmgr = _cluster_name(base), ["sacctmgr", "-i", "-n", "-P"]
    _wait_until(
        lambda: (
            name in (_answers([*sacctmgr, "show", "cluster", "format=cluster"], env) or "")
            or _answers([*sacctmgr, "add", "cluster", name], env) is not None
        ),
        "slurmdbd",
        base,
    )


def _munge_works() -> bool:
    """True when munged answers: a credential made by `munge` decodes with `unmunge`."""
    if not MUNGE_SOCKET.exists():
        return False
    made = subprocess.run([_binary("munge") or "munge", "-n"], capture_output=True, timeout=10)
    if made.returncode != 0:
        return False
    read = subprocess.run(
        [_binary("unmunge") or "unmunge"], input=made.stdout, capture_output=True, timeout=10
    )
    return read.returncode == 0


def ensure_munged(timeout: float = 10.0) -> None:
    """Start munged as the munge user unless it already answers."""
    if _munge_works():
        return
    run_dir = MUNGE_SOCKET.parent
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.chown(run_dir, "munge", "munge")
    run_dir.chmod(0o755)
    started = subprocess.run(
        ["runuser", "-u", "munge", "--", _binary("munged") or "munged"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _munge_works():
            return
        time.sleep(0.1)
    raise RuntimeError(
        f"munged did not start (exit {started.returncode}): "
        f"{started.stderr.strip() or started.stdout.strip()}"
    )


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _is_daemon(pid: int, name: str) -> bool:
    """True when `pid` is alive and is `name` (not a recycled pid of something else)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and os.path.basename(cmdline[0].decode(errors="replace")) == name


def _stop_daemons(base: Path, timeout: float) -> None:
    """Send SIGTERM to the daemons named by the pid files under `base`; SIGKILL the stragglers."""
    paths = _paths(base)
    pids = []
    for name in DAEMONS:  # slurmd first, the database last
        pid = _read_pid(paths[f"{name}.pid"])
        if pid is not None and _is_daemon(pid, name):
            try:
                os.kill(pid, signal.SIGTERM)
                pids.append((pid, name))
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        pids = [(pid, name) for pid, name in pids if _is_daemon(pid, name)]
        time.sleep(0.05)
    for pid, _name in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for name in DAEMONS:
        paths[f"{name}.pid"].unlink(missing_ok=True)


def _log_tails(base: Path, lines: int) -> str:
    paths = _paths(base)
    parts = []
    for name in DAEMONS:
        log = paths[f"{name}.log"]
        try:
            tail = log.read_text(errors="replace").splitlines()[-lines:]
        except OSError as err:
            tail = [f"(unreadable: {err})"]
        parts.append(f"--- {log} (last {lines} lines) ---\n" + "\n".join(tail))
    return "\n".join(parts)


def _node_state(env: dict[str, str]) -> str:
    """The node's state as sinfo shows it (one line per partition, all the same)."""
    shown = subprocess.run(
        ["sinfo", "-h", "-N", "-n", NODE, "-o", "%T"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=10,
    )
    if shown.returncode != 0:
        return f"sinfo failed: {shown.stderr.strip()}"
    return ",".join(sorted(set(shown.stdout.split())))


def start_cluster(base: Path, cpus: int = 4) -> SlurmCluster:
    """Write a slurm.conf under `base`, start munged (if needed), slurmctld and slurmd.

    Returns once the node is idle. Daemons left by an earlier session under the same `base`
    are stopped first. Raises RuntimeError, with the daemons' log tails, if the node is not
    idle within START_TIMEOUT seconds (the daemons are stopped again then).
    """
    reason = available()
    if reason:
        raise RuntimeError(reason)
    base = Path(base).resolve()
    paths = _paths(base)
    _stop_daemons(base, timeout=10.0)
    for key in ("state", "spool", "log"):
        paths[key].mkdir(parents=True, exist_ok=True)
    paths["slurmctld.pid"].parent.mkdir(parents=True, exist_ok=True)
    ports = {name: _free_port() for name in DAEMONS}
    paths["conf"].write_text(_config(base, cpus, ports))
    ensure_munged()

    env = {"SLURM_CONF": str(paths["conf"])}
    cluster = SlurmCluster(conf=paths["conf"], env=env)
    daemon_env = {**os.environ, **env}
    commands = {
        # no -c: a folder used again keeps its state, so its job ids keep counting up
        "slurmctld": [_binary("slurmctld") or "slurmctld", "-f", str(paths["conf"])],
        "slurmd": [_binary("slurmd") or "slurmd", "-N", NODE, "-f", str(paths["conf"])],
    }
    try:
        _start_accounting(base, env, ports)
        for name, command in commands.items():
            started = subprocess.run(
                command, capture_output=True, text=True, env=daemon_env, cwd=base, timeout=30
            )
            if started.returncode != 0:
                raise RuntimeError(
                    f"{name} failed to start (exit {started.returncode}): {started.stderr.strip()}"
                )
        deadline = time.monotonic() + START_TIMEOUT
        state = ""
        while time.monotonic() < deadline:
            state = _node_state(env)
            if state == "idle":
                return cluster
            time.sleep(0.2)
        raise RuntimeError(
            f"Slurm node {NODE!r} not idle after {START_TIMEOUT:.0f} s "
            f"(state: {state!r})\n{cluster.logs()}"
        )
    except BaseException:
        cluster.stop()
        raise


def requeue_now(job_id: str, env: dict[str, str], settle_s: float = 5.0) -> None:
    """`scontrol requeue` a running job, then start it again without Slurm's hold
    (Reason=BeginTime, two minutes): once the hold shows, wait `settle_s` (the first
    attempt's steps are killed and its credential revoked: a job started before that is
    killed at once, "Job credential revoked"), then set its start time to now."""
    subprocess.run(["scontrol", "requeue", job_id], env=env, check=True, timeout=30)
    shown = ["scontrol", "show", "job", "-o", job_id]
    deadline = time.time() + 60
    while time.time() < deadline:
        line = subprocess.run(shown, capture_output=True, text=True, env=env, timeout=30).stdout
        if "Reason=BeginTime" in line:
            break
        time.sleep(0.2)
    time.sleep(settle_s)
    update = ["scontrol", "update", f"JobId={job_id}", "StartTime=now"]
    subprocess.run(update, env=env, check=True, timeout=30)
