"""--cpus-per-task by default: the node's CPUs (sinfo) shared among its tasks, passed to the
allocation and to the srun step, and every rank's binding recorded in meta.json; checked
on the rendering and on the real one-node Slurm cluster (4 CPUs)."""

import pytest

from collbench.bench.provenance import cpu_ranges, rank_binding
from collbench.launchers.slurm import (
    SlurmSettings,
    cpus_per_task,
    parse_node_cpus,
    step_cpus_per_task,
)
from collbench.launchers.srun import Allocation, step_settings
from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of


def test_sinfo_s_smallest_node_counts():
    assert parse_node_cpus("64\n128\n64+\n") == 64
    assert parse_node_cpus("") is None


@pytest.mark.parametrize(
    ("cpus", "tasks", "share"),
    [(224, 8, 28), (4, 2, 2), (4, 4, None), (8, 8, None), (None, 8, None), (7, 2, 3)],
)
def test_a_node_s_cpus_shared_among_its_tasks(cpus, tasks, share):
    assert cpus_per_task(cpus, tasks) == share


def test_inside_an_allocation_its_own_count_wins():
    assert step_cpus_per_task({"SLURM_CPUS_PER_TASK": "6", "SLURM_CPUS_ON_NODE": "64"}, 8) == 6
    assert step_cpus_per_task({"SLURM_CPUS_ON_NODE": "64"}, 8) == 8
    assert step_cpus_per_task({}, 8) is None


def test_srun_step_gets_the_allocation_s_cpus(monkeypatch):
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "32")
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    settings = step_settings(None, {}, Allocation("7", 2, (8, 8)))
    assert settings.cpus_per_task == 4
    assert settings.srun_options()[-2:] == ["--cpus-per-task", "4"]
    assert step_settings(None, {"cpus_per_task": 0}, Allocation("7", 2, (8, 8))).srun_options()[
        -2:
    ] == ["--ntasks", "16"]


def test_the_script_asks_for_the_cpus_and_passes_them_to_the_step():
    from collbench.launchers import get_launcher
    from tests.launchers.test_render import _job

    job = _job("slurm", 16, vars(SlurmSettings(nodes=2, ntasks_per_node=8, cpus_per_task=28)))
    script = get_launcher("slurm").describe(job)
    assert "#SBATCH --cpus-per-task=28" in script.splitlines()
    assert "\nsrun --kill-on-bad-exit=1 --cpus-per-task=28 " in script
    with pytest.raises(Exception, match="--cpus-per-task"):
        SlurmSettings(cpus_per_task=-1)


def test_binding_is_this_process_s_affinity():
    import os

    binding = rank_binding({"SLURM_CPU_BIND_TYPE": "mask_cpu:", "HOME": "/root"})
    assert binding["cpus"] == cpu_ranges(os.sched_getaffinity(0))
    assert binding["slurm"] == {"SLURM_CPU_BIND_TYPE": "mask_cpu:"}
    assert cpu_ranges([3, 0, 1, 2, 8, 10, 11]) == "0-3,8,10-11"


@pytest.mark.slow
def test_on_slurm_each_rank_gets_the_node_s_cpus_and_records_them(tmp_path, slurm_cluster):
    out = tmp_path / "run"
    done = collbench(
        "sweep", "--launcher", "slurm", "--ntasks-per-node", "2", "--time", "5",
        "-c", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "--repeats", "1",
        "--out", str(out), env=slurm_cluster.env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (script,) = [path.read_text() for path in (out / "slurm").glob("*_submission.sh")]
    printed = collbench(
        "sweep", "--launcher", "slurm", "--ntasks-per-node", "2", "--print-sbatch",
        "--out", str(tmp_path / "printed"), env=slurm_cluster.env,
    ).stdout  # fmt: skip
    for text in (script, printed):  # the cluster's node has 4 CPUs
        assert "#SBATCH --cpus-per-task=2" in text.splitlines()
        assert "\nsrun --kill-on-bad-exit=1 --cpus-per-task=2 " in text
    ranks = meta_of(out)["ranks"]
    assert len(ranks) == 2
    for rank in ranks:
        binding = rank["binding"]
        assert binding["slurm"]["SLURM_CPUS_PER_TASK"] == "2" and binding["cpu_count"] >= 1
