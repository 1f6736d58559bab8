"""SciPy's SuperLU on an xsparse array whose components NumPy can read (the NumPy backend's, or a CPU
torch tensor's shared through DLPack): the direct solver behind the NumPy and torch ``spsolve`` kernels.

CSR and CSC components are read in place: a CSR matrix's arrays are those of the CSC matrix of its
transpose, so SuperLU factorizes ``A.T`` and solves with ``trans='T'``. COO, BSR and BSC go through
SciPy's own conversion to CSC (one copy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..formats import COOArray, CompressedArray, SparseArray

__all__ = ["Factorization", "factorize"]


class Factorization:
    """The SuperLU factors of ``A`` (or of ``A.T``, with ``transposed``), and solves with ``A`` and ``A^H``."""

    def __init__(self, lu: Any, transposed: bool) -> None:
        self.lu = lu
        self.transposed = transposed

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``A^-1 rhs``."""
        return np.asarray(self.lu.solve(rhs, trans="T" if self.transposed else "N"))

    def solve_adjoint(self, rhs: np.ndarray) -> np.ndarray:
        """``A^-H rhs`` (``A^-T rhs`` for a real ``A``)."""
        if not self.transposed:
            return np.asarray(self.lu.solve(rhs, trans="H"))
        # factors of C = A.T: A^H y = g  <=>  C conj(y) = conj(g)
        return np.asarray(np.conj(self.lu.solve(np.conj(rhs), trans="N")))


def _matrix(a: SparseArray, dtype: np.dtype) -> tuple[Any, bool]:
    from scipy import sparse

    shape = tuple(a.shape)
    if isinstance(a, COOArray):
        idx = np.asarray(a._idx)
        return sparse.coo_array((np.asarray(a._vals, dtype=dtype), (idx[0], idx[1])), shape=shape).tocsc(), False
    assert isinstance(a, CompressedArray)
    if a.layout.compressed_dim == 1 and a.layout.is_blocked:
        a = a.transpose_sparse()  # BSC -> the BSR of A.T (blocks transposed)
        transposed = True
    else:
        transposed = a.layout.compressed_dim == 0 and not a.layout.is_blocked
    comp, plain = np.asarray(a._compressed), np.asarray(a._plain)
    values = np.ascontiguousarray(np.asarray(a._vals, dtype=dtype))
    if a.layout.is_blocked:
        return sparse.bsr_array((values, plain, comp), shape=tuple(a.shape)).tocsc(), transposed
    # CSR: its arrays are the CSC arrays of A.T; CSC: A itself
    matrix = sparse.csc_array((values, plain, comp), shape=shape[::-1] if transposed else shape)
    if not matrix.has_canonical_format:
        # SuperLU sorts and sums the indices in place: never in the array's (immutable, perhaps the user's) memory
        matrix = sparse.csc_array((values.copy(), plain.copy(), comp.copy()), shape=matrix.shape)
    return matrix, transposed


def factorize(op: str, a: SparseArray, dtype: Any) -> Factorization:
    """SuperLU of the square 2-D ``a`` (fill value 0, no dense dimensions) with values in ``dtype``.

    Raises ValueError for a singular matrix.
    """
    from scipy.sparse.linalg import splu

    from ..formats._invariants import verified

    # SuperLU reads the indices unchecked (an int64 index past int32 is truncated to another column): an
    # array built without the index checks is checked first, once
    if getattr(a, "_bounds_checked", True) is False:
        verified(a)
    matrix, transposed = _matrix(a, np.dtype(dtype))
    try:
        lu = splu(matrix)
    except RuntimeError as exc:  # SuperLU's "Factor is exactly singular"
        raise ValueError(
            f"{op}: the matrix is singular (shape={tuple(a.shape)}, nnz={a.nnz}; SuperLU: {exc}). Pass a non-singular "
            "system, or solve a least-squares problem instead."
        ) from None
    return Factorization(lu, transposed)
