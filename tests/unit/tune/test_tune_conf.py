"""nccl_tuner.conf: what collbench writes parses under NCCL's example plugin's rules and
covers every size of every tuned collective with an explicit channel count; the reader
refuses what the plugin would skip or misread; tuner_plugin.py models what the plugin
does with malformed lines."""

from dataclasses import replace

import pytest

from collbench.analysis.imports.nccl_choice import ChoiceSummary, UsedChoice
from collbench.analysis.tune.select import BYTES_MAX, BestRecord
from collbench.analysis.tune.tuner_conf import (
    ChannelsUnknown,
    TunerConfUnavailable,
    render_tuner_conf,
)
from collbench.analysis.tune.tuner_conf_rules import (
    ALGO_ENV_NAMES,
    MAX_LINE_CHARS,
    SIZE_MAX,
    Rule,
    TunerConfSyntaxError,
    enabled_names,
    parse_tuner_conf,
)
from collbench.core.errors import CollbenchError, SpecError
from tests.unit.tune.tuner_plugin import (
    effective_channels,
    lookup,
    matches,
    plugin_rules,
    uncovered,
)

KIB, MIB = 1024, 1024**2
TREE_LL = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}
RING_LL128 = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128"}
RING_SIMPLE_8 = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MAX_NCHANNELS": "8"}


def _record(collective, low, high, knobs, gain=0.1, candidate=None, **extra):
    return {
        "collective": collective,
        "min_bytes": low,
        "max_bytes": high,
        "knobs": knobs,
        "gain": gain,
        "confidence": "significant",
        "candidate": candidate,
        **extra,
    }


def _bands(collective, small, medium, large, **extra):
    """Three records as tune_select's "band" ranges give them."""
    return [
        _record(collective, 0, 64 * KIB - 1, small, **extra),
        _record(collective, 64 * KIB, 16 * MIB - 1, medium, **extra),
        _record(collective, 16 * MIB, BYTES_MAX, large, **extra),
    ]


def _probe_sizes(rules):
    """0, 2**40, SIZE_MAX and every rule boundary +-1."""
    sizes = {0, 1, 2**40, SIZE_MAX}
    for rule in rules:
        for edge in (rule.min_bytes, rule.max_bytes):
            sizes |= {edge - 1, edge, edge + 1}
    return sorted(size for size in sizes if 0 <= size <= SIZE_MAX)


def _assert_covers(text, collectives, nnodes=1, nranks=8):
    rules = parse_tuner_conf(text)
    assert plugin_rules(text) == rules  # no plugin fallback in play
    for collective in collectives:
        for size in _probe_sizes(rules):
            matching = [rule for rule in rules if matches(rule, collective, size, nnodes, nranks)]
            assert len(matching) == 1, (collective, size, matching)
            rule = lookup(rules, collective, size, nnodes, nranks)
            assert rule is matching[0] and rule.channels >= 0, (collective, size)
            assert effective_channels(rule) != 1 or rule.channels == 1
        assert uncovered(rules, collective, nnodes, nranks) == []


MIXED = [
    *_bands("all_reduce", TREE_LL, RING_LL128, RING_SIMPLE_8),
    *_bands("all_gather", RING_LL128, {"NCCL_ALGO": "PAT", "NCCL_PROTO": "Simple"}, RING_LL128),
    *_bands("reduce_scatter", RING_LL128, RING_LL128, RING_SIMPLE_8),
    *_bands("broadcast", RING_LL128, RING_LL128, RING_LL128),
    *_bands("reduce", TREE_LL, RING_LL128, RING_LL128),
]


@pytest.mark.parametrize("nodes,ranks", [(None, None), (2, 16)])
def test_every_size_of_every_tuned_collective_has_one_rule_with_explicit_channels(nodes, ranks):
    text, notes = render_tuner_conf(MIXED, nodes=nodes, ranks=ranks)
    collectives = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce")
    _assert_covers(text, collectives, nnodes=nodes or 1, nranks=ranks or 8)
    assert ("rules match only" in " ".join(notes)) == (nodes is not None)
    assert "allreduce,16777216,18446744073709551615,ring,simple,8," in text
    # identical neighbours merge into one line
    assert "broadcast,0,18446744073709551615,ring,ll128,0," in text
    # the example plugin that reads this file first shipped in NCCL 2.27.5 (issue 40 item 8)
    assert "# NCCL >= 2.27.5 ships it" in text


def test_lines_are_short_and_comments_only_in_column_zero():
    many = {**TREE_LL, **{f"NCCL_IB_KNOB_{index}": "x" * 30 for index in range(12)}}
    text, notes = render_tuner_conf(_bands("all_reduce", many, many, many))
    assert text.startswith("# ") and "collbench tune" in text.splitlines()[0]
    for line in text.splitlines():
        assert len(line) < 256
        assert "#" not in line or line.startswith("#")
    assert any("cannot be said in nccl_tuner.conf" in note for note in notes)


def test_unmeasured_ranges_take_the_nearest_measured_rule_and_say_so():
    records = [_record("all_reduce", 64 * KIB, 16 * MIB - 1, RING_LL128)]
    text, notes = render_tuner_conf(records)
    rules = [replace(rule, line_number=0) for rule in parse_tuner_conf(text)]
    assert rules == [Rule("allreduce", 0, SIZE_MAX, "ring", "ll128", 0)]
    assert any("only allreduce [64 KiB, 16 MiB) was a tuned range" in note for note in notes)
    _assert_covers(text, ["allreduce"])


def test_best_records_from_tune_select_render():
    records = [
        BestRecord(
            collective="all_reduce", min_bytes=0, max_bytes=BYTES_MAX, knobs=dict(TREE_LL),
            busbw_gbps=10.0, baseline_busbw_gbps=8.0, gain=0.25, confident=True, band="small",
            placement="out_of_place", sizes=(8, 1024), setting="NCCL_ALGO=Tree NCCL_PROTO=LL",
            setting_id="abc", default_is_best=False, confidence="significant", reason="",
        )
    ]  # fmt: skip
    text, _ = render_tuner_conf(records)
    assert "allreduce,0,18446744073709551615,tree,ll,0,-1,-1,-1,-1" in text
    assert "+25.0% (significant)" in text


# ---- where the plugin cannot say the result ----


def test_default_is_best_uses_a_pair_measured_at_least_as_fast_or_refuses():
    even = {"setting": "NCCL_ALGO=Ring NCCL_PROTO=LL128", "knobs": RING_LL128, "gain": 0.003}
    text, _ = render_tuner_conf([_record("all_reduce", 0, BYTES_MAX, {}, 0.0, even)])
    assert "allreduce,0,18446744073709551615,ring,ll128,0," in text
    assert "default is best; the plugin must name a pair" in text
    slower = {**even, "gain": -0.01}
    for candidate in (None, slower, {**even, "knobs": {"NCCL_ALGO": "Ring"}}):
        with pytest.raises(TunerConfUnavailable, match="default is best") as caught:
            render_tuner_conf([_record("all_reduce", 0, BYTES_MAX, {}, 0.0, candidate)])
        assert not isinstance(caught.value, ChannelsUnknown)
        assert isinstance(caught.value, CollbenchError)


@pytest.mark.parametrize(
    "knobs",
    [{"NCCL_ALGO": "Ring"}, {"NCCL_PROTO": "^LL128", "NCCL_ALGO": "Ring"}, {"NCCL_BUFFSIZE": "8"}],
)
def test_a_setting_without_one_pair_cannot_be_written_for_nccl(knobs):
    with pytest.raises(TunerConfUnavailable, match="no single algorithm and protocol"):
        render_tuner_conf([_record("all_reduce", 0, BYTES_MAX, knobs)])


def test_imported_logs_need_a_channel_count():
    records = _bands("all_reduce", TREE_LL, RING_LL128, RING_SIMPLE_8)
    with pytest.raises(ChannelsUnknown, match="--channels N") as caught:
        render_tuner_conf(records, imported=True)
    assert "imported logs record no environment" in str(caught.value)
    assert len(caught.value.reasons) == 2  # the third range pins 8 channels itself
    text, _ = render_tuner_conf(records, imported=True, channels=16)
    counts = [rule.channels for rule in parse_tuner_conf(text)]
    assert counts == [16, 16, 8]
    text, _ = render_tuner_conf(records, imported=True, channels=0)
    assert [rule.channels for rule in parse_tuner_conf(text)] == [0, 0, 8]


def test_channel_knobs():
    def channels(knobs, **options):
        text, _ = render_tuner_conf([_record("all_reduce", 0, BYTES_MAX, knobs)], **options)
        return parse_tuner_conf(text)[0].channels

    assert channels(TREE_LL) == 0  # measured with NCCL's own count
    assert channels({**TREE_LL, "NCCL_MAX_NCHANNELS": "4"}) == 4
    assert channels({**TREE_LL, "NCCL_MAX_CTAS": "2", "NCCL_MAX_NCHANNELS": "4"}) == 2
    # a floor is not a count: NCCL's own (which honours the floor with best.env exported)
    floor = [_record("all_reduce", 0, BYTES_MAX, {**TREE_LL, "NCCL_MIN_CTAS": "24"})]
    text, notes = render_tuner_conf(floor)
    assert parse_tuner_conf(text)[0].channels == 0
    assert any("NCCL_MIN_CTAS=24 cannot be said" in note and "a floor" in note for note in notes)
    assert channels({**TREE_LL, "NCCL_MIN_NCHANNELS": "4"}, channels=6) == 6
    with pytest.raises(SpecError, match="not a channel count"):
        channels({**TREE_LL, "NCCL_MAX_NCHANNELS": "lots"})


@pytest.mark.parametrize(
    "value,collective,expected",
    [
        ("Ring", "allreduce", ["ring"]),
        ("ring,tree", "allreduce", ["tree", "ring"]),
        ("^Tree", "allgather", ["ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"]),
        ("ring;allreduce:tree", "allreduce", ["tree"]),
        ("ring;allreduce:tree", "allgather", ["ring"]),
        ("allreduce:tree;AllGather:NVLSTree", "allgather", ["nvls_tree"]),
        ("allreduce:tree", "broadcast", list(ALGO_ENV_NAMES.values())),
    ],
)  # fmt: skip
def test_nccl_algo_is_read_as_nccl_reads_it(value, collective, expected):
    assert enabled_names("NCCL_ALGO", value, ALGO_ENV_NAMES, collective) == expected


@pytest.mark.parametrize("value", ["Ring;tree", "Rings", "allreduce:tree;everything:ring"])
def test_nccl_algo_values_nccl_refuses(value):
    with pytest.raises(SpecError):
        enabled_names("NCCL_ALGO", value, ALGO_ENV_NAMES, "allreduce")


def test_per_collective_algo_syntax_picks_the_collectives_pair():
    knobs = {"NCCL_ALGO": "allreduce:tree;allgather:ring", "NCCL_PROTO": "Simple"}
    records = [
        _record("all_gather", 0, BYTES_MAX, knobs),
        _record("all_reduce", 0, BYTES_MAX, knobs),
    ]
    rules = parse_tuner_conf(render_tuner_conf(records)[0])
    assert [(rule.collective, rule.algorithm) for rule in rules] == [
        ("allgather", "ring"),
        ("allreduce", "tree"),
    ]


def test_rccl_gets_only_what_its_tuner_supports():
    nvls = {"NCCL_ALGO": "NVLS", "NCCL_PROTO": "Simple"}
    even = {"setting": "ring ll128", "knobs": RING_LL128, "gain": 0.01}
    records = [
        _record("all_reduce", 0, 64 * KIB - 1, TREE_LL),
        _record("all_reduce", 64 * KIB, 16 * MIB - 1, {}, 0.0, even),
        _record("all_reduce", 16 * MIB, BYTES_MAX, nvls),
        *_bands("all_gather", {"NCCL_ALGO": "PAT", "NCCL_PROTO": "LL"}, RING_LL128, RING_SIMPLE_8),
    ]
    text, notes = render_tuner_conf(records, backend="rccl")
    rules = parse_tuner_conf(text)
    assert {rule.algorithm for rule in rules} <= {"ring", "tree"}
    assert {rule.protocol for rule in rules} <= {"simple", "ll", "ll128"}
    assert [rule.line() for rule in rules] == [
        "allgather,65536,16777215,ring,ll128,0,-1,-1,-1,-1",
        "allgather,16777216,18446744073709551615,ring,simple,8,-1,-1,-1,-1",
        "allreduce,0,65535,tree,ll,0,-1,-1,-1,-1",
    ]
    assert "ring/tree with simple/ll/ll128 only" in text
    said = " ".join(notes)
    assert "nvls/simple is not in RCCL's tuner" in said and "pat/ll" in said
    assert "the default is best; no rule, so RCCL chooses" in said
    # RCCL's plugin leaves a size without a rule to RCCL (channels 0), not to 1 channel
    assert effective_channels(lookup(rules, "all_reduce", 1 * MIB, 1, 8), "rccl") is None


def test_overlapping_records_are_usage_errors():
    records = [_record("all_reduce", 0, BYTES_MAX, TREE_LL)]
    overlap = [*records, _record("all_reduce", 10, 20, TREE_LL)]
    with pytest.raises(SpecError, match="overlap"):
        render_tuner_conf(overlap)


def test_collectives_without_a_tuner_rule_are_skipped_with_a_note():
    records = [
        _record("all_to_all", 0, BYTES_MAX, TREE_LL),
        _record("all_reduce", 0, BYTES_MAX, TREE_LL),
    ]
    text, notes = render_tuner_conf(records)
    assert "all_to_all: NCCL does not consult a tuner plugin" in notes[0]
    assert "1 channel" in notes[-1] and "allgather" in notes[-1]
    assert [rule.collective for rule in parse_tuner_conf(text)] == ["allreduce"]


# ---- the plugin's reading ----

GOOD = "allreduce,0,65535,tree,ll,4,-1,-1,-1,-1"


@pytest.mark.parametrize(
    "line,plugin_reads,why",
    [
        ("allreduce,0,65535,tree,ll,4,-1", [], "has 7 fields"),
        (GOOD + ",7", [Rule("allreduce", 0, 65535, "tree", "ll", 4)], "has 11 fields"),
        ("allreduce,0,,tree,ll,4,-1,-1,-1", [Rule("allreduce", 0, 0, "ring", "simple", -1)], "empty field"),
        ("all_reduce,0,65535,Tree,ll,4,-1,-1", [Rule("allreduce", 0, 65535, "ring", "ll", 4)], "is unknown"),
        ("allgather,0,65535,tree,LL,4,-1,-1", [Rule("allgather", 0, 65535, "tree", "simple", 4)], "is unknown"),
        ("allreduce,0,64K,tree,ll,4,-1,-1", [Rule("allreduce", 0, 64, "tree", "ll", 4)], "not an integer"),
        (GOOD + " # why", [Rule("allreduce", 0, 65535, "tree", "ll", 4)], "after column 0"),
        ("  # a,b,c,d,e,f,g,h", [Rule("allreduce", 0, 0, "ring", "simple", 0, 0, 0)], "after column 0"),
        ("allreduce,100,10,tree,ll,4,-1,-1", [Rule("allreduce", 100, 10, "tree", "ll", 4)], "matches nothing"),
        ("allreduce,0,-1,tree,ll,4,-1,-1", [Rule("allreduce", 0, SIZE_MAX, "tree", "ll", 4)], "matches nothing"),
        ("allreduce,0,9,tree,ll,-2,-1,-1", [Rule("allreduce", 0, 9, "tree", "ll", -2)], "channels must"),
        ("allreduce,0,9,tree,ll,4,-1,-1,-1,2", [Rule("allreduce", 0, 9, "tree", "ll", 4, reg_buff=2)], "regBuff"),
    ],
)  # fmt: skip
def test_malformed_lines_strict_refuses_what_the_plugin_misreads(line, plugin_reads, why):
    text = f"# header\n{line}\n"
    read = plugin_rules(text)
    assert [replace(rule, line_number=0) for rule in read] == plugin_reads
    with pytest.raises(TunerConfSyntaxError, match=why) as caught:
        parse_tuner_conf(text)
    assert "line 2" in str(caught.value)


def test_a_line_over_255_characters_is_read_as_two():
    line = GOOD + " " * (MAX_LINE_CHARS - len(GOOD)) + ",9"  # 257 characters
    assert plugin_rules(line)[0].channels == 4  # the tail ",9" is dropped
    with pytest.raises(TunerConfSyntaxError, match="reads 255"):
        parse_tuner_conf(line)
    exactly = GOOD + " " * (MAX_LINE_CHARS - len(GOOD))
    assert parse_tuner_conf(exactly) == plugin_rules(exactly)


def test_blank_lines_and_column_zero_comments_are_skipped():
    text = f"# a,b,c,d,e,f,g,h,i\n\n   \n{GOOD}\n#{GOOD}\n"
    assert parse_tuner_conf(text) == [Rule("allreduce", 0, 65535, "tree", "ll", 4, line_number=4)]
    assert [rule.channels for rule in plugin_rules(text)] == [4]


def test_first_match_wins_wildcards_and_fall_through():
    text = "\n".join(
        [
            "allreduce,0,1000,tree,ll,2,1,-1",
            "allreduce,0,1000,nvls,simple,3,-1,8",
            "allreduce,0,1000,ring,ll128,4,-1,-1",
            "allreduce,1001,2000,ring,simple,-1,-1,-1",
            "allreduce,2001,3000,ring,simple,0,-1,-1,2,1",
        ]
    )
    rules = parse_tuner_conf(text)
    assert lookup(rules, "all_reduce", 1000, 1, 8).channels == 2  # single node: first rule
    assert lookup(rules, "allreduce", 1000, 2, 8).channels == 3  # 8 ranks on 2 nodes
    assert lookup(rules, "allreduce", 1000, 2, 8, ignored=[("nvls", "simple")]).channels == 4
    assert lookup(rules, "allreduce", 1000, 2, 16).channels == 4
    assert lookup(rules, "allgather", 1000, 1, 8) is None
    assert lookup(rules, "allreduce", 2500, 1, 8) is None  # numPipeOps 1, regBuff 0
    assert lookup(rules, "allreduce", 2500, 1, 8, num_pipe_ops=2, reg_buff=1).channels == 0
    # NCCL's plugin: no rule or -1 -> 1 channel; 0 -> NCCL's own. RCCL's: both -> RCCL's own.
    assert effective_channels(None) == 1
    assert effective_channels(lookup(rules, "allreduce", 1500, 1, 8)) == 1
    assert (
        effective_channels(lookup(rules, "allreduce", 2500, 1, 8, num_pipe_ops=2, reg_buff=1))
        is None
    )
    assert effective_channels(None, "rccl") is None
    assert effective_channels(lookup(rules, "allreduce", 1500, 1, 8), "rccl") is None
    assert effective_channels(lookup(rules, "allreduce", 10, 1, 8), "rccl") == 2
    with pytest.raises(SpecError):
        lookup(rules, "all_to_all", 10, 1, 8)


def test_uncovered_finds_every_size_that_would_run_on_one_channel():
    text = "allreduce,100,199,ring,ll,4,-1,-1\nallreduce,150,300,ring,ll,-1,-1,-1\n"
    text += "allreduce,400,18446744073709551615,tree,ll,0,2,-1\n"
    rules = parse_tuner_conf(text)
    assert uncovered(rules, "allreduce", 2, 8) == [(0, 99), (200, 399)]
    assert uncovered(rules, "allreduce", 1, 8) == [(0, 99), (200, SIZE_MAX)]
    assert uncovered(rules, "allgather", 1, 8) == [(0, SIZE_MAX)]
    assert uncovered(rules, "allgather", 1, 8, backend="rccl") == []


def test_crlf_and_nothing_to_write():
    assert parse_tuner_conf(GOOD + "\r\n") == plugin_rules(GOOD + "\r\n")
    with pytest.raises(TunerConfUnavailable, match="no range"):
        render_tuner_conf([])
    with pytest.raises(TunerConfUnavailable, match="no range"):
        render_tuner_conf([_record("all_reduce", 0, BYTES_MAX, {}, 0.0)], backend="rccl")


def test_default_is_best_reproduced_with_the_pair_nccl_itself_used():
    def seen(size, *pairs, collective="all_reduce"):
        used = tuple(UsedChoice(algo, proto, 4, 8) for algo, proto in pairs)
        return ChoiceSummary(collective, size, False, used)

    default = [_record("all_reduce", 64 * KIB, 16 * MIB - 1, {}, 0.0)]
    choices = [seen(64 * KIB, ("nvls_tree", "simple")), seen(MIB, ("nvls_tree", "simple"))]
    text, _ = render_tuner_conf(default, baseline_choices=choices)
    assert "allreduce,0,18446744073709551615,nvls_tree,simple,0," in text
    assert "NCCL's own choice there: nvls_tree/simple" in text
    as_dicts = [summary.to_dict() for summary in choices]
    assert render_tuner_conf(default, baseline_choices=as_dicts)[0] == text
    # NCCL changed its pair inside the range: the range is cut where it did
    changed = [*choices, seen(4 * MIB, ("ring", "ll128"))]
    text, _ = render_tuner_conf(default, baseline_choices=changed)
    assert [rule.line() for rule in parse_tuner_conf(text)] == [
        "allreduce,0,4194303,nvls_tree,simple,0,-1,-1,-1,-1",
        "allreduce,4194304,18446744073709551615,ring,ll128,0,-1,-1,-1,-1",
    ]
    assert "nvls_tree/simple, ring/ll128 from 4 MiB" in text
    unusable = [
        [seen(MIB, ("nvls_tree", "simple"), ("ring", "simple"))],  # mixed at one size
        [seen(MIB, ("one_rank", None))],  # a path the plugin cannot name
        [seen(MIB, ("ring", "ll"), collective="all_gather")],  # another collective
        [seen(64 * MIB, ("ring", "ll"))],  # outside the range (measured ones only)
    ]
    for choices in unusable:
        with pytest.raises(TunerConfUnavailable, match="default is best"):
            render_tuner_conf(
                [*default, _record("all_reduce", 16 * MIB, BYTES_MAX, RING_LL128)],
                baseline_choices=choices,
            )
