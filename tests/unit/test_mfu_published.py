"""The MFU estimator against published large-scale training runs on DGX A100 clusters.

One set of defaults for every run (matmul efficiency, comm efficiency, the shipped
`dgx-a100` topology): nothing here is fitted per run. What differs between rows is what
the papers say their runs did: the parallelism, recompute, sequence parallelism, and that
the 2021 Megatron runs reduced gradients after the backward (no DP overlap).

Figures (the same as ../shared/data/published_runs.md):
- Narayanan et al., SC'21 (arXiv 2104.04473), Table 1: GPT 1T on 3072 A100s, 163 TFLOP/s
  per GPU = 52% of peak; GPT 145.6B on 1536 A100s, 148 TFLOP/s = 47%. Both count the
  recompute FLOPs (their formula has 4 forward passes), so they are compared with our HFU.
- Korthikanti et al. 2022 (arXiv 2205.05198): 530B on 2240 A100s, MFU 54.2% with sequence
  parallelism + selective recompute, 42.1% with full recompute; Table 5 iteration times.
"""

from __future__ import annotations

import pytest

from collbench.analysis.mfu import estimate
from collbench.analysis.mfu_inputs import cost_model_pricer
from collbench.analysis.mfu_report import sized_for
from collbench.analysis.workload import Parallelism, Training, Workload, preset
from collbench.topologies.loader import load_topology

# Within this share of the published figure, with one set of defaults for all rows.
TOLERANCE = 0.10

FULL = {"recompute": "full"}
SELECTIVE_SP = {"recompute": "selective", "sequence_parallel": True}

# (id, model, tp, pp, dp, global batch, setup, what, published, dp overlap)
PUBLISHED = [
    ("1t-hfu", "gpt-1t", 8, 64, 6, 3072, FULL, "hfu", 0.52, False),
    ("145b-hfu", "gpt-145b", 8, 8, 24, 1536, FULL, "hfu", 0.47, False),
    ("530b-sp-selective-mfu", "gpt-530b", 8, 35, 8, 2240, SELECTIVE_SP, "mfu", 0.542, True),
    ("530b-full-mfu", "gpt-530b", 8, 35, 8, 2240, FULL, "mfu", 0.421, True),
    ("175b-full-step", "gpt3-175b", 8, 8, 1, 64, FULL, "step", 18.13, True),
    ("175b-sp-selective-step", "gpt3-175b", 8, 8, 1, 64, SELECTIVE_SP, "step", 13.75, True),
    ("530b-full-step", "gpt-530b", 8, 35, 1, 280, FULL, "step", 49.05, True),
    ("530b-sp-selective-step", "gpt-530b", 8, 35, 1, 280, SELECTIVE_SP, "step", 37.83, True),
    ("1t-full-step", "gpt-1t", 8, 64, 1, 512, FULL, "step", 94.42, True),
    ("1t-sp-selective-step", "gpt-1t", 8, 64, 1, 512, SELECTIVE_SP, "step", 71.49, True),
    pytest.param(
        "22b-full-step",
        "gpt-22b",
        8,
        1,
        1,
        4,
        FULL,
        "step",
        1.42,
        True,
        marks=pytest.mark.xfail(
            strict=True,
            reason=(
                "hidden 6144 over 8 GPUs leaves 768-wide GEMMs, which run well below "
                "the default efficiency; the estimate is ~18% fast"
            ),
        ),
    ),
    pytest.param(
        "22b-sp-selective-step",
        "gpt-22b",
        8,
        1,
        1,
        4,
        SELECTIVE_SP,
        "step",
        1.10,
        True,
        marks=pytest.mark.xfail(
            strict=True, reason=("same small GEMMs; the estimate is ~21% fast")
        ),
    ),
]


def estimate_published(model, tp, pp, dp, batch, setup, dp_overlap):
    sequence_parallel = setup.get("sequence_parallel", False)
    workload = Workload(
        preset(model),
        Training(seq=2048, global_batch=batch, recompute=setup["recompute"]),
        Parallelism(
            tp=tp, pp=pp, dp=dp, sequence_parallel=sequence_parallel, dp_overlap=dp_overlap
        ),
    )
    topology = sized_for(workload, load_topology("dgx-a100"))
    return estimate(workload, topology, cost_model_pricer(topology))


@pytest.mark.parametrize(
    ("run", "model", "tp", "pp", "dp", "batch", "setup", "what", "published", "dp_overlap"),
    PUBLISHED,
)
def test_estimate_lands_near_the_published_figure(
    run, model, tp, pp, dp, batch, setup, what, published, dp_overlap
):
    result = estimate_published(model, tp, pp, dp, batch, setup, dp_overlap)
    got = {"hfu": result.hfu, "mfu": result.mfu, "step": result.step_time_s}[what]
    assert got == pytest.approx(published, rel=TOLERANCE), (run, got, published)


def test_the_model_gets_the_ordering_right_for_the_right_reasons():
    """The 145.6B model reaches less than the 1T one because its TP all-reduces weigh
    more against its smaller matmuls (communication grows with h, compute with h^2)."""
    big = estimate_published("gpt-1t", 8, 64, 6, 3072, FULL, False)
    small = estimate_published("gpt-145b", 8, 8, 24, 1536, FULL, False)
    assert small.hfu < big.hfu
    big_share, small_share = (
        next(k for k in result.comm if k.kind == "tp").exposed_s / result.step_time_s
        for result in (big, small)
    )
    assert small_share > big_share


# The least share of an 80 GB A100's memory the estimate leaves free on any published
# run (they ran, so they fit; the closest is 1T with SP + selective recompute at ~22%).
PUBLISHED_MIN_HEADROOM = 0.15


@pytest.mark.parametrize(
    ("run", "model", "tp", "pp", "dp", "batch", "setup", "what", "published", "dp_overlap"),
    [case.values if hasattr(case, "values") else case for case in PUBLISHED],
)
def test_every_published_run_fits_its_80gb_a100s(
    run, model, tp, pp, dp, batch, setup, what, published, dp_overlap
):
    """They really ran: an estimate that says they do not fit is wrong. The estimate is a
    lower bound, so it leaves room for what it does not count."""
    memory = estimate_published(model, tp, pp, dp, batch, setup, dp_overlap).memory
    assert memory is not None and memory.fits, (run, memory)
    assert memory.headroom >= PUBLISHED_MIN_HEADROOM, (run, memory.headroom)
