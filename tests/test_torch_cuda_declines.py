"""The torch backend's kernels on CUDA tensors: what torch's CUDA kernels lack is declined with a reason
(so the generic kernel runs on the device), and what they have agrees with dense torch on the device and
with the generic kernels.

The first part runs everywhere: the reasons are read off the kernels' ``supports`` functions for
*fake* CUDA tensors (``torch._subclasses.FakeTensorMode`` makes tensors that carry a CUDA device and no
data, on a machine without a GPU). A fake tensor refuses to be read, so these tests also show that a
kernel decides on the device before it reads any data (no host copy, no wait for the device).

The second part needs a CUDA device and is skipped without one: each native kernel on Hypothesis inputs
placed on the device, against dense torch on the device and the generic kernel, and every public
function through the dispatcher, which must land on a kernel that runs on the device.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

if importlib.util.find_spec("torch") is None:  # pragma: no cover - torch is a test dependency
    pytest.skip("torch is not installed", allow_module_level=True)

import torch
from hypothesis import given
from hypothesis import strategies as st
from test_linalg import (
    FEW,
    SOME,
    close,
    concrete,
    generic_twin,
    host_values,
    matmul_operands,
    quiet,
    run_kernel,
    sparse_operands,
)
from torch._subclasses.fake_tensor import FakeTensorMode

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse.backends.torch.conversion import on_cuda
from xsparse.formats import COOArray, CompressedArray
from xsparse.formats._spec import Target
from xsparse.testing import check_invariants, to_numpy

TORCH = xs.get_backend("torch")
XP = TORCH.load()
HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device (torch.cuda.is_available() is False)")


def kernel(op: str, name: str) -> dispatch.Kernel:
    """The torch kernel ``name`` of ``op`` (one function may be registered for several signatures, with
    one ``supports``)."""
    found = [k for k in xs.kernels(op) if k.backend == "torch" and k.name == name]
    assert found and len({k.supports for k in found}) == 1, found
    return found[0]


def reason(op: str, name: str, *args: Any) -> str | None:
    k = kernel(op, name)
    assert k.supports is not None
    return k.supports(XP, *args)


# -- fake CUDA operands ------------------------------------------------------------------------------------


@contextmanager
def fake_cuda() -> Iterator[None]:
    # torch warns that the invariant checks of the sparse tensors built here are implicit
    with FakeTensorMode(), torch.sparse.check_sparse_tensor_invariants(enable=False):  # type: ignore[no-untyped-call]
        yield


def dense(shape: tuple[int, ...], dtype: torch.dtype = torch.float64, device: str = "cuda") -> torch.Tensor:
    return torch.zeros(shape, dtype=dtype, device=device)


def compressed(
    layout: xs.Layout, shape: tuple[int, int], dtype: torch.dtype = torch.float64, blocksize: tuple[int, int] = (1, 1),
    device: str = "cuda",
) -> CompressedArray:  # fmt: skip
    """An empty (nnz = 0) 2-D compressed array of torch tensors on ``device``."""
    bm, bn = blocksize
    n_compressed = shape[0] // bm if layout.compressed_dim == 0 else shape[1] // bn
    values = dense((0, bm, bn) if layout.is_blocked else (0,), dtype, device)
    return CompressedArray(
        dense((n_compressed + 1,), torch.int64, device), dense((0,), torch.int64, device), values, shape,
        layout=layout, backend=TORCH, xp=XP, check=False,
    )  # fmt: skip


def coo(shape: tuple[int, ...], dtype: torch.dtype = torch.float64, device: str = "cuda") -> COOArray:
    """An empty COO array of torch tensors on ``device``."""
    return COOArray(
        dense((len(shape), 0), torch.int64, device), dense((0,), dtype, device), shape, backend=TORCH, xp=XP,
        coalesced=True,
    )  # fmt: skip


def target(layout: xs.Layout, shape: tuple[int, int], blocksize: tuple[int, int] = (1, 1)) -> Target:
    return Target(layout, TORCH, XP, shape, 2, 0, blocksize, torch.int64, 0)


def test_fake_tensors_are_cuda_tensors_without_data() -> None:
    with fake_cuda():
        a = compressed(xs.sparse_csr, (4, 4))
        assert on_cuda(a) and on_cuda(a._vals) and a.device.type == "cuda"
        with pytest.raises(Exception, match="_local_scalar_dense"):
            bool(torch.any(a._compressed == 0))
    assert not on_cuda(compressed(xs.sparse_csr, (4, 4), device="cpu"))


# -- reasons to decline on CUDA (read off fake tensors) ---------------------------------------------------

CUDA_PRODUCTS = r"^torch's CUDA sparse products \(cuSPARSE\) have no torch\.int64 kernel$"
BLOCKS = r"^torch's CUDA block products \(cuSPARSE bsrmm\) need square blocks larger than 1 x 1, got blocksize=\({}, {}\)$"


def test_coo_products_decline_integers_on_cuda_only() -> None:
    # SparseCUDATensorMath.cu: addmm_sparse_cuda dispatches on the floating and complex dtypes only
    with fake_cuda():
        a, b = coo((4, 4), torch.int64), dense((4, 3), torch.int64)
        assert re.match(CUDA_PRODUCTS, reason("matmul", "_matmul_coo_strided_torch", a, b) or "")
        assert re.match(CUDA_PRODUCTS, reason("matmul", "_matmul_strided_coo_torch", dense((3, 4), torch.int64), a) or "")
        assert re.match(CUDA_PRODUCTS, reason("hspmm", "_hspmm_coo_strided_torch", a, b) or "")
        input = dense((4, 3), torch.int64)
        assert re.match(CUDA_PRODUCTS, reason("addmm", "_addmm_strided_indexed_strided_torch", input, a, b, 1, 1) or "")
        # float64 is accepted on CUDA, without reading the (fake) data
        assert reason("matmul", "_matmul_coo_strided_torch", coo((4, 4)), dense((4, 3))) is None
    # the same integer product stays with torch on the CPU
    assert reason("matmul", "_matmul_coo_strided_torch", coo((4, 4), torch.int64, "cpu"), dense((4, 3), torch.int64, "cpu")) is None


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_coo_bmm_declines_complex_on_cuda(dtype: torch.dtype) -> None:
    # SparseCUDATensorMath.cu: bmm_out_sparse_cuda takes float32 and float64 only
    with fake_cuda():
        got = reason("matmul", "_matmul_coo_strided_torch", coo((2, 4, 4), dtype), dense((2, 4, 3), dtype))
        assert got == f"torch's CUDA COO bmm has no {dtype} kernel"
        assert reason("matmul", "_matmul_coo_strided_torch", coo((2, 4, 4), torch.float32), dense((2, 4, 3), torch.float32)) is None
        # 2-D complex products run on CUDA (addmm_sparse_cuda has complex kernels)
        assert reason("matmul", "_matmul_coo_strided_torch", coo((4, 4), dtype), dense((4, 3), dtype)) is None
    assert reason("matmul", "_matmul_coo_strided_torch", coo((2, 4, 4), dtype, "cpu"), dense((2, 4, 3), dtype, "cpu")) is None


@pytest.mark.parametrize("blocksize", [(2, 1), (1, 2), (1, 1)])
def test_block_products_need_square_blocks_larger_than_one_on_cuda(blocksize: tuple[int, int]) -> None:
    # SparseBlasImpl.cpp: block_sparse_mm / block_sparse_mv assert square blocks of size > 1
    expected = BLOCKS.format(*blocksize)
    with fake_cuda():
        bsr = compressed(xs.sparse_bsr, (4, 4), blocksize=blocksize)
        assert re.match(expected, reason("matmul", "_matmul_compressed_strided_torch", bsr, dense((4, 3))) or "")
        assert re.match(expected, reason("matmul", "_matmul_compressed_strided_torch", bsr, dense((4,))) or "")
        bsc = compressed(xs.sparse_bsc, (4, 4), blocksize=blocksize)
        assert re.match(expected, reason("matmul", "_matmul_strided_compressed_torch", dense((3, 4)), bsc) or "")
        got = reason("addmm", "_addmm_strided_indexed_strided_torch", dense((4, 3)), bsr, dense((4, 3)), 1, 1)
        assert re.match(expected, got or "")
        assert reason("matmul", "_matmul_compressed_strided_torch", compressed(xs.sparse_bsr, (4, 4), blocksize=(2, 2)), dense((4, 3))) is None
        assert reason("matmul", "_matmul_strided_compressed_torch", dense((3, 4)), compressed(xs.sparse_bsc, (4, 4), blocksize=(2, 2))) is None
    if blocksize == (1, 1):
        # MKL takes 1 x 1 blocks on the CPU
        assert reason("matmul", "_matmul_compressed_strided_torch", compressed(xs.sparse_bsr, (4, 4), blocksize=blocksize, device="cpu"), dense((4, 3), device="cpu")) is None


def test_missing_cuda_layout_combinations_are_declined() -> None:
    # SparseBlasImpl.cpp: the CUDA addmm_out_sparse_csr has no BSC @ strided and no strided @ BSR case,
    # and addmv_out_sparse_compressed_cuda refuses BSC
    with fake_cuda():
        bsc = compressed(xs.sparse_bsc, (4, 4), blocksize=(2, 2))
        bsr = compressed(xs.sparse_bsr, (4, 4), blocksize=(2, 2))
        for b in (dense((4, 3)), dense((4,))):
            got = reason("matmul", "_matmul_compressed_strided_torch", bsc, b)
            assert got == "torch's CUDA addmm and addmv have no kernel for BSC @ strided"
        got = reason("matmul", "_matmul_strided_compressed_torch", dense((3, 4)), bsr)
        assert got == "torch's CUDA addmm has no kernel for strided @ BSR"
        got = reason("addmm", "_addmm_strided_indexed_strided_torch", dense((4, 3)), bsc, dense((4, 3)), 1, 1)
        assert got == "torch's CUDA addmm has no kernel for BSC @ strided"
    # the CPU reasons are unchanged
    cpu_bsc = compressed(xs.sparse_bsc, (4, 4), blocksize=(2, 2), device="cpu")
    assert reason("matmul", "_matmul_compressed_strided_torch", cpu_bsc, dense((4, 3), device="cpu")) == "torch has no CPU kernel for BSC @ strided"


def test_cpu_only_products_are_declined_on_cuda() -> None:
    with fake_cuda():
        csr, b = compressed(xs.sparse_csr, (4, 4)), dense((4, 3))
        # native_functions.yaml: _sparse_mm_reduce_impl has a SparseCsrCPU kernel only
        assert reason("matmul_reduce", "_matmul_reduce_csr_strided_torch", csr, b, "sum") == "torch.sparse.mm(reduce=) has no CUDA kernel"
        # SparseCUDATensorMath.cu: _sspaddmm_out_cuda raises "NYI", and smm runs sspaddmm
        sspaddmm = "torch's sspaddmm (and smm, which runs it) has no CUDA kernel"
        a = coo((4, 4))
        assert reason("smm", "_smm_coo_strided_torch", a, b) == sspaddmm
        assert reason("sspaddmm", "_sspaddmm_coo_coo_strided_torch", coo((4, 3)), a, b, 1, 1) == sspaddmm
        # hspmm has a CUDA kernel
        assert reason("hspmm", "_hspmm_coo_strided_torch", a, b) is None
        # SciPy's SuperLU reads host memory
        got = reason("spsolve", "_spsolve_indexed_strided_torch", compressed(xs.sparse_csr, (4, 4)), dense((4,)))
        assert got == "torch has no sparse solver on this device, and SciPy's reads CPU memory only"
        # the compiled SpGEMM reads host memory; torch's cuSPARSE SpGEMM takes the product instead
        csr2 = compressed(xs.sparse_csr, (4, 4))
        assert reason("matmul", "_matmul_compressed_compressed_compiled_torch", csr, csr2) == "the compiled SpGEMM runs on CPU tensors only"
        assert reason("matmul", "_matmul_compressed_compressed_torch", csr, csr2) is None
        # the compiled SpMM reads host memory too; torch's cuSPARSE SpMM takes the product
        for x in (csr, compressed(xs.sparse_csc, (4, 4))):
            y = dense((4, 8))
            assert reason("matmul", "_matmul_compressed_strided_compiled_torch", x, y) == "the compiled SpMM runs on CPU tensors only"
            assert reason("matmul", "_matmul_compressed_strided_torch", x, y) is None
    cpu = compressed(xs.sparse_csr, (4, 4), device="cpu")
    assert reason("matmul", "_matmul_compressed_strided_compiled_torch", cpu, dense((4, 8), device="cpu")) is None
    assert reason("matmul_reduce", "_matmul_reduce_csr_strided_torch", cpu, dense((4, 3), device="cpu"), "sum") is None


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc])
def test_complex_products_along_an_axis_are_declined_on_cuda(dtype: torch.dtype, layout: xs.Layout) -> None:
    # ScatterGatherKernel.cu: CUDA's scatter_reduce multiplies real values only ("prod" of complex raises
    # "cuda_scatter_gather_base_kernel_func" not implemented for 'ComplexFloat'); its "sum" adds complex ones
    from xsparse.backends.array_api.reduction import ReduceSpec

    name = "_prod_coo_torch" if layout is xs.sparse_coo else "_prod_compressed_torch"
    spec = ReduceSpec((0,), False, dtype)
    with fake_cuda():
        x = coo((4, 4), dtype) if layout is xs.sparse_coo else compressed(layout, (4, 4), dtype)
        assert reason("prod", name, x, spec) == "torch's CUDA scatter_reduce has no complex prod kernel"
        assert reason("sum", name.replace("prod", "sum"), x, spec) is None
        assert reason("prod", name, coo((4, 4)) if layout is xs.sparse_coo else compressed(layout, (4, 4)), ReduceSpec((0,), False, torch.float64)) is None
    cpu = coo((4, 4), dtype, "cpu") if layout is xs.sparse_coo else compressed(layout, (4, 4), dtype, device="cpu")
    assert reason("prod", name, cpu, spec) is None


@pytest.mark.parametrize("source", [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc])
@pytest.mark.parametrize("layout", [xs.sparse_bsr, xs.sparse_bsc])
def test_conversion_to_blocks_through_the_host_is_declined_on_cuda(source: xs.Layout, layout: xs.Layout) -> None:
    # TensorConversions.cpp: CSR -> BSR/BSC runs _compressed_to_block_compressed_cpu on self.cpu() (and warns)
    expected = "torch converts CUDA COO, CSR and CSC arrays to BSR or BSC through a copy on the host"
    with fake_cuda():
        x = coo((4, 4)) if source is xs.sparse_coo else compressed(source, (4, 4))
        assert reason("convert", "_convert_to_sparse_torch", x, target(layout, (4, 4), (2, 2))) == expected
        # blocked -> blocked of the same blocksize stays on the device
        bsr = compressed(xs.sparse_bsr, (4, 4), blocksize=(2, 2))
        assert reason("convert", "_convert_to_sparse_torch", bsr, target(layout, (4, 4), (2, 2))) is None
    cpu = coo((4, 4), device="cpu") if source is xs.sparse_coo else compressed(source, (4, 4), device="cpu")
    assert reason("convert", "_convert_to_sparse_torch", cpu, target(layout, (4, 4), (2, 2))) is None


def test_kernels_that_coalesce_decline_a_stored_negative_zero_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch's CUDA coalesceValuesKernel sums every entry into +0.0, duplicate or not; the CPU kernel copies a
    # lone one. The reason reads the values, which a fake tensor refuses: CPU tensors said to be on CUDA.
    from xsparse.backends.torch import conversion

    monkeypatch.setattr(conversion, "on_cuda", lambda x: True)
    expected = "torch's CUDA coalesce sums each entry into +0.0, which turns a stored -0.0 into +0.0"
    index = torch.tensor([[0, 1, 1], [1, 0, 0]])

    def coo_of(values: list[Any], coalesced: bool = False) -> COOArray:
        idx = index if not coalesced else index[:, :2].contiguous()
        return COOArray(idx, torch.tensor(values[: idx.shape[1]]), (2, 2), backend=TORCH, xp=XP, coalesced=coalesced)

    negative, positive = coo_of([-0.0, 1.0, 2.0]), coo_of([0.5, 1.0, 2.0])
    assert reason("coalesce", "_coalesce_torch", negative) == expected
    assert reason("coalesce", "_coalesce_torch", coo_of([complex(1, -0.0), 1j, 2j])) == expected
    assert reason("coalesce", "_coalesce_torch", positive) is None
    assert reason("coalesce", "_coalesce_torch", coo_of([-1, 0, 2])) is None  # integers have no -0
    # an uncoalesced COO to CSR (torch coalesces it), CSC to COO (sorted by coalescing): the same reason
    assert reason("convert", "_convert_to_sparse_torch", negative, target(xs.sparse_csr, (2, 2))) == expected
    csc = xs.to_sparse_csc(coo_of([-0.0, 1.0], coalesced=True))
    assert reason("convert", "_convert_to_sparse_torch", csc, target(xs.sparse_coo, (2, 2))) == expected
    # COO to CSC coalesces the transpose, a coalesced COO's too (the H200 run: a -0.0 came out +0.0); to CSR not
    assert reason("convert", "_convert_to_sparse_torch", coo_of([-0.0, 1.0], coalesced=True), target(xs.sparse_csc, (2, 2))) == expected
    assert reason("convert", "_convert_to_sparse_torch", coo_of([0.5, 1.0], coalesced=True), target(xs.sparse_csc, (2, 2))) is None
    assert reason("convert", "_convert_to_sparse_torch", coo_of([-0.0, 1.0], coalesced=True), target(xs.sparse_csr, (2, 2))) is None
    assert reason("convert", "_convert_to_sparse_torch", xs.to_sparse_csc(coo_of([0.5, 1.0], coalesced=True)), target(xs.sparse_coo, (2, 2))) is None
    # COO * COO coalesces an uncoalesced operand; a coalesced one holding -0.0 is not coalesced again
    assert reason("multiply", "_multiply_coo_coo_torch", negative, positive) == expected
    assert reason("multiply", "_multiply_coo_coo_torch", coo_of([-0.0, 1.0], coalesced=True), coo_of([0.5, 1.0], coalesced=True)) is None


@pytest.mark.parametrize("dtype", [torch.int8, torch.int64, torch.uint8, torch.float32])
def test_integer_products_without_integer_matmul_are_sums_of_products(dtype: torch.dtype) -> None:
    # torch's CUDA matmul has no integer kernel ("addmm_cuda" not implemented for 'Long'): the generic
    # kernels that multiply strided blocks (hybrid operands, strided @ strided, tensordot) sum the products
    # there. CPU tensors, with the backend told that its matmul has no integer kernel.
    rng = np.random.default_rng(0)
    high = 127 if dtype is not torch.float32 else 5

    def draw(*shape: int) -> torch.Tensor:
        return torch.from_numpy(rng.integers(-high if dtype.is_signed else 0, high, shape)).to(dtype)

    hybrid = xs.sparse_coo_array(torch.tensor([[0, 2, 2]]), draw(3, 4, 5), (3, 4, 5))  # (3, 4, 5), dense (4, 5)
    row_hybrid = xs.sparse_coo_array(torch.tensor([[1, 4]]), draw(2, 3), (6, 3))  # one sparse, one dense dimension
    b, a, x, y = draw(5, 2), draw(2, 6), draw(2, 3, 4), draw(4, 7)
    expected_hybrid = xs.matmul(hybrid, b).to_dense()
    cases = [
        (lambda: xs.matmul(hybrid, b).to_dense(), expected_hybrid),
        (lambda: xs.matmul(a, row_hybrid), xs.matmul(a, row_hybrid)),
        (lambda: xs.matmul(x, y), xs.matmul(x, y)),
        (lambda: xs.matmul(y[:, 0], y), xs.matmul(y[:, 0], y)),
        (lambda: xs.tensordot(x, y, axes=([2], [0])), xs.tensordot(x, y, axes=([2], [0]))),
    ]
    object.__setattr__(TORCH, "integer_matmul", lambda t: False)
    try:
        import xsparse.backends.array_api.linalg as generic

        budget = generic._PRODUCTS_BUDGET
        generic._PRODUCTS_BUDGET = 8  # several chunks of the contracted dimension
        try:
            for compute, expected in cases:
                actual = compute()
                assert actual.dtype == expected.dtype and actual.shape == expected.shape
                assert torch.equal(actual, expected)  # integers wrap as matmul's do
        finally:
            generic._PRODUCTS_BUDGET = budget
    finally:
        object.__setattr__(TORCH, "integer_matmul", lambda t: t.device.type != "cuda")
    # and the reference matmul is numpy's (an independent oracle), wrapping alike
    ref = (to_numpy(hybrid.to_dense()).astype(np.int64) @ to_numpy(b).astype(np.int64))
    if dtype is not torch.float32:
        ref = ref.astype(to_numpy(b).dtype)
    np.testing.assert_array_equal(to_numpy(expected_hybrid), ref)


# -- the kernels on a CUDA device ---------------------------------------------------------------------------


def cuda_xp() -> Any:
    """The torch namespace whose creation functions default to the first CUDA device."""
    return S.DeviceNamespace(XP, S.device_named(TORCH, "cuda"))


def host_matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x @ y`` of two CUDA tensors, for integers on the host (torch's CUDA matmul has no integer kernels)."""
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return XP.matmul(x, y)
    return XP.matmul(x.cpu(), y.cpu()).to(x.device)


def on_device(x: Any) -> bool:
    return isinstance(x, xs.SparseArray | torch.Tensor) and on_cuda(x)


def torch_cases(op: str, arity: int) -> list[Any]:
    return [
        pytest.param(k, id=k.name)
        for k in xs.kernels(op)
        if k.backend == "torch" and len(k.signature) == arity and all(concrete(e) for e in k.signature)
    ]


@needs_cuda
@pytest.mark.parametrize("k", torch_cases("matmul", 2))
@SOME
@given(data=st.data())
def test_matmul_kernel_on_cuda(k: dispatch.Kernel, data: st.DataObject) -> None:
    xp = cuda_xp()
    la = data.draw(st.sampled_from(concrete(k.signature[0])))
    lb = data.draw(st.sampled_from(concrete(k.signature[1])))
    a, b, dtype = data.draw(matmul_operands(xp, "torch", la, lb, True))
    assert on_device(a) and on_device(b)
    with quiet():
        expected = host_matmul(xs.to_dense(a), xs.to_dense(b))
        public = xs.matmul(a, b)
    assert on_device(public)
    close(public, expected, dtype)
    result = run_kernel(k, XP, a, b)
    if result is None:
        return
    assert on_device(result)
    if isinstance(result, xs.SparseArray):
        check_invariants(result)
    close(result, expected, dtype)
    twin = generic_twin(k, (la, lb), XP, a, b)
    if twin is not None:
        with quiet():
            close(result, twin.func(XP, a, b), dtype)


@needs_cuda
@pytest.mark.parametrize("k", torch_cases("addmm", 3))
@FEW
@given(data=st.data())
def test_addmm_kernel_on_cuda(k: dispatch.Kernel, data: st.DataObject) -> None:
    xp = cuda_xp()
    la = data.draw(st.sampled_from(concrete(k.signature[1])))
    dtype = data.draw(st.sampled_from(["float64", "float32", "complex128", "int64"]))
    m, kk, n = (2 * data.draw(st.integers(0, 2)) for _ in range(3))
    n = max(n, 2)
    a = data.draw(sparse_operands(xp, la, (), m, kk, (2, 2), dtype))
    b = data.draw(sparse_operands(xp, xs.strided, (), kk, n, (1, 1), dtype))
    input = data.draw(sparse_operands(xp, xs.strided, (), m, n, (1, 1), dtype))
    beta, alpha = data.draw(st.sampled_from([(1, 1), (0, 1), (2, -1)]))
    with quiet():
        product = alpha * host_matmul(xs.to_dense(a), b)
        expected = product if beta == 0 else beta * input + product
        public = xs.addmm(input, a, b, beta=beta, alpha=alpha)
    close(public, expected, dtype)
    result = run_kernel(k, XP, input, a, b, beta, alpha)
    if result is None:
        return
    assert on_device(result)
    close(result, expected, dtype)


@needs_cuda
@pytest.mark.parametrize("k", torch_cases("sampled_addmm", 3))
@FEW
@given(data=st.data())
def test_sampled_addmm_kernel_on_cuda(k: dispatch.Kernel, data: st.DataObject) -> None:
    xp = cuda_xp()
    dtype = data.draw(st.sampled_from(["float64", "float32", "complex128"]))
    m, n, p = data.draw(S.sizes(4)), data.draw(S.sizes(4)), data.draw(st.integers(0, 3))
    batch = tuple(data.draw(st.lists(st.integers(1, 2), max_size=1)))
    input = data.draw(sparse_operands(xp, xs.sparse_csr, batch, m, n, (1, 1), dtype))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    a, b = xp.asarray(host_values(rng, dtype, (*batch, m, p))), xp.asarray(host_values(rng, dtype, (*batch, p, n)))
    beta, alpha = data.draw(st.sampled_from([(1, 1), (0, 1), (2, 0.5)]))
    result = run_kernel(k, XP, input, a, b, beta, alpha)
    twin = generic_twin(k, (xs.sparse_csr, xs.strided, xs.strided), XP, input, a, b, beta, alpha)
    assert twin is not None
    with quiet():
        expected = twin.func(XP, input, a, b, beta, alpha)
    assert on_device(expected)
    if result is None:
        return
    assert on_device(result)
    check_invariants(result)
    close(result, expected, dtype)


@needs_cuda
@FEW
@given(data=st.data())
def test_coo_products_on_cuda(data: st.DataObject) -> None:
    """hspmm runs torch's CUDA kernel; smm, sspaddmm and mm(reduce=) decline and the generic kernels run."""
    xp = cuda_xp()
    dtype = data.draw(st.sampled_from(["float64", "float32", "complex128"]))
    m, kk, n = data.draw(S.sizes(4)), data.draw(S.sizes(4)), data.draw(st.integers(1, 3))
    a = data.draw(sparse_operands(xp, xs.sparse_coo, (), m, kk, (1, 1), dtype))
    b = data.draw(sparse_operands(xp, xs.strided, (), kk, n, (1, 1), dtype))
    expected = XP.matmul(xs.to_dense(a), b)
    for op, result in (("hspmm", xs.hspmm(a, b)), ("smm", xs.smm(a, b))):
        assert on_device(result), op
        close(result, expected, dtype)
    assert reason("smm", "_smm_coo_strided_torch", a, b) == "torch's sspaddmm (and smm, which runs it) has no CUDA kernel"
    input = data.draw(sparse_operands(xp, xs.sparse_coo, (), m, n, (1, 1), dtype))
    result = xs.sspaddmm(input, a, b, beta=2, alpha=1)
    assert on_device(result)
    close(result, 2 * xs.to_dense(input) + expected, dtype)


@needs_cuda
@SOME
@given(data=st.data())
def test_conversions_on_cuda(data: st.DataObject) -> None:
    """Every conversion the torch kernels register, through the dispatcher: the result stays on the
    device and holds the input's elements (a CPU round trip inside torch would warn, which is an error)."""
    xp = cuda_xp()
    dtype = data.draw(S.dtypes(XP))
    gm, gn = data.draw(S.sizes(3)), data.draw(S.sizes(3))
    source = data.draw(st.sampled_from([xs.strided, xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]))
    layout = data.draw(st.sampled_from([xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]))
    x = data.draw(sparse_operands(xp, source, (), 2 * gm, 2 * gn, (2, 2), dtype))
    dense_x = xs.to_dense(x)
    assert on_device(dense_x)
    result = xs.to_sparse(x, layout=layout, blocksize=(2, 2) if layout.is_blocked else None)
    assert on_device(result) and result.layout is layout
    check_invariants(result)
    back = xs.to_dense(result)
    assert on_device(back)
    np.testing.assert_array_equal(to_numpy(back), to_numpy(dense_x))
    # and the signs of zeros: a stored -0.0 is a specified element (torch's CUDA coalesce makes it +0.0)
    np.testing.assert_array_equal(np.signbit(np.real(to_numpy(back))), np.signbit(np.real(to_numpy(dense_x))))
    if isinstance(x, COOArray) and not x.is_coalesced():
        merged = xs.coalesce(x)
        assert on_device(merged) and merged.is_coalesced()
        np.testing.assert_array_equal(to_numpy(xs.to_dense(merged)), to_numpy(dense_x))


@needs_cuda
@SOME
@given(data=st.data())
def test_take_and_sparse_mask_on_cuda(data: st.DataObject) -> None:
    xp = cuda_xp()
    dtype = data.draw(S.dtypes(XP))
    m, n = data.draw(S.sizes(4)), data.draw(S.sizes(4))
    layout = data.draw(st.sampled_from([xs.sparse_coo, xs.sparse_csr, xs.sparse_csc]))
    a = data.draw(sparse_operands(xp, layout, (), m, n, (1, 1), dtype))
    dense_a = to_numpy(xs.to_dense(a))
    if n:
        picks = data.draw(st.lists(st.integers(0, n - 1), max_size=5))
        taken = xs.take(a, picks, axis=1)
        assert on_device(taken)
        np.testing.assert_array_equal(to_numpy(xs.to_dense(taken)), dense_a[:, picks])
    x = data.draw(sparse_operands(xp, xs.strided, (), m, n, (1, 1), dtype))
    mask = xs.coalesce(a) if isinstance(a, COOArray) else a
    masked = xs.sparse_mask(x, mask)
    assert on_device(masked)
    pattern = to_numpy(xs.to_dense(mask._with_values(XP.ones_like(mask._vals), 0))) != 0
    np.testing.assert_array_equal(to_numpy(xs.to_dense(masked)), np.where(pattern, to_numpy(x), 0))


@needs_cuda
def test_seeded_decompositions_leave_the_callers_cuda_generator_alone() -> None:
    rng = np.random.default_rng(0)
    host = np.where(rng.random((12, 8)) < 0.4, rng.standard_normal((12, 8)), 0.0)
    a = xs.to_sparse(cuda_xp().asarray(host), layout=xs.sparse_coo)
    torch.cuda.manual_seed(1234)
    state = torch.cuda.get_rng_state()
    u1, s1, v1 = xs.svd_lowrank(a, q=8, seed=7)
    assert torch.equal(torch.cuda.get_rng_state(), state)
    u2, s2, v2 = xs.svd_lowrank(a, q=8, seed=7)
    assert on_device(s1) and torch.equal(s1, s2) and torch.equal(u1, u2) and torch.equal(v1, v2)
    np.testing.assert_allclose(to_numpy(s1), np.linalg.svd(host, compute_uv=False), rtol=1e-8)


@needs_cuda
def test_to_backend_copies_cuda_tensors_to_the_host() -> None:
    # NumPy's DLPack import takes host memory only: the move copies the CUDA buffers to the host
    x = cuda_xp().asarray([[0.0, 1.5], [2.0, 0.0]])
    for a in (x, xs.to_sparse_coo(x), xs.to_sparse_csr(x)):
        moved = xs.to_backend(a, "numpy")
        assert moved.backend == "numpy" if isinstance(moved, xs.SparseArray) else isinstance(moved, np.ndarray)
        np.testing.assert_array_equal(xs.to_dense(moved), [[0.0, 1.5], [2.0, 0.0]])
