"""Native elementwise kernels of the torch backend: the functions the Array API lacks, from torch.special."""

from __future__ import annotations

from typing import Any, cast

import torch

from ...dispatch import register
from ...formats import strided

__all__: list[str] = []


@register("erf", (strided,), backend="torch")
def _erf_strided_torch(xp: Any, x: torch.Tensor) -> torch.Tensor:
    """erf(strided) through torch.special.erf; O(numel)."""
    return cast(torch.Tensor, torch.special.erf(x))


@register("erfinv", (strided,), backend="torch")
def _erfinv_strided_torch(xp: Any, x: torch.Tensor) -> torch.Tensor:
    """erfinv(strided) through torch.special.erfinv; O(numel)."""
    return cast(torch.Tensor, torch.special.erfinv(x))
