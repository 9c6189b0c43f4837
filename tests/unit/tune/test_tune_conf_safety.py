"""nccl_tuner.conf safe to deploy (issue 26): rules name the tuned communicator's shape and
say what any other shape gets; NCCL's own choice (choices.jsonl, a debug log) stands in where
a rule must name a pair the winner does not, cut where NCCL's pair changed, and never carries
the winner's gain; a collective no range tuned is covered from those choices; an nvls rule
never takes a ring/tree channel cap; a channel floor is not a count (pure)."""

import pytest

from collbench.analysis.imports.nccl_choice import ChoiceSummary, UsedChoice
from collbench.analysis.tune.select import BYTES_MAX
from collbench.analysis.tune.tuner_conf import (
    TunerConfUnavailable,
    communicator_shape,
    parse_tuner_shape,
    render_tuner_conf,
)
from collbench.analysis.tune.tuner_conf_rules import SIZE_MAX, parse_tuner_conf
from collbench.core.errors import SpecError
from tests.rows import make_row
from tests.unit.tune.test_tune_conf import _record as best_record
from tests.unit.tune.tuner_plugin import effective_channels, lookup, uncovered

KIB, MIB, GIB = 1024, 1024**2, 1024**3
TREE = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}
CTAS_QPS = {"NCCL_MIN_CTAS": "24", "NCCL_IB_QPS_PER_CONNECTION": "2"}


def _record(collective, low, high, knobs, gain=0.1, setting=None):
    return best_record(collective, low, high, knobs, gain, setting=setting)


def _line(collective, size, algorithm, protocol, setting="baseline-id"):
    """One choices.jsonl line as run/tune/choices.collect_choices writes it."""
    return {
        "setting": setting,
        "collective": collective,
        "size_bytes": size,
        "size_is_logged": False,
        "algorithm": algorithm,
        "protocol": protocol,
        "channels": 16,
        "count": 1,
    }


# NCCL's own choice in the baseline, as a 2.24+ debug log would give it: LL to 64 KiB,
# LL128 to 16 MiB, Simple above.
OWN = [
    _line("all_reduce", size, "ring", proto)
    for size, proto in ((8 * KIB, "ll"), (64 * KIB, "ll"), (MIB, "ll128"), (64 * MIB, "simple"))
]


def test_rules_name_the_tuned_shape_and_say_what_other_shapes_get():
    records = [_record("all_reduce", 0, BYTES_MAX, TREE)]
    text, notes = render_tuner_conf(records, nodes=8, ranks=64)
    rules = parse_tuner_conf(text)
    assert [rule.line() for rule in rules] == [
        "allreduce,0,18446744073709551615,tree,simple,0,8,64,-1,-1"
    ]
    assert uncovered(rules, "all_reduce", 8, 64) == []
    # a TP group (1 node, 8 ranks) of the same job matches no rule: 1 channel, every size
    assert uncovered(rules, "all_reduce", 1, 8) == [(0, SIZE_MAX)]
    assert effective_channels(lookup(rules, "all_reduce", MIB, 1, 8)) == 1
    # the file's first line, not a note further down (issue 40 item 8)
    assert text.startswith("# Rules match only communicators of 8 node(s) and 64 rank(s)")
    said = " ".join(notes)
    assert "matches none and runs every collective on 1 channel" in said
    assert "--tuner-shape any" in said
    any_shape, notes = render_tuner_conf(records)
    assert "8,64" not in any_shape and "Rules match only" not in any_shape
    assert not any("rules match only" in note for note in notes)


def test_a_winner_that_names_no_pair_gets_ncclS_own_pairs_and_no_claimed_gain():
    """NCCL_MIN_CTAS=24 NCCL_IB_QPS_PER_CONNECTION=2 wins from 1 GiB: the rule there is what
    NCCL chose in the baseline, channels 0, and its comment carries no gain."""
    records = [
        _record("all_reduce", 0, GIB - 1, {}, 0.0),
        _record("all_reduce", GIB, BYTES_MAX, CTAS_QPS, 0.27, "NCCL_MIN_CTAS=24 ..."),
    ]
    own = [*OWN, _line("all_reduce", 4 * GIB, "ring", "simple")]
    text, notes = render_tuner_conf(records, baseline_choices=own, nodes=8, ranks=64)
    rules = parse_tuner_conf(text)
    assert [rule.line() for rule in rules] == [
        "allreduce,0,1048575,ring,ll,0,8,64,-1,-1",
        "allreduce,1048576,67108863,ring,ll128,0,8,64,-1,-1",
        "allreduce,67108864,18446744073709551615,ring,simple,0,8,64,-1,-1",
    ]
    (comment,) = [line for line in text.splitlines() if line.startswith("# allreduce [1 GiB")]
    assert "+27" not in text and "NCCL's own choice in the baseline, ring/simple: " in comment
    assert "the winner names no pair, and its gain needs best.env, not this rule" in comment
    said = " ".join(notes)
    assert "names no algorithm/protocol" in said and "needs best.env's knobs exported" in said
    # without NCCL's own choice there, the file cannot be written, and says where to get it
    with pytest.raises(TunerConfUnavailable, match="no single algorithm") as caught:
        render_tuner_conf(records, baseline_choices=OWN[:2])
    assert "--nccl-log" in str(caught.value)


def test_a_pinned_channel_count_of_a_winner_without_a_pair_is_kept():
    records = [_record("all_reduce", 0, BYTES_MAX, {"NCCL_MAX_NCHANNELS": "4"})]
    text, _ = render_tuner_conf(records, baseline_choices=OWN[:1])
    assert [rule.line() for rule in parse_tuner_conf(text)] == [
        "allreduce,0,18446744073709551615,ring,ll,4,-1,-1,-1,-1"
    ]


def test_the_default_range_is_cut_where_ncclS_pair_changed():
    records = [_record("all_reduce", 0, BYTES_MAX, {}, 0.0)]
    summaries = [
        ChoiceSummary("all_reduce", line["size_bytes"], False, (UsedChoice("ring", p, 8, 2),))
        for line, p in zip(OWN, ("ll", "ll", "ll128", "simple"), strict=True)
    ]
    for choices in (OWN, summaries, [summary.to_dict() for summary in summaries]):
        text, _ = render_tuner_conf(records, baseline_choices=choices)
        rules = parse_tuner_conf(text)
        assert [(rule.min_bytes, rule.protocol) for rule in rules] == [
            (0, "ll"),
            (MIB, "ll128"),
            (64 * MIB, "simple"),
        ]
        assert all(rule.channels == 0 for rule in rules)
        for line in OWN:  # every size NCCL printed gets the pair it printed
            rule = lookup(rules, "all_reduce", line["size_bytes"], 1, 8)
            assert (rule.algorithm, rule.protocol) == (line["algorithm"], line["protocol"])


def test_collectives_not_tuned_are_covered_with_ncclS_own_choice():
    """A job's debug log names all-gather too: it gets NCCL's own pairs, not 1 channel."""
    records = [_record("all_reduce", 0, BYTES_MAX, TREE)]
    gathered = [_line("all_gather", KIB, "ring", "ll"), _line("all_gather", GIB, "pat", "simple")]
    text, notes = render_tuner_conf(records, baseline_choices=gathered)
    rules = parse_tuner_conf(text)
    assert uncovered(rules, "all_gather", 1, 8) == []
    assert [rule.line() for rule in rules if rule.collective == "allgather"] == [
        "allgather,0,1073741823,ring,ll,0,-1,-1,-1,-1",
        "allgather,1073741824,18446744073709551615,pat,simple,0,-1,-1,-1,-1",
    ]
    said = " ".join(notes)
    assert "allgather [0 B, end]: not tuned; NCCL's own choice" in said
    assert any(note.startswith("broadcast, reduce, reducescatter: no rule") for note in notes)
    # mixed choices at one size leave it uncovered (and say why)
    mixed = [*gathered, _line("all_gather", KIB, "ring", "simple")]
    text, notes = render_tuner_conf(records, baseline_choices=mixed)
    assert "allgather," not in text
    assert any("not tuned, and NCCL's own choice is not one pair" in note for note in notes)


@pytest.mark.parametrize(
    ("knobs", "channels"),
    [
        ({"NCCL_MAX_NCHANNELS": "8"}, 0),  # caps ring/tree, not NVLS: NCCL's own
        ({"NCCL_MAX_CTAS": "8", "NCCL_MAX_NCHANNELS": "4"}, 8),  # CTAs do cap NVLS
        ({"NCCL_NVLS_NCHANNELS": "12"}, 12),
        ({}, 0),
    ],
)
@pytest.mark.parametrize("algorithm", ["NVLS", "NVLSTree"])
def test_nvls_rules_never_take_a_ring_channel_cap(knobs, channels, algorithm):
    pair = {"NCCL_ALGO": algorithm, "NCCL_PROTO": "Simple"}
    text, notes = render_tuner_conf([_record("all_reduce", 0, BYTES_MAX, {**pair, **knobs})])
    (rule,) = parse_tuner_conf(text)
    assert rule.algorithm in ("nvls", "nvls_tree") and rule.channels == channels
    capped = "NCCL_MAX_NCHANNELS" in knobs
    assert any("caps ring/tree channels, not" in note for note in notes) == capped
    ring = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MAX_NCHANNELS": "8"}
    (rule,) = parse_tuner_conf(render_tuner_conf([_record("all_reduce", 0, BYTES_MAX, ring)])[0])
    assert rule.channels == 8  # a ring rule does take it


def test_shape_of_the_rows_and_the_option_word():
    rows = [make_row(world_size=64, nodes=8), make_row(world_size=64, nodes=8, size_bytes=2)]
    assert communicator_shape(rows) == (8, 64)
    assert communicator_shape([*rows, make_row(world_size=64, nodes=None)]) == (None, 64)
    assert communicator_shape([]) == (None, None)
    assert parse_tuner_shape("any") == "any"
    with pytest.raises(SpecError, match="tuned, any"):
        parse_tuner_shape("8x64")
