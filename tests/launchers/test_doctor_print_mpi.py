"""collbench doctor through the launchers that start ranks with another tool: the printed
rank command is `collbench doctor --launcher none` with the doctor's own options, and a real
mpirun doctor judges its rows once (the launching collbench), its exit code agreeing with
doctor.json."""

import json

import pytest

from tests.helpers import collbench, rows_of

DOCTOR_ARGS = ["--size", "1M", "--shuffle-rounds", "2", "--bisect"]


@pytest.mark.parametrize(
    "launcher_args",
    [
        ["--launcher", "torchrun", "--nproc-per-node", "2", "--print"],
        ["--launcher", "mpi", "-g", "2", "--print"],
        ["--launcher", "slurm", "-N", "2", "--print-sbatch"],
    ],
)
def test_the_ranks_run_doctor_with_its_options(launcher_args, tmp_path):
    result = collbench("doctor", *DOCTOR_ARGS, *launcher_args, "--out", str(tmp_path / "d"))
    assert result.returncode == 0, result.stderr
    assert "-m collbench doctor --launcher none --rank-env " in result.stdout
    assert "--size 1M --shuffle-rounds 2 --seed 0 --bisect" in result.stdout
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
    assert len(pairs) == 6 and len(document["matrix"]["hosts"]) == 4
    assert result.stdout.count("# Results:") == 1  # judged once, by the launching collbench
