"""Native indexing kernels of the NumPy backend: SciPy's compiled slicing of CSR and CSC matrices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._index_key import Item, Slice
from ...dispatch import register
from ...formats import CompressedArray, sparse_csc, sparse_csr

__all__: list[str] = []

_UNBLOCKED = frozenset({sparse_csr, sparse_csc})
_SCIPY_DTYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "complex64", "complex128"}
)


def _python_slice(s: Slice) -> slice:
    # the progression's last element plus one step, or None where that would be -1 (read as "the end")
    stop = s.start + s.step * s.length if s.length else s.start
    return slice(s.start, stop if stop >= 0 else None, s.step)


def _supports_getitem(xp: Any, a: CompressedArray, items: Sequence[Item]) -> str | None:
    if a.batch_dim() or a.dense_dim():
        return "SciPy slices only 2-D CSR and CSC arrays, without batch or dense dimensions"
    if len(items) != 2 or not all(isinstance(it, Slice) for it in items):
        return "SciPy's kernel serves slices of both sparse dimensions only"
    if np.dtype(a.dtype).name not in _SCIPY_DTYPES:
        return f"SciPy's sparse matrices do not hold dtype {np.dtype(a.dtype).name}"
    return None


@register("getitem", (_UNBLOCKED,), backend="numpy", supports=_supports_getitem)
def _getitem_unblocked_numpy(xp: Any, a: CompressedArray, items: Sequence[Item]) -> CompressedArray:
    """x[rows, cols] of a 2-D CSR/CSC with slices of any step: SciPy's compiled slicing; O(nnz of the slices)."""
    from scipy import sparse

    make = sparse.csr_array if a.layout is sparse_csr else sparse.csc_array
    m = make((a._vals, a._plain, a._compressed), shape=a.shape)
    rows, cols = (_python_slice(s) for s in items if isinstance(s, Slice))
    r = make(m[rows, cols])
    if not r.has_sorted_indices:
        r = r.copy()
        r.sort_indices()
    idt = a.index_dtype
    return CompressedArray(
        np.ascontiguousarray(r.indptr, dtype=idt), np.ascontiguousarray(r.indices, dtype=idt),
        np.ascontiguousarray(r.data, dtype=a.dtype), tuple(int(s) for s in r.shape), layout=a.layout,
        backend=a._backend, xp=xp, fill_value=a.fill_value, check=False,
    )  # fmt: skip
