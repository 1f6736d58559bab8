"""Conversions between layouts: round trips, every pair of layouts, uncoalesced COO, every registered
conversion kernel against the generic one, fill values, transposes as views, invariant 3.9 for batches,
and the NumPy and torch backends against each other.

The oracle is :func:`xsparse.testing.assert_sparse_equal` (every invariant of the result, then the
elements against the dense original). Inputs come from ``tests/strategies.py``.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
from typing import Any

import numpy as np
import pytest
from conftest import BACKENDS, backend_params, backend_skip_reason, load_native_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse._common import dtype_name as _dtype_name
from xsparse._conversion import _target, layout_of
from xsparse.backends.array_api.conversion import same_fill
from xsparse.formats._spec import Target
from xsparse.testing import assert_sparse_equal, to_numpy

SPARSE_LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
COMPRESSED_LAYOUTS = SPARSE_LAYOUTS[1:]
LAYOUTS = [xs.strided, *SPARSE_LAYOUTS]

# The fixtures (backend names and namespaces) are immutable, so sharing them across examples is safe.
FEW = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SOME = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MORE = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


load_native_kernels()

HAS_TORCH = importlib.util.find_spec("torch") is not None


# -- helpers --------------------------------------------------------------------------------------


def _is_nan(v: Any) -> bool:
    return bool(v != v)


def _same_fill(a: Any, b: Any) -> bool:
    return bool(a == b) or (_is_nan(a) and _is_nan(b))


def assert_same_components(actual: Any, expected: Any) -> None:
    """Identical format, metadata and component arrays (NaNs equal), across backends too."""
    if not isinstance(expected, xs.SparseArray):
        assert not isinstance(actual, xs.SparseArray), f"expected a strided array, got {actual.layout}"
        a, e = to_numpy(actual), to_numpy(expected)
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)
        return
    assert type(actual) is type(expected), (type(actual).__name__, type(expected).__name__)
    assert actual.layout is expected.layout and actual.shape == expected.shape
    assert _same_fill(actual.fill_value, expected.fill_value), (actual.fill_value, expected.fill_value)
    assert actual.is_coalesced() == expected.is_coalesced()
    got, want = actual._components(), expected._components()
    assert list(got) == list(want)
    for name in want:
        a, e = to_numpy(got[name]), to_numpy(want[name])
        assert a.dtype == e.dtype, f"{name}: dtype {a.dtype} != {e.dtype}"
        assert a.shape == e.shape, f"{name}: shape {a.shape} != {e.shape}"
        assert_identical(a, e, err_msg=name)


def _zero_signs(a: np.ndarray) -> list[np.ndarray]:
    """Per real component of ``a``: the sign bit where the component is a zero (False elsewhere)."""
    if a.dtype.kind not in "fc":
        return []
    return [np.signbit(part) & (part == 0) for part in ((a.real, a.imag) if a.dtype.kind == "c" else (a,))]


def assert_identical(a: np.ndarray, e: np.ndarray, err_msg: str = "") -> None:
    """Equal elements (NaNs equal) whose zeros have the same signs: -0.0 and +0.0 are different elements."""
    np.testing.assert_array_equal(a, e, err_msg=err_msg)
    for got, want in zip(_zero_signs(a), _zero_signs(e)):
        np.testing.assert_array_equal(got, want, err_msg=f"{err_msg}: signs of zeros")


def assert_format(
    result: Any,
    layout: xs.Layout,
    case: S.DenseCase,
    *,
    blocksize: tuple[int, int] | None = None,
    index_dtype: str | None = None,
) -> None:
    """``result`` has ``layout`` and the case's batch/sparse/dense split, blocksize and index dtype."""
    assert xs.layout_of(result) is layout, (xs.layout_of(result), layout)
    assert tuple(result.shape) == case.shape
    if layout is xs.strided:
        return
    assert result.dense_dim() == case.dense_dim
    if layout is xs.sparse_coo:
        assert result.sparse_dim() == case.batch_dim + 2
    else:
        assert result.batch_dim() == case.batch_dim
        assert result.blocksize == (blocksize if layout.is_blocked else (1, 1))
    if index_dtype is not None:
        assert _dtype_name(result.index_dtype) == index_dtype


def expected_nnz(case: S.DenseCase, src: xs.Layout, dst: xs.Layout, blocksize: tuple[int, int] | None = None) -> int | None:
    """The number of specified elements of the case converted from ``src`` to ``dst`` (per batch for
    compressed layouts), or None where it depends on the data (a change of blocksize).

    From BSR/BSC every element of a specified block stays specified, the block's fill values included.
    """
    if dst.is_blocked:
        per_batch = case.nse_blocks if blocksize in (None, case.blocksize) else None
    elif src.is_blocked:
        per_batch = case.nse_blocks * math.prod(case.blocksize)
    else:
        per_batch = case.nse
    if dst is xs.sparse_coo and per_batch is not None:
        return math.prod(case.batch_shape) * per_batch
    return per_batch


def conversion_target(x: Any, layout: xs.Layout, /, **kwargs: Any) -> Target:
    """The :class:`Target` that ``xs.to_sparse(x, layout=layout, **kwargs)`` (or ``xs.to_dense``) dispatches with."""
    backend = x._backend if isinstance(x, xs.SparseArray) else xs.get_backend(_backend_name(x))
    xp = backend.load()
    if layout is xs.strided:
        return Target(xs.strided, backend, xp, tuple(x.shape), x.ndim, 0, (1, 1), xp.int64, x.fill_value)
    return _target(
        "test", x, layout, backend, xp, kwargs.get("sparse_dim"), kwargs.get("dense_dim"), kwargs.get("blocksize"),
        kwargs.get("index_dtype"), kwargs.get("fill_value"),
    )  # fmt: skip


def _backend_name(x: Any) -> str:
    from xsparse.backends import backend_of_array

    return backend_of_array(x).name


def sparse_kwargs(case: S.DenseCase, src: xs.Layout, dst: xs.Layout, blocksize: tuple[int, int], index_dtype: str | None) -> dict[str, Any]:
    """The keyword arguments converting the case, held in layout ``src``, to ``dst``."""
    if src is xs.strided:
        kw = case.kwargs(dst, blocksize=blocksize)
        if index_dtype is not None:
            kw["index_dtype"] = index_dtype
        return kw
    kw = {"layout": dst}
    if dst.is_blocked:
        kw["blocksize"] = blocksize
    if index_dtype is not None:
        kw["index_dtype"] = index_dtype
    return kw


def convert(x: Any, **kwargs: Any) -> Any:
    """``xs.to_sparse``, or ``xs.to_dense`` for ``layout=xs.strided``."""
    if kwargs["layout"] is xs.strided:
        return xs.to_dense(x)
    return xs.to_sparse(x, **kwargs)


def shares_buffer(a: Any, b: Any) -> bool:
    """Whether two strided arrays share memory (NumPy, CuPy: shares_memory; torch: the storage pointer)."""
    if isinstance(a, np.ndarray):
        return bool(np.shares_memory(a, b))
    if hasattr(a, "get"):  # CuPy: DLPack gives NumPy no view of device memory
        import cupy

        return bool(cupy.shares_memory(a, b))
    if hasattr(a, "untyped_storage"):
        return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())
    # any other CPU backend: compare the NumPy views that DLPack exposes
    return bool(np.shares_memory(np.from_dlpack(a), np.from_dlpack(b)))


def swap_sparse_dims(xp: Any, x: Any, batch_dim: int) -> Any:
    axes = list(range(x.ndim))
    axes[batch_dim], axes[batch_dim + 1] = axes[batch_dim + 1], axes[batch_dim]
    return xp.permute_dims(x, tuple(axes))


def accepts(kernel: dispatch.Kernel, xp: Any, *args: Any) -> str | None:
    """``None`` when the kernel accepts the arguments, else its reason (a non-empty sentence)."""
    if kernel.supports is None:
        return None
    reason = kernel.supports(xp, *args)
    assert reason is None or (isinstance(reason, str) and reason), f"{kernel.describe()}: bad reason {reason!r}"
    return reason


# -- 1. round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@MORE
@given(data=st.data())
def test_round_trip(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """dense -> layout -> dense is the identity, batched and hybrid, nnz = 0 included, either index dtype."""
    case = data.draw(S.dense_cases(xp), label="case")
    s = case.sparse(layout)
    assert_format(s, layout, case, blocksize=case.blocksize, index_dtype=case.index_dtype)
    assert s.backend == backend
    assert s.nnz == expected_nnz(case, xs.strided, layout)
    assert_sparse_equal(s, case.array)
    d = xs.to_dense(s)
    assert_sparse_equal(d, case.array, check_layout=xs.strided)
    assert type(d) is type(case.array)
    np.testing.assert_array_equal(to_numpy(d), case.host)


@SOME
@given(data=st.data())
def test_round_trip_coo_any_rank(backend: str, xp: Any, data: st.DataObject) -> None:
    """dense -> COO -> dense for ranks 0..4 and every split into sparse and dense dimensions."""
    case = data.draw(S.coo_dense_cases(xp, fill=None), label="case")
    kw: dict[str, Any] = {"sparse_dim": case.sparse_dim, "index_dtype": case.index_dtype}
    if not _same_fill(case.fill_value, 0):
        kw["fill_value"] = case.fill_value
    s = xs.to_sparse_coo(case.array, **kw)
    assert s.sparse_dim() == case.sparse_dim and s.dense_dim() == case.host.ndim - case.sparse_dim
    assert _dtype_name(s.index_dtype) == case.index_dtype
    assert s.is_coalesced()
    assert_sparse_equal(s, case.array)
    np.testing.assert_array_equal(to_numpy(xs.to_dense(s)), case.host)


def test_default_index_dtype_is_int64(backend: str, xp: Any) -> None:
    d = xp.asarray(np.eye(4, dtype=np.float32))
    for layout in SPARSE_LAYOUTS:
        s = xs.to_sparse(d, layout=layout, blocksize=(2, 2) if layout.is_blocked else None)
        assert _dtype_name(s.index_dtype) == "int64"


# -- 2. every pair of layouts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "dst"), [(a, b) for a, b in itertools.product(LAYOUTS, LAYOUTS) if (a, b) != (xs.strided, xs.strided)], ids=str
)
@SOME
@given(data=st.data())
def test_convert_between_layouts(backend: str, xp: Any, src: xs.Layout, dst: xs.Layout, data: st.DataObject) -> None:
    """src -> dst equals the dense original with the right layout, blocksize, split and index dtype."""
    case = data.draw(S.dense_cases(xp, fill=None), label="case")
    x = case.sparse(src)
    blocksize = data.draw(st.sampled_from([case.blocksize, case.alt_blocksize]), label="blocksize")
    index_dtype = data.draw(st.sampled_from([None, "int32", "int64"]), label="index_dtype")
    if src is xs.strided and index_dtype is None:
        index_dtype = case.index_dtype
    result = convert(x, **sparse_kwargs(case, src, dst, blocksize, index_dtype))
    assert_format(result, dst, case, blocksize=blocksize, index_dtype=index_dtype or case.index_dtype)
    if dst is not xs.strided:
        assert _same_fill(result.fill_value, case.fill_value)
        want = expected_nnz(case, src, dst, blocksize)
        assert want is None or result.nnz == want
    assert_sparse_equal(result, case.array)


# -- 3. uncoalesced COO -----------------------------------------------------------------------------


@MORE
@given(data=st.data())
def test_uncoalesced_to_dense_sums_duplicates(backend: str, xp: Any, data: st.DataObject) -> None:
    coo, expected = data.draw(S.uncoalesced_coo(xp, fill=None), label="coo")
    d = xs.to_dense(coo)
    np.testing.assert_array_equal(to_numpy(d), expected)
    assert_sparse_equal(coo, xp.asarray(expected))


@SOME
@given(data=st.data())
def test_strictly_increasing_check_against_tuples(backend: str, xp: Any, data: st.DataObject) -> None:
    """The check that lets coalesce keep an array whose indices are already canonical: lexicographically
    strictly increasing columns, against Python's comparison of the columns as tuples (no sparse dimension,
    one, several; duplicates, ties on the first rows, one column, none; past the 4096-column prefix check)."""
    from xsparse.backends.array_api.conversion import strictly_increasing

    k = data.draw(st.integers(0, 3), label="sparse_dim")
    n = data.draw(st.sampled_from([0, 1, 2, 5, 30, 5000]), label="n")
    top = data.draw(st.sampled_from([1, 3, 1000]), label="index range")
    cols = data.draw(st.lists(st.tuples(*[st.integers(0, top)] * k), min_size=min(n, 30), max_size=min(n, 30)), label="columns")
    if n == 5000:  # a long sorted run, then the drawn columns, past the prefix the check reads first
        cols = [tuple([0] * (k - 1) + [i]) if k else () for i in range(-5000, 0)] + cols
    if data.draw(st.booleans(), label="sorted"):
        cols = sorted(set(cols)) if k else cols
    idx = np.asarray(cols, dtype=np.int64).reshape(len(cols), k).T
    expected = all(a < b for a, b in zip(cols, cols[1:]))
    assert strictly_increasing(xp, xp.asarray(idx)) is expected


@MORE
@given(data=st.data())
def test_coalesce_sorts_and_sums(backend: str, xp: Any, data: st.DataObject) -> None:
    coo, expected = data.draw(S.uncoalesced_coo(xp, fill=None), label="coo")
    raw_indices = to_numpy(coo._indices()).copy()
    c = xs.coalesce(coo)
    assert c.is_coalesced() and xs.is_coalesced(c)
    assert _dtype_name(c.index_dtype) == _dtype_name(coo.index_dtype)
    assert _same_fill(c.fill_value, coo.fill_value)
    idx = to_numpy(c.indices())
    keys = [tuple(column) for column in idx.T]
    assert keys == sorted(set(keys)), "indices must be sorted lexicographically and unique"
    assert idx.shape[1] == len({tuple(column) for column in raw_indices.T})
    assert_sparse_equal(c, xp.asarray(expected))
    np.testing.assert_array_equal(to_numpy(c.values()), expected[tuple(idx)])
    # the input is unchanged, and coalescing again returns the array itself
    np.testing.assert_array_equal(to_numpy(coo._indices()), raw_indices)
    assert xs.coalesce(c) is c


def test_indices_and_values_need_a_coalesced_array(backend: str, xp: Any) -> None:
    """As in torch: indices()/values() raise on uncoalesced data and work after coalesce()."""
    indices = xp.asarray(np.asarray([[1, 0, 1], [2, 0, 2]], dtype=np.int64))
    coo = xs.sparse_coo_array(indices, xp.asarray(np.asarray([1.0, 2.0, 3.0])), (2, 3))
    assert not coo.is_coalesced() and not xs.is_coalesced(coo)
    for method in ("indices", "values"):
        with pytest.raises(xs.InvariantError, match=rf"{method}\(\) needs a coalesced array.*Call coalesce\(\) first"):
            getattr(coo, method)()
    assert tuple(coo._indices().shape) == (2, 3) and tuple(coo._values().shape) == (3,)
    c = coo.coalesce()
    np.testing.assert_array_equal(to_numpy(c.indices()), [[0, 1], [0, 2]])
    np.testing.assert_array_equal(to_numpy(c.values()), [2.0, 4.0])


@pytest.mark.parametrize("name", backend_params(["numpy", "torch"]))
def test_unchecked_invalid_indices_raise_invariant_errors(name: str) -> None:
    """An array built without the index checks is trusted (docs/invariants.md); where a native kernel trips
    over its invalid indices, the error is the InvariantError naming them, not the kernel library's own
    ("invalid entry in coordinates array", "repeats may not contain negative values" from NumPy)."""
    xp = xs.bound_namespace(name)

    def arr(values: list[Any]) -> Any:
        return xp.asarray(values)

    coo_out = xs.sparse_coo_array(arr([[0, 5]]), arr([1.0, 2.0]), (3,))
    coo_negative = xs.sparse_coo_array(arr([[0, -1]]), arr([1.0, 2.0]), (3,))
    csr_decreasing = xs.sparse_csr_array(arr([0, 3, 2]), arr([1, 0]), arr([1.0, 2.0]), (2, 3))
    csr_past_nse = xs.sparse_csr_array(arr([0, 1, 4]), arr([1, 0]), arr([1.0, 2.0]), (2, 3))
    cases = [
        (lambda: xs.to_dense(coo_out), r"^invariant coo\.5 violated: to_dense: indices\[0\] must lie in \[0, 3\), got 5\."),
        (lambda: xs.coalesce(coo_negative), r"^invariant coo\.5 violated: coalesce: indices\[0\] must lie in \[0, 3\), got -1\."),
        (lambda: xs.to_sparse_bsr(csr_decreasing, (1, 1)), r"^invariant 5\.3 violated: to_sparse\(layout=sparse_bsr\): "),
        (lambda: xs.to_sparse_bsr(csr_past_nse, (1, 1)), r"^invariant 5\.2 violated: to_sparse\(layout=sparse_bsr\): crow_indices\[\.\.\., -1\] must equal nse=2, got 4\."),
        (lambda: xs.to_sparse_coo(csr_past_nse), r"^invariant 5\.2 violated: to_sparse\(layout=sparse_coo\): "),
    ]
    for convert, match in cases:
        with pytest.raises(xs.InvariantError, match=match):
            convert()


def test_coalesce_keeps_compressed_arrays(backend: str, xp: Any) -> None:
    a = xs.to_sparse_csr(xp.asarray(np.eye(3)))
    assert a.is_coalesced() and xs.coalesce(a) is a


def test_coalesce_of_increasing_indices_sorts_nothing(backend: str, xp: Any) -> None:
    """Indices that already increase strictly are kept as they are (one pass, no sort); a duplicate or
    an inversion anywhere, in any sparse dimension, sends the array to the sorting kernel."""
    values = xp.asarray(np.asarray([1.0, 2.0, 3.0, 4.0]))
    cases = {
        "increasing": ([[0, 0, 1, 2], [1, 3, 0, 0]], True),
        "inversion in the second dimension": ([[0, 0, 1, 2], [3, 1, 0, 0]], False),
        "duplicate": ([[0, 0, 1, 1], [1, 3, 2, 2]], False),
        "inversion in the first dimension": ([[0, 1, 0, 2], [0, 0, 1, 0]], False),
    }
    for name, (indices, kept) in cases.items():
        idx = xp.asarray(np.asarray(indices, dtype=np.int64))
        coo = xs.sparse_coo_array(idx, values, (3, 4))
        c = xs.coalesce(coo)
        assert c.is_coalesced(), name
        assert (c._indices() is coo._indices()) is kept, name
        dense = np.zeros((3, 4))
        np.add.at(dense, tuple(np.asarray(indices)), [1.0, 2.0, 3.0, 4.0])
        assert_sparse_equal(c, xp.asarray(dense))
    # a long array: the prefix checked first, then the whole (an inversion at the very end)
    long = np.arange(5000, dtype=np.int64)[None, :]
    ones = xp.asarray(np.ones(5000))
    kept = xs.sparse_coo_array(xp.asarray(long), ones, (5000,))
    assert xs.coalesce(kept)._indices() is kept._indices()
    swapped = long.copy()
    swapped[0, -2:] = swapped[0, -2:][::-1].copy()
    c = xs.coalesce(xs.sparse_coo_array(xp.asarray(swapped), ones, (5000,)))
    np.testing.assert_array_equal(to_numpy(c.indices()), long)
    # without sparse dimensions two entries are duplicates of the one position
    scalar = xs.sparse_coo_array(xp.asarray(np.zeros((0, 2), dtype=np.int64)), xp.asarray(np.asarray([1.0, 2.0])), ())
    assert xs.coalesce(scalar).nnz == 1
    assert float(xs.to_dense(xs.coalesce(scalar))) == 3.0


@SOME
@given(data=st.data())
def test_numpy_coalesce_of_a_long_dimension(data: st.DataObject) -> None:
    """A first dimension far longer than the entries (a vector of 10**12 elements) is coalesced without
    allocating anything of its length, and as the generic kernel does it."""
    from xsparse.backends.array_api.conversion import _coalesce_coo

    xs.get_backend("numpy").load()
    kernel = next(k for k in xs.kernels("coalesce") if k.backend == "numpy")
    n = data.draw(st.sampled_from([10**4, 2**31 + 5, 10**12]), label="length")
    rest = data.draw(st.sampled_from([(), (3,), (2, 5)]), label="rest")
    nnz = data.draw(st.integers(0, 40), label="nnz")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    rows = rng.integers(0, min(n, 2 * nnz + 1), nnz) * (n // max(2 * nnz + 1, 1))  # spread out, with repeats
    indices = np.stack([rows, *(rng.integers(0, size, nnz) for size in rest)]).astype(np.int64)
    dtype = data.draw(st.sampled_from([np.float64, np.int32]), label="dtype")
    values = rng.integers(-3, 4, nnz).astype(dtype)
    coo = xs.sparse_coo_array(indices, values, (n, *rest))
    assert kernel.supports is None or kernel.supports(np, coo) is None
    got, want = kernel.func(np, coo), _coalesce_coo(np, coo)
    assert_same_components(got, want)
    sums: dict[tuple[int, ...], Any] = {}
    for column, v in zip(map(tuple, indices.T.tolist()), values):
        sums[column] = sums.get(column, 0) + v
    assert [tuple(c) for c in np.asarray(got._indices()).T.tolist()] == sorted(sums)
    np.testing.assert_array_equal(np.asarray(got._values()), np.asarray([sums[k] for k in sorted(sums)], dtype=dtype))


@pytest.mark.parametrize("layout", COMPRESSED_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_uncoalesced_coo_to_compressed(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """COO -> compressed sums duplicates: the result equals the conversion of the coalesced data."""
    case = data.draw(S.dense_cases(xp, fill=None), label="case")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    u = S.uncoalesced_like(xp, rng, case.sparse(xs.sparse_coo), case.index_dtype)
    kw = {"blocksize": case.blocksize} if layout.is_blocked else {}
    result = xs.to_sparse(u, layout=layout, **kw)
    assert_same_components(result, case.sparse(layout))
    assert_sparse_equal(result, case.array)


@pytest.mark.parametrize("layout", COMPRESSED_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_uncoalesced_2d_coo_to_compressed(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """Duplicates sum, and explicit zeros (also duplicates that cancel) stay specified, as in torch."""
    coo, expected = data.draw(S.uncoalesced_coo(xp, min_sparse_dims=2, max_sparse_dims=2, fill=None), label="coo")
    bs = (1, 1)
    result = xs.to_sparse(coo, layout=layout, blocksize=bs if layout.is_blocked else None)
    assert _same_fill(result.fill_value, coo.fill_value)
    assert_sparse_equal(result, xp.asarray(expected))
    positions = {tuple(column) for column in to_numpy(coo._indices()).T}
    assert result.nnz == len(positions)


def test_numpy_coo_marked_coalesced_with_repeats_to_csr_sums_them() -> None:
    """An array marked coalesced whose entries repeat a position: the NumPy kernel's pass that finds them
    out of row order sends them through the sort and the sum, as any others (docs/backends.md; the torch
    backend's check names coo.6, the generic kernels trust the flag)."""
    a = xs.sparse_coo_array(np.array([[0, 0, 1], [1, 1, 0]]), np.array([2.0, 4.0, 3.0]), (2, 3), is_coalesced=True)
    result = xs.to_sparse_csr(a)
    assert result.nnz == 2
    assert_sparse_equal(result, np.array([[0.0, 6.0, 0.0], [3.0, 0.0, 0.0]]))


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc], ids=str)
@pytest.mark.parametrize("bad", [2**32 + 1, 2**62, -(2**62)])
@pytest.mark.parametrize("coalesced", [False, True])
def test_numpy_coo_index_out_of_range_to_int32_compressed(layout: xs.Layout, bad: int, coalesced: bool) -> None:
    """An int64 index out of range, converted by the NumPy kernel to int32 indices, is named, not wrapped
    into range (the compiled kernels check what they read; the generic ones trust unchecked indices)."""
    major = 0 if layout is xs.sparse_csr else 1
    idx = np.array([[0, 1], [1, 2]], dtype=np.int64)
    idx[major, 1] = bad
    a = xs.sparse_coo_array(idx, np.array([1.0, 2.0]), (2, 3), is_coalesced=coalesced)
    with pytest.raises(xs.InvariantError, match=rf"coo.5 violated.*indices\[{major}\] must lie in \[0, {(2, 3)[major]}\), got {bad}"):
        xs.to_sparse(a, layout=layout, index_dtype="int32")


# -- 4. every registered kernel against the generic one ---------------------------------------------

CONSTRUCTIBLE = frozenset(LAYOUTS)


def _members(element: Any) -> list[xs.Layout]:
    members = element if isinstance(element, frozenset) else (element,)
    return sorted((m for m in members if m in CONSTRUCTIBLE), key=LAYOUTS.index)


def _kernel_cases() -> list[Any]:
    cases = []
    for op in ("convert", "coalesce"):
        for kernel in xs.kernels(op):
            run_on = kernel.backend if kernel.backend is not None else "array_api_strict"
            skip = backend_skip_reason(run_on) if run_on in BACKENDS else None
            marks = [pytest.mark.skip(reason=skip)] if skip else []
            for layouts in itertools.product(*(_members(e) for e in kernel.signature)):
                if op == "convert" and layouts[0] is xs.strided and layouts[1] is xs.strided:
                    continue
                ident = f"{run_on}-{kernel.name}-" + "-".join(str(la) for la in layouts)
                cases.append(pytest.param(kernel, run_on, layouts, id=ident, marks=marks))
    return cases


KERNEL_CASES = _kernel_cases()


def _draw_input(data: st.DataObject, xp: Any, op: str, layouts: tuple[xs.Layout, ...]) -> tuple[Any, Any, dict[str, Any]]:
    """``(x, expected_dense, target_kwargs)`` for one kernel call."""
    if op == "coalesce":
        if data.draw(st.booleans(), label="from a dense case"):
            case = data.draw(S.dense_cases(xp, fill=None), label="case")
            rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
            return S.uncoalesced_like(xp, rng, case.sparse(xs.sparse_coo), case.index_dtype), case.array, {}
        coo, expected = data.draw(S.uncoalesced_coo(xp, fill=None), label="coo")
        return coo, xp.asarray(expected), {}
    src, dst = layouts
    case = data.draw(S.dense_cases(xp, fill=None), label="case")
    x = case.sparse(src)
    if src is xs.sparse_coo and data.draw(st.booleans(), label="uncoalesced"):
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
        x = S.uncoalesced_like(xp, rng, x, case.index_dtype)
    blocksize = data.draw(st.sampled_from([case.blocksize, case.alt_blocksize]), label="blocksize")
    index_dtype = data.draw(st.sampled_from([None, "int32", "int64"]), label="index_dtype")
    kw = sparse_kwargs(case, src, dst, blocksize, index_dtype)
    return x, case.array, kw


def _call_kernel(kernel: dispatch.Kernel, xp: Any, x: Any, target: Target | None) -> tuple[str | None, Any]:
    args = (x,) if target is None else (x, target)
    reason = accepts(kernel, xp, *args)
    return reason, (kernel.func(xp, *args) if reason is None else None)


@pytest.mark.parametrize(("kernel", "run_on", "layouts"), KERNEL_CASES)
@SOME
@given(data=st.data())
def test_kernel_agrees_with_generic(kernel: dispatch.Kernel, run_on: str, layouts: tuple[xs.Layout, ...], data: st.DataObject) -> None:
    """Each registered kernel (when it accepts the input) and every other generic kernel for the same
    layouts give identical components, equal to the dense original; a kernel that declines gives a
    reason and the dispatcher's result is still right."""
    xp = xs.get_backend(run_on).load()
    x, expected, kw = _draw_input(data, xp, kernel.op, layouts)
    target = None if kernel.op == "coalesce" else conversion_target(x, layouts[1], **kw)
    reason, result = _call_kernel(kernel, xp, x, target)
    if result is None:
        assert reason
        dispatched = xs.coalesce(x) if kernel.op == "coalesce" else convert(x, **{**kw, "layout": layouts[1]})
        assert_sparse_equal(dispatched, expected)
        return
    assert_sparse_equal(result, expected)
    if kernel.op == "coalesce":
        assert result.is_coalesced()
    else:
        assert xs.layout_of(result) is target.layout
        if target.layout is not xs.strided:
            assert _dtype_name(result.index_dtype) == _dtype_name(target.index_dtype)
            assert _same_fill(result.fill_value, x.fill_value if isinstance(x, xs.SparseArray) else target.fill_value)
    compared = 0
    for other in dispatch.resolve(kernel.op, layouts, run_on):
        if other.backend is not None or other.rewrite or other is kernel:
            continue
        other_reason, reference = _call_kernel(other, xp, x, target)
        if other_reason is None:
            assert_same_components(result, reference)
            compared += 1
    assert compared or kernel.backend is None, f"no generic kernel to compare {kernel.describe()} with"


def _typical_input(xp: Any, op: str, layouts: tuple[xs.Layout, ...]) -> tuple[Any, Target | None]:
    dense = np.zeros((4, 6))
    dense[0, 1], dense[1, 0], dense[2, 3], dense[3, 5] = 1.0, 2.0, 3.0, 4.0
    if op == "coalesce":
        idx = xp.asarray(np.asarray([[1, 0, 1], [2, 0, 2]], dtype=np.int64))
        return xs.sparse_coo_array(idx, xp.asarray(np.asarray([1.0, 2.0, 3.0])), (2, 3)), None
    src, dst = layouts
    bs = (2, 3)
    x = xp.asarray(dense)
    if src is not xs.strided:
        x = xs.to_sparse(x, layout=src, blocksize=bs if src.is_blocked else None)
    return x, conversion_target(x, dst, blocksize=bs if dst.is_blocked else None)


@pytest.mark.parametrize(
    "kernel",
    # the semi-structured conversions need a 2:4 input (and, natively, a GPU): tests/test_semi_structured*.py
    # and tests/test_cupy_semi_structured.py run them
    [
        k for op in ("convert", "coalesce") for k in xs.kernels(op)
        if k.backend is not None and backend_skip_reason(k.backend) is None and xs.sparse_semi_structured not in k.signature
    ],
    ids=lambda k: f"{k.backend}-{k.name}-" + "-".join(str(e) for e in k.signature),
)
def test_native_kernel_runs_on_a_typical_input(kernel: dispatch.Kernel) -> None:
    """A native kernel that declines everything would be tested by nothing: it must accept a plain
    float64 2-D input with fill value 0 for at least one pair of layouts of its signature."""
    xp = xs.get_backend(kernel.backend).load()
    reasons = []
    for layouts in itertools.product(*(_members(e) for e in kernel.signature)):
        if kernel.op == "convert" and layouts == (xs.strided, xs.strided):
            continue
        x, target = _typical_input(xp, kernel.op, layouts)
        reason = accepts(kernel, xp, x) if target is None else accepts(kernel, xp, x, target)
        if reason is None:
            return
        reasons.append(f"{layouts}: {reason}")
    pytest.fail(f"{kernel.describe()} declined every typical input: {reasons}")


# -- 5. fill values ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_fill_value_round_trip(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """to_sparse(dense, fill_value=v) leaves out the elements equal to v (NaN included); to_dense restores them."""
    case = data.draw(S.dense_cases(xp, fill=True), label="case")
    s = case.sparse(layout)
    assert _same_fill(s.fill_value, case.fill_value)
    assert s.nnz == expected_nnz(case, xs.strided, layout)
    if layout is xs.sparse_coo and case.dense_dim == 0 and s.nnz:
        stored = to_numpy(s.values())
        assert not np.any(np.isnan(stored) if _is_nan(case.fill_value) else stored == case.fill_value)
    assert_sparse_equal(s, case.array)
    np.testing.assert_array_equal(to_numpy(xs.to_dense(s)), case.host)


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(SPARSE_LAYOUTS, LAYOUTS)), ids=str)
@FEW
@given(data=st.data())
def test_fill_value_survives_conversions(backend: str, xp: Any, src: xs.Layout, dst: xs.Layout, data: st.DataObject) -> None:
    """Conversions between layouts keep the fill value; a native kernel either declines a non-zero fill
    value or gets it right, and the dispatcher's answer (the generic path where natives decline) is right."""
    case = data.draw(S.dense_cases(xp, fill=True), label="case")
    x = case.sparse(src)
    blocksize = data.draw(st.sampled_from([case.blocksize, case.alt_blocksize]), label="blocksize")
    kw = sparse_kwargs(case, src, dst, blocksize, None)
    result = convert(x, **kw)
    if dst is not xs.strided:
        assert _same_fill(result.fill_value, case.fill_value)
        # asking for the fill value the array already has is allowed, NaN included
        assert_sparse_equal(xs.to_sparse(x, **{**kw, "fill_value": case.fill_value}), case.array)
    assert_sparse_equal(result, case.array)
    target = conversion_target(x, dst, **kw)
    for kernel in dispatch.resolve("convert", (src, dst), backend):
        reason, out = _call_kernel(kernel, xp, x, target)
        if reason is None:
            assert_sparse_equal(out, case.array)


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
def test_zero_only_kernels_decline_a_fill_value(backend: str, xp: Any, layout: xs.Layout) -> None:
    """A native dense <-> sparse kernel that runs with fill value 0 but not with 1.5 names the fill value
    as its reason, and the dispatcher then gets both directions right through the generic kernels."""
    host = np.full((2, 4, 6), 1.5)
    host[0, 1, 2], host[1, 3, 4] = 7.0, -1.0
    dense, shifted = xp.asarray(host), xp.asarray(host - 1.5)
    kw = {"blocksize": (2, 3)} if layout.is_blocked else {}
    filled = xs.to_sparse(dense, layout=layout, fill_value=1.5, **kw)
    plain = xs.to_sparse(shifted, layout=layout, **kw)
    assert filled.nnz == plain.nnz == (2 if layout is xs.sparse_coo else 1)
    assert_sparse_equal(filled, dense)
    assert_sparse_equal(xs.to_dense(filled), dense)
    declined = 0
    for zero, nonzero, dst in ((shifted, dense, layout), (plain, filled, xs.strided)):
        extra = {"fill_value": 1.5} if dst is layout else {}
        t0, t1 = conversion_target(zero, dst, **kw), conversion_target(nonzero, dst, **kw, **extra)
        for kernel in dispatch.resolve("convert", (layout_of(zero), dst), backend):
            if kernel.backend is None:
                continue
            r0, r1 = accepts(kernel, xp, zero, t0), accepts(kernel, xp, nonzero, t1)
            if r0 is None and r1 is not None:
                assert "fill value" in r1, f"{kernel.describe()}: {r1}"
                declined += 1
    if backend in ("numpy", "torch") and layout.is_compressed:
        assert declined, "the compiled and torch kernels convert fill value 0 only"


# -- 5b. signed zeros: -0.0 is not the fill value +0.0 (docs/decisions.md, "Fill values") ------------

_FLOATING = ["float32", "float64", "complex64", "complex128"]
_PARTS = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.5]


def _fill_mask(host: np.ndarray, fill: Any) -> np.ndarray:
    """Where ``host`` is the fill value: equal with the same sign bits per component, or NaN for a NaN fill."""
    if _is_nan(fill):
        return np.asarray(np.isnan(host))
    f = np.asarray(fill, dtype=host.dtype)
    same = host == f
    for part, fpart in ((host.real, f.real), (host.imag, f.imag)) if host.dtype.kind == "c" else ((host, f),):
        same &= np.signbit(part) == np.signbit(fpart)
    return np.asarray(same)


@st.composite
def signed_zero_cases(draw: st.DrawFn, xp: Any, layout: xs.Layout) -> tuple[np.ndarray, Any, dict[str, Any], int]:
    """``(host, fill_value, to_sparse kwargs, expected nnz)``: a floating or complex array made of signed
    zeros, NaN, infinities and 1.5 (per component), with fill value +0.0, -0.0 or NaN; 2-D plus up to
    one dense dimension for the compressed layouts (a batch dimension when every batch holds the same
    count), and COO of any split into sparse and dense dimensions."""
    dtype = draw(st.sampled_from([d for d in _FLOATING if hasattr(xp, d)]), label="dtype")
    fill = draw(st.sampled_from([0.0, -0.0, math.nan]), label="fill")
    if dtype.startswith("complex"):
        fill = complex(fill, draw(st.sampled_from([0.0, -0.0]), label="fill imag")) if not _is_nan(fill) else complex(fill)
    kw: dict[str, Any] = {"layout": layout, "index_dtype": draw(st.sampled_from(["int32", "int64"]), label="index_dtype")}
    if layout is xs.sparse_coo:
        shape = tuple(draw(st.lists(S.sizes(4), max_size=3), label="shape"))
        sparse_dim = draw(st.integers(0, len(shape)), label="sparse_dim")
        kw["sparse_dim"] = sparse_dim
        block: tuple[int, int] = (1, 1)
        batch: tuple[int, ...] = ()
    else:
        block = draw(st.sampled_from([(1, 1), (1, 2), (2, 1), (2, 2)]), label="block") if layout.is_blocked else (1, 1)
        batch = tuple(draw(st.lists(S.sizes(2), max_size=1), label="batch"))
        dense = tuple(draw(st.lists(S.sizes(2), max_size=1), label="dense"))
        grid = (draw(S.sizes(3), label="rows"), draw(S.sizes(3), label="columns"))
        shape = (*batch, grid[0] * block[0], grid[1] * block[1], *dense)
        kw["dense_dim"] = len(dense)
        if layout.is_blocked:
            kw["blocksize"] = block
        sparse_dim = len(batch) + 2
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    real = np.dtype(dtype).type(0).real.dtype
    host = np.empty(shape, dtype=dtype)
    host.real = rng.choice(np.asarray(_PARTS, dtype=real), size=shape)
    if dtype.startswith("complex"):
        host.imag = rng.choice(np.asarray(_PARTS, dtype=real), size=shape)
    # mostly the fill value, so that entries are left out
    host[rng.random(shape) < 0.5] = fill
    if _is_nan(fill):
        # every NaN is the fill value NaN (-0.0 + NaN*j included) and reads back as the fill value itself
        host[np.isnan(host)] = fill
    ndim = len(shape)
    if layout is xs.sparse_coo:
        return host, fill, kw, int(np.count_nonzero(np.any(~_fill_mask(host, fill), axis=tuple(range(sparse_dim, ndim)))))
    nb = len(batch)
    if batch and batch[0] > 1:
        host[1:] = host[:1]  # every batch holds the same count (invariant 3.9)
    m, n = shape[nb], shape[nb + 1]
    blocked = (~_fill_mask(host, fill)).reshape(*batch, m // block[0], block[0], n // block[1], block[1], *shape[nb + 2 :])
    per_entry = np.any(blocked, axis=(nb + 1, nb + 3, *range(nb + 4, blocked.ndim)))
    nnz = int(np.count_nonzero(per_entry[0] if batch else per_entry)) if per_entry.size else 0
    return host, fill, kw, nnz


def _check_signed(s: Any, host: np.ndarray, fill: Any, nnz: int) -> None:
    assert isinstance(s, xs.SparseArray)
    assert s.nnz == nnz, (s.nnz, nnz)
    assert same_fill(s.fill_value, fill), (s.fill_value, fill)
    assert_identical(to_numpy(xs.to_dense(s)), host)


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr], ids=str)
def test_a_complex_nan_fill_value_is_compared_part_by_part(xp: Any, layout: xs.Layout) -> None:
    """With fill value nan + 0j an element is left out only where both parts match (NaN matching NaN, signs
    of zeros included): 1 + nanj, nan + 1j and nan - 0j are kept, not turned into the fill value."""
    nan = math.nan
    host = np.asarray([[complex(1.0, nan), complex(nan, 1.0)], [complex(nan, 0.0), complex(nan, -0.0)]])
    s = xs.to_sparse(xp.asarray(host), layout=layout, fill_value=complex(nan, 0.0))
    assert s.nnz == 3
    assert_identical(to_numpy(xs.to_dense(s)), host)


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_signed_zero_is_not_the_fill_value(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """dense -> layout leaves out exactly the elements that are the fill value with its sign (-0.0 is
    specified with fill value +0.0 and the reverse; NaN only with a NaN fill value), through the
    dispatcher and through every kernel registered for the conversion that accepts the input; to_dense
    gives the zeros back with their signs, from every kernel too."""
    host, fill, kw, nnz = data.draw(signed_zero_cases(xp, layout), label="case")
    x = xp.asarray(host)
    s = xs.to_sparse(x, fill_value=fill, **kw)
    _check_signed(s, host, fill, nnz)
    target = conversion_target(x, layout, fill_value=fill, **{k: v for k, v in kw.items() if k != "layout"})
    for kernel in dispatch.resolve("convert", (xs.strided, layout), backend):
        reason, out = _call_kernel(kernel, xp, x, target)
        if reason is None:
            _check_signed(out, host, fill, nnz)
    back = conversion_target(s, xs.strided)
    for kernel in dispatch.resolve("convert", (layout, xs.strided), backend):
        reason, out = _call_kernel(kernel, xp, s, back)
        if reason is None:
            assert_identical(to_numpy(out), host, err_msg=kernel.describe())


@pytest.mark.parametrize(("src", "dst"), [(a, b) for a in SPARSE_LAYOUTS for b in SPARSE_LAYOUTS if a is not b], ids=str)
@FEW
@given(data=st.data())
def test_signed_zeros_survive_sparse_conversions(backend: str, xp: Any, src: xs.Layout, dst: xs.Layout, data: st.DataObject) -> None:
    """A stored zero of the other sign stays stored, with its sign, through conversions between sparse
    layouts (every accepting kernel); 2-D, so that every pair of layouts applies."""
    host, fill, kw, _ = data.draw(signed_zero_cases(xp, xs.sparse_csr), label="case")
    flat = host.reshape(-1)
    host = flat[: flat.size - flat.size % 2].reshape(-1, 2)  # rows of two: the blocksize (1, 2) divides them
    x = xp.asarray(host)
    bs = (1, 2)
    a = xs.to_sparse(x, layout=src, fill_value=fill, blocksize=bs if src.is_blocked else None)
    out = xs.to_sparse(a, layout=dst, blocksize=bs if dst.is_blocked else None)
    assert_identical(to_numpy(xs.to_dense(out)), host)
    target = conversion_target(a, dst, blocksize=bs if dst.is_blocked else None)
    for kernel in dispatch.resolve("convert", (src, dst), backend):
        reason, res = _call_kernel(kernel, xp, a, target)
        if reason is None:
            assert_identical(to_numpy(xs.to_dense(res)), host, err_msg=kernel.describe())


def test_negative_zero_is_specified(backend: str, xp: Any) -> None:
    """The docs' example: -0.0 is stored with fill value +0.0 and comes back with its sign; +0.0 is
    stored with fill value -0.0; a conversion does not trade one signed zero fill value for the other."""
    x = xp.asarray(np.asarray([-0.0, 0.0, 1.0]))
    s = xs.to_sparse(x)
    assert s.nnz == 2
    assert [math.copysign(1.0, v) for v in to_numpy(xs.to_dense(s)).tolist()] == [-1.0, 1.0, 1.0]
    n = xs.to_sparse(x, fill_value=-0.0)
    assert n.nnz == 2 and to_numpy(n.values()).tolist() == [0.0, 1.0]
    assert [math.copysign(1.0, v) for v in to_numpy(xs.to_dense(n)).tolist()] == [-1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"a conversion keeps the fill value \(array fill_value=0.0, requested -0.0\)"):
        xs.to_sparse_csr(xs.to_sparse(xp.asarray(np.zeros((2, 2)))), fill_value=-0.0)


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@pytest.mark.parametrize("dtype", _FLOATING)
def test_every_kernel_keeps_negative_zeros(backend: str, xp: Any, layout: xs.Layout, dtype: str) -> None:
    """A plain 2-D input with fill value +0.0 (the case every native kernel takes): each registered
    dense -> layout kernel that accepts it stores the -0.0 elements (a -0.0 part of a complex value
    too), and each layout -> dense kernel gives them back with their signs."""
    if not hasattr(xp, dtype):
        pytest.skip(f"{backend} has no {dtype}")
    inf = math.inf
    if dtype.startswith("complex"):
        host = np.zeros((2, 4), dtype=dtype)
        host.real = [[0.0, -0.0, -0.0, 0.0], [-0.0, 0.0, 1.0, 0.0]]
        host.imag = [[0.0, 0.0, -inf, -0.0], [-0.0, 0.0, -0.0, 0.0]]
        nnz = {xs.sparse_coo: 5, xs.sparse_csr: 5, xs.sparse_csc: 5, xs.sparse_bsr: 4, xs.sparse_bsc: 4}[layout]
    else:
        host = np.asarray([[0.0, -0.0, -0.0, 0.0], [-0.0, 0.0, 1.0, 0.0]], dtype=dtype)
        nnz = {xs.sparse_coo: 4, xs.sparse_csr: 4, xs.sparse_csc: 4, xs.sparse_bsr: 4, xs.sparse_bsc: 4}[layout]
    x = xp.asarray(host)
    kw = {"blocksize": (1, 2)} if layout.is_blocked else {}
    ran = 0
    for kernel in dispatch.resolve("convert", (xs.strided, layout), backend):
        reason, out = _call_kernel(kernel, xp, x, conversion_target(x, layout, **kw))
        if reason is None:
            assert out.nnz == nnz, kernel.describe()
            assert_identical(to_numpy(xs.to_dense(out)), host, err_msg=kernel.describe())
            ran += 1
    s = xs.to_sparse(x, layout=layout, **kw)
    for kernel in dispatch.resolve("convert", (layout, xs.strided), backend):
        reason, out = _call_kernel(kernel, xp, s, conversion_target(s, xs.strided))
        if reason is None:
            assert_identical(to_numpy(out), host, err_msg=kernel.describe())
            ran += 1
    assert ran >= 2


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
def test_zero_only_kernels_decline_negative_zero_fill(backend: str, xp: Any, layout: xs.Layout) -> None:
    """A native kernel that assumes fill value 0 (it leaves out what equals 0, or writes zeros) takes
    +0.0 but declines -0.0, naming the fill value, and the dispatcher's result keeps every sign."""
    host = np.asarray([[0.0, -0.0, 0.0, 2.0], [0.0, 0.0, -0.0, 0.0]])
    x = xp.asarray(host)
    kw = {"blocksize": (1, 2)} if layout.is_blocked else {}
    s = xs.to_sparse(x, layout=layout, fill_value=-0.0, **kw)
    assert s.nnz == (4 if layout.is_blocked else 6)
    assert_identical(to_numpy(xs.to_dense(s)), host)
    declined = 0
    for src, dst, arg in ((xs.strided, layout, x), (layout, xs.strided, s)):
        t = conversion_target(arg, dst, fill_value=-0.0, **kw) if dst is layout else conversion_target(arg, dst)
        for kernel in dispatch.resolve("convert", (src, dst), backend):
            if kernel.backend is None:
                continue
            reason = accepts(kernel, xp, arg, t)
            if reason is not None and "fill value" in reason:
                declined += 1
    if backend in ("numpy", "torch") and layout.is_compressed:
        assert declined, "the compiled and torch kernels convert fill value +0.0 only"


# -- 6. transposes as views -------------------------------------------------------------------------


@pytest.mark.parametrize("layout", COMPRESSED_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_transpose_is_a_view(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """CSR <-> CSC and BSR <-> BSC transposes reinterpret the index arrays and view the values."""
    case = data.draw(S.dense_cases(xp, max_dense_dims=0), label="case")
    a = case.sparse(layout)
    t = a.mT
    assert t.layout is layout.transposed
    assert t.shape == case.batch_shape + case.sparse_shape[::-1]
    assert t.blocksize == a.blocksize[::-1]
    assert t.compressed_indices() is a.compressed_indices() and t.plain_indices() is a.plain_indices()
    assert t.nnz == a.nnz
    if math.prod(a.values().shape):
        assert shares_buffer(t.values(), a.values())
    assert_sparse_equal(t, xp.matrix_transpose(case.array))
    assert_same_components(t.mT, a)
    if not case.batch_shape:
        assert_same_components(a.T, t)


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_bsr], ids=str)
@SOME
@given(data=st.data())
def test_transpose_commutes_with_conversion(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """The blog's rule: to_sparse_bsr(d, (p, q)).mT == to_sparse_bsc(d.mT, (q, p)), in elements and in
    components (blocks transposed); the same for CSR/CSC, and for hybrid arrays through transpose_sparse."""
    case = data.draw(S.dense_cases(xp), label="case")
    a = case.sparse(layout)
    p, q = case.blocksize
    d_t = swap_sparse_dims(xp, case.array, case.batch_dim)
    kw: dict[str, Any] = {"dense_dim": case.dense_dim, "index_dtype": case.index_dtype}
    if layout.is_blocked:
        kw["blocksize"] = (q, p)
    expected = xs.to_sparse(d_t, layout=layout.transposed, **kw)
    if case.dense_dim == 0:
        t = a.mT
    else:
        t = a.transpose_sparse()
        if case.dense_dim == 1:
            with pytest.raises(xs.LayoutError, match=r"^matrix_transpose: the last two dimensions of this .* mix sparse and dense"):
                a.mT
    assert_same_components(t, expected)
    assert_sparse_equal(t, d_t)


# -- 7. invariant 3.9: every batch the same number of specified elements ----------------------------


@pytest.mark.parametrize("layout", COMPRESSED_LAYOUTS, ids=str)
@pytest.mark.parametrize("source", ["strided", "coo"])
@FEW
@given(data=st.data())
def test_batches_with_different_nse_raise(backend: str, xp: Any, source: str, layout: xs.Layout, data: st.DataObject) -> None:
    """Through the dispatcher and through every kernel that accepts the input, on every backend."""
    dense, dense_dim, blocksize = data.draw(S.unequal_nse_cases(xp), label="case")
    x = dense if source == "strided" else xs.to_sparse_coo(dense, dense_dim=dense_dim)
    kw = {"dense_dim": dense_dim, "blocksize": blocksize if layout.is_blocked else None}
    with pytest.raises(xs.InvariantError, match=r"^invariant 3\.9 violated: to_sparse: every batch of a sparse_\w+ array must hold the same number of specified elements"):
        xs.to_sparse(x, layout=layout, **kw)
    target = conversion_target(x, layout, **kw)
    for kernel in dispatch.resolve("convert", (layout_of(x), layout), backend):
        if accepts(kernel, xp, x, target) is None:
            with pytest.raises(xs.InvariantError, match=r"3\.9"):
                kernel.func(xp, x, target)


# -- 8. the NumPy and torch backends agree ----------------------------------------------------------


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@MORE
@given(data=st.data())
def test_numpy_and_torch_give_identical_components(data: st.DataObject) -> None:
    """The same input converted on each backend (native kernels where they accept) gives identical
    components, for every pair of layouts and for coalesce."""
    import torch

    xp = xs.get_backend("numpy").load()
    case = data.draw(S.dense_cases(xp, fill=None), label="case")
    on_torch = xs.to_backend(case.array, "torch")
    assert isinstance(on_torch, torch.Tensor)
    blocksize = data.draw(st.sampled_from([case.blocksize, case.alt_blocksize]), label="blocksize")
    for src, dst in itertools.product(LAYOUTS, LAYOUTS):
        if src is xs.strided and dst is xs.strided:
            continue
        kw = sparse_kwargs(case, src, dst, blocksize, None)
        a = case.sparse(src)
        b = on_torch if src is xs.strided else xs.to_backend(a, "torch")
        on_numpy, on_torch_result = convert(a, **kw), convert(b, **kw)
        assert isinstance(on_torch_result, torch.Tensor) or on_torch_result.backend == "torch"
        assert_same_components(xs.to_backend(on_torch_result, "numpy"), on_numpy)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    u = S.uncoalesced_like(xp, rng, case.sparse(xs.sparse_coo), case.index_dtype)
    assert_same_components(xs.to_backend(xs.coalesce(xs.to_backend(u, "torch")), "numpy"), xs.coalesce(u))


# -- 9. inputs large enough for the parallel paths of the compiled kernels --------------------------


@pytest.mark.parametrize("dtype", ["float64", "bool"])
def test_large_uncoalesced_coo(backend: str, xp: Any, dtype: str) -> None:
    """70 000 entries (the compiled scatter goes parallel from 65 536) with many duplicates."""
    rng = np.random.default_rng(7)
    n, size = 70_000, 300
    idx = rng.integers(0, size, (2, n))
    vals = rng.integers(1, 3, n).astype(dtype)
    expected = np.zeros((size, size), dtype=dtype)
    np.add.at(expected, tuple(idx), vals)
    coo = xs.sparse_coo_array(xp.asarray(idx), xp.asarray(vals), (size, size))
    for layout in (xs.sparse_csr, xs.sparse_csc):
        assert_sparse_equal(xs.to_sparse(coo, layout=layout), xp.asarray(expected))
    c = xs.coalesce(coo)
    assert_same_components(xs.to_sparse_coo(xs.to_sparse_csr(c)), c)
    np.testing.assert_array_equal(to_numpy(xs.to_dense(coo)), expected)


def test_huge_blocks_without_blocks_convert_by_their_index_dtype(backend: str, xp: Any) -> None:
    # a BSR array of int32 block indices whose element indices need int64: a raw OverflowError on NumPy and
    # array_api_strict (the element indices were computed in int32), 34 GB asked of torch (BSR -> COO)
    z = xs.to_sparse_bsr(xs.zeros((2, 2**32), layout=xs.sparse_bsr, blocksize=(1, 2**31), backend=backend), index_dtype="int32")
    for layout in (xs.sparse_coo, xs.sparse_csr):
        with pytest.raises(xs.InvariantError, match=r"invariant 1\.3 violated: .*int32 indices cannot address"):
            xs.to_sparse(z, layout=layout)
    wide = xs.to_sparse_bsr(z, blocksize=(1, 2**31), index_dtype="int64")
    for layout in (xs.sparse_coo, xs.sparse_csr):
        r = xs.to_sparse(wide, layout=layout)
        assert r.nnz == 0 and tuple(r.shape) == (2, 2**32) and r.layout is layout


def test_torch_uncoalesced_complex_coo_to_compressed() -> None:
    # torch's to_sparse added complex duplicates with its complex add: inf + nan j, and a lost -0.0 part
    torch = pytest.importorskip("torch")
    a = xs.sparse_coo_array(np.array([[0, 0, 1, 1], [1, 1, 0, 0]]), np.array([1 + 1j, complex(math.inf, 0), complex(-0.0, -0.0), complex(-0.0, -0.0)]), (2, 2))
    t = xs.to_backend(a, "torch")
    for layout in (xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr):
        got = xs.to_sparse(t, layout=layout, **({"blocksize": (1, 1)} if layout is xs.sparse_bsr else {}))
        assert_sparse_equal(got, xs.to_dense(a))


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_bsr, xs.sparse_bsc], ids=str)
def test_torch_permuted_input_gives_row_major_values(layout: xs.Layout) -> None:
    # torch's boolean gather of a permuted tensor keeps the input's order of strides: the generic kernel
    # (which runs for fill value 1) made BSR/BSC values that broke invariant 3.7, and raised it
    torch = pytest.importorskip("torch")
    x = torch.ones(3, 4, 4, dtype=torch.float64)
    x[1, 2, 1] = 5.0
    x[0, 3, 3] = -2.0
    x = x.permute(2, 1, 0)  # (4, 4, 3), strides (1, 4, 16)
    kwargs: dict[str, Any] = {"sparse_dim": 2} if layout is xs.sparse_coo else {"dense_dim": 1, "blocksize": (2, 2)}
    s = xs.to_sparse(x, layout=layout, fill_value=1.0, **kwargs)
    assert s._vals.is_contiguous()
    assert_sparse_equal(s, x)


def test_torch_conversion_of_a_wide_matrix_to_bsr_follows_nnz() -> None:
    # torch's CSR -> BSR keeps a workspace of one entry per block column: 2 x 2**32 raised std::bad_alloc
    # (blocksize 1 x 1); its kernel declines there and the generic one (work in nnz) converts
    torch = pytest.importorskip("torch")
    wide = (2, 2**32)
    sources = [
        xs.sparse_csr_array(torch.tensor([0, 1, 1]), torch.tensor([5]), torch.tensor([1.0]), wide),
        xs.sparse_coo_array(torch.tensor([[0], [5]]), torch.tensor([1.0]), wide),
    ]
    for a in sources:
        native = [k for k in xs.kernels("convert") if k.backend == "torch" and k.func.__name__ == "_convert_to_sparse_torch"][0]
        target = xs._conversion._target("to_sparse_bsr", a, xs.sparse_bsr, a._backend, a._xp, None, None, (1, 1), None, None)
        assert "allocates one entry per block column (4294967296 of them for nnz=1)" in native.supports(a._xp, a, target)
        for blocksize, (crow, col) in (((1, 1), ([0, 1, 1], [5])), ((2, 2), ([0, 1], [2]))):
            b = xs.to_sparse_bsr(a, blocksize)
            assert b.shape == wide and b.crow_indices().tolist() == crow and b.col_indices().tolist() == col
            assert b.values().tolist() == ([[[1.0]]] if blocksize == (1, 1) else [[[0.0, 1.0], [0.0, 0.0]]])
