"""analysis.imports.row_build.make_rows: the same rows as the constructor, the same refusals."""

from __future__ import annotations

import pytest

from collbench.analysis.imports.row_build import make_rows
from collbench.store.rows import ResultRow

SHARED = dict(
    run_id="r",
    timestamp_utc="t",
    collective="all_reduce",
    backend="nccl",
    world_size=16,
    nodes=2,
    ranks_per_node=8,
    warmup=5,
    iters=20,
    time_us_p50=None,
    time_us_p95=None,
    time_us_min=None,
    time_us_max=None,
    time_cv=None,
    topology=None,
    knobs={"env": {}, "settings": {"imported": True}},
)
NAMES = ("dtype", "op", "root", "size_bytes", "count", "placement", "time_us", "algbw_gbps")
NAMES += ("busbw_gbps", "n_wrong", "time_us_samples")


def _values(size: int) -> tuple:
    return ("float32", "sum", -1, size, size // 4, "in_place", 1.5, 2.0, 3.75, 0, [])


def test_rows_equal_the_constructors_in_field_order() -> None:
    made = make_rows(ResultRow, SHARED, NAMES, [_values(4), _values(8)])
    built = [ResultRow(**SHARED, **dict(zip(NAMES, _values(s), strict=True))) for s in (4, 8)]
    assert made == built
    assert [row.to_dict() for row in made] == [row.to_dict() for row in built]
    assert [list(row.to_dict()) for row in made] == [list(row.to_dict()) for row in built]
    assert made[0].kind == "sweep" and made[0].repeat is None  # the defaults


def test_missing_unknown_or_repeated_names_are_refused() -> None:
    with pytest.raises(TypeError, match="missing"):
        make_rows(ResultRow, SHARED, NAMES[:-1], [_values(4)[:-1]])
    with pytest.raises(TypeError, match="unknown"):
        make_rows(ResultRow, SHARED, (*NAMES, "bogus"), [(*_values(4), 1)])
    with pytest.raises(TypeError, match="twice"):
        make_rows(ResultRow, SHARED, (*NAMES, "run_id"), [(*_values(4), "x")])
    with pytest.raises(ValueError):
        make_rows(ResultRow, SHARED, NAMES, [_values(4)[:-1]])
