"""Bad input: exit code 2 and exactly one line on stderr naming the problem, no traceback."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import collbench

# One real `collbench` process per case (~0.4 s each, ~2 s where it refuses only after
# importing torch): the lists below are slow together; the fast loop keeps the single-case
# refusals further down.
CASE_PER_PROCESS = pytest.mark.slow


@pytest.mark.parametrize(
    "args, needle",
    [
        (["-b", "12Q"], "--min-bytes: '12Q' is not a size"),
        (["-e", "3X"], "--max-bytes: '3X' is not a size"),
        (["-b", "1M", "-e", "1K"], "--min-bytes: 1048576 is larger than --max-bytes"),
        (["-f", "1"], "--factor: 1.0 must be greater than 1"),
        (["-f", "0.5"], "--factor"),
        (["-f", "2", "-i", "4K"], "conflicts with --step-bytes"),
        (["-c", "all_reduce,allreduce"], "--collective: 'allreduce' is unknown"),
        (["-d", "complex64"], "--dtype: 'complex64' is unknown"),
        (["-o", "xor"], "--op: 'xor' is not one of"),
        (["-o", "avg", "-d", "int32"], "--op: 'avg' needs a floating-point --dtype"),
        (["--placement", "out_of_place", "-c", "all_reduce"], "cannot be measured for all_reduce"),
        (["--nproc", "0"], "--nproc: 0 must be at least 1"),
        (["--nproc", "1", "-c", "sendrecv"], "'sendrecv' needs at least 2 ranks"),
        (["-e", "64G"], "of host memory"),
        (["--iters", "0"], "--iters: 0 must be at least 1"),
        (["--iters", "abc"], "Invalid value for '--iters'"),
        (["--warmup", "-1"], "--warmup: -1 must be 0 or more"),
        (["--timeout", "0"], "--timeout"),
        (["--rank-stat", "median"], "--rank-stat: 'median' is not one of"),
        (["--backend", "nccl"], "--backend: 'nccl' needs a visible GPU"),
        (["--backend", "mpi"], "--backend: 'mpi' is not one of"),
        (["--launcher", "slurmish"], "--launcher: 'slurmish' is not one of"),
        (["--launcher", "none", "--nproc", "2"], "conflicts with --launcher none"),
        (["--launcher", "none"], "not started as a rank"),
        (["--partition", "gpu"], "--partition: 'gpu' does not apply to --launcher local"),
        (["--launcher", "torchrun", "--nnodes", "2"], "needs --master-addr"),
        (["--launcher", "torchrun", "--nproc", "2"], "use --nproc-per-node"),
        (["--launcher", "torchrun", "--node-rank", "2"], "--node-rank: 2 must be in 0..0"),
        (
            ["--launcher", "torchrun", "--rdzv-endpoint", "h:1", "--master-addr", "h"],
            "conflicts with --master-addr",
        ),
        (["--launcher", "slurm", "--time", "bogus"], "--time: 'bogus' is not a Slurm time"),
        (["--launcher", "slurm", "--time", "0"], "--time: '0' is not a Slurm time"),
        (["--launcher", "slurm", "--slurm-arg", "=x"], "is not KEY=VALUE"),
        (["--launcher", "slurm", "--nodes", "0"], "--nodes: 0 must be from 1 to"),
        (["--launcher", "slurm", "--nproc", "4"], "use --nodes and --ntasks-per-node"),
        (["--launcher", "mpi", "--hostfile", "/no/such/file", "--print"], "not a readable file"),
        (["--launcher", "local", "--rank-env", "torch"], "--rank-env: 'torch' is for ranks"),
        (["--launcher", "none", "--print"], "--print needs a launcher"),
        (["--quiet", "--json"], "conflicts with --quiet"),
        (["--topology", "no-such-fabric"], "--topology: 'no-such-fabric' is neither a file nor"),
        (["--no-such-option"], "No such option: --no-such-option"),
        (["-i", "1", "-b", "1", "-e", "16M", "--print"], "--step-bytes: 1 gives 16,777,216 sizes"),
        (["-f", "1.0000001", "--print"], "--factor: 1.0000001 gives about"),
        (["--iters", "10000000000"], "--iters: 10000000000 is more than the maximum"),
        (["--iters", "1e10"], "Invalid value for '--iters'"),
        (["--iters", "1e23"], "Invalid value for '--iters'"),
        (["--warmup", "10000000000"], "--warmup: 10000000000 is more than the maximum"),
        (["--nproc", "100000", "--no-check", "--print"], "--nproc: 100000 rank processes need"),
        (
            ["--launcher", "mpi", "--print", "--mpi-arg", '--x "y'],
            "--mpi-arg: '--x \"y' cannot be split into arguments: No closing quotation",
        ),
    ],
)
@CASE_PER_PROCESS
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    _assert_refused(tmp_path, "sweep", args, needle)


def _assert_refused(tmp_path, command, args, needle):
    """Exit 2, one line naming the problem, and nothing written to the run directory."""
    done = collbench(command, *args, "--out", str(tmp_path / "run"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("collbench: error: ") and needle in lines[0]
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--compute-ratio", "0"], "--compute-ratio: 0.0 must be a number greater than 0"),
        (["--compute-ratio", "1,-2"], "--compute-ratio: -2.0 must be a number greater than 0"),
        (["--compute-ratio", "1,x"], "--compute-ratio: '1,x' is not a comma list of numbers"),
        (["--compute-ratio", "1", "--compute-tflop", "2"], "conflicts with --compute-ratio"),
        (["--compute-tflop", "-1"], "--compute-tflop: -1.0 must be greater than 0"),
        (["--compute-dtype", "int8"], "--compute-dtype: 'int8' is not a matmul dtype"),
        (["--compute-dtype", "fp6"], "--compute-dtype: 'fp6' is not a matmul dtype"),
        (["--matmul-shape", "4096x4096"], "--matmul-shape: '4096x4096' is not MxNxK"),
        (["--compute-streams", "0"], "--compute-streams: 0 must be between 1 and 32"),
        (["--knob", "PATH=/tmp"], "--knob: 'PATH=/tmp' does not name a communication knob"),
        (["--knob", "NCCL_ALGO"], "--knob: 'NCCL_ALGO' is not NAME=VALUE"),
        (["--overlap"], "No such option: --overlap"),
    ],
)
@CASE_PER_PROCESS
def test_bad_overlap_input_is_one_line_and_exit_2(tmp_path, args, needle):
    _assert_refused(tmp_path, "overlap", args, needle)


_LLAMA = ["mfu", "-T", "dgx-h100", "--model", "llama3-8b", "--global-batch", "8"]
_SMALL_SHAPE = ["mfu", "-T", "dgx-h100", "--layers", "4", "--hidden", "256", "--heads", "4"]
_SMALL_SHAPE += ["--vocab", "1000", "--global-batch", "8"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        ([*_LLAMA, "--seq", "99999999999999"], "--seq: 99999999999999 is more than"),
        ([*_SMALL_SHAPE, "--params", "1e300"], "--params: 1e+300 is more than 1e+15"),
        ([*_SMALL_SHAPE, "--params", "1e9"], "differs from the shape's own count"),
        ([*_LLAMA, "--params", "16e9"], "by more than 25%; refused"),
        (
            ["mfu", "-T", "dgx-h100", "--layers", "100000", "--hidden", "1000000"]
            + ["--heads", "8", "--vocab", "1000", "--global-batch", "8"],
            "parameters; at most 1e+15 are supported",
        ),
    ],
)
@CASE_PER_PROCESS
def test_other_commands_refuse_bad_input_in_one_line(argv, needle):
    _assert_one_line(argv, needle)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["-i", "1", "-b", "1", "-e", "16M", "--print"], "--step-bytes: 1 gives 16,777,216 sizes"),
        (["--iters", "10000000000"], "--iters: 10000000000 is more than the maximum"),
        (["--launcher", "mpi", "--print", "--mpi-arg", '--x "y'], "--mpi-arg: '--x \"y' cannot"),
    ],
)
def test_unbounded_sweeps_are_refused_at_once(tmp_path, args, needle):
    """The fast loop's cases of the sweep table above (no torch import, well under 2 s)."""
    _assert_refused(tmp_path, "sweep", args, needle)


BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
FIXTURE_LOG = Path(__file__).resolve().parents[1] / "fixtures/nccl-tests/legacy_all_reduce_info.log"


def _files_for_bad_input(tmp_path):
    """{NAME: path} for the file-based cases: a run, a directory, a log of NaN figures, a
    YAML file of nested aliases."""
    import re

    from collbench.run.import_logs import import_logs

    run = import_logs([FIXTURE_LOG], out=tmp_path / "run").run_dir
    (tmp_path / "r.md").mkdir()
    nan_log = tmp_path / "all_reduce_nan.log"
    nan_log.write_text(
        "\n".join(
            re.sub(r" \d+\.\d+", " nan", line) if " float " in line else line
            for line in FIXTURE_LOG.read_text().splitlines()
        )
    )
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text(BILLION_LAUGHS + "name: *i\n")
    return {
        "RUN": str(run),
        "DIR": str(tmp_path),
        "MD_DIR": str(tmp_path / "r.md"),
        "NAN_LOG": str(nan_log),
        "OUT": str(tmp_path / "new"),
        "LAUGHS": str(laughs),
    }


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["report", "RUN", "--out", "DIR"], "is a directory; give the report file"),
        (["report", "RUN", "--format", "md", "--out", "MD_DIR"], "is a directory"),
        (["report", "RUN", "--out", "/sys/report.html"], "cannot be written"),
        (["import", "nccl-tests", "NAN_LOG", "--out", "OUT"], "has no row with finite figures"),
        pytest.param(
            ["import", "nccl-tests", str(FIXTURE_LOG), "--out", "/sys/run"],
            "cannot be created or written",
            marks=CASE_PER_PROCESS,
        ),
        (["topo", "validate", "LAUGHS"], "uses a YAML alias (*a at line 2)"),
        pytest.param(
            ["sweep", "--topology", "LAUGHS", "--print"],
            "uses a YAML alias",
            marks=CASE_PER_PROCESS,
        ),
    ],
)
@pytest.mark.timeout(60)
def test_bad_files_and_outputs_are_refused_in_one_line(tmp_path, argv, needle):
    names = _files_for_bad_input(tmp_path)
    before = sorted(path.name for path in tmp_path.iterdir())
    _assert_one_line([names.get(arg, arg) for arg in argv], needle)
    assert sorted(path.name for path in tmp_path.iterdir()) == before  # no r_files, no run


def _assert_one_line(argv, needle):
    """Exit 2, one `collbench: error:` line holding needle, no traceback."""
    done = collbench(*argv)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("collbench: error: ") and needle in lines[0], lines[0]


def test_probe_options_need_overlap_on_sweep(tmp_path):
    done = collbench("sweep", "--compute-ratio", "2", "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "collbench: error: --compute-ratio: '2' needs --overlap (or collbench overlap)"
    )


@pytest.mark.slow  # refused only after torch is imported (~2 s)
def test_non_empty_out_is_refused_and_left_alone(tmp_path):
    (tmp_path / "keep.txt").write_text("earlier results")
    done = collbench("sweep", "--out", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"collbench: error: --out: '{tmp_path}' is not an empty "
        "directory; choose a new one (collbench never mixes two runs)"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


@pytest.mark.slow
def test_help_does_not_import_torch():
    code = (
        "import sys; from collbench.cli.app import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as done:\n    assert done.code == 0\n"
        "assert 'torch' not in sys.modules, 'collbench --help imported torch'\n"
        "assert 'numpy' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "sweep" in done.stdout


def test_sweep_help_lists_the_options_people_use():
    # --help-all: -h shows the common path, this every option (cli/help.py)
    done = collbench("sweep", "--help-all", env={"COLUMNS": "200"})
    assert done.returncode == 0
    # rich would swallow "[default: 8]" as markup: the defaults must really be shown
    for default in (
        "(default: 8)",
        "(default: float32)",
        "(default: 1)",
        "(default: 29500)",
        "(default: 30)",
    ):
        assert default in done.stdout, default
    for option in (
        "--collective",
        "--min-bytes",
        "--max-bytes",
        "--factor",
        "--step-bytes",
        "--dtype",
        "--op",
        "--placement",
        "--warmup",
        "--iters",
        "--check",
        "--rank-stat",
        "--backend",
        "--launcher",
        "--nproc",
        "--out",
        "--timeout",
        "--quiet",
        "--json",
        "--nproc-per-node",
        "--nnodes",
        "--node-rank",
        "--master-addr",
        "--rdzv-endpoint",
        "--nodes",
        "--ntasks-per-node",
        "--gpus-per-node",
        "--partition",
        "--account",
        "--qos",
        "--time",
        "--constraint",
        "--exclusive",
        "--slurm-arg",
        "--no-wait",
        "--print-sbatch",
        "--hostfile",
        "--mpi-arg",
        "--print",
        "--rank-env",
        "--knob",
        "--overlap",
        "--compute-ratio",
        "--compute-tflop",
        "--compute-dtype",
        "--matmul-shape",
        "--compute-streams",
    ):
        assert option in done.stdout


def test_overlap_help_lists_its_options():
    done = collbench("overlap", "--help-all", env={"COLUMNS": "200"})
    assert done.returncode == 0
    assert "(default: 0.5,1,2)" in done.stdout and "(default: auto)" in done.stdout
    for option in (
        "--compute-ratio",
        "--compute-tflop",
        "--compute-dtype",
        "--matmul-shape",
        "--compute-streams",
        "--collective",
        "--launcher",
        "--knob",
        "--partition",
    ):
        assert option in done.stdout
    assert "--overlap " not in done.stdout


def _without(tool):
    """PATH with every folder holding `tool` left out."""
    import os
    import shutil

    folders = os.environ["PATH"].split(os.pathsep)
    while shutil.which(tool, path=os.pathsep.join(folders)):
        found = os.path.dirname(shutil.which(tool, path=os.pathsep.join(folders)))
        folders = [f for f in folders if os.path.realpath(f) != os.path.realpath(found)]
    return os.pathsep.join(folders)


@pytest.mark.parametrize(
    "launcher, tool, needle",
    [
        ("slurm", "sbatch", "needs Slurm's sbatch on PATH"),
        ("mpi", "mpirun", "needs mpirun on PATH"),
    ],
)
def test_missing_scheduler_tools_are_one_line(tmp_path, launcher, tool, needle):
    python_dir = str(__import__("pathlib").Path(sys.executable).parent)
    path = _without(tool)
    done = collbench(
        "sweep",
        "--launcher",
        launcher,
        "--out",
        str(tmp_path / "run"),
        env={"PATH": path + ":" + python_dir if tool != "python" else path},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], done.stderr


def test_disagreeing_rank_environments_say_how_to_choose(tmp_path):
    env = {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "1",
        "OMPI_COMM_WORLD_RANK": "0",
        "OMPI_COMM_WORLD_SIZE": "4",
    }
    done = collbench("sweep", "--out", str(tmp_path / "run"), env=env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "torchrun says rank 1 of 2" in lines[0] and "MPI says rank 0 of 4" in lines[0]
    assert "--rank-env torch|mpi" in lines[0]


def test_status_and_wait_need_a_run_directory(tmp_path):
    for command in ("status", "wait"):
        done = collbench(command, str(tmp_path / "nothing"))
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"collbench: error: RUN: '{tmp_path / 'nothing'}' is not a collbench run "
            "directory (no job.json)"
        ]


@pytest.mark.slow  # real gloo ranks (tests/dist/test_sweep.py keeps one in the fast loop)
def test_status_of_a_local_run_and_no_wait_for_it(tmp_path):
    out = tmp_path / "run"
    done = collbench(
        "sweep", "-c", "all_reduce", "-e", "64", "-n", "2", "-w", "1", "--repeats", "1", "--quiet",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    status = collbench("status", str(out))
    assert status.returncode == 0
    assert status.stdout.splitlines() == [
        f"run {out}: launcher local, 2 rank(s)",
        "rows: 4 of 4; state: completed",
    ]
    waited = collbench("wait", str(out))
    assert (
        waited.returncode == 2
        and "was not submitted with --launcher slurm --no-wait" in waited.stderr
    )


def test_status_of_an_imported_run(tmp_path):
    log = (
        Path(__file__).resolve().parents[1]
        / "fixtures"
        / "nccl-tests"
        / "legacy_all_reduce_info.log"
    )
    out = tmp_path / "imported"
    done = collbench("import", "nccl-tests", str(log), "--out", str(out))
    assert done.returncode == 0, done.stderr
    status = collbench("status", str(out))
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0] == f"run {out}: imported from nccl-tests ({log})"
    assert lines[1].startswith("rows: ") and lines[1].endswith("; state: completed")


def test_status_without_a_run_picks_the_newest_under_results(tmp_path, monkeypatch):
    import os

    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    done = collbench("status")
    assert done.returncode == 2 and "holds no run directory" in done.stderr
    for name, stamp in (("older", 1_000_000), ("newer", 2_000_000)):
        (results / name).mkdir(parents=True)
        meta = results / name / "meta.json"
        meta.write_text(json.dumps({"run_id": name, "state": "completed", "source": "nccl-tests"}))
        os.utime(meta, (stamp, stamp))
    done = collbench("status")
    assert done.returncode == 0 and "newer" in done.stdout and "older" not in done.stdout


def test_sweep_takes_rccls_channel_range_with_backend_rccl():
    """sweep --backend rccl --knob NCCL_MAX_NCHANNELS=128 gets past --knob (RCCL's 128
    channels; here, without a GPU, the backend is what refuses it); nccl's range stays 64 or
    less (issue 40 item 5). --print: nothing runs where a GPU is found."""
    knob = ["--knob", "NCCL_MAX_NCHANNELS=128", "--print"]
    done = collbench("sweep", "--backend", "rccl", *knob)
    assert "--knob" not in done.stderr
    done = collbench("sweep", "--backend", "nccl", *knob)
    assert done.returncode == 2
    assert "--knob: 'NCCL_MAX_NCHANNELS=128' value '128' is outside 1.." in done.stderr
