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
