"""Printed commands run as printed, in a fresh shell, and measure what was asked for: the
knob and the topology given to `--print` reach meta.json and every row (issue 25). The
Slurm script's own test is in test_slurm.py (test_printed_sbatch_script_runs_as_is_and_again)."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import assert_asked_for_is_recorded, collbench_process, meta_of
from tests.netns import NODE_ADDRS, reason_to_skip, two_nodes

pytestmark = pytest.mark.slow  # real torchrun and mpirun jobs

REPO = Path(__file__).resolve().parents[2]
SMALL = ["-c", "all_reduce", "-b", "1K", "-e", "8K", "-n", "5", "-w", "1", "--repeats", "1"]
ASKED = ["--knob", "NCCL_ALGO=Ring", "--topology", "dgx-h100", "--timeout", "60"]


def _fresh_shell_env(**extra: str) -> dict[str, str]:
    """What a new login shell has: no COLLBENCH_* or knob left over from the printing one."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONPATH": str(REPO),
    }
    return {**env, **extra}


def _commands(printed: str) -> list[str]:
    return [line for line in printed.splitlines() if line.strip() and not line.startswith("#")]


def test_printed_mpirun_line_runs_in_a_fresh_shell(tmp_path, mpirun):
    out = tmp_path / "run"
    printed = collbench_process(
        "sweep", "--launcher", "mpi", "-g", "2", "--print", *SMALL, *ASKED, "--out", str(out)
    )
    assert printed.returncode == 0, printed.stderr
    (line,) = _commands(printed.stdout)
    assert "COLLBENCH_" not in line  # nothing the user's shell does not have
    assert not out.exists()
    done = subprocess.run(
        ["bash", "-c", line], capture_output=True, text=True, env=_fresh_shell_env(), timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert_asked_for_is_recorded(out, 2)


def test_printed_torchrun_lines_run_on_two_namespace_nodes(tmp_path):
    reason = reason_to_skip()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "run"  # one directory both "nodes" see, like a shared filesystem
    printed = collbench_process(
        "sweep",
        "--launcher",
        "torchrun",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--master-addr",
        NODE_ADDRS[0],
        "--master-port",
        "29563",
        "--print",
        *SMALL,
        *ASKED,
        "--out",
        str(out),
    )
    assert printed.returncode == 0, printed.stderr
    lines = _commands(printed.stdout)
    assert [("--node-rank 0" in lines[0]), ("--node-rank 1" in lines[1])] == [True, True]
    with two_nodes() as nodes:
        procs = []
        for node, line in zip(nodes, lines, strict=True):
            wrapped = ["ip", "netns", "exec", node.netns, "unshare", "--uts", "bash", "-c"]
            wrapped.append(f"hostname {node.host} && {line}")
            env = _fresh_shell_env(GLOO_SOCKET_IFNAME=node.link)
            procs.append(subprocess.Popen(wrapped, env=env, text=True, stderr=subprocess.PIPE))
        errors = [proc.communicate(timeout=240)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], errors
    assert_asked_for_is_recorded(out, 2)
    assert meta_of(out)["hosts"] == ["cbnode0", "cbnode1"]


def test_printed_local_lines_carry_the_knob_and_topology(tmp_path):
    """The local launcher's --print lines (ranks 1.. in the background, rank 0 last) too."""
    out = tmp_path / "run"
    printed = collbench_process("sweep", "-g", "2", "--print", *SMALL, *ASKED, "--out", str(out))
    assert printed.returncode == 0, printed.stderr
    script = "\n".join(_commands(printed.stdout)) + "\nwait\n"
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=_fresh_shell_env(), timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert_asked_for_is_recorded(out, 2)
