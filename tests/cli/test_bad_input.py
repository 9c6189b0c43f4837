"""Bad input: exit code 2 and exactly one line on stderr naming the problem, no traceback."""

import subprocess
import sys

import pytest

from tests.helpers import collbench


@pytest.mark.parametrize("args, needle", [
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
    (["--launcher", "none"], "needs the torch rank environment"),
    (["--quiet", "--json"], "conflicts with --quiet"),
    (["--no-such-option"], "No such option: --no-such-option"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    done = collbench("sweep", *args, "--out", str(tmp_path / "run"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("collbench: error: ") and needle in lines[0]
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_non_empty_out_is_refused_and_left_alone(tmp_path):
    (tmp_path / "keep.txt").write_text("earlier results")
    done = collbench("sweep", "--out", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"collbench: error: --out: '{tmp_path}' is not an empty "
                                   "directory; choose a new one (collbench never mixes two runs)")
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_help_does_not_import_torch():
    code = ("import sys; from collbench.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as done:\n    assert done.code == 0\n"
            "assert 'torch' not in sys.modules, 'collbench --help imported torch'\n"
            "assert 'numpy' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "sweep" in done.stdout


def test_sweep_help_lists_the_options_people_use():
    done = collbench("sweep", "--help")
    assert done.returncode == 0
    for option in ("--collective", "--min-bytes", "--max-bytes", "--factor", "--step-bytes",
                   "--dtype", "--op", "--placement", "--warmup", "--iters", "--check",
                   "--rank-stat", "--backend", "--launcher", "--nproc", "--out", "--timeout",
                   "--quiet", "--json"):
        assert option in done.stdout
