"""Linear algebra with sparse operands: products, a sparse solver, and low-rank decompositions.

Every function reads its operands' layouts and backend and hands them to the dispatcher: the
operation's kernels are registered per layout signature (``xs.kernels("matmul")``, and the table in
``docs/linalg.md``). The public layer checks shapes and arguments, and applies ``layout=`` to the
result; it does not reshape or convert the operands, so a kernel sees what the caller passed and
declines, with a reason, what it does not handle.

The natural layout of a product follows torch: sparse @ strided and strided @ sparse are strided,
sparse @ sparse has the left operand's layout. ``layout=`` converts the result.
"""

from __future__ import annotations

import cmath
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from . import dispatch
from ._common import _STRIDED_BACKENDS, backend_of, flag_argument, integer_argument, is_strided, known_backend, namespace_of, seed_argument
from ._conversion import layout_of, matrix_transpose
from ._dtypes import result_type
from ._elementwise import convert_result
from ._index_key import is_integer_dtype
from .backends import Backend
from .backends.array_api import linalg as _generic  # registers the generic kernels
from .backends.array_api.conversion import coalesce_coo, summed_before_cast
from .backends.array_api.linalg import LobpcgState
from .formats import COOArray, Layout, SparseArray, strided
from .formats._invariants import dtype_name, is_half_precision

__all__ = [
    "matmul",
    "mm",
    "mv",
    "bmm",
    "addmm",
    "tensordot",
    "kron",
    "vecdot",
    "smm",
    "hspmm",
    "sspaddmm",
    "sampled_addmm",
    "spsolve",
    "lobpcg",
    "svd_lowrank",
    "pca_lowrank",
]

REDUCTIONS = ("sum", "mean", "amax", "amin")


# -- argument checks ---------------------------------------------------------------------------------


def _check_operand(op: str, name: str, x: Any) -> None:
    if not isinstance(x, SparseArray) and not is_strided(x, op):
        raise TypeError(
            f"{op}: {name} must be an xsparse array or a backend array, got {type(x).__name__}. Wrap Python "
            "scalars and lists with the backend's asarray first."
        )


def _prepare(op: str, _promote: bool = True, **operands: Any) -> tuple[Backend, Any]:
    """Check the operands (arrays of one backend, numeric, and with ``_promote`` of dtypes that promote
    together) and return the backend and its namespace."""
    # The common case first, at a fraction of the cost (a small SpMV is a few microseconds): every
    # operand a sparse array or a strided array of a type already seen, all of one backend. Anything
    # else takes the full checks, which give the same answers and raise the errors.
    backend = None
    for x in operands.values():
        found = known_backend(x)
        if found is None or (backend is not None and found is not backend):
            backend = None
            break
        backend = found
    if backend is None:
        for name, x in operands.items():
            _check_operand(op, name, x)
        backend = backend_of(*operands.values(), op=op)
    xp = namespace_of(backend)
    for name, x in operands.items():
        # ``dtype == xp.bool`` is the Array API's boolean test, and a tenth of xp.isdtype's cost
        if x.dtype == xp.bool:
            raise TypeError(
                f"{op}: {name} has a boolean dtype ({name}.dtype=bool); products are defined for numeric dtypes. "
                "Convert it to an integer or floating dtype first."
            )
    if _promote:
        check_promotion(op, xp, backend, operands)
    return backend, xp


def check_promotion(op: str, xp: Any, backend: Backend, operands: dict[str, Any]) -> None:
    """Raise, naming ``op``, where the backend promotes no pair of the operands' dtypes (array_api_strict
    mixes no kinds: int32 with float32); its own error would name neither the function nor the fix."""
    dtypes = [x.dtype for x in operands.values()]
    if all(d == dtypes[0] for d in dtypes):
        return
    try:
        xp.result_type(*dtypes)
    except RuntimeError:
        return  # torch's refusal of uint16/32/64 with other integers, which the products promote themselves
    except TypeError:
        given = ", ".join(f"{name}.dtype={dtype_name(x.dtype)}" for name, x in operands.items())
        raise TypeError(
            f"{op}: backend {backend.name!r} does not promote these dtypes together ({given}). Cast an operand "
            "first, e.g. with xsparse.astype(x, 'float64')."
        ) from None


def _common_dtype(*operands: Any) -> Any:
    """The operands' promoted dtype: their one dtype where they share it (the common case, without
    :func:`result_type`'s checks, a few microseconds on torch), else ``result_type``'s answer."""
    first = operands[0].dtype
    return first if all(x.dtype == first for x in operands[1:]) else result_type(*operands)


def _sum_before_cast(xp: Any, *operands: Any) -> tuple[Any, ...]:
    """The operands of a product, an uncoalesced COO one coalesced first where the product casts its values
    to the promoted dtype (:func:`summed_before_cast`), or where another operand may hold a value that is
    not finite (:func:`_meets_non_finite`): the values mean their sums, and the products of duplicates -2
    and 4.5 with inf add up to NaN, where their sum's is inf. (Finite operands multiply duplicates one by
    one, as torch does.)"""
    uncoalesced = [i for i, x in enumerate(operands) if _uncoalesced(x)]
    if uncoalesced:
        operands = tuple(
            coalesce_coo(xp, x) if i in uncoalesced and _meets_non_finite(xp, x, operands[:i] + operands[i + 1 :]) else x
            for i, x in enumerate(operands)
        )
    first = operands[0].dtype
    if all(x.dtype == first for x in operands[1:]):
        return operands
    dtype = result_type(*operands)
    return tuple(summed_before_cast(xp, x, dtype) for x in operands)


def _uncoalesced(x: Any) -> bool:
    return isinstance(x, COOArray) and not x._coalesced


def _meets_non_finite(xp: Any, a: COOArray, others: tuple[Any, ...]) -> bool:
    """Whether the uncoalesced ``a`` is to be coalesced because an operand in ``others`` may hold an infinity or
    NaN: one whose elements outnumber ``a``'s entries eight times is not read (a sort of the entries costs less),
    the others are summed (an infinity or NaN stays in a sum; one that overflows only says yes)."""
    for x in others:
        values = x._vals if isinstance(x, SparseArray) else x
        if not xp.isdtype(values.dtype, ("real floating", "complex floating")):
            continue
        if isinstance(x, SparseArray) and not cmath.isfinite(complex(x.fill_value)):
            return True
        if math.prod(values.shape) > 8 * a.nnz:
            return True
        with np.errstate(all="ignore"):  # an overflow of the sum says yes, silently (array_api_strict sums in NumPy)
            if not bool(xp.all(xp.isfinite(xp.sum(values)))):
                return True
    return False


def _prepare_pair(op: str, names: tuple[str, str], x1: Any, x2: Any) -> tuple[Backend, Any]:
    """:func:`_prepare` for two operands, without its loops where both are known and of one backend."""
    backend = known_backend(x1)
    if backend is not None and known_backend(x2) is backend:
        xp = namespace_of(backend)
        if x1.dtype == x2.dtype and x1.dtype != xp.bool:
            return backend, xp
    return _prepare(op, **{names[0]: x1, names[1]: x2})  # the full checks, and their errors


def _shape(x: Any) -> tuple[int, ...]:
    return _layout_shape(x)[1]


def _layout_shape(x: Any) -> tuple[Layout, tuple[int, ...]]:
    """The layout and shape of an operand that :func:`_prepare` accepted."""
    if type(x) in _STRIDED_BACKENDS:
        shape = x.shape
        # a built-in backend's plain-tuple shape (NumPy's, CuPy's) holds Python ints already; any other
        # (torch.Size) is converted, as everywhere else
        return strided, shape if type(shape) is tuple else tuple(map(int, shape))
    if isinstance(x, SparseArray):
        return x._layout, x._shape
    return strided, tuple(map(int, x.shape))


def _broadcast(op: str, what: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for dims in zip(*((1,) * (ndim - len(s)) + s for s in shapes)):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            listed = ", ".join(str(s) for s in shapes)
            raise ValueError(f"{op}: the {what} do not broadcast ({listed}). Make each size equal, or 1.")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether ``shape`` broadcasts to ``target`` (without changing ``target``)."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(shape, target[len(target) - len(shape) :]))


def _matmul_shape(op: str, s1: tuple[int, ...], s2: tuple[int, ...], names: tuple[str, str] = ("x1", "x2")) -> tuple[int, ...]:
    """The shape of ``x1 @ x2`` under the Array API's rules; raises ValueError naming the mismatch."""
    n1, n2 = names
    if not s1 or not s2:
        raise ValueError(
            f"{op}: both operands need at least one dimension ({n1}.shape={s1}, {n2}.shape={s2}). "
            "Multiply by a scalar with xsparse.multiply instead."
        )
    k1, k2 = s1[-1], (s2[0] if len(s2) == 1 else s2[-2])
    if k1 != k2:
        raise ValueError(
            f"{op}: the contracted dimensions differ ({n1}.shape={s1}, {n2}.shape={s2}: {k1} != {k2}). Give {n1}'s last "
            f"dimension the size of {n2}'s {'only' if len(s2) == 1 else 'second-to-last'} one, or transpose an operand."
        )
    batch = _broadcast(op, "batch dimensions", s1[:-2], s2[:-2]) if len(s1) > 2 or len(s2) > 2 else ()
    return batch + s1[-2:-1] + s2[-1:] if len(s2) > 1 else batch + s1[-2:-1]


def _call(op: str, layouts: Sequence[Layout], backend: Backend, xp: Any, *args: Any) -> Any:
    return dispatch.call(op, tuple(layouts), backend.name, xp, *args)


def _check_ndim(op: str, **operands: Any) -> None:
    for name, (x, ndim) in operands.items():
        if x.ndim != ndim:
            raise ValueError(
                f"{op}: {name} must be {ndim}-D ({name}.shape={_shape(x)}). Use xsparse.matmul for vectors, "
                "batches and broadcasting."
            )


def _check_scalars(op: str, xp: Any, dtype: Any, **scalars: Any) -> tuple[Any, ...]:
    """Check the Python numbers ``scalars`` against the operands' ``dtype``, and return them as Python's own
    types: a NumPy float64 or complex128 is a float or complex too, which array_api_strict does not take
    beside its arrays."""
    # the common case, without xp.isdtype (Python code on torch): real Python scalars, non-integer operands
    if all(type(v) is float or type(v) is int for v in scalars.values()) and not is_integer_dtype(dtype):
        return tuple(scalars.values())
    for name, value in scalars.items():
        if not isinstance(value, (int, float, complex)) or isinstance(value, bool):
            raise TypeError(f"{op}: {name} must be a Python number, got {type(value).__name__} ({name}={value!r}). Pass an int, float or complex.")
        if xp.isdtype(dtype, "integral") and not isinstance(value, int):
            raise TypeError(
                f"{op}: {name} must be an integer for operands of an integer dtype ({name}={value!r}). Pass an integer, "
                "or operands of a floating dtype."
            )
        if isinstance(value, complex) and not xp.isdtype(dtype, "complex floating"):
            raise TypeError(f"{op}: {name} is complex but the operands are real ({name}={value!r}). Pass a real number.")
        if isinstance(value, int) and xp.isdtype(dtype, "integral"):
            # checked here, once for every layout: torch's COO kernels raise, its CSR kernels and NumPy wrap
            info = xp.iinfo(dtype)
            if not info.min <= value <= info.max:
                raise OverflowError(
                    f"{op}: {name} does not fit the operands' dtype {dtype_name(dtype)}, [{info.min}, {info.max}] "
                    f"({name}={value}). Pass a value in that range, or operands of a wider dtype (xsparse.astype)."
                )
    return tuple((complex if isinstance(v, complex) else float if isinstance(v, float) else int)(v) for v in scalars.values())


# -- products ----------------------------------------------------------------------------------------


def matmul(x1: Any, x2: Any, /, *, layout: Layout | None = None) -> Any:
    """Matrix product with the Array API's rules (``x1 @ x2``).

    A 1-D operand is a vector (its added dimension removed from the result), batch dimensions broadcast.
    Any mix of strided and sparse operands of one backend is accepted; ``xs.kernels("matmul")`` lists the
    layout signatures with kernels (``docs/linalg.md`` prints the table).

    Parameters
    ----------
    x1, x2
        Strided (backend) or xsparse arrays, ``(..., M, K)`` and ``(..., K, N)`` (or vectors).
    layout
        The result layout. By default, as torch: sparse @ strided and strided @ sparse are strided,
        sparse @ sparse has ``x1``'s layout (blocks of ``x1``'s block rows and ``x2``'s block columns;
        a vector result is COO). A sparse operand contracted over one of its *dense* dimensions keeps
        its structure (each stored element is multiplied).

    Returns
    -------
    array
        ``x1 @ x2``. A sparse factor with a non-zero fill value is handled where the result is
        strided (docs/linalg.md, "Fill values", for its rounding); a product of two sparse arrays needs
        fill values 0.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], (2, 3))
    >>> b = np.arange(6.0).reshape(3, 2)
    >>> xs.matmul(a, b)
    array([[ 8., 11.],
           [ 6.,  9.]])
    >>> (a @ b[:, 0]).tolist(), (b.T @ a.T).shape
    ([8.0, 6.0], (2, 2))
    >>> c = a @ a.T
    >>> c.layout, c.to_dense().tolist()
    (xsparse.sparse_csr, [[5.0, 0.0], [0.0, 9.0]])
    >>> xs.matmul(a, a.T, layout=xs.sparse_coo).layout
    xsparse.sparse_coo
    """
    op = "matmul"
    backend, xp = _prepare_pair(op, ("x1", "x2"), x1, x2)
    if x1.dtype != x2.dtype or _uncoalesced(x1) or _uncoalesced(x2):
        x1, x2 = _sum_before_cast(xp, x1, x2)
    (l1, s1), (l2, s2) = _layout_shape(x1), _layout_shape(x2)
    _matmul_shape(op, s1, s2)
    result = dispatch.call(op, (l1, l2), backend.name, xp, x1, x2)
    # (convert_result also makes NumPy's scalar of a vector product a 0-d array)
    return result if layout is None and not isinstance(result, np.generic) else convert_result(result, layout, op)


def _reduce_product(op: str, backend: Backend, xp: Any, a: Any, b: Any, reduce: str, layout: Layout | None) -> Any:
    if reduce not in REDUCTIONS:
        raise ValueError(f"{op}: reduce must be one of {', '.join(map(repr, REDUCTIONS))} or None (reduce={reduce!r}). Pick one of them.")
    if not isinstance(a, SparseArray) or isinstance(b, SparseArray):
        raise TypeError(
            f"{op}: reduce= needs a sparse first and a strided second operand (layouts=({layout_of(a)}, {layout_of(b)})). "
            "Convert the operands, e.g. with xsparse.to_sparse_csr(mat1) and xsparse.to_dense(mat2)."
        )
    return convert_result(_call("matmul_reduce", (a.layout, strided), backend, xp, a, b, reduce), layout, op)


def mm(mat1: Any, mat2: Any, /, *, reduce: str | None = None, layout: Layout | None = None) -> Any:
    """Product of two matrices, ``torch.mm`` and ``torch.sparse.mm`` in one function.

    ``reduce=`` is torch.sparse.mm's: each output element reduces the products of ``mat1``'s
    *specified* elements of its row with ``mat2``'s column by ``"sum"``, ``"mean"``, ``"amax"`` or
    ``"amin"`` (rows with no specified element give 0). The flat xsparse namespace has one ``mm``, so
    the reduction is a keyword of it rather than a separate ``sparse.mm``.

    Parameters
    ----------
    mat1, mat2
        2-D arrays, ``(M, K)`` and ``(K, N)``; with ``reduce``, ``mat1`` sparse and ``mat2`` strided.
    reduce
        ``None`` for the product, or one of ``"sum"``, ``"mean"``, ``"amax"``, ``"amin"``.
    layout
        The result layout (default as :func:`matmul`).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 2, 2, 3], [0, 2, 1], [1.0, 2.0, -3.0], (3, 3))
    >>> b = np.asarray([[1.0, -2.0], [3.0, 4.0], [-5.0, 6.0]])
    >>> xs.mm(a, b)
    array([[ -9.,  10.],
           [  0.,   0.],
           [ -9., -12.]])
    >>> xs.mm(a, b, reduce="amax")
    array([[  1.,  12.],
           [  0.,   0.],
           [ -9., -12.]])
    """
    op = "mm"
    backend, xp = _prepare(op, mat1=mat1, mat2=mat2)
    mat1, mat2 = _sum_before_cast(xp, mat1, mat2)
    _check_ndim(op, mat1=(mat1, 2), mat2=(mat2, 2))
    _matmul_shape(op, _shape(mat1), _shape(mat2), ("mat1", "mat2"))
    if reduce is not None:
        return _reduce_product(op, backend, xp, mat1, mat2, reduce, layout)
    return convert_result(_call("matmul", (layout_of(mat1), layout_of(mat2)), backend, xp, mat1, mat2), layout, op)


def mv(mat: Any, vec: Any, /, *, layout: Layout | None = None) -> Any:
    """Matrix-vector product, ``mat @ vec`` for a 2-D ``mat`` and a 1-D ``vec``.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    >>> xs.mv(a, np.asarray([1.0, 2.0, 3.0]))
    array([ 9., 19.])
    """
    op = "mv"
    backend, xp = _prepare(op, mat=mat, vec=vec)
    mat, vec = _sum_before_cast(xp, mat, vec)
    _check_ndim(op, mat=(mat, 2), vec=(vec, 1))
    _matmul_shape(op, _shape(mat), _shape(vec), ("mat", "vec"))
    return convert_result(_call("matmul", (layout_of(mat), layout_of(vec)), backend, xp, mat, vec), layout, op)


def bmm(input: Any, mat2: Any, /, *, layout: Layout | None = None) -> Any:
    """Batched matrix product of two 3-D arrays with the same batch size (no broadcasting, as torch.bmm).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.to_sparse_csr(np.asarray([[[1.0, 0], [0, 2]], [[0, 3.0], [4, 0]]]))
    >>> xs.bmm(a, np.ones((2, 2, 1))).tolist()
    [[[1.0], [2.0]], [[3.0], [4.0]]]
    """
    op = "bmm"
    backend, xp = _prepare(op, input=input, mat2=mat2)
    input, mat2 = _sum_before_cast(xp, input, mat2)
    _check_ndim(op, input=(input, 3), mat2=(mat2, 3))
    if input.shape[0] != mat2.shape[0]:
        raise ValueError(
            f"{op}: the batch sizes differ (input.shape={_shape(input)}, mat2.shape={_shape(mat2)}). Pass batches of one "
            "size, or use xsparse.matmul, which broadcasts them."
        )
    _matmul_shape(op, _shape(input), _shape(mat2), ("input", "mat2"))
    return convert_result(_call("matmul", (layout_of(input), layout_of(mat2)), backend, xp, input, mat2), layout, op)


def addmm(input: Any, mat1: Any, mat2: Any, /, *, beta: Any = 1, alpha: Any = 1, layout: Layout | None = None) -> Any:
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices; ``input`` strided, broadcast to ``(M, N)``.

    As in torch, ``beta=0`` ignores ``input`` (NaN and infinity in it included). For a sparse ``input``
    and a sparse result use :func:`sspaddmm`.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [2.0, 3.0], (2, 2))
    >>> xs.addmm(np.ones(2), a, np.eye(2), beta=10, alpha=2)
    array([[10., 14.],
           [16., 10.]])
    """
    op = "addmm"
    backend, xp = _prepare(op, input=input, mat1=mat1, mat2=mat2)
    input, mat1, mat2 = _sum_before_cast(xp, input, mat1, mat2)
    if isinstance(input, SparseArray):
        raise TypeError(
            f"{op}: input must be strided (input layout={input.layout}). For a sparse input and a sparse result use "
            "xsparse.sspaddmm, or pass xsparse.to_dense(input)."
        )
    _check_ndim(op, mat1=(mat1, 2), mat2=(mat2, 2))
    shape = _matmul_shape(op, _shape(mat1), _shape(mat2), ("mat1", "mat2"))
    if not _broadcasts_to(_shape(input), shape):
        raise ValueError(f"{op}: input (input.shape={_shape(input)}) must broadcast to the product's shape {shape}. Pass an input of that shape.")
    beta, alpha = _check_scalars(op, xp, _common_dtype(input, mat1, mat2), beta=beta, alpha=alpha)
    layouts = (strided, layout_of(mat1), layout_of(mat2))
    return convert_result(_call(op, layouts, backend, xp, input, mat1, mat2, beta, alpha), layout, op)


def sampled_addmm(
    input: SparseArray, mat1: Any, mat2: Any, /, *, beta: Any = 1, alpha: Any = 1, layout: Layout | None = None
) -> Any:
    """``beta * input + alpha * (mat1 @ mat2)`` at the specified elements of the sparse ``input`` (SDDMM).

    torch.sparse.sampled_addmm: the result has ``input``'s layout and sparsity pattern, batches
    included. Its unspecified elements are ``beta`` times ``input``'s fill value.

    Parameters
    ----------
    input
        A sparse ``(*B, M, N)`` array without dense dimensions: the mask (and the added term).
    mat1, mat2
        Strided ``(*B, M, K)`` and ``(*B, K, N)``; their batch dimensions broadcast to ``input``'s.
    beta, alpha
        Python numbers (default 1); integers for operands of an integer dtype, in its range.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> mask = xs.sparse_csr_array([0, 1, 2], [1, 0], [1.0, 1.0], (2, 2))
    >>> r = xs.sampled_addmm(mask, np.asarray([[1.0, 2.0], [3.0, 4.0]]), np.eye(2), beta=0.5)
    >>> r.layout, r.values().tolist()
    (xsparse.sparse_csr, [2.5, 3.5])
    """
    op = "sampled_addmm"
    backend, xp = _prepare(op, input=input, mat1=mat1, mat2=mat2)
    input, mat1, mat2 = _sum_before_cast(xp, input, mat1, mat2)
    if not isinstance(input, SparseArray) or isinstance(mat1, SparseArray) or isinstance(mat2, SparseArray):
        raise TypeError(
            f"{op}: input must be sparse and mat1, mat2 strided (layouts=({layout_of(input)}, {layout_of(mat1)}, "
            f"{layout_of(mat2)})). Convert the mask with xsparse.to_sparse_csr and the factors with xsparse.to_dense."
        )
    if mat1.ndim < 2 or mat2.ndim < 2 or input.ndim < 2:
        raise ValueError(
            f"{op}: input, mat1 and mat2 must be (batched) matrices (input.shape={_shape(input)}, mat1.shape={_shape(mat1)}, "
            f"mat2.shape={_shape(mat2)}). Add the missing dimensions."
        )
    shape = _matmul_shape(op, _shape(mat1), _shape(mat2), ("mat1", "mat2"))
    if not _broadcasts_to(shape, _shape(input)):
        raise ValueError(
            f"{op}: mat1 @ mat2 (shape {shape}) must broadcast to input's shape (input.shape={_shape(input)}). Give mat1 "
            "and mat2 the rows and columns of input."
        )
    beta, alpha = _check_scalars(op, xp, _common_dtype(input, mat1, mat2), beta=beta, alpha=alpha)
    layouts = (input.layout, strided, strided)
    return convert_result(_call(op, layouts, backend, xp, input, mat1, mat2, beta, alpha), layout, op)


def _check_coo_matrix_product(op: str, a: Any, b: Any, names: tuple[str, str]) -> None:
    if not isinstance(a, SparseArray) or isinstance(b, SparseArray):
        raise TypeError(
            f"{op}: {names[0]} must be sparse and {names[1]} strided (layouts=({layout_of(a)}, {layout_of(b)})). Convert "
            f"them, e.g. with xsparse.to_sparse_coo({names[0]}) and xsparse.to_dense({names[1]})."
        )
    _check_ndim(op, **{names[0]: (a, 2), names[1]: (b, 2)})
    _matmul_shape(op, _shape(a), _shape(b), names)


def smm(input: SparseArray, mat: Any, /, *, layout: Layout | None = None) -> Any:
    """``input @ mat`` as a sparse COO array (torch.smm): every element of the rows where ``input`` has one.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2], [1, 0]], [2.0, 3.0], (3, 2))
    >>> r = xs.smm(a, np.asarray([[1.0, 2.0], [3.0, 4.0]]))
    >>> r.indices().tolist(), r.values().tolist()
    ([[0, 0, 2, 2], [0, 1, 0, 1]], [6.0, 8.0, 3.0, 6.0])
    """
    op = "smm"
    backend, xp = _prepare(op, input=input, mat=mat)
    input, mat = _sum_before_cast(xp, input, mat)
    _check_coo_matrix_product(op, input, mat, ("input", "mat"))
    return convert_result(_call(op, (input.layout, strided), backend, xp, input, mat), layout, op)


def hspmm(mat1: SparseArray, mat2: Any, /, *, layout: Layout | None = None) -> Any:
    """``mat1 @ mat2`` as a hybrid COO array (torch.hspmm): sparse rows, dense columns.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2], [1, 0]], [2.0, 3.0], (3, 2))
    >>> r = xs.hspmm(a, np.asarray([[1.0, 2.0], [3.0, 4.0]]))
    >>> r.sparse_dim(), r.indices().tolist(), r.values().tolist()
    (1, [[0, 2]], [[6.0, 8.0], [3.0, 6.0]])
    """
    op = "hspmm"
    backend, xp = _prepare(op, mat1=mat1, mat2=mat2)
    mat1, mat2 = _sum_before_cast(xp, mat1, mat2)
    _check_coo_matrix_product(op, mat1, mat2, ("mat1", "mat2"))
    return convert_result(_call(op, (mat1.layout, strided), backend, xp, mat1, mat2), layout, op)


def sspaddmm(
    input: SparseArray, mat1: SparseArray, mat2: Any, /, *, beta: Any = 1, alpha: Any = 1, layout: Layout | None = None
) -> Any:
    """``beta * input + alpha * (mat1 @ mat2)`` as an uncoalesced COO array (torch.sspaddmm).

    The result lists ``beta`` times ``input``'s elements, then ``alpha`` times those of
    ``smm(mat1, mat2)``; duplicates add up when it is coalesced.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> s = xs.sparse_coo_array([[0], [0]], [1.0], (2, 2))
    >>> a = xs.sparse_coo_array([[1], [1]], [2.0], (2, 2))
    >>> r = xs.sspaddmm(s, a, np.eye(2), beta=3)
    >>> r.is_coalesced(), r.to_dense().tolist()
    (False, [[3.0, 0.0], [0.0, 2.0]])
    """
    op = "sspaddmm"
    backend, xp = _prepare(op, input=input, mat1=mat1, mat2=mat2)
    input, mat1, mat2 = _sum_before_cast(xp, input, mat1, mat2)
    if not isinstance(input, SparseArray):
        raise TypeError(f"{op}: input must be sparse (input layout={layout_of(input)}). For a strided input use xsparse.addmm.")
    _check_coo_matrix_product(op, mat1, mat2, ("mat1", "mat2"))
    shape = (mat1.shape[0], mat2.shape[1])
    if _shape(input) != shape:
        raise ValueError(f"{op}: input must have the product's shape {shape} (input.shape={_shape(input)}). Pass an input of that shape.")
    beta, alpha = _check_scalars(op, xp, _common_dtype(input, mat1, mat2), beta=beta, alpha=alpha)
    return convert_result(_call(op, (input.layout, mat1.layout, strided), backend, xp, input, mat1, mat2, beta, alpha), layout, op)


def tensordot(x1: Any, x2: Any, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2, layout: Layout | None = None) -> Any:
    """Contraction over ``axes`` (the Array API's ``tensordot``), with sparse or strided operands.

    A sparse operand is read as a matrix of (free x contracted) dimensions, an index computation, and
    the contraction is one :func:`matmul`. The result is strided when an operand is strided, COO when
    both are sparse.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1], [1, 0], [0, 1]], [1.0, 2.0], (2, 2, 2))
    >>> xs.tensordot(a, np.ones((2, 2)), axes=2).tolist()
    [1.0, 2.0]
    >>> xs.tensordot(a, np.ones(2), axes=([0], [0])).tolist()
    [[0.0, 2.0], [1.0, 0.0]]
    """
    op = "tensordot"
    backend, xp = _prepare(op, x1=x1, x2=x2)
    x1, x2 = _sum_before_cast(xp, x1, x2)
    s1, s2 = _shape(x1), _shape(x2)
    if not isinstance(axes, (tuple, list)):
        count = integer_argument(op, "axes", axes, "Pass an int or two sequences of axes, e.g. axes=([1], [0]).")
        if not 0 <= count <= min(len(s1), len(s2)):
            raise ValueError(f"{op}: axes={count} must lie in [0, {min(len(s1), len(s2))}] (x1.shape={s1}, x2.shape={s2}). Pass fewer axes.")
        axes1, axes2 = tuple(range(len(s1) - count, len(s1))), tuple(range(count))
    else:
        if len(axes) != 2 or _length(axes[0]) is None or _length(axes[0]) != _length(axes[1]):
            raise ValueError(f"{op}: axes must be an int or two sequences of equal length (axes={axes!r}). Pass e.g. axes=([1], [0]).")
        # each axis by operator.index: int() would read 0.5 as axis 0
        hint = "Pass integer axes, e.g. axes=([1], [0])."
        axes1 = tuple(_axis(op, integer_argument(op, "axes", d, hint), len(s1)) for d in axes[0])
        axes2 = tuple(_axis(op, integer_argument(op, "axes", d, hint), len(s2)) for d in axes[1])
        if len(set(axes1)) != len(axes1) or len(set(axes2)) != len(axes2):
            raise ValueError(f"{op}: an axis is repeated (axes={axes!r}). Name each axis once.")
    for d1, d2 in zip(axes1, axes2):
        if s1[d1] != s2[d2]:
            raise ValueError(
                f"{op}: contracted dimensions differ in size (x1.shape={s1} axis {d1}, x2.shape={s2} axis {d2}). Contract "
                "dimensions of equal size."
            )
    return convert_result(_call(op, (layout_of(x1), layout_of(x2)), backend, xp, x1, x2, axes1, axes2), layout, op)


def kron(x1: Any, x2: Any, /, *, layout: Layout | None = None) -> Any:
    """The Kronecker product of two arrays (NumPy's, torch's and SciPy's ``kron``), sparse or strided.

    The operand with fewer dimensions gets leading dimensions of size 1. Dimension ``d`` of the result
    has size ``x1.shape[d] * x2.shape[d]``, and the element at ``i[d] * x2.shape[d] + j[d]`` (along every
    ``d``) is ``x1[i] * x2[j]``: a block ``x1[i] * x2`` for every element of ``x1``.

    Parameters
    ----------
    x1, x2
        Numeric arrays of one backend, sparse (COO, CSR, CSC, BSR, BSC; fill value 0) or strided.
    layout
        The layout of the result (default: COO when an operand is sparse, strided otherwise).

    Returns
    -------
    array
        Strided when both operands are strided. Otherwise a coalesced COO array that specifies the
        product of every pair of specified elements, and nothing else: as in every product, an
        unspecified element is a structural zero (``docs/linalg.md``), and every element of a strided
        operand is specified (its zeros included; pass ``xsparse.to_sparse(x)`` to leave them out, as
        SciPy does). Dense dimensions of a sparse operand become sparse ones. The dtype is the operands'
        promoted one; the indices are int64 where an operand's are, else int32 where it addresses the
        result. A sparse operand with another fill value has no sparse Kronecker product:
        :class:`~xsparse.NoKernelError` says so.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [1.0, 2.0], (2, 2))
    >>> k = xs.kron(a, xs.eye(2, layout=xs.sparse_coo))
    >>> k.layout, k.nnz, xs.to_dense(k).tolist()
    (xsparse.sparse_coo, 4, [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [2.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]])
    >>> xs.kron(a, np.asarray([10.0, 20.0]), layout=xs.sparse_csr).crow_indices().tolist()
    [0, 2, 4]
    """
    op = "kron"
    backend, xp = _prepare(op, x1=x1, x2=x2)
    x1, x2 = _sum_before_cast(xp, x1, x2)
    s1, s2 = _shape(x1), _shape(x2)
    ndim = max(len(s1), len(s2))
    p1, p2 = (1,) * (ndim - len(s1)) + s1, (1,) * (ndim - len(s2)) + s2
    shape = tuple(a * b for a, b in zip(p1, p2))
    if any(size >= 2**63 for size in shape):
        raise ValueError(
            f"{op}: the result would have a dimension of {max(shape)} elements, more than int64 indices address "
            f"(x1.shape={s1}, x2.shape={s2}). Multiply smaller arrays."
        )
    return convert_result(_call(op, (layout_of(x1), layout_of(x2)), backend, xp, x1, x2, shape), layout, op)


def _length(axes: Any) -> int | None:
    """The number of axes in ``axes``, None where it is no sequence (an int, a string, a 0-d array)."""
    if isinstance(axes, str):
        return None
    try:
        return len(axes)
    except TypeError:
        return None


def _axis(op: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for {ndim} dimensions (axis={axis}, ndim={ndim}). Pass an axis in [-{ndim}, {ndim}).")
    return axis % ndim


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, layout: Layout | None = None) -> Any:
    """Dot products of the vectors along ``axis``: ``sum(conj(x1) * x2, axis=axis)``, broadcasting.

    Sparse with strided gives strided, sparse with sparse gives COO; a sparse operand's non-zero fill
    value is handled exactly with a strided partner.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1], [1, 2]], [2.0, 3.0], (2, 3))
    >>> xs.vecdot(a, np.ones((2, 3))).tolist()
    [2.0, 3.0]
    """
    op = "vecdot"
    backend, xp = _prepare(op, x1=x1, x2=x2)
    x1, x2 = _sum_before_cast(xp, x1, x2)
    s1, s2 = _shape(x1), _shape(x2)
    axis = integer_argument(op, "axis", axis, "Pass a negative axis such as -1.")
    if not s1 or not s2:
        raise ValueError(f"{op}: both operands need at least one dimension (x1.shape={s1}, x2.shape={s2}). Use xsparse.multiply for scalars.")
    full = _broadcast(op, "shapes", s1, s2)
    rank = min(len(s1), len(s2))
    negative = axis if axis < 0 else axis - len(full)
    if not -rank <= negative <= -1:
        raise ValueError(
            f"{op}: axis {axis} is not a dimension of both operands (x1.shape={s1}, x2.shape={s2}). Pass an axis in "
            f"[-{rank}, -1]."
        )
    if s1[negative] != s2[negative]:
        raise ValueError(f"{op}: the vectors differ in length along axis {axis} (x1.shape={s1}, x2.shape={s2}). Pass vectors of one length.")
    return convert_result(_call(op, (layout_of(x1), layout_of(x2)), backend, xp, x1, x2, negative), layout, op)


# -- solving -------------------------------------------------------------------------------------------


def spsolve(A: Any, B: Any, /, *, left: bool = True, layout: Layout | None = None) -> Any:
    """Solve ``A X = B`` (``X A = B`` with ``left=False``) for a square sparse ``A`` (torch.sparse.spsolve).

    The kernels per backend: NumPy factorizes with SciPy's SuperLU; torch on CPU hands its (zero-copy)
    components to the same SuperLU, with gradients for ``B`` and ``A``'s values; every other backend
    runs the generic kernel, restarted GMRES with products through :func:`matmul`, which stops at a
    relative residual of 100 machine epsilons and raises if it does not get there. No kernel forms a
    dense copy of ``A``.

    A float16 or bfloat16 system (both operands of half precision) is solved in float32, and the result
    is float32, on every backend: SuperLU has no half-precision arithmetic (NumPy's and torch's kernels
    widen), and 100 epsilons of float16 (0.1) or bfloat16 (0.8) would accept almost any vector as a
    solution.

    Parameters
    ----------
    A
        ``(N, N)``, sparse (any layout; CSR and CSC are read in place) or strided, floating or complex.
    B
        Strided ``(N,)`` or ``(N, K)`` (``(N,)`` or ``(K, N)`` with ``left=False``).
    left
        Solve ``A X = B`` (default) or ``X A = B``.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 2, 3], [0, 1, 1], [2.0, 1.0, 4.0], (2, 2))
    >>> xs.spsolve(a, np.asarray([3.0, 8.0]))
    array([0.5, 2. ])
    """
    op = "spsolve"
    # an integer B is refused below, with what to do
    backend, xp = _prepare(op, False, A=A, B=B)
    # before the promotion below, which array_api_strict refuses for an integer with a floating dtype
    for name, x in (("A", A), ("B", B)):
        if not xp.isdtype(x.dtype, ("real floating", "complex floating")):
            raise TypeError(f"{op}: {name} must have a floating or complex dtype ({name}.dtype={dtype_name(x.dtype)}). Convert it to a floating dtype first.")
    A, B = _sum_before_cast(xp, A, B)
    if isinstance(B, SparseArray):
        raise TypeError(f"{op}: B must be strided (B layout={B.layout}). Pass xsparse.to_dense(B).")
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{op}: A must be a square matrix (A.shape={_shape(A)}). Pass an (N, N) system.")
    n = A.shape[0]
    along = 0 if left or B.ndim == 1 else 1
    if B.ndim not in (1, 2) or B.shape[along] != n:
        raise ValueError(
            f"{op}: B must be ({n},) or {'(' + str(n) + ', K)' if left else '(K, ' + str(n) + ')'} for A of shape {_shape(A)} "
            f"(B.shape={_shape(B)}). Pass a right-hand side of that shape."
        )
    if isinstance(A, SparseArray) and xp.isdtype(A.dtype, ("real floating", "complex floating")) and not bool(xp.all(xp.isfinite(A._vals))):
        # a NaN pivot reads as a singular factor to SuperLU, and as a failed least-squares step to GMRES
        raise ValueError(
            f"{op}: the matrix holds a NaN or an infinity (shape={tuple(A.shape)}, nnz={A.nnz}). Pass a matrix of finite values."
        )
    if is_half_precision(A.dtype) or is_half_precision(B.dtype):
        # solved in float32 (or the wider dtype of the other operand), to that dtype's tolerance: SciPy's
        # SuperLU reads no bfloat16 ("Half precision" in docs/decisions.md)
        work = working_dtype(xp, xp.result_type(A.dtype, B.dtype))
        A, B = _as_dtype(A, work, xp), _as_dtype(B, work, xp)
    if not flag_argument(op, "left", left):
        # X A = B  <=>  A.mT X.mT = B.mT
        at = matrix_transpose(A)
        bt = B if B.ndim == 1 else xp.matrix_transpose(B)
        x = _call(op, (layout_of(at), strided), backend, xp, at, bt)
        return convert_result(x if B.ndim == 1 else xp.matrix_transpose(x), layout, op)
    return convert_result(_call(op, (layout_of(A), strided), backend, xp, A, B), layout, op)


def working_dtype(xp: Any, dtype: Any) -> Any:
    """The dtype a solve or a decomposition of ``dtype`` computes in: float32 for float16 and bfloat16, which
    no backend's factorizations take (NumPy's, torch's and JAX's dense routines, SciPy's SuperLU), and which
    would leave an iterative method a tolerance of 0.1 or more; ``dtype`` otherwise."""
    return xp.float32 if is_half_precision(dtype) else dtype


# -- decompositions through products with the operand -------------------------------------------------


def _matrix_operand(op: str, A: Any) -> tuple[Backend, Any]:
    backend, xp = _prepare(op, A=A)
    if A.ndim != 2:
        raise ValueError(f"{op}: A must be 2-D (A.shape={_shape(A)}). Decompose the matrices of a batch one at a time.")
    if not xp.isdtype(A.dtype, "numeric"):
        raise TypeError(f"{op}: A must have a floating or complex dtype (A.dtype={A.dtype}). Convert it to a floating dtype first.")
    return backend, xp


def _convert_all(results: tuple[Any, ...], layout: Layout | None, op: str) -> tuple[Any, ...]:
    return tuple(convert_result(r, layout, op) for r in results)


def _decomposition_dtype(op: str, xp: Any, A: Any, **others: Any) -> Any:
    """The dtype the decomposition runs in: the promotion of the floating operands among ``A`` and ``others``,
    float32 for half precision (:func:`working_dtype`).

    Integer operands take that dtype rather than joining the promotion, so that the result does not depend
    on a backend's mixed-kind rules (NumPy widens float32 with int64, torch and the Array API do not)."""
    dtypes = []
    for name, x in {"A": A, **others}.items():
        if x is None:
            continue
        if x.dtype == xp.bool:
            raise TypeError(f"{op}: {name} has a boolean dtype ({name}.dtype=bool). Convert it to a floating dtype first.")
        if xp.isdtype(x.dtype, ("real floating", "complex floating")):
            dtypes.append(x.dtype)
    if not dtypes:
        given = ", ".join(f"{name}.dtype={dtype_name(x.dtype)}" for name, x in {"A": A, **others}.items() if x is not None)
        raise TypeError(
            f"{op}: A must have a floating or complex dtype ({given}), or another operand one, whose dtype it then takes. "
            "Convert it to a floating dtype first."
        )
    return working_dtype(xp, xp.result_type(*dtypes))


def _as_dtype(x: Any, dtype: Any, xp: Any) -> Any:
    if x is None or x.dtype == dtype:
        return x
    if isinstance(x, SparseArray):
        from ._indexing import astype

        return astype(x, dtype, copy=False)
    return xp.astype(x, dtype)


def svd_lowrank(
    A: Any, q: int | None = 6, niter: int = 2, M: Any = None, *, seed: Any = None, layout: Layout | None = None
) -> tuple[Any, Any, Any]:
    """Approximate truncated SVD, ``A - M ~ U diag(S) V^H``, by randomized subspace iteration (torch.svd_lowrank).

    ``A`` enters through products only (``A @ X`` and ``A^H @ X`` through :func:`matmul`), so any layout
    works and nothing is densified; the factors are strided.

    Parameters
    ----------
    A
        ``(M, N)``, sparse or strided, floating or complex; float16 and bfloat16 are decomposed in
        float32, and the factors are float32.
    q
        The rank of the approximation (default 6), at most ``min(M, N)``.
    niter
        Subspace iterations (default 2), at least 0.
    M
        A strided array of at most 2 dimensions broadcast to ``A``'s shape, subtracted implicitly
        (default none), of ``A``'s backend. ``A`` and ``M`` are brought to one dtype (their floating
        dtypes promoted; an integer ``M`` takes ``A``'s).
    seed
        Seeds the Gaussian test matrix (NumPy's ``default_rng``: None, a non-negative int, a sequence of
        them, or a Generator); the torch kernel seeds torch's generator with an int, in a forked RNG
        state, and leaves other seeds to the generic kernel.

    Returns
    -------
    U, S, V
        ``(M, q)``, ``(q,)``, ``(N, q)``.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.to_sparse_csr(np.diag([5.0, 3.0, 0.0, 0.0]))
    >>> U, S, V = xs.svd_lowrank(a, q=2, seed=0)
    >>> np.round(S, 8).tolist()
    [5.0, 3.0]
    """
    op = "svd_lowrank"
    backend, xp = _matrix_operand(op, A)
    q = 6 if q is None else integer_argument(op, "q", q)
    if not 1 <= q <= min(A.shape):
        raise ValueError(f"{op}: q must lie in [1, min(A.shape)] (q={q}, A.shape={_shape(A)}). Ask for a smaller rank.")
    niter = _lowrank_niter(op, niter)
    seed = seed_argument(op, seed)
    if M is not None:
        _check_operand(op, "M", M)
        backend_of(A, M, op=op)
        if isinstance(M, SparseArray):
            raise TypeError(f"{op}: M must be strided (M layout={M.layout}). Pass xsparse.to_dense(M).")
        if M.ndim > 2:
            raise ValueError(f"{op}: M must broadcast to A's shape without batch dimensions (M.shape={_shape(M)}, A.shape={_shape(A)}). Pass a 2-D M.")
        _broadcast(op, "shapes of A and M", _shape(A), _shape(M))
    # one dtype for A and M, so that every backend computes (and returns) the same promotion; float32 for
    # half precision, which no backend's QR takes
    dtype = _decomposition_dtype(op, xp, A, M=M)
    A, M = _as_dtype(A, dtype, xp), _as_dtype(M, dtype, xp)
    return cast(tuple[Any, Any, Any], _convert_all(_call(op, (layout_of(A),), backend, xp, A, q, niter, M, seed), layout, op))


def _lowrank_niter(op: str, niter: Any) -> int:
    count = integer_argument(op, "niter", niter)
    if count < 0:
        raise ValueError(f"{op}: niter must be at least 0 (niter={count}). Pass the number of subspace iterations, 0 for none.")
    return count


def pca_lowrank(
    A: Any, q: int | None = None, center: bool = True, niter: int = 2, *, seed: Any = None, layout: Layout | None = None
) -> tuple[Any, Any, Any]:
    """Principal component analysis of a low-rank matrix (torch.pca_lowrank): ``svd_lowrank`` of ``A``
    minus its column means, the centering kept implicit so that a sparse ``A`` stays sparse.

    Parameters
    ----------
    A
        ``(M, N)``, sparse or strided, floating or complex (half precision in float32, as for
        :func:`svd_lowrank`).
    q
        The rank (default ``min(6, M, N)``).
    center
        Subtract the column means (default True).
    niter, seed
        As for :func:`svd_lowrank`.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.to_sparse_coo(np.asarray([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0], [-2.0, 0.0]]))
    >>> U, S, V = xs.pca_lowrank(a, q=1, seed=0)
    >>> np.round(S, 8).tolist(), np.round(np.abs(V), 8).tolist()
    ([2.82842712], [[1.0], [0.0]])
    """
    op = "pca_lowrank"
    backend, xp = _matrix_operand(op, A)
    q = min(6, *A.shape) if q is None else integer_argument(op, "q", q)
    niter = _lowrank_niter(op, niter)
    seed = seed_argument(op, seed)
    if not 1 <= q <= min(A.shape):
        raise ValueError(f"{op}: q must lie in [1, min(A.shape)] (q={q}, A.shape={_shape(A)}). Ask for a smaller rank.")
    A = _as_dtype(A, _decomposition_dtype(op, xp, A), xp)
    return cast(tuple[Any, Any, Any], _convert_all(_call(op, (layout_of(A),), backend, xp, A, q, flag_argument(op, "center", center), niter, seed), layout, op))


def lobpcg(
    A: Any,
    k: int | None = None,
    B: Any = None,
    X: Any = None,
    n: int | None = None,
    iK: Any = None,
    niter: int | None = None,
    tol: float | None = None,
    largest: bool | None = None,
    method: str | None = None,
    tracker: Callable[[LobpcgState], Any] | None = None,
    ortho_iparams: dict[str, int] | None = None,
    ortho_fparams: dict[str, float] | None = None,
    ortho_bparams: dict[str, bool] | None = None,
    *,
    seed: Any = None,
    layout: Layout | None = None,
) -> tuple[Any, Any]:
    """The ``k`` largest (or smallest) eigenpairs of ``A X = B X E`` for symmetric (Hermitian) ``A`` and
    positive definite ``B``, by LOBPCG, with torch.lobpcg's parameters.

    ``A``, ``B`` and the preconditioner ``iK`` enter through products only, so they may be sparse in any
    layout. ``A``, ``B`` and ``iK`` are brought to one dtype (their floating dtypes promoted; an integer
    operand takes the result; float16 and bfloat16 take float32) and ``X`` is cast to it.

    Parameters
    ----------
    A
        ``(m, m)``, sparse or strided, floating.
    k
        The number of eigenpairs (default: ``X``'s columns, or 1).
    B, iK
        The mass matrix and the preconditioner, ``(m, m)`` (default: identity).
    X
        Initial ``(m, n)`` approximation (default: Gaussian, from ``seed``).
    n
        The block size (default ``k``); ``m`` must be at least ``3 * n``.
    niter
        The most iterations (default 1000). As in torch, ``-1`` (or any ``niter <= 0``) iterates until every
        pair has converged, with no bound.
    tol
        A pair has converged when its backward error ``|r| / (|x| (|A| + |e| |B|))`` is below ``tol``
        (``r = A x - e B x``; ``|A|``, ``|B|`` estimated from the initial block), as in torch (default:
        the square root of the dtype's epsilon); must be positive.
    largest
        Largest (default) or smallest eigenpairs.
    method
        ``"ortho"`` (default): the search basis is kept B-orthonormal (Stathopoulos & Wu 2002; Duersch
        et al. 2018), robust. ``"basic"``: Knyazev's original LOBPCG, cheaper per step; when its basis
        loses independence it stops with an error that suggests ``"ortho"``. ``docs/linalg.md`` gives
        the details.
    tracker
        Called after every step with the iteration state, a
        :class:`~xsparse.backends.array_api.linalg.LobpcgState` (torch's attribute names: ``ivars["istep"]``,
        ``E``, ``X``, ``R``, ``S``, ``tvars["rerr"]``, ...); setting ``state.bvars["force_stop"] = True``
        ends the iteration. The tracker always sees xsparse's own iteration, on every backend.
    ortho_iparams, ortho_fparams, ortho_bparams
        ``method="ortho"`` only: ``{"ortho_i_max": 3, "ortho_j_max": 3}`` (the most projection passes and
        SVQB passes per projection), ``{"ortho_tol", "ortho_tol_drop", "ortho_tol_replace"}`` (default
        ``tol``: the relative error that ends the passes, and the relative size below which a direction
        is dropped or raised), ``{"ortho_use_drop": False}`` (whether SVQB passes after the first drop
        small directions instead of raising them). Any key left out keeps its default.

    Returns
    -------
    E, X
        ``(k,)`` eigenvalues and ``(m, k)`` B-orthonormal eigenvectors, strided, in the order the pairs
        converged, as torch.lobpcg returns them: usually the most extreme first, but ``method="ortho"``
        locks a pair as soon as it converges, so an initial ``X`` that holds an exact eigenvector can put
        its eigenvalue first. Sort ``E`` (and ``X``'s columns with it) where the order matters.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.to_sparse_csr(np.diag(np.arange(1.0, 10.0)))
    >>> E, X = xs.lobpcg(a, k=2, seed=0)
    >>> np.round(E, 6).tolist()
    [9.0, 8.0]
    >>> steps = []
    >>> E, X = xs.lobpcg(a, k=1, largest=False, method="basic", tracker=lambda s: steps.append(s.istep), seed=0)
    >>> np.round(E, 6).tolist(), steps[:3]
    ([1.0], [1, 2, 3])
    """
    op = "lobpcg"
    backend, xp = _matrix_operand(op, A)
    size = A.shape[0]
    if A.shape[1] != size:
        raise ValueError(f"{op}: A must be square (A.shape={_shape(A)}). Pass a symmetric matrix.")
    for name, m in (("B", B), ("iK", iK)):
        if m is not None:
            _check_operand(op, name, m)
            if _shape(m) != (size, size):
                raise ValueError(f"{op}: {name} must have A's shape ({name}.shape={_shape(m)}, A.shape={_shape(A)}). Pass a ({size}, {size}) matrix.")
    if X is not None:
        _check_operand(op, "X", X)
        if isinstance(X, SparseArray) or X.ndim != 2 or X.shape[0] != size:
            raise ValueError(f"{op}: X must be a strided ({size}, n) array (X.shape={_shape(X)}). Pass one column per eigenvector sought.")
    backend_of(A, B, X, iK, op=op)
    # A, B and iK in one dtype (X follows them), so that every backend solves the same problem
    dtype = _decomposition_dtype(op, xp, A, B=B, iK=iK)
    if X is not None:
        if X.dtype == xp.bool or (xp.isdtype(X.dtype, "complex floating") and not xp.isdtype(dtype, "complex floating")):
            raise TypeError(
                f"{op}: X's dtype does not fit the problem's (X.dtype={X.dtype}, dtype={dtype}). Pass a real X for real A, B "
                "and iK, or a complex A for complex eigenvectors."
            )
        X = _as_dtype(X, dtype, xp)
    A, B, iK = (_as_dtype(m, dtype, xp) for m in (A, B, iK))
    k = (X.shape[1] if X is not None else 1) if k is None else integer_argument(op, "k", k)
    n = (X.shape[1] if X is not None else k) if n is None else integer_argument(op, "n", n)
    if not 1 <= k <= n:
        raise ValueError(f"{op}: k must lie in [1, n] (k={k}, n={n}). Ask for at most n eigenpairs.")
    if size < 3 * n:
        raise ValueError(
            f"{op}: LOBPCG needs at least 3 * n rows (A.shape={_shape(A)}, n={n}). Ask for fewer eigenpairs, or use a dense "
            "eigensolver on xsparse.to_dense(A)."
        )
    # torch.lobpcg counts iterations down and stops at exactly 0, so any niter <= 0 (-1 is the documented
    # spelling) iterates until convergence; the generic kernel does the same
    niter = 1000 if niter is None else integer_argument(op, "niter", niter)
    if tol is None:
        tol = float(xp.finfo(A.dtype).eps) ** 0.5
    elif isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: tol must be a real number, got {type(tol).__name__} (tol={tol!r}). Pass a positive float such as 1e-8.")
    elif not tol > 0:
        raise ValueError(
            f"{op}: tol must be positive (tol={tol!r}); no pair would ever converge. Pass a positive float such as 1e-8, and "
            "niter to bound the iterations."
        )
    tol = float(tol)
    seed = seed_argument(op, seed)
    largest = True if largest is None else largest
    options = _lobpcg_options(op, tol, method, tracker, ortho_iparams, ortho_fparams, ortho_bparams)
    result = _call(op, (layout_of(A),), backend, xp, A, k, B, X, n, iK, niter, tol, flag_argument(op, "largest", largest), options, seed)
    return cast(tuple[Any, Any], _convert_all(result, layout, op))


_ORTHO_KEYS = {
    "ortho_iparams": (_generic.ORTHO_IPARAMS.keys(), "a positive integer"),
    "ortho_fparams": (_generic.ORTHO_FPARAMS, "a positive finite number"),
    "ortho_bparams": (_generic.ORTHO_BPARAMS.keys(), "a bool"),
}


def _ortho_value_ok(kind: str, value: Any) -> bool:
    if kind == "ortho_iparams":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if kind == "ortho_fparams":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")
    return isinstance(value, bool)


def _lobpcg_options(
    op: str, tol: float, method: str | None, tracker: Any, iparams: Any, fparams: Any, bparams: Any
) -> _generic.LobpcgOptions:
    """Check lobpcg's method, tracker and ortho parameters, and fill in the defaults."""
    method = "ortho" if method is None else method
    if method not in ("basic", "ortho"):
        raise ValueError(f"{op}: method must be 'basic', 'ortho' or None (method={method!r}). Pick one of them.")
    if tracker is not None and not callable(tracker):
        raise TypeError(
            f"{op}: tracker must be callable or None (tracker={tracker!r}). Pass a function that takes the iteration state."
        )
    given = {"ortho_iparams": iparams, "ortho_fparams": fparams, "ortho_bparams": bparams}
    for kind, params in given.items():
        if params is None:
            continue
        if not isinstance(params, dict):
            raise TypeError(f"{op}: {kind} must be a dict or None ({kind}={params!r}). Pass a dict of parameters.")
        if method != "ortho":
            raise ValueError(
                f"{op}: {kind} apply to method='ortho' only (method={method!r}). Leave them out, or use method='ortho'."
            )
        keys, what = _ORTHO_KEYS[kind]
        for key, value in params.items():
            if key not in keys:
                raise ValueError(f"{op}: {kind} has an unknown key ({key!r}). Use {', '.join(map(repr, keys))}.")
            if not _ortho_value_ok(kind, value):
                raise ValueError(f"{op}: {kind}[{key!r}] must be {what} ({key}={value!r}). Pass {what}.")
    if method != "ortho":
        return _generic.LobpcgOptions("basic", tracker)
    return _generic.LobpcgOptions(
        "ortho",
        tracker,
        {**_generic.ORTHO_IPARAMS, **(iparams or {})},
        {**dict.fromkeys(_generic.ORTHO_FPARAMS, float(tol)), **{key: float(v) for key, v in (fparams or {}).items()}},
        {**_generic.ORTHO_BPARAMS, **(bparams or {})},
    )
