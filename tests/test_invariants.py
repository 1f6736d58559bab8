"""The invariants of every sparse format (``xsparse/formats/_invariants.py``), broken one at a time.

Numbering follows ``seeds/bsr_invariants_blog.txt`` generalised to every compressed layout in
compressed/plain terms (crow/col for CSR and BSR, ccol/row for CSC and BSC); COO's are ``coo.N``. Each
test breaks one invariant of an otherwise valid array and checks the :class:`xsparse.InvariantError` that
names it. The checks that read index data (5.x, coo.5, coo.6) are also shown to run only when asked for,
and the switch that asks for them, :class:`xsparse.check_sparse_tensor_invariants`, is tested for
nesting, decorating and per-thread scoping.
"""

from __future__ import annotations

import math
import re
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xsparse as xs
from xsparse._common import dtype_name
from xsparse.testing import check_invariants, to_numpy

COMPRESSED = [xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
BLOCK = (2, 3)

# One valid pattern, in compressed/plain terms: 3 compressed slices holding 2, 0 and 1 elements (blocks)
# over 4 plain positions. Slice 0 holds plain indices 1 and 3, slice 2 holds 0: a plain index may go
# down from one slice to the next, only not within a slice.
CI = [0, 2, 2, 3]
PI = [1, 3, 0]
N_PLAIN = 4


# --------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------
def sparse_shape(layout: xs.Layout, n_compressed: int, n_plain: int) -> tuple[int, int]:
    """The two sparse sizes of a ``layout`` array with this grid of compressed x plain blocks."""
    bs = BLOCK if layout.is_blocked else (1, 1)
    grid = [0, 0]
    grid[layout.compressed_dim] = n_compressed
    grid[1 - layout.compressed_dim] = n_plain
    return (grid[0] * bs[0], grid[1] * bs[1])


def parts(
    layout: xs.Layout,
    batch: tuple[int, ...] = (),
    dense: tuple[int, ...] = (),
    index_dtype: Any = np.int64,
    ci: list[int] = CI,
    pi: list[int] = PI,
    n_plain: int = N_PLAIN,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    """NumPy components and the shape of a ``layout`` array holding the same pattern in every batch."""
    cia = np.broadcast_to(np.asarray(ci, dtype=index_dtype), batch + (len(ci),)).copy()
    pia = np.broadcast_to(np.asarray(pi, dtype=index_dtype), batch + (len(pi),)).copy()
    vshape = batch + (len(pi),) + (BLOCK if layout.is_blocked else ()) + dense
    values = np.arange(1, math.prod(vshape) + 1, dtype=np.float64).reshape(vshape)
    return cia, pia, values, batch + sparse_shape(layout, len(ci) - 1, n_plain) + dense


def build(xp: Any, layout: xs.Layout, ci: Any, pi: Any, values: Any, shape: Any, **kwargs: Any) -> xs.CompressedArray:
    """The public constructor, with NumPy components moved to ``xp`` first."""
    return xs.sparse_compressed_array(xp.asarray(ci), xp.asarray(pi), xp.asarray(values), shape, layout=layout, **kwargs)


def direct(backend: str, layout: Any, ci: Any, pi: Any, values: Any, shape: Any, check: bool | None = None) -> xs.CompressedArray:
    """The class constructor, which takes the components as they are (no copy, no conversion)."""
    b = xs.get_backend(backend)
    return xs.CompressedArray(ci, pi, values, tuple(shape), layout=layout, backend=b, xp=b.namespace(), check=check)


def direct_coo(backend: str, indices: Any, values: Any, shape: Any, check: bool | None = None, coalesced: bool = False) -> xs.COOArray:
    b = xs.get_backend(backend)
    return xs.COOArray(indices, values, tuple(shape), backend=b, xp=b.namespace(), coalesced=coalesced, check=check)


def numpy_ns() -> Any:
    return xs.get_backend("numpy").namespace()


def violated(invariant: str, text: str = "") -> str:
    """The ``match=`` pattern of an InvariantError for ``invariant`` whose message continues with ``text``."""
    return rf"^invariant {re.escape(invariant)} violated: .*{text}"


def on_one_batch(batch: tuple[int, ...], base: list[int], bad: list[int]) -> np.ndarray:
    """``base`` in every batch but the last, ``bad`` in the last (or just ``bad`` without batch dims)."""
    out = np.broadcast_to(np.asarray(base, dtype=np.int64), batch + (len(base),)).copy()
    if not batch:
        return np.asarray(bad, dtype=np.int64)
    out.reshape(-1, len(base))[-1] = bad
    return out


BATCHES = [pytest.param((), id="unbatched"), pytest.param((2,), id="batch2")]
layouts = pytest.mark.parametrize("layout", COMPRESSED, ids=str)
batches = pytest.mark.parametrize("batch", BATCHES)


# --------------------------------------------------------------------------------------------------------
# valid arrays pass the full check
# --------------------------------------------------------------------------------------------------------
@layouts
@pytest.mark.parametrize("batch", [(), (2,), (2, 1)], ids=str)
@pytest.mark.parametrize("dense", [(), (2,)], ids=str)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("empty", [False, True], ids=["nnz3", "nnz0"])
def test_valid_compressed_passes_full_check(
    xp: Any, layout: xs.Layout, batch: tuple[int, ...], dense: tuple[int, ...], index_dtype: Any, empty: bool
) -> None:
    ci, pi = ([0, 0, 0, 0], []) if empty else (CI, PI)
    parts_ = parts(layout, batch, dense, index_dtype, ci, pi)
    a = build(xp, layout, *parts_, check_invariants=True)
    check_invariants(a)
    assert a.shape == parts_[3]
    assert a.nnz == len(pi)
    assert a.batch_dim() == len(batch) and a.dense_dim() == len(dense)
    assert dtype_name(a.index_dtype) == np.dtype(index_dtype).name


@layouts
def test_valid_compressed_with_empty_batch_passes(xp: Any, layout: xs.Layout) -> None:
    a = build(xp, layout, *parts(layout, batch=(0,)), check_invariants=True)
    check_invariants(a)
    assert a.shape[0] == 0


@pytest.mark.parametrize("layout", [xs.sparse_bsr, xs.sparse_bsc], ids=str)
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_blocks_stored_column_major_pass_3_7(backend: str, layout: xs.Layout) -> None:
    """3.7 accepts values whose two block dimensions are swapped views of contiguous data (the transpose)."""
    ci, pi, values, shape = parts(layout, batch=(2,), dense=())
    xp = xs.get_backend(backend).namespace()
    stored = xp.asarray(np.ascontiguousarray(np.swapaxes(values, -1, -2)))
    swapped = xp.permute_dims(stored, (0, 1, 3, 2))
    assert xs.get_backend(backend).is_contiguous(swapped) is False
    a = direct(backend, layout, xp.asarray(ci), xp.asarray(pi), swapped, shape, check=True)
    check_invariants(a.mT)
    check_invariants(a)


@pytest.mark.parametrize("dense", [(), (2,)], ids=str)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("coalesced", [False, True])
def test_valid_coo_passes_full_check(xp: Any, dense: tuple[int, ...], index_dtype: Any, coalesced: bool) -> None:
    indices = np.asarray([[0, 1, 1, 2], [3, 0, 2, 1]], dtype=index_dtype)
    values = np.arange(4 * math.prod(dense), dtype=np.float64).reshape((4, *dense))
    a = xs.sparse_coo_array(xp.asarray(indices), xp.asarray(values), (3, 4, *dense), is_coalesced=coalesced, check_invariants=True)
    check_invariants(a)
    assert a.is_coalesced() is coalesced
    empty = xs.sparse_coo_array(xp.asarray(indices[:, :0]), xp.asarray(values[:0]), (3, 4, *dense), check_invariants=True)
    check_invariants(empty)
    assert empty.nnz == 0 and empty.is_coalesced()


def test_uncoalesced_coo_with_duplicates_is_valid(xp: Any) -> None:
    a = xs.sparse_coo_array(xp.asarray([[2, 0, 2]]), xp.asarray([1.0, 2.0, 3.0]), (3,), check_invariants=True)
    check_invariants(a)
    assert not a.is_coalesced()


# --------------------------------------------------------------------------------------------------------
# type invariants 1.x
# --------------------------------------------------------------------------------------------------------
@layouts
@batches
def test_1_2_index_dtypes_differ(xp: Any, layout: xs.Layout, batch: tuple[int, ...]) -> None:
    cname, pname = layout.index_names
    ci, pi, values, shape = parts(layout, batch)
    with pytest.raises(xs.InvariantError, match=violated("1.2", rf"{pname}\.dtype \(int32\) differs from {cname}\.dtype \(int64\)")):
        build(xp, layout, ci, pi.astype(np.int32), values, shape, check_invariants=False)


@layouts
def test_1_3_float_indices_public_constructor(xp: Any, layout: xs.Layout) -> None:
    cname, _ = layout.index_names
    ci, pi, values, shape = parts(layout)
    with pytest.raises(xs.InvariantError, match=violated("1.3", rf"{cname} must have dtype int32 or int64, got float64")) as info:
        build(xp, layout, ci.astype(np.float64), pi.astype(np.float64), values, shape)
    assert info.value.invariant == "1.3"


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@layouts
def test_1_3_float_indices_validator(backend: str, layout: xs.Layout) -> None:
    xp = xs.get_backend(backend).namespace()
    ci, pi, values, shape = parts(layout)
    with pytest.raises(xs.InvariantError, match=violated("1.3", "the indices dtype must be int32 or int64, got float64")):
        direct(backend, layout, xp.asarray(ci.astype(np.float64)), xp.asarray(pi.astype(np.float64)), xp.asarray(values), shape)


@pytest.mark.parametrize("layout", [xs.sparse_coo, *COMPRESSED], ids=str)
def test_1_3_float_index_lists_are_not_truncated(backend: str, layout: xs.Layout) -> None:
    """A nested list of floats is not silently truncated to integer indices."""
    if layout is xs.sparse_coo:
        make: Callable[[], Any] = lambda: xs.sparse_coo_array([[0.5, 1.7]], [1.0, 2.0], (2,), backend=backend)
    else:
        make = lambda: xs.sparse_compressed_array([0, 1], [0.5], [1.0], layout=layout, backend=backend)
    with pytest.raises(xs.InvariantError, match=violated("1.3", "must have dtype int32 or int64, got float")):
        make()


def test_empty_index_lists_become_int64(backend: str) -> None:
    a = xs.sparse_coo_array([[]], [], (3,), backend=backend)
    assert a.nnz == 0 and dtype_name(a.index_dtype) == "int64"
    c = xs.sparse_csr_array([0, 0], [], [], (1, 2), backend=backend)
    assert c.nnz == 0 and dtype_name(c.index_dtype) == "int64"


@layouts
@batches
def test_1_3_int32_cannot_address_the_shape(xp: Any, layout: xs.Layout, batch: tuple[int, ...]) -> None:
    # One compressed slice over 2**31 plain positions: no data to allocate, but not addressable in int32.
    ci, pi, values, _ = parts(layout, batch, ci=[0, 0], pi=[], index_dtype=np.int32)
    shape = batch + sparse_shape(layout, 1, 2**31)
    with pytest.raises(xs.InvariantError, match=violated("1.3", r"int32 indices cannot address 2147483648 elements\. Use int64 indices")):
        build(xp, layout, ci, pi, values, shape, check_invariants=False)
    # the largest int32 index still fits
    ok = build(xp, layout, ci, pi, values, batch + sparse_shape(layout, 1, 2**31 - 1), check_invariants=True)
    assert ok.nnz == 0
    build(xp, layout, ci.astype(np.int64), pi.astype(np.int64), values, shape, check_invariants=True)


def _unsupported_values(backend: str, name: str) -> Any:
    """Three values of a dtype the backend has but xsparse does not support."""
    if backend == "numpy":
        return np.asarray(["a", "b", "c"]) if name == "str" else np.asarray([1, 2, 3], dtype="datetime64[s]")
    import torch

    if name == "complex32":  # the blog's "complex32 (unsupported ATM)"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch: "ComplexHalf support is experimental"
            return torch.zeros(3, dtype=torch.complex32)
    return torch.zeros(3, dtype=getattr(torch, name))


@pytest.mark.parametrize(
    "backend, name",
    [("numpy", "str"), ("numpy", "datetime64"), ("torch", "complex32"), ("torch", "float8_e4m3fn")],
)
@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_bsc], ids=str)
def test_1_5_unsupported_values_dtype(backend: str, name: str, layout: xs.Layout) -> None:
    """array_api_strict has only the standard's dtypes, every one supported: 1.5 cannot break there."""
    xp = xs.get_backend(backend).namespace()
    values = _unsupported_values(backend, name)
    with pytest.raises(xs.InvariantError, match=violated("1.5", rf"values dtype {name}\S* is not a supported numeric or bool dtype")):
        if layout is xs.sparse_coo:
            xs.sparse_coo_array(xp.asarray([[0, 1, 2]]), values, (3,))
        elif layout is xs.sparse_csr:
            xs.sparse_csr_array(xp.asarray([0, 1, 2, 3]), xp.asarray([0, 0, 0]), values, (3, 1))
        else:
            blocks = values[:, None, None]  # three 1x1 blocks
            xs.sparse_bsc_array(xp.asarray([0, 3]), xp.asarray([0, 1, 2]), blocks, (3, 1))


# --------------------------------------------------------------------------------------------------------
# layout invariants 2.x
# --------------------------------------------------------------------------------------------------------
@layouts
@pytest.mark.parametrize("which, invariant", [(0, "2.1"), (1, "2.2"), (2, "2.3")])
def test_2_x_component_is_not_a_strided_array(layout: xs.Layout, which: int, invariant: str) -> None:
    ci, pi, values, shape = parts(layout)
    comps: list[Any] = [ci, pi, values]
    comps[which] = comps[which].tolist()
    name = ([*layout.index_names, "values"])[which]
    with pytest.raises(xs.InvariantError, match=violated(invariant, rf"{name} must be a strided array of the backend, got list")):
        direct("numpy", layout, comps[0], comps[1], comps[2], shape, check=False)


@pytest.mark.parametrize("which, invariant", [(0, "2.1"), (1, "2.3")])
def test_2_x_coo_component_is_not_a_strided_array(which: int, invariant: str) -> None:
    comps: list[Any] = [np.asarray([[0, 1]]), np.asarray([1.0, 2.0])]
    comps[which] = comps[which].tolist()
    name = ("indices", "values")[which]
    with pytest.raises(xs.InvariantError, match=violated(invariant, rf"{name} must be a strided array of the backend, got list")):
        direct_coo("numpy", comps[0], comps[1], (2,), check=False)


@pytest.mark.parametrize("layout", [xs.sparse_coo, *COMPRESSED], ids=str)
def test_2_x_sparse_component_in_public_constructor(layout: xs.Layout) -> None:
    """A sparse array given as a component is refused as such, not densified (nor a DensificationError)."""
    s = xs.sparse_coo_array([[0, 1]], [1.0, 2.0], (2,))
    if layout is xs.sparse_coo:
        with pytest.raises(xs.InvariantError, match=violated("2.3", "values must be a strided array.*got COOArray")):
            xs.sparse_coo_array([[0, 1]], s, (2,))
        with pytest.raises(xs.InvariantError, match=violated("2.1", "indices must be a strided array.*got COOArray")):
            xs.sparse_coo_array(s, [1.0, 2.0], (2,))
        return
    cname, pname = layout.index_names
    with pytest.raises(xs.InvariantError, match=violated("2.3", "values must be a strided array.*got COOArray")):
        xs.sparse_compressed_array([0, 2], [0, 1], s, layout=layout)
    with pytest.raises(xs.InvariantError, match=violated("2.1", f"{cname} must be a strided array.*got COOArray")):
        xs.sparse_compressed_array(s, [0, 1], [1.0, 2.0], layout=layout)
    with pytest.raises(xs.InvariantError, match=violated("2.2", f"{pname} must be a strided array.*got COOArray")):
        xs.sparse_compressed_array([0, 2], s, [1.0, 2.0], layout=layout)


@pytest.mark.parametrize("bad", [xs.sparse_coo, xs.strided, xs.sparse_semi_structured], ids=str)
def test_2_4_compressed_array_with_a_non_compressed_layout(bad: xs.Layout) -> None:
    ci, pi, values, shape = parts(xs.sparse_csr)
    with pytest.raises(xs.InvariantError, match=violated("2.4", rf"layout must be one of sparse_csr, sparse_csc, sparse_bsr, sparse_bsc, got {bad}")):
        direct("numpy", bad, ci, pi, values, shape)


# --------------------------------------------------------------------------------------------------------
# shape and strides invariants 3.x
# --------------------------------------------------------------------------------------------------------
@layouts
@batches
@pytest.mark.parametrize("dense", [(), (2,)], ids=str)
@pytest.mark.parametrize("change", [(1,), ()], ids=["extra_dim", "missing_dim"])
def test_3_1_shape_has_the_wrong_number_of_dimensions(
    xp: Any, layout: xs.Layout, batch: tuple[int, ...], dense: tuple[int, ...], change: tuple[int, ...]
) -> None:
    ci, pi, values, shape = parts(layout, batch, dense)
    bad = shape + change if change else shape[:-1]
    text = rf"shape {re.escape(str(bad))} must have {len(batch)} batch \+ 2 sparse \+ {len(dense)} dense dimensions"
    with pytest.raises(xs.InvariantError, match=violated("3.1", text)):
        build(xp, layout, ci, pi, values, bad, check_invariants=False)


@layouts
@batches
def test_3_1_negative_size(xp: Any, layout: xs.Layout, batch: tuple[int, ...]) -> None:
    ci, pi, values, shape = parts(layout, batch)
    bad = list(shape)
    bad[len(batch) + 1] = -bad[len(batch) + 1]
    with pytest.raises(xs.InvariantError, match=violated("3.1", rf"shape {re.escape(str(tuple(bad)))} has a negative size")):
        build(xp, layout, ci, pi, values, tuple(bad), check_invariants=False)


@pytest.mark.parametrize("layout", [xs.sparse_bsr, xs.sparse_bsc], ids=str)
@batches
@pytest.mark.parametrize("axis", [0, 1])
def test_3_1_blocksize_does_not_divide_the_shape(xp: Any, layout: xs.Layout, batch: tuple[int, ...], axis: int) -> None:
    ci, pi, values, shape = parts(layout, batch)
    bad = list(shape)
    bad[len(batch) + axis] += 1
    text = rf"shape {re.escape(str(tuple(bad)))} is not a whole number of blocks of blocksize \(2, 3\)"
    with pytest.raises(xs.InvariantError, match=violated("3.1", text)):
        build(xp, layout, ci, pi, values, tuple(bad), check_invariants=False)


@pytest.mark.parametrize("layout", [xs.sparse_bsr, xs.sparse_bsc], ids=str)
def test_3_1_zero_blocksize(xp: Any, layout: xs.Layout) -> None:
    ci, pi, _, shape = parts(layout)
    values = np.zeros((3, 0, 3))
    with pytest.raises(xs.InvariantError, match=violated("3.1", r"the blocks of the values \(values.shape=\(3, 0, 3\)\) have a zero size, blocksize \(0, 3\)\. Give every block at least one row and one column")):
        build(xp, layout, ci, pi, values, shape, check_invariants=False)


@layouts
def test_3_2_compressed_indices_zero_dimensional(xp: Any, layout: xs.Layout) -> None:
    cname, _ = layout.index_names
    _, pi, values, shape = parts(layout)
    with pytest.raises(xs.InvariantError, match=violated("3.2", rf"{cname} must have at least one dimension, got a 0-d array")):
        build(xp, layout, np.asarray(0), pi, values, shape, check_invariants=False)


@layouts
@batches
def test_3_3_plain_indices_ndim_differs(xp: Any, layout: xs.Layout, batch: tuple[int, ...]) -> None:
    cname, pname = layout.index_names
    ci, pi, values, shape = parts(layout, batch)
    n = len(batch) + 1
    text = rf"{pname}\.ndim \({n + 1}\) must equal {cname}\.ndim \({n}\)"
    with pytest.raises(xs.InvariantError, match=violated("3.3", text)):
        build(xp, layout, ci, pi[None], values, shape, check_invariants=False)


@layouts
@batches
def test_3_4_values_have_too_few_dimensions(layout: xs.Layout, batch: tuple[int, ...]) -> None:
    ci, pi, _, shape = parts(layout, batch)
    need = len(batch) + 1 + (2 if layout.is_blocked else 0)
    values = np.zeros(batch)
    text = rf"values\.ndim \({len(batch)}\) must be at least {need} for {layout} with {len(batch)} batch dimensions"
    with pytest.raises(xs.InvariantError, match=violated("3.4", text)):
        direct("numpy", layout, ci, pi, values, shape)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@layouts
@batches
@pytest.mark.parametrize("which, invariant", [(0, "3.5"), (1, "3.6"), (2, "3.7")])
def test_3_5_to_3_7_component_not_contiguous(backend: str, layout: xs.Layout, batch: tuple[int, ...], which: int, invariant: str) -> None:
    """A strided slice (every other element of a twice-as-long array) is not contiguous.

    array_api_strict has no notion of contiguity, so these cannot break there.
    """
    xp = xs.get_backend(backend).namespace()
    comps = [xp.asarray(c) for c in parts(layout, batch)[:3]]
    shape = parts(layout, batch)[3]
    c = comps[which]
    strided = xp.stack([c, c], axis=-1)[..., 0]  # c's values, two elements apart in memory
    assert xs.get_backend(backend).is_contiguous(strided) is False
    comps[which] = strided
    name = ([*layout.index_names, "values"])[which]
    with pytest.raises(xs.InvariantError, match=violated(invariant, rf"{name} must be contiguous.*\. Pass a contiguous copy")):
        direct(backend, layout, comps[0], comps[1], comps[2], shape, check=False)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_bsr], ids=str)
def test_public_constructor_makes_components_contiguous(backend: str, layout: xs.Layout) -> None:
    """The public constructor copies non-contiguous components (a slice, a transpose) into contiguous ones."""
    xp = xs.get_backend(backend).namespace()
    ci, pi, values, shape = parts(layout, batch=(2,), dense=(2,))
    # values stored with the dense axis first, then permuted into place: dense in memory, not contiguous
    permuted = xp.permute_dims(xp.asarray(np.ascontiguousarray(np.moveaxis(values, -1, 0))), (*range(1, values.ndim), 0))
    sliced_ci = xp.asarray(np.repeat(ci, 2, axis=-1))[..., ::2]
    a = xs.sparse_compressed_array(sliced_ci, xp.asarray(pi), permuted, shape, layout=layout, check_invariants=True)
    contiguous = xs.get_backend(backend).is_contiguous
    assert contiguous(a.compressed_indices()) and contiguous(a.values())
    np.testing.assert_array_equal(to_numpy(a.values()), values)
    np.testing.assert_array_equal(to_numpy(a.compressed_indices()), ci)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_3_5_coo_indices_not_contiguous(backend: str) -> None:
    xp = xs.get_backend(backend).namespace()
    indices = xp.asarray(np.asarray([[0, 0, 1, 1, 2, 2]]))[:, ::2]
    with pytest.raises(xs.InvariantError, match=violated("3.5", "indices must be contiguous")):
        direct_coo(backend, indices, xp.asarray([1.0, 2.0, 3.0]), (3,))


@layouts
@batches
def test_3_8_compressed_indices_length(xp: Any, layout: xs.Layout, batch: tuple[int, ...]) -> None:
    cname, _ = layout.index_names
    ci, pi, values, shape = parts(layout, batch)
    bad = list(shape)
    cd = len(batch) + layout.compressed_dim
    bad[cd] += (BLOCK if layout.is_blocked else (1, 1))[layout.compressed_dim]  # one more compressed slice
    text = rf"{cname}\.shape must be {re.escape(str(batch + (5,)))} for shape {re.escape(str(tuple(bad)))}, got {re.escape(str(batch + (4,)))}"
    with pytest.raises(xs.InvariantError, match=violated("3.8", text)):
        build(xp, layout, ci, pi, values, tuple(bad), check_invariants=False)


@layouts
def test_3_9_plain_indices_batch_shape(xp: Any, layout: xs.Layout) -> None:
    """Unbatched, 3.9 follows from 3.3; with batch dimensions the plain indices' batch shape can differ."""
    _, pname = layout.index_names
    ci, pi, values, shape = parts(layout, batch=(2,))
    text = rf"{pname}\.shape must be \(2, 3\) \(batch dimensions \(2,\)\), got \(1, 3\)"
    with pytest.raises(xs.InvariantError, match=violated("3.9", text)):
        build(xp, layout, ci, pi[:1], values, shape, check_invariants=False)


@layouts
@batches
@pytest.mark.parametrize("where", ["nse", "dense"])
def test_3_10_values_shape(xp: Any, layout: xs.Layout, batch: tuple[int, ...], where: str) -> None:
    ci, pi, values, shape = parts(layout, batch, dense=(2,))
    if where == "nse":
        values = np.concatenate([values, values], axis=len(batch))
        bad_nse = 6
    else:
        shape = shape[:-1] + (3,)
        bad_nse = 3
    expected = batch + (3,) + (BLOCK if layout.is_blocked else ()) + (shape[-1],)
    got = batch + (bad_nse,) + (BLOCK if layout.is_blocked else ()) + (2,)
    text = rf"values\.shape must be {re.escape(str(expected))}, got {re.escape(str(got))}"
    with pytest.raises(xs.InvariantError, match=violated("3.10", text)):
        build(xp, layout, ci, pi, values, shape, check_invariants=False)


# --------------------------------------------------------------------------------------------------------
# device invariants 4.x (array_api_strict has several devices)
# --------------------------------------------------------------------------------------------------------
def test_4_2_coo_components_on_different_devices() -> None:
    strict = pytest.importorskip("array_api_strict")
    other = strict.Device("device1")
    with pytest.raises(xs.InvariantError, match=violated("4.2", r"indices is on device .*device1.* but values are on device .*CPU_DEVICE")):
        xs.sparse_coo_array(strict.asarray([[0, 1]], device=other), strict.asarray([1.0, 2.0]), (2,))


@layouts
@pytest.mark.parametrize("which", [0, 1])
def test_4_x_components_on_different_devices(layout: xs.Layout, which: int) -> None:
    strict = pytest.importorskip("array_api_strict")
    other = strict.Device("device1")
    ci, pi, values, shape = parts(layout, batch=(2,))
    comps = [strict.asarray(ci), strict.asarray(pi), strict.asarray(values)]
    comps[which] = strict.asarray(comps[which], device=other)
    name = layout.index_names[which]
    text = rf"{name} is on device .*device1.* but values are on device .*CPU_DEVICE.*\. Move them to one device"
    with pytest.raises(xs.InvariantError, match=violated(("4.2", "4.3")[which], text)):
        xs.sparse_compressed_array(comps[0], comps[1], comps[2], shape, layout=layout)


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr], ids=str)
def test_4_x_components_on_one_other_device_pass(layout: xs.Layout) -> None:
    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    if layout is xs.sparse_coo:
        a: Any = xs.sparse_coo_array(strict.asarray([[0, 1]], device=dev), strict.asarray([1.0, 2.0], device=dev), check_invariants=True)
    else:
        a = xs.sparse_csr_array(strict.asarray([0, 1, 2], device=dev), strict.asarray([1, 0], device=dev), strict.asarray([1.0, 2.0], device=dev), check_invariants=True)
    check_invariants(a)
    assert a.device == dev and a.shape == (2, 2)[: a.ndim]


# --------------------------------------------------------------------------------------------------------
# indices invariants 5.x: read index data, so they run only when asked for
# --------------------------------------------------------------------------------------------------------
def _index_cases() -> list[Any]:
    """(bad compressed indices, bad plain indices, n_plain of the shape, invariant, message pattern)."""
    c = "{c}"
    p = "{p}"
    cases = [
        ("5.1", [1, 2, 2, 3], PI, N_PLAIN, rf"{c}\[\.\.\., 0\] must be 0, got 1"),
        ("5.2", [0, 2, 2, 2], PI, N_PLAIN, rf"{c}\[\.\.\., -1\] must equal nse=3, got 2"),
        ("5.3", [0, 3, 2, 3], PI, N_PLAIN, rf"0 <= {c}\[\.\.\., i\] - {c}\[\.\.\., i-1\] <= 4 must hold for every i, got a difference of -1"),
        ("5.3", [0, 0, 0, 3], [0, 1, 0], 2, rf"0 <= {c}\[\.\.\., i\] - {c}\[\.\.\., i-1\] <= 2 must hold for every i, got a difference of 3"),
        ("5.4", CI, [1, -1, 0], N_PLAIN, rf"{p} must be non-negative, got -1"),
        ("5.5", CI, [1, 4, 0], N_PLAIN, rf"{p} must be < 4 \(the number of plain (block )?dimensions\), got 4"),
        ("5.6", CI, [3, 1, 0], N_PLAIN, rf"{p} must be sorted and distinct within each compressed slice, got 3 followed by 1"),
        ("5.6", CI, [3, 3, 0], N_PLAIN, rf"{p} must be sorted and distinct within each compressed slice, got 3 followed by 3"),
    ]
    ids = ["5.1", "5.2", "5.3-negative", "5.3-too-many", "5.4", "5.5", "5.6-unsorted", "5.6-duplicate"]
    return [pytest.param(*case, id=i) for case, i in zip(cases, ids)]


def _bad_index_parts(layout: xs.Layout, batch: tuple[int, ...], ci_bad: list[int], pi_bad: list[int], n_plain: int) -> tuple[Any, ...]:
    ci, pi, values, shape = parts(layout, batch, n_plain=n_plain)
    return on_one_batch(batch, CI, ci_bad), on_one_batch(batch, PI, pi_bad), values, shape


@layouts
@pytest.mark.parametrize("batch", [(), (2,), (3, 2)], ids=str)
@pytest.mark.parametrize("invariant, ci_bad, pi_bad, n_plain, text", _index_cases())
def test_5_x_broken_indices(
    xp: Any, layout: xs.Layout, batch: tuple[int, ...], invariant: str, ci_bad: list[int], pi_bad: list[int], n_plain: int, text: str
) -> None:
    """Broken in the last batch only (or the only matrix): every batch is checked."""
    cname, pname = layout.index_names
    comps = _bad_index_parts(layout, batch, ci_bad, pi_bad, n_plain)
    with pytest.raises(xs.InvariantError, match=violated(invariant, text.format(c=cname, p=pname))) as info:
        build(xp, layout, *comps, check_invariants=True)
    assert info.value.invariant == invariant


@layouts
@pytest.mark.parametrize("invariant, ci_bad, pi_bad, n_plain, text", _index_cases())
def test_5_x_checks_run_only_when_asked(
    xp: Any, layout: xs.Layout, invariant: str, ci_bad: list[int], pi_bad: list[int], n_plain: int, text: str
) -> None:
    comps = _bad_index_parts(layout, (2,), ci_bad, pi_bad, n_plain)
    pattern = violated(invariant)
    # not asked: the cheap checks pass and the array is built
    assert build(xp, layout, *comps).nnz == 3
    assert build(xp, layout, *comps, check_invariants=False).nnz == 3
    # asked by argument, or by the context
    with pytest.raises(xs.InvariantError, match=pattern):
        build(xp, layout, *comps, check_invariants=True)
    with xs.check_sparse_tensor_invariants():
        with pytest.raises(xs.InvariantError, match=pattern):
            build(xp, layout, *comps)
        # an explicit False wins over the context
        assert build(xp, layout, *comps, check_invariants=False).nnz == 3
        with xs.check_sparse_tensor_invariants(False):
            assert build(xp, layout, *comps).nnz == 3
    # an explicit True wins over a context that turned the checks off
    with xs.check_sparse_tensor_invariants(False), pytest.raises(xs.InvariantError, match=pattern):
        build(xp, layout, *comps, check_invariants=True)


@layouts
def test_5_6_across_slices_and_batches_is_valid(xp: Any, layout: xs.Layout) -> None:
    """Plain indices may repeat or go down across compressed slices and across batches."""
    ci = np.asarray([[0, 1, 2, 3], [0, 3, 3, 3]])
    pi = np.asarray([[3, 3, 0], [0, 1, 2]])
    _, _, values, shape = parts(layout, batch=(2,))
    check_invariants(build(xp, layout, ci, pi, values, shape, check_invariants=True))


# --------------------------------------------------------------------------------------------------------
# COO invariants
# --------------------------------------------------------------------------------------------------------
def test_coo_1_indices_not_2d_public(xp: Any) -> None:
    with pytest.raises(xs.InvariantError, match=violated("coo.1", r"sparse_coo_array: indices must be 2-D \(sparse_dim, nse\), got shape \(3,\)")):
        xs.sparse_coo_array(xp.asarray([0, 1, 2]), xp.asarray([1.0, 2.0, 3.0]), (3,))


@pytest.mark.parametrize("indices", [np.asarray([0, 1, 2]), np.zeros((1, 1, 3), dtype=np.int64)], ids=["1d", "3d"])
def test_coo_1_indices_not_2d_validator(indices: np.ndarray) -> None:
    text = rf"indices must be 2-D \(sparse_dim, nse\), got shape {re.escape(str(indices.shape))}"
    with pytest.raises(xs.InvariantError, match=violated("coo.1", text)):
        direct_coo("numpy", indices, np.asarray([1.0, 2.0, 3.0]), (3,))


@pytest.mark.parametrize("shape", [(3,), (3, 4, 2, 1)], ids=["too_few", "too_many"])
def test_coo_2_shape_ndim(xp: Any, shape: tuple[int, ...]) -> None:
    indices = xp.asarray([[0, 1], [2, 3]])
    values = xp.asarray([[1.0, 2.0], [3.0, 4.0]])  # sparse_dim 2 + dense_dim 1
    text = rf"sparse_dim \(2\) \+ dense_dim \(1\) must equal ndim \({len(shape)}\) for shape {re.escape(str(shape))}"
    with pytest.raises(xs.InvariantError, match=violated("coo.2", text)):
        xs.sparse_coo_array(indices, values, shape, check_invariants=False)


def test_coo_2_values_zero_dimensional() -> None:
    with pytest.raises(xs.InvariantError, match=violated("coo.2", r"sparse_dim \(1\) \+ dense_dim \(-1\) must equal ndim \(1\)")):
        direct_coo("numpy", np.asarray([[0]]), np.asarray(1.0), (3,))


def test_coo_2_negative_size(xp: Any) -> None:
    with pytest.raises(xs.InvariantError, match=violated("coo.2", r"shape \(-3, 4\) has a negative size")):
        xs.sparse_coo_array(xp.asarray([[0], [1]]), xp.asarray([1.0]), (-3, 4), check_invariants=False)


def test_coo_3_values_length(xp: Any) -> None:
    text = r"values\.shape\[0\] \(3\) must equal indices\.shape\[1\] \(nse=2\)"
    with pytest.raises(xs.InvariantError, match=violated("coo.3", text)):
        xs.sparse_coo_array(xp.asarray([[0, 1]]), xp.asarray([1.0, 2.0, 3.0]), (3,), check_invariants=False)


def test_coo_4_dense_shape(xp: Any) -> None:
    text = r"values\.shape\[1:\] must equal the dense shape \(3,\), got \(2,\)"
    with pytest.raises(xs.InvariantError, match=violated("coo.4", text)):
        xs.sparse_coo_array(xp.asarray([[0, 1]]), xp.asarray([[1.0, 2.0], [3.0, 4.0]]), (3, 3), check_invariants=False)


def test_coo_1_3_float_indices_validator() -> None:
    with pytest.raises(xs.InvariantError, match=violated("1.3", "the indices dtype must be int32 or int64, got float64")):
        direct_coo("numpy", np.asarray([[0.0, 1.0]]), np.asarray([1.0, 2.0]), (2,))


def test_coo_1_3_float_indices_public(xp: Any) -> None:
    with pytest.raises(xs.InvariantError, match=violated("1.3", "indices must have dtype int32 or int64, got float32")):
        xs.sparse_coo_array(xp.asarray(np.asarray([[0.0, 1.0]], dtype=np.float32)), xp.asarray([1.0, 2.0]), (2,))


def test_coo_1_3_int32_cannot_address_the_shape(xp: Any) -> None:
    indices = xp.asarray(np.zeros((2, 0), dtype=np.int32))
    with pytest.raises(xs.InvariantError, match=violated("1.3", r"int32 indices cannot address shape \(2, 2147483648\) with nse=0\. Use int64 indices")):
        xs.sparse_coo_array(indices, xp.asarray(np.zeros((0,))), (2, 2**31), check_invariants=False)
    assert xs.sparse_coo_array(indices, xp.asarray(np.zeros((0,))), (2, 2**31 - 1), check_invariants=True).nnz == 0
    # int64 indices are the widest: the fix is smaller sizes, not another index dtype
    wide = xp.asarray(np.zeros((1, 0), dtype=np.int64))
    with pytest.raises(xs.InvariantError, match=violated("1.3", r"int64 indices cannot address shape \(18446744073709551616,\) with nse=0\. Sizes and counts above 2\*\*63 - 1")):
        xs.sparse_coo_array(wide, xp.asarray(np.zeros((0,))), (2**64,))


COO_INDEX_CASES = [
    pytest.param("coo.5", [[0, 1, 2], [3, -1, 0]], False, r"indices\[1\] must lie in \[0, 4\), got -1", id="coo.5-negative"),
    pytest.param("coo.5", [[0, 3, 2], [3, 1, 0]], False, r"indices\[0\] must lie in \[0, 3\), got 3", id="coo.5-too-large"),
    pytest.param("coo.6", [[0, 2, 1], [3, 0, 1]], True, r"an array marked coalesced must have sorted, distinct indices; column 2 does not follow column 1", id="coo.6-unsorted"),
    pytest.param("coo.6", [[0, 1, 1], [3, 2, 1]], True, r"column 2 does not follow column 1", id="coo.6-unsorted-second-row"),
    pytest.param("coo.6", [[0, 1, 1], [3, 2, 2]], True, r"column 2 does not follow column 1", id="coo.6-duplicate"),
]


@pytest.mark.parametrize("invariant, indices, coalesced, text", COO_INDEX_CASES)
@pytest.mark.parametrize("dense", [(), (2,)], ids=str)
def test_coo_index_invariants(xp: Any, invariant: str, indices: list[list[int]], coalesced: bool, text: str, dense: tuple[int, ...]) -> None:
    values = xp.asarray(np.ones((3, *dense)))
    idx = xp.asarray(indices)
    pattern = violated(invariant, text)
    with pytest.raises(xs.InvariantError, match=pattern):
        xs.sparse_coo_array(idx, values, (3, 4, *dense), is_coalesced=coalesced, check_invariants=True)
    # read index data: only when asked
    assert xs.sparse_coo_array(idx, values, (3, 4, *dense), is_coalesced=coalesced).nnz == 3
    with xs.check_sparse_tensor_invariants():
        with pytest.raises(xs.InvariantError, match=pattern):
            xs.sparse_coo_array(idx, values, (3, 4, *dense), is_coalesced=coalesced)
        assert xs.sparse_coo_array(idx, values, (3, 4, *dense), is_coalesced=coalesced, check_invariants=False).nnz == 3


def test_coo_6_uncoalesced_duplicates_pass(xp: Any) -> None:
    """Unsorted or duplicate indices are fine when the array is not declared coalesced."""
    a = xs.sparse_coo_array(xp.asarray([[1, 0, 1], [2, 3, 2]]), xp.asarray([1.0, 2.0, 3.0]), (3, 4), check_invariants=True)
    assert not a.is_coalesced()


def test_coo_6_zero_sparse_dims_with_several_entries(xp: Any) -> None:
    """With no sparse dimension every entry has the same (empty) index: two entries are duplicates."""
    idx = xp.asarray(np.zeros((0, 2), dtype=np.int64))
    with pytest.raises(xs.InvariantError, match=violated("coo.6", "sorted, distinct indices")):
        xs.sparse_coo_array(idx, xp.asarray([[1.0], [2.0]]), (1,), is_coalesced=True, check_invariants=True)
    assert not xs.sparse_coo_array(idx, xp.asarray([[1.0], [2.0]]), (1,), check_invariants=True).is_coalesced()


# --------------------------------------------------------------------------------------------------------
# cheap checks always run, whatever the switch says
# --------------------------------------------------------------------------------------------------------
@layouts
def test_cheap_checks_run_with_checks_off(xp: Any, layout: xs.Layout) -> None:
    ci, pi, values, shape = parts(layout)
    with xs.check_sparse_tensor_invariants(False):
        with pytest.raises(xs.InvariantError, match=violated("3.1")):
            build(xp, layout, ci, pi, values, (1, *shape), check_invariants=False)
        with pytest.raises(xs.InvariantError, match=violated("1.2")):
            build(xp, layout, ci, pi.astype(np.int32), values, shape, check_invariants=False)
        with pytest.raises(xs.InvariantError, match=violated("coo.3")):
            xs.sparse_coo_array(xp.asarray([[0, 1]]), xp.asarray([1.0]), (3,), check_invariants=False)


# --------------------------------------------------------------------------------------------------------
# shape inference: the blog's formulas
# --------------------------------------------------------------------------------------------------------
@layouts
@pytest.mark.parametrize(
    "ci, pi, n_plain",
    [
        pytest.param(CI, PI, 4, id="max-plain-index"),  # max(3 + 1, 2) = 4
        pytest.param([0, 3], [0, 0, 0], 3, id="max-slice-count"),  # max(0 + 1, 3) = 3 (invalid by 5.6, still inferred)
        pytest.param([0, 0, 0], [], 0, id="nnz0"),
    ],
)
@pytest.mark.parametrize("dense", [(), (2,)], ids=str)
def test_shape_inference_compressed(xp: Any, layout: xs.Layout, ci: list[int], pi: list[int], n_plain: int, dense: tuple[int, ...]) -> None:
    ci_, pi_, values, _ = parts(layout, (), dense, ci=ci, pi=pi)
    a = xs.sparse_compressed_array(xp.asarray(ci_), xp.asarray(pi_), xp.asarray(values), layout=layout, check_invariants=False)
    assert a.shape == sparse_shape(layout, len(ci) - 1, n_plain) + dense


@layouts
@pytest.mark.parametrize("dense", [(), (2, 1)], ids=str)
def test_shape_inference_batched(xp: Any, layout: xs.Layout, dense: tuple[int, ...]) -> None:
    """The number of plain blocks is the maximum over all batches; batch and dense sizes come from the components."""
    ci = np.asarray([[[0, 1, 2], [0, 2, 2]], [[0, 0, 2], [0, 1, 2]]])  # batch (2, 2), 2 compressed slices, nse 2
    pi = np.asarray([[[0, 1], [1, 5]], [[2, 3], [0, 0]]])
    vshape = (2, 2, 2) + (BLOCK if layout.is_blocked else ()) + dense
    values = np.ones(vshape)
    a = xs.sparse_compressed_array(xp.asarray(ci), xp.asarray(pi), xp.asarray(values), layout=layout)
    assert a.shape == (2, 2) + sparse_shape(layout, 2, 6) + dense
    assert a.batch_dim() == 2 and a.dense_dim() == len(dense)
    check_invariants(a)


@pytest.mark.parametrize("dense", [(), (2,), (0, 3)], ids=str)
def test_shape_inference_coo(xp: Any, dense: tuple[int, ...]) -> None:
    indices = xp.asarray([[0, 2, 1], [3, 0, 1]])
    a = xs.sparse_coo_array(indices, xp.asarray(np.ones((3, *dense))))
    assert a.shape == (3, 4, *dense)
    empty = xs.sparse_coo_array(xp.asarray(np.zeros((2, 0), dtype=np.int64)), xp.asarray(np.ones((0, *dense))))
    assert empty.shape == (0, 0, *dense)


def test_shape_inference_with_index_lists(backend: str) -> None:
    assert xs.sparse_coo_array([[0, 4], [1, 1]], [1.0, 2.0], backend=backend).shape == (5, 2)
    assert xs.sparse_csr_array([0, 1, 2], [0, 6], [1.0, 2.0], backend=backend).shape == (2, 7)
    assert xs.sparse_bsc_array([0, 1], [2], [[[1.0, 2.0]]], backend=backend).shape == (3, 2)


@layouts
def test_shape_inference_checks_component_dimensions(layout: xs.Layout) -> None:
    cname, _ = layout.index_names
    _, pi, values, _ = parts(layout)
    with pytest.raises(xs.InvariantError, match=violated("3.2", rf"{cname} must have at least one dimension")):
        xs.sparse_compressed_array(np.asarray(0), pi, values, layout=layout)
    with pytest.raises(xs.InvariantError, match=violated("3.3", r"must have the same number of dimensions, got 1 and 2")):
        xs.sparse_compressed_array(np.asarray(CI), pi[None], values, layout=layout)
    need = 4 if layout.is_blocked else 2
    with pytest.raises(xs.InvariantError, match=violated("3.4", rf"values\.ndim must be at least {need}, got 1")):
        xs.sparse_compressed_array(np.asarray([[0, 1]]), np.asarray([[0]]), np.asarray([1.0]), layout=layout)


# --------------------------------------------------------------------------------------------------------
# the switch: check_sparse_tensor_invariants
# --------------------------------------------------------------------------------------------------------
is_enabled = xs.check_sparse_tensor_invariants.is_enabled


def _invalid_csr(**kwargs: Any) -> Any:
    """A CSR array whose col_indices are unsorted (5.6): built unless the full checks run."""
    return xs.sparse_csr_array([0, 2], [1, 0], [1.0, 2.0], (1, 2), **kwargs)


def test_switch_is_off_by_default() -> None:
    assert is_enabled() is False
    assert _invalid_csr().nnz == 2


def test_switch_nests_and_restores() -> None:
    with xs.check_sparse_tensor_invariants() as outer:
        assert isinstance(outer, xs.check_sparse_tensor_invariants)
        assert is_enabled()
        with xs.check_sparse_tensor_invariants(False):
            assert not is_enabled()
            assert _invalid_csr().nnz == 2
            with xs.check_sparse_tensor_invariants(True):
                assert is_enabled()
            assert not is_enabled()
        assert is_enabled()
        with pytest.raises(xs.InvariantError, match=violated("5.6")):
            _invalid_csr()
    assert not is_enabled()


def test_switch_restores_when_the_block_raises() -> None:
    with pytest.raises(xs.InvariantError, match=violated("5.6")), xs.check_sparse_tensor_invariants():
        _invalid_csr()
    assert not is_enabled()
    with xs.check_sparse_tensor_invariants():
        with pytest.raises(KeyError), xs.check_sparse_tensor_invariants(False):
            raise KeyError("boom")
        assert is_enabled()
    assert not is_enabled()


def test_switch_instance_is_reusable_and_reentrant() -> None:
    on = xs.check_sparse_tensor_invariants()
    off = xs.check_sparse_tensor_invariants(False)
    with on:
        with off:
            with on:
                assert is_enabled()
            assert not is_enabled()
        assert is_enabled()
    assert not is_enabled()
    with on:
        assert is_enabled()
    assert not is_enabled()


def test_switch_as_decorator() -> None:
    seen: list[bool] = []

    @xs.check_sparse_tensor_invariants()
    def checked(depth: int) -> bool:
        seen.append(is_enabled())
        if depth:
            with xs.check_sparse_tensor_invariants(False):
                checked(depth - 1)  # a fresh scope for the inner call, inside an "off" block
                seen.append(is_enabled())
        return is_enabled()

    assert checked(0) is True
    assert not is_enabled()
    assert checked(2) is True
    assert seen == [True, True, True, True, False, False]
    assert not is_enabled()

    @xs.check_sparse_tensor_invariants(False)
    def unchecked() -> Any:
        return _invalid_csr()

    with xs.check_sparse_tensor_invariants():
        assert unchecked().nnz == 2
        assert is_enabled()


def test_switch_as_decorator_when_the_function_raises() -> None:
    @xs.check_sparse_tensor_invariants()
    def build_invalid() -> Any:
        return _invalid_csr()

    for _ in range(2):  # each call gets fresh state, raising or not
        with pytest.raises(xs.InvariantError, match=violated("5.6")):
            build_invalid()
        assert not is_enabled()


def test_switch_as_decorator_of_a_generator_function() -> None:
    """A decorated generator runs its body with the setting on, at every resumption (send, throw and close
    included), and its caller does not see the setting between items."""
    seen: list[Any] = []

    @xs.check_sparse_tensor_invariants()
    def rows() -> Any:
        try:
            while True:
                got = yield is_enabled()
                seen.append((got, is_enabled()))
        except KeyError:
            seen.append(("thrown", is_enabled()))
            yield "after the throw"
        finally:
            seen.append(("closed", is_enabled()))

    gen = rows()
    assert next(gen) is True
    assert not is_enabled(), "the caller does not see the generator's setting between items"
    with xs.check_sparse_tensor_invariants(False):
        assert gen.send("sent") is True
        assert not is_enabled()
    assert gen.throw(KeyError("boom")) == "after the throw"
    gen.close()
    assert seen == [("sent", True), ("thrown", True), ("closed", True)]
    assert not is_enabled()

    @xs.check_sparse_tensor_invariants()
    def invalid_rows() -> Any:
        yield _invalid_csr()

    with pytest.raises(xs.InvariantError, match=violated("5.6")):
        next(invalid_rows())
    assert not is_enabled()

    @xs.check_sparse_tensor_invariants()
    def returns() -> Any:
        yield 1
        return "value"

    assert list(returns()) == [1]
    with pytest.raises(StopIteration) as stop:
        gen = returns()
        next(gen)
        next(gen)
    assert stop.value.value == "value"


def test_switch_as_decorator_of_coroutine_and_async_generator_functions() -> None:
    import asyncio
    import inspect

    @xs.check_sparse_tensor_invariants()
    async def checked() -> bool:
        await asyncio.sleep(0)
        return is_enabled()

    @xs.check_sparse_tensor_invariants()
    async def items() -> Any:
        for _ in range(2):
            await asyncio.sleep(0)
            yield is_enabled()

    assert inspect.iscoroutinefunction(checked) and inspect.isasyncgenfunction(items)

    async def main() -> list[bool]:
        out = [await checked(), is_enabled()]
        async for item in items():
            out += [item, is_enabled()]
        return out

    assert asyncio.run(main()) == [True, False, True, False, True, False]
    assert not is_enabled()


def test_switch_left_out_of_order_removes_only_its_own_entry() -> None:
    """A generator suspended inside its own block, then finished inside a block its caller opened meanwhile,
    leaves the caller's setting in force (a stack that pops its top would remove the caller's)."""

    def rows() -> Any:
        with xs.check_sparse_tensor_invariants():
            yield
            yield

    gen = rows()
    next(gen)
    with xs.check_sparse_tensor_invariants(False):
        assert list(gen) == [None]  # the generator leaves its block here
        assert not is_enabled(), "the caller's own block is still in force"
        assert _invalid_csr().nnz == 2
    assert not is_enabled()


def test_switch_left_in_another_context_raises() -> None:
    """A block entered in one context and left in another cannot restore the first one's setting: it raises,
    rather than pop whatever is on the other context's stack."""
    import contextvars

    message = (
        r"^check_sparse_tensor_invariants: the block is left in another context than the one that entered it \(a "
        r"generator or coroutine .*\(scope=check_sparse_tensor_invariants\(True\)\)\. Enter and leave the block in "
        r"one context; to scope the body of a generator, decorate the generator function with "
        r"check_sparse_tensor_invariants\(\.\.\.\) instead\.$"
    )

    def rows() -> Any:
        with xs.check_sparse_tensor_invariants():
            yield

    def finish(gen: Any) -> bool:
        with xs.check_sparse_tensor_invariants(False):
            with pytest.raises(RuntimeError, match=message):
                next(gen)
            return is_enabled()

    started, elsewhere = contextvars.copy_context(), contextvars.copy_context()
    gen = rows()
    started.run(next, gen)
    assert elsewhere.run(finish, gen) is False, "the other context's own block is untouched"
    # a context copied from the one that entered holds the entry too, and is still another context
    gen = rows()
    started.run(next, gen)
    copied = started.run(contextvars.copy_context)
    assert copied.run(finish, gen) is False
    assert not is_enabled()


@pytest.mark.parametrize("enable", ["false", None, 1, 0.0])
def test_switch_takes_a_bool_only(enable: Any) -> None:
    with pytest.raises(
        TypeError,
        match=rf"^check_sparse_tensor_invariants: enable must be True or False, got {type(enable).__name__} "
        rf"\(enable={re.escape(repr(enable))}\)\. Pass a bool\.$",
    ):
        xs.check_sparse_tensor_invariants(enable)
    with xs.check_sparse_tensor_invariants(np.bool_(False)):
        assert is_enabled() is False


def _in_thread(target: Callable[[], Any]) -> Any:
    """Run ``target`` in a new thread; return its result or re-raise its exception here."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = target()
        except BaseException as exc:  # handed back to the test thread, never swallowed
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["result"]


@pytest.mark.skipif(
    bool(getattr(sys.flags, "thread_inherit_context", False)),
    reason="this interpreter starts threads in a copy of the caller's context (sys.flags.thread_inherit_context)",
)
def test_switch_is_not_inherited_by_a_new_thread() -> None:
    with xs.check_sparse_tensor_invariants():
        assert _in_thread(is_enabled) is False
        assert _in_thread(lambda: _invalid_csr().nnz) == 2
        assert is_enabled()
    # and a thread's switch does not leak out to the thread that started it
    _in_thread(lambda: xs.check_sparse_tensor_invariants().__enter__())
    assert not is_enabled()


@pytest.mark.parametrize("shared", [False, True], ids=["own_instances", "shared_instances"])
def test_switch_in_two_threads_at_once(shared: bool) -> None:
    """Two threads inside opposite switches at the same time each see their own, and exit in either order."""
    on, off = xs.check_sparse_tensor_invariants(True), xs.check_sparse_tensor_invariants(False)
    barrier = threading.Barrier(2, timeout=10)
    results: dict[str, list[Any]] = {"on": [], "off": []}

    def worker(name: str, enable: bool, first_out: bool) -> None:
        cm = (on if enable else off) if shared else xs.check_sparse_tensor_invariants(enable)
        inner = on if shared else xs.check_sparse_tensor_invariants(True)
        barrier.wait()
        with cm:
            barrier.wait()  # both inside
            results[name].append(is_enabled())
            with inner:  # both threads enter the same instance when shared
                barrier.wait()
                results[name].append(is_enabled())
                barrier.wait()
            results[name].append(is_enabled())
            try:
                _invalid_csr()
                results[name].append("built")
            except xs.InvariantError:
                results[name].append("raised")
            barrier.wait()
            if not first_out:
                barrier.wait()  # let the other thread leave first
        if first_out:
            barrier.wait()
        results[name].append(is_enabled())

    def run(name: str, enable: bool, first_out: bool) -> Callable[[], None]:
        return lambda: worker(name, enable, first_out)

    errors: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def go() -> None:
            try:
                fn()
            except BaseException as exc:  # re-raised below in the test thread
                errors.append(exc)
                barrier.abort()

        return go

    threads = [threading.Thread(target=guarded(run("on", True, True))), threading.Thread(target=guarded(run("off", False, False)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    assert results["on"] == [True, True, True, "raised", False]
    assert results["off"] == [False, True, False, "built", False]
    assert not is_enabled()


def test_switch_in_asyncio_tasks() -> None:
    import asyncio

    async def task(enable: bool, started: asyncio.Event, other: asyncio.Event) -> bool:
        with xs.check_sparse_tensor_invariants(enable):
            started.set()
            await other.wait()
            return is_enabled()

    async def main() -> list[bool]:
        a, b = asyncio.Event(), asyncio.Event()
        return list(await asyncio.gather(task(True, a, b), task(False, b, a)))

    assert asyncio.run(main()) == [True, False]
    assert not is_enabled()


# -- arrays built without the index checks, on torch -------------------------------------------------


def _unchecked_torch_arrays() -> dict[str, Any]:
    torch = pytest.importorskip("torch")
    return {
        "5.3": xs.sparse_csr_array(torch.tensor([0, -3, 2]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), (2, 2)),
        "5.5": xs.sparse_csr_array(torch.tensor([0, 1, 2]), torch.tensor([0, 5]), torch.tensor([1.0, 2.0]), (2, 2)),
        "5.2": xs.sparse_csr_array(torch.tensor([0, 1, 5]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), (2, 2)),
        "coo.5": xs.sparse_coo_array(torch.tensor([[0, 3], [0, 1]]), torch.tensor([1.0, 2.0]), (2, 2)),
    }


@pytest.mark.parametrize("op", ["to_dense", "to_sparse_csc", "matmul", "add", "spgemm", "sum", "take", "multiply"])
def test_torch_kernels_check_the_indices_they_trust(op: str) -> None:
    # torch's kernels read the indices unchecked (as its own constructors leave them by default) and, given
    # these, read out of bounds or crash the process; the first one to take an array checks it, and the
    # message names the function the user called (the outermost: to_dense, not the dispatcher's "convert")
    torch = pytest.importorskip("torch")
    calls: dict[str, tuple[str, Callable[[Any], Any]]] = {
        "to_dense": ("to_dense", xs.to_dense),
        "to_sparse_csc": (re.escape("to_sparse(layout=sparse_csc)"), xs.to_sparse_csc),
        "matmul": ("matmul", lambda a: a @ torch.ones(2, 2)),
        "add": ("add", lambda a: a + a),
        "spgemm": ("matmul", lambda a: a @ a),
        "sum": ("sum", lambda a: xs.sum(a, axis=1)),
        "take": ("take", lambda a: xs.take(a, torch.tensor([1, 0]), axis=1)),
        "multiply": ("multiply", lambda a: xs.multiply(a, torch.full((2, 2), -0.0))),
    }
    name, call = calls[op]
    for invariant, a in _unchecked_torch_arrays().items():
        if op in ("add", "spgemm") and invariant == "coo.5":
            continue  # COO + COO concatenates the entries in the generic kernel, which reads no index; and so on
        with pytest.raises(xs.InvariantError, match=rf"^invariant {re.escape(invariant)} violated: {name}: "):
            call(a)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: xs.sparse_coo_array([[0, 5]], [1.0, 2.0], (3,), check_invariants=True), r"^invariant coo\.5 violated: sparse_coo_array: indices\[0\]"),
        (lambda: xs.sparse_coo_array([[0, 1]], [1.0, 2.0, 3.0], (3,)), r"^invariant coo\.3 violated: sparse_coo_array: values\.shape\[0\]"),
        (lambda: xs.sparse_csr_array([0, 2, 1], [0, 1], [1.0, 2.0], (2, 2), check_invariants=True),
         r"^invariant 5\.2 violated: sparse_compressed_array\(layout=sparse_csr\): crow_indices"),
        (lambda: xs.sparse_bsc_array([0, 1], [0], [[[1.0, 2.0]]], (1, 3)), r"^invariant 3\.1 violated: sparse_compressed_array\(layout=sparse_bsc\): "),
        (lambda: xs.zeros((2, 3), layout=xs.sparse_bsr, blocksize=(2, 2)), r"^invariant 3\.1 violated: zeros: "),
    ],
)
def test_constructor_violations_name_the_constructor(make: Callable[[], Any], expected: str) -> None:
    with pytest.raises(xs.InvariantError, match=expected):
        make()


def test_a_violation_is_named_once_for_good() -> None:
    final = xs.InvariantError("5.2", "crow_indices end at 1.", "sparse_coo_array")
    assert final.met_by("add") is final
    assert final.operation == "sparse_coo_array" and final.detail == "crow_indices end at 1."
    provisional = xs.InvariantError("5.2", "crow_indices end at 1.").met_by("convert", provisional=True)
    assert str(provisional) == "invariant 5.2 violated: convert: crow_indices end at 1."
    outer = provisional.met_by("to_dense")
    assert str(outer) == "invariant 5.2 violated: to_dense: crow_indices end at 1." and outer.met_by("add") is outer


def test_torch_checks_an_array_once() -> None:
    torch = pytest.importorskip("torch")
    from xsparse.backends.torch.conversion import verified

    a = xs.sparse_csr_array(torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.tensor([1.0, 2.0]), (2, 2))
    assert not a._bounds_checked
    a @ torch.ones(2, 2)
    assert a._bounds_checked, "checked by the first torch kernel that read it"
    r = a + a
    assert r._bounds_checked, "torch made these indices"
    assert xs.sin(r)._bounds_checked, "the same indices"
    assert verified(xs.to_sparse_coo(torch.eye(2)))._bounds_checked
    assert xs.sparse_coo_array(torch.tensor([[0], [1]]), torch.tensor([1.0]), (2, 2), check_invariants=True)._bounds_checked


_NUMPY_CALLS: dict[str, tuple[str, Callable[[Any], Any], tuple[str, ...]]] = {
    # the function the message names, the call, and the arrays (by invariant) whose bad indices it reads
    "matmul": ("matmul", lambda a: a @ np.ones((2, 3)), ("5.5", "5.2")),
    "matvec": ("matmul", lambda a: a @ np.ones(2), ("5.5", "5.2")),
    "spgemm": ("matmul", lambda a: a @ a, ("5.5", "5.2")),
    "add": ("add", lambda a: a + a, ("5.5", "5.2")),
    "multiply": ("multiply", lambda a: a * a, ("5.5", "5.2")),
    "sum": ("sum", lambda a: xs.sum(a, axis=0), ("5.2",)),
    "to_dense": ("to_dense", xs.to_dense, ("5.5",)),
    "to_sparse_csc": (re.escape("to_sparse(layout=sparse_csc)"), xs.to_sparse_csc, ("5.5", "5.2")),
    "to_sparse_coo": (re.escape("to_sparse(layout=sparse_coo)"), xs.to_sparse_coo, ("5.2",)),
    "sampled_addmm": ("sampled_addmm", lambda a: xs.sampled_addmm(a, np.ones((2, 2)), np.ones((2, 2))), ("5.5", "5.2")),
}


@pytest.mark.parametrize("op", sorted(_NUMPY_CALLS))
def test_numpy_compiled_kernels_report_the_broken_invariant(op: str) -> None:
    # the compiled kernels stay in bounds by checking what they read, but can only say that some index is bad;
    # the validator, run after such a failure, names the invariant and value, and the dispatcher the operation
    from xsparse.backends import _cpu

    if _cpu.unavailable_reason() is not None:
        pytest.skip(str(_cpu.unavailable_reason()))
    arrays = {
        "5.5": xs.sparse_csr_array(np.array([0, 1, 2]), np.array([0, 5]), np.array([1.0, 2.0]), (2, 2)),
        "5.2": xs.sparse_csr_array(np.array([0, 2, 1]), np.array([0, 1]), np.array([1.0, 2.0]), (2, 2)),
    }
    name, call, reading = _NUMPY_CALLS[op]
    for invariant in reading:
        with pytest.raises(xs.InvariantError, match=rf"^invariant {re.escape(invariant)} violated: {name}: "):
            call(arrays[invariant])


def test_numpy_kernels_check_the_indices_they_would_misread() -> None:
    # NumPy's bincount, SciPy's merges and SuperLU, and the conversions' folded keys read indices unchecked:
    # a bincount of 2**63 - 1 wrote before its buffer (the process aborted), SciPy's merge of an index past
    # int32 crashed, SuperLU truncated 2**32 to column 0, and to_dense read the entries up to nse where
    # crow_indices ended before
    coo_huge = xs.sparse_coo_array(np.array([[0, 1], [0, 2**63 - 1]]), np.array([1.0, 2.0]), (2, 2))
    with pytest.raises(xs.InvariantError, match=r"^invariant coo\.5 violated: sum: indices\[1\]"):
        xs.sum(coo_huge, axis=0)
    csr_far = xs.sparse_csr_array(
        np.array([0, 1, 2], np.int32), np.array([2**31 - 1, 1], np.int32), np.array([1.0, 2.0]), (2, 2)
    )
    with pytest.raises(xs.InvariantError, match=r"^invariant 5\.5 violated: add: "):
        csr_far + xs.to_sparse_csr(np.eye(2))  # int32 + int64 indices: SciPy's merge
    wide = xs.sparse_csr_array(np.array([0, 1, 2]), np.array([2**32, 1]), np.array([1.0, 2.0]), (2, 2))
    with pytest.raises(xs.InvariantError, match=r"^invariant 5\.5 violated: spsolve: "):
        xs.spsolve(wide, np.ones(2))
    short = xs.sparse_csr_array(np.array([0, 1, 1]), np.array([0, 1]), np.array([1.0, 2.0]), (2, 2))
    with pytest.raises(xs.InvariantError, match=r"^invariant 5\.2 violated: to_dense: "):
        xs.to_dense(short)
    coo_far = xs.sparse_coo_array(np.array([[0, 1, 1, 2], [0, 0, 1, 5]]), np.array([1.0, 2.0, 3.0, 4.0]), (3, 2))
    with pytest.raises(xs.InvariantError, match=r"^invariant coo\.5 violated: .*indices\[1\] must lie in \[0, 2\), got 5"):
        xs.to_sparse_csr(coo_far)


def test_torch_spsolve_checks_the_indices() -> None:
    torch = pytest.importorskip("torch")
    wide = xs.sparse_csr_array(torch.tensor([0, 1, 2]), torch.tensor([2**32, 1]), torch.tensor([1.0, 2.0]), (2, 2))
    with pytest.raises(xs.InvariantError, match=r"^invariant 5\.5 violated: spsolve: "):
        xs.spsolve(wide, torch.ones(2))


def _broken_arrays(backend: str) -> dict[str, Any]:
    """Arrays built without the index checks, each breaking one index invariant, on ``backend``."""
    ns = xs.to_backend(np.zeros(1), backend)

    def arr(values: list[Any], like: Any = None) -> Any:
        return xs.to_backend(np.asarray(values), backend)

    del ns
    return {
        "5.1": xs.sparse_csr_array(arr([1, 1, 2]), arr([0, 1]), arr([1.0, 2.0]), (2, 3)),
        "5.2": xs.sparse_csr_array(arr([0, 1, 3]), arr([0, 1]), arr([1.0, 2.0]), (2, 3)),
        "5.3": xs.sparse_csr_array(arr([0, 2, 1]), arr([0, 1]), arr([1.0, 2.0]), (2, 3)),
        "5.5": xs.sparse_csr_array(arr([0, 1, 2]), arr([0, 7]), arr([1.0, 2.0]), (2, 3)),
        "bsr 5.2": xs.sparse_bsr_array(arr([0, 1, 3]), arr([0, 1]), arr(np.ones((2, 1, 2))), (2, 4)),
        "coo.5": xs.sparse_coo_array(arr([[0, 1], [0, 7]]), arr([1.0, 2.0]), (2, 3)),
        "coo.5 negative": xs.sparse_coo_array(arr([[0, 1], [-4, 0]]), arr([1.0, 2.0]), (2, 3)),
    }


_READERS: dict[str, Callable[[Any], Any]] = {
    "to_dense": xs.to_dense,
    "to_sparse_coo": xs.to_sparse_coo,
    "to_sparse_csr": xs.to_sparse_csr,
    "to_sparse_csc": xs.to_sparse_csc,
    "getitem": lambda a: xs.to_dense(a[1]),
    "getitem_points": lambda a: a[xs.to_backend(np.array([0, 1]), a.backend), xs.to_backend(np.array([0, 2]), a.backend)],
    "take": lambda a: xs.take(a, xs.to_backend(np.array([2, 0]), a.backend), axis=1),
    "max": lambda a: xs.max(a, axis=1),
    "sum": lambda a: xs.sum(a, axis=0),
    "sort": lambda a: xs.sort(a, axis=1),
    "matmul": lambda a: a @ xs.to_backend(np.ones((a.shape[1], 2)), a.backend),
    "transpose_matmul": lambda a: a.mT @ xs.to_backend(np.ones((2, 2)), a.backend),
}


@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
@pytest.mark.parametrize("op", sorted(_READERS))
def test_a_kernel_that_trips_over_bad_indices_names_the_invariant(backend: str, op: str) -> None:
    # an array built without the index checks is trusted; a kernel that trips over its invalid indices raised
    # its library's own error ("cannot reshape array of size 7 into shape (8,)", "index 7 is out of bounds",
    # "repeats may not contain negative values"): the dispatcher now runs the validator on that error path,
    # so the error is the InvariantError naming the broken invariant. A kernel that reads no bad index may
    # still succeed (the generic kernels trust the indices, docs/invariants.md).
    if backend != "numpy":
        pytest.importorskip(backend)
    call = _READERS[op]
    for name, a in _broken_arrays(backend).items():
        if "bsr" in name and op in ("getitem_points", "sort", "transpose_matmul"):
            continue
        try:
            call(a)
        except xs.InvariantError as e:
            # the broken invariant, or the one its result breaks (a row gathered with its bad column)
            assert re.match(r"^invariant (5\.[1-5]|coo\.5) violated: ", str(e)), (name, str(e))
        except xs.NoKernelError:
            pass  # an operation without a kernel for the layout says so before it reads an index


def test_4_1_a_device_without_int64_is_refused() -> None:
    # array_api_strict's no_x64 device holds no int64, in which xsparse computes positions: empty arrays
    # with int32 indices are built there (tests/test_creation.py), and any kernel that fails there says
    # invariant 4.1 naming the function called (it raised array_api_strict's "does not support dtype int64")
    xp = pytest.importorskip("array_api_strict")
    devices = {str(d): d for d in xp.__array_namespace_info__().devices()}
    if "array_api_strict.Device('no_x64')" not in devices:
        pytest.skip("this array_api_strict has no no_x64 device")
    no_x64 = devices["array_api_strict.Device('no_x64')"]
    message = violated("4.1", r"device array_api_strict\.Device\('no_x64'\) has no int64, in which xsparse computes positions and sort keys")
    z = xs.zeros((2, 3), dtype=xp.float32, layout=xs.sparse_csr, backend="array_api_strict", device=no_x64)
    with pytest.raises(xs.InvariantError, match=message.replace(": ", ": to_dense: ", 1)):
        xs.to_dense(z)
    with pytest.raises(xs.InvariantError, match=message.replace(": ", ": add: ", 1)):
        z + z
    with pytest.raises(xs.InvariantError, match=message.replace(": ", r": to_sparse\(layout=sparse_csr\): ", 1)):
        xs.to_sparse_csr(xp.ones((2, 2), device=no_x64, dtype=xp.float32))
    # a device without float64 but with int64 is one like any other
    no_f64 = devices["array_api_strict.Device('no_float64')"]
    a = xs.to_sparse_csr(xp.ones((2, 2), device=no_f64, dtype=xp.float32))
    assert a.nnz == 4 and a.device == no_f64 and to_numpy(xs.to_dense(a)).tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_trusted_constructors_check_in_full_inside_the_checking_scope() -> None:
    """The kernels' unchecked constructors skip the checks only outside check_sparse_tensor_invariants():
    inside it their result is checked in full, since the arrays it came from may have been made outside."""
    from xsparse.backends import get_backend

    backend = get_backend("numpy")
    ptr, plain, vals = np.asarray([0, 1, 2]), np.asarray([0, 9]), np.asarray([1.0, 2.0])
    idx = np.asarray([[0, 1], [0, 9]])
    xs.formats.CompressedArray._trusted(ptr, plain, vals, (2, 3), layout=xs.sparse_csr, backend=backend, xp=np, fill_value=0.0)
    xs.formats.COOArray._trusted(idx, vals, (2, 3), backend=backend, xp=np, coalesced=True, fill_value=0.0)
    with xs.check_sparse_tensor_invariants():
        with pytest.raises(xs.InvariantError, match=r"^invariant 5\.5 violated: .*col_indices must be < 3"):
            xs.formats.CompressedArray._trusted(ptr, plain, vals, (2, 3), layout=xs.sparse_csr, backend=backend, xp=np, fill_value=0.0)
        with pytest.raises(xs.InvariantError, match=r"^invariant coo\.\d+ violated: .*"):
            xs.formats.COOArray._trusted(idx, vals, (2, 3), backend=backend, xp=np, coalesced=True, fill_value=0.0)
