"""Native elementwise kernels of the NumPy backend: the functions the Array API lacks, from SciPy."""

from __future__ import annotations

from typing import Any

from ...dispatch import register
from ...formats import strided

__all__: list[str] = []


@register("erf", (strided,), backend="numpy")
def _erf_strided_numpy(xp: Any, x: Any) -> Any:
    """erf(strided) through scipy.special.erf; O(numel)."""
    from scipy import special

    return special.erf(x)


@register("erfinv", (strided,), backend="numpy")
def _erfinv_strided_numpy(xp: Any, x: Any) -> Any:
    """erfinv(strided) through scipy.special.erfinv; O(numel)."""
    from scipy import special

    return special.erfinv(x)
