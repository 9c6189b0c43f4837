"""`collbench mfu --explain`, `--attention` and `--matmul-efficiency` end to end (a real
subprocess): the explanation adds up to the step, in text and in JSON."""

from __future__ import annotations

import json

import pytest

from tests.helpers import collbench

GPT = [
    "-T",
    "dgx-a100",
    "--model",
    "gpt-22b",
    "--global-batch",
    "4",
    "--tp",
    "8",
    "--dp",
    "1",
    "--recompute",
    "full",
]


def test_explain_prints_every_operator_and_adds_up_to_the_step():
    done = collbench("mfu", *GPT, "--attention", "unfused", "--explain")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "# where the step goes on dgx-a100" in out
    for name in (
        "qkv",
        "attn_proj",
        "mlp_up",
        "mlp_down",
        "attention",
        "layer norms",
        "bias-dropout-add",
        "gelu",
        "logits (stage)",
        "optimizer step",
        "pipeline bubble",
        "exposed tp",
    ):
        assert f"\n{name} " in out, name
    assert "by kind: gemm" in out and "8x2048x2048x96" in out


def test_explain_json_adds_up_to_the_step_time():
    done = collbench("mfu", *GPT, "--explain", "--json")
    assert done.returncode == 0, done.stderr
    fabric = json.loads(done.stdout)["fabrics"][0]
    total = sum(row["step_s"] for row in fabric["explain"])
    assert total == pytest.approx(fabric["step_time_s"], rel=1e-9)
    assert sum(row["share"] for row in fabric["explain"]) == pytest.approx(1.0)
    categories = {row["category"] for row in fabric["explain"]}
    assert {"gemm", "attention", "memory-bound", "bubble", "exposed comm"} <= categories
    assert all(0 < gemm["efficiency"] <= 1 for gemm in fabric["gemms"])


def test_unfused_attention_is_slower_than_flash():
    flash, unfused = (
        json.loads(collbench("mfu", *GPT, "--attention", kernel, "--json").stdout)["fabrics"][0][
            "step_time_s"
        ]
        for kernel in ("flash", "unfused")
    )
    assert unfused > flash


def test_a_given_matmul_efficiency_prices_every_gemm_at_it():
    done = collbench("mfu", *GPT, "--matmul-efficiency", "0.5", "--explain", "--json")
    assert done.returncode == 0, done.stderr
    fabric = json.loads(done.stdout)["fabrics"][0]
    assert {gemm["efficiency"] for gemm in fabric["gemms"]} == {0.5}
    assert any("every GEMM at 50%" in text for text in fabric["assumptions"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--attention", "sdpa"],
            "--attention: 'sdpa' must be one of flash, flash2, flash1, unfused",
        ),
        (["--matmul-efficiency", "1.5"], "--matmul-efficiency: 1.5 must be from 0.01 to 1"),
    ],
)
def test_bad_values_are_one_line_exit_2(args, message):
    done = collbench("mfu", *GPT, *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
