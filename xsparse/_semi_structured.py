"""The semi-structured (2:4) layout's public functions: conversion, ``linear`` and ``detach``.

Products (``@``, ``xs.matmul``, ``xs.mm``, ``xs.addmm``) are the linear-algebra functions of
``_linalg.py``, which dispatch to the layout's kernels. The format and its metadata encoding are in
``formats/_semi_structured.py``; the generic kernels in ``backends/array_api/semi_structured.py``.
``docs/semi_structured.md`` is the user's page.
"""

from __future__ import annotations

from typing import Any, cast

from . import dispatch
from ._common import backend_of, is_strided, scalar_for
from ._conversion import check_namespace_dtype, layout_of, matrix_transpose
from .formats import COOArray, CompressedArray, SparseArray, sparse_semi_structured
from .formats._semi_structured import SemiStructuredArray, check_stored_shape, pattern_for
from .formats._spec import Target

__all__ = ["to_sparse_semi_structured", "linear", "detach"]


def _check_array(op: str, name: str, x: Any) -> None:
    if not isinstance(x, SparseArray) and not is_strided(x, op):
        raise TypeError(
            f"{op}: {name} must be an xsparse array or a backend array, got {type(x).__name__}. Create one with the "
            "backend's asarray (or an xsparse constructor) first."
        )


def to_sparse_semi_structured(x: Any, /) -> SemiStructuredArray:
    """Convert a 2-D array whose every group of 4 elements of a row holds at most 2 specified ones (1 of 2 for float32).

    torch's ``to_sparse_semi_structured``, on every backend: the result keeps each row's specified
    elements (padded with explicit zeros in groups that hold fewer) and a metadata encoding of their
    positions (see ``docs/semi_structured.md``).

    Parameters
    ----------
    x
        A 2-D strided array, or a 2-D sparse array (COO, CSR, CSC, BSR, BSC; its fill value is kept).
        float16, bfloat16 and int8 arrays keep 2 of every 4 elements, float32 arrays 1 of every 2.
        Rows and columns must be positive multiples of 64 (float16, bfloat16), 128 (int8) or 32
        (float32), as in torch's table.

    Returns
    -------
    SemiStructuredArray
        With ``values()`` of shape ``(rows, cols // 2)`` and ``indices()`` (the metadata) of int16 words,
        or int32 words for int8. A semi-structured ``x`` is returned as is. From a torch CUDA array
        (fill value 0, not requiring grad, a dtype torch's cuSPARSELt or CUTLASS kernels take on that
        GPU), the result also carries ``packed``: torch's ``SparseSemiStructuredTensor`` of the same
        matrix, which ``@``, ``addmm`` and ``linear`` use; from a CuPy array of float16, bfloat16 or
        int8 on a GPU with cuSPARSELt, cuSPARSELt's compressed buffer; elsewhere ``packed`` is ``None`` (see
        ``docs/semi_structured.md``, "The CUDA path").

    Raises
    ------
    InvariantError
        ``ss.2`` for another dtype, ``ss.4`` for an array that is not 2-D (or has dense dimensions),
        ``ss.5`` for a shape that breaks the table, ``ss.11`` naming the first row and group that holds
        too many specified elements.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = np.tile(np.asarray([0, 0, 1, 1], dtype=np.float16), (64, 16))
    >>> s = xs.to_sparse_semi_structured(a)
    >>> s.shape, s.values().shape, s.indices().shape, s.indices().dtype
    ((64, 64), (64, 32), (64, 4), dtype('int16'))
    >>> int(s.indices()[0, 0])
    -4370
    >>> bool((s.to_dense() == a).all())
    True
    >>> s.packed is None
    True
    """
    op = "to_sparse_semi_structured"
    _check_array(op, "x", x)
    if isinstance(x, SemiStructuredArray):
        return x
    backend = backend_of(x, op=op)
    xp = backend.load()
    if not isinstance(x, SparseArray):
        check_namespace_dtype(op, backend, xp, x)
    pattern = pattern_for(op, x.dtype)
    dense_dim = x.dense_dim() if isinstance(x, (COOArray, CompressedArray)) else 0
    if x.ndim != 2 or dense_dim:
        from .formats._invariants import _fail

        raise _fail(
            "ss.4",
            f"a semi-structured array is 2-D with no dense dimensions (shape={tuple(x.shape)}, dense_dim={dense_dim}). "
            "Convert one matrix at a time, e.g. x[0] of a batch",
            op,
        )
    shape = (int(x.shape[0]), int(x.shape[1]))
    check_stored_shape(op, pattern, shape)
    fill = x.fill_value if isinstance(x, SparseArray) else scalar_for(xp, x.dtype, 0)
    target = Target(sparse_semi_structured, backend, xp, shape, 2, 0, (1, 1), xp.int64, fill)
    return cast(SemiStructuredArray, dispatch.call("convert", (layout_of(x), sparse_semi_structured), backend.name, xp, x, target))


def linear(input: Any, weight: Any, bias: Any = None, /) -> Any:
    """torch.nn.functional.linear: ``input @ weight.T + bias``, the way a semi-structured weight is used.

    Parameters
    ----------
    input
        ``(..., in_features)``, strided.
    weight
        ``(out_features, in_features)``: a semi-structured array (its pattern runs along ``in_features``,
        the contracted dimension, which is what the hardware accelerates) or any array whose product
        with ``input`` has a kernel.
    bias
        ``(out_features,)`` or a scalar array, or ``None``.

    Returns
    -------
    array
        ``(..., out_features)``, strided.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> mask = np.tile(np.asarray([0, 0, 1, 1], dtype=np.float16), (64, 16))
    >>> w = (np.arange(64 * 64).reshape(64, 64) % 5).astype(np.float16) * mask
    >>> x = np.ones((2, 64), dtype=np.float16)
    >>> bias = np.arange(64, dtype=np.float16)
    >>> y = xs.linear(x, xs.to_sparse_semi_structured(w), bias)
    >>> y.shape, bool((y == x @ w.T + bias).all())
    ((2, 64), True)
    """
    op = "linear"
    _check_array(op, "input", input)
    _check_array(op, "weight", weight)
    if bias is not None:
        _check_array(op, "bias", bias)
    backend = backend_of(input, weight, bias, op=op)
    xp = backend.load()
    if weight.ndim != 2:
        raise ValueError(f"{op}: weight must be 2-D (out_features, in_features) (weight.shape={tuple(weight.shape)}). Pass a matrix.")
    out_features, in_features = weight.shape
    if input.ndim == 0 or input.shape[-1] != in_features:
        raise ValueError(
            f"{op}: input's last dimension must equal weight's in_features={in_features} (input.shape={tuple(input.shape)}, "
            f"weight.shape={tuple(weight.shape)}). Give input the shape (..., {in_features})."
        )
    if bias is not None and (bias.ndim > 1 or (bias.ndim == 1 and bias.shape[0] not in (1, out_features))):
        raise ValueError(
            f"{op}: bias must have the shape ({out_features},) (bias.shape={tuple(bias.shape)}, out_features={out_features}). "
            "Pass one bias per output feature."
        )
    # (..., in) -> (batch, in), as torch's linear does, so that every kernel sees a matrix
    lead = tuple(input.shape[:-1])
    x2 = xp.reshape(input, (-1, in_features)) if is_strided(input) and input.ndim != 2 else input
    wt = matrix_transpose(weight)
    if bias is None:
        out = dispatch.call("matmul", (layout_of(x2), layout_of(wt)), backend.name, xp, x2, wt)
    else:
        out = dispatch.call("addmm", (layout_of(bias), layout_of(x2), layout_of(wt)), backend.name, xp, bias, x2, wt, 1, 1)
    return xp.reshape(out, (*lead, out_features)) if x2 is not input else out


def detach(x: SparseArray, /) -> SparseArray:
    """torch's ``detach``: the same array whose values no longer record autograd history.

    On torch the values are detached (the components are shared, not copied); the Array API has no
    autograd, so every other backend returns ``x`` itself.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> s = xs.to_sparse_semi_structured(np.tile(np.asarray([1, 0], dtype=np.float32), (32, 16)))
    >>> s.detach() is s
    True
    """
    if not isinstance(x, SparseArray):
        raise TypeError(f"detach: x must be an xsparse array, got {type(x).__name__}. A backend array has its own detach (torch).")
    xp = x._backend.load()
    return cast(SparseArray, dispatch.call("detach", (x.layout,), x._backend.name, xp, x))
