"""`collbench mfu --search` end to end: per fabric the layouts that fit, best first, in text
and JSON, and a fabric where nothing fits."""

from __future__ import annotations

import json

from tests.cli.test_mfu_cli import write_fabric
from tests.helpers import collbench

# analysis/mfu/test_mfu_search.py's tiny job: 4 GiB of fp32 logits per micro-batch / tp.
TINY = "--layers 1 --hidden 256 --heads 8 --vocab 262144 --seq 4096 --global-batch 8".split()


def test_search_ranks_each_fabric_and_says_when_nothing_fits(tmp_path):
    roomy = write_fabric(tmp_path, "roomy", accelerator__memory_gib=3)
    tight = write_fabric(tmp_path, "tight", accelerator__memory_gib=0.4)
    args = ("mfu", "-T", roomy, "-T", tight, *TINY, "--tp", "2", "--dp", "4", "--search")
    done = collbench(*args, "--price", "roomy=2", "--json")
    assert done.returncode == 0, done.stderr
    fits, none = json.loads(done.stdout)["search"]
    assert (fits["topology"], none["topology"]) == ("roomy", "tight")
    best = fits["best"]
    assert 1 <= len(best) <= 6 and [row["rank"] for row in best] == list(range(1, len(best) + 1))
    assert all(row["tp"] >= 2 and row["memory_gib"] <= 3 for row in best)
    assert [row["step_time_s"] for row in best] == sorted(row["step_time_s"] for row in best)
    assert all(row["usd_per_million_tokens"] > 0 for row in best)
    assert fits["yours"]["rank"] >= 1 and fits["layouts_fit"] >= len(best)
    assert none["best"] == [] and none["yours"]["rank"] is None
    assert none["yours"]["why"] == "nothing fits in 0.4 GiB per accelerator"
    # the ranking states the estimator's own error on the accelerator (mfu's MFU-line band)
    assert fits["estimate_error"] == none["estimate_error"] != ""
    text = collbench(*args).stdout
    assert (
        text.count("close steps are not told apart")
        + text.count("steps closer than that are not told apart")
        == 2
    )
    assert "layout search on roomy: " in text
    # ZeRO 1's reduce-scatter and bf16 gather are 3/4 of ZeRO 0's fp32 all-reduce, and so is
    # the compute they slow beside them (the step's largest difference, named)
    assert "  yours ranks 2: its step is" in text and "nothing fits in 0.4 GiB" in text
    assert "most in compute slowed beside collectives (+" in text


def test_a_given_layout_that_does_not_fit_is_searched_from_not_refused(tmp_path):
    """tp 1 holds 4 GiB of logits (~5 GiB in all) in 3: mfu alone refuses it; --search ranks the
    layouts that fit and says the given one does not (also when estimated anyway)."""
    roomy = write_fabric(tmp_path, "roomy", accelerator__memory_gib=3)
    args = ("mfu", "-T", roomy, *TINY, "--dp", "8")
    assert collbench(*args).returncode == 2
    for extra in ((), ("--allow-oversubscribed-memory",)):
        done = collbench(*args, "--search", "--json", *extra)
        assert done.returncode == 0, done.stderr
        (found,) = json.loads(done.stdout)["search"]
        assert found["best"] and all(row["tp"] >= 2 for row in found["best"])
        assert found["yours"]["rank"] is None
        assert found["yours"]["why"].startswith("it does not fit (~5 GiB per accelerator of 3)")
