"""`--launcher local` with gloo forks its ranks from one process that imported torch once
(launchers/forked.py, bench/rank_forker.py); COLLBENCH_RANK_START=spawn starts one fresh
process per rank, the path GPU ranks always take. Real gloo ranks, real signals."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import collbench_process, meta_of, rank_pid, rows_of, start, wait_for_rows

pytestmark = pytest.mark.slow  # real gloo ranks

REPO = Path(__file__).resolve().parents[2]
SMALL = ["-c", "all_reduce", "-b", "1K", "-e", "4K", "-n", "2", "-w", "1", "--repeats", "1"]
LONG = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "4M", "-n", "40", "-w", "2"]
LONG += ["--repeats", "1"]


def _parent(pid: int) -> int:
    """The parent pid in /proc/PID/stat (field 4, after the parenthesised name)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _session(pid: int) -> int:
    """The session id in /proc/PID/stat (field 6)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(pids, seconds=15.0):
    deadline = time.time() + seconds
    while time.time() < deadline and any(_exists(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if _exists(pid)]


def _same_rows(out):
    rows, frame = rows_of(out), pd.read_parquet(out / "rows.parquet")
    assert rows and frame["time_us"].tolist() == [row["time_us"] for row in rows]
    assert all(row["n_wrong"] == 0 for row in rows)


def test_gloo_ranks_are_forked_from_one_forker_and_ctrl_c_still_exits_130(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG, "--backend", "gloo", "--out", str(out))
    wait_for_rows(out, 2)
    pids = [rank_pid(out, rank) for rank in range(2)]
    forkers = {_parent(pid) for pid in pids}
    assert len(forkers) == 1 and process.pid not in forkers  # one forker, not the launcher
    (forker,) = forkers
    assert b"collbench.bench.rank_forker" in Path(f"/proc/{forker}/cmdline").read_bytes()
    assert [_session(pid) for pid in pids] == pids  # each rank leads its own session
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr.strip().splitlines()[-1] and "Traceback" not in stderr
    assert meta_of(out)["state"] == "interrupted"
    _same_rows(out)
    assert _wait_gone([*pids, forker]) == []


def test_a_forked_run_completes_with_the_launchers_parquet(tmp_path):
    out = tmp_path / "run"
    done = collbench_process("sweep", *SMALL, "--backend", "gloo", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert meta_of(out)["state"] == "completed"
    _same_rows(out)
    logs = sorted(path.name for path in (out / "logs").iterdir())
    assert logs == ["rank-00000.log", "rank-00001.log"]
    assert not list(out.rglob("*.tmp*"))


def test_spawned_ranks_are_the_launchers_children(tmp_path):
    """The spawn path (GPU ranks' only one) still runs, watched the same way."""
    out = tmp_path / "run"
    env = {"COLLBENCH_RANK_START": "spawn"}
    process = start("sweep", *LONG, "--backend", "gloo", "--out", str(out), env=env)
    wait_for_rows(out, 2)
    pids = [rank_pid(out, rank) for rank in range(2)]
    assert [_parent(pid) for pid in pids] == [process.pid, process.pid]
    os.kill(pids[1], signal.SIGKILL)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    assert f"rank 1 (pid {pids[1]}) on " in stderr and "killed by SIGKILL" in stderr
    _same_rows(out)


def _fake_torch(tmp_path: Path, body: str) -> dict[str, str]:
    """An environment whose `import torch` runs `body` instead (the launcher never imports
    torch for gloo; the forker does)."""
    package = tmp_path / "fake" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), str(REPO)])}


def test_a_forker_that_cannot_start_ranks_fails_the_run_in_one_line(tmp_path):
    out = tmp_path / "run"
    env = _fake_torch(tmp_path, "raise ImportError('torch is broken here')\n")
    done = collbench_process("sweep", *SMALL, "--backend", "gloo", "--out", str(out), env=env)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("collbench: error: rank 0 (pid None) on "), done.stderr
    assert "during start-up" in last and "Traceback" not in done.stderr
    assert meta_of(out)["state"] == "failed"
    assert "torch is broken here" in (out / "logs" / "rank-00000.log").read_text()


def test_ctrl_c_while_the_forker_imports_torch_exits_130_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    pid_file = tmp_path / "forker.pid"
    body = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
    env = _fake_torch(tmp_path, body + "time.sleep(60)\n")
    process = start("sweep", *SMALL, "--backend", "gloo", "--out", str(out), env=env)
    deadline = time.time() + 30
    while time.time() < deadline and not pid_file.exists():
        time.sleep(0.05)
    time.sleep(0.2)  # the pid written, the forker now sleeps in its import
    forker = int(pid_file.read_text())
    process.send_signal(signal.SIGINT)
    interrupted_at = time.time()
    _, stderr = process.communicate(timeout=60)
    assert time.time() - interrupted_at < 10
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr.strip().splitlines()[-1] and "Traceback" not in stderr
    assert meta_of(out)["state"] == "interrupted"
    assert _wait_gone([forker], 5) == []


def test_the_parent_imports_no_torch_to_print_gloo(tmp_path):
    """torch is for the ranks: --print (and planning) of gloo, or of auto on a torch built
    without CUDA or ROCm, never imports it (about a second)."""
    import torch

    code = (
        "import sys; from collbench.cli.app import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('torch imported:', 'torch' in sys.modules)\n"
    )
    cpu_build = torch.version.cuda is None and getattr(torch.version, "hip", None) is None
    for backend in ("gloo", "auto") if cpu_build else ("gloo",):
        args = ["sweep", *SMALL, "--backend", backend, "--print", "--out", str(tmp_path / "r")]
        done = subprocess.run(
            [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO
        )
        assert done.returncode == 0, done.stderr
        assert "--launcher none" in done.stdout and "torch imported: False" in done.stdout
