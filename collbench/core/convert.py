"""Typed values (dataclasses of builtins) to JSON's builtins and back through msgspec: the
one serialisation library (benchmarks/serialise.py: the lightest import of msgspec, cattrs
and pydantic, and the fastest conversion). A value of the wrong shape is one SpecError line
naming the file and the field."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import msgspec

from collbench.core.errors import SpecError

T = TypeVar("T")


def plain(value: Any) -> Any:
    """`value` as json.loads would give it back: lists, string keys, null for a float that is
    not finite, a numpy scalar as its Python value (anything else msgspec does not know as
    its str, as write_json_atomic writes it)."""
    return msgspec.json.decode(msgspec.json.encode(value, enc_hook=_item))


def to_builtins(value: Any) -> Any:
    """plain(value) of a dataclass, with a float wherever its type says float (an int too)."""
    return plain(msgspec.convert(msgspec.to_builtins(value, enc_hook=_item), type(value)))


def convert(data: Any, kind: type[T], name: str, where: str) -> T:
    """`data` (JSON's builtins) as `kind`; SpecError naming the file `name` at `where` and the
    field for one of the wrong shape."""
    try:
        return _filled(msgspec.convert(data, kind, strict=False))
    except msgspec.ValidationError as error:
        raise SpecError(name, where, f"has a value of the wrong type ({error})") from None


def _filled(value: Any) -> Any:
    """`value` with every dataclass field set: msgspec leaves a field the data did not give
    to its class default, absent from the instance, so it would never be encoded again."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        given = {
            item.name: _filled(getattr(value, item.name)) for item in dataclasses.fields(value)
        }
        return dataclasses.replace(value, **given)
    return tuple(_filled(item) for item in value) if isinstance(value, tuple) else value


def _item(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)
