"""collbench doctor through the launchers that start ranks with another tool: the printed
rank command is `collbench doctor --launcher none` with the doctor's own options; a real
mpirun doctor and a real Slurm job are judged once, by the launching collbench, the exit code
agreeing with doctor.json."""

import json

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import rows_of

DOCTOR_ARGS = ["--size", "1M", "--shuffle-rounds", "2", "--bisect"]


@pytest.mark.parametrize(
    "launcher_args",
    [
        ["--launcher", "torchrun", "--nproc-per-node", "2", "--print"],
        ["--launcher", "mpi", "-g", "2", "--print"],
        ["--launcher", "slurm", "-N", "2", "--print-sbatch"],
    ],
)
@pytest.mark.slow
def test_the_ranks_run_doctor_with_its_options(launcher_args, tmp_path):
    result = collbench("doctor", *DOCTOR_ARGS, *launcher_args, "--out", str(tmp_path / "d"))
    assert result.returncode == 0, result.stderr
    assert "-m collbench doctor --launcher none --rank-env " in result.stdout
    assert "--size 1M --shuffle-rounds 2 --seed 0 --repeats 3 --bisect" in result.stdout
    assert not (tmp_path / "d").exists()  # printing starts nothing


@pytest.mark.slow
@pytest.mark.usefixtures("mpirun")
def test_doctor_under_mpirun_on_four_one_rank_nodes(tmp_path):
    out = tmp_path / "doctor"
    result = collbench(
        "doctor", "--launcher", "mpi", "-g", "4", "--size", "256K", "--iters", "5",
        "--out", str(out), env={"COLLBENCH_TEST_DOCTOR_NODE_SIZE": "1"},
    )  # fmt: skip
    assert result.returncode in (0, 5), result.stderr
    document = json.loads((out / "doctor.json").read_text())
    assert document["healthy"] is (result.returncode == 0)
    pairs = [row for row in rows_of(out) if row["stage"] == "pair"]
    assert len(pairs) == 6 * 3 and len(document["matrix"]["hosts"]) == 4  # 3 repeats
    assert sorted({row["repeat"] for row in pairs}) == [0, 1, 2]
    assert result.stdout.count("# Results:") == 1  # judged once, by the launching collbench


@pytest.mark.slow
def test_doctor_under_a_real_slurm_job(tmp_path, slurm_cluster):
    out = tmp_path / "doctor"
    result = collbench(
        "doctor", "--launcher", "slurm", "--ntasks-per-node", "2", "--time", "5",
        "--size", "256K", "--iters", "5", "--expect-busbw", "1000", "--out", str(out),
        env=slurm_cluster.env, timeout=400,
    )  # fmt: skip
    assert result.returncode == 5, result.stderr + result.stdout  # 1000 GB/s: nobody has it
    document = json.loads((out / "doctor.json").read_text())
    assert document["healthy"] is False and document["findings"][0]["kind"] == "node"
    # one node: no separate full; its two ranks' pair round after the intra one, each repeat
    assert [row["stage"] for row in rows_of(out)] == ["intra", "gpu-pair"] * 3
