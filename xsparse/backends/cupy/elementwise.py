"""Native elementwise kernels of the CuPy backend: ``erf`` and ``erfinv``, which the Array API lacks.

They run ``cupyx.scipy.special``'s ufuncs in the dtype that the NumPy backend's SciPy kernels give for the
operand (float32 for float32, float64 for most others; ``erfinv`` of small integers, bool and float16 in
float32), so that moving a program between the CPU and the GPU keeps its dtypes: CuPy's own loops would
give float16 operands of ``erfinv`` and int16 operands of ``erf`` another dtype than SciPy's. Both copy
their argument's sign onto the result, as SciPy's do (``erf(-0.0) = erfinv(-0.0) = -0.0``; cupyx's
``erf`` gave ``+0.0``).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ...dispatch import register
from ...formats import strided
from . import conversion

__all__: list[str] = []

# (function, operand dtype) -> SciPy's result dtype, found once per pair by a call on an empty array
_RESULT_DTYPES: dict[tuple[str, str], np.dtype[Any]] = {}
_RESULT_LOCK = threading.Lock()


def scipy_result_dtype(name: str, dtype: Any) -> np.dtype[Any]:
    """The dtype of ``scipy.special.<name>`` of an operand of ``dtype`` (a NumPy or CuPy dtype)."""
    key = (name, np.dtype(dtype).str)
    found = _RESULT_DTYPES.get(key)
    if found is None:
        from scipy import special

        found = np.dtype(getattr(special, name)(np.zeros(1, dtype=np.dtype(dtype))).dtype)
        with _RESULT_LOCK:
            _RESULT_DTYPES[key] = found
    return found


@register("erf", (strided,), backend="cupy")
def _erf_strided_cupy(xp: Any, x: Any) -> Any:
    """erf(strided) through cupyx.scipy.special.erf, in SciPy's result dtype, the sign copied; O(numel)."""
    from cupyx.scipy import special

    cp = conversion.cupy_module()
    y = x.astype(scipy_result_dtype("erf", x.dtype), copy=False)
    # erf is odd, so the sign is the argument's everywhere but at NaN (SciPy's erf(-nan) is +nan); cupyx's
    # erf gave +0.0 for -0.0 (an H200, a float16 operand computed in float64 as SciPy's dtype rule says)
    r = special.erf(y)
    return cp.where(cp.isnan(r), r, cp.copysign(r, y))


@register("erfinv", (strided,), backend="cupy")
def _erfinv_strided_cupy(xp: Any, x: Any) -> Any:
    """erfinv(strided) through cupyx.scipy.special.erfinv, in SciPy's result dtype, the sign copied; O(numel)."""
    from cupyx.scipy import special

    y = x.astype(scipy_result_dtype("erfinv", x.dtype), copy=False)
    return conversion.cupy_module().copysign(special.erfinv(y), y)
