"""--pp LAYOUT: pipelines as frameworks split them (Megatron-Core's
pipeline_model_parallel_layout), the busiest stage priced with what it holds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collbench.analysis.mfu.compute import micro_batch_compute, model_pricer
from collbench.analysis.mfu.workload import (
    Model,
    Parallelism,
    Training,
    Workload,
    pipeline_layout,
)
from collbench.core.errors import SpecError
from collbench.topologies.loader import load_topology
from tests.helpers import collbench

# 4 GPT layers of hidden 1024 (8 heads of 128, MLP 4096), vocabulary 32768, seq 1024
GPT = Model("g", 4, 1024, 8, 32768)


def _workload(layout: str) -> Workload:
    chunks = pipeline_layout(layout)
    return Workload(GPT, Training(1024, 2), Parallelism(pp=len(chunks), pp_layout=chunks))


def test_a_layout_unrolls_as_megatron_core_parses_it():
    assert pipeline_layout("Et|(tt|)*2,mL") == ("Et", "tt", "tt", "mL")
    assert pipeline_layout("E,t*3|tL") == ("Ettt", "tL")
    with pytest.raises(SpecError, match="is not N or a layout"):
        pipeline_layout("Et|x|L")
    with pytest.raises(SpecError, match="unrolls to more than 100,000"):
        pipeline_layout("(t*1000|)*1000")


def test_the_busiest_stage_weighs_the_output_layer_by_its_flops():
    # a layer per token: 6 x 12,587,008 weights (4h² + 4h attention + 8h² MLP) + attention
    # 6 x 8 heads x 256 x 1024 = 12,582,912 -> 88,104,960 FLOPs; the output layer
    # 6 x 32768 x 1024 = 201,326,592: 2.285 layers
    assert _workload("Ettt|tL").busiest_stage == (1, 1)  # 1 + 2.285 > 3
    assert _workload("Etttt|L").busiest_stage == (4, 0)  # 4 > 2.285
    assert _workload("Ett|ttL").busiest_stage == (2, 1)
    # no layout: ceil(4 / 2) layers per stage, the output layer on the last
    assert Workload(GPT, Training(1024, 2), Parallelism(pp=2)).busiest_stage == (2, 1)
    # an MTP module: a layer and another pass of the output head: 1 + 1 + 2 x 2.285 > 3
    chunks = pipeline_layout("Et|ttt|mL")
    mtp = Workload(
        replace(GPT, mtp_layers=1), Training(1024, 2), Parallelism(pp=3, pp_layout=chunks)
    )
    assert mtp.busiest_stage == (1, 2)


def test_the_busiest_stage_is_priced_with_only_what_it_holds():
    accelerator = load_topology("dgx-h100").accelerator
    peak = accelerator.peak_bf16_tflops * 1e12
    pricer = model_pricer(accelerator, peak)
    alone = micro_batch_compute(_workload("Etttt|L"), accelerator, peak, pricer)
    assert (alone.layers, alone.stage) == (4, ())
    shared = micro_batch_compute(_workload("Ettt|tL"), accelerator, peak, pricer)
    assert shared.layers == 1 and [op.op for op in shared.stage] == ["logits", "loss"]


def test_a_layout_must_hold_every_layer_once_and_fit_the_ranks():
    with pytest.raises(SpecError, match="must hold E first, L last, 4 t and 0 m in"):
        _workload("Ettt|L")  # 3 t
    with pytest.raises(SpecError, match="must hold E first, L last, 4 t and 0 m in"):
        _workload("|")  # stages with nothing in them, once a division by zero downstream
    three = Parallelism(pp=1, virtual_stages=2, pp_layout=("Et", "tt", "tL"))
    with pytest.raises(SpecError, match=r"2 model chunks per pipeline rank \(it holds 4 t"):
        Workload(GPT, Training(1024, 2), three)  # 3 chunks on one rank of 2


def test_cli_pp_layout_sets_pp_from_the_chunks_and_says_so():
    common = ["mfu", "-T", "dgx-h100", "-m", "llama3-8b", "--global-batch", "8", "--dp", "4"]
    done = collbench(*common, "--pp", "Et*3|(t*4|)*6t*5L", "--virtual-stages", "4")
    assert done.returncode == 0, done.stderr
    assert "pp 2 dp 4" in done.stdout and "v 4" in done.stdout
    # rank 0: 3 + 4 + 4 + 4 layers; rank 1: 4 + 4 + 4 + 5 and the output layer
    assert (
        "8 model chunks): priced at the pace of the busiest stage, 17 layers and 1" in done.stdout
    )
    bad = collbench(*common, "--pp", "Et*3|tL")
    assert bad.returncode == 2 and bad.stderr.startswith("collbench: error: --pp: the layout")
