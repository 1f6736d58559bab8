"""torch's "limited support" unsigned dtypes (uint16, uint32, uint64) through the generic kernels.

torch stores these dtypes but gathers, compares, adds and promotes none of them; the generic kernels run
such steps on the same-width signed twin (or its order-preserving map). Every result here is compared
with NumPy's computation on the same unsigned data, which NumPy supports natively, on COO and CSR inputs
whose elements include 0, 2**(bits-1) and the dtype's maximum, and divisors 0 (an integer division by
zero gives NumPy's 0).
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xsparse as xs
from xsparse.testing import check_invariants

torch = pytest.importorskip("torch")

DTYPES = ["uint16", "uint32", "uint64"]
LAYOUTS = [xs.sparse_coo, xs.sparse_csr]
_SIGNED = {"uint8": np.int8, "uint16": np.int16, "uint32": np.int32, "uint64": np.int64}


def to_torch(a: np.ndarray) -> Any:
    """The torch tensor of NumPy's unsigned array ``a`` (same bits, through the signed view)."""
    return torch.from_numpy(np.ascontiguousarray(a).view(_SIGNED[a.dtype.name]).copy()).view(getattr(torch, a.dtype.name))


def to_numpy(x: Any, dtype: str | None = None) -> np.ndarray:
    """A strided or sparse torch result as a NumPy array of Python ints (exact for every width)."""
    if not isinstance(x, torch.Tensor):
        x = xs.to_dense(x)
    if x.dtype == torch.bool:
        return np.asarray(x.tolist(), dtype=bool)
    twin = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}.get(x.dtype)
    if twin is None:
        return np.asarray(x.tolist(), dtype=object)
    bits = torch.iinfo(twin).bits
    wrapped: np.ndarray = np.asarray(x.view(twin).tolist(), dtype=object) % 2**bits
    return wrapped


def edge_values(dtype: str) -> list[int]:
    top = int(np.iinfo(dtype).max)
    return [0, 1, 2, 2 ** (np.iinfo(dtype).bits - 1), top - 1, top]


@st.composite
def unsigned_arrays(draw: Any, dtype: str, shape: tuple[int, int] = (3, 4)) -> np.ndarray:
    """A 2-D array of ``dtype``, mostly zeros, with the dtype's extreme values among the others."""
    top = int(np.iinfo(dtype).max)
    element = st.one_of(st.just(0), st.sampled_from(edge_values(dtype)), st.integers(0, top))
    flat = draw(st.lists(element, min_size=shape[0] * shape[1], max_size=shape[0] * shape[1]))
    return np.asarray(flat, dtype=dtype).reshape(shape)


def sparse(a: np.ndarray, layout: Any) -> Any:
    return xs.to_sparse(to_torch(a), layout=layout)


def exact(a: np.ndarray) -> np.ndarray:
    return np.asarray(a.tolist(), dtype=object) if a.dtype != bool else a


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr])
@pytest.mark.parametrize("dtype", DTYPES)
def test_conversions_keep_every_value(dtype: str, layout: Any) -> None:
    a = np.asarray([edge_values(dtype)[:4], [0, 0, 0, 0], edge_values(dtype)[2:]], dtype=dtype)[:2, :]
    s = xs.to_sparse(to_torch(a), layout=layout, blocksize=(1, 2) if layout is xs.sparse_bsr else None)
    np.testing.assert_array_equal(to_numpy(s), exact(a))
    np.testing.assert_array_equal(to_numpy(xs.to_sparse_coo(xs.to_sparse_csc(s))), exact(a))


BINARY = ["add", "subtract", "multiply", "less", "less_equal", "greater", "greater_equal", "maximum", "minimum",
          "equal", "not_equal", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
          "bitwise_right_shift", "floor_divide", "remainder", "pow"]  # fmt: skip


def _reference(name: str, a: Any, b: Any) -> np.ndarray:
    with np.errstate(all="ignore"):
        return exact(getattr(np, "power" if name == "pow" else name)(a, b))


def _operands(name: str, dtype: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bits = np.iinfo(dtype).bits
    if name in ("bitwise_left_shift", "bitwise_right_shift"):
        b = (b % bits).astype(dtype)
    if name == "pow":
        b = (b % 5).astype(dtype)
    return a, b


@pytest.mark.parametrize("kinds", [("sparse", "sparse"), ("sparse", "strided"), ("strided", "strided")])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary(name: str, dtype: str, layout: Any, kinds: tuple[str, str]) -> None:
    top = edge_values(dtype)
    a = np.asarray([[0, top[5], 0, top[3]], [top[1], 0, top[4], 0]], dtype=dtype)
    b = np.asarray([[top[5], top[5], 0, top[3] + 1], [0, 0, top[2], 7]], dtype=dtype)
    a, b = _operands(name, dtype, a, b)
    x = sparse(a, layout) if kinds[0] == "sparse" else to_torch(a)
    y = sparse(b, layout) if kinds[1] == "sparse" else to_torch(b)
    np.testing.assert_array_equal(to_numpy(getattr(xs, name)(x, y)), _reference(name, a, b))


_NATIVE = [k for op in ("add", "subtract", "multiply") for k in xs.kernels(op) if k.backend == "torch"]


@pytest.mark.parametrize(("d1", "d2"), [("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64"), ("int8", "uint32"), ("float64", "uint16")])
@pytest.mark.parametrize("kernel", _NATIVE, ids=lambda k: f"{k.op}{tuple(str(s) for s in k.signature)}")
def test_native_kernels_decline_stored_only_dtypes(kernel: Any, d1: str, d2: str) -> None:
    """torch's sparse add and mul have no uint16/32/64 kernel and promote them with no other dtype: each
    native kernel declines, naming the dtype, and the generic kernel (which computes them) runs."""
    xs.get_backend("torch").load()
    a = np.asarray([[1, 0, 2], [0, 3, 0]])
    operands = []
    for layout, dtype in zip(kernel.signature, (d1, d2)):
        t = to_torch(a.astype(dtype)) if dtype.startswith("u") else torch.from_numpy(a.astype(dtype))
        operands.append(t if layout is xs.strided else xs.to_sparse(t, layout=layout))
    reason = kernel.supports(xs.get_backend("torch").namespace(), *operands)
    assert reason is not None and "promote it with no other dtype" in reason and "torch.uint" in reason
    expected = _reference(kernel.op, a.astype(d1), a.astype(d2))
    np.testing.assert_array_equal(to_numpy(getattr(xs, kernel.op)(*operands)), expected)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "less", "greater_equal", "maximum", "minimum", "bitwise_right_shift", "pow"])
def test_binary_with_scalar(name: str, dtype: str, layout: Any) -> None:
    top = edge_values(dtype)
    a = np.asarray([[0, top[5], 0, top[3]], [top[1], 0, top[4], 0]], dtype=dtype)
    s = 3
    got = getattr(xs, name)(sparse(a, layout), s)
    np.testing.assert_array_equal(to_numpy(got), _reference(name, a, np.asarray(s, dtype=dtype)))


EDGE64 = [0, 1, 2, 3, 7, 2**32 - 1, 2**32, 2**62, 2**63 - 2, 2**63 - 1, 2**63, 2**63 + 1, 2**63 + 2, 2**64 - 2, 2**64 - 1]


@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
def test_uint64_division_refuses_python_ints_outside_its_range(name: str) -> None:
    t = to_torch(np.asarray([5, 7], dtype="uint64"))
    for x1, x2, bad in ((t, 2**64, "x2=18446744073709551616"), (t, -1, "x2=-1"), (-3, t, "x1=-3")):
        with pytest.raises(OverflowError, match=rf"^{name}: a Python int outside uint64's range \({bad}\)\. Pass a value in \[0, 2\*\*64\)\."):
            getattr(xs, name)(x1, x2)
    with pytest.raises(OverflowError, match=r"\(x2=-1\)"):
        getattr(xs, name)(xs.to_sparse_coo(t), -1)
    np.testing.assert_array_equal(to_numpy(getattr(xs, name)(t, 2**64 - 1)), _reference(name, np.asarray([5, 7], dtype="uint64"), np.uint64(2**64 - 1)))


@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
def test_uint64_division_is_exact(name: str) -> None:
    """torch divides no uint64; xsparse does, on the int64 bits: every pair of edge values (0, 1, around
    2**32, 2**63 and 2**64; divisors 0 and >= 2**63, dividends >= 2**63) and of random ones, as arrays
    and with a Python int on either side, gives NumPy's uint64 result (0 for a zero divisor)."""
    rng = np.random.default_rng(7)
    vals = np.asarray(EDGE64 + rng.integers(0, 2**64, 60, dtype=np.uint64).tolist() + rng.integers(1, 2**16, 20).tolist(), dtype="uint64")
    a, b = np.meshgrid(vals, vals, indexing="ij")
    got = getattr(xs, name)(to_torch(a), to_torch(b))
    assert got.dtype == torch.uint64
    np.testing.assert_array_equal(to_numpy(got), _reference(name, a, b))
    # strided operands that are not contiguous: the bits are read through a view
    np.testing.assert_array_equal(to_numpy(getattr(xs, name)(to_torch(a).mT, to_torch(b).mT)), _reference(name, a.T, b.T))
    for s in EDGE64:
        np.testing.assert_array_equal(to_numpy(getattr(xs, name)(to_torch(vals), s)), _reference(name, vals, np.uint64(s)))
        np.testing.assert_array_equal(to_numpy(getattr(xs, name)(s, to_torch(vals))), _reference(name, np.uint64(s), vals))


@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
@pytest.mark.parametrize("other", ["uint8", "uint16", "uint32"])
def test_uint64_division_promotes_narrower_unsigned(name: str, other: str) -> None:
    """A narrower unsigned operand promotes to uint64 (the standard's table, which torch refuses)."""
    a = np.asarray([[0, 2**64 - 1, 7, 2**63], [5, 0, 2**63 + 3, 1]], dtype="uint64")
    b = np.asarray([[3, 0, 2, 255], [0, 9, 1, 2]], dtype=other)
    for x, y, ra, rb in ((to_torch(a), to_torch(b), a, b), (to_torch(b), to_torch(a), b, a)):
        want = _reference(name, ra, rb)
        for got in (getattr(xs, name)(x, y), getattr(xs, name)(xs.to_sparse_coo(x), xs.to_sparse_csr(y))):
            assert got.dtype == torch.uint64
            np.testing.assert_array_equal(to_numpy(got), want)


@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
def test_uint64_division_kernels_wrap_the_generic_ones(name: str) -> None:
    """The torch kernels of floor_divide and remainder cover every generic signature, come first, and
    hand every other dtype to the generic kernel (torch's own int64 division, floats with IEEE 754)."""
    generic = {k.signature for k in xs.kernels(name) if k.backend is None}
    native = {k.signature: k for k in xs.kernels(name) if k.backend == "torch"}
    assert set(native) == generic
    # (through the torch backend's index check, which wraps every torch kernel)
    assert all(inspect.unwrap(k.func) is next(g.func for g in xs.kernels(name) if g.backend is None and g.signature == s) for s, k in native.items())
    i = xs.to_sparse_coo(torch.tensor([[7, 0], [-7, 3]]))
    assert xs.to_dense(getattr(xs, name)(i, 2)).tolist() == ({"floor_divide": [[3, 0], [-4, 1]], "remainder": [[1, 0], [1, 1]]}[name])
    assert xs.to_dense(getattr(xs, name)(i, 0)).tolist() == [[0, 0], [0, 0]]
    f = getattr(xs, name)(xs.to_sparse_csr(torch.tensor([[7.5, 0.0]], dtype=torch.float64)), torch.tensor([[2.0, 0.0]], dtype=torch.float64))
    assert f[0, 0].item() == {"floor_divide": 3.0, "remainder": 1.5}[name] and math.isnan(f[0, 1].item())


def _uint64_dense(draw: Any, shape: tuple[int, ...], fill: int) -> np.ndarray:
    """A uint64 array of ``shape``, mostly ``fill``, the other elements edge values or random ones."""
    element = st.one_of(st.just(fill), st.just(fill), st.sampled_from(EDGE64), st.integers(0, 2**64 - 1))
    flat = draw(st.lists(element, min_size=math.prod(shape), max_size=math.prod(shape)))
    return np.asarray(flat, dtype="uint64").reshape(shape)


def _batched(draw: Any, rows: int, cols: int) -> np.ndarray:
    """Two batches of a uint64 matrix with fill value 0 and equally many specified elements (a compressed
    array's invariant 3.9): the second one holds new values at the first one's flipped positions."""
    first = _uint64_dense(draw, (rows, cols), 0)
    values = _uint64_dense(draw, (rows, cols), 1)
    second = np.where(np.flip(first != 0), np.where(values == 0, np.uint64(1), values), np.uint64(0))
    return np.stack([first, second])


def _uncoalesced(a: Any, rng: np.random.Generator) -> Any:
    """The COO array ``a`` with each entry split in two duplicates that add up to it modulo 2**64."""
    idx, vals = to_numpy(a._indices()).astype(np.int64), to_numpy(a._values()).astype("uint64")
    part = np.asarray(rng.integers(0, 2**64, vals.shape, dtype=np.uint64))
    with np.errstate(over="ignore"):
        rest = vals - part
    order = rng.permutation(2 * idx.shape[1])
    indices = torch.from_numpy(np.concatenate([idx, idx], axis=1)[:, order]).to(a._indices().dtype)
    return xs.sparse_coo_array(indices, to_torch(np.concatenate([part, rest])[order]), a.shape, fill_value=a.fill_value)


@st.composite
def uint64_operand(draw: Any) -> tuple[Any, np.ndarray]:
    """``(x, dense)``: a sparse uint64 array on torch and its NumPy value. COO (hybrid, uncoalesced half
    the time), CSR, CSC (batched ones too) and BSR; fill value 0 or another edge value; int32 and int64
    indices; nnz = 0 and zero-size dimensions among them."""
    layout = draw(st.sampled_from([xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr]))
    index_dtype = draw(st.sampled_from(["int32", "int64"]))
    rows, cols = draw(st.sampled_from([(3, 4), (2, 2), (0, 4), (1, 6)]))
    if layout in (xs.sparse_csr, xs.sparse_csc) and draw(st.booleans()):
        dense = _batched(draw, rows, cols)
        return xs.to_sparse(to_torch(dense), layout=layout, index_dtype=index_dtype), dense
    fill = draw(st.sampled_from([0, 0, 1, 2**63, 2**64 - 1]))
    shape = (rows, cols, 2) if layout is xs.sparse_coo and draw(st.booleans()) else (rows, cols)
    dense = _uint64_dense(draw, shape, fill)
    kw: dict[str, Any] = {"layout": layout, "index_dtype": index_dtype, "fill_value": fill}
    if layout is xs.sparse_coo:
        kw["sparse_dim"] = draw(st.integers(1, len(shape)))
    if layout is xs.sparse_bsr:
        kw["blocksize"] = (1, 2)
    x = xs.to_sparse(to_torch(dense), **kw)
    if layout is xs.sparse_coo and x.nnz and draw(st.booleans()):
        x = _uncoalesced(x, np.random.default_rng(draw(st.integers(0, 2**32 - 1))))
    return x, dense


@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
def test_uint64_division_of_sparse_arrays(name: str, data: Any) -> None:
    """floor_divide and remainder of sparse uint64 arrays with sparse (of the same or another layout),
    strided (of the same shape, or a broadcast row), 0-d and Python int operands, either way round: the
    result is NumPy's on the dense operands, in the layout the generic kernels give (and hold the same
    elements as the NumPy backend's generic kernel), with fill value ``name(fill_1, fill_2)``."""
    x, dx = data.draw(uint64_operand(), label="x")
    kind = data.draw(st.sampled_from(["sparse", "strided", "row", "0-d", "int"]), label="kind")
    dy: Any
    y: Any
    if kind == "sparse":
        fill_y = data.draw(st.sampled_from([0, 3, 2**64 - 1]), label="fill_y")
        dy = _uint64_dense(data.draw, dx.shape, fill_y)
        layouts = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc] if dx.ndim == 2 else [xs.sparse_coo]
        y = xs.to_sparse(to_torch(dy), layout=data.draw(st.sampled_from(layouts), label="layout_y"), fill_value=fill_y)
    elif kind in ("strided", "row"):
        dy = _uint64_dense(data.draw, dx.shape if kind == "strided" else dx.shape[-1:], 0)
        y = to_torch(dy)
    elif kind == "0-d":
        dy = np.asarray(data.draw(st.sampled_from(EDGE64), label="y"), dtype="uint64")
        y = to_torch(dy.reshape(1)).reshape(())
    else:
        y = data.draw(st.sampled_from(EDGE64), label="y")
        dy = np.uint64(y)
    first = data.draw(st.booleans(), label="sparse first")
    args, dense_args = ((x, y), (dx, dy)) if first else ((y, x), (dy, dx))
    got = getattr(xs, name)(*args)
    np.testing.assert_array_equal(to_numpy(got), _reference(name, *dense_args))
    assert got.dtype == torch.uint64
    host = [xs.to_backend(v, "numpy") if isinstance(v, (xs.SparseArray, torch.Tensor)) else v for v in args]
    want = getattr(xs, name)(*host)
    assert xs.layout_of(got) is xs.layout_of(want)
    if isinstance(got, xs.SparseArray):
        check_invariants(got)
        assert got.fill_value == want.fill_value and got.nnz == want.nnz
        if all(isinstance(v, xs.SparseArray) for v in args):
            fills = [np.uint64(v.fill_value) for v in args]
            assert got.fill_value == int(_reference(name, fills[0], fills[1]))


@pytest.mark.parametrize(("d1", "d2"), [("uint16", "uint32"), ("uint32", "uint64"), ("int8", "uint32"), ("uint16", "int16")])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_mixed_promotion_follows_the_standard(d1: str, d2: str, layout: Any) -> None:
    a = np.asarray([[0, 3, 0], [7, 0, 1]], dtype=d1)
    b = np.asarray([[2, 0, 0], [5, 0, int(np.iinfo(d2).max)]], dtype=d2)
    ta = sparse(a, layout) if d1.startswith("u") else xs.to_sparse(torch.from_numpy(a), layout=layout)
    tb = sparse(b, layout) if d2.startswith("u") else xs.to_sparse(torch.from_numpy(b), layout=layout)
    expected = xs.result_type(ta, tb)
    for name in ("add", "less", "maximum"):
        got = getattr(xs, name)(ta, tb)
        np.testing.assert_array_equal(to_numpy(got), _reference(name, a, b))
        assert got.dtype == (torch.bool if name == "less" else expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("other", ["bool", "float64", "complex128"])
@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_functions_of_an_unsigned_and_another_sparse_array(dtype: str, other: str, name: str) -> None:
    # the truth values of each side, as the dense path takes them: torch promotes uint16/32/64 with no bool,
    # float or complex dtype, and the standard's table has no such promotion either (a TypeError)
    a = np.asarray([1, 0, 2, 0, 3], dtype=dtype)
    b = np.asarray([1, 0, 0, 1, 2], dtype=other)
    ta = sparse(a, xs.sparse_coo)
    tb = xs.to_sparse(torch.from_numpy(b))
    for x1, x2, want in ((ta, tb, getattr(np, name)(a, b)), (tb, ta, getattr(np, name)(b, a))):
        got = getattr(xs, name)(x1, x2)
        assert got.dtype == torch.bool
        np.testing.assert_array_equal(to_numpy(got), want)
        np.testing.assert_array_equal(to_numpy(got), to_numpy(getattr(xs, name)(xs.to_dense(x1), xs.to_dense(x2))))


@pytest.mark.parametrize(("d1", "d2"), [("uint8", "uint16"), ("int32", "uint32"), ("uint16", "int32"), ("uint8", "uint64"), ("int16", "int8")])
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "less", "bitwise_or"])
@pytest.mark.parametrize("form", ["strided", "sparse"])
def test_a_zero_dim_operand_promotes_as_an_array(d1: str, d2: str, name: str, form: str) -> None:
    # torch lets a 0-d tensor decide the dtype only across categories (uint8 with a 0-d uint16 300 was uint8,
    # 44); the standard promotes it as any array, as NumPy does
    a = np.asarray([200, 0, 7], dtype=d1)
    b = np.asarray(min(300, int(np.iinfo(d2).max)), dtype=d2)
    ta = torch.from_numpy(a.astype(_SIGNED.get(d1, d1))).view(getattr(torch, d1)) if d1 in _SIGNED else torch.from_numpy(a)
    ta = xs.to_sparse(ta) if form == "sparse" else ta
    tb = torch.from_numpy(np.asarray(b, dtype=_SIGNED.get(d2, d2))).view(getattr(torch, d2)) if d2 in _SIGNED else torch.from_numpy(b)
    expected = getattr(np, name)(a, b)
    for x1, x2, want in ((ta, tb, expected), (tb, ta, getattr(np, name)(b, a))):
        got = getattr(xs, name)(x1, x2)
        assert str(got.dtype).rsplit(".", 1)[-1] == want.dtype.name
        np.testing.assert_array_equal(to_numpy(got), want)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["abs", "positive", "negative", "square", "sign", "bitwise_invert"])
def test_unary(name: str, dtype: str, layout: Any) -> None:
    top = edge_values(dtype)
    a = np.asarray([[0, top[5], 0, top[3]], [top[1], 0, top[4], 2]], dtype=dtype)
    with np.errstate(all="ignore"):
        expected = exact({"bitwise_invert": np.invert}.get(name, getattr(np, name))(a))
    np.testing.assert_array_equal(to_numpy(getattr(xs, name)(sparse(a, layout))), expected)
    np.testing.assert_array_equal(to_numpy(getattr(xs, name)(to_torch(a))), expected)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_clip(dtype: str, layout: Any) -> None:
    top = edge_values(dtype)
    a = np.asarray([[0, top[5], 0, top[3]], [top[1], 0, top[4], 2]], dtype=dtype)
    lo, hi = 1, top[4]
    np.testing.assert_array_equal(to_numpy(xs.clip(sparse(a, layout), min=lo, max=hi)), exact(np.clip(a, lo, hi)))


@settings(max_examples=15, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_extrema(name: str, dtype: str, layout: Any, data: Any) -> None:
    a = data.draw(unsigned_arrays(dtype))
    x = sparse(a, layout)
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(to_numpy(getattr(xs, name)(x, axis=axis)), exact(np.asarray(getattr(np, name)(a, axis=axis))))
    np.testing.assert_array_equal(to_numpy(getattr(xs, name)(to_torch(a), axis=0)), exact(getattr(np, name)(a, axis=0)))


@settings(max_examples=15, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_unique_isin_searchsorted(dtype: str, layout: Any, data: Any) -> None:
    a = data.draw(unsigned_arrays(dtype))
    x = sparse(a, layout)
    for axis in (0, 1):
        np.testing.assert_array_equal(to_numpy(xs.sort(x, axis=axis)), exact(np.sort(a, axis=axis)))
    np.testing.assert_array_equal(to_numpy(xs.unique_values(x)), exact(np.unique(a)))
    np.testing.assert_array_equal(to_numpy(xs.unique_counts(x).counts), exact(np.unique(a, return_counts=True)[1]))
    probe = np.asarray(edge_values(dtype), dtype=dtype)
    np.testing.assert_array_equal(to_numpy(xs.isin(x, to_torch(probe))), np.isin(a, probe))
    row = np.sort(a[0])
    for side in ("left", "right"):
        np.testing.assert_array_equal(to_numpy(xs.searchsorted(to_torch(row), x, side=side)), np.searchsorted(row, a, side=side))
        got = xs.searchsorted(xs.to_sparse_coo(to_torch(row)), to_torch(probe), side=side)
        np.testing.assert_array_equal(to_numpy(got), np.searchsorted(row, probe, side=side))


@settings(max_examples=15, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_moves(dtype: str, layout: Any, data: Any) -> None:
    a = data.draw(unsigned_arrays(dtype, (4, 4)))
    x = sparse(a, layout)
    np.testing.assert_array_equal(to_numpy(xs.linalg.diagonal(x, offset=1)), exact(np.diagonal(a, offset=1)))
    np.testing.assert_array_equal(to_numpy(xs.tril(x)), exact(np.tril(a)))
    np.testing.assert_array_equal(to_numpy(xs.flip(x, axis=0)), exact(np.flip(a, axis=0)))
    np.testing.assert_array_equal(to_numpy(xs.flip(to_torch(a), axis=1)), exact(np.flip(a, axis=1)))
    np.testing.assert_array_equal(to_numpy(x[1:, ::2]), exact(a[1:, ::2]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_eye(dtype: str) -> None:
    got = xs.eye(3, 4, k=1, dtype=getattr(torch, dtype), layout=xs.sparse_coo, backend="torch")
    np.testing.assert_array_equal(to_numpy(got), exact(np.eye(3, 4, k=1, dtype=dtype)))


@settings(max_examples=10, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("d1", "d2"), [("uint16", "uint16"), ("uint16", "uint32"), ("uint32", "uint64"), ("uint64", "uint64")])
def test_products(d1: str, d2: str, layout: Any, data: Any) -> None:
    a = data.draw(unsigned_arrays(d1, (3, 4)))
    b = data.draw(unsigned_arrays(d2, (4, 2)))
    x, y = sparse(a, layout), sparse(b, layout)
    # NumPy's unsigned products and sums wrap modulo 2**bits, as the standard's integer arithmetic does
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(to_numpy(xs.matmul(x, y)), exact(np.matmul(a, b)))
        np.testing.assert_array_equal(to_numpy(xs.matmul(x, to_torch(b))), exact(np.matmul(a, b)))
        np.testing.assert_array_equal(to_numpy(xs.tensordot(x, y, axes=1)), exact(np.tensordot(a, b, axes=1)))
        np.testing.assert_array_equal(to_numpy(xs.vecdot(x, xs.to_sparse(to_torch(a), layout=layout))), exact(np.sum(a * a, axis=-1, dtype=a.dtype)))
        u, v = a[0], b[:, 0]
        got = xs.linalg.outer(xs.to_sparse_coo(to_torch(u)), xs.to_sparse_coo(to_torch(v)))
        np.testing.assert_array_equal(to_numpy(got), exact(np.outer(u, v)))
        np.testing.assert_array_equal(to_numpy(xs.kron(x, y)), exact(np.kron(a, b)))


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_python_int_shifted_right_by_an_unsigned_array(dtype: str) -> None:
    # the emulated logical shift took the Python int for an array ("'int' object has no attribute 'dtype'")
    s = xs.to_sparse(torch.tensor([0, 1, 2, 0], dtype=getattr(torch, dtype)))
    r = xs.bitwise_right_shift(200, s)
    r = xs.to_dense(r) if isinstance(r, xs.SparseArray) else r
    assert r.tolist() == np.right_shift(getattr(np, dtype)(200), np.array([0, 1, 2, 0], dtype=dtype)).tolist()


def _split_duplicates(dense: np.ndarray, fill: int, rng: np.random.Generator) -> Any:
    """An uncoalesced torch COO array of ``dense`` (2-D) with fill value ``fill``: every element that differs
    from ``fill`` is stored as two duplicates that add up to it modulo 2**bits, in random order."""
    rows, cols = np.nonzero(dense != dense.dtype.type(fill))
    vals = dense[rows, cols]
    part = rng.integers(0, np.iinfo(dense.dtype).max, vals.shape, dtype=dense.dtype, endpoint=True)
    with np.errstate(over="ignore"):
        rest = vals - part
    order = rng.permutation(2 * len(rows))
    idx = np.stack([np.concatenate([rows, rows]), np.concatenate([cols, cols])])[:, order]
    return xs.sparse_coo_array(torch.from_numpy(idx), to_torch(np.concatenate([part, rest])[order]), dense.shape, fill_value=fill)


@pytest.mark.parametrize("fill", [0, 9])
@pytest.mark.parametrize("dtype", DTYPES)
def test_order_of_an_uncoalesced_array(dtype: str, fill: int) -> None:
    # the order-preserving map subtracted 2**(bits-1) from each duplicate before they were summed:
    # max of duplicates [3, 3] gave 2**31 + 6 for uint32
    rng = np.random.default_rng(7)
    dense = rng.choice(np.asarray([*edge_values(dtype), 3, 6, 9], dtype=dtype), size=(3, 4))
    dense[1, :] = fill
    x = _split_duplicates(dense, fill, rng)
    assert not x.is_coalesced()
    for name in ("max", "min", "argmax", "argmin"):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(to_numpy(getattr(xs, name)(x, axis=axis)), exact(np.asarray(getattr(np, name)(dense, axis=axis))))
    for axis in (0, 1):
        np.testing.assert_array_equal(to_numpy(xs.sort(x, axis=axis)), exact(np.sort(dense, axis=axis)))
        np.testing.assert_array_equal(to_numpy(xs.sort(x, axis=axis, descending=True)), exact(np.flip(np.sort(dense, axis=axis), axis=axis)))
    v = np.asarray([3, 3], dtype=dtype)
    assert int(to_numpy(xs.max(xs.sparse_coo_array([[0, 0]], to_torch(v), (3,))))) == 6


@pytest.mark.parametrize("dtype", DTYPES)
def test_right_shift_by_counts_of_the_width_or_more(dtype: str) -> None:
    # a count with its top bit set is negative on the twin, and was taken for a shift by 1 (NumPy: 0)
    bits = np.iinfo(dtype).bits
    counts = np.asarray([0, 1, bits - 1, bits, bits + 1, 2 ** (bits - 1), 2 ** (bits - 1) + 1, 2**bits - 1], dtype=dtype)
    x = np.asarray(edge_values(dtype) + [5, 6], dtype=dtype)
    np.testing.assert_array_equal(to_numpy(xs.bitwise_right_shift(to_torch(x), to_torch(counts))), exact(np.right_shift(x, counts)))
    for c in counts.tolist():
        np.testing.assert_array_equal(to_numpy(xs.bitwise_right_shift(to_torch(x), c)), exact(np.right_shift(x, np.asarray(c, dtype=dtype))))
    for v in edge_values(dtype):
        np.testing.assert_array_equal(to_numpy(xs.bitwise_right_shift(v, to_torch(counts))), exact(np.right_shift(np.asarray(v, dtype=dtype), counts)))
    s = xs.to_sparse_coo(to_torch(np.asarray([[0, 2], [2**bits - 1, 0]], dtype=dtype)))
    np.testing.assert_array_equal(to_numpy(xs.bitwise_right_shift(s, 2 ** (bits - 1))), exact(np.zeros((2, 2), dtype=dtype)))
    with pytest.raises(OverflowError, match=rf"^bitwise_right_shift: a Python int operand is out of the range of the array's dtype \(value=-1, dtype={dtype}\)\. Pass an int in \[0, 2\*\*{bits}\)"):
        xs.bitwise_right_shift(to_torch(x), -1)


def test_uint64_pow_of_exponents_with_the_top_bit_set() -> None:
    # pow of uint64 runs on int64, where an exponent >= 2**63 was negative (0, or torch's error)
    rng = np.random.default_rng(3)
    base = np.concatenate([np.asarray(EDGE64, dtype="uint64"), rng.integers(0, 2**64, 40, dtype=np.uint64, endpoint=False)])
    special = [0, 1, 2, 63, 64, 65, 2**62 - 1, 2**62, 2**62 + 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 2, 2**64 - 1]
    exponents = [*special, *rng.integers(2**62, 2**64, 6, dtype=np.uint64, endpoint=False).tolist()]
    for e in exponents:
        expected = exact(np.power(base, np.uint64(e)))
        np.testing.assert_array_equal(to_numpy(xs.pow(to_torch(base), e)), expected)
        np.testing.assert_array_equal(to_numpy(xs.pow(to_torch(base), to_torch(np.full(base.shape, e, dtype="uint64")))), expected)
    e_array = rng.integers(0, 2**64, base.shape, dtype=np.uint64, endpoint=False)
    np.testing.assert_array_equal(to_numpy(xs.pow(to_torch(base), to_torch(e_array))), exact(np.power(base, e_array)))
    for b in (3, 2**63, 2**64 - 1):
        np.testing.assert_array_equal(to_numpy(xs.pow(b, to_torch(e_array))), exact(np.power(np.uint64(b), e_array)))
    got = xs.pow(xs.to_sparse_csr(to_torch(np.asarray([[3, 0], [0, 5]], dtype="uint64"))), 2**64 - 1)
    np.testing.assert_array_equal(to_numpy(got), exact(np.power(np.asarray([[3, 0], [0, 5]], dtype="uint64"), np.uint64(2**64 - 1))))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_products_with_a_fill_value(dtype: str, layout: Any) -> None:
    # the values less the fill value, and the fill value's share, were computed with torch's "-" and "+",
    # which it refuses for uint16/32/64 ("add_stub" not implemented)
    top = edge_values(dtype)[-1]
    a = np.asarray([[5, 0, top, 5], [0, 7, 5, 2], [5, 5, 5, 5]], dtype=dtype)
    b = np.asarray([[1, 2], [3, top], [0, 4], [top - 1, 6]], dtype=dtype)
    v, w = b[:, 0].copy(), a[:, 1].copy()
    s = xs.to_sparse(to_torch(a), layout=layout, fill_value=5)
    st_ = xs.to_sparse(to_torch(a.T.copy()), layout=layout, fill_value=5)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(to_numpy(xs.matmul(s, to_torch(b))), exact(np.matmul(a, b)))
        np.testing.assert_array_equal(to_numpy(xs.matmul(to_torch(b.T.copy()), st_)), exact(np.matmul(b.T, a.T)))
        np.testing.assert_array_equal(to_numpy(xs.matmul(s, to_torch(v))), exact(np.matmul(a, v)))
        np.testing.assert_array_equal(to_numpy(xs.matmul(to_torch(w), s)), exact(np.matmul(w, a)))
        np.testing.assert_array_equal(to_numpy(xs.tensordot(s, to_torch(b), axes=1)), exact(np.tensordot(a, b, axes=1)))
        np.testing.assert_array_equal(to_numpy(xs.vecdot(s, to_torch(a))), exact(np.sum(a * a, axis=-1, dtype=a.dtype)))
        np.testing.assert_array_equal(to_numpy(xs.mm(s, to_torch(b))), exact(np.matmul(a, b)))
        np.testing.assert_array_equal(to_numpy(xs.mv(s, to_torch(v))), exact(np.matmul(a, v)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_arrays_of_stored_only_dtypes(dtype: str) -> None:
    # these reached torch's own functions, which compute none of uint16/32/64 ("nonzero_count_cpu" ...)
    top = edge_values(dtype)
    a = np.asarray([[0, top[5], top[3], 1], [top[4], 0, 2, top[3]], [0, 0, 0, 0]], dtype=dtype)
    x = to_torch(a)
    for got, expected in zip(xs.nonzero(x), np.nonzero(a)):
        np.testing.assert_array_equal(to_numpy(got), expected)
    probe = np.asarray([top[3], 2, top[5]], dtype=dtype)
    np.testing.assert_array_equal(to_numpy(xs.isin(x, to_torch(probe))), np.isin(a, probe))
    np.testing.assert_array_equal(to_numpy(xs.isin(x, to_torch(probe), invert=True)), np.isin(a, probe, invert=True))
    row = np.sort(a[0])
    for side in ("left", "right"):
        np.testing.assert_array_equal(to_numpy(xs.searchsorted(to_torch(row), x, side=side)), np.searchsorted(row, a, side=side))
    idx = np.asarray([[3, 0], [1, 1], [2, 3]], dtype=np.int64)
    np.testing.assert_array_equal(to_numpy(xs.take_along_axis(x, torch.from_numpy(idx), axis=1)), exact(np.take_along_axis(a, idx, axis=1)))
    np.testing.assert_array_equal(to_numpy(xs.tril(x)), exact(np.tril(a)))
    np.testing.assert_array_equal(to_numpy(xs.triu(x, k=1)), exact(np.triu(a, k=1)))
    tdtype = getattr(torch, dtype)
    for start, stop, num, endpoint in ((0, 100, 5, True), (0, 100, 7, False), (100, 0, 7, True), (top[3], top[3] + top[3] // 2, 5, True)):
        got = xs.linspace(start, stop, num, dtype=tdtype, endpoint=endpoint, backend="torch")
        np.testing.assert_array_equal(to_numpy(got), exact(np.linspace(start, stop, num, dtype=dtype, endpoint=endpoint)))
    for start, stop, step in ((0, 5, 1), (top[3], top[3] + 4, 1), (top[5], top[3], -(2 ** (np.iinfo(dtype).bits - 3)))):
        np.testing.assert_array_equal(to_numpy(xs.arange(start, stop, step, dtype=tdtype, backend="torch")), exact(np.arange(start, stop, step, dtype=dtype)))
    with pytest.raises(OverflowError, match=rf"^linspace: the backend makes no {dtype} values but from integers in its range, and a bound is not one \(value=-1, dtype={dtype}\)\."):
        xs.linspace(-1, 5, 3, dtype=tdtype, backend="torch")



def test_uint64_arange_refuses_values_outside_its_range() -> None:
    # torch makes no uint64 range of its own (array-api-compat's goes through int64)
    with pytest.raises(OverflowError, match=r"^arange: .* \(value=18446744073709551617, dtype=uint64\)\. Pass bounds whose values lie in \[0, 2\*\*64\)"):
        xs.arange(2**64 - 2, 2**64 + 2, dtype=torch.uint64, backend="torch")


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_a_zero_d_unsigned_tensor_of_another_kind_follows_torch(dtype: str) -> None:
    # the standard promotes no complex dtype with uint64: a 0-d tensor beside it follows torch's own rule,
    # as a 0-d int64 does (the standard's promotion raised for it before)
    a = xs.to_sparse(torch.tensor([1j, 0], dtype=torch.complex64))
    z = torch.tensor(2, dtype=getattr(torch, dtype))
    for got, want in ((a + z, xs.to_dense(a) + z), (z * a, z * xs.to_dense(a))):
        assert isinstance(got, xs.SparseArray) and got.dtype == want.dtype == torch.complex64
        torch.testing.assert_close(xs.to_dense(got), want)
