"""The signed-zero rule (docs/decisions.md, "Signed zeros") in the elementwise kernels, repr and testing."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from cupy_standin import asarray_dropping_zero_signs

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


def _torch_operand(values: list[list[float]], layout: str) -> xs.SparseArray:
    """The 4 x 4 array whose column j holds the j-th sparse value in every row: unspecified, -0.0, +0.0,
    2.0; ``uncoalesced`` splits each stored value into two duplicates that add up to it, ``hybrid``
    gives it a dense dimension of 2."""
    rows, cols = np.meshgrid(np.arange(4), np.arange(1, 4), indexing="ij")
    idx = np.stack([rows.ravel(), cols.ravel()])
    vals = np.asarray([values[0][c] for c in cols.ravel()])
    if layout == "uncoalesced":
        parts = np.asarray([values[1][c] for c in cols.ravel()])
        idx = np.concatenate([idx, idx], axis=1)
        vals = np.concatenate([parts, [values[2][c] for c in cols.ravel()]])
    if layout == "hybrid":
        vals = np.stack([vals, vals[::-1]], axis=1)
        return xs.sparse_coo_array(torch.tensor(idx), torch.tensor(vals), (4, 4, 2), is_coalesced=True)
    coo = xs.sparse_coo_array(torch.tensor(idx), torch.tensor(vals), (4, 4), is_coalesced=layout != "uncoalesced")
    return xs.to_sparse_csr(coo) if layout == "csr" else coo


@pytest.mark.parametrize("layout", ["coo", "uncoalesced", "csr", "hybrid"])
@pytest.mark.parametrize("op", ["add", "subtract"])
@pytest.mark.parametrize("dense_dtype", [torch.float64, torch.float32, torch.complex128, torch.int64])
def test_torch_dense_and_sparse_with_stored_minus_zeros(layout: str, op: str, dense_dtype: torch.dtype) -> None:
    """Every pair of a dense element (-0.0, +0.0, 1.5, -2.0; row i) and a sparse one (unspecified, -0.0,
    +0.0, 2.0; column j), both ways round: torch's dense + sparse runs, with the -0.0 that it loses put
    back, and gives the dense result bit for bit."""
    # the stored values, and for uncoalesced arrays two duplicates each that add up to them
    values = [[0.0, -0.0, 0.0, 2.0], [0.0, -0.0, 1.0, 1.5], [0.0, -0.0, -1.0, 0.5]]
    s = _torch_operand(values, layout)
    d = torch.tensor([-0.0, 0.0, 1.5, -2.0], dtype=torch.float64)[:, None].expand(4, 4)
    if layout == "hybrid":
        d = d[..., None].expand(4, 4, 2)
    d = d.to(dense_dtype) if dense_dtype != torch.complex128 else torch.complex(d, -d)
    sd = xs.to_dense(s)
    assert bool(torch.signbit(sd[0, 1]).any())  # the stored -0.0 is there
    kernels = {k.signature: k for k in xs.kernels(op) if k.backend == "torch"}
    xp = xs.get_backend("torch").load()
    # torch subtracts complex values as x + (-1 + 0j) * y, dense ones too, and a zero part may take
    # the other sign than IEEE 754's; its sparse + dense complex add computes x + 1 * y, which mixes the
    # parts at an infinity: the kernels decline complex operands, and the generic one gives torch's dense result
    declines = dense_dtype == torch.complex128
    for x, y, dx, dy in ((d, s, d, sd), (s, d, sd, d)):
        expected = getattr(torch, op)(dx, dy)
        if not (op == "subtract" and declines):  # which is IEEE 754's (NumPy's)
            ieee = getattr(np, op)(dx.numpy(), dy.numpy())
            for part, want in ((expected.real, ieee.real), (expected.imag if expected.is_complex() else None, ieee.imag)):
                if part is not None:
                    np.testing.assert_array_equal(np.signbit(part.numpy()), np.signbit(want))
        kernel = kernels.get((xs.layout_of(x), xs.layout_of(y)))
        if layout != "hybrid":
            assert kernel is not None and (kernel.supports(xp, x, y) is None) is not declines, (x, y)
        assert_sparse_equal(getattr(xs, op)(x, y), expected)
        if kernel is not None and kernel.supports(xp, x, y) is None:
            assert_sparse_equal(kernel.func(xp, x, y), expected)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64])
def test_torch_negative_zero_detection(dtype: torch.dtype) -> None:
    """The bit tests that find a -0.0 (a least-integer test first, then an exact one for float64)."""
    from xsparse.backends.torch.conversion import _holds_negative_zero

    def minus_zero(v: complex) -> bool:
        return any(p == 0 and math.copysign(1.0, p) < 0 for p in (v.real, v.imag))

    # negative subnormals of float64 and of float32 (which the narrower dtypes round to -0.0)
    cases = [(1.0, -0.0), (1.0, 0.0, -1.0), (-1e-310, 2.0), (-1e-40, 0.5), (-math.inf, math.nan, -math.nan), (), (-0.0,)]
    for values in cases:
        t = torch.tensor(values, dtype=dtype)
        holds = any(minus_zero(complex(v)) for v in t.tolist())
        assert _holds_negative_zero(t) is holds, values
        if t.numel():
            assert _holds_negative_zero(t.flip(0)) is holds
            assert _holds_negative_zero(t[-1]) is minus_zero(complex(t[-1].item()))
    assert _holds_negative_zero(torch.tensor([1.0, -0.0], dtype=dtype))
    m = torch.zeros(4, 4, dtype=dtype)
    m[1, 2] = -0.0
    assert _holds_negative_zero(m.t()) and _holds_negative_zero(m[:, ::2]) and not _holds_negative_zero(m[:, ::3])
    # a float64 whose low half is the least int32 (the pre-test passes, the exact test says no)
    tricky = torch.tensor([1.0], dtype=torch.float64).view(torch.int64) | (1 << 31)
    assert not _holds_negative_zero(tricky.view(torch.float64))


def test_torch_complex_products_with_dense_dimensions() -> None:
    """torch's hybrid sparse mul gives (-0+0j) * 1j as +0+0j, where its dense product (and IEEE 754)
    gives -0+0j: the native kernels decline complex arrays with dense dimensions, and the result is the
    dense product's, bit for bit (every element specified on both sides)."""
    idx = torch.tensor([[0, 0, 1, 1], [0, 1, 0, 1]])
    xv = torch.tensor([[-4 - 4j, 0j], [complex(-0.0, 0.0), 0j], [2 - 4j, 3], [0j, -3 - 4j]], dtype=torch.complex64)
    yv = torch.tensor([[3 - 3j, 1 + 3j], [1j, complex(-0.0, 0.0)], [-2, complex(-0.0, 0.0)], [-4 + 4j, -4 + 2j]], dtype=torch.complex64)
    x = xs.sparse_coo_array(idx, xv, (2, 2, 2), is_coalesced=True)
    y = xs.sparse_coo_array(idx, yv, (2, 2, 2), is_coalesced=True)
    xp = xs.get_backend("torch").load()
    expected = xs.to_dense(x) * xs.to_dense(y)
    for a, b in ((x, y), (x, xs.to_dense(y)), (xs.to_dense(x), y)):
        native = [k for k in xs.kernels("multiply") if k.backend == "torch" and k.signature == (xs.layout_of(a), xs.layout_of(b))]
        assert native and "dense dimensions gives zero parts other signs" in native[0].supports(xp, a, b)
        assert_sparse_equal(xs.multiply(a, b), expected)
    # without dense dimensions torch's product is the dense one, and the native kernel runs
    flat = xs.sparse_coo_array(torch.tensor([[0, 1, 2, 3]]), xv[:, 0], (4,), is_coalesced=True)
    other = xs.sparse_coo_array(torch.tensor([[0, 1, 2, 3]]), yv[:, 0], (4,), is_coalesced=True)
    native = next(k for k in xs.kernels("multiply") if k.backend == "torch" and k.signature == (xs.sparse_coo, xs.sparse_coo))
    assert native.supports(xp, flat, other) is None
    assert_sparse_equal(native.func(xp, flat, other), xs.to_dense(flat) * xs.to_dense(other))


@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_complex_duplicates_sum_part_by_part(backend: str) -> None:
    """Complex duplicates add up as IEEE 754 adds each part: two -0.0 parts give -0.0 (torch's complex
    addition gives +0.0, which moves atan across its branch cut), a NaN stays in its part."""
    cases = (
        ([complex(-0.0, -1.5), complex(-0.0, -0.0)], complex(-0.0, -1.5)),
        ([complex(math.nan, -0.0), complex(1.0, -1.5)], complex(math.nan, -1.5)),
        ([complex(-0.0, -0.0), complex(-0.0, -0.0), complex(-0.0, math.inf)], complex(-0.0, math.inf)),
    )
    for v, total in cases:
        a = xs.to_backend(xs.sparse_coo_array(np.zeros((1, len(v)), dtype=np.int64), np.asarray(v), (1,)), backend)
        for got, want in ((xs.to_dense(a), total), (a.coalesce().values(), total), (xs.to_dense(xs.atan(a)), np.arctan(total))):
            _same(np.asarray(xs.to_backend(got, "numpy")), np.asarray([want]))


@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_outer_of_sparse_vectors_keeps_the_sign_of_each_product(backend: str) -> None:
    """Every element of an outer product is one product, so its sign of zero is IEEE's (-0.0 * 1.0 is
    -0.0, -0.0 * -3.0 is +0.0): the sparse result is a Kronecker product, not a matmul summing from +0."""
    pytest.importorskip(backend)
    xp = xs.get_backend(backend).load()
    v1, v2 = xp.asarray([-0.0, 2.0], dtype=xp.float64), xp.asarray([1.0, -3.0], dtype=xp.float64)
    s1, s2 = (xs.sparse_coo_array(xp.asarray([[0, 1]]), v, (2,)) for v in (v1, v2))
    got = xs.linalg.outer(s1, s2)
    assert got.layout is xs.sparse_coo and got.nnz == 4
    assert_sparse_equal(got, xp.linalg.outer(v1, v2))


@pytest.mark.parametrize("layout", ["coo", "csr", "bsr"])
def test_generic_kernels_keep_signed_zeros_where_asarray_drops_them(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    # What failed conj and conj_physical in the CuPy conformance run (reproduced with its seeds and this
    # emulation): the fill value of conj(fill 0j) is 0 - 0j, and to_dense made it a 0-d array with CuPy's
    # asarray, which wrote 0 + 0j at every unspecified element.
    import array_api_compat.numpy as anp

    from xsparse.conformance.runner import generic_only

    d = np.array([[1 + 2j, 0, 0, 0], [0, 0, -3j, 0]], dtype=np.complex128)
    f = np.array([[0.0, 2.5, 0.0, 0.0], [0.0, 0.0, 0.0, -1.0]])
    convert = {"coo": xs.to_sparse_coo, "csr": xs.to_sparse_csr, "bsr": lambda x: xs.to_sparse_bsr(x, (2, 2))}[layout]
    asarray_dropping_zero_signs(monkeypatch, anp)
    with generic_only("numpy"):
        for op, x in (("conj", d), ("conj_physical", d), ("negative", f)):
            r = getattr(xs, op)(convert(x))
            _same(r, getattr(np, {"conj_physical": "conj"}.get(op, op))(x))
        # a reduction of nothing but the fill value -0.0 gives -0.0
        m = xs.max(xs.negative(convert(np.zeros((2, 4)))), axis=1)
        _same(m, np.array([-0.0, -0.0]))
    assert math.copysign(1.0, float(xs.asarray(-0.0))) == -1.0


def test_to_backend_keeps_a_0d_signed_zero_where_dlpack_cannot_import(monkeypatch: pytest.MonkeyPatch) -> None:
    # CuPy imports no host memory through DLPack, and its asarray of a 0-d -0.0 gives +0.0: to_backend's
    # host fallback moves a 0-d array through one element (array_api_strict emulating both here)
    import array_api_strict

    def from_dlpack(x: Any, /, **kwargs: Any) -> Any:
        raise BufferError("no host memory through DLPack")

    asarray_dropping_zero_signs(monkeypatch, array_api_strict)
    monkeypatch.setattr(array_api_strict, "from_dlpack", from_dlpack)
    for host in (np.asarray(-0.0), np.asarray(complex(0.0, -0.0)), np.asarray([-0.0, 0.0])):
        moved = xs.to_backend(host, "array_api_strict")
        back = xs.testing.to_numpy(moved)
        assert back.shape == host.shape
        np.testing.assert_array_equal(np.signbit(back.real), np.signbit(host.real))
        np.testing.assert_array_equal(np.signbit(back.imag), np.signbit(host.imag))
