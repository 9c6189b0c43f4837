import pytest

from collbench.core.collectives import REGISTRY
from collbench.core.errors import SpecError
from collbench.core.spec import (
    DEFAULT_MAX_BYTES,
    MAX_STEPS,
    Step,
    SweepSpec,
    iter_sizes,
    size_count,
)
from collbench.core.units import counted, format_size, parse_size


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8", 8),
        ("0", 0),
        ("4K", 4096),
        ("4k", 4096),
        ("1M", 1024**2),
        ("2G", 2 * 1024**3),
        ("1T", 1024**4),
        ("1.5K", 1536),
        ("16MiB", 16 * 1024**2),
        ("64MB", 64 * 1024**2),
        (" 8 ", 8),
        (128, 128),
    ],
)
def test_parse_size_accepts_nccl_tests_suffixes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["12Q", "", "K", "-1", "1.3", "1e6", "4 K B", "0x10"])
def test_parse_size_rejects_with_field_name(text):
    with pytest.raises(SpecError) as error:
        parse_size(text, "--min-bytes")
    assert str(error.value).startswith("--min-bytes:")


def test_size_series_factor_and_step():
    assert list(iter_sizes(8, 64, 2.0, None)) == [8, 16, 32, 64]
    assert list(iter_sizes(8, 100, None, None)) == [8, 16, 32, 64]
    assert list(iter_sizes(1024, 4096, None, 1024)) == [1024, 2048, 3072, 4096]
    assert list(iter_sizes(0, 4, 2.0, None)) == [0, 1, 2, 4]
    assert list(iter_sizes(1, 1000, 10.0, None)) == [1, 10, 100, 1000]


def test_size_count_matches_the_series_and_is_bounded():
    for args in ((8, 64, 2.0, None), (0, 4, 2.0, None), (1024, 4096, None, 1024), (9, 8, 2, None)):
        assert size_count(*args) == (len(list(iter_sizes(*args))), True)
    assert size_count(1, 16 * 1024**2, None, 1) == (16 * 1024**2, True)
    count, exact = size_count(8, 16 * 1024**2, 1.0000001, None)  # counted, never built
    assert not exact and count > MAX_STEPS


@pytest.mark.timeout(5)
@pytest.mark.parametrize(
    "kwargs, field, count",
    [
        (
            {"step_bytes": 1, "min_bytes": 1, "max_bytes": 16 * 1024**2},
            "--step-bytes",
            "16,777,216",
        ),
        ({"factor": 1.0000001, "max_bytes": 16 * 1024**2}, "--factor", "about "),
    ],
)
def test_spec_refuses_a_sweep_of_too_many_sizes(kwargs, field, count):
    with pytest.raises(SpecError) as error:
        SweepSpec(**kwargs)
    assert str(error.value).startswith(f"{field}:") and count in str(error.value)
    assert f"at most {MAX_STEPS:,}" in str(error.value)
    SweepSpec(step_bytes=4096, max_bytes=4096 * (MAX_STEPS - 1))  # the cap itself is fine


def test_format_size():
    assert format_size(8) == "8 B"
    assert format_size(4096) == "4 KiB"
    assert format_size(3 * 1024**2 // 2) == "1.5 MiB"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"collectives": ("all_reduce", "nope")}, "--collective"),
        ({"collectives": ()}, "--collective"),
        ({"dtype": "complex64"}, "--dtype"),
        ({"op": "xor"}, "--op"),
        ({"op": "avg", "dtype": "int32"}, "--op"),
        ({"placement": "sideways"}, "--placement"),
        ({"placement": "out_of_place", "collectives": ("all_reduce",)}, "--placement"),
        ({"placement": "in_place", "collectives": ("sendrecv",)}, "--placement"),
        ({"rank_stat": "median"}, "--rank-stat"),
        ({"backend": "mpi"}, "--backend"),
        ({"factor": 1.0}, "--factor"),
        ({"factor": 0.5}, "--factor"),
        ({"factor": float("nan")}, "--factor"),
        ({"factor": 2.0, "step_bytes": 8}, "--factor"),
        ({"step_bytes": 0}, "--step-bytes"),
        ({"min_bytes": 1024, "max_bytes": 8}, "--min-bytes"),
        ({"warmup": -1}, "--warmup"),
        ({"iters": 0}, "--iters"),
        ({"timeout_s": 0}, "--timeout"),
    ],
)
def test_spec_rejects_bad_fields_naming_them(kwargs, field):
    with pytest.raises(SpecError) as error:
        SweepSpec(**kwargs)
    assert error.value.field == field
    assert "\n" not in str(error.value)


def test_spec_defaults_and_backend_resolution():
    spec = SweepSpec()
    assert spec.collectives == ("all_reduce", "all_gather", "reduce_scatter")
    assert (spec.warmup, spec.iters, spec.rank_stat, spec.check) == (5, 20, "avg", True)
    resolved = spec.with_backend("gloo")
    assert resolved.max_bytes == DEFAULT_MAX_BYTES["gloo"]
    assert resolved.sizes()[0] == 8 and resolved.sizes()[-1] == DEFAULT_MAX_BYTES["gloo"]
    assert SweepSpec(max_bytes=64).with_backend("nccl").max_bytes == 64
    with pytest.raises(SpecError):
        SweepSpec(min_bytes=2 * 1024**3).with_backend("gloo")


def test_dtype_aliases_resolve_to_canonical_names():
    assert SweepSpec(dtype="half").dtype == "float16"
    assert SweepSpec(dtype="float").dtype == "float32"
    assert SweepSpec(dtype="BF16").dtype == "bfloat16"


def test_steps_cover_collectives_sizes_and_supported_placements():
    spec = SweepSpec(
        collectives=("all_reduce", "all_gather"), max_bytes=32, repeats=1
    ).with_backend("gloo")
    steps = spec.steps()
    assert [s for s in steps if s.collective == "all_reduce"] == [
        Step("sweep", "all_reduce", size, "in_place", dtype="float32", op="sum")
        for size in (8, 16, 32)
    ]
    assert len([s for s in steps if s.collective == "all_gather"]) == 6
    assert SweepSpec.from_dict(spec.to_dict()) == spec


def test_collective_all_is_every_collective_as_dtype_all_is_every_dtype():
    assert SweepSpec(collectives=("all",)).collectives == tuple(REGISTRY)
    assert SweepSpec(collectives=("ALL",)).collectives == tuple(REGISTRY)


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("allreduce", "all_reduce"),
        ("all-gather", "all_gather"),
        ("reduce_scater", "reduce_scatter"),
    ],
)
def test_an_unknown_collective_names_the_one_meant(typo, meant):
    with pytest.raises(SpecError, match=rf"\(did you mean {meant}\?\); choose from .* or all"):
        SweepSpec(collectives=(typo,))


def test_counts_say_their_noun_in_the_singular_for_one():
    assert [counted(n, "node") for n in (0, 1, 2)] == ["0 nodes", "1 node", "2 nodes"]


def test_a_flag_given_is_named_without_its_value():
    assert str(SpecError("--cuda-graph", True, "needs a GPU")) == "--cuda-graph needs a GPU"
    assert str(SpecError("nodes", True, "must be an integer")) == "nodes: True must be an integer"


def test_a_collective_named_twice_is_refused_as_a_dtype_is():
    with pytest.raises(SpecError, match="names a collective twice"):
        SweepSpec(collectives=("all_reduce", "all_reduce"))
