"""torch's element types for collbench's dtype names (the rank layer is torch's only home)."""

from __future__ import annotations

from typing import Any

from collbench.core.dtypes import DType


def torch_dtype(dtype: DType) -> Any:
    import torch

    return getattr(torch, dtype.name)
