"""Issue 27 items 2 and 12 at the command line: an environment that forbids overlap is
refused for overlap probes on a GPU backend (warned with --allow-blocking-env, and for a
sweep), and --cuda-graph is refused where there is no GPU, each in one line, exit 2."""

from __future__ import annotations

import pytest

from tests.helpers import collbench_process as collbench

BLOCKING = {"TORCH_NCCL_BLOCKING_WAIT": "1"}
SMALL = ("-c", "all_reduce", "-b", "8", "-e", "1K", "--nproc", "2", "--repeats", "1")


def _errors(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("collbench: error:")]


@pytest.mark.parametrize(
    ("env", "extra"),
    [(BLOCKING, ()), ({}, ("--knob", "TORCH_NCCL_BLOCKING_WAIT=1"))],
)
@pytest.mark.slow
def test_blocking_wait_refuses_overlap_probes_on_nccl(env, extra):
    done = collbench("overlap", *SMALL, "--backend", "nccl", "--print", *extra, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    line = done.stderr
    assert "TORCH_NCCL_BLOCKING_WAIT: '1' makes every wait() block the host" in line
    assert "--allow-blocking-env" in line and not done.stdout


@pytest.mark.slow
def test_allowed_it_is_a_warning_naming_the_variable():
    done = collbench(
        "overlap", *SMALL, "--backend", "nccl", "--print", "--allow-blocking-env", env=BLOCKING
    )
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "TORCH_NCCL_BLOCKING_WAIT=1 makes every wait()" in warnings[0]
    assert "overlap reads ~0%" in warnings[0]
    # (on a host without a GPU, --backend nccl is refused after the warning: that is all)


@pytest.mark.slow
def test_a_sweep_on_nccl_is_warned_not_refused():
    done = collbench("sweep", *SMALL, "--backend", "nccl", "--print", env=BLOCKING)
    assert "collbench: warning: the host waits for the GPU" in done.stderr
    assert not any("TORCH_NCCL_BLOCKING_WAIT" in line for line in _errors(done))


@pytest.mark.slow
def test_gloo_ignores_the_variables():
    done = collbench("overlap", *SMALL, "--backend", "gloo", "--print", env=BLOCKING)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr


@pytest.mark.slow
def test_cuda_graph_on_gloo_is_one_line_exit_2():
    done = collbench("sweep", *SMALL, "--backend", "gloo", "--cuda-graph")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "collbench: error: --cuda-graph needs a GPU backend (nccl/rccl); gloo runs on CPU"
    ]


@pytest.mark.slow
def test_overlap_has_no_cuda_graph_option():
    done = collbench("overlap", *SMALL, "--cuda-graph")
    assert done.returncode == 2 and "No such option: --cuda-graph" in done.stderr


@pytest.mark.slow
def test_cuda_graph_with_auto_on_a_cpu_host_is_refused_before_measuring(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("auto resolves to a GPU backend here")
    done = collbench("sweep", *SMALL, "--cuda-graph", "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stderr
    assert _errors(done) == [
        "collbench: error: --cuda-graph needs a GPU backend (nccl/rccl); gloo runs on CPU"
    ]


def test_cuda_graph_on_rccl_is_warned_about(capsys):
    """Issue 40 item 8: HIP graph capture of RCCL collectives is not to be trusted blindly;
    the warning comes for --backend rccl and for auto once it resolves to rccl, never on
    NCCL."""
    from collbench.cli.measure import ROCM_GRAPH_NOTE, warn_blocking_env
    from collbench.core.spec import SweepSpec

    for spec, backend in ((SweepSpec(backend="rccl", cuda_graph=True), "rccl"),
                          (SweepSpec(cuda_graph=True), "rccl")):  # fmt: skip
        warn_blocking_env(spec, backend)
        assert capsys.readouterr().err == f"collbench: warning: {ROCM_GRAPH_NOTE}\n"
    warn_blocking_env(SweepSpec(cuda_graph=True), "nccl")
    warn_blocking_env(SweepSpec(backend="rccl"), "rccl")
    assert capsys.readouterr().err == ""
