"""Every user-facing error of the public layer and the formats, and the error hierarchy.

STYLE.md: every message is covered by a test with ``pytest.raises(..., match=...)``, and has the shape
``<operation>: <what is wrong> (<name>=<value>, ...). <How to fix>.`` Each case below triggers one
``raise`` of ``xsparse/_creation.py``, ``_conversion.py``, ``_common.py`` or ``xsparse/formats/`` (the
invariants themselves are broken one by one in ``test_invariants.py``); :func:`test_message_shape` then
checks the message's shape. The dispatcher, the backend registry, the bound namespace and ``__array__``
/ ``__dlpack__`` have their own tests.
"""

from __future__ import annotations

import math
import pathlib
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xsparse as xs

# <operation>: <what is wrong>. <How to fix>.  -- the operation has no colon; the fix is a capitalised
# sentence after the first full stop that ends a clause, and the message ends with a full stop.
MESSAGE_SHAPE = re.compile(r"[^\s:][^:\n]*: \S.*?[^.\s]\. [A-Z].*\.", re.S)


def _dense() -> np.ndarray:
    return np.arange(16.0).reshape(4, 4)


def _csr() -> Any:
    return xs.sparse_csr_array([0, 2, 3], [0, 1, 1], [1.0, 2.0, 3.0], (2, 2))


def _csr_hybrid() -> Any:
    return xs.sparse_csr_array([0, 1, 2], [0, 1], np.ones((2, 3)), (2, 2, 3))


def _coo_uncoalesced() -> Any:
    return xs.sparse_coo_array([[0, 0]], [1.0, 2.0], (2,))


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[], Any]:
    return lambda: fn(*args, **kwargs)



# (id, what to call, exception, match, xfail reason for the shape check or None)
CASES: list[Any] = [  # (id, call, exception, match, shape xfail reason) tuples, or pytest.param of the same
    # ---- _creation.py -------------------------------------------------------------------------------
    ("creation-index-dtype", _call(xs.sparse_coo_array, np.asarray([[0.0]]), [1.0]), xs.InvariantError,
     r"^invariant 1\.3 violated: sparse_coo_array: indices must have dtype int32 or int64, got float64\. Cast it", None),
    ("creation-index-float-list", _call(xs.sparse_csr_array, [0, 1], [0.5], [1.0]), xs.InvariantError,
     r"^invariant 1\.3 violated: sparse_compressed_array\(layout=sparse_csr\): col_indices must have dtype int32 or int64, got float", None),
    ("creation-index-ragged-list", _call(xs.sparse_coo_array, [[0, [1]]], [1.0]), TypeError,
     r"^sparse_coo_array: indices must be an integer array or a nested list of integers \(.*\)\. Pass a rectangular", None),
    ("creation-sparse-values", _call(xs.sparse_coo_array, [[0]], xs.sparse_coo_array([[0]], [1.0])), xs.InvariantError,
     r"^invariant 2\.3 violated: sparse_coo_array: values must be a strided array of the backend, got COOArray \(sparse_coo\)", None),
    ("creation-sparse-index", _call(xs.sparse_csc_array, _csr(), [0], [1.0]), xs.InvariantError,
     r"^invariant 2\.1 violated: sparse_compressed_array\(layout=sparse_csc\): ccol_indices must be a strided array", None),
    ("creation-shape-not-sequence", _call(xs.sparse_coo_array, [[0]], [1.0], 3), TypeError,
     r"^sparse_coo_array: shape must be a sequence of integers, got 3\. Pass a tuple", None),
    ("creation-shape-not-integers", _call(xs.sparse_csr_array, [0, 1], [0], [1.0], ["a", "b"]), TypeError,
     r"^sparse_compressed_array\(layout=sparse_csr\): shape must be a sequence of integers, got \['a', 'b'\]", None),
    ("creation-coo-nothing", _call(xs.sparse_coo_array), ValueError,
     r"^sparse_coo_array: no indices, values or shape were given\. Give indices and values, or a shape", None),
    ("creation-coo-no-values", _call(xs.sparse_coo_array, [[0]]), ValueError,
     r"^sparse_coo_array: only one of indices and values was given \(indices=\.\.\., values=None\)\. Give both", None),
    ("creation-coo-no-indices", _call(xs.sparse_coo_array, values=[1.0]), ValueError,
     r"^sparse_coo_array: only one of indices and values was given \(indices=None, values=\.\.\.\)", None),
    ("creation-coo-indices-1d", _call(xs.sparse_coo_array, [0, 1], [1.0, 2.0]), xs.InvariantError,
     r"^invariant coo\.1 violated: sparse_coo_array: indices must be 2-D \(sparse_dim, nse\), got shape \(2,\)\. A list of index tuples must be transposed", None),
    ("creation-compressed-layout-coo", _call(xs.sparse_compressed_array, [0, 1], [0], [1.0], layout=xs.sparse_coo), xs.LayoutError,
     r"^sparse_compressed_array\(layout=sparse_coo\): layout must be sparse_csr, sparse_csc, sparse_bsr or sparse_bsc, got xsparse\.sparse_coo\. Pass one", None),
    ("creation-compressed-layout-str", _call(xs.sparse_compressed_array, [0, 1], [0], [1.0], layout="csr"), xs.LayoutError,
     r"^sparse_compressed_array\(layout=csr\): layout must be .*, got 'csr'", None),
    ("creation-compressed-nothing", _call(xs.sparse_csr_array), ValueError,
     r"^sparse_compressed_array\(layout=sparse_csr\): no components or shape were given\. Give the components", None),
    ("creation-compressed-partial", _call(xs.sparse_bsc_array, [0, 1], [0]), ValueError,
     r"^sparse_compressed_array\(layout=sparse_bsc\): only 2 of the three components were given\. Give all three", None),
    ("creation-infer-3.2", _call(xs.sparse_csr_array, np.asarray(0), [0], [1.0]), xs.InvariantError,
     r"^invariant 3\.2 violated: sparse_compressed_array\(layout=sparse_csr\): crow_indices must have at least one dimension", None),
    ("creation-infer-3.3", _call(xs.sparse_csc_array, [0, 1], [[0]], [1.0]), xs.InvariantError,
     r"^invariant 3\.3 violated: .*: ccol_indices and row_indices must have the same number of dimensions, got 1 and 2", None),
    ("creation-infer-3.4", _call(xs.sparse_bsr_array, [0, 1], [0], [1.0]), xs.InvariantError,
     r"^invariant 3\.4 violated: .*: values\.ndim must be at least 3, got 1\. Give values the shape \(\*batch, nse, \*block, \*dense\)", None),
    ("creation-empty-dense-dim-too-large", _call(xs.sparse_csr_array, shape=(2, 2), dense_dim=1), ValueError,
     r"^sparse_compressed_array\(layout=sparse_csr\): .* dense_dim must lie in \[0, 0\], got dense_dim=1\. Give a shape", None),
    ("creation-empty-dense-dim-negative", _call(xs.zeros, (2, 2), layout=xs.sparse_csc, dense_dim=-1), ValueError,
     r"^zeros: a sparse_csc array of shape \(2, 2\) .* dense_dim must lie in \[0, 0\], got dense_dim=-1", None),
    ("creation-empty-negative-size", _call(xs.sparse_csr_array, shape=(-2, 3)), xs.InvariantError,
     r"^invariant 3\.1 violated: sparse_compressed_array\(layout=sparse_csr\): shape \(-2, 3\) has a negative size\. Give non-negative sizes\.$", None),
    ("creation-infer-negative-index", _call(xs.sparse_coo_array, [[-1, 0]], [1.0, 2.0]), xs.InvariantError,
     r"^invariant coo\.5 violated: sparse_coo_array: indices\[0\] must be non-negative to infer the shape, got -1\. Fix the indices, or give the shape\.$", None),
    ("creation-infer-negative-plain-index", _call(xs.sparse_csr_array, [0, 1, 2], [0, -1], [1.0, 2.0]), xs.InvariantError,
     r"^invariant 5\.4 violated: sparse_compressed_array\(layout=sparse_csr\): col_indices must be non-negative to infer the shape, got -1\. Fix the indices, or give the shape\.$", None),
    ("creation-is-coalesced-not-bool", _call(xs.sparse_coo_array, [[1, 0]], [1.0, 2.0], (2,), is_coalesced="no"), TypeError,
     r"^sparse_coo_array: is_coalesced must be True or False, got str \(is_coalesced='no'\)\. Pass a bool\.$", None),
    ("creation-check-invariants-not-bool", _call(xs.sparse_csr_array, [0, 1], [5], [1.0], (1, 2), check_invariants="no"), TypeError,
     r"^sparse_compressed_array\(layout=sparse_csr\): check_invariants must be True or False, got str \(check_invariants='no'\)\. Pass a bool\.$", None),
    ("creation-empty-blocked-no-blocksize", _call(xs.sparse_bsr_array, shape=(2, 2)), ValueError,
     r"^sparse_compressed_array\(layout=sparse_bsr\): an empty sparse_bsr array needs a blocksize \(blocksize=None\)\. Pass blocksize=", None),
    ("creation-empty-blocksize-not-blocked", _call(xs.zeros, (2, 2), layout=xs.sparse_csr, blocksize=(2, 2)), ValueError,
     r"^zeros: blocksize applies to sparse_bsr and sparse_bsc only, not to sparse_csr \(blocksize=\(2, 2\)\)\. Leave it out", None),
    ("creation-components-blocksize-not-blocked", _call(xs.sparse_csr_array, [0, 1], [0], [1.0], blocksize=(2, 1)), ValueError,
     r"^sparse_compressed_array\(layout=sparse_csr\): blocksize applies to sparse_bsr and sparse_bsc only", None),
    ("creation-components-blocksize-mismatch", _call(xs.sparse_bsr_array, [0, 1], [0], np.ones((1, 2, 2)), blocksize=(1, 2)), ValueError,
     r"^sparse_compressed_array\(layout=sparse_bsr\): blocksize=\(1, 2\) differs from the block shape of the values \(\(2, 2\)\)\. Leave blocksize out", None),
    ("creation-zeros-no-shape", _call(xs.zeros, None), TypeError,
     r"^zeros: shape is required \(shape=None\)\. Pass a shape", None),
    ("creation-zeros-layout", _call(xs.empty, (2, 2), layout="csr"), xs.LayoutError,
     r"^empty: layout must be strided or a sparse layout such as sparse_csr, got 'csr'\. Pass one of", None),
    ("creation-zeros-semi-structured", _call(xs.zeros, (2, 4), layout=xs.sparse_semi_structured), xs.LayoutError,
     r"^zeros: layout must be strided or a sparse layout .*, got xsparse\.sparse_semi_structured", None),
    ("creation-zeros-coo-dense-dim", _call(xs.zeros, (2, 2), layout=xs.sparse_coo, dense_dim=3), ValueError,
     r"^zeros: a sparse_coo array of shape \(2, 2\) has between 0 and 2 sparse dimensions, got sparse_dim=-1 \(sparse_dim=None, dense_dim=3\)", None),
    ("creation-zeros-coo-sparse-dim", _call(xs.zeros, (2, 2), layout=xs.sparse_coo, sparse_dim=-1), ValueError,
     r"^zeros: a sparse_coo array of shape \(2, 2\) has between 0 and 2 sparse dimensions, got sparse_dim=-1", None),
    # sizes and block shapes are integers: int() would truncate 2.5 and read "22" as (2, 2)
    ("creation-float-shape", _call(xs.sparse_csr_array, [0, 1], [0], [1.0], (1.5, 2)), TypeError,
     r"^sparse_compressed_array\(layout=sparse_csr\): shape must be a sequence of integers, got \(1\.5, 2\)\. Pass a tuple", None),
    ("creation-zeros-float-shape", _call(xs.zeros, (2.5, 2), layout=xs.sparse_csr), TypeError,
     r"^zeros: shape must be a sequence of integers, got \(2\.5, 2\)", None),
    ("creation-zeros-inf-shape", _call(xs.zeros, (math.inf, 2)), TypeError,
     r"^zeros: shape must be a sequence of integers, got \(inf, 2\)", None),
    ("creation-eye-float-k", _call(xs.eye, 3, k=0.5), TypeError,
     r"^eye: k must be an integer, got float \(k=0\.5\)\. Pass an integer", None),
    ("creation-eye-bool-n", _call(xs.eye, True), TypeError,
     r"^eye: n_rows must be an integer, not a bool \(n_rows=True\)\. Pass an integer\.$", None),
    ("shape-flip-bool-array-axis", _call(xs.flip, np.ones((2, 2)), axis=np.asarray(True)), TypeError,
     r"^flip: axis must be an integer, not a bool \(axis=array\(True\)\)\. Pass an integer\.$", None),
    ("creation-zeros-zero-blocksize", _call(xs.zeros, (4, 4), layout=xs.sparse_bsr, blocksize=(0, 2)), ValueError,
     r"^zeros: blocksize must be two positive integers \(blocksize=\(0, 2\)\)\. Pass sizes of at least 1", None),
    ("creation-bsr-zero-blocksize", _call(xs.sparse_bsr_array, [0, 1], [0], np.ones((1, 2, 2)), (2, 2), blocksize=(0, 2)), ValueError,
     r"^sparse_compressed_array\(layout=sparse_bsr\): blocksize must be two positive integers", None),
    ("conversion-float-blocksize", _call(xs.to_sparse_bsr, np.ones((4, 4)), (2.5, 2)), TypeError,
     r"^to_sparse\(layout=sparse_bsr\): blocksize must be two integers \(rows, columns\), got \(2\.5, 2\)\. Pass e\.g\. blocksize=\(2, 2\)", None),
    ("conversion-string-blocksize", _call(xs.to_sparse_bsr, np.ones((4, 4)), "22"), TypeError,
     r"^to_sparse\(layout=sparse_bsr\): blocksize must be two integers \(rows, columns\), got '22'", None),
    # ---- _common.py ---------------------------------------------------------------------------------
    ("common-backend-requested", _call(xs.sparse_coo_array, np.asarray([[0]]), [1.0], backend="array_api_strict"), xs.BackendMismatchError,
     r"^sparse_coo_array: backend='array_api_strict' was requested but an operand lives on backend 'numpy'\. Move it first with xsparse\.to_backend", None),
    ("common-dtype", _call(xs.sparse_coo_array, [[0]], [1.0], dtype="float128x"), TypeError,
     r"^sparse_coo_array: 'float128x' is not a dtype name of the Array API standard \(dtype='float128x'\)\. Pass one of 'bool', 'int8'", None),
    ("common-dtype-missing", _call(xs.sparse_coo_array, [[0]], [1.0], dtype="bfloat16"), TypeError,
     r"^sparse_coo_array: the backend \S+ has no dtype 'bfloat16' \(dtype='bfloat16'\)\. Pass one of the backend's dtypes\.$", None),
    ("common-dtype-object", _call(xs.zeros, (2,), dtype=np.sin), TypeError,
     r"^zeros: dtype must be a dtype of a backend, a dtype name or a Python type, got ufunc \(dtype=<ufunc 'sin'>\)\. Pass e\.g\. xsparse\.float64", None),
    ("common-device", _call(xs.zeros, (2,), device="gpu"), ValueError,
     r"^zeros: device='gpu' is not a device of backend 'numpy' \(devices=\['cpu'\]\)\. Pass one of xsparse\.__array_namespace_info__\(backend='numpy'\)\.devices\(\)\.$", None),
    ("common-fill-int", _call(xs.sparse_coo_array, [[0]], [1], fill_value=0.5), ValueError,
     r"^fill_value: 0\.5 is not representable in the integer dtype int64\. Use an integer fill value", None),
    # a fill value an integer dtype cannot hold is refused, not wrapped or truncated
    ("common-fill-int8-range", _call(xs.sparse_coo_array, [[0]], np.asarray([1], dtype=np.int8), fill_value=300), ValueError,
     r"^fill_value: 300 is out of the range of the dtype int8\. Use a fill value that the dtype holds", None),
    ("common-fill-int-nan", _call(xs.full, (2,), math.nan, dtype="int64", layout=xs.sparse_coo), ValueError,
     r"^fill_value: nan is not representable in the integer dtype int64\. Use an integer fill value", None),
    # the same checks for a strided full: the backends' own wrap, truncate or drop the imaginary part
    ("common-full-strided-int8-range", _call(xs.full, (2,), 300, dtype="int8"), ValueError,
     r"^fill_value: 300 is out of the range of the dtype int8\. Use a fill value that the dtype holds", None),
    ("common-full-strided-uint8-negative", _call(xs.full, (2,), -1, dtype="uint8"), ValueError,
     r"^fill_value: -1 is out of the range of the dtype uint8\. Use a fill value that the dtype holds", None),
    ("common-full-strided-truncated", _call(xs.full, (2,), 1.5, dtype="int64"), ValueError,
     r"^fill_value: 1\.5 is not representable in the integer dtype int64\. Use an integer fill value", None),
    ("common-full-strided-nan-int", _call(xs.full, (2,), math.nan, dtype="int64"), ValueError,
     r"^fill_value: nan is not representable in the integer dtype int64\. Use an integer fill value", None),
    ("common-full-strided-complex", _call(xs.full, (2,), 1j, dtype="float64"), ValueError,
     r"^fill_value: 1j is complex but the dtype is float64\. Use a real fill value", None),
    ("common-full-strided-none", _call(xs.full, (2,), None, dtype="float64"), TypeError,
     r"^fill_value: expected a number, got NoneType \(None\)\. Pass a Python bool, int, float or complex", None),
    ("creation-values-ragged", _call(xs.sparse_coo_array, [[0, 1]], [[1.0], [2.0, 3.0]], (2, 2)), ValueError,
     r"^sparse_coo_array: values must be an array or a rectangular nested list of numbers \(.*\)\. Pass one value \(or one "
     r"dense sub-array\) per specified element, all of one shape\.$", None),
    # the backends' asarray truncates 1.7 to 1 for an integer dtype
    ("creation-values-truncated", _call(xs.sparse_coo_array, [[0, 1]], [1.7, -2.5], (2,), dtype="int64"), ValueError,
     r"^sparse_coo_array: the values hold 1\.7, which the integer dtype int64 cannot represent \(it would be truncated\)\. "
     r"Round the values first, or pass a floating dtype\.$", None),
    ("creation-no-offsets", _call(xs.sparse_csr_array, [], [], []), xs.InvariantError,
     r"^invariant 5\.1 violated: sparse_compressed_array\(layout=sparse_csr\): crow_indices must hold n_compressed \+ 1 "
     r"offsets, starting with 0, got none \(shape of crow_indices: \(0,\)\)\. Give \[0\] for an array with no rows", None),
    ("common-fill-complex", _call(xs.sparse_coo_array, [[0]], [1.0], fill_value=1j), ValueError,
     r"^fill_value: 1j is complex but the dtype is float64\. Use a real fill value", None),
    ("common-fill-not-a-number", _call(xs.sparse_coo_array, [[0]], [1.0], fill_value="a"), TypeError,
     r"^fill_value: expected a number, got str \('a'\)\. Pass a Python bool, int, float or complex", None),
    # ---- _conversion.py -----------------------------------------------------------------------------
    ("conversion-layout-of", _call(xs.layout_of, 3), TypeError,
     r"^layout_of: expected an array, got int\. Pass an xsparse array or a backend array", None),
    ("conversion-to-dense-list", _call(xs.to_dense, [1.0, 2.0]), TypeError,
     r"^to_dense: expected an xsparse array or a backend array, got list\. Create one first", None),
    ("conversion-to-sparse-list", _call(xs.to_sparse, [1.0]), TypeError,
     r"^to_sparse\(layout=sparse_coo\): expected an xsparse array or a backend array, got list", None),
    ("conversion-to-backend-list", _call(xs.to_backend, [1.0], "numpy"), TypeError,
     r"^to_backend: expected an xsparse array or a backend array, got list", None),
    ("conversion-matrix-transpose-list", _call(xs.matrix_transpose, [[1.0]]), TypeError,
     r"^matrix_transpose: expected an xsparse array or a backend array, got list", None),
    ("conversion-layout-not-layout", _call(xs.to_sparse, _dense(), layout="csr"), TypeError,
     r"^to_sparse\(layout=csr\): layout must be an xsparse layout, got 'csr'\. Pass one of xsparse\.sparse_coo", None),
    ("conversion-semi-structured", _call(xs.to_sparse, _dense(), layout=xs.sparse_semi_structured), xs.LayoutError,
     r"^to_sparse\(layout=sparse_semi_structured\): the sparse_semi_structured layout has its own conversion.*Call xsparse\.to_sparse_semi_structured", None),
    ("conversion-fill-value", lambda: xs.to_sparse(_csr(), layout=xs.sparse_coo, fill_value=1.0), ValueError,
     r"^to_sparse\(layout=sparse_coo\): a conversion keeps the fill value \(array fill_value=0(\.0)?, requested 1\.0\)\. Convert to dense", None),
    ("conversion-index-dtype", _call(xs.to_sparse_csr, _dense(), index_dtype="float32"), TypeError,
     r"^to_sparse\(layout=sparse_csr\): index_dtype must be int32 or int64, got float32", None),
    ("conversion-coo-blocksize", _call(xs.to_sparse_coo, _dense(), blocksize=(2, 2)), ValueError,
     r"^to_sparse\(layout=sparse_coo\): blocksize applies to sparse_bsr and sparse_bsc only, not to sparse_coo", None),
    ("conversion-coo-sparse-plus-dense", _call(xs.to_sparse_coo, _dense(), 1, dense_dim=2), ValueError,
     r"^to_sparse\(layout=sparse_coo\): sparse_dim \(1\) \+ dense_dim \(2\) must equal ndim \(2\)", None),
    ("conversion-coo-sparse-dim-range", _call(xs.to_sparse_coo, _dense(), 3), ValueError,
     r"^to_sparse\(layout=sparse_coo\): sparse_dim must lie in \[0, 2\] for shape \(4, 4\), got 3", None),
    ("conversion-coo-from-compressed-sparse-dim", lambda: xs.to_sparse_coo(_csr(), 1), ValueError,
     r"^to_sparse\(layout=sparse_coo\): a sparse_csr array converts to a COO array with sparse_dim=2 .* not sparse_dim=1\. Convert through to_dense", None),
    ("conversion-coo-from-semi-structured-sparse-dim",
     lambda: xs.to_sparse_coo(xs.to_sparse_semi_structured(np.tile(np.asarray([0, 0, 1, 1], dtype=np.float16), (64, 16))), 1), ValueError,
     r"^to_sparse\(layout=sparse_coo\): a sparse_semi_structured array converts to a COO array with sparse_dim=2 .* not sparse_dim=1\. Convert through to_dense", None),
    ("conversion-compressed-sparse-dim", _call(xs.to_sparse, _dense(), layout=xs.sparse_csr, sparse_dim=1), ValueError,
     r"^to_sparse\(layout=sparse_csr\): a sparse_csr array has exactly 2 sparse dimensions, got sparse_dim=1", None),
    ("conversion-compressed-dense-dim-mismatch", lambda: xs.to_sparse_csc(_csr_hybrid(), 0), ValueError,
     r"^to_sparse\(layout=sparse_csc\): a sparse_csr array with dense_dim=1 converts to a sparse_csc array with the same dense_dim, not dense_dim=0\. Convert through", None),
    ("conversion-compressed-dense-dim-range", _call(xs.to_sparse_csr, _dense(), 1), ValueError,
     r"^to_sparse\(layout=sparse_csr\): .* dense_dim must lie in \[0, 0\] for shape \(4, 4\), got dense_dim=1", None),
    ("conversion-compressed-too-few-dims", lambda: xs.to_sparse_csr(np.ones(3)), ValueError,
     r"^to_sparse\(layout=sparse_csr\): a sparse_csr array has 2 sparse dimensions, so it cannot hold a 1-d array \(shape \(3,\)\)\. Use layout=sparse_coo or to_sparse_coo", None),
    ("creation-compressed-too-few-dims", _call(xs.zeros, 3, layout=xs.sparse_csc), ValueError,
     r"^zeros: a sparse_csc array has 2 sparse dimensions, so it cannot hold a 1-d array \(shape \(3,\)\)\. Use layout=sparse_coo \(COO holds", None),
    ("conversion-dense-dim-not-integer", _call(xs.to_sparse_csr, np.ones((2, 2, 2)), 1.0), TypeError,
     r"^to_sparse\(layout=sparse_csr\): dense_dim must be an integer, got float \(dense_dim=1\.0\)\. Pass the number of dense dimensions", None),
    ("conversion-sparse-dim-bool", _call(xs.to_sparse_coo, _dense(), True), TypeError,
     r"^to_sparse\(layout=sparse_coo\): sparse_dim must be an integer, not a bool \(sparse_dim=True\)\. Pass the number of sparse dimensions", None),
    ("conversion-coo-dense-dim-range", _call(xs.to_sparse_coo, _dense(), dense_dim=3), ValueError,
     r"^to_sparse\(layout=sparse_coo\): dense_dim must lie in \[0, 2\] for shape \(4, 4\), got 3\. Pick a number of trailing dimensions", None),
    ("conversion-compressed-from-coo-one-sparse-dim", lambda: xs.to_sparse_csr(xs.to_sparse_coo(np.ones((2, 3, 4)), 1)), ValueError,
     r"^to_sparse\(layout=sparse_csr\): a sparse_coo array with dense_dim=2 converts to a sparse_csr array with the same dense_dim, "
     r"which leaves fewer than 2 sparse dimensions of shape \(2, 3, 4\)\. Convert through to_dense\(\)", None),
    ("conversion-unchecked-indices", lambda: xs.to_dense(xs.sparse_coo_array([[0, 5]], [1.0, 2.0], (3,), backend="numpy")), xs.InvariantError,
     r"^invariant coo\.5 violated: to_dense: indices\[0\] must lie in \[0, 3\), got 5\. Fix the indices", None),
    ("conversion-to-backend-device", lambda: xs.to_backend(_csr(), "numpy", device="gpu"), ValueError,
     r"^to_backend: device='gpu' is not a device of backend 'numpy' \(devices=\[.*\]\)\. Pass one of", None),
    ("conversion-blocksize-missing", _call(xs.to_sparse_bsr, _dense()), ValueError,
     r"^to_sparse\(layout=sparse_bsr\): converting to sparse_bsr needs a block shape \(blocksize=None\)\. Pass blocksize=\(rows, columns\)", None),
    ("conversion-blocksize-divide", _call(xs.to_sparse_bsc, _dense(), (3, 3)), ValueError,
     r"^to_sparse\(layout=sparse_bsc\): blocksize \(3, 3\) must divide the sparse dimensions \(4, 4\) of shape \(4, 4\)\. Pick a blocksize", None),
    ("conversion-blocksize-zero", _call(xs.to_sparse_bsr, _dense(), (0, 2)), ValueError,
     r"^to_sparse\(layout=sparse_bsr\): blocksize must be two positive integers \(blocksize=\(0, 2\)\)\. Pass sizes of at least 1", None),
    ("conversion-blocksize-not-blocked", _call(xs.to_sparse_csr, _dense(), blocksize=(2, 2)), ValueError,
     r"^to_sparse\(layout=sparse_csr\): blocksize applies to sparse_bsr and sparse_bsc only, not to sparse_csr \(blocksize=\(2, 2\)\)\. Drop blocksize, or convert with to_sparse_bsr", None),
    ("conversion-to-strided", _call(xs.to_sparse, _dense(), layout=xs.strided), ValueError,
     r"^to_sparse\(layout=strided\): to_sparse makes sparse arrays, not strided ones \(layout=strided\)\. Call xsparse\.to_dense", None),
    ("conversion-coalesce-dense", _call(xs.coalesce, _dense()), TypeError,
     r"^coalesce: expected an xsparse array, got ndarray", None),
    ("conversion-matrix-transpose-1d", lambda: xs.matrix_transpose(xs.sparse_coo_array([[0]], [1.0])), ValueError,
     r"^matrix_transpose: the array must have at least 2 dimensions, got shape \(1,\)", None),
    ("conversion-matrix-transpose-mixed", lambda: xs.matrix_transpose(_csr_hybrid()), xs.LayoutError,
     r"^matrix_transpose: the last two dimensions of this sparse_csr array mix sparse and dense dimensions \(shape=\(2, 2, 3\), dense_dim=1\)\. Convert with to_dense", None),
    ("conversion-matrix-transpose-mixed-coo", lambda: xs.matrix_transpose(xs.to_sparse_coo(np.ones((2, 2, 2)), 2)), xs.LayoutError,
     r"^matrix_transpose: the last two dimensions of this sparse_coo array mix sparse and dense dimensions", None),
    # ---- formats/ -----------------------------------------------------------------------------------
    ("formats-csr-has-no-ccol", lambda: _csr().ccol_indices(), xs.LayoutError,
     r"^ccol_indices: a sparse_csr array has no ccol_indices \(it has crow_indices and col_indices\)\. Use crow_indices\(\) / col_indices\(\)", None),
    ("formats-csr-has-no-row", lambda: _csr().row_indices(), xs.LayoutError,
     r"^row_indices: a sparse_csr array has no row_indices", None),
    ("formats-csc-has-no-crow", lambda: xs.sparse_csc_array([0, 1], [0], [1.0]).crow_indices(), xs.LayoutError,
     r"^crow_indices: a sparse_csc array has no crow_indices \(it has ccol_indices and row_indices\)", None),
    ("formats-bsc-has-no-col", lambda: xs.sparse_bsc_array([0, 1], [0], np.ones((1, 1, 1))).col_indices(), xs.LayoutError,
     r"^col_indices: a sparse_bsc array has no col_indices", None),
    ("formats-coo-indices-uncoalesced", lambda: _coo_uncoalesced().indices(), xs.InvariantError,
     r"^invariant coo\.coalesced violated: indices\(\) needs a coalesced array, .* \(nnz=2\)\. Call coalesce\(\) first, or read .* with _indices\(\)", None),
    ("formats-coo-values-uncoalesced", lambda: _coo_uncoalesced().values(), xs.InvariantError,
     r"^invariant coo\.coalesced violated: values\(\) needs a coalesced array, .* with _values\(\)", None),
    ("formats-T-not-2d", lambda: xs.zeros((2, 2, 2), layout=xs.sparse_coo).T, ValueError,
     r"^T: the array must be 2-D, got ndim=3\. Use mT to transpose the last two dimensions", None),
    ("formats-setitem-immutable", lambda: _csr().__setitem__((0, 0), 1.0), xs.LayoutError,
     r"^__setitem__: xsparse sparse arrays are immutable and cannot be assigned to \(layout=sparse_csr, shape=\(2, 2\)\)\. "
     r"Build the result as a new array instead, e\.g\. xsparse\.where\(mask, value, x\)", None),
    # ---- sorting, searching and set functions ----------------------------------------------------------
    ("searchsorted-complex", lambda: xs.searchsorted(np.asarray([0j, 1j]), np.asarray([1j])), TypeError,
     r"^searchsorted: takes bool, integer or real floating operands, not complex floating ones \(x1\.dtype=complex128, x2\.dtype=complex128\)\. Complex numbers have no order", None),
    ("searchsorted-sorter-list", lambda: xs.searchsorted(np.asarray([0, 1, 2]), np.asarray([1]), sorter=[0, 1, 2]), TypeError,
     r"^searchsorted: sorter must be a strided integer array, got list \(sorter=\[0, 1, 2\]\)\. Pass xsparse\.argsort\(x1\)", None),
    ("isin-complex", lambda: xs.isin(xs.to_sparse_coo(np.asarray([1j, 0j])), np.asarray([1j])), TypeError,
     r"^isin: takes bool, integer or real floating operands, not complex floating ones \(x1\.dtype=complex128, x2\.dtype=complex128\)\. Compare with xsparse\.equal", None),
    ("isin-invert-not-bool", lambda: xs.isin(np.asarray([0, 1]), np.asarray([1]), invert="False"), TypeError,
     r"^isin: invert must be True or False, got str \(invert='False'\)\. Pass a bool", None),
    ("unique-nan-fill", lambda: xs.unique_counts(xs.sparse_coo_array([[0]], [1.0], (2,), fill_value=math.nan)), xs.NoKernelError,
     r"^unique_counts: the fill value is NaN and x has unspecified elements.* \(fill_value=nan\)\. Compute it on the dense array, xsparse\.unique_counts\(xsparse\.to_dense\(x\)\)", None),
    ("sort-nan-fill", lambda: xs.sort(xs.sparse_coo_array([[0]], [1.0], (2,), fill_value=math.nan)), xs.NoKernelError,
     r"^sort: the fill value is NaN, which compares with nothing.* \(fill_value=nan\)\. Sort the dense array, xsparse\.sort\(xsparse\.to_dense\(x\)\)", None),
    # the flat index of an element of an array with more than 2**63 elements wrapped around
    ("argmax-flat-overflow", lambda: xs.argmax(xs.sparse_coo_array([[0, 5], [3, 0], [1, 2]], [1.0, 2.0], (2**40, 2**40, 2**40))), ValueError,
     r"^argmax: the positions along the reduced axes do not fit the index dtype int64 \(shape=\(1099511627776, 1099511627776, 1099511627776\), "
     r"axis=None, positions=1329227995784915872903807060280344576\)\. Reduce along one axis at a time", None),
    ("sum-past-int64-counts", lambda: xs.sum(xs.sparse_coo_array([[0, 5], [7, 1]], [1.0, 2.0], (2**40, 2**40))), ValueError,
     r"^sum: the reduction covers more elements than an int64 counts \(shape=\(1099511627776, 1099511627776\), axes=\(0, 1\), "
     r"elements=1208925819614629174706176\)\. Reduce along fewer axes at a time", None),
    ("roll-flat-past-int64", lambda: xs.roll(xs.sparse_coo_array([[0, 5], [7, 1]], [1.0, 2.0], (2**40, 2**40)), 1), ValueError,
     r"^roll: the flattened array has more positions than an int64 holds \(shape=\(1099511627776, 1099511627776\), "
     r"size=1208925819614629174706176\)\. Roll along named axes instead", None),
    ("asarray-object-sparse", lambda: xs.asarray(None, layout=xs.sparse_coo), TypeError,
     r"^to_sparse\(layout=sparse_coo\): a sparse array holds numbers or booleans, and x has dtype object \(shape=\(\)\)\. Pass a numeric", None),
    ("fill-value-array", lambda: xs.asarray(np.ones(2), layout=xs.sparse_coo, fill_value=np.array([1.0, 2.0])), TypeError,
     r"^fill_value: expected a number, got an array of shape \(2,\)\. Pass a Python bool, int, float or complex", None),
    ("spsolve-generic-non-finite", lambda: xs.spsolve(
        xs.to_sparse_csr(xs.to_backend(np.eye(3), "array_api_strict")), xs.to_backend(np.array([1.0, math.inf, 0.0]), "array_api_strict")),
     ValueError, r"^spsolve: the right-hand side holds a NaN or an infinity \(column 0, shape=\(3,\)\), which the iterative solver cannot take\. "
     r"Pass finite values", None),
]


def _params(with_shape_marks: bool) -> list[Any]:
    out = []
    for case in CASES:
        if hasattr(case, "marks"):  # already a pytest.param, with its own marks
            id_, fn, exc, match, _ = case.values
            out.append(pytest.param(fn, exc, match, id=id_, marks=case.marks))
        else:
            id_, fn, exc, match, xfail = case
            marks = [pytest.mark.xfail(strict=True, reason=xfail)] if (with_shape_marks and xfail) else []
            out.append(pytest.param(fn, exc, match, id=id_, marks=marks))
    return out


@pytest.mark.parametrize("fn, exc, match", _params(with_shape_marks=False))
def test_error_message(fn: Callable[[], Any], exc: type[BaseException], match: str) -> None:
    with pytest.raises(exc, match=match):
        fn()


@pytest.mark.parametrize("fn, exc, match", _params(with_shape_marks=True))
def test_message_shape(fn: Callable[[], Any], exc: type[BaseException], match: str) -> None:
    """``<operation>: <what is wrong> (<name>=<value>, ...). <How to fix>.``"""
    with pytest.raises(exc) as info:
        fn()
    assert MESSAGE_SHAPE.fullmatch(str(info.value)), str(info.value)


# ---- errors that depend on the backend --------------------------------------------------------------
def test_lists_holding_none_name_the_constructor(backend: str) -> None:
    # torch raised its own RuntimeError ("Could not infer dtype of NoneType") for both components
    with pytest.raises(TypeError, match=r"^sparse_compressed_array\(layout=sparse_csr\): crow_indices must be an integer array"):
        xs.sparse_csr_array([0, None, 2], [0, 1], [1.0, 2.0], (2, 2), backend=backend)
    # NumPy reads it as an object array (invariant 1.5), array_api_strict refuses that dtype (a TypeError)
    with pytest.raises((TypeError, ValueError), match=r"^(invariant 1\.5 violated: )?sparse_coo_array: values"):
        xs.sparse_coo_array([[0, 1]], [1.0, None], (2,), backend=backend)


@pytest.mark.parametrize(("value", "dtype"), [(-1, "uint8"), (300, "int8"), (1.5, "int64"), (1j, "float32")])
def test_strided_full_refuses_what_the_dtype_cannot_hold(backend: str, value: Any, dtype: str) -> None:
    # torch's full wraps -1 to 255 and truncates 1.5 to 1, NumPy's drops an imaginary part
    with pytest.raises(ValueError, match=r"^fill_value: "):
        xs.full((2,), value, dtype=dtype, backend=backend)


@pytest.mark.parametrize("indices", [[["a"]], [[0, [1]]]], ids=["str", "ragged"])
def test_index_list_of_non_integers(backend: str, indices: Any) -> None:
    with pytest.raises(TypeError, match=r"^sparse_coo_array: indices must be an integer array or a nested list of integers \(.+\)\. Pass a rectangular"):
        xs.sparse_coo_array(indices, [1.0], backend=backend)


def test_index_list_past_int64(backend: str) -> None:
    # an integer is the right type with a value int64 cannot hold: a ValueError, as 2**63 is on every backend
    # (NumPy read 2**63 as uint64, wrapped to a negative index, and 2**70 as an object it could not cast)
    with pytest.raises(ValueError, match=r"^sparse_coo_array: indices hold an integer that int64 cannot represent \(index=1180591620717411303424\)\. Pass indices in") as info:
        xs.sparse_coo_array([[2**70]], [1.0], backend=backend)
    assert MESSAGE_SHAPE.fullmatch(str(info.value))


def test_backends_mixed_in_one_call() -> None:
    strict = pytest.importorskip("array_api_strict")
    with pytest.raises(xs.BackendMismatchError, match=r"^sparse_coo_array: the operands live on different backends \('array_api_strict', 'numpy'\)\. Move them to one, e.g\. xsparse\.to_backend") as info:
        xs.sparse_coo_array(strict.asarray([[0]]), np.asarray([1.0]))
    assert MESSAGE_SHAPE.fullmatch(str(info.value))
    with pytest.raises(xs.BackendMismatchError, match=r"^sparse_compressed_array\(layout=sparse_csr\): the operands live on different backends"):
        xs.sparse_csr_array(np.asarray([0, 1]), strict.asarray([0]), [1.0])


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc], ids=str)
def test_to_sparse_batches_with_different_nnz(xp: Any, layout: xs.Layout) -> None:
    """Batches of a compressed array share one nse; a dense array whose batches differ cannot convert."""
    dense = xp.asarray(np.asarray([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]]]))
    blocksize = (1, 1) if layout.is_blocked else None
    with pytest.raises(xs.InvariantError, match=rf"^invariant 3\.9 violated: to_sparse: every batch of a {layout} array must hold the same number of specified elements.*Convert to sparse_coo instead"):
        xs.to_sparse(dense, layout=layout, blocksize=blocksize)


def test_to_sparse_batches_with_different_nnz_message_shape() -> None:
    with pytest.raises(xs.InvariantError) as info:
        xs.to_sparse_csr(np.asarray([[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]]]))
    assert MESSAGE_SHAPE.fullmatch(str(info.value)), str(info.value)


def test_every_invariant_message_has_the_shape() -> None:
    """The validator's messages (``invariant N violated: ...``) end with how to fix it."""
    from xsparse.formats import _invariants

    source = pathlib.Path(_invariants.__file__).read_text()
    raised = set(re.findall(r'_fail\(\s*"([\w.]+)"', source))
    assert {"1.2", "1.3", "1.5", "2.3", "2.4", "3.1", "3.2", "3.3", "3.4", "3.7", "3.8", "3.9", "3.10"} <= raised
    messages = []
    for make in (
        lambda: xs.sparse_csr_array([0, 2], [1, 0], [1.0, 2.0], (1, 2), check_invariants=True),
        lambda: xs.sparse_csr_array([1, 2], [0], [1.0], (1, 2), check_invariants=True),
        lambda: xs.sparse_csr_array([0, 2], [0], [1.0], (1, 2), check_invariants=True),
        lambda: xs.sparse_csr_array([0, 3], [0, 1, 2], [1.0, 2.0, 3.0], (1, 2), check_invariants=True),
        lambda: xs.sparse_csr_array([0, 1], [-1], [1.0], (1, 2), check_invariants=True),
        lambda: xs.sparse_csr_array([0, 1], [2], [1.0], (1, 2), check_invariants=True),
        lambda: xs.sparse_csr_array([0, 1], [0], [1.0], (2, 2)),
        lambda: xs.sparse_csr_array([0, 1], [0], [1.0, 2.0], (1, 2)),
        lambda: xs.sparse_csr_array([0, 1], [0], [1.0], (1, -2)),
        lambda: xs.sparse_csr_array([0, 1], [0], [1.0], (1, 2, 3)),
        lambda: xs.sparse_csr_array([0, 1], np.asarray([0], dtype=np.int32), [1.0], (1, 2)),
        lambda: xs.sparse_coo_array([[3]], [1.0], (2,), check_invariants=True),
        lambda: xs.sparse_coo_array([[1, 0]], [1.0, 2.0], (2,), is_coalesced=True, check_invariants=True),
        lambda: xs.sparse_coo_array([[1]], [1.0, 2.0], (2,)),
        lambda: xs.sparse_coo_array([[1]], [[1.0]], (2, 2)),
        lambda: xs.sparse_coo_array([[1]], [1.0], (2, 2)),
        lambda: xs.sparse_coo_array([[1]], [1.0], (-2,)),
    ):
        with pytest.raises(xs.InvariantError) as info:
            make()
        messages.append(str(info.value))
    bad = [m for m in messages if not MESSAGE_SHAPE.fullmatch(m)]
    assert not bad, bad


# ---- the hierarchy ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "error, builtin",
    [
        (xs.LayoutError, TypeError),
        (xs.InvariantError, ValueError),
        (xs.NoKernelError, NotImplementedError),
        (xs.DensificationError, RuntimeError),
        (xs.BackendMismatchError, TypeError),
    ],
)
def test_error_hierarchy(error: type[Exception], builtin: type[Exception]) -> None:
    assert issubclass(error, xs.XSparseError)
    assert issubclass(error, builtin)
    assert issubclass(xs.XSparseError, Exception) and not issubclass(xs.XSparseError, Warning)
    assert error.__name__ in xs.__all__ and getattr(xs, error.__name__) is error
    args = ("5.6", "col_indices unsorted") if error is xs.InvariantError else ("op: wrong. Fix it.",)
    # caught as the builtin a caller would expect, and as XSparseError
    with pytest.raises(builtin):
        raise error(*args)
    with pytest.raises(xs.XSparseError):
        raise error(*args)


def test_invariant_error_names_the_invariant() -> None:
    err = xs.InvariantError("3.10", "values.shape must be (2,), got (3,)")
    assert err.invariant == "3.10"
    assert str(err) == "invariant 3.10 violated: values.shape must be (2,), got (3,)"


def test_errors_are_distinct() -> None:
    errors = [xs.LayoutError, xs.InvariantError, xs.NoKernelError, xs.DensificationError, xs.BackendMismatchError]
    for a in errors:
        for b in errors:
            assert issubclass(a, b) is (a is b)


def test_sparse_efficiency_warning() -> None:
    assert issubclass(xs.SparseEfficiencyWarning, UserWarning)
    assert not issubclass(xs.SparseEfficiencyWarning, xs.XSparseError)
    assert "SparseEfficiencyWarning" in xs.__all__
    with pytest.warns(xs.SparseEfficiencyWarning, match="fallback"):
        warnings.warn("matmul: computed by a declared fallback. Register a native kernel.", xs.SparseEfficiencyWarning, stacklevel=1)
    # filterwarnings = error turns it into an exception, as for every warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", xs.SparseEfficiencyWarning)
        with pytest.raises(xs.SparseEfficiencyWarning):
            warnings.warn("fallback", xs.SparseEfficiencyWarning, stacklevel=1)


def test_a_numpy_array_of_ml_dtypes_bfloat16_is_refused_clearly() -> None:
    # NumPy's isdtype raised "dtype argument must be a NumPy dtype" from inside the conversion
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.eye(4).astype(ml_dtypes.bfloat16)
    for convert in (xs.to_sparse_coo, xs.to_sparse_csr):
        with pytest.raises(TypeError, match=r"^to_sparse\(layout=sparse_\w+\): backend 'numpy' has no such dtype among its Array API dtypes \(x.dtype=bfloat16\)\. Cast"):
            convert(x)
    # and the semi-structured conversion, which takes bfloat16 only from torch (a CuPy array of ml_dtypes'
    # bfloat16 is refused the same way)
    with pytest.raises(TypeError, match=r"^to_sparse_semi_structured: backend 'numpy' has no such dtype among its Array API dtypes .*hold bfloat16 in torch"):
        xs.to_sparse_semi_structured(np.zeros((64, 64)).astype(ml_dtypes.bfloat16))


def test_bools_are_no_sizes() -> None:
    # integer arguments refuse bools on every function alike (decisions.md, "Errors"): shapes and blocksizes too
    shape = r"shape must be a sequence of integers, got \(True, 2\)\. Pass a tuple such as \(2, 3\)\."
    with pytest.raises(TypeError, match=r"^zeros: " + shape):
        xs.zeros((True, 2), layout=xs.sparse_coo)
    with pytest.raises(TypeError, match=r"^sparse_coo_array: " + shape):
        xs.sparse_coo_array([[0]], [1.0], (True, 2))
    with pytest.raises(TypeError, match=r"^zeros: shape must be a sequence of integers, got \(np\.True_, 2\)|^zeros: shape must be a sequence of integers, got \(True, 2\)"):
        xs.zeros((np.bool_(True), 2), layout=xs.sparse_csr)
    with pytest.raises(TypeError, match=r"blocksize must be two integers \(rows, columns\), got \(True, True\)\. Pass e\.g\. blocksize=\(2, 2\)\."):
        xs.to_sparse_bsr(np.ones((2, 2)), blocksize=(True, True))


def test_big_endian_components_are_read_in_the_native_order() -> None:
    # NumPy arrays of the other byte order passed the dtype checks, then the compiled kernels refused them
    # ("indptr must hold int32 or int64 values (buffer format '>q')")
    be = xs.sparse_csr_array(np.array([0, 1, 2], ">i8"), np.array([1, 0], ">i8"), np.array([1.0, 2.0], ">f8"), (2, 2))
    assert be.crow_indices().dtype.isnative and be.values().dtype.isnative and be.crow_indices().dtype == np.int64
    dense = np.array([[0.0, 1.0], [2.0, 0.0]])
    np.testing.assert_array_equal(be @ np.ones(2), dense @ np.ones(2))
    np.testing.assert_array_equal(xs.to_dense(be + be), 2 * dense)
    np.testing.assert_array_equal(xs.to_dense(xs.sampled_addmm(be, np.eye(2), dense)), 2 * dense)
    c = xs.sparse_coo_array(np.array([[0, 2]], ">i4"), np.array([1.0, 3.0], ">f4"), (3,))
    assert c._indices().dtype == np.int32 and float(xs.max(c)) == 3.0
