"""The Array API's linear-algebra extension (``xs.linalg``), for strided and sparse arrays.

Strided arrays go to the backend's own ``linalg`` namespace. Sparse arrays:

- **computed sparsely** (dispatched to kernels; ``xs.kernels("diagonal")``): ``matmul``, ``tensordot``,
  ``vecdot``, ``matrix_transpose``, ``outer`` (products; see ``docs/linalg.md`` for their layouts; the
  outer product of two sparse vectors is a COO array), ``diagonal`` (a COO array), ``trace`` (a sum of the
  diagonal), ``cross`` (products of components), ``vector_norm`` (every ``ord``) and ``matrix_norm``
  (``'fro'``, ``1``, ``-1``, ``inf``, ``-inf``), the reductions counting every unspecified element as the
  fill value; ``matrix_power`` with ``n >= 0`` (repeated sparse products; ``n = 0`` is a sparse
  identity); ``solve`` of a 2-D sparse system (:func:`xsparse.spsolve`, a sparse LU);
- **computed on the dense matrix, strided results**: ``cholesky``, ``det``, ``eigh``, ``eigvalsh``, ``inv``,
  ``matrix_rank``, ``pinv``, ``qr``, ``slogdet``, ``svd``, ``svdvals``, ``matrix_norm`` with ``ord``
  ``'nuc'``, ``2`` or ``-2``, ``matrix_power`` with ``n < 0``, and ``solve`` of a batch (or of a system
  that is no sparse matrix, such as a hybrid array). Their results are strided by definition
  (determinants, singular values, dense factors and inverses), which DESIGN section 3 does not count as
  densification: the backend's dense routine runs on :func:`xsparse.to_dense` of the operand, whose size
  is that of the matrices the routine returns. :func:`xsparse.svd_lowrank`, :func:`xsparse.lobpcg` and
  :func:`xsparse.spsolve` are the sparse methods that never form the dense matrix.

Not in the standard: SciPy's Krylov solvers ``cg``, ``bicgstab`` and ``gmres``, on every backend, with
the system matrix entering through products only.
"""

from __future__ import annotations

import builtins
import numbers
from typing import Any, NamedTuple

import numpy as np

from . import dispatch
from ._common import backend_of, flag_argument, integer_argument, is_strided
from ._conversion import matrix_transpose
from ._elementwise import convert_result
from ._errors import NoKernelError
from ._indexing import astype
from ._iterative import bicgstab, cg, gmres
from ._linalg import _as_dtype, _broadcast, check_promotion, kron, matmul, tensordot, vecdot, working_dtype
from ._sorting import array_operand
from .backends import Backend
from .backends.array_api.reduction import as_array
from .backends.array_api import linalg_ext as _generic_linalg_ext  # noqa: F401  (registers the generic kernels)
from .formats import CompressedArray, Layout, SparseArray
from .formats._invariants import dtype_name, is_half_precision

__all__ = [
    "bicgstab",
    "cg",
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "gmres",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "trace",
    "vecdot",
    "vector_norm",
]

_INF = float("inf")
_FLOATING = ("real floating", "complex floating")


def _matrix(op: str, x: Any) -> tuple[Backend, Any]:
    backend, xp = array_operand(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: x must have at least 2 dimensions (x.shape={tuple(x.shape)}). Pass a matrix or a stack of them.")
    return backend, xp


def _dense(x: Any) -> Any:
    """``x`` as a strided array: the dense matrix a dense routine runs on (the result is strided by
    definition, see the module docstring)."""
    from ._conversion import to_dense

    return to_dense(x) if isinstance(x, SparseArray) else x


def _as_array(xp: Any, result: Any) -> Any:
    """``result`` with a NumPy scalar (what NumPy returns for a 0-d result) made a 0-d array: the
    standard's functions return arrays."""
    if isinstance(result, tuple):
        return type(result)(*(_as_array(xp, r) for r in result)) if hasattr(result, "_fields") else tuple(_as_array(xp, r) for r in result)
    return as_array(xp, result)


class EighResult(NamedTuple):
    """The result of :func:`eigh`."""

    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    """The result of :func:`qr`."""

    Q: Any
    R: Any


class SlogdetResult(NamedTuple):
    """The result of :func:`slogdet`."""

    sign: Any
    logabsdet: Any


class SVDResult(NamedTuple):
    """The result of :func:`svd`."""

    U: Any
    S: Any
    Vh: Any


# The standard's named tuples: torch's linalg returns its own structseq types, which are no namedtuples.
_RESULTS: dict[str, type[tuple[Any, ...]]] = {"eigh": EighResult, "qr": QRResult, "slogdet": SlogdetResult, "svd": SVDResult}


# the routines defined for square matrices only: the backends' own errors for others differ, and JAX's
# cholesky and eigh of a 3 x 4 matrix fail on a broadcast inside
_SQUARE = frozenset({"cholesky", "det", "eigh", "eigvalsh", "inv", "slogdet"})


def _square(op: str, x: Any) -> None:
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{op}: the matrices must be square (x.shape={tuple(x.shape)}). Pass square matrices.")


def _widened(xp: Any, x: Any) -> Any:
    """The dense ``x``, float16 and bfloat16 made float32: no backend's dense factorizations take them
    ("Half precision" in docs/decisions.md)."""
    d = _dense(x)
    dtype = working_dtype(xp, d.dtype)
    return d if dtype == d.dtype else xp.astype(d, dtype)


def _rtol(op: str, x: Any, rtol: Any) -> Any:
    """``rtol`` of pinv and matrix_rank: None, a real number, or an array that broadcasts against the
    batch shape ``x.shape[:-2]`` (a sparse one is read densely, the size of the result)."""
    if rtol is None:
        return None
    if isinstance(rtol, numbers.Real) and not isinstance(rtol, bool):
        return float(rtol)
    if not isinstance(rtol, SparseArray) and not is_strided(rtol, op):
        raise TypeError(f"{op}: rtol must be None, a real number or an array, got {type(rtol).__name__} (rtol={rtol!r}). Pass e.g. rtol=1e-8.")
    batch, shape = tuple(x.shape[:-2]), tuple(rtol.shape)
    if len(shape) > len(batch) or not all(r in (1, b) for r, b in zip(shape[::-1], batch[::-1])):
        raise ValueError(
            f"{op}: rtol must broadcast against the batch shape of x (rtol.shape={shape}, x.shape={tuple(x.shape)}). "
            "Pass one tolerance per matrix, or a scalar."
        )
    return _dense(rtol)


def _factorization(op: str, x: Any, *args: Any, **kwargs: Any) -> Any:
    _, xp = _matrix(op, x)
    _floating(op, xp, x)
    if op in _SQUARE:
        _square(op, x)
    if "rtol" in kwargs:
        kwargs["rtol"] = _rtol(op, x, kwargs["rtol"])
    if op == "matrix_rank" and 0 in tuple(x.shape[-2:]):
        # a matrix without rows or columns has rank 0 (NumPy's matrix_rank raises on its empty singular values)
        return xp.zeros(tuple(x.shape[:-2]), dtype=xp.int64, device=getattr(x, "device", None))
    result = _as_array(xp, getattr(xp.linalg, op)(_widened(xp, x), *args, **kwargs))
    return _RESULTS[op](*result) if op in _RESULTS else result


def cholesky(x: Any, /, *, upper: bool = False) -> Any:
    """The Cholesky factor of a Hermitian positive-definite ``x``.

    A sparse ``x`` is factorized on its dense matrix and gives a strided factor, as every dense
    factorization of this module does (its result is strided by definition).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> xs.linalg.cholesky(np.asarray([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    >>> xs.linalg.cholesky(xs.asarray([[4.0, 0.0], [0.0, 9.0]], layout=xs.sparse_csr)).tolist()
    [[2.0, 0.0], [0.0, 3.0]]
    """
    return _factorization("cholesky", x, upper=flag_argument("cholesky", "upper", upper))


def det(x: Any, /) -> Any:
    """The determinant of each square matrix of ``x`` (a strided result for a sparse ``x``, see :func:`cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> float(xs.linalg.det(np.asarray([[2.0, 0.0], [0.0, 3.0]])))
    6.0
    >>> xs.linalg.det(xs.asarray([[2.0, 0.0], [0.0, 3.0]], layout=xs.sparse_coo))
    array(6.)
    """
    return _factorization("det", x)


def eigh(x: Any, /) -> Any:
    """Eigenvalues and eigenvectors of a Hermitian ``x`` (a strided result for a sparse ``x``, see :func:`cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> xs.linalg.eigh(np.asarray([[2.0, 0.0], [0.0, 1.0]])).eigenvalues.tolist()
    [1.0, 2.0]
    """
    return _factorization("eigh", x)


def eigvalsh(x: Any, /) -> Any:
    """Eigenvalues of a Hermitian ``x`` (a strided result for a sparse ``x``, see :func:`cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> xs.linalg.eigvalsh(np.asarray([[2.0, 0.0], [0.0, 1.0]])).tolist()
    [1.0, 2.0]
    """
    return _factorization("eigvalsh", x)


def inv(x: Any, /) -> Any:
    """The inverse of each square matrix of ``x`` (a strided result for a sparse ``x``, see :func:`cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> xs.linalg.inv(np.asarray([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    return _factorization("inv", x)


def matrix_rank(x: Any, /, *, rtol: Any = None) -> Any:
    """The rank of each matrix of ``x`` (a strided result for a sparse ``x``, see :func:`cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> int(xs.linalg.matrix_rank(np.asarray([[1.0, 2.0], [2.0, 4.0]])))
    1
    >>> int(xs.linalg.matrix_rank(np.diag([10.0, 4.0, 1.0]), rtol=0.2))
    2
    """
    if rtol is None or 0 in tuple(getattr(x, "shape", (0,))[-2:]):
        return _factorization("matrix_rank", x, rtol=rtol)
    # the standard's tolerance, rtol times each matrix's largest singular value, on every backend:
    # jax.numpy's matrix_rank reads rtol as an absolute tolerance
    _, xp = _matrix("matrix_rank", x)
    _floating("matrix_rank", xp, x)
    values = svdvals(x)
    tolerance = _rtol("matrix_rank", x, rtol)
    if not isinstance(tolerance, float):
        tolerance = xp.astype(tolerance, values.dtype)[..., None]
    large = values > tolerance * xp.max(values, axis=-1, keepdims=True)
    return xp.astype(as_array(xp, xp.sum(xp.astype(large, xp.int64), axis=-1)), xp.int64)


def pinv(x: Any, /, *, rtol: Any = None) -> Any:
    """The Moore-Penrose pseudo-inverse of ``x`` (a strided result for a sparse ``x``, see :func:`cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> xs.linalg.pinv(np.asarray([[2.0, 0.0], [0.0, 0.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    return _factorization("pinv", x, rtol=rtol)


def qr(x: Any, /, *, mode: str = "reduced") -> Any:
    """The QR decomposition of ``x`` (a strided result for a sparse ``x``, see :func:`cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> q, r = xs.linalg.qr(np.eye(2))
    >>> abs(q).tolist(), abs(r).tolist()
    ([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]])
    """
    if mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete' (mode={mode!r}). Pick one of them.")
    return _factorization("qr", x, mode=mode)


def slogdet(x: Any, /) -> Any:
    """The sign and the log of the absolute value of the determinant (a strided result for a sparse ``x``, see :func:`cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> s = xs.linalg.slogdet(np.asarray([[-1.0, 0.0], [0.0, 1.0]]))
    >>> float(s.sign), float(s.logabsdet)
    (-1.0, 0.0)
    """
    return _factorization("slogdet", x)


def svd(x: Any, /, *, full_matrices: bool = True) -> Any:
    """The singular value decomposition of ``x`` (a strided result for a sparse ``x``,
    see :func:`cholesky`; :func:`xsparse.svd_lowrank` approximates it without the dense matrix).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> xs.linalg.svd(np.asarray([[3.0, 0.0], [0.0, 4.0]])).S.tolist()
    [4.0, 3.0]
    """
    return _factorization("svd", x, full_matrices=flag_argument("svd", "full_matrices", full_matrices))


def svdvals(x: Any, /) -> Any:
    """The singular values of ``x`` (a strided result for a sparse ``x``, see :func:`cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> xs.linalg.svdvals(np.asarray([[3.0, 0.0], [0.0, 4.0]])).tolist()
    [4.0, 3.0]
    """
    return _factorization("svdvals", x)


def solve(x1: Any, x2: Any, /) -> Any:
    """Solve ``x1 @ X = x2``; the result is strided.

    A 2-D sparse ``x1`` (with no dense dimension) and an ``x2`` of shape ``(M,)`` or ``(M, K)`` are
    solved by :func:`xsparse.spsolve` (a sparse LU; a sparse ``x2`` is read as its dense matrix, the size
    of the result; the dtypes promote). A batch of sparse matrices or a hybrid ``x1`` are solved by the
    backend's dense ``solve`` on the dense matrices (the result is strided by definition). At least one
    operand must be floating or complex; an integer one takes the other's dtype. Half-precision systems
    are solved in float32 on every route, and the result is float32 (as :func:`xsparse.spsolve` does).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.asarray([[2.0, 0.0], [0.0, 4.0]], layout=xs.sparse_csr)
    >>> xs.linalg.solve(a, np.asarray([[2.0], [2.0]])).tolist()
    [[1.0], [0.5]]
    >>> batch = xs.asarray([[[2.0, 0.0], [0.0, 4.0]]], layout=xs.sparse_coo)
    >>> xs.linalg.solve(batch, np.asarray([[[2.0], [2.0]]])).tolist()
    [[[1.0], [0.5]]]
    """
    op = "solve"
    backend, xp = _matrix(op, x1)
    array_operand(op, x2)
    backend_of(x1, x2, op=op)
    m = x1.shape[-1]
    rows = x2.shape[0] if x2.ndim == 1 else (x2.shape[-2] if x2.ndim else None)
    if x1.shape[-2] != m or rows != m:
        # checked before any densification, and named as this function (NumPy's gufunc error names solve1)
        raise ValueError(
            f"{op}: x1 must hold square matrices and x2 a right-hand side of as many rows, of shape (..., M) or (..., M, K) "
            f"(x1.shape={tuple(x1.shape)}, x2.shape={tuple(x2.shape)}). Pass a system whose sizes agree."
        )
    _numeric(op, xp, x1, x2)
    floating = [x.dtype for x in (x1, x2) if xp.isdtype(x.dtype, _FLOATING)]
    if not floating:
        raise TypeError(
            f"{op}: x1 or x2 must have a floating-point dtype (x1.dtype={dtype_name(x1.dtype)}, x2.dtype={dtype_name(x2.dtype)}). "
            "Cast the system first, e.g. xsparse.astype(x1, 'float64')."
        )
    if len(floating) == 1:
        # the integer operand takes the other's dtype: the result does not depend on a backend's mixed-kind
        # rules (array_api_strict promotes no integer with a float, torch's dense solve takes no integers)
        x1, x2 = (_as_dtype(x, floating[0], xp) for x in (x1, x2))
    # a sparse LU reads the unspecified elements as 0: a system with another fill value is a dense matrix,
    # solved as one (as its dense array would be)
    sparse_system = (
        isinstance(x1, SparseArray) and x1.ndim == 2 and x1.dense_dim() == 0 and x2.ndim in (1, 2) and x1.fill_value == 0
    )
    if sparse_system:
        from ._linalg import spsolve

        try:
            return spsolve(x1, _dense(x2))
        except ValueError as e:
            # spsolve's messages name it; the user called solve
            if type(e) is not ValueError or not str(e).startswith("spsolve: "):
                raise
            raise ValueError(f"{op}: {str(e)[len('spsolve: '):]}") from None
    d1, d2 = _dense(x1), _dense(x2)
    if is_half_precision(xp.result_type(d1.dtype, d2.dtype)):
        # as spsolve: NumPy's and torch's dense solvers have no half-precision kernel, JAX's would solve in it
        d1, d2 = xp.astype(d1, xp.float32), xp.astype(d2, xp.float32)
    return xp.linalg.solve(d1, d2)


def matrix_power(x: Any, n: int, /) -> Any:
    """``x`` raised to the integer power ``n`` (the product of ``n`` copies; the identity for ``n = 0``).

    A sparse ``x`` with ``n >= 0`` stays sparse in its layout (products of sparse matrices need fill
    value 0); ``n < 0`` is a power of the inverse, a dense matrix: it is computed on the dense matrix and
    is strided, for a floating ``x`` (float16 and bfloat16 in float32, as :func:`inv`).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.asarray([[0.0, 1.0], [0.0, 0.0]], layout=xs.sparse_csr)
    >>> xs.linalg.matrix_power(a, 2).nnz, xs.linalg.matrix_power(a, 0).to_dense().tolist()
    (0, [[1.0, 0.0], [0.0, 1.0]])
    """
    op = "matrix_power"
    backend, xp = _matrix(op, x)
    n = integer_argument(op, "n", n, "Pass an integer power.")
    _square(op, x)
    if n < 0:
        # a power of the inverse: floating matrices only, and half precision in float32, as inv
        _floating(op, xp, x)
        return xp.linalg.matrix_power(_widened(xp, x), n)
    if not isinstance(x, SparseArray):
        return xp.linalg.matrix_power(x, n)
    if x.dtype == xp.bool:
        raise TypeError(f"{op}: x has a boolean dtype (x.dtype=bool); powers are products, defined for numeric dtypes. Cast it first.")
    if n == 0:
        from ._creation import eye
        from ._shape import broadcast_to

        identity = eye(x.shape[-1], dtype=x.dtype, device=x.device, layout=x.layout, backend=backend, **_blocksize(x))
        return identity if x.ndim == 2 else broadcast_to(identity, tuple(x.shape))
    if n >= 2 and x.fill_value != 0:
        raise NoKernelError(
            f"{op}: a power of a sparse x is a product of sparse matrices, which needs fill value 0 (x.fill_value={x.fill_value!r}). "
            f"Compute it on the dense matrix: xsparse.linalg.matrix_power(xsparse.to_dense(x), {n})."
        )
    result, base, k = None, x, n
    while k:
        if k & 1:
            result = base if result is None else matmul(result, base)
        k >>= 1
        if k:
            base = matmul(base, base)
    return result


def _blocksize(x: SparseArray) -> dict[str, Any]:
    return {"blocksize": x.blocksize} if isinstance(x, CompressedArray) and x.layout.is_blocked else {}


def diagonal(x: Any, /, *, offset: int = 0, layout: Layout | None = None) -> Any:
    """The ``offset``-th diagonal of the last two dimensions; a sparse ``x`` gives a COO array with ``x``'s
    fill value (its stored elements on the diagonal).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.asarray([[1.0, 2.0, 0.0], [0.0, 0.0, 3.0]], layout=xs.sparse_csr)
    >>> d = xs.linalg.diagonal(a, offset=1)
    >>> d.layout, d.to_dense().tolist()
    (xsparse.sparse_coo, [2.0, 3.0])
    """
    op = "diagonal"
    backend, xp = _matrix(op, x)
    offset = integer_argument(op, "offset", offset, "Pass an integer offset.")
    if not isinstance(x, SparseArray):
        return convert_result(xp.linalg.diagonal(x, offset=offset), layout, op)
    # beyond the matrix every diagonal is empty: the kernels' positions then stay within int64
    offset = min(max(offset, -x.shape[-2]), x.shape[-1])
    return convert_result(dispatch.call(op, (x.layout,), backend.name, xp, x, offset), layout, op)


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """The sum of the ``offset``-th diagonal of each matrix (a sum of :func:`diagonal` for a sparse ``x``).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.asarray([[1.0, 2.0], [0.0, 3.0]], layout=xs.sparse_coo)
    >>> float(xs.linalg.trace(a))
    4.0
    """
    op = "trace"
    _, xp = _matrix(op, x)
    offset = integer_argument(op, "offset", offset, "Pass an integer offset.")
    if not isinstance(x, SparseArray):
        return _as_array(xp, xp.linalg.trace(x, offset=offset, dtype=dtype))
    if xp.isdtype(x.dtype, "bool"):
        # (the sum it runs would name itself)
        raise TypeError(f"{op}: x must have a numeric dtype (x.dtype={dtype_name(x.dtype)}). Cast it first, e.g. xsparse.astype(x, 'int64').")
    from ._reduction import sum as _sum

    return _as_array(xp, _sum(diagonal(x, offset=offset), axis=-1, dtype=dtype))


_FLOATING_NAMES = frozenset({"float16", "bfloat16", "float32", "float64", "complex64", "complex128"})


def _floating(op: str, xp: Any, x: Any) -> None:
    # by the dtype's (memoised) name: the backends' isdtype costs microseconds, a third of a small norm
    if dtype_name(x.dtype) not in _FLOATING_NAMES:
        raise TypeError(f"{op}: x must have a floating-point dtype (x.dtype={x.dtype}). Cast it first, e.g. xsparse.astype(x, 'float64').")


def vector_norm(x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, ord: int | float = 2) -> Any:  # noqa: A002
    """The vector ``ord``-norm of ``x`` along ``axis`` (every element when ``axis`` is None).

    A sparse ``x`` is reduced sparsely (``abs``, powers and sums, unspecified elements counting as the
    fill value); the result has the layout of a reduction (strided when every sparse dimension is reduced).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.asarray([[3.0, 0.0], [0.0, 4.0]], layout=xs.sparse_csr)
    >>> float(xs.linalg.vector_norm(a)), float(xs.linalg.vector_norm(a, ord=xs.inf))
    (5.0, 4.0)
    """
    op = "vector_norm"
    backend, xp = array_operand(op, x)
    _floating(op, xp, x)
    if type(ord) is not int and type(ord) is not float:  # (the common case checked first: ABC checks are slow)
        if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
            raise TypeError(f"{op}: ord must be a number (ord={ord!r}). Pass an int, a float, inf or -inf.")
        # NumPy's and torch's scalars as Python's (the kernels compare ord with 1, 2, inf)
        ord = int(ord) if isinstance(ord, numbers.Integral) else float(ord)
    if not isinstance(x, SparseArray):
        return _as_array(xp, xp.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord))
    from ._reduction import _axes

    _axes(op, axis, x.ndim)  # checked here, so that an error names this function, not the sum it runs
    if is_half_precision(x.dtype):
        # in float32, cast back, as NumPy's and torch's dense norms accumulate (21840 squared is inf in float16)
        return astype(vector_norm(astype(x, xp.float32), axis=axis, keepdims=keepdims, ord=ord), x.dtype)
    return _as_array(xp, dispatch.call(op, (x.layout,), backend.name, xp, x, axis, flag_argument(op, "keepdims", keepdims), ord))


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: int | float | str | None = "fro") -> Any:  # noqa: A002
    """The matrix norm of each matrix of ``x``: ``'fro'``, ``'nuc'``, ``1``, ``-1``, ``2``, ``-2``, ``inf``, ``-inf``.

    A sparse ``x`` is reduced sparsely for ``'fro'``, ``1``, ``-1``, ``inf`` and ``-inf``; ``'nuc'``, ``2`` and
    ``-2`` need singular values (a dense factorization): they are computed on the dense matrices.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.asarray([[3.0, 0.0], [-1.0, 4.0]], layout=xs.sparse_csr)
    >>> float(xs.linalg.matrix_norm(a, ord=1)), float(xs.linalg.matrix_norm(a, ord=xs.inf))
    (4.0, 5.0)
    """
    op = "matrix_norm"
    backend, xp = _matrix(op, x)
    _floating(op, xp, x)
    if ord is None:
        ord = "fro"
    if ord not in ("fro", "nuc", 1, -1, 2, -2, _INF, -_INF):
        raise ValueError(f"{op}: ord must be one of 'fro', 'nuc', 1, -1, 2, -2, inf, -inf (ord={ord!r}). Pass one of them.")
    if ord in (-1, -_INF) and x.shape[-1 if ord == -1 else -2] == 0:
        # the smallest of no column (row) sums is undefined: NumPy raises its own ValueError, torch an IndexError
        raise ValueError(
            f"{op}: ord={ord} is the smallest {'column' if ord == -1 else 'row'} sum, and the matrices have none "
            f"(x.shape={tuple(x.shape)}). Pass matrices with {'columns' if ord == -1 else 'rows'}, or another ord."
        )
    if ord == -2 and min(x.shape[-2:]) == 0:
        # as the smallest sums above: NumPy raises its reduction's ValueError, torch an IndexError
        raise ValueError(
            f"{op}: ord=-2 is the smallest singular value, and the matrices have none (x.shape={tuple(x.shape)}). "
            "Pass matrices with rows and columns, or another ord."
        )
    if not isinstance(x, SparseArray):
        if ord in ("nuc", 2, -2) and is_half_precision(x.dtype):
            # NumPy's and torch's SVDs take no half precision: in float32, cast back, as for a sparse x
            norm = xp.linalg.matrix_norm(xp.astype(x, xp.float32), keepdims=keepdims, ord=ord)
            return _as_array(xp, xp.astype(norm, x.dtype))
        return _as_array(xp, xp.linalg.matrix_norm(x, keepdims=keepdims, ord=ord))
    if is_half_precision(x.dtype):
        # in float32 (singular values and sums), the norm cast back
        return astype(matrix_norm(astype(x, xp.float32), keepdims=keepdims, ord=ord), x.dtype)
    if ord in ("nuc", 2, -2):
        return _as_array(xp, xp.linalg.matrix_norm(_widened(xp, x), keepdims=flag_argument(op, "keepdims", keepdims), ord=ord))
    return _as_array(xp, dispatch.call(op, (x.layout,), backend.name, xp, x, flag_argument(op, "keepdims", keepdims), ord))


def outer(x1: Any, x2: Any, /) -> Any:
    """The outer product of two vectors: a product of an ``(n, 1)`` and a ``(1, m)`` matrix, laid out as
    :func:`xsparse.matmul` lays out products (strided with a strided operand, else ``x1``'s layout, COO).
    Two sparse vectors of fill value 0 multiply as :func:`xsparse.kron` of those matrices: every element is
    one product, its sign of zero included.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> v = xs.sparse_coo_array([[1]], [2.0], (2,))
    >>> xs.linalg.outer(v, np.asarray([1.0, 3.0])).tolist()
    [[0.0, 0.0], [2.0, 6.0]]
    >>> xs.linalg.outer(v, v).layout
    xsparse.sparse_coo
    """
    op = "outer"
    array_operand(op, x1)
    array_operand(op, x2)
    backend = backend_of(x1, x2, op=op)
    xp = backend.load()
    check_promotion(op, xp, backend, {"x1": x1, "x2": x2})
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"{op}: both operands must be 1-D (x1.shape={tuple(x1.shape)}, x2.shape={tuple(x2.shape)}). Flatten them first.")
    if not isinstance(x1, SparseArray) and not isinstance(x2, SparseArray):
        return xp.linalg.outer(x1, x2)
    _numeric(op, xp, x1, x2)
    from ._dtypes import result_type
    from ._indexing import astype
    from ._shape import reshape

    # promoted first, by the standard's table (torch's products refuse some mixed unsigned dtypes)
    dt = result_type(x1, x2)
    x1, x2 = (x if x.dtype == dt else astype(x, dt) for x in (x1, x2))
    column, row = reshape(x1, (x1.shape[0], 1)), reshape(x2, (1, x2.shape[0]))
    if all(isinstance(x, SparseArray) and x.fill_value == 0 for x in (x1, x2)):
        # each element one product, nothing summed: the Kronecker product keeps its sign where a zero's
        # is (-0.0 * 1.0), which a sparse matmul accumulating from +0 would not
        return kron(column, row)
    if isinstance(x1, SparseArray) and isinstance(x2, SparseArray):
        # a fill value other than 0: the elements (i, j) with one operand specified are x1[i] * f2 or
        # f1 * x2[j], no one value, so the product has no sparse form
        raise NoKernelError(
            f"{op}: the outer product of two sparse vectors is sparse only for fill values 0 (x1 fill_value={x1.fill_value!r}, "
            f"x2 fill_value={x2.fill_value!r}). Pass xsparse.to_dense(x2) for a strided result."
        )
    return matmul(column, row)


def _numeric(op: str, xp: Any, x1: Any, x2: Any) -> None:
    """Refuse boolean operands by ``op``'s name (the sparse products that compute it would name themselves)."""
    for name, x in (("x1", x1), ("x2", x2)):
        if x.dtype == xp.bool:
            raise TypeError(f"{op}: {name} has a boolean dtype ({name}.dtype=bool); {op} is defined for numeric dtypes. Cast it first.")


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """The cross product of 3-element vectors along ``axis``; sparse operands are combined with xsparse's
    sparse ``take``, ``multiply``, ``subtract`` and ``concat``.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.asarray([[1.0, 0.0, 0.0]], layout=xs.sparse_coo)
    >>> b = xs.asarray([[0.0, 1.0, 0.0]], layout=xs.sparse_coo)
    >>> xs.linalg.cross(a, b).to_dense().tolist()
    [[0.0, 0.0, 1.0]]
    """
    op = "cross"
    array_operand(op, x1)
    array_operand(op, x2)
    backend = backend_of(x1, x2, op=op)
    xp = backend.load()
    axis = integer_argument(op, "axis", axis, "Pass a negative axis such as -1.")
    ndim = builtins.max(x1.ndim, x2.ndim)
    if not -builtins.min(x1.ndim, x2.ndim) <= axis <= -1:
        raise ValueError(
            f"{op}: axis must be negative and name a dimension of both operands (axis={axis}, x1.shape={tuple(x1.shape)}, "
            f"x2.shape={tuple(x2.shape)}). Pass an axis in [-{builtins.min(x1.ndim, x2.ndim)}, -1]."
        )
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"{op}: the vectors along axis {axis} must have 3 elements (x1.shape={tuple(x1.shape)}, x2.shape={tuple(x2.shape)}). Pass 3-vectors.")
    if not isinstance(x1, SparseArray) and not isinstance(x2, SparseArray):
        return xp.linalg.cross(x1, x2, axis=axis)
    _numeric(op, xp, x1, x2)
    _broadcast(op, "shapes", tuple(x1.shape), tuple(x2.shape))
    from ._elementwise import multiply, subtract
    from ._indexing import take
    from ._shape import concat

    def part(x: Any, i: int) -> Any:
        return take(x, xp.asarray([i], dtype=xp.int64, device=x.device if isinstance(x, SparseArray) else None), axis=x.ndim + axis)

    a = [part(x1, i) for i in range(3)]
    b = [part(x2, i) for i in range(3)]
    terms = [subtract(multiply(a[(i + 1) % 3], b[(i + 2) % 3]), multiply(a[(i + 2) % 3], b[(i + 1) % 3])) for i in range(3)]
    return concat(terms, axis=ndim + axis)
