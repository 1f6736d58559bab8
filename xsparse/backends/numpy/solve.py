"""Native sparse solver of the NumPy backend: SciPy's SuperLU (``spsolve``).

The NumPy backend's products live in ``linalg``; this module holds its direct solver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dispatch import register
from ...formats import INDEXED, SparseArray, strided
from .._superlu import factorize

__all__: list[str] = []


def _supports_spsolve(xp: Any, a: SparseArray, b: Any) -> str | None:
    if a.fill_value != 0:
        return f"SuperLU reads the unspecified elements as 0, and the fill value is {a.fill_value!r}"
    if a.dense_dim():
        return "a system matrix has no dense dimensions"
    return None


@register("spsolve", (INDEXED, strided), backend="numpy", supports=_supports_spsolve)
def _spsolve_indexed_strided_numpy(xp: Any, a: SparseArray, b: Any) -> Any:
    """spsolve(sparse, strided) -> strided: SciPy's SuperLU, CSR/CSC read in place; O(fill-in)."""
    dtype = np.result_type(a.dtype, b.dtype)
    if a.shape[0] == 0:
        return np.zeros(b.shape, dtype=dtype)
    return factorize("spsolve", a, dtype).solve(np.asarray(b, dtype=dtype))
