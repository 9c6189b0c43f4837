"""tune --workload's choice (analysis/tune/workload.py, priced by run/tune/workload.py): the
same measured settings give different answers for different training jobs, as the step's
collectives weigh the sizes differently."""

from __future__ import annotations

import pytest

from collbench.analysis.mfu.estimate import Priced
from collbench.analysis.mfu.inputs import BusbwPricer, busbw_at
from collbench.analysis.mfu.workload import Model, Training
from collbench.analysis.tune.outputs import env_choice, render_best_env, tune_document
from collbench.analysis.tune.select import NO_SAMPLES, SettingOutcome, select_best
from collbench.core.tune_grid import Setting
from collbench.run.mfu import MfuRequest
from collbench.run.tune.workload import tune_workload, workload_choice
from tests.rows import make_row

SMALL_MODEL = Model("tiny", layers=2, hidden=256, heads=4, vocab=1000)
SIZES = [2**power for power in range(16, 25)]  # 64 KiB .. 16 MiB
TREE = {"NCCL_ALGO": "Tree"}


def _rows(fast_below: int, fast_small: bool) -> tuple:
    """all_reduce on 2 ranks: 8 GB/s busbw at sizes below `fast_below` and 2 GB/s above
    when `fast_small`, the reverse otherwise; three repeats."""
    rows = []
    for repeat in range(3):
        for size in SIZES:
            small = size < fast_below
            busbw = 8.0 if small == fast_small else 2.0
            time_us = size * 2 * (2 - 1) / 2 / (busbw * 1e3)
            rows.append(make_row(size_bytes=size, time_us=time_us, repeat=repeat))
    return tuple(rows)


def _outcomes() -> list[SettingOutcome]:
    return [
        SettingOutcome(Setting(), _rows(1 << 20, fast_small=True)),
        SettingOutcome(Setting.from_mapping(TREE), _rows(1 << 20, fast_small=False)),
    ]


def _job(bucket_mb: float, **parallelism):
    training = Training(seq=128, global_batch=4)
    par = {"dp": 2, "dp_bucket_mb": bucket_mb, **parallelism}
    return tune_workload(MfuRequest(), SMALL_MODEL, training, par, _options(), "dgx-h100")


def _options():
    from collbench.analysis.mfu.estimate import EstimateOptions

    return EstimateOptions(matmul_efficiency=0.5)


def test_small_and_large_dp_buckets_choose_different_settings():
    outcomes = _outcomes()
    grads_mib = SMALL_MODEL.n_params * 4 / 2**20
    assert 2 < grads_mib < 16  # one collective of all of it is a large size here
    small, _ = workload_choice(outcomes, _job(0.25))
    large, _ = workload_choice(outcomes, _job(0))  # one collective over all gradients
    assert small is not None and large is not None
    assert small.chosen.baseline and small.chosen.knobs == {}
    assert large.chosen.knobs == TREE
    # each choice is the shortest modelled step, and the default's figures are there
    for choice in (small, large):
        assert choice.chosen.step_time_s == min(step.step_time_s for step in choice.steps)
        assert choice.default is not None
    tree = next(step for step in large.steps if step.knobs == TREE)
    assert tree.step_time_s < large.default.step_time_s
    assert tree.exposed_comm_s < large.default.exposed_comm_s


def test_best_env_and_tune_json_follow_the_workload():
    outcomes = _outcomes()
    best = select_best(outcomes)
    choice, _ = workload_choice(outcomes, _job(0))
    env = env_choice(best, choice)
    # a plain NCCL_ALGO=Tree would fail the job's all-gathers: exported per collective
    assert env.knobs == {"NCCL_ALGO": "allreduce:tree"} and env.setting == "NCCL_ALGO=Tree"
    assert "shortest modelled step" in env.why
    assert "export NCCL_ALGO=allreduce:tree" in render_best_env(env)
    document = tune_document(outcomes, best, workload=choice).to_dict()
    assert document["env"]["knobs"] == {"NCCL_ALGO": "allreduce:tree"}
    entry = document["workload"]
    assert entry["chosen"] == "NCCL_ALGO=Tree"
    assert {step["setting"] for step in entry["settings"]} == {"baseline", "NCCL_ALGO=Tree"}
    assert any("priced by busbw" in note for note in entry["notes"])


def test_a_mix_no_setting_wins_everywhere_names_what_it_loses():
    # TP all-reduces of 128 x 256 x 2 B = 64 KiB (the default's sizes) and one DP
    # all-reduce of the gradients, megabytes (Tree's): whichever is exported loses one
    choice, _ = workload_choice(_outcomes(), _job(0, tp=2, dp=2))
    assert choice is not None and len(choice.losses) == 1
    loss = choice.losses[0]
    lost = {"tp": "NCCL_ALGO=Tree", "dp": "baseline"}
    assert loss.fastest != choice.chosen.setting
    assert loss.kind in lost and lost[loss.kind] == choice.chosen.setting
    assert loss.exported_s > loss.fastest_s
    assert f"{choice.chosen.setting} takes" in loss.describe(choice.chosen.setting)
    single, _ = workload_choice(_outcomes(), _job(0.25))
    assert single.losses == ()  # every collective of this one is fastest under the default


def test_unmeasured_collectives_are_priced_alike_and_said():
    # ZeRO 1: a reduce-scatter and an all-gather nobody measured; all_reduce absent
    choice, why = workload_choice(_outcomes(), _job(0.25, zero=1))
    assert choice is None and "measured none of the collectives" in why[0]


def test_a_setting_lacking_an_issued_collective_is_no_candidate():
    outcomes = _outcomes()
    gathers = tuple(
        make_row(collective="all_gather", size_bytes=size, time_us=size / 4e3, repeat=0)
        for size in SIZES
    )
    outcomes[0] = SettingOutcome(outcomes[0].setting, outcomes[0].rows + gathers)
    ring = {"NCCL_ALGO": "Ring"}  # it could run all-gather, but measured none
    outcomes[1] = SettingOutcome(Setting.from_mapping(ring), outcomes[1].rows)
    choice, _ = workload_choice(outcomes, _job(0, sequence_parallel=True, tp=2, dp=1))
    other = next(step for step in choice.steps if step.knobs == ring)
    assert other.excluded is not None and "all_gather" in other.excluded
    assert choice.chosen.baseline
    assert any("reduce_scatter" in note and "cost model" in note for note in choice.notes)


def test_a_collective_validity_trims_is_priced_at_the_defaults_rows():
    """NCCL_ALGO=Tree cannot run all-gather (validity skips it): best.env leaves it to NCCL,
    so Tree stays a candidate for a TP+SP job, its all-gathers priced at the default's rows
    (issue 40 item 7), not excluded for lacking them."""
    outcomes = _outcomes()
    gathers = tuple(
        make_row(collective="all_gather", size_bytes=size, time_us=size / 4e3, repeat=0)
        for size in SIZES
    )
    outcomes[0] = SettingOutcome(outcomes[0].setting, outcomes[0].rows + gathers)
    choice, _ = workload_choice(outcomes, _job(0, sequence_parallel=True, tp=2, dp=1))
    tree = next(step for step in choice.steps if step.knobs == TREE)
    assert tree.excluded is None
    gathers_at = [
        i for i, item in enumerate(choice.collectives) if item["collective"] == "all_gather"
    ]
    assert gathers_at and all(tree.item_s[i] == choice.default.item_s[i] for i in gathers_at)


def test_busbw_is_interpolated_in_log_size_and_held_outside():
    table = {1024: 1.0, 4096: 3.0}
    assert busbw_at(table, 2048) == (pytest.approx(2.0), True)
    assert busbw_at(table, 512) == (1.0, False)
    assert busbw_at(table, 1 << 20) == (3.0, False)
    pricer = BusbwPricer({"all_reduce": table}, lambda *_: Priced(1.0, "model"), "A")
    # 8 ranks: algbw = busbw / (2 x 7 / 8)
    assert pricer("all_reduce", 4096, 8, 1).time_s == pytest.approx(4096 * 1.75 / 3e9)
    assert pricer("sendrecv", 4096, 2, 1).time_s == 1.0
    assert pricer.unmeasured == {"sendrecv"} and pricer.outside == set()


def _scaled(scale, sizes=SIZES, world_size=2, nodes=1) -> tuple:
    """all_reduce rows, one repeat without samples (an imported log's): busbw 8 GB/s
    towards large sizes times `scale(size)`."""
    rows = []
    for size in sizes:
        busbw = 8.0 * size / (size + (1 << 20)) * scale(size)
        time_us = size * 2 * (world_size - 1) / world_size / (busbw * 1e3)
        rows.append(make_row(size_bytes=size, time_us=time_us, world_size=world_size, nodes=nodes))
    return tuple(rows)


def test_a_gain_the_threshold_cannot_resolve_is_not_exported():
    # Tree 3% faster at every size, on logs without samples (a 5% threshold): its step is
    # the shortest, by less than the measurements can tell from no change
    outcomes = [
        SettingOutcome(Setting(), _scaled(lambda size: 1.0)),
        SettingOutcome(Setting.from_mapping(TREE), _scaled(lambda size: 1.03)),
    ]
    choice, _ = workload_choice(outcomes, _job(0))
    document = tune_document(outcomes, select_best(outcomes), workload=choice).to_dict()
    entry = document["workload"]
    assert entry["chosen"] == "NCCL_ALGO=Tree" and document["env"]["knobs"] == {}
    assert entry["export"]["setting"] == "baseline" and entry["export"]["margin_s"] > 0
    steps = {step["setting"]: step["step_time_s"] for step in entry["settings"]}
    assert 0 < steps["baseline"] - steps["NCCL_ALGO=Tree"] < entry["export"]["margin_s"]
    assert (
        f"(5.0% of the default's exposed communication, the smallest busbw change resolved: {NO_SAMPLES}"
        in entry["export"]["text"]
    )
    assert "shorter step is within what is resolved" in document["env"]["why"]


def test_dp_buckets_of_4_gib_export_the_tuned_setting_25_mib_the_default():
    # like 8-node H100 logs of the default and a tuned setting: the tuned one 17% slower from
    # 16 MiB to 512 MiB, 25% faster from 1 GiB; a DP-dominated job (dp 64, no TP)
    sizes = [2**power for power in range(20, 34)]
    tuned = {"NCCL_ALGO": "Ring"}
    middle = range(16 << 20, (512 << 20) + 1)
    scale = {True: 0.83, False: 1.0}
    outcomes = [
        SettingOutcome(Setting(), _scaled(lambda size: 1.0, sizes, 64, 8)),
        SettingOutcome(
            Setting.from_mapping(tuned),
            _scaled(lambda s: 1.25 if s >= 1 << 30 else scale[s in middle], sizes, 64, 8),
        ),
    ]
    model = Model("m", layers=24, hidden=2816, heads=22, vocab=32000)
    exported = {}
    for bucket_mb in (25, 4096):
        par = {"dp": 64, "dp_bucket_mb": bucket_mb}
        job = tune_workload(
            MfuRequest(), model, Training(seq=2048, global_batch=512), par, _options(), "dgx-h100"
        )
        choice, _ = workload_choice(outcomes, job)
        document = tune_document(outcomes, select_best(outcomes), workload=choice).to_dict()
        exported[bucket_mb] = document["env"]["knobs"]
    # measured on all-reduce only: exported for it alone (issue 40 item 1)
    assert exported == {25: {}, 4096: {"NCCL_ALGO": "allreduce:ring"}}
