"""Sparse formats: layouts, format classes, invariants. No kernels that call a backend library."""

from __future__ import annotations

from ._base import SparseArray
from ._compressed import CompressedArray
from ._coo import COOArray
from ._invariants import check_sparse_tensor_invariants
from ._layout import (
    ANY,
    ANY_SPARSE,
    BLOCKED,
    COMPRESSED,
    INDEXED,
    Layout,
    LayoutFamily,
    sparse_bsc,
    sparse_bsr,
    sparse_coo,
    sparse_csc,
    sparse_csr,
    sparse_semi_structured,
    strided,
)

__all__ = [
    "SparseArray",
    "COOArray",
    "CompressedArray",
    "check_sparse_tensor_invariants",
    "Layout",
    "LayoutFamily",
    "ANY",
    "ANY_SPARSE",
    "BLOCKED",
    "COMPRESSED",
    "INDEXED",
    "strided",
    "sparse_coo",
    "sparse_csr",
    "sparse_csc",
    "sparse_bsr",
    "sparse_bsc",
    "sparse_semi_structured",
]
