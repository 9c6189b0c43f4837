"""What a row's values may be: each column's type and range check, compiled once per column,
and `Samples`, the packed form a row keeps its per-iteration samples in.

The method, in full: docs/run-directory.md#collbench-store-row-values-py.
"""

from __future__ import annotations

import array
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

Check = Callable[[Any], "str | None"]

# Items a JSON list of numbers holds: a set of these types is checked at C speed; any other
# item type (a float subclass, say) goes through the item-by-item check.
_NUMBER_TYPES = frozenset((int, float))


class Samples(array.array):
    """A row's per-iteration samples, packed as doubles: a sequence of floats that compares
    equal to a list (or tuple) of the same values, prints like one, and is written as one
    (ResultRow.to_dict). Treat it as read-only, like the row that holds it."""

    __slots__ = ()

    def __new__(cls, values: Any = ()) -> Samples:
        return super().__new__(cls, "d", values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, array.array)):
            return len(self) == len(other) and self.tolist() == list(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # like the list it stands for

    def __repr__(self) -> str:
        return repr(self.tolist())

    def __copy__(self) -> Samples:
        return Samples(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Samples:
        return Samples(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Samples, (self.tolist(),))


def pack_samples(value: Any) -> Any:
    """A list of numbers as Samples; anything else (None, a list that is not all numbers, an
    integer beyond a float) unchanged, for the checks to refuse."""
    if isinstance(value, list) and _all_numbers(value):
        try:
            return Samples(value)
        except (OverflowError, TypeError):
            return value
    return value


def as_plain(value: Any) -> Any:
    """A value as JSON holds it: Samples as a list, anything else as it is."""
    return value.tolist() if isinstance(value, Samples) else value


def type_check(annotation: str) -> Check | None:
    """The check of a column annotated `annotation` (None: any value fits). It is given a
    value that is not None and says why it does not fit (None: it fits)."""
    base = annotation.removesuffix(" | None")
    checks: dict[str, Check] = {
        "int": lambda value: None if _is_int(value) else "is not an integer",
        "float": lambda value: None if _is_number(value) else "is not a number",
        "str": lambda value: None if isinstance(value, str) else "is not a string",
        "list[float]": _list_of(_NUMBER_TYPES, _is_number, "numbers"),
        "list[int]": _list_of({int}, _is_int, "integers"),
        "list[str]": _list_of({str}, lambda item: isinstance(item, str), "strings"),
        "list[dict[str, Any]]": _list_of({dict}, lambda item: isinstance(item, Mapping), "objects"),
    }
    if base.startswith("dict["):
        return lambda value: None if isinstance(value, Mapping) else "is not a JSON object"
    return checks.get(base)


def short(value: Any) -> Any:
    """A value as an error line shows it: long containers and strings cut short."""
    text = value if isinstance(value, str) else repr(value)
    return value if len(text) <= 40 else text[:37] + "..."


def _list_of(types: Collection[type], fits: Callable[[Any], bool], what: str) -> Check:
    """The check of a JSON list whose items are all `fits` (packed Samples are numbers): the
    set of the items' types at C speed, item by item only for other types (subclasses)."""
    exact = frozenset(types)

    def check(value: Any) -> str | None:
        ok = isinstance(value, Samples) or (
            isinstance(value, list)
            and (exact.issuperset(map(type, value)) or all(map(fits, value)))
        )
        return None if ok else f"is not a list of {what}"

    return check


def _all_numbers(items: list[Any]) -> bool:
    # The set of the items' types at C speed; item by item only for other types (subclasses).
    return _NUMBER_TYPES.issuperset(map(type, items)) or all(_is_number(item) for item in items)


def float_range(value: Any, positive: bool, non_negative: bool) -> str | None:
    if not _finite(value):
        return "is not finite (NaN or infinite)"
    if positive and not value > 0:
        return "must be more than 0"
    return "must not be negative" if non_negative and not value >= 0 else None


def floats_range(value: Any, non_negative: bool) -> str | None:
    if not value:
        return None
    if not isinstance(value, Samples):  # an integer beyond a float could not be packed
        value = pack_samples(value)
        if not isinstance(value, Samples):
            return "is not finite (NaN or infinite)"
    if len(value) >= _NUMPY_FROM:
        return _floats_problem_numpy(value, non_negative)
    # A finite sum means every value is finite (a NaN or an infinity never sums to a finite
    # number); only an overflowing sum needs the value-by-value look.
    if not math.isfinite(sum(value)) and not all(map(math.isfinite, value)):
        return "is not finite (NaN or infinite)"
    return "must not be negative" if non_negative and min(value) < 0 else None


# From this many samples numpy's fixed cost (~5 us) beats a Python pass. The launcher's watch
# loop imports numpy before it arms its signal handlers (launchers/supervise.py): a Ctrl-C
# that lands inside numpy's first import leaves numpy unimportable for the rest of the process.
_NUMPY_FROM = 128


def _floats_problem_numpy(value: Samples, non_negative: bool) -> str | None:
    import numpy as np

    packed = np.frombuffer(value, dtype=np.float64)
    if not np.isfinite(packed).all():
        return "is not finite (NaN or infinite)"
    return "must not be negative" if non_negative and not (packed >= 0).all() else None


def _finite(value: float) -> bool:
    """Whether a JSON number is finite as a float (an integer beyond a float's range is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
