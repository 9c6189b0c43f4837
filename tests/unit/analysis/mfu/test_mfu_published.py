"""The MFU estimator against published large-scale training runs (tests/published_runs.py).

One set of defaults for every run: the shipped topologies (their accelerator's measured
matmul fraction, SM count and HBM bandwidth), the compute model's constants and the
collectives' efficiency. Nothing is fitted per run. Each run's error (predicted /
reported - 1, on the figure as reported) is pinned, so a change to the model that moves
any run is seen and its pin updated on purpose; the set as a whole must stay within the
goal (median |error| <= 5%, max <= 10%).
"""

from __future__ import annotations

import functools
import importlib.util
import statistics
from pathlib import Path

import pytest

from tests.published_runs import KORTHIKANTI, MOE_STEP, NARAYANAN, PUBLISHED, PublishedRun
from tests.unit.analysis.mfu.test_compute_model import category_s

# Predicted / reported - 1, in percent, as the model stands. A pin moves only with a
# deliberate change to the model (update it here and in docs/mfu/validation.md's table).
PINNED_ERROR_PCT = {
    "1t-hfu": +7.6,
    "145b-hfu": -0.2,
    "530b-sp-selective-mfu": +4.4,
    "530b-full-mfu": +0.9,
    "175b-full-step": +0.9,
    "175b-sp-selective-step": -2.7,
    "530b-full-step": +0.6,
    "530b-sp-selective-step": -2.6,
    "1t-full-step": -1.1,
    "1t-sp-selective-step": -1.9,
    "22b-full-step": -4.3,
    "22b-sp-selective-step": -8.9,
    "llama3-70b-fp8-gbs128": -7.8,
    "llama3-70b-fp8-gbs256": -7.8,
    "llama3-8b-fp8-fsdp": -10.8,
    "gpt3-175b-bf16-dgxc": -2.7,
    "nemotron4-15b-bf16-dgxc": +0.9,
    "gpt3-175b-fp8-dgxc": -6.7,
    "nemotron4-15b-fp8-dgxc": +1.7,
    "nemotron4-340b-bf16-dgxc": +4.4,
    "nemotron4-340b-fp8-dgxc": +8.6,
    # context parallelism (analysis/mfu/moe.py); its recipe's pipeline layout (--pp LAYOUT)
    "llama31-405b-fp8-cp2": -3.1,
    # Blackwell (issue 42 item 2): entered as their recipes set them, not fitted to
    "llama31-405b-fp8-gb200": +7.1,
    "llama31-405b-fp8-b200-cp2": +12.5,
    # FSDP on PyTorch (MPT on Composer, flash-attn 1.0's Triton kernel)
    "mpt-30b-h100": -1.3,
    "mpt-13b-h100": +12.0,
    "mpt-7b-h100": -1.2,
    "mpt-1b-h100": -5.7,
    "mpt-760m-h100": +0.9,
    "mpt-30b-a100": -4.1,
    "mpt-13b-a100": +11.9,
    "mpt-7b-a100": +4.1,
    "mpt-3b-a100": +1.5,
    "mpt-1b-a100": +1.6,
    "mpt-760m-a100": +1.1,
    "mpt-350m-a100": +4.4,
    "mpt-125m-a100": +12.0,
    "mpt-125m-a100-mb32": +12.2,
    "mpt-70b-a100-64": +3.3,
    "mpt-70b-a100-32": +7.3,
    "fms-34b-a100": +0.4,
    "fms-70b-a100": -5.4,
    "fms-34b-h100": -0.7,
    "fms-70b-h100": -2.9,
    "mlperf-gpt3-11616-v40": +6.9,
    "mlperf-gpt3-10752-v40": +6.4,
    "mlperf-gpt3-10752-v31": +8.0,
    "mlperf-gpt3-10240-v31": +7.9,
    "mlperf-gpt3-8192-v31": +0.8,
    "mlperf-gpt3-6144-v31": -0.2,
    "mlperf-gpt3-4096-v31": -1.1,
    "mlperf-gpt3-768-v31": -3.2,
    "mlperf-llama405b-8192-v50": +7.5,
    "mlperf-llama405b-2560-v50": +5.9,
    "mlperf-llama405b-2432-v50": +5.7,
    "mlperf-llama405b-2048-v50": +5.7,
    "mlperf-llama405b-512-v50": +5.9,
    "mlperf-llama8b-8-b200-v51": -0.3,
    "mlperf-llama8b-72-gb200-v51": -16.4,
    "mlperf-llama8b-512-gb200-v51": -51.9,
    "mlperf-llama8b-64-h200-v51": -11.7,
    "mlperf-llama8b-64-h100-v51": -14.5,
    "mlperf-llama8b-128-h100-v51": -31.9,
}
# Runs outside the goal's 10%, and why. A run added outside the goal is named here with its
# reason, not hidden; the test caps it at OUTSIDE_GOAL_MAX.
OUTSIDE_GOAL: dict[str, str] = {
    "llama31-405b-fp8-b200-cp2": (
        "its pipeline sends priced beside model chunks, as its interleaved schedule runs them "
        "(overlap_p2p_comm; +5.6% with each waited for): with the GB200 run, both B200 runs "
        "land optimistic, and what the step model misses on Blackwell is not established"
    ),
    **{
        name: (
            "13B under FSDP at micro-batch 2 with no recompute: 103 GB of gathers and "
            "reductions per micro-batch of 4,096 tokens beside 0.7 s (H100) of compute, "
            "priced at Lee et al.'s mean 18.9% slowdown; what else the run lost to them "
            "(contention above the mean, allocator retries near 80 GB) is not established"
        )
        for name in ("mpt-13b-h100", "mpt-13b-a100")
    },
    **{
        name: (
            "MPT-125M: its step is a quarter attention (12 heads of 64, the Triton kernel at "
            "FA2's README figures for head dim 64 and 2k tokens) and a sixth logits and loss "
            "over a 50k vocabulary; which of them the run spent more on is not established"
        )
        for name in ("mpt-125m-a100", "mpt-125m-a100-mb32")
    },
    **{
        name: (
            "MLPerf v5.1's Llama 3.1 8B, one micro-batch of 1,024 to 8,192 tokens a GPU a "
            "step: the step runs 12-52% longer than priced, and the 8-GPU run of 16,384 "
            "tokens a GPU lands within 1%; in the University of Florida series the time not "
            "priced is 35-57% of the data-parallel traffic priced as hidden beside compute "
            "(docs/mfu/validation.md); what the run spends it on is not established"
        )
        for name in (
            "mlperf-llama8b-72-gb200-v51",
            "mlperf-llama8b-512-gb200-v51",
            "mlperf-llama8b-64-h200-v51",
            "mlperf-llama8b-64-h100-v51",
            "mlperf-llama8b-128-h100-v51",
        )
    },
    "llama3-8b-fp8-fsdp": (
        "Megatron-FSDP's gathers and reductions priced beside compute at Lee et al.'s mean "
        "18.9% slowdown (it lands -6.2% at none): what its collectives, issued from Megatron's "
        "own buffers, take from the GEMMs beside them is not measured"
    ),
}
OUTSIDE_GOAL_MAX = 0.60  # MLPerf's Llama 3.1 8B on 512 GB200s: its step 52% shorter as priced
PIN_SLACK_PCT = 0.15  # rounding of the pins
GOAL_MEDIAN, GOAL_MAX = 0.05, 0.10
BY_NAME = {run.run: run for run in PUBLISHED}


def test_every_published_run_is_pinned():
    assert set(PINNED_ERROR_PCT) == set(BY_NAME)


@pytest.mark.parametrize("run", PUBLISHED, ids=lambda run: run.run)
def test_each_run_lands_where_it_is_pinned(run: PublishedRun):
    error_pct = 100 * run.error()
    assert error_pct == pytest.approx(PINNED_ERROR_PCT[run.run], abs=PIN_SLACK_PCT), (
        run.run,
        run.predicted(),
        run.reported,
    )
    limit = OUTSIDE_GOAL_MAX if run.run in OUTSIDE_GOAL else GOAL_MAX
    assert abs(error_pct) <= 100 * limit


def test_the_set_meets_the_goal():
    errors = {run.run: abs(run.error()) for run in PUBLISHED}
    assert statistics.median(errors.values()) <= GOAL_MEDIAN
    inside = [error for name, error in errors.items() if name not in OUTSIDE_GOAL]
    assert max(inside) <= GOAL_MAX
    # a run named outside the goal that came back inside it is no longer an exception
    assert all(errors[name] > GOAL_MAX for name in OUTSIDE_GOAL)


def test_small_gemms_make_the_22b_model_slower_per_flop():
    """Hidden 6144 over 8 GPUs leaves 768-wide GEMMs and 96-deep attention: the 22B model
    runs its FLOPs well below the 1T model's rate, which a constant efficiency missed."""
    small, big = BY_NAME["22b-full-step"].estimate(), BY_NAME["1t-full-step"].estimate()
    assert small.hfu < 0.9 * big.hfu
    assert small.micro is not None and big.micro is not None
    memory_share = [
        category_s(result.micro, "memory-bound") / result.micro.total_s for result in (small, big)
    ]
    assert memory_share[0] > 2 * memory_share[1]


def test_the_model_gets_the_ordering_right_for_the_right_reasons():
    """The 145.6B model reaches less than the 1T one because its TP all-reduces weigh
    more against its smaller matmuls (communication grows with h, compute with h^2)."""
    big, small = BY_NAME["1t-hfu"].estimate(), BY_NAME["145b-hfu"].estimate()
    assert small.hfu < big.hfu
    big_share, small_share = (
        next(k for k in result.comm if k.kind == "tp").exposed_s / result.step_time_s
        for result in (big, small)
    )
    assert small_share > big_share


# The least share of an accelerator's memory the estimate leaves free on any published
# run (they ran, so they fit; the closest is 1T with SP + selective recompute at ~22%).
PUBLISHED_MIN_HEADROOM = 0.15
# Runs published at the least accelerators they fit on: no room to leave. Nemotron-4 340B
# on 128 GPUs (README_340b.md: "will not fit on fewer"); the memory table holds it
# (tests/published_memory.py, nemotron4-340b-128gpu and -64gpu).
# MPT-30B under FSDP on 8 GPUs (tests/published_runs.py): 16 bytes x 30B / 8 = 60 GB of
# sharded weights, gradients and optimizer state before any activation.
AT_THE_EDGE = {"nemotron4-340b-bf16-dgxc", "mpt-30b-h100", "mpt-30b-a100"}
# Runs the estimate puts over their memory by no more than its demonstrated error (`mfu`:
# "may fit"). Llama 3.1 405B FP8 on GB200 (PP 16 x VP 4) holds 19 micro-batches of its first
# stage's layers: 209 GB of 200 with the four GEMM inputs Transformer Engine saves in fp8
# counted in bf16; at 1 byte they are ~20% of its activations and it fits (~176 GB).
MAY_FIT = {"llama31-405b-fp8-gb200"}


@pytest.mark.parametrize("run", PUBLISHED, ids=lambda run: run.run)
def test_every_published_run_fits_its_accelerators(run: PublishedRun):
    """They really ran: an estimate that says they do not fit is wrong. The estimate is a
    lower bound, so it leaves room for what it does not count. (The fp8 runs keep some
    activations in fp8, which the estimate counts in bf16: they must fit, with less room.)"""
    memory = run.estimate().memory
    assert memory is not None, run.run
    assert memory.fits or (run.run in MAY_FIT and memory.may_fit), (run.run, memory)
    if run.workload().training.dtype == "bf16" and run.run not in AT_THE_EDGE:
        headroom = 1 - memory.total_bytes / memory.capacity_bytes
        assert headroom >= PUBLISHED_MIN_HEADROOM, (run.run, headroom)


@functools.cache  # one load: its leave-one-source-out is computed once per session
def _validation_script():
    path = Path(__file__).resolve().parents[4] / "benchmarks" / "mfu_validation.py"
    spec = importlib.util.spec_from_file_location("mfu_validation", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page_block(name: str) -> str:
    page = Path(__file__).resolve().parents[4] / "docs" / "mfu" / "validation.md"
    text = page.read_text(encoding="utf-8")
    start, end = f"<!-- {name}:start -->\n", f"\n<!-- {name}:end -->"
    return text[text.index(start) + len(start) : text.index(end)]


@pytest.mark.slow
def test_published_tables_are_what_the_model_says_now():
    """docs/mfu/validation.md's validation and sensitivity tables are regenerated, not
    hand-edited: `python benchmarks/mfu_validation.py --sensitivity`."""
    script = _validation_script()
    assert _page_block("validation") == script.table()
    assert _page_block("sensitivity") == script.sensitivity()
    assert _page_block("loso") == script.loso_table()


SHARED_RUNS = Path(__file__).resolve().parents[5] / "shared" / "data" / "published_runs.md"


def test_every_figure_of_the_shared_published_runs_is_predicted():
    """../shared/data/published_runs.md (when present) holds no figure the validation set
    leaves out: each A100 run's reported figure appears there, and there are as many."""
    if not SHARED_RUNS.exists():
        pytest.skip("../shared/data/published_runs.md is not here")
    text = SHARED_RUNS.read_text(encoding="utf-8")
    a100 = [run for run in PUBLISHED if run.publication in (NARAYANAN, KORTHIKANTI)]
    for run in a100:
        figure = f"{run.reported:.1%}".replace(".0%", "%") if run.what != "step" else None
        figure = figure or f"{run.reported:.2f}"
        assert figure in text, (run.run, figure)
    # 4 headline figures (1T, 145.6B, 530B twice) and 8 iteration times (4 models x 2)
    assert len(a100) == 4 + 8


def test_the_demonstrated_error_table_is_what_the_validation_set_says_now():
    """analysis/mfu/accuracy.py's DEMONSTRATED (printed beside every `mfu` column) is
    written by `python benchmarks/mfu_validation.py --accuracy`, never by hand."""
    from collbench.analysis.mfu.accuracy import DEMONSTRATED

    assert _validation_script().demonstrated() == DEMONSTRATED


def test_a_step_time_error_turns_over_into_an_mfu_error():
    """A step predicted 10% short is an MFU 1/0.9 - 1 = +11.1% high; a throughput figure
    keeps its sign and size."""
    run = BY_NAME["175b-sp-selective-step"]
    result = run.estimate()
    step_error = run.error(result)
    assert run.mfu_error(result) == pytest.approx(1 / (1 + step_error) - 1)
    assert run.mfu_error(result) > 0 > step_error
    tokens = BY_NAME["llama3-70b-fp8-gbs128"]
    assert tokens.mfu_error() == pytest.approx(tokens.error())


def test_leave_one_source_out_refits_the_share_only_without_the_sources_that_chose_it():
    """benchmarks/mfu_validation.py --loso: the NVIDIA, MosaicML, IBM and MLPerf sources did not
    choose IN_STEP_SHARE, so they are predicted as shipped; each A100 paper that chose it is
    predicted at the share that is best (least median |MFU error|) on the other's runs."""
    from collbench.analysis.mfu import compute

    script = _validation_script()
    errors, shares = script.loso()
    assert len(shares) == 10 and len(errors) == len(PUBLISHED) + len(MOE_STEP)  # + MoE per step
    papers = {NARAYANAN, KORTHIKANTI}
    shipped = [run for run in PUBLISHED if run.publication not in papers]
    assert all(errors[run.run] == pytest.approx(run.mfu_error()) for run in shipped)
    assert all(shares[run.publication] == compute.IN_STEP_SHARE for run in shipped)
    for held_out in papers:
        other = [run for run in PUBLISHED if run.publication in papers - {held_out}]

        def median_at(share, runs=other):
            with script._in_step_share(share):
                return statistics.median(abs(run.mfu_error()) for run in runs)

        chosen = shares[held_out]  # no worse than its neighbours on the grid, or the shipped
        assert median_at(chosen) <= min(map(median_at, (chosen - 0.01, chosen + 0.01, 0.92)))
        mine = [run for run in PUBLISHED if run.publication == held_out]
        with script._in_step_share(shares[held_out]):
            assert all(errors[run.run] == pytest.approx(run.mfu_error()) for run in mine)
    assert "| small models | 6 |" in script.loso_table()  # every regime has runs now
