"""-J's `blocking_collectives` says what the run did (issue 30, item 6): nccl-tests writes
"true" under -z (the host waits for each collective); a gloo sweep's CPU ranks wait for
every operation, a GPU sweep's do not unless a recorded variable makes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.render.export import nccl_head
from collbench.store.meta import RunMeta
from tests.helpers import collbench
from tests.rows import make_row, write_run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"


def _blocking(meta: RunMeta) -> str:
    return nccl_head(meta, per_iter=False)["config"]["blocking_collectives"]


@pytest.mark.parametrize(
    "meta, expected",
    [
        (RunMeta(backend="gloo", timing_method="perf_counter"), "true"),  # before: "false"
        (RunMeta(backend="gloo"), "true"),  # an older run without its timing method
        (RunMeta(backend="nccl", timing_method="cuda_events"), "false"),
        (RunMeta(backend="nccl", timing_method="cuda_graph"), "false"),
        (
            RunMeta(
                backend="nccl",
                timing_method="cuda_events",
                knobs={"env": {"TORCH_NCCL_BLOCKING_WAIT": "1"}},
            ),
            "true",
        ),
        (
            RunMeta(
                backend="nccl",
                timing_method="cuda_events",
                knobs={"env": {"CUDA_LAUNCH_BLOCKING": "0"}},
            ),
            "false",
        ),
        (RunMeta(source="nccl-tests", command_line="all_reduce_perf -b 8 -e 1G -z 1"), "true"),
        (RunMeta(source="nccl-tests", command_line=["all_reduce_perf", "--blocking=2"]), "true"),
        (RunMeta(source="nccl-tests", command_line="all_reduce_perf -z 0 -g 1"), "false"),
        (RunMeta(source="nccl-tests", command_line="all_reduce_perf -b 8"), "false"),
        (RunMeta(source="nccl-tests", extra={"header": {"blocking": True}}), "true"),
    ],
)
def test_blocking_collectives_follows_what_the_run_did(meta, expected):
    assert _blocking(meta) == expected


def test_export_of_a_gloo_sweep_says_its_collectives_block(tmp_path):
    rows = [make_row(size_bytes=size, time_us=10.0 + size / 1e3) for size in (8, 64, 512)]
    meta = {"run_id": "cpu", "backend": "gloo", "timing_method": "perf_counter"}
    run = write_run(tmp_path / "cpu", rows, meta)
    done = collbench("export", str(run), "-J", str(tmp_path / "cpu.json"))
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / "cpu.json").read_text())["config"]
    assert config["blocking_collectives"] == "true"


def test_an_imported_log_with_blocking_enabled_exports_it(tmp_path):
    text = (FIXTURE / "current_all_gather_2node.log").read_text().splitlines(keepends=True)
    (params,) = [index for index, line in enumerate(text) if line.startswith("# nThread")]
    text.insert(
        params + 1, "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n"
    )
    log = tmp_path / "blocking.log"
    log.write_text("".join(text))
    for name, source in (("blocking", log), ("plain", FIXTURE / "current_all_gather_2node.log")):
        run = tmp_path / name
        done = collbench("import", "nccl-tests", str(source), "--out", str(run))
        assert done.returncode == 0, done.stderr
        done = collbench("export", str(run), "-J", str(tmp_path / f"{name}.json"))
        assert done.returncode == 0, done.stderr
    blocking = json.loads((tmp_path / "blocking.json").read_text())["config"]
    plain = json.loads((tmp_path / "plain.json").read_text())["config"]
    assert blocking["blocking_collectives"] == "true" and plain["blocking_collectives"] == "false"


def test_an_imported_json_with_blocking_collectives_keeps_it(tmp_path):
    data = json.loads((FIXTURE / "nccl_tests_sendrecv.json").read_text())
    data["config"]["blocking_collectives"] = "true"
    source = tmp_path / "sr.json"
    source.write_text(json.dumps(data))
    done = collbench("import", "nccl-tests", str(source), "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    done = collbench("export", str(tmp_path / "run"), "-J", str(tmp_path / "back.json"))
    assert done.returncode == 0, done.stderr
    assert (
        json.loads((tmp_path / "back.json").read_text())["config"]["blocking_collectives"] == "true"
    )
