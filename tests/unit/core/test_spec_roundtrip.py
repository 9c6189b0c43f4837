"""One definition of a run (issue 25): for every field of a sweep, overlap or doctor spec and
every launcher, the command a launcher prints (or gives its ranks) parses back, through the
CLI's own option table, to exactly the spec that was planned: knobs and topology included."""

import random
import shlex
from pathlib import Path

import pytest

from collbench.core.collectives import REGISTRY
from collbench.core.doctor_spec import DoctorSpec
from collbench.core.dtypes import DTYPES
from collbench.core.errors import SpecError
from collbench.core.overlap import COMPUTE_DTYPES, OverlapSpec
from collbench.core.spec import BACKENDS, RANK_STATS, SweepSpec
from collbench.launchers import get_launcher
from collbench.run.sweep import RunOptions

# A few seeds in the fast loop; the rest with the slow tests (CI runs them all).
SEEDS = [
    *range(6),
    *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(6, 40)),
]
LAUNCHERS = {
    "local": {},
    "torchrun": {"nproc_per_node": 2},
    "mpi": {},
    "srun": {},
    "slurm": {"nodes": 2, "ntasks_per_node": 2},
}
KNOBS = [
    ("NCCL_ALGO", "Ring"),
    ("NCCL_PROTO", "LL128,Simple"),
    ("NCCL_MIN_NCHANNELS", "8"),
    ("NCCL_SOCKET_IFNAME", "=eth0,eth1"),
    ("NCCL_DEBUG", "INFO"),
    ("GLOO_SOCKET_IFNAME", "lo"),
    ("OMP_NUM_THREADS", "2"),
]


class Captured(Exception):
    """Raised by a patched launcher once the CLI has handed it the parsed spec."""


@pytest.fixture
def topology_file(tmp_path):
    """A topology that is not in the catalog: only its file can bring it back."""
    source = Path(__file__).resolve().parents[3] / "topologies" / "dgx-h100.yaml"
    path = tmp_path / "my fabric.yaml"  # a space: the printed line must quote it
    path.write_text(source.read_text().replace("name: dgx-h100", "name: my-fabric", 1))
    return path


def _random_spec(rng: random.Random, topology_file: Path) -> SweepSpec:
    kind = rng.choice(["sweep", "overlap", "doctor"])
    fields = {
        "dtype": rng.choice([name for name in DTYPES if DTYPES[name].is_float]),
        "warmup": rng.randint(0, 20),
        "iters": rng.randint(1, 200),
        "check": rng.random() < 0.5,
        "rank_stat": rng.choice(RANK_STATS),
        "backend": rng.choice(BACKENDS),
        "timeout_s": rng.choice([30.0, 300.0, 12.5]),
        "knobs": tuple(rng.sample(KNOBS, rng.randint(0, 3))),
    }
    topology = rng.choice([None, "dgx-h100", "file"])
    if kind == "doctor":
        doctor = DoctorSpec(
            size_bytes=rng.choice([None, 4 * 1024**2]),
            shuffle_rounds=rng.randint(0, 3),
            pairs=rng.choice(["auto", "all", "sampled"]),
            bisect=rng.random() < 0.5,
            repeats=rng.randint(3, 5),
            seed=rng.randint(0, 9),
            tolerance_pct=rng.choice([5.0, 12.5]),
            topology={None: None, "file": str(topology_file)}.get(topology, topology),
        )
        from collbench.run.doctor_job import doctor_sweep

        return doctor_sweep(doctor, fields)[0]  # as `collbench doctor` builds it
    if topology == "file":
        fields.update(topology="my-fabric", topology_file=str(topology_file))
    elif topology:
        fields["topology"] = topology
    names = rng.sample(sorted(REGISTRY), rng.randint(1, 3))
    minimum = rng.choice([0, 8, 1024])
    fields.update(
        collectives=tuple(names),
        min_bytes=minimum,
        max_bytes=rng.choice([None, minimum + 4096, 1024**2]),
        op=rng.choice(["sum", "max", "min", "prod", "avg"]),
        repeats=rng.randint(1, 4),
        cuda_graph=kind == "sweep" and fields["backend"] != "gloo" and rng.random() < 0.5,
    )
    if rng.random() < 0.5:  # nccl-tests' -i: a few sizes, not the backend's default range
        fields.update(step_bytes=rng.choice([8, 1024]), max_bytes=minimum + 4096)
    else:
        fields["factor"] = rng.choice([None, 2.0, 1.5, 4.0])
    overlap = None
    if kind == "overlap" or rng.random() < 0.3:
        overlap = OverlapSpec(
            ratios=rng.choice([None, (0.5, 2.0)]),
            compute_dtype=rng.choice(["auto", *COMPUTE_DTYPES]),
            compute_streams=rng.randint(1, 3),
            matmul_shape=rng.choice([None, (64, 32, 16)]),
            allow_blocking_env=rng.random() < 0.5,
        )
    return SweepSpec(overlap=overlap, sweep_rows=kind != "overlap", **fields)


def _collbench_argv(printed: str) -> list[list[str]]:
    """The `collbench COMMAND ...` part of every line that starts one."""
    found = []
    for line in printed.splitlines():
        if line.startswith("#") or " collbench " not in f" {line} ":
            continue
        words = shlex.split(line.removesuffix(" &"))
        start = next(i for i, word in enumerate(words) if word == "collbench" and i)
        found.append(words[start + 1 :])
    return found


def _parsed(argv: list[str], monkeypatch) -> SweepSpec:
    """The spec the CLI builds from `argv`, caught where the `none` launcher plans it."""
    from typer.testing import CliRunner

    from collbench.cli import app
    from collbench.launchers.none import NoneLauncher

    seen = []

    def plan(self, spec, options, command_line):
        seen.append(spec)
        raise Captured

    monkeypatch.setattr(NoneLauncher, "plan", plan)
    result = CliRunner().invoke(app, [*argv, "--quiet"])
    assert seen, f"{shlex.join(argv)} did not parse: {result.output}"
    return seen[0]


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("seed", SEEDS)
def test_the_printed_command_parses_back_to_the_planned_spec(
    seed, launcher, topology_file, monkeypatch, tmp_path
):
    rng = random.Random(seed * 7919 + len(launcher))
    try:
        spec = _random_spec(rng, topology_file)
    except SpecError:  # a combination collbench refuses (avg on an integer...): not a spec
        pytest.skip("the random fields make no valid spec")
    options = RunOptions(
        launcher=launcher, print_only=True, out=tmp_path / "run", extra=LAUNCHERS[launcher]
    )
    try:
        job = get_launcher(launcher).plan(spec, options, ["collbench"])
    except SpecError as error:  # this spec cannot run under this launcher (say, a GPU-only one)
        pytest.skip(str(error))
    printed = get_launcher(launcher).describe(job)
    commands = _collbench_argv(printed)
    assert commands, printed
    for argv in commands:
        assert _as_run(_parsed(argv, monkeypatch)) == _as_run(job.spec), shlex.join(argv)


def _as_run(spec: SweepSpec) -> SweepSpec:
    """The spec a rank runs: a given backend's defaults filled in (the doctor's size), as
    every launcher's rank does before it measures."""
    return spec if spec.backend == "auto" else spec.with_backend(spec.backend)


def test_every_field_is_covered():
    """A new SweepSpec/OverlapSpec/DoctorSpec field must be given to the generator above."""
    import dataclasses

    covered = {
        SweepSpec: {
            "collectives", "min_bytes", "max_bytes", "factor", "step_bytes", "dtype", "op",
            "placement", "warmup", "iters", "check", "rank_stat", "backend", "timeout_s",
            "overlap", "sweep_rows", "topology", "topology_file", "doctor", "repeats", "knobs",
            "cuda_graph",
        },
        OverlapSpec: {
            "ratios", "compute_tflop", "compute_dtype", "matmul_shape", "compute_streams",
            "allow_blocking_env",
        },
    }  # fmt: skip
    for owner, names in covered.items():
        assert {item.name for item in dataclasses.fields(owner)} == names, owner.__name__


@pytest.mark.parametrize("seed", range(4))
def test_the_tune_driver_argv_parses_back_to_the_planned_tune(seed, topology_file, monkeypatch):
    """`tune run --launcher slurm` submits a driver running `collbench tune run --launcher srun ...`:
    that command line gives back the sweep (knobs axes, topology) and the plan it was made
    from."""
    from typer.testing import CliRunner

    import collbench.run.tune.launch
    from collbench.analysis.tune.select import SelectRule
    from collbench.cli import app
    from collbench.core.tune_grid import parse_knobs
    from collbench.run.tune.from_runs import TunerConfRequest
    from collbench.run.tune.launch import TunePlan
    from collbench.run.tune.slurm import driver_argv

    rng = random.Random(seed)
    texts = ["NCCL_ALGO=Ring,Tree", "NCCL_MIN_NCHANNELS=2,4"][: rng.randint(1, 2)]
    spec = SweepSpec(
        collectives=("all_reduce",),
        max_bytes=1024**2,
        backend=rng.choice(["auto", "nccl"]),
        iters=rng.randint(1, 50),
        topology=rng.choice([None, "dgx-h100", ("my-fabric", str(topology_file))]),
        repeats=1,
    )
    plan = TunePlan(
        parse_knobs(texts, spec.backend)[0],
        Path("/shared/tuned").absolute(),
        search=rng.choice(["grid", "halving", "coordinate"]),
        budget_s=rng.choice([None, 600.0]),
        channels=rng.choice([None, 0, 8]),
        rule=SelectRule(granularity=rng.choice(["band", "size"])),
        record_choices=rng.random() < 0.5,
        repeats=rng.randint(1, 5),
        tuner_conf=TunerConfRequest(
            shape=rng.choice(["tuned", "any"]),
            nccl_logs=rng.choice([(), (Path("/shared/nccl-debug.log").absolute(),)]),
        ),
    )
    seen = []

    def run_tune(spec, options, plan, *rest):
        seen.append((spec, plan))
        raise Captured

    monkeypatch.setattr(collbench.run.tune.launch, "run_tune", run_tune)
    argv = driver_argv(spec, plan, texts, json_out=False)
    assert argv[1:3] == ["-m", "collbench"]
    result = CliRunner().invoke(app, argv[3:])
    assert seen, result.output
    assert seen[0] == (spec, plan), shlex.join(argv)
