"""Element types by name, without importing torch (the CLI validates before ranks start)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """One element type: its collbench name, nccl-tests' name, and size."""

    name: str
    nccl_name: str
    elem_bytes: int
    is_float: bool
    # Largest M such that every integer in [0, M] is exact in this type (floats) or
    # representable (integers): bounds the data-check patterns so results stay exact.
    exact_limit: int


DTYPES: dict[str, DType] = {
    dtype.name: dtype
    for dtype in (
        DType("float32", "float", 4, True, 2**24),
        DType("float16", "half", 2, True, 2**11),
        DType("bfloat16", "bfloat16", 2, True, 2**8),
        DType("float64", "double", 8, True, 2**53),
        DType("int8", "int8", 1, False, 2**7 - 1),
        DType("uint8", "uint8", 1, False, 2**8 - 1),
        DType("int32", "int32", 4, False, 2**31 - 1),
        DType("int64", "int64", 8, False, 2**63 - 1),
    )
}

ALIASES: dict[str, str] = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp32": "float32",
    "fp64": "float64",
    "int": "int32",
    "char": "int8",
    "long": "int64",
}


def lookup_dtype(name: str) -> DType | None:
    """The DType for a name or nccl-tests alias, or None if unknown."""
    key = name.strip().lower()
    return DTYPES.get(ALIASES.get(key, key))
