"""`collbench tune` refuses bad input in one line with exit 2, before it launches anything
(each case would otherwise start ranks): the issue's list, and the forms mixed up."""

import json

import pytest

from tests.helpers import collbench

CASES = {
    "unknown knob format": (["--knob", "NCCL_ALGO"], "is not NAME=V1,V2"),
    "empty value list": (["--knob", "NCCL_ALGO="], "no values"),
    "empty value in the list": (["--knob", "NCCL_ALGO=Ring,,Tree"], "empty value"),
    "duplicate knob": (
        ["--knob", "NCCL_ALGO=Ring", "--knob", "NCCL_ALGO=Tree"],
        "repeats NCCL_ALGO",
    ),
    "value given twice": (["--knob", "NCCL_PROTO=LL,ll"], "twice"),
    "grid over --max-settings": (
        [
            "--knob",
            "NCCL_ALGO=Ring,Tree",
            "--knob",
            "NCCL_PROTO=LL,LL128,Simple",
            "--max-settings",
            "4",
        ],
        "below the grid's 6 settings",
    ),
    "unknown search": (["--knob", "NCCL_ALGO=Ring", "--search", "random"], "--search"),
    "bad budget": (["--knob", "NCCL_ALGO=Ring", "--budget", "soon"], "is not a duration"),
    "launcher none": (["--knob", "NCCL_ALGO=Ring", "--launcher", "none"], "fresh ranks"),
    "no knob": ([], "--knob"),
    "unknown collective": (["--knob", "NCCL_ALGO=Ring", "-c", "all_reduse"], "all_reduse"),
    "bad size": (["--knob", "NCCL_ALGO=Ring", "-b", "12Q"], "12Q"),
    # refused up front, as sweep does, not once per setting
    "no ranks": (["--knob", "GLOO_SOCKET_IFNAME=lo", "-g", "0"], "--nproc"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    args, words = CASES[case]
    out = tmp_path / "tuned"
    done = collbench("tune", "run", *args, "--out", str(out))
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("collbench: error:")
    assert words in done.stderr
    assert not out.exists()  # refused before anything was written or launched


def test_verify_on_a_directory_that_is_not_a_tune_run(tmp_path):
    plain = tmp_path / "run"
    plain.mkdir()
    (plain / "meta.json").write_text(json.dumps({"run_id": "x"}))
    done = collbench("tune", "verify", str(plain))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "is not a tune directory" in done.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tune.json").write_text("{not json")
    done = collbench("tune", "verify", str(broken))
    assert done.returncode == 2 and "cannot be read" in done.stderr


def test_an_option_of_another_subcommand_is_refused(tmp_path):
    done = collbench("tune", "from", str(tmp_path), "--knob", "NCCL_ALGO=Ring", "--out", "x")
    assert done.returncode == 2 and "No such option: --knob" in done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--search", "halving"], "--search grid"),
        (["--budget", "10m"], "different setting"),
    ],
)
def test_several_torchrun_nodes_need_the_same_list(tmp_path, args, words):
    """Every torchrun node runs its own tune: only a grid without a clock is one list."""
    node = ["--launcher", "torchrun", "--nnodes", "2", "--master-addr", "127.0.0.1"]
    done = collbench(
        "tune", "run", "--knob", "NCCL_ALGO=Ring", *node, *args, "--out", str(tmp_path / "t")
    )
    assert done.returncode == 2 and words in done.stderr
    assert not (tmp_path / "t").exists()


def test_a_gpu_backend_without_a_gpu_is_refused_before_any_setting(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    out = tmp_path / "tuned"
    done = collbench(
        "tune", "run", "--knob", "NCCL_ALGO=Ring", "--backend", "nccl", "--out", str(out)
    )
    assert done.returncode == 2 and "needs a visible GPU" in done.stderr, done.stderr
    assert "setting 1/" not in done.stderr and not out.exists()
