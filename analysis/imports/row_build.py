"""Building many rows of one frozen dataclass at once, as its constructor would.

A frozen dataclass's __init__ sets each field through object.__setattr__: for the 32
columns of a ResultRow that was 0.7 s of a 100k-row import. `make_rows` builds the same
objects from one tuple per row: the values the rows share, the defaults, then the row's own,
laid out in field order (ResultRow.to_dict relies on that order). Rules:
- every field is given (by `shared`, by the row, or by its default), and no other name:
  TypeError otherwise, as the constructor raises;
- each row gives its values for the same `names`, in that order (a count that differs is a
  ValueError);
- no __post_init__ is run: the classes built here must not define one (checked).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, fields
from typing import Any, TypeVar

T = TypeVar("T")


@functools.cache
def _layout(cls: type) -> tuple[tuple[str, ...], dict[str, Any], frozenset[str]]:
    """Field names in order, the plain defaults, and the names that need a value."""
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__: build it with its constructor")
    names = tuple(column.name for column in fields(cls))
    defaults = {c.name: c.default for c in fields(cls) if c.default is not MISSING}
    if any(c.default_factory is not MISSING for c in fields(cls)):
        raise TypeError(f"{cls.__name__} has a default_factory: build it with its constructor")
    return names, defaults, frozenset(names)


def make_rows(
    cls: type[T],
    shared: Mapping[str, Any],
    names: Sequence[str],
    own: Iterable[Sequence[Any]],
) -> list[T]:
    """[cls(**shared, **dict(zip(names, values))) for values in own], without calling
    cls.__init__ per row; a row with more or fewer values than `names` is a ValueError."""
    columns, defaults, known = _layout(cls)
    _check_names(cls, known, defaults, shared, names)
    base = {**defaults, **shared}
    template = {name: base.get(name) for name in columns}
    new, rows = object.__new__, []
    for values in own:
        row_values = template.copy()
        row_values.update(zip(names, values, strict=True))  # keys in template: order stays
        row = new(cls)
        row.__dict__.update(row_values)
        rows.append(row)
    return rows


def _check_names(
    cls: type, known: frozenset[str], defaults: Mapping[str, Any], shared: Any, own: Any
) -> None:
    given = set(defaults) | set(shared) | set(own)
    unknown, missing = given - known, known - given
    twice = set(shared) & set(own)
    if unknown or missing or twice:
        raise TypeError(
            f"{cls.__name__}: unknown {sorted(unknown)}, missing {sorted(missing)}, "
            f"given twice {sorted(twice)}"
        )
