"""Autograd on torch: gradients of the products with respect to the strided operands and the sparse
operand's values, for COO, CSR, CSC, BSR and BSC, checked with ``torch.autograd.gradcheck`` (float64,
small sizes).

A sparse array built from a values tensor that requires grad is differentiable in its values: the
gradient is ``values.grad``, shaped like ``values()`` (the gradient in the operand's own layout, on
its own sparsity pattern). torch differentiates its COO, CSR and CSC products itself; the BSR and BSC
products go through xsparse's ``autograd.Function``, and the generic kernels are differentiable
because they are built from differentiable torch operations. Both paths are checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import xsparse as xs  # noqa: E402
from xsparse import dispatch  # noqa: E402

SPARSE = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
F64 = torch.float64


def sparse(layout: xs.Layout, shape: tuple[int, ...] = (4, 6), seed: int = 0, dtype: Any = F64) -> Any:
    """A sparse array of ``layout`` (2x2 blocks) whose batches share one pattern."""
    rng = np.random.default_rng(seed)
    *batch, m, n = shape
    blocks = rng.random((m // 2, n // 2)) < 0.5
    blocks[0, 0] = True
    mask = np.kron(blocks, np.ones((2, 2), dtype=bool)) & (rng.random((m, n)) < 0.8)
    mask[0, 0] = True
    host = np.where(mask, rng.standard_normal((*batch, m, n)), 0.0)
    if dtype == torch.complex128:
        host = host + 1j * np.where(mask, rng.standard_normal((*batch, m, n)), 0.0)
    return xs.to_sparse(torch.tensor(host), layout=layout, blocksize=(2, 2) if layout.is_blocked else None)


def leaf(a: Any) -> Any:
    """A float64 leaf tensor with the values of ``a`` (``_values()`` for COO: uncoalesced data is fine)."""
    values = a._values() if a.layout is xs.sparse_coo else a.values()
    return values.detach().clone().requires_grad_(True)


def rebuild(a: Any, values: Any) -> Any:
    """``a``'s structure with new values, through the public constructors (what a user writes)."""
    if a.layout is xs.sparse_coo:
        return xs.sparse_coo_array(a._indices(), values, a.shape, is_coalesced=a.is_coalesced())
    return xs.sparse_compressed_array(a.compressed_indices(), a.plain_indices(), values, a.shape, layout=a.layout)


def dense(*shape: int, seed: int = 1, dtype: Any = F64) -> Any:
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, dtype=torch.float64, generator=g)
    if dtype == torch.complex128:
        t = t + 1j * torch.randn(*shape, dtype=torch.float64, generator=g)
    return t.requires_grad_(True)


def generic_kernel(op: str, *layouts: xs.Layout) -> Callable[..., Any]:
    (kernel,) = [k for k in dispatch.resolve(op, layouts, "torch") if k.backend is None][:1]
    xp = xs.get_backend("torch").namespace()
    return lambda *args: kernel.func(xp, *args)


def check(fn: Callable[..., Any], *inputs: Any) -> None:
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4, fast_mode=True)


@pytest.mark.parametrize("layout", SPARSE, ids=str)
@pytest.mark.parametrize("path", ["dispatched", "generic"])
def test_matmul_sparse_strided(layout: xs.Layout, path: str) -> None:
    a = sparse(layout)
    matmul = xs.matmul if path == "dispatched" else generic_kernel("matmul", layout, xs.strided)
    check(lambda v, b: matmul(rebuild(a, v), b), leaf(a), dense(6, 3))
    check(lambda v, b: matmul(rebuild(a, v), b), leaf(a), dense(6))


@pytest.mark.parametrize("layout", SPARSE, ids=str)
@pytest.mark.parametrize("path", ["dispatched", "generic"])
def test_matmul_strided_sparse(layout: xs.Layout, path: str) -> None:
    a = sparse(layout)
    matmul = xs.matmul if path == "dispatched" else generic_kernel("matmul", xs.strided, layout)
    check(lambda x, v: matmul(x, rebuild(a, v)), dense(3, 4), leaf(a))
    check(lambda x, v: matmul(x, rebuild(a, v)), dense(4), leaf(a))


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_coo], ids=str)
def test_batched_products(layout: xs.Layout) -> None:
    """Batched compressed arrays go through the block-diagonal fold (COO through torch.bmm)."""
    a = sparse(layout, (2, 4, 6))
    check(lambda v, b: xs.matmul(rebuild(a, v), b), leaf(a), dense(2, 6, 3))
    check(lambda v, b: xs.bmm(rebuild(a, v), b), leaf(a), dense(2, 6, 2))


@pytest.mark.parametrize("layout", SPARSE, ids=str)
def test_mm_mv_addmm(layout: xs.Layout) -> None:
    a = sparse(layout)
    check(lambda v, b: xs.mm(rebuild(a, v), b), leaf(a), dense(6, 2))
    check(lambda v, b: xs.mv(rebuild(a, v), b), leaf(a), dense(6))
    check(lambda c, v, b: xs.addmm(c, rebuild(a, v), b, beta=0.5, alpha=2.0), dense(4, 2, seed=3), leaf(a), dense(6, 2))


@pytest.mark.parametrize("layout", SPARSE, ids=str)
def test_sampled_addmm(layout: xs.Layout) -> None:
    """The gradient of the sampled product reaches the mask's values and both factors (a sparse result:
    its values are the output)."""
    a = sparse(layout)
    check(lambda v, x, y: xs.sampled_addmm(rebuild(a, v), x, y, beta=0.5, alpha=2.0)._vals, leaf(a), dense(4, 3), dense(3, 6, seed=2))


def test_reduce_and_sparse_products() -> None:
    a = sparse(xs.sparse_csr)
    check(lambda v, b: xs.mm(rebuild(a, v), b, reduce="sum"), leaf(a), dense(6, 2))
    check(lambda v, b: xs.mm(rebuild(a, v), b, reduce="mean"), leaf(a), dense(6, 2))
    c = sparse(xs.sparse_coo)
    check(lambda v, w: xs.to_dense(xs.matmul(rebuild(c, v), rebuild(c, w).mT)), leaf(c), leaf(c))
    b = sparse(xs.sparse_bsr)
    check(lambda v, w: xs.to_dense(xs.matmul(rebuild(b, v), rebuild(b, w).mT)), leaf(b), leaf(b))


def test_coo_products() -> None:
    """smm, hspmm and sspaddmm: torch's kernels return COO values without autograd, so with gradients the
    generic kernels run."""
    a = sparse(xs.sparse_coo)
    s = sparse(xs.sparse_coo, (4, 2), seed=5)
    check(lambda v, b: xs.to_dense(xs.smm(rebuild(a, v), b)), leaf(a), dense(6, 2))
    check(lambda v, b: xs.hspmm(rebuild(a, v), b)._values(), leaf(a), dense(6, 2))
    check(lambda w, v, b: xs.to_dense(xs.sspaddmm(rebuild(s, w), rebuild(a, v), b, beta=2.0)), leaf(s), leaf(a), dense(6, 2))


@pytest.mark.parametrize("path", ["dispatched", "generic"])
def test_coalesce(path: str) -> None:
    """Duplicates and an inversion: the native kernel (torch's coalesce) and the generic sort both pass
    gradients to the values; indices that already increase keep the values themselves."""
    idx = torch.tensor([[1, 0, 1, 0], [2, 0, 2, 1]])
    coalesce = xs.coalesce if path == "dispatched" else generic_kernel("coalesce", xs.sparse_coo)
    check(lambda v: xs.to_dense(coalesce(xs.sparse_coo_array(idx, v, (2, 3)))), dense(4))
    check(lambda v: coalesce(xs.sparse_coo_array(idx, v, (2, 3)))._values(), dense(4))
    increasing = torch.tensor([[0, 0, 1], [0, 1, 2]])
    check(lambda v: coalesce(xs.sparse_coo_array(increasing, v, (2, 3)))._values(), dense(3))


@pytest.mark.parametrize("layout", [xs.sparse_bsr, xs.sparse_bsc, xs.sparse_csr], ids=str)
def test_complex_gradients(layout: xs.Layout) -> None:
    a = sparse(layout, dtype=torch.complex128)
    check(lambda v, b: xs.matmul(rebuild(a, v), b), leaf(a), dense(6, 2, dtype=torch.complex128))
    check(lambda x, v: xs.matmul(x, rebuild(a, v)), dense(3, 4, dtype=torch.complex128), leaf(a))


@pytest.mark.parametrize("layout", SPARSE, ids=str)
def test_spsolve(layout: xs.Layout) -> None:
    rng = np.random.default_rng(4)
    host = rng.standard_normal((6, 6)) * (rng.random((6, 6)) < 0.4) + np.diag(np.full(6, 4.0))
    a = xs.to_sparse(torch.tensor(host), layout=layout, blocksize=(2, 2) if layout.is_blocked else None)
    check(lambda v, b: xs.spsolve(rebuild(a, v), b), leaf(a), dense(6, 2))
    check(lambda v, b: xs.spsolve(rebuild(a, v), b, left=False), leaf(a), dense(6))


@pytest.mark.parametrize("layout", SPARSE, ids=str)
def test_values_gradient_is_the_sampled_dense_gradient(layout: xs.Layout) -> None:
    """``values.grad`` is the dense gradient ``G @ B.T`` read at the operand's own elements."""
    a = sparse(layout)
    v, b = leaf(a), dense(6, 3)
    g = torch.randn(4, 3, dtype=F64)
    xs.matmul(rebuild(a, v), b).backward(g)
    assert v.grad is not None and v.grad.shape == v.shape
    expected = rebuild(a, torch.ones_like(v))
    pattern = xs.to_dense(expected) != 0
    full = (g @ b.detach().T) * pattern
    assert torch.allclose(xs.to_dense(rebuild(a, v.grad)), full)
    assert torch.allclose(b.grad, xs.to_dense(rebuild(a, v.detach())).T @ g)


def test_strided_operands_only() -> None:
    """A sparse operand without grad still passes gradients to the strided one (torch's smm excepted)."""
    a = sparse(xs.sparse_bsr)
    b = dense(6, 3)
    xs.matmul(a, b).sum().backward()
    assert b.grad is not None and torch.allclose(b.grad, xs.to_dense(a).T @ torch.ones(4, 3, dtype=F64))


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("coalesced", [True, False])
def test_coo_reduction_over_sparse_dimensions(op: str, coalesced: bool) -> None:
    """The torch COO reductions (scatter_reduce by the kept indices) are differentiable in the values,
    as the dense reduction is: gradcheck over axis 0 (a sort of the keys) and axis 2 (runs of them)."""
    a = sparse(xs.sparse_coo, shape=(3, 4, 6), seed=2)
    if not coalesced:
        # the entries in reverse order: the grouping sorts them
        a = xs.sparse_coo_array(a._indices().flip(1), a._values().flip(0), a.shape)
    reduce = getattr(xs, op)
    for axis in (0, 2):
        check(lambda v: xs.to_dense(reduce(rebuild(a, v), axis=axis)), leaf(a))



# -- gradients through torch's COO kernels and conversions ----------------------------------------------
# The oracle is torch.autograd on the equivalent dense computation: the sparse operand made dense by
# torch's own (differentiable) to_dense of a torch sparse tensor on the same values, then the dense
# operation. values.grad must be that gradient read at the operand's elements. These paths once built
# their results from torch's detached _values() (no gradient, silently), or ran torch kernels whose
# backward raises.

TORCH_LAYOUTS = {
    xs.sparse_csr: torch.sparse_csr,
    xs.sparse_csc: torch.sparse_csc,
    xs.sparse_bsr: torch.sparse_bsr,
    xs.sparse_bsc: torch.sparse_bsc,
}
COMPRESSED = list(TORCH_LAYOUTS)


def torch_dense(a: Any, values: Any) -> Any:
    """``a``'s structure with ``values``, made dense by torch's own to_dense (COO or 2-D: torch has no
    backward for batched compressed tensors)."""
    if a.layout is xs.sparse_coo:
        return torch.sparse_coo_tensor(a._indices(), values, a.shape, check_invariants=True).to_dense()
    return torch.sparse_compressed_tensor(
        a.compressed_indices(), a.plain_indices(), values, a.shape, layout=TORCH_LAYOUTS[a.layout], check_invariants=True
    ).to_dense()


def pattern(a: Any) -> Any:
    """Where ``a`` has an element (explicit zeros of a block included), as a dense bool tensor."""
    return torch_dense(a, torch.ones_like(leaf(a))) != 0


def grads(fn: Callable[..., Any], g: Any, *inputs: Any) -> list[Any]:
    """The gradients of ``sum(g * fn(*inputs))`` (its real part, for complex results) with respect to
    fresh leaves holding ``inputs``."""
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    loss = (fn(*leaves) * g).sum()
    (loss.real if loss.is_complex() else loss).backward()
    assert all(x.grad is not None for x in leaves), "no gradient reached an input"
    return [x.grad for x in leaves]


def assert_same_grads(fn: Callable[..., Any], dense_fn: Callable[..., Any], *inputs: Any) -> None:
    """xsparse's ``fn`` and torch's dense ``dense_fn`` give every input the same (strided) gradient."""
    out = dense_fn(*inputs)
    g = torch.randn(out.shape, dtype=out.dtype if out.is_complex() else F64, generator=torch.Generator().manual_seed(7))
    for got, want in zip(grads(fn, g, *inputs), grads(dense_fn, g, *inputs)):
        assert got.layout == torch.strided and got.shape == want.shape
        assert torch.allclose(got, want, atol=1e-12), (got, want)


@pytest.mark.parametrize("layout", COMPRESSED, ids=str)
def test_to_sparse_coo_gradient(layout: xs.Layout) -> None:
    """Compressed -> COO (torch's to_sparse, sorted for CSC, BSR and BSC) passes gradients to the values."""
    a = sparse(layout)
    assert_same_grads(lambda v: xs.to_dense(xs.to_sparse_coo(rebuild(a, v))), lambda v: torch_dense(a, v), leaf(a))
    check(lambda v: xs.to_sparse_coo(rebuild(a, v)).values(), leaf(a))


def test_dense_to_sparse_coo_gradient() -> None:
    """Dense -> COO with fill value 0: torch's own gradient, the output gradient at the nonzeros."""
    x = xs.to_dense(sparse(xs.sparse_coo))
    assert_same_grads(lambda d: xs.to_dense(xs.to_sparse_coo(d)), lambda d: d.to_sparse().to_dense(), x)


SHAPE_OPS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "broadcast_to": (lambda x: xs.broadcast_to(x, (3, 4, 6)), lambda d: torch.broadcast_to(d, (3, 4, 6))),
    "permute_dims": (lambda x: xs.permute_dims(x, (1, 0)), lambda d: d.permute(1, 0)),
    "flip": (lambda x: xs.flip(x, axis=1), lambda d: d.flip(1)),
    "roll": (lambda x: xs.roll(x, 1, axis=1), lambda d: d.roll(1, 1)),
    "tile": (lambda x: xs.tile(x, (2, 1)), lambda d: d.tile(2, 1)),
    "concat": (lambda x: xs.concat([x, x], axis=1), lambda d: torch.cat([d, d], 1)),
    "stack": (lambda x: xs.stack([x, x]), lambda d: torch.stack([d, d])),
}


@pytest.mark.parametrize("layout", SPARSE, ids=str)
@pytest.mark.parametrize("op", list(SHAPE_OPS))
def test_shape_functions_gradient(layout: xs.Layout, op: str) -> None:
    """The shape functions pass gradients to the values, without a warning (the suite turns warnings into
    errors): broadcast_to of a compressed array copied its components with torch's asarray(copy=True),
    which warns about the values' autograd flag."""
    a = sparse(layout)
    fn, dense_fn = SHAPE_OPS[op]
    assert_same_grads(lambda v: xs.to_dense(fn(rebuild(a, v))), lambda v: dense_fn(torch_dense(a, v)), leaf(a))


@pytest.mark.parametrize("layout", SPARSE, ids=str)
@pytest.mark.parametrize("op", ["multiply", "add", "subtract"])
def test_elementwise_sparse_sparse_gradient(layout: xs.Layout, op: str) -> None:
    """torch's COO mul, and the generic kernels, which convert CSC, BSR and BSC operands to COO."""
    a = sparse(layout)
    fn, dense_fn = getattr(xs, op), {"multiply": torch.mul, "add": torch.add, "subtract": torch.sub}[op]
    assert_same_grads(
        lambda v, w: xs.to_dense(fn(rebuild(a, v), rebuild(a, w))),
        lambda v, w: dense_fn(torch_dense(a, v), torch_dense(a, w)),
        leaf(a), leaf(a) * 2 + 1,
    )  # fmt: skip


@pytest.mark.parametrize("layout", SPARSE, ids=str)
def test_multiply_sparse_strided_gradient(layout: xs.Layout) -> None:
    """Both operands get their gradients, either way round, the strided one a strided gradient: torch's
    CSR * strided backward raises, and its COO * strided one gives the strided operand a COO gradient."""
    a = sparse(layout)
    d = dense(4, 6)
    assert_same_grads(lambda v, d: xs.to_dense(xs.multiply(rebuild(a, v), d)), lambda v, d: torch_dense(a, v) * d, leaf(a), d)
    assert_same_grads(lambda v, d: xs.to_dense(xs.multiply(d, rebuild(a, v))), lambda v, d: d * torch_dense(a, v), leaf(a), d)
    # a constant strided operand leaves torch's own kernels to run (COO, CSR), and they pass the values' gradient
    c = d.detach()
    assert_same_grads(lambda v: xs.to_dense(xs.multiply(rebuild(a, v), c)), lambda v: torch_dense(a, v) * c, leaf(a))


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [0, 1])
def test_coo_softmax_gradient(log: bool, axis: int) -> None:
    """torch.sparse.softmax's semantics: the unspecified elements are -inf, and the result is read at the
    specified ones (the dense oracle masks both ways)."""
    a = sparse(xs.sparse_coo, seed=3)
    where = pattern(a)
    fn, dense_fn = (xs.log_softmax, torch.log_softmax) if log else (xs.softmax, torch.softmax)

    def masked(v: Any) -> Any:
        # a row (or column) without elements is all -inf and gives NaN, which the mask drops
        return torch.where(where, dense_fn(torch_dense(a, v).masked_fill(~where, -torch.inf), axis), 0.0)

    assert_same_grads(lambda v: torch.where(where, xs.to_dense(fn(rebuild(a, v), axis=axis)), 0.0), masked, leaf(a))


@pytest.mark.parametrize("coalesced", [True, False])
@pytest.mark.parametrize(("axis", "picks"), [(0, [0, 2, 2]), (1, [5, 0, 2, 2])])
def test_coo_take_gradient(coalesced: bool, axis: int, picks: list[int]) -> None:
    """torch's index_select of a COO tensor has no backward: with gradients the generic take runs."""
    a = sparse(xs.sparse_coo, seed=2)
    if not coalesced:
        a = xs.sparse_coo_array(a._indices().flip(1), a._values().flip(0), a.shape)
    i = torch.tensor(picks)
    assert_same_grads(
        lambda v: xs.to_dense(xs.take(rebuild(a, v), i, axis=axis)), lambda v: torch.index_select(torch_dense(a, v), axis, i), leaf(a)
    )


@pytest.mark.parametrize("layout", SPARSE, ids=str)
def test_sparse_mask_gradient(layout: xs.Layout) -> None:
    """The strided operand's gradient is the output gradient at the mask's elements: torch's own with a
    COO mask, which the native kernel computes; torch's backward raises with a compressed mask."""
    a = sparse(layout)
    mask = torch_dense(a, torch.ones_like(leaf(a))).to_sparse()
    assert_same_grads(lambda d: xs.to_dense(xs.sparse_mask(d, a)), lambda d: d.sparse_mask(mask).to_dense(), dense(4, 6))


@pytest.mark.parametrize("source", [xs.sparse_csr, xs.sparse_csc], ids=str)
@pytest.mark.parametrize("target", [xs.sparse_bsr, xs.sparse_bsc], ids=str)
def test_unblocked_to_blocked_gradient(source: xs.Layout, target: xs.Layout) -> None:
    """CSR/CSC -> BSR/BSC: the backward of torch's conversion raises; the generic conversion runs."""
    a = sparse(source)
    convert = lambda v: xs.to_sparse(rebuild(a, v), layout=target, blocksize=(2, 2))  # noqa: E731
    assert_same_grads(lambda v: xs.to_dense(convert(v)), lambda v: torch_dense(a, v), leaf(a))
    check(lambda v: convert(v).values(), leaf(a))


@pytest.mark.parametrize("layout", COMPRESSED, ids=str)
@pytest.mark.parametrize("op", ["to_dense", "sin", "multiply"])
def test_batched_to_dense_gradient(layout: xs.Layout, op: str) -> None:
    """Batched compressed arrays: the backward of torch's to_dense raises for them; assignment into zeros
    runs. The oracle makes each batch dense on its own (torch's 2-D to_dense is differentiable)."""
    a = sparse(layout, (2, 4, 6))
    fn = {"to_dense": lambda s: s, "sin": xs.sin, "multiply": lambda s: xs.multiply(s, 2.0)}[op]
    dense_fn = {"to_dense": lambda d: d, "sin": torch.sin, "multiply": lambda d: d * 2.0}[op]
    batches = [
        xs.sparse_compressed_array(a.compressed_indices()[i], a.plain_indices()[i], a.values()[i], (4, 6), layout=layout)
        for i in range(2)
    ]
    assert_same_grads(
        lambda v: xs.to_dense(fn(rebuild(a, v))),
        lambda v: dense_fn(torch.stack([torch_dense(b, v[i]) for i, b in enumerate(batches)])),
        leaf(a),
    )


# -- complex values --------------------------------------------------------------------------------------
# torch has no autograd for a compressed tensor of complex values (sparse_compressed_tensor, _to_sparse)
# nor for scatter_reduce of them ("does not support automatic differentiation for outputs with complex
# dtype"): the native kernels built on them decline while such values require grad, and the generic
# kernels run. The oracle cannot be torch's to_dense either; it scatters the values into zeros.

C128 = torch.complex128


def scatter_dense(a: Any, values: Any) -> Any:
    """``a``'s structure with ``values`` made dense by a differentiable scatter (2-D or COO ``a``): each
    element's position is read from torch's own to_dense of its number."""
    number = torch.arange(1, values.numel() + 1, dtype=F64).reshape(values.shape)
    where = torch_dense(a, number).reshape(-1)  # 0 at the unspecified elements
    at = torch.nonzero(where).reshape(-1)
    out = torch.zeros(where.shape, dtype=values.dtype)
    return out.index_put((at,), values.reshape(-1)[where[at].long() - 1]).reshape(a.shape)


S = dense(4, 6, seed=5, dtype=C128).detach()
# each: the xsparse computation on the sparse array A (and the strided d, where the third item says
# so), its dense counterpart on D, and whether d is an input
COMPLEX_OPS: dict[str, tuple[Callable[..., Any], Callable[..., Any], bool]] = {
    "to_dense": (lambda A, d: A, lambda D, d: D, False),
    "to_coo": (lambda A, d: xs.to_sparse_coo(A), lambda D, d: D, False),
    "to_csr": (lambda A, d: xs.to_sparse_csr(A), lambda D, d: D, False),
    "to_csc": (lambda A, d: xs.to_sparse_csc(A), lambda D, d: D, False),
    "to_bsr": (lambda A, d: xs.to_sparse_bsr(A, (2, 2)), lambda D, d: D, False),
    "to_bsc": (lambda A, d: xs.to_sparse_bsc(A, (2, 2)), lambda D, d: D, False),
    "scalar": (lambda A, d: A * (2 - 1j), lambda D, d: D * (2 - 1j), False),
    "add": (lambda A, d: A + A * 1j, lambda D, d: D + D * 1j, False),
    "multiply": (lambda A, d: A * A, lambda D, d: D * D, False),
    "add_strided": (lambda A, d: xs.add(A, d), lambda D, d: D + d, True),
    "strided_subtract": (lambda A, d: xs.subtract(d, A), lambda D, d: d - D, True),
    "multiply_strided": (lambda A, d: xs.multiply(d, A), lambda D, d: d * D, True),
    "multiply_constant": (lambda A, d: xs.multiply(A, S), lambda D, d: D * S, False),
    "sin": (lambda A, d: xs.sin(A), lambda D, d: torch.sin(D), False),
    "abs": (lambda A, d: xs.abs(A), lambda D, d: D.abs(), False),
    "conj": (lambda A, d: xs.conj(A), lambda D, d: D.conj(), False),
    "sum": (lambda A, d: xs.sum(A), lambda D, d: D.sum(), False),
    "sum_0": (lambda A, d: xs.sum(A, axis=0), lambda D, d: D.sum(0), False),
    "sum_1": (lambda A, d: xs.sum(A, axis=1), lambda D, d: D.sum(1), False),
    "mean_1": (lambda A, d: xs.mean(A, axis=1), lambda D, d: D.mean(1), False),
    "prod_0": (lambda A, d: xs.prod(A, axis=0), lambda D, d: D.prod(0), False),
    "getitem": (lambda A, d: A[1:3], lambda D, d: D[1:3], False),
    "mT": (lambda A, d: A.mT, lambda D, d: D.mT, False),
    "permute_dims": (lambda A, d: xs.permute_dims(A, (1, 0)), lambda D, d: D.T, False),
    "matmul": (lambda A, d: xs.matmul(A, d.mT), lambda D, d: D @ d.mT, True),
    "rmatmul": (lambda A, d: xs.matmul(d.mT, A), lambda D, d: d.mT @ D, True),
    "sparse_matmul": (lambda A, d: xs.matmul(A, A.mT), lambda D, d: D @ D.mT, False),
}


def _strided(x: Any) -> Any:
    return xs.to_dense(x) if isinstance(x, xs.SparseArray) else x


@pytest.mark.parametrize("layout", SPARSE, ids=str)
@pytest.mark.parametrize("op", list(COMPLEX_OPS))
def test_complex_values_gradient(layout: xs.Layout, op: str) -> None:
    """Complex values that require grad get the gradient of the dense computation, in every layout."""
    a = sparse(layout, dtype=C128)
    fn, dense_fn, with_d = COMPLEX_OPS[op]
    d = dense(4, 6, seed=6, dtype=C128)
    if with_d:
        assert_same_grads(lambda v, d: _strided(fn(rebuild(a, v), d)), lambda v, d: dense_fn(scatter_dense(a, v), d), leaf(a), d)
    else:
        assert_same_grads(lambda v: _strided(fn(rebuild(a, v), None)), lambda v: dense_fn(scatter_dense(a, v), None), leaf(a))


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_bsc], ids=str)
def test_complex_values_gradcheck(layout: xs.Layout) -> None:
    """gradcheck of complex values (their Wirtinger derivatives) through conversions, elementwise
    functions and a reduction over one axis."""
    a = sparse(layout, dtype=C128)
    check(lambda v: xs.to_dense(xs.sum(xs.sin(rebuild(a, v)) * rebuild(a, v), axis=0)), leaf(a))
    check(lambda v: xs.to_sparse_coo(rebuild(a, v).mT * 1j).values(), leaf(a))


def test_complex_csr_to_dense_backward() -> None:
    """The reported case: to_dense of a complex CSR array whose values require grad."""
    d = torch.tensor([[1 + 1j, 0, 2, 0], [0, 3j, 0, -4], [5, 0, 0, 6], [0, 0, 7j, 0]], dtype=C128)
    a = xs.to_sparse(d, layout=xs.sparse_csr)
    v = leaf(a)
    xs.to_dense(rebuild(a, v)).abs().sum().backward()
    assert v.grad is not None and torch.allclose(v.grad, v.detach() / v.detach().abs())


@pytest.mark.parametrize("part", ["real", "imag"])
def test_complex_parts_backward_without_warnings(part: str) -> None:
    # the parts of a complex array are views that a contiguous copy follows; the copy must not warn about
    # the values' autograd flag (the suite turns warnings into errors)
    d = torch.tensor([[1 + 1j, 0, 2, 0], [0, 3j, 0, -4], [5, 0, 0, 6], [0, 0, 7j, 0]], dtype=C128)
    a = xs.to_sparse(d, layout=xs.sparse_csr)
    v = leaf(a)
    xs.to_dense(getattr(xs, part)(rebuild(a, v))).sum().backward()
    assert v.grad is not None and torch.equal(v.grad, torch.full_like(v.grad, 1.0 if part == "real" else 1j))


def test_complex_decline_only_with_grad() -> None:
    """The native kernels decline complex values only while they take part in autograd: without grad, or
    under no_grad, torch's own kernels run as before."""
    (native, *_) = [k for k in dispatch.resolve("multiply", (xs.sparse_csr, xs.sparse_csr), "torch") if k.backend == "torch"]
    xp = xs.get_backend("torch").namespace()
    a = sparse(xs.sparse_csr, dtype=C128)
    with_grad = rebuild(a, leaf(a))
    assert native.supports is not None
    assert "complex values, and the values require grad" in (native.supports(xp, with_grad, with_grad) or "")
    assert native.supports(xp, a, a) is None
    with torch.no_grad():
        assert native.supports(xp, with_grad, with_grad) is None


@pytest.mark.parametrize("layout", [xs.strided, *SPARSE], ids=str)
def test_clone_copies_and_keeps_the_gradient(layout: xs.Layout) -> None:
    # the generic clone (xp.asarray(x, copy=True)) warned on torch for values that require grad; torch's
    # kernel copies with Tensor.clone, gradients flowing back as through torch's own clone
    if layout is xs.strided:
        x = dense(4, 6)
        c = xs.clone(x)
        assert c.data_ptr() != x.data_ptr()
        check(lambda t: xs.clone(t), x)
        return
    a = sparse(layout)
    values = leaf(a)
    b = xs.clone(rebuild(a, values))
    assert b.layout is layout and b._vals.data_ptr() != values.data_ptr()
    check(lambda v: xs.clone(rebuild(a, v))._vals, values)


ZERO_D_OPERATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "a + s": lambda a, s: a + s,
    "s - a": lambda a, s: s - a,
    "a - mean(a)": lambda a, s: a - xs.mean(a) * s,
    "exp(a - max(a))": lambda a, s: xs.exp(a - xs.max(a)) * s,
    "maximum(a, s)": lambda a, s: xs.maximum(a, s),
    "clip(a, min=s)": lambda a, s: xs.clip(a, min=s),
    "s / (a + 3)": lambda a, s: s / (a + 3),
    "hypot(a, s)": lambda a, s: xs.hypot(a, s),
    "logaddexp(a, s)": lambda a, s: xs.logaddexp(a, s),
    "cos(a) * s": lambda a, s: xs.cos(a) * s,
    "a * s": lambda a, s: a * s,
    "a / s": lambda a, s: a / s,
}


@pytest.mark.filterwarnings("error::UserWarning")  # torch's "Converting a tensor with requires_grad=True to a scalar"
@pytest.mark.parametrize("layout", SPARSE, ids=str)
@pytest.mark.parametrize("name", ZERO_D_OPERATIONS)
def test_a_zero_d_operand_that_requires_grad_keeps_its_gradient(layout: xs.Layout, name: str) -> None:
    # a 0-d tensor acted as a scalar: the fill value it gave (f + s) became a Python number, and the
    # gradient of the unspecified elements was lost (s.grad 2 instead of 24 for a + s, the values' of
    # a - mean(a) wrong too); it acts as an array now, the result strided where its fill value would
    # depend on s, sparse where it stays 0 (a * s, a / s)
    op = ZERO_D_OPERATIONS[name]
    a = sparse(layout)
    s = torch.tensor(0.75, dtype=F64, requires_grad=True)
    check(lambda v, s: xs.to_dense(r) if isinstance(r := op(rebuild(a, v), s), xs.SparseArray) else r, leaf(a), s)
    # against the dense computation of the same leaves
    v, s2 = leaf(a), s.detach().clone().requires_grad_(True)
    w = torch.linspace(0.5, 1.5, a.shape[0] * a.shape[1], dtype=F64).reshape(a.shape)
    r = op(rebuild(a, v), s)
    ((xs.to_dense(r) if isinstance(r, xs.SparseArray) else r) * w).sum().backward()
    vd = leaf(a)
    (op(xs.to_dense(rebuild(a, vd)), s2) * w).sum().backward()
    torch.testing.assert_close(v.grad, vd.grad)
    torch.testing.assert_close(s.grad, s2.grad)
    if name in ("a * s", "a / s"):
        assert isinstance(r, xs.SparseArray)  # the fill value stays 0: the product keeps the structure


def test_batched_csr_sampled_addmm_backward_runs_on_the_generic_kernel() -> None:
    # torch's sampled_addmm computed the batched product, but its backward raised ("coo_to_sparse_csr:
    # ... sparse_dim()!=2 is not supported"): the torch kernel declines where a gradient is needed
    a = sparse(xs.sparse_csr, (2, 4, 6))
    check(lambda v, x, y: xs.to_dense(xs.sampled_addmm(rebuild(a, v), x, y, beta=0.5)), leaf(a), dense(2, 4, 3), dense(2, 3, 6, seed=2))


@pytest.mark.filterwarnings("error::UserWarning")
def test_reductions_of_tensors_that_require_grad_warn_nothing() -> None:
    # torch.asarray of a tensor that requires grad warns that its default changed (torch 2.13): results
    # of the strided reductions are returned as they are
    t = dense(3, 4)
    for r in (xs.mean(t), xs.var(t, axis=0), xs.std(t, axis=1), xs.sum(t), xs.max(t, axis=0)):
        assert r.requires_grad


def test_add_and_subtract_of_csr_and_a_non_contiguous_tensor() -> None:
    # torch adds a CSR tensor into a contiguous tensor only ("out argument must be contiguous")
    a = xs.to_sparse_csr(torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]], dtype=F64))
    b = torch.arange(6, dtype=F64).reshape(3, 2).mT
    d = xs.to_dense(a)
    for op in (xs.add, xs.subtract):
        torch.testing.assert_close(op(a, b), op(d, b))
        torch.testing.assert_close(op(b, a), op(b, d))


def test_comparisons_with_a_zero_d_tensor_that_requires_grad_stay_sparse() -> None:
    # a bool result carries no gradient: the 0-d operand acts as a scalar there, the result sparse
    a = sparse(xs.sparse_csr)
    s = torch.tensor(0.5, dtype=F64, requires_grad=True)
    for r in (a > s, xs.equal(a, s), a == xs.max(a), xs.logical_and(a, s)):
        assert isinstance(r, xs.SparseArray)
    torch.testing.assert_close(xs.to_dense(a > s), xs.to_dense(a) > s)


def test_var_of_too_few_elements_keeps_the_graph() -> None:
    # N - correction <= 0 is NaN, computed from x: a graph through x stays (backward runs, as torch's var's)
    x = dense(1, 3)
    for op in (xs.var, xs.std):
        r = op(x, axis=0, correction=1)
        assert r.requires_grad and bool(torch.isnan(r).all())
        r.sum().backward()



# each: (the product of a sparse array, the same product of a dense tensor)
HALF_PRODUCTS: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "matmul": (xs.matmul, torch.matmul),
    "mv": ((lambda a, b: xs.matmul(a, b[:, 0])), (lambda a, b: a @ b[:, 0])),
    "addmm": ((lambda a, b: xs.addmm(torch.ones(3, 2, dtype=b.dtype), a, b, beta=0.5)), (lambda a, b: 0.5 + a @ b)),
    "strided @ sparse": ((lambda a, b: xs.matmul(b.mT, a.mT)), (lambda a, b: b.mT @ a.mT)),
    "hspmm": ((lambda a, b: xs.to_dense(xs.hspmm(xs.to_sparse_coo(a), b))), torch.matmul),
    "batched": ((lambda a, b: xs.matmul(xs.stack([a, 2 * a]), b)), (lambda a, b: torch.stack([a, 2 * a]) @ b)),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr], ids=str)
@pytest.mark.parametrize("op", list(HALF_PRODUCTS))
def test_half_precision_products_backward(dtype: Any, layout: xs.Layout, op: str) -> None:
    # torch has no backward for the float32 cast of a COO tensor, which the COO products add in: the
    # values are widened before the tensor is built
    idx = torch.tensor([[0, 1, 2, 2], [1, 0, 3, 1]])
    v = torch.tensor([1.0, -2.0, 3.0, 0.5], dtype=dtype, requires_grad=True)
    b = torch.tensor([[1.0, 2.0], [-1.0, 0.5], [3.0, 1.0], [0.25, -2.0]], dtype=dtype)
    a = xs.sparse_coo_array(idx, v, (3, 4))
    sparse_product, dense_product = HALF_PRODUCTS[op]
    sparse_product(a if layout is xs.sparse_coo else xs.to_sparse_csr(a), b).float().sum().backward()
    w = v.detach().to(F64).requires_grad_(True)
    dense_product(torch.zeros(3, 4, dtype=F64).index_put((idx[0], idx[1]), w, accumulate=True), b.to(F64)).sum().backward()
    assert v.grad is not None and v.grad.dtype == dtype
    torch.testing.assert_close(v.grad.to(F64), w.grad)


EMPTY_PRODUCTS: dict[str, Callable[[Any, Any], Any]] = {
    "sparse @ strided": lambda a, x: xs.matmul(a, x[:, :2]),
    "strided @ sparse": lambda a, x: xs.matmul(x[:2, :4], a),
    "linear": lambda a, x: xs.linear(x[:3, :], a),
    "sampled_addmm": lambda a, x: xs.sampled_addmm(a, x[:4, :3], x[:3, :]).values(),
}


@pytest.mark.parametrize("layout", SPARSE, ids=str)
@pytest.mark.parametrize("op", list(EMPTY_PRODUCTS))
def test_products_of_an_empty_operand_keep_the_strided_operands_gradient(layout: xs.Layout, op: str) -> None:
    # a product with a sparse operand that stores nothing is 0; its strided operand still gets the zero
    # gradient of the dense product (a bare zeros result left it out of the graph: backward raised)
    a = xs.to_sparse(torch.zeros(4, 6, dtype=F64), layout=layout, blocksize=(2, 2) if layout.is_blocked else None)
    x = torch.randn(6, 6, dtype=F64, requires_grad=True)
    r = EMPTY_PRODUCTS[op](a, x)
    r.sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, torch.zeros_like(x))


@pytest.mark.filterwarnings("error::UserWarning")  # torch.asarray's "unspecified requires_grad now defaults to ..."
def test_to_backend_with_a_device_keeps_the_gradient() -> None:
    t = dense(3)
    moved = xs.to_backend(2 * t, "torch", device="cpu")
    moved.sum().backward()
    torch.testing.assert_close(t.grad, torch.full((3,), 2.0, dtype=F64))
