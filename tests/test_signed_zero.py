"""The signed-zero rule (docs/decisions.md, "Signed zeros") in the elementwise kernels, repr and testing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import xsparse as xs
from xsparse.backends.array_api import elementwise as generic
from xsparse.formats import COOArray
from xsparse.testing import apply_zero_ties_rule, assert_sparse_equal

LAYOUTS = ["coo", "csr"]


def _sparse(d: np.ndarray, layout: str, fill: float = 0.0) -> xs.SparseArray:
    return (xs.to_sparse_coo if layout == "coo" else xs.to_sparse_csr)(d, fill_value=fill)


def _same(actual: object, expected: np.ndarray) -> None:
    got = np.asarray(xs.to_dense(actual))
    np.testing.assert_array_equal(got, expected)
    for part_got, part_exp in ((got.real, expected.real), (got.imag, expected.imag)):
        np.testing.assert_array_equal(np.signbit(part_got), np.signbit(part_exp))


@pytest.mark.parametrize("op", ["add", "subtract"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_coo_add_subtract_signed_zeros(op: str, dtype: type) -> None:
    # every pairing of a stored -0.0, stored +0.0, stored 1 and an unspecified +0.0
    x: Any = np.array([[-0.0, -0.0, -0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]], dtype=dtype)
    y: Any = np.array([[-0.0, 0.0, 0.0, -0.0, 0.0, 0.0], [-0.0, 0.0, 0.0, 1.0, 0.0, 0.0]], dtype=dtype)
    if dtype is np.complex128:
        x = x + np.array(-0.0j)  # -0.0 imaginary parts, stored everywhere
    sx, sy = xs.to_sparse_coo(x), xs.to_sparse_coo(y)
    _same(getattr(xs, op)(sx, sy), getattr(np, op)(x, y))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_add_minus_zero_meets_unspecified(backend: str) -> None:
    d = np.array([-0.0, 0.0, 1.0])
    z = np.zeros(3)
    if backend == "torch":
        x, y = xs.to_sparse_coo(torch.tensor(d)), xs.to_sparse_coo(torch.tensor(z))
        plus = xs.to_sparse_coo(torch.tensor([0.0, 2.0, 0.0]))
        r1, r2 = xs.add(x, y), xs.subtract(y, plus)
        got1, got2 = xs.to_dense(r1).numpy(), xs.to_dense(r2).numpy()
    else:
        x, y = xs.to_sparse_coo(d), xs.to_sparse_coo(z)
        plus = xs.to_sparse_coo(np.array([0.0, 2.0, 0.0]))
        got1, got2 = np.asarray(xs.to_dense(xs.add(x, y))), np.asarray(xs.to_dense(xs.subtract(y, plus)))
    np.testing.assert_array_equal(np.signbit(got1), np.signbit(d + z))
    np.testing.assert_array_equal(np.signbit(got2), np.signbit(z - np.array([0.0, 2.0, 0.0])))


def test_subtract_stored_plus_zero_of_y() -> None:
    x = xs.to_sparse_coo(np.array([0.0, 3.0]))
    y = xs.to_sparse_coo(np.array([-0.0, 0.0]), fill_value=-0.0)  # stores the +0.0 at [1]
    y = xs.to_sparse_coo(xs.to_dense(y))  # fill +0.0: stores the -0.0 at [0] only
    y2 = COOArray(
        np.array([[0, 1]]), np.array([0.0, 0.0]), (2,), backend=x._backend, xp=x._xp, coalesced=True, fill_value=0.0
    )
    _same(xs.subtract(x, y2), np.array([0.0, 3.0]) - np.array([0.0, 0.0]))
    _same(xs.subtract(x, y), np.array([0.0, 3.0]) - np.array([-0.0, 0.0]))


def test_subtract_integer_zero_from_float() -> None:
    x = xs.to_sparse_coo(np.array([0.0, 1.0]))
    y = COOArray(np.array([[0]]), np.array([0]), (2,), backend=x._backend, xp=x._xp, coalesced=True, fill_value=0)
    _same(xs.subtract(x, y), np.array([0.0, 1.0]) - np.array([0, 0]))


def test_concat_declines_with_reasons() -> None:
    xp = xs.to_sparse_coo(np.zeros(2))._xp
    minus: Any = xs.to_sparse_coo(np.array([-0.0, 1.0]))
    plus_stored = COOArray(
        np.array([[0]]), np.array([0.0]), (2,), backend=minus._backend, xp=xp, coalesced=True, fill_value=0.0
    )
    plain: Any = xs.to_sparse_coo(np.array([2.0, 0.0]))
    minus_fill: Any = xs.to_sparse_coo(np.array([2.0, 0.0]), fill_value=-0.0)
    assert generic._concat_declines(xp, "add", plain, plain) is None
    assert generic._concat_declines(xp, "subtract", plain, minus) is None
    assert generic._concat_declines(xp, "subtract", plus_stored, plain) is None
    assert "-0.0 + +0.0" in str(generic._concat_declines(xp, "add", minus, plain))
    assert "-0.0 + +0.0" in str(generic._concat_declines(xp, "add", plain, minus))
    assert "+0.0 - +0.0" in str(generic._concat_declines(xp, "subtract", plain, plus_stored))
    assert "fill value +0" in str(generic._concat_declines(xp, "add", plain, minus_fill))
    ints: Any = xs.to_sparse_coo(np.array([0, 1]))
    assert generic._concat_declines(xp, "subtract", ints, ints) is None


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply"])
def test_minus_zero_fill_elementwise(layout: str, op: str) -> None:
    a = np.array([[1.0, -0.0, -0.0], [-0.0, 2.0, -0.0]])
    b = np.array([[-0.0, -0.0, 3.0], [-0.0, -1.0, -0.0]])
    sa, sb = _sparse(a, layout, -0.0), _sparse(b, layout, -0.0)
    r = getattr(xs, op)(sa, sb)
    if op == "multiply":  # signs of products with an unspecified zero are not tracked (values agree)
        np.testing.assert_array_equal(np.asarray(xs.to_dense(r)), a * b)
    else:
        _same(r, getattr(np, op)(a, b))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_minus_zero_fill_add_torch_and_numpy(backend: str) -> None:
    a = np.array([[1.0, -0.0], [-0.0, -0.0]])
    arr = torch.tensor(a) if backend == "torch" else a
    s = xs.to_sparse_coo(arr, fill_value=-0.0)
    r = xs.add(s, s)
    got = xs.to_dense(r)
    got = got.numpy() if backend == "torch" else np.asarray(got)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(a + a))
    assert np.signbit(r.fill_value)


def test_multiply_leaves_a_product_with_an_unspecified_zero_unspecified() -> None:
    # -1 * (unspecified +0.0) is -0.0 in IEEE arithmetic; the product keeps the intersection pattern, so
    # that position stays unspecified (+0.0), as with a strided operand (docs/decisions.md)
    a = np.array([-1.0, 0.0, 2.0, -0.0])
    b = np.array([0.0, 0.0, 3.0, 5.0])
    r = xs.multiply(xs.to_sparse_coo(a), xs.to_sparse_coo(b))
    np.testing.assert_array_equal(np.asarray(xs.to_dense(r)), a * b)
    assert r.nnz == 2
    assert np.signbit(np.asarray(xs.to_dense(r)))[3]  # two specified elements: -0.0 * 5 is kept


def test_minus_zero_fill_cumulative_sum() -> None:
    d = np.array([[-0.0, -0.0], [1.0, -0.0]])
    s = xs.to_sparse_coo(d, fill_value=-0.0)
    _same(xs.cumulative_sum(s, axis=1), np.cumsum(d, axis=1))


def test_repr_shows_minus_zero_fill() -> None:
    assert "fill_value=-0.0" in repr(xs.to_sparse_coo(np.array([1.0, 0.0]), fill_value=-0.0))
    assert "fill_value" not in repr(xs.to_sparse_coo(np.array([1.0, 0.0])))
    assert "fill_value" not in repr(xs.to_sparse_coo(np.array([1, 0])))


def test_assert_sparse_equal_signed_zeros() -> None:
    plus = xs.to_sparse_coo(np.array([0.0, 1.0]), fill_value=-0.0)
    minus = np.array([-0.0, 1.0])
    assert_sparse_equal(plus, minus, check_signed_zeros=False)
    with pytest.raises(AssertionError, match="signs of zeros differ"):
        assert_sparse_equal(plus, minus)
    with pytest.raises(AssertionError, match="signs of zeros differ"):
        assert_sparse_equal(xs.to_sparse_coo(np.array([0j])), np.array([complex(0.0, -0.0)]))
    assert_sparse_equal(xs.to_sparse_coo(np.array([-0.0, 1.0])), minus)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_zero_ties_rule_accepts_either_sign_of_two_zeros_only(op: str) -> None:
    # torch's vectorised loop returns the other zero than its scalar loop does, from 16 float32 elements on
    x = xs.sparse_csr_array(torch.tensor([0, 0]), torch.tensor([], dtype=torch.int64), torch.tensor([]), (1, 1))
    y = xs.sparse_csr_array(torch.tensor([0, 2, 2, 2, 2]), torch.tensor([1, 2]), torch.tensor([-1.0, -0.0]), (4, 4))
    result = getattr(xs, op)(x, y)
    expected = getattr(torch, op)(xs.to_dense(x).expand(4, 4), xs.to_dense(y))
    flipped = torch.where((xs.to_dense(x) == 0) & (xs.to_dense(y) == 0), -expected, expected)
    for other in (expected, flipped):  # either sign where both operands are zeros
        assert_sparse_equal(result, apply_zero_ties_rule(op, x, y, result, other))
    # where one operand is not zero, the sign is IEEE 754's: maximum(+0.0, -1.0) is +0.0
    wrong = torch.where(xs.to_dense(y) == -1.0, -0.0, xs.to_dense(result)) if op == "maximum" else None
    if wrong is not None:
        with pytest.raises(AssertionError, match="signs of zeros differ"):
            assert_sparse_equal(wrong, apply_zero_ties_rule(op, x, y, wrong, expected))
    assert apply_zero_ties_rule("add", x, y, result, expected) is expected


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_zero_remainder_takes_the_sign_of_the_divisor(backend: str, layout: str) -> None:
    # torch's remainder gives +0 for every zero result; the Array API (and NumPy) give the divisor's sign
    x = np.array([[-0.0, 0.0, 3.0, 0.0], [2.0, -2.0, 0.0, 0.0]])
    y = np.array([[5.0, -5.0, -1.5, -2.0], [-1.0, 1.0, 4.0, -4.0]])
    sx, sy = _sparse(x, layout), _sparse(y, layout)
    if backend == "torch":
        sx, sy = xs.to_backend(sx, "torch"), xs.to_backend(sy, "torch")
    got = xs.remainder(sx, sy)
    _same(xs.to_backend(got, "numpy") if backend == "torch" else got, np.remainder(x, y))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_product_with_strided_sums_duplicates_first(backend: str) -> None:
    # (1 + -1) * -1.5 is -0.0 (a specified entry times a negative value); 1*-1.5 + -1*-1.5 is +0.0
    xp = xs.get_backend(backend).load()
    a = xs.sparse_coo_array(xp.asarray([[0, 0, 1]]), xp.asarray([1.0, -1.0, 2.0]), (3,))
    d = xp.asarray([-1.5, -1.5, -1.5])
    for r in (xs.multiply(a, d), xs.multiply(d, a)):
        _same(xs.to_backend(r, "numpy"), np.array([-0.0, -3.0, 0.0]))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sums_with_a_stored_minus_zero(backend: str, layout: str) -> None:
    # -0.0 + +0.0 (unspecified) is +0.0, -0.0 + -0.0 is -0.0, and +0.0 - +0.0 is +0.0: the native
    # kernels that skip the unspecified elements decline a stored -0.0, or start from d + 0.0
    h = np.array([[-0.0, 0.0, 1.0], [0.0, -0.0, 0.0]])
    k = np.array([[-0.0, 0.0, -0.0], [2.0, 0.0, 0.0]])
    xp = xs.get_backend(backend).load()
    for hh in (h, np.abs(h)):  # with and without a stored -0.0 on the sparse side
        a = xs.to_backend(_sparse(hh, layout), backend)
        for other in (xp.asarray(k), xs.to_backend(_sparse(k, layout), backend)):
            for op in ("add", "subtract"):
                _same(xs.to_backend(getattr(xs, op)(a, other), "numpy"), getattr(np, op)(hh, k))
                _same(xs.to_backend(getattr(xs, op)(other, a), "numpy"), getattr(np, op)(k, hh))
