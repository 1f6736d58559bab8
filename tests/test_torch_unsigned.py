"""torch's "limited support" unsigned dtypes (uint16, uint32, uint64) through the generic kernels.

torch stores these dtypes but gathers, compares, adds and promotes none of them; the generic kernels run
such steps on the same-width signed twin (or its order-preserving map). Every result here is compared
with NumPy's computation on the same unsigned data, which NumPy supports natively, on COO and CSR inputs
whose elements include 0, 2**(bits-1) and the dtype's maximum, and divisors 0 (an integer division by
zero gives NumPy's 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xsparse as xs

torch = pytest.importorskip("torch")

DTYPES = ["uint16", "uint32", "uint64"]
LAYOUTS = [xs.sparse_coo, xs.sparse_csr]
_SIGNED = {"uint16": np.int16, "uint32": np.int32, "uint64": np.int64}


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


def _reference(name: str, a: np.ndarray, b: Any) -> np.ndarray:
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
    if dtype == "uint64" and name in ("floor_divide", "remainder"):
        pytest.skip("uint64 division: see test_uint64_division_is_a_clear_error")
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


def test_uint64_division_is_a_clear_error() -> None:
    a = to_torch(np.asarray([[2**64 - 1, 0]], dtype="uint64"))
    with pytest.raises(NotImplementedError, match="UInt64"):
        xs.floor_divide(a, a)


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
