"""Golden renderings: exactly what each launcher would run, for fixed jobs (pure, no tools).

Regenerate after an intended change with COLLBENCH_REGOLD=1 and review the diff.
"""

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from collbench.core.spec import SweepSpec
from collbench.launchers import get_launcher
from collbench.launchers.mpi import MpiSettings
from collbench.launchers.slurm import SlurmSettings, parse_time_minutes, sbatch_script
from collbench.launchers.torchrun import TorchrunSettings
from collbench.store.job import Job

GOLDEN = Path(__file__).parent / "golden"
RUN_DIR = Path("/shared/results/run-1")
SPEC = SweepSpec(
    collectives=("all_reduce", "all_gather"),
    min_bytes=1024,
    max_bytes=64 * 1024**2,
    dtype="bfloat16",
    iters=50,
    warmup=10,
    # What the user asked for beyond the measurement reaches every printed line (issue 25).
    knobs=(("NCCL_ALGO", "Ring"), ("NCCL_MIN_NCHANNELS", "4")),
    topology="dgx-h100",
)
COMMAND = ["collbench", "sweep", "-c", "all_reduce,all_gather"]


def _job(launcher, nproc, settings):
    return Job(SPEC, RUN_DIR, "run-1", launcher, nproc, COMMAND, settings=settings)


def _text(value):
    text = value if isinstance(value, str) else json.dumps(value, indent=1, sort_keys=True)
    return text.replace(sys.executable, "PYTHON") + "\n"


def _check(name, value):
    path = GOLDEN / name
    text = _text(value)
    if os.environ.get("COLLBENCH_REGOLD") and (not path.is_file() or path.read_text() != text):
        path.write_text(text)
        # A file just written would only be compared with itself: what a regold run rewrites
        # fails; a golden it leaves as it was is compared for real and may pass.
        pytest.fail(
            f"regolded {path}; review the diff and rerun without COLLBENCH_REGOLD", pytrace=False
        )
    assert path.is_file(), f"{path} is missing: regenerate with COLLBENCH_REGOLD=1"
    assert text == path.read_text(), f"{name} changed; review and regenerate"


CASES = {
    "torchrun-single.txt": ("torchrun", 8, TorchrunSettings(nproc_per_node=8)),
    "torchrun-static.txt": (
        "torchrun",
        16,
        TorchrunSettings(
            nproc_per_node=8, nnodes=2, node_rank=1, master_addr="10.0.0.1", master_port=29400
        ),
    ),
    "torchrun-rdzv.txt": (
        "torchrun",
        32,
        TorchrunSettings(nproc_per_node=8, nnodes=4, rdzv_endpoint="login1:29400"),
    ),
    "mpirun.txt": (
        "mpi",
        16,
        MpiSettings(
            nproc=16,
            hostfile="/shared/hosts",
            mpi_args=("--map-by", "ppr:8:node"),
            export=(("NCCL_DEBUG", "INFO"), ("PATH", "/usr/bin:/bin")),
            as_root=False,
        ),
    ),
    "mpirun-root-oversubscribed.txt": (
        "mpi",
        4,
        MpiSettings(nproc=4, as_root=True, oversubscribe=True),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_command_renderings(name):
    launcher_name, nproc, settings = CASES[name]
    launcher = get_launcher(launcher_name)
    job = _job(launcher_name, nproc, vars(settings))
    (command,) = launcher.render(job).commands
    assert command.env["COLLBENCH_STATUS_DIR"] == str(RUN_DIR / "ranks")
    _check(name, launcher.describe(job))


SLURM = SlurmSettings(
    nodes=4,
    ntasks_per_node=8,
    gpus_per_node=8,
    partition="h100",
    account="bringup",
    qos="high",
    time="1:30:00",
    constraint="ib",
    exclusive=True,
    slurm_args=("mem=0", "reservation=fabric"),
)


# The directives only the submitted script has: where submitit's logs go, and how a
# requeued job's output follows the first attempt's.
SUBMITTED_ONLY = ("#SBATCH --output", "#SBATCH --error", "#SBATCH --open-mode")


def test_slurm_render_and_sbatch_script():
    launcher = get_launcher("slurm")
    job = _job("slurm", 32, vars(SLURM))
    plan = launcher.render(job)
    assert plan.commands == () and plan.task is not None
    env = {**plan.task.env, "COLLBENCH_LAUNCH": json.loads(plan.task.env["COLLBENCH_LAUNCH"])}
    rendered = {"sbatch": plan.batch_options, "command": plan.task.argv, "env": env}
    _check("slurm-render.json", rendered)
    _check("slurm-sbatch.sh", launcher.describe(job))
    wrapper = "PYTHON -u -m submitit.core._submit /shared/results/run-1/slurm"
    submitted = sbatch_script(job, plan, wrapper)
    _check("slurm-submitted.sh", submitted)
    # The script submitted is the one shown, but for the run directory this collbench made
    # (a printed one appends the job id), where the output goes, the watch variables and
    # submitit's wrapper, which runs the printed srun line's argv in each task.
    shown = launcher.describe(job).splitlines()
    differ = {line for line in submitted.splitlines() if line not in shown}
    assert all(
        line.startswith(("#", "export COLLBENCH_", "export SUBMITIT_", "srun ")) or not line
        for line in differ
    ), differ
    directives = [line for line in shown if line.startswith("#SBATCH --") and "output" not in line]
    assert directives == [
        line
        for line in submitted.splitlines()
        if line.startswith("#SBATCH --") and not line.startswith(SUBMITTED_ONLY)
    ]
    (printed,) = [line for line in shown if line.startswith("srun ")]
    words = shlex.split(printed.replace("${SLURM_JOB_ID}", "7"))
    words[words.index("--out") + 1] = str(job.run_dir)
    argv = list(plan.task.argv)
    assert words[-len(argv) :] == argv and words[: -len(argv)] == ["srun", "--kill-on-bad-exit=1"]
    assert submitted.splitlines()[-1].endswith(wrapper)


def test_slurm_defaults_are_small_and_explicit():
    job = _job("slurm", 2, vars(SlurmSettings()))
    _check("slurm-sbatch-defaults.sh", get_launcher("slurm").describe(job))


@pytest.mark.parametrize(
    "text, minutes",
    [
        ("30", 30),
        ("90:30", 91),
        ("1:00:00", 60),
        ("2-0", 2880),
        ("1-02:03", 1563),
        ("0-00:00:59", 1),
    ],
)
def test_slurm_time_limits(text, minutes):
    assert parse_time_minutes(text) == minutes


def test_spec_round_trips_through_its_arguments(monkeypatch):
    """What a printed command or sbatch script passes is exactly the spec that was planned."""
    from typer.testing import CliRunner

    import collbench.run.sweep
    from collbench.cli import app
    from collbench.launchers.base import LaunchResult

    seen = []
    monkeypatch.setattr(
        collbench.run.sweep,
        "run_sweep",
        lambda spec, options, line, make_sink: (seen.append(spec), (LaunchResult(0), RUN_DIR))[1],
    )
    result = CliRunner().invoke(app, ["sweep", *SPEC.to_args(), "--quiet"])
    assert result.exit_code == 0, result.output
    assert seen == [SPEC]


@pytest.mark.parametrize("name", ["local", "torchrun", "mpi", "slurm", "none"])
def test_every_launcher_renders_one_plan_type(name):
    from collbench.launchers.base import LaunchPlan

    settings = {
        "local": {},
        "none": {},
        "torchrun": vars(TorchrunSettings(nproc_per_node=2)),
        "mpi": vars(MpiSettings(nproc=2)),
        "slurm": vars(SlurmSettings()),
    }[name]
    plan = get_launcher(name).render(_job(name, 2, settings))
    assert type(plan) is LaunchPlan and plan.launcher == name
    assert all(command.argv for command in plan.commands)
    assert (plan.task is not None) == (name == "slurm")


@pytest.mark.parametrize("printing", [True, False])
def test_mpi_print_needs_no_mpi4py_but_a_run_does(printing, tmp_path):
    """--print shows the mpirun line even where mpi4py is missing (with a warning that the
    ranks need it); a run without it is refused up front."""
    import subprocess

    hide = "import sys; sys.modules['mpi4py'] = None; from collbench.cli import main; main()"
    argv = ["sweep", "--launcher", "mpi", "--nproc", "2", "-c", "all_reduce"]
    argv += ["--print"] if printing else ["--out", str(tmp_path / "run")]
    done = subprocess.run(
        [sys.executable, "-c", hide, *argv], capture_output=True, text=True, timeout=60
    )
    assert "needs mpi4py in this Python" in done.stderr
    if printing:
        assert done.returncode == 0 and done.stdout.startswith("mpirun -np 2 ")
    else:
        assert done.returncode == 2 and done.stdout == ""


def test_mpirun_forwards_knobs_not_the_head_nodes_placement():
    """-x carries the knobs to every host, never the head node's CUDA_VISIBLE_DEVICES (each
    host has its own GPUs: forwarded, ranks on other hosts would share one) nor what
    describes its install (issue 40 item 6)."""
    import subprocess

    hide = "import sys; sys.modules['mpi4py'] = None; from collbench.cli import main; main()"
    head = {"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_HOME": "/usr/local/cuda", "NCCL_VERSION": "2.21"}
    env = {**os.environ, **head, "NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"}
    argv = ["sweep", "--launcher", "mpi", "--nproc", "2", "-c", "all_reduce", "--print"]
    done = subprocess.run(
        [sys.executable, "-c", hide, *argv], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "-x NCCL_ALGO=Ring" in done.stdout and "-x NCCL_DEBUG=INFO" in done.stdout
    assert not [name for name in head if name in done.stdout], done.stdout
