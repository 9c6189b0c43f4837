"""`--launcher local --print` prints rank commands that run the sweep on their own."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of

pytestmark = pytest.mark.slow  # two real gloo ranks started from the printed lines

REPO = Path(__file__).resolve().parents[2]
SMALL = ["-c", "all_reduce", "-b", "1K", "-e", "4K", "-n", "2", "-w", "1"]
SMALL += ["--repeats", "1"]  # launcher mechanics: one pass


def test_printed_local_commands_run_in_order_in_a_shell(tmp_path):
    out = tmp_path / "run"
    printed = collbench(
        "sweep", "--launcher", "local", "--nproc", "2", *SMALL, "--print", "--out", str(out)
    )
    assert printed.returncode == 0, printed.stderr
    assert not out.exists()  # printing prepares nothing
    lines = [line for line in printed.stdout.splitlines() if not line.startswith("#")]
    assert len(lines) == 2 and lines[0].endswith(" &") and "RANK=1" in lines[0]
    assert "RANK=0" in lines[1] and "--launcher none --rank-env torch" in lines[1]
    assert "job.json" not in printed.stdout and "COLLBENCH_PARENT_PID" not in printed.stdout
    script = tmp_path / "ranks.sh"
    script.write_text(printed.stdout)
    # a fresh shell in another directory, with no collbench process around to help
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# Collective: all_reduce" in done.stdout and f"# Results: {out}" in done.stdout
    meta = meta_of(out)
    assert (meta["state"], meta["world_size"]) == ("completed", 2)
    assert rows_of(out) and all(row["n_wrong"] == 0 for row in rows_of(out))
    assert sys.executable in lines[1]
