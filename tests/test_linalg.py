"""Linear algebra: every registered kernel of every product, the public functions, the solvers and the
low-rank decompositions, against the same backend's dense computation.

The kernels come from the registry (``xs.kernels(op)``), so a kernel is tested the day it is registered:
each one gets Hypothesis inputs in the layouts its signature names (batch and dense dimensions, fill
values 0 and non-zero, int32 and int64 indices, nnz = 0, uncoalesced COO), runs when its ``supports``
accepts them, and must match the dense computation on the same backend; a native kernel must also match
the generic kernel of the same layouts. The public functions are then tested end to end, and every error
message they raise is matched.
"""

from __future__ import annotations

import gc
import importlib.util
import math
import warnings
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from conftest import backend_params, backend_skip_reason, load_native_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse.backends.array_api.linalg import ORTHO_BPARAMS, ORTHO_FPARAMS, ORTHO_IPARAMS, LobpcgOptions, LobpcgState
from xsparse.formats import INDEXED
from xsparse.formats._invariants import dtype_name
from xsparse.testing import assert_sparse_equal, check_invariants, to_numpy

load_native_kernels()

HAS_TORCH = importlib.util.find_spec("torch") is not None
BACKENDS = ["numpy", "torch", "array_api_strict"]
SPARSE = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
OPERAND_LAYOUTS = frozenset([xs.strided, *SPARSE])
FEW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SOME = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
MESSAGE_SHAPE = re.compile(r"[^\s:][^:\n]*: \S.*?[^.\s]\. [A-Z].*\.", re.S)

DTYPES = {"numpy": ("float64", "float32", "int64", "int32", "complex128"), "torch": ("float64", "float32", "int64", "complex128")}
STRICT_DTYPES = ("float64", "int64", "complex128")


@contextmanager
def quiet() -> Iterator[None]:
    # array_api_strict computes with NumPy and warns where NumPy does (integer overflow wraps silently)
    with np.errstate(all="ignore"):
        yield


def namespace(backend: str) -> Any:
    return xs.get_backend(backend).load()


def dtypes_of(backend: str) -> tuple[str, ...]:
    return DTYPES.get(backend, STRICT_DTYPES)


def tolerance(dtype: str) -> dict[str, float]:
    if dtype in ("float32", "complex64"):
        return {"rtol": 1e-4, "atol": 1e-4}
    if dtype in ("float64", "complex128"):
        return {"rtol": 1e-10, "atol": 1e-10}
    return {}


def host(x: Any) -> np.ndarray:
    # NumPy's matmul of two vectors is a NumPy scalar, not a 0-d array
    return np.asarray(x) if isinstance(x, np.generic) else to_numpy(xs.to_dense(x))


def close(actual: Any, expected: Any, dtype: str) -> None:
    a, e = host(actual), host(expected)
    assert a.shape == e.shape, (a.shape, e.shape)
    tol = tolerance(dtype)
    if tol:
        np.testing.assert_allclose(a, e, equal_nan=True, **tol)
    else:
        np.testing.assert_array_equal(a, e)


# -- operands -------------------------------------------------------------------------------------------


def host_values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], *, nan: bool = False) -> np.ndarray:
    """Small integers and halves (sums stay exact), complex parts too; the odd NaN when ``nan``."""
    n = math.prod(shape)
    return S.nonzero_values(rng, dtype, n, 0, specials=nan).reshape(shape)


def sparse_host(
    rng: np.random.Generator, dtype: str, batch: tuple[int, ...], m: int, n: int, blocksize: tuple[int, int],
    dense: tuple[int, ...], fill: Any, density: float, nan: bool,
) -> np.ndarray:  # fmt: skip
    """A dense ``(*batch, m, n, *dense)`` array whose every batch has the same pattern (so one count of
    specified elements and blocks, which every compressed layout needs), the rest ``fill``."""
    bm, bn = blocksize
    blocks = rng.random((m // bm, n // bn)) < density
    mask = np.kron(blocks, np.ones((bm, bn), dtype=bool)) if blocks.size else np.zeros((m, n), dtype=bool)
    host = np.full((*batch, m, n, *dense), fill, dtype=np.dtype(dtype))
    count = int(mask.sum()) * math.prod(batch)
    if count and math.prod(dense) != 0:
        values = S.nonzero_values(rng, dtype, count * math.prod(dense), fill, specials=nan).reshape(count, *dense)
        host[(..., mask) + (slice(None),) * len(dense)] = values.reshape(*batch, int(mask.sum()), *dense)
    return host


@st.composite
def sparse_operands(
    draw: Any, xp: Any, layout: xs.Layout, batch: tuple[int, ...], m: int, n: int, blocksize: tuple[int, int], dtype: str,
    *, dense: tuple[int, ...] = (), fill: Any = 0, nan: bool = False, uncoalesced: bool = True,
) -> Any:  # fmt: skip
    """An operand of ``layout`` (strided included) of shape ``(*batch, m, n, *dense)``."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if layout is xs.strided:
        return xp.asarray(host_values(rng, dtype, (*batch, m, n, *dense), nan=nan))
    density = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    host = sparse_host(rng, dtype, batch, m, n, blocksize, dense, fill, density, nan)
    idt = draw(S.index_dtypes())
    kwargs: dict[str, Any] = {"layout": layout, "index_dtype": idt}
    if fill != 0:
        kwargs["fill_value"] = fill
    if layout is xs.sparse_coo:
        kwargs["sparse_dim"] = len(batch) + 2
    else:
        kwargs["dense_dim"] = len(dense)
    if layout.is_blocked:
        kwargs["blocksize"] = blocksize
    with quiet():
        a = xs.to_sparse(xp.asarray(host), **kwargs)
    if layout is xs.sparse_coo and uncoalesced and draw(st.booleans()):
        a = S.uncoalesced_like(xp, rng, a, idt)
    return a


def concrete(element: Any, allowed: frozenset[Any] = OPERAND_LAYOUTS) -> list[Any]:
    members = sorted(element, key=str) if isinstance(element, frozenset) else [element]
    return [m for m in members if m in allowed]


def kernel_cases(op: str, arity: int) -> list[Any]:
    """``(kernel, backend)`` for every kernel of ``op`` whose signature has strided or COO/compressed
    layouts in every place: native kernels on their backend, generic ones on every backend."""
    cases = []
    for k in xs.kernels(op):
        if k.rewrite or len(k.signature) != arity or not all(concrete(e) for e in k.signature):
            continue
        for backend in ([k.backend] if k.backend is not None else BACKENDS):
            if backend not in BACKENDS:
                continue
            reason = backend_skip_reason(backend)
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            cases.append(pytest.param(k, backend, id=f"{k.name}-{backend}", marks=marks))
    return cases


def generic_twin(kernel: dispatch.Kernel, layouts: tuple[Any, ...], xp: Any, *args: Any) -> Any:
    """The generic kernel the dispatcher would pick for these layouts, or None."""
    for k in dispatch.resolve(kernel.op, layouts, "array_api_strict"):
        if k.backend is None and not k.rewrite and (k.supports is None or k.supports(xp, *args) is None):
            return k
    return None


def run_kernel(kernel: dispatch.Kernel, xp: Any, *args: Any) -> Any:
    """The kernel's result, or None when it declines the arguments (the reason must be a sentence)."""
    if kernel.supports is not None:
        reason = kernel.supports(xp, *args)
        if reason is not None:
            assert isinstance(reason, str) and reason.strip(), reason
            return None
    with quiet():
        return kernel.func(xp, *args)


# -- the matmul kernels ---------------------------------------------------------------------------------


@st.composite
def matmul_operands(draw: Any, xp: Any, backend: str, la: Any, lb: Any, native: bool) -> tuple[Any, Any, str]:
    """Operands of compatible shapes: matrices, vectors, broadcast batches, a dense contracted dimension."""
    dtype = draw(st.sampled_from(dtypes_of(backend)))
    bs = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    bm, bk, bn = bs[0], bs[1], draw(st.integers(1, 2))
    gm, gk = draw(S.sizes(3)), draw(S.sizes(3))
    # 8 columns or more, now and then: the torch backend's compiled SpMM takes no fewer
    gn = draw(st.one_of(S.sizes(3), st.integers(8, 9)))
    m, k, n = gm * bm, gk * bk, gn * bn
    batch = tuple(draw(st.lists(st.integers(0, 2) if not native else st.integers(1, 2), max_size=1 if native else 2)))
    both_sparse = la is not xs.strided and lb is not xs.strided
    fill = 0
    if not native and not both_sparse and draw(st.integers(0, 3)) == 0 and not dtype.startswith("int"):
        fill = draw(st.sampled_from([1.5, -2.0])) if not dtype.startswith("complex") else 1 - 1j
    nan = not both_sparse and dtype.startswith("float")
    shape_kind = draw(st.sampled_from(["matrix", "vector", "batched"]))
    if la is not xs.strided:
        if la is xs.sparse_coo and lb is xs.strided and shape_kind == "vector" and draw(st.booleans()):
            # a sparse vector on the left
            a = draw(sparse_operands(xp, la, (), 1, k, (1, bk), dtype, fill=fill, nan=nan))
            a = xs.sparse_coo_array(a._indices()[1:, :], a._values(), (k,), fill_value=a.fill_value)
        elif lb is xs.strided and not native and draw(st.integers(0, 4)) == 0:
            # a dense contracted dimension: (*batch, m, k, d) @ (d, p) keeps a's structure
            d = draw(st.integers(1, 3))
            a = draw(sparse_operands(xp, la, batch, m, k, (bm, bk), dtype, dense=(d,), nan=nan))
            b_shape = (d,) if shape_kind == "vector" else (d, draw(st.integers(1, 3)))
            return a, xp.asarray(host_values(np.random.default_rng(0), dtype, b_shape)), dtype
        else:
            a = draw(sparse_operands(xp, la, batch if shape_kind == "batched" else (), m, k, (bm, bk), dtype, fill=fill if lb is xs.strided else 0, nan=nan))
    if lb is not xs.strided:
        b_batch = batch if (shape_kind == "batched" and (la is xs.strided or draw(st.booleans()))) else ()
        b = draw(sparse_operands(xp, lb, b_batch, k, n, (bk, bn), dtype, fill=fill if la is xs.strided else 0, nan=nan))
        if la is xs.strided:
            a_shape = (k,) if shape_kind == "vector" else (*(batch if shape_kind == "batched" else ()), m, k)
            a = xp.asarray(host_values(np.random.default_rng(draw(st.integers(0, 99))), dtype, a_shape))
        return a, b, dtype
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    if la is xs.strided:
        a = xp.asarray(host_values(rng, dtype, (*(batch if shape_kind == "batched" else ()), m, k)))
    if shape_kind == "vector":
        b_shape: tuple[int, ...] = (k,)
    elif shape_kind == "batched" and a.ndim >= 2:
        b_shape = (*draw(st.sampled_from([batch, (1,) * len(batch), batch[1:]])), k, n)
    else:
        b_shape = (k, n)
    return a, xp.asarray(host_values(rng, dtype, b_shape)), dtype


MATMUL_CASES = kernel_cases("matmul", 2)


@pytest.mark.parametrize(("kernel", "backend"), MATMUL_CASES)
@SOME
@given(data=st.data())
def test_matmul_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = namespace(backend)
    la = data.draw(st.sampled_from(concrete(kernel.signature[0])))
    lb = data.draw(st.sampled_from(concrete(kernel.signature[1])))
    a, b, dtype = data.draw(matmul_operands(xp, backend, la, lb, kernel.backend is not None))
    result = run_kernel(kernel, xp, a, b)
    if result is None:
        return
    with quiet():
        expected = xp.matmul(xs.to_dense(a), xs.to_dense(b))
    if isinstance(result, xs.SparseArray):
        check_invariants(result)
        natural = a.layout if isinstance(a, xs.SparseArray) and a.dense_dim() else (a.layout if isinstance(a, xs.SparseArray) else b.layout)
        if result.ndim >= 2 and not (isinstance(a, xs.SparseArray) and isinstance(b, xs.SparseArray) and a.ndim == 1):
            assert result.layout is natural, (result.layout, natural)
    else:
        assert not (isinstance(a, xs.SparseArray) and isinstance(b, xs.SparseArray)), "sparse @ sparse is sparse"
    close(result, expected, dtype)
    if kernel.backend is not None:
        twin = generic_twin(kernel, (la, lb), xp, a, b)
        if twin is not None:
            with quiet():
                close(result, twin.func(xp, a, b), dtype)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@SOME
@given(
    batch=st.sampled_from([(1,), (3,), (2, 3)]), coalesce=st.booleans(), vector=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_batched_coo_times_one_matrix_folds_the_batch(
    backend: str, batch: tuple[int, ...], coalesce: bool, vector: bool, seed: int
) -> None:
    """A batch of COO matrices times one matrix (or vector) is one product with the batch folded into the
    rows, on each backend's native kernel: every entry lands in its own batch and row."""
    if backend_skip_reason(backend):
        pytest.skip(str(backend_skip_reason(backend)))
    xp = namespace(backend)
    rng = np.random.default_rng(seed)
    shape = (*batch, 4, 5)
    nse = 30
    idx = np.stack([rng.integers(0, s, nse) for s in shape])
    a = xs.sparse_coo_array(xp.asarray(idx), xp.asarray(rng.standard_normal(nse)), shape)
    if coalesce:
        a = a.coalesce()
    b = xp.asarray(rng.standard_normal((5,) if vector else (5, 2)))
    kernel = next(k for k in dispatch.resolve("matmul", (xs.sparse_coo, xs.strided), backend) if k.backend == backend)
    assert kernel.supports(xp, a, b) is None
    close(kernel.func(xp, a, b), xp.matmul(xs.to_dense(a), b), "float64")


@SOME
@given(
    layout=st.sampled_from([xs.sparse_csr, xs.sparse_csc]), dtype=st.sampled_from(["float64", "float32", "complex128"]),
    m=S.sizes(5), k=S.sizes(5), n=st.integers(8, 12), transposed=st.booleans(), conjugated=st.booleans(), data=st.data(),
)  # fmt: skip
def test_torch_compiled_spmm_agrees_with_dense_torch_and_the_generic_kernel(
    layout: xs.Layout, dtype: str, m: int, k: int, n: int, transposed: bool, conjugated: bool, data: st.DataObject
) -> None:
    """The torch backend's compiled SpMM (CPU tensors, 8 columns or more): every entry and index dtype,
    nnz = 0 and empty rows (the densities), a transposed or conjugated (a view with torch's conjugate bit)
    dense operand, against torch's dense product and the generic kernel."""
    if backend_skip_reason("torch"):
        pytest.skip(str(backend_skip_reason("torch")))
    torch = pytest.importorskip("torch")
    xp = namespace("torch")
    a = data.draw(sparse_operands(xp, layout, (), m, k, (1, 1), dtype))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    b = xp.asarray(host_values(rng, dtype, (n, k) if transposed else (k, n)))
    b = b.mT if transposed else b
    if conjugated and dtype.startswith("complex"):
        b = b.conj()
    kernel = next(c for c in dispatch.resolve("matmul", (layout, xs.strided), "torch") if c.name == "_matmul_compressed_strided_compiled_torch")
    assert kernel.supports is not None and kernel.supports(xp, a, b) is None
    assert dispatch.chosen("matmul", (layout, xs.strided), "torch", xp, a, b) is kernel
    got = kernel.func(xp, a, b)
    assert isinstance(got, torch.Tensor) and got.dtype == b.dtype and tuple(got.shape) == (m, n)
    close(got, xs.to_dense(a) @ b.resolve_conj(), dtype)
    twin = generic_twin(kernel, (layout, xs.strided), xp, a, b)
    assert twin is not None
    close(got, twin.func(xp, a, b), dtype)


def test_every_native_matmul_kernel_runs_on_plain_matrices() -> None:
    """Each native kernel accepts a plain 2-D float64 input of one of its layouts (so the sweep above runs it)."""
    for k in xs.kernels("matmul"):
        if k.backend not in ("numpy", "torch") or not all(concrete(e) for e in k.signature):
            continue
        xp = namespace(k.backend)
        accepted = []
        for la in concrete(k.signature[0]):
            for lb in concrete(k.signature[1]):
                host = np.eye(8, dtype=np.float64)  # 8 columns: the torch backend's compiled SpMM takes no fewer
                a = xp.asarray(host) if la is xs.strided else xs.to_sparse(xp.asarray(host), layout=la, blocksize=(2, 2) if la.is_blocked else None)
                b = xp.asarray(host) if lb is xs.strided else xs.to_sparse(xp.asarray(host), layout=lb, blocksize=(2, 2) if lb.is_blocked else None)
                if k.supports is None or k.supports(xp, a, b) is None:
                    accepted.append((la, lb))
                    close(k.func(xp, a, b), xp.asarray(host), "float64")
        assert accepted, f"{k.describe()} declines every plain 2-D input"


# -- addmm ------------------------------------------------------------------------------------------------

ADDMM_CASES = kernel_cases("addmm", 3)
SCALARS = st.sampled_from([(1, 1), (0, 1), (2, 0.5), (0.5, -1), (1, 0)])


@pytest.mark.parametrize(("kernel", "backend"), ADDMM_CASES)
@FEW
@given(data=st.data())
def test_addmm_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = namespace(backend)
    li = data.draw(st.sampled_from(concrete(kernel.signature[0])))
    la = data.draw(st.sampled_from(concrete(kernel.signature[1])))
    lb = data.draw(st.sampled_from(concrete(kernel.signature[2])))
    dtype = data.draw(st.sampled_from([d for d in dtypes_of(backend) if not d.startswith("int")]))
    m, k, n = 2 * data.draw(st.integers(0, 2)), 2 * data.draw(st.integers(0, 2)), 2 * data.draw(st.integers(1, 2))
    a = data.draw(sparse_operands(xp, la, (), m, k, (2, 2), dtype))
    b = data.draw(sparse_operands(xp, lb, (), k, n, (2, 2), dtype))
    in_shape = data.draw(st.sampled_from([(m, n), (n,), (1, n)]))
    input = data.draw(sparse_operands(xp, li, (), *(((1,) + in_shape) if len(in_shape) == 1 else in_shape), (1, 1), dtype))
    if len(in_shape) == 1 and li is xs.strided:
        input = xp.reshape(input, in_shape)
    beta, alpha = data.draw(SCALARS)
    result = run_kernel(kernel, xp, input, a, b, beta, alpha)
    if result is None:
        return
    with quiet():
        product = alpha * xp.matmul(xs.to_dense(a), xs.to_dense(b))
        expected = product if beta == 0 else beta * xs.to_dense(input) + product
    assert not isinstance(result, xs.SparseArray)
    close(result, xp.broadcast_to(expected, (m, n)), dtype)


# -- sampled_addmm ------------------------------------------------------------------------------------------

SAMPLED_CASES = kernel_cases("sampled_addmm", 3)


def pattern_of(xp: Any, s: xs.SparseArray) -> Any:
    """Where ``s`` has a specified element (a dense boolean array)."""
    ones = s._with_values(xp.ones_like(s._vals), 0)
    return xs.to_dense(ones) != 0


@pytest.mark.parametrize(("kernel", "backend"), SAMPLED_CASES)
@SOME
@given(data=st.data())
def test_sampled_addmm_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = namespace(backend)
    li = data.draw(st.sampled_from(concrete(kernel.signature[0])))
    dtype = data.draw(st.sampled_from([d for d in dtypes_of(backend) if not d.startswith("int")]))
    bm, bn = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    m, n, p = bm * data.draw(S.sizes(3)), bn * data.draw(S.sizes(3)), data.draw(st.integers(0, 3))
    batch = tuple(data.draw(st.lists(st.integers(1, 2), max_size=1)))
    fill = data.draw(st.sampled_from([0, 0, 2.0])) if kernel.backend is None or li is xs.sparse_csr else 0
    input = data.draw(sparse_operands(xp, li, batch, m, n, (bm, bn), dtype, fill=fill))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    mat_batch = data.draw(st.sampled_from([batch, ()])) if kernel.backend is None else batch
    a = xp.asarray(host_values(rng, dtype, (*mat_batch, m, p)))
    b = xp.asarray(host_values(rng, dtype, (*mat_batch, p, n)))
    beta, alpha = data.draw(SCALARS)
    result = run_kernel(kernel, xp, input, a, b, beta, alpha)
    if result is None:
        return
    assert isinstance(result, xs.SparseArray) and result.layout is input.layout
    check_invariants(result)
    with quiet():
        dense_input = xs.to_dense(input)
        inside = alpha * xp.matmul(a, b) + (0 if beta == 0 else beta * dense_input)
        outside = xp.zeros_like(dense_input) if beta == 0 else beta * dense_input
        expected = xp.where(pattern_of(xp, input), inside, outside)
    close(result, expected, dtype)


# -- torch.sparse.mm(reduce=), smm, hspmm, sspaddmm ------------------------------------------------------


def reduce_reference(a: xs.SparseArray, b: Any, reduce: str) -> np.ndarray:
    dense = to_numpy(xs.to_dense(a))
    mask = to_numpy(pattern_of(a._xp, a))
    host_b = to_numpy(b)
    out = np.zeros((dense.shape[0], host_b.shape[1]), dtype=np.result_type(dense, host_b))
    for i in range(dense.shape[0]):
        cols = np.nonzero(mask[i])[0]
        if cols.size == 0:
            continue
        products = dense[i, cols][:, None] * host_b[cols, :]
        out[i] = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](products, axis=0)
    return out


@pytest.mark.parametrize(("kernel", "backend"), kernel_cases("matmul_reduce", 2))
@SOME
@given(data=st.data())
def test_matmul_reduce_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = namespace(backend)
    la = data.draw(st.sampled_from(concrete(kernel.signature[0])))
    dtype = data.draw(st.sampled_from([d for d in dtypes_of(backend) if d in ("float64", "float32", "int64")]))
    m, k, n = 2 * data.draw(S.sizes(3)), 2 * data.draw(S.sizes(3)), data.draw(st.integers(1, 3))
    a = data.draw(sparse_operands(xp, la, (), m, k, (2, 2), dtype))
    b = xp.asarray(host_values(np.random.default_rng(data.draw(st.integers(0, 99))), dtype, (k, n)))
    reduce = data.draw(st.sampled_from(xs._linalg.REDUCTIONS))
    result = run_kernel(kernel, xp, a, b, reduce)
    if result is None:
        return
    np.testing.assert_allclose(to_numpy(result), reduce_reference(a, b, reduce), **(tolerance(dtype) or {"rtol": 0}))


COO_PRODUCT_CASES = kernel_cases("smm", 2) + kernel_cases("hspmm", 2)


@pytest.mark.parametrize(("kernel", "backend"), COO_PRODUCT_CASES)
@FEW
@given(data=st.data())
def test_smm_hspmm_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = namespace(backend)
    la = data.draw(st.sampled_from(concrete(kernel.signature[0])))
    dtype = data.draw(st.sampled_from(dtypes_of(backend)))
    m, k, n = 2 * data.draw(S.sizes(3)), 2 * data.draw(S.sizes(3)), data.draw(st.integers(1, 3))
    a = data.draw(sparse_operands(xp, la, (), m, k, (2, 2), dtype))
    b = xp.asarray(host_values(np.random.default_rng(data.draw(st.integers(0, 99))), dtype, (k, n)))
    result = run_kernel(kernel, xp, a, b)
    if result is None:
        return
    assert result.layout is xs.sparse_coo
    check_invariants(result)
    rows = np.unique(to_numpy(xs.to_sparse_coo(a).coalesce().indices())[0]) if a.nnz else np.zeros(0, dtype=np.int64)
    coalesced = result.coalesce()
    if kernel.op == "hspmm":
        assert (result.sparse_dim(), result.dense_dim()) == (1, 1)
        # flagged coalesced on every backend (torch flags its own result uncoalesced), so indices() reads
        assert result.is_coalesced()
        np.testing.assert_array_equal(to_numpy(result.indices())[0], rows)
    else:
        assert result.sparse_dim() == 2 and coalesced.nnz == rows.size * n
    with quiet():
        close(result, xp.matmul(xs.to_dense(a), b), dtype)


@pytest.mark.parametrize(("kernel", "backend"), kernel_cases("sspaddmm", 3))
@FEW
@given(data=st.data())
def test_sspaddmm_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = namespace(backend)
    li = data.draw(st.sampled_from(concrete(kernel.signature[0])))
    la = data.draw(st.sampled_from(concrete(kernel.signature[1])))
    dtype = data.draw(st.sampled_from([d for d in dtypes_of(backend) if not d.startswith("int")]))
    m, k, n = 2 * data.draw(S.sizes(3)), 2 * data.draw(S.sizes(3)), 2 * data.draw(st.integers(1, 2))
    input = data.draw(sparse_operands(xp, li, (), m, n, (2, 2), dtype))
    a = data.draw(sparse_operands(xp, la, (), m, k, (2, 2), dtype))
    b = xp.asarray(host_values(np.random.default_rng(data.draw(st.integers(0, 99))), dtype, (k, n)))
    beta, alpha = data.draw(SCALARS)
    result = run_kernel(kernel, xp, input, a, b, beta, alpha)
    if result is None:
        return
    assert result.layout is xs.sparse_coo
    check_invariants(result)
    with quiet():
        close(result, beta * xs.to_dense(input) + alpha * xp.matmul(xs.to_dense(a), b), dtype)


# -- tensordot and vecdot ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("kernel", "backend"), kernel_cases("tensordot", 2))
@FEW
@given(data=st.data())
def test_tensordot_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = namespace(backend)
    l1 = data.draw(st.sampled_from(concrete(kernel.signature[0], frozenset([xs.strided, xs.sparse_coo, xs.sparse_csr]))))
    l2 = data.draw(st.sampled_from(concrete(kernel.signature[1], frozenset([xs.strided, xs.sparse_coo, xs.sparse_csc]))))
    dtype = data.draw(st.sampled_from(dtypes_of(backend)))
    p, q, r = (data.draw(st.integers(1, 3)) for _ in range(3))
    # x1 (p, q, r) and x2 (r, q, p'): contract x1's q and r with x2's q and r, or r alone
    x1 = data.draw(sparse_operands(xp, l1, (p,), q, r, (1, 1), dtype, nan=False))
    x2 = data.draw(sparse_operands(xp, l2, (r,), q, 2, (1, 1), dtype, nan=False))
    axes1, axes2 = data.draw(st.sampled_from([((1, 2), (1, 0)), ((2,), (0,)), ((), ())]))
    result = run_kernel(kernel, xp, x1, x2, axes1, axes2)
    if result is None:
        return
    if isinstance(result, xs.SparseArray):
        check_invariants(result)
    with quiet():
        expected = xp.tensordot(xs.to_dense(x1), xs.to_dense(x2), axes=(list(axes1), list(axes2)))
    close(result, expected, dtype)


@pytest.mark.parametrize(("kernel", "backend"), kernel_cases("vecdot", 2))
@FEW
@given(data=st.data())
def test_vecdot_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = namespace(backend)
    l1 = data.draw(st.sampled_from(concrete(kernel.signature[0], frozenset([xs.strided, xs.sparse_coo, xs.sparse_csr]))))
    l2 = data.draw(st.sampled_from(concrete(kernel.signature[1], frozenset([xs.strided, xs.sparse_coo, xs.sparse_csc]))))
    dtype = data.draw(st.sampled_from(dtypes_of(backend)))
    batch = tuple(data.draw(st.lists(st.integers(1, 2), max_size=1)))
    m, k = data.draw(st.integers(1, 3)), data.draw(S.sizes(4))
    fill = 1.5 if dtype.startswith("float") and (l1 is xs.strided) != (l2 is xs.strided) and data.draw(st.booleans()) else 0
    x1 = data.draw(sparse_operands(xp, l1, batch, m, k, (1, 1), dtype, fill=fill if l1 is not xs.strided else 0))
    x2 = data.draw(sparse_operands(xp, l2, (), m, k, (1, 1), dtype, fill=fill if l2 is not xs.strided else 0))
    axis = data.draw(st.sampled_from([-1, -2]))
    result = run_kernel(kernel, xp, x1, x2, axis)
    if result is None:
        return
    with quiet():
        expected = xp.vecdot(xs.to_dense(x1), xs.to_dense(x2), axis=axis)
    close(result, expected, dtype)


# -- kron --------------------------------------------------------------------------------------------------


@st.composite
def kron_operands(draw: Any, xp: Any, layout: xs.Layout, dtype: str) -> Any:
    """An operand of ``layout`` for kron: COO and strided of 0 to 3 dimensions; compressed matrices, with a
    batch or a dense dimension at times; fill value 0 mostly (a non-zero one is declined)."""
    if layout in (xs.strided, xs.sparse_coo) and draw(st.booleans()):
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
        host = host_values(rng, dtype, shape) * (rng.random(shape) < draw(st.sampled_from([0.0, 0.4, 1.0])))
        if layout is xs.strided:
            return xp.asarray(host)
        idt = draw(S.index_dtypes())
        a = xs.to_sparse_coo(xp.asarray(host), index_dtype=idt)
        return S.uncoalesced_like(xp, rng, a, idt) if a.nnz and draw(st.booleans()) else a
    bs = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if layout.is_blocked else (1, 1)
    m, n = bs[0] * draw(st.integers(0, 3)), bs[1] * draw(st.integers(0, 3))
    extra = draw(st.sampled_from(["", "", "batch", "dense"]))
    batch = (2,) if extra == "batch" else ()
    dense = (2,) if extra == "dense" and layout is not xs.strided else ()
    fill = 1.5 if layout is not xs.strided and dtype.startswith("float") and draw(st.integers(0, 5)) == 0 else 0
    return draw(sparse_operands(xp, layout, batch, m, n, bs, dtype, dense=dense, fill=fill))


@pytest.mark.parametrize(("kernel", "backend"), kernel_cases("kron", 2))
@SOME
@given(data=st.data())
def test_kron_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = namespace(backend)
    dtype = data.draw(st.sampled_from(dtypes_of(backend)))
    layouts = [data.draw(st.sampled_from(concrete(e))) for e in kernel.signature]
    x1, x2 = (data.draw(kron_operands(xp, layout, dtype)) for layout in layouts)
    ndim = max(x1.ndim, x2.ndim)
    shape = tuple(a * b for a, b in zip((1,) * (ndim - x1.ndim) + tuple(x1.shape), (1,) * (ndim - x2.ndim) + tuple(x2.shape)))
    result = run_kernel(kernel, xp, x1, x2, shape)
    if result is None:
        return
    with quiet():
        expected = np.kron(host(x1), host(x2))
    assert tuple(result.shape) == shape == expected.shape
    if isinstance(result, xs.SparseArray):
        check_invariants(result)
        assert result.layout is xs.sparse_coo and result.is_coalesced() and result.fill_value == 0
        # the products of the specified elements, each position once
        counts = [
            xs.to_sparse_coo(x).coalesce().nnz if isinstance(x, xs.SparseArray) else math.prod(tuple(x.shape))
            for x in (x1, x2) if not isinstance(x, xs.SparseArray) or x.dense_dim() == 0
        ]  # fmt: skip
        if len(counts) == 2:
            assert result.nnz == counts[0] * counts[1]
        sparse = [x for x in (x1, x2) if isinstance(x, xs.SparseArray)]
        wide = any(dtype_name(x.index_dtype) == "int64" for x in sparse)
        assert dtype_name(result.indices().dtype) == ("int64" if wide else "int32")
    close(result, xp.asarray(expected), dtype)
    twin = generic_twin(kernel, tuple(layouts), xp, x1, x2, shape) if kernel.backend is not None else None
    if twin is not None:
        generic = run_kernel(twin, xp, x1, x2, shape)
        assert_sparse_equal(result, generic)
        # one order, one index dtype: the native kernel writes what the generic one does
        assert np.array_equal(to_numpy(result.indices()), to_numpy(generic.indices()))
        assert result.indices().dtype == generic.indices().dtype


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_kron_public(backend: str) -> None:
    xp = namespace(backend)
    a = np.asarray([[0.0, 2.0], [3.0, 0.0], [0.0, 0.0]])
    b = np.asarray([[1.0, 0.0, -1.0], [0.0, 4.0, 0.0]])
    expected = xp.asarray(np.kron(a, b))
    sa, sb = xs.to_sparse_csr(xp.asarray(a)), xs.to_sparse_coo(xp.asarray(b))
    r = xs.kron(sa, sb)
    assert r.layout is xs.sparse_coo and r.nnz == 2 * 3 and r.is_coalesced()
    close(r, expected, "float64")
    for target in (xs.sparse_csr, xs.sparse_csc, xs.strided):
        out = xs.kron(sa, sb, layout=target)
        assert xs.layout_of(out) is target
        close(out, expected, "float64")
    # every element of a strided operand is specified, its zeros included (SciPy drops them)
    r = xs.kron(sa, xp.asarray(b))
    assert r.nnz == 2 * 6
    close(r, expected, "float64")
    assert xs.kron(xs.to_sparse(xp.asarray(b)), sa).nnz == 3 * 2
    # strided operands give a strided result, of NumPy's kron
    close(xs.kron(xp.asarray(a), xp.asarray(b)), expected, "float64")
    # the shorter shape gets leading 1s; a 0-d operand scales
    v = xp.asarray(np.asarray([1.0, 0.0, 5.0]))
    close(xs.kron(sa, xs.to_sparse_coo(v)), xp.asarray(np.kron(a, [1.0, 0.0, 5.0])), "float64")
    close(xs.kron(xs.to_sparse_coo(xp.asarray(np.asarray(2.0))), sb), xp.asarray(2.0 * b), "float64")
    # mixed dtypes promote, duplicates of an uncoalesced operand are summed first
    dup = xs.sparse_coo_array(xp.asarray(np.asarray([[0, 0], [1, 1]])), xp.asarray(np.asarray([1, 2], dtype=np.float32)), (1, 2))
    r = xs.kron(dup, sa)
    assert r.dtype == xp.float64 and r.nnz == 2
    close(r, xp.asarray(np.kron([[0, 3]], a)), "float64")


def test_kron_widens_indices_that_int32_cannot_hold() -> None:
    i32 = np.int32
    a = xs.sparse_coo_array(np.asarray([[0, 49_999], [0, 0]], dtype=i32), [1.0, 2.0], (50_000, 1))
    b = xs.sparse_coo_array(np.asarray([[49_999], [0]], dtype=i32), [3.0], (50_000, 1))
    r = xs.kron(a, b)
    assert r.indices().dtype == np.int64 and r.shape == (2_500_000_000, 1)
    assert r.indices().tolist() == [[49_999, 2_499_999_999], [0, 0]] and r.values().tolist() == [3.0, 6.0]
    small = xs.kron(xs.sparse_coo_array(np.asarray([[1]], dtype=i32), [1.0], (2,)), xs.sparse_coo_array(np.asarray([[0]], dtype=i32), [1.0], (3,)))
    assert small.indices().dtype == np.int32 and small.indices().tolist() == [[3]]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_kron_gradient_reaches_the_values() -> None:
    import torch

    values = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    a = xs.sparse_coo_array(torch.tensor([[0, 1], [1, 0]]), values, (2, 2))
    weights = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    xs.kron(a, weights).values().sum().backward()
    assert values.grad.tolist() == [10.0, 10.0]


# -- the public functions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@pytest.mark.parametrize("layout", SPARSE, ids=str)
def test_matmul_public_and_operator(backend: str, layout: xs.Layout) -> None:
    xp = namespace(backend)
    host = np.asarray([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 0, 0], [0, 4, 5, 0]], dtype=np.float64)
    a = xs.to_sparse(xp.asarray(host), layout=layout, blocksize=(2, 2) if layout.is_blocked else None)
    b = xp.asarray(np.arange(8.0).reshape(4, 2))
    close(a @ b, xp.asarray(host @ np.arange(8.0).reshape(4, 2)), "float64")
    # array_api_strict's __matmul__ raises TypeError on a foreign operand instead of returning NotImplemented,
    # so Python never asks the sparse array's __rmatmul__; NumPy and torch do
    left = xp.matrix_transpose(b)
    product = xs.matmul(left, a) if backend == "array_api_strict" else left @ a
    close(product, xp.asarray(np.arange(8.0).reshape(4, 2).T @ host), "float64")
    close(xs.mv(a, b[:, 0]), xp.asarray(host @ np.arange(0.0, 8.0, 2)), "float64")
    c = a @ a
    assert c.layout is layout
    close(c, xp.asarray(host @ host), "float64")
    for target in (xs.strided, xs.sparse_coo, xs.sparse_csr):
        r = xs.matmul(a, a, layout=target)
        assert xs.layout_of(r) is target
        close(r, xp.asarray(host @ host), "float64")
    assert xs.layout_of(xs.matmul(a, b, layout=xs.sparse_csc)) is xs.sparse_csc


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_mm_bmm_addmm_public(backend: str) -> None:
    xp = namespace(backend)
    rng = np.random.default_rng(1)
    host = sparse_host(rng, "float64", (2,), 4, 6, (2, 2), (), 0, 0.5, False)
    a = xs.to_sparse_bsr(xp.asarray(host), blocksize=(2, 2))
    b = xp.asarray(host_values(rng, "float64", (2, 6, 3)))
    close(xs.bmm(a, b), xp.asarray(host @ to_numpy(b)), "float64")
    a2 = xs.to_sparse_csr(xp.asarray(host[0]))
    close(xs.mm(a2, b[0, ...]), xp.asarray(host[0] @ to_numpy(b)[0]), "float64")
    close(xs.mm(a2, b[0, ...], reduce="sum"), xp.asarray(host[0] @ to_numpy(b)[0]), "float64")
    inp = xp.asarray(np.ones(3))
    close(xs.addmm(inp, a2, b[0, ...], beta=2.0, alpha=-1.0), xp.asarray(2 - host[0] @ to_numpy(b)[0]), "float64")
    # beta = 0 ignores NaN in the input, as torch does
    nan = xp.asarray(np.full((4, 3), np.nan))
    close(xs.addmm(nan, a2, b[0, ...], beta=0), xp.asarray(host[0] @ to_numpy(b)[0]), "float64")


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_product_functions_public(backend: str) -> None:
    xp = namespace(backend)
    host = np.asarray([[0, 1.0, 0], [0, 0, 0], [2.0, 0, 3.0]])
    b = xp.asarray(np.arange(6.0).reshape(3, 2))
    coo = xs.to_sparse_coo(xp.asarray(host))
    expected = xp.asarray(host @ np.arange(6.0).reshape(3, 2))
    h = xs.hspmm(coo, b)
    assert (h.sparse_dim(), h.nnz) == (1, 2)
    close(h, expected, "float64")
    s = xs.smm(coo, b)
    assert (s.sparse_dim(), s.nnz) == (2, 4)
    close(s, expected, "float64")
    r = xs.sspaddmm(xs.to_sparse_coo(xp.asarray(np.eye(3)[:, :2])), coo, b, beta=2.0, alpha=0.5)
    close(r, xp.asarray(2 * np.eye(3)[:, :2] + 0.5 * to_numpy(expected)), "float64")
    mask = xs.to_sparse_csr(xp.asarray(host))
    r = xs.sampled_addmm(mask, xp.asarray(np.ones((3, 2))), xp.asarray(np.ones((2, 3))), alpha=3.0)
    assert r.layout is xs.sparse_csr and r.nnz == mask.nnz
    close(r, xp.asarray(np.where(host != 0, host + 6.0, 0.0)), "float64")
    close(xs.tensordot(coo, xp.asarray(host), axes=1), xp.asarray(host @ host), "float64")
    close(xs.vecdot(coo, xp.asarray(host)), xp.asarray(np.sum(host * host, axis=-1)), "float64")
    close(xs.vecdot(coo, coo, axis=0), xp.asarray(np.sum(host * host, axis=0)), "float64")


def test_fill_values_are_exact() -> None:
    """A non-zero fill value: sparse @ strided and vecdot are the dense results; sparse @ sparse raises."""
    host = np.asarray([[1.5, 1.5, 4.0], [2.0, 1.5, 1.5]])
    a = xs.to_sparse_csr(host, fill_value=1.5)
    b = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(xs.matmul(a, b), host @ b)
    np.testing.assert_allclose(xs.matmul(b.T, xs.to_sparse_csc(host.T, fill_value=1.5)), b.T @ host.T)
    np.testing.assert_allclose(xs.vecdot(a, host), np.sum(host * host, axis=-1))
    with pytest.raises(xs.NoKernelError, match=r"matmul: no kernel .* a product of two sparse arrays is sparse only with fill values 0"):
        xs.matmul(a, a.T)
    with pytest.raises(xs.NoKernelError, match=r"non-finite fill value"):
        xs.matmul(xs.to_sparse_csr(host, fill_value=math.inf), b)
    r = xs.sampled_addmm(a, np.ones((2, 2)), np.ones((2, 3)), beta=2.0)
    assert r.fill_value == 3.0
    np.testing.assert_allclose(xs.to_dense(r), np.where(host != 1.5, 2 * host + 2, 3.0))


@pytest.mark.parametrize("backend", backend_params())
def test_a_fill_value_against_a_non_finite_operand_is_refused(backend: str) -> None:
    """S' @ B + f * colsum(B) is inexact where B holds inf or NaN ((-1 - 1) * inf + 1 * inf is NaN, the dense
    product -1 * inf + 1 * 1 is -inf): refused with the reason, on every backend; a finite operand is exact."""
    xp = namespace(backend)
    a = xs.to_sparse_csr(xp.asarray([[-1.0, 1.0], [1.0, 1.0]]), fill_value=1.0)
    for bad in ([[math.inf], [1.0]], [[math.nan], [1.0]], [[1.0], [-math.inf]]):
        b = xp.asarray(bad)
        with pytest.raises(xs.NoKernelError, match=r"a non-zero fill value \(1\.0\) against a strided operand with an infinite or NaN element"):
            xs.matmul(a, b)
        with pytest.raises(xs.NoKernelError, match=r"a non-zero fill value \(1\.0\) against a strided operand with an infinite or NaN element"):
            xs.matmul(xp.matrix_transpose(b), xs.to_sparse_csc(xp.asarray([[-1.0, 1.0], [1.0, 1.0]]), fill_value=1.0))
        with pytest.raises(xs.NoKernelError, match=r"with an infinite or NaN element"):
            xs.vecdot(a, xp.reshape(b, (2,)))
    close(xs.matmul(a, xp.asarray([[2.0], [1.0]])), xp.asarray([[-1.0], [3.0]]), "float64")
    # fill value 0 keeps IEEE's products of the stored elements
    zero = xs.to_sparse_csr(xp.asarray([[-1.0, 0.0], [0.0, 1.0]]))
    close(xs.matmul(zero, xp.asarray([[math.inf], [1.0]])), xp.asarray([[-math.inf], [1.0]]), "float64")
    # finite elements whose sum overflows: colsum(B) - P @ B is inf where the dense product (1 * 1.5e308 +
    # 0 * 1.5e308, the stored 0 beside the fill value 1) is not
    one = xs.to_sparse_csr(xp.asarray([[1.0, 0.0]]), fill_value=1.0)
    huge = xp.asarray([[1.5e308], [1.5e308]])
    with warnings.catch_warnings():
        if backend == "array_api_strict":  # its NumPy warns of the overflowing sum (docs/decisions.md)
            warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(xs.NoKernelError, match=r"or whose sums over the contracted dimension overflow"):
            xs.matmul(one, huge)
        with pytest.raises(xs.NoKernelError, match=r"or whose sums over the contracted dimension overflow"):
            xs.matmul(xp.matrix_transpose(huge), xs.to_sparse_csc(xp.asarray([[1.0], [0.0]]), fill_value=1.0))


@pytest.mark.parametrize("backend", backend_params())
def test_integer_products_with_a_fill_value_keep_the_dtype(backend: str) -> None:
    """An int32 product whose sparse operand has a non-zero fill value stays int32, as the dense product and the
    fill value 0 do (the fill's column sums were promoted to the default integer)."""
    host = np.asarray([[1, 2], [2, 3]], dtype=np.int32)
    s = xs.to_backend(xs.to_sparse_csr(host, fill_value=2), backend)
    xp = s._xp
    d = xp.ones((2, 2), dtype=xp.int32)
    for r, want in ((xs.matmul(s, d), host @ np.ones((2, 2), np.int32)), (xs.matmul(d, s), np.ones((2, 2), np.int32) @ host),
                    (xs.vecdot(s, d), np.sum(host, axis=-1)), (xs.addmm(d, s, d), host @ np.ones((2, 2), np.int32) + 1)):  # fmt: skip
        assert r.dtype == xp.int32
        np.testing.assert_array_equal(np.asarray(xs.to_backend(r, "numpy")), want)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr], ids=str)
def test_sampled_addmm_with_beta_zero_ignores_the_input(backend: str, layout: xs.Layout) -> None:
    """beta = 0 ignores the input's values, NaN and infinities included (BLAS's rule, and addmm's): every kernel,
    torch's CSR one too, which multiplies them by 0."""
    s = xs.to_backend(xs.sparse_csr_array([0, 1, 2, 3], [0, 1, 0], [math.nan, 1.0, -math.inf], (3, 2)), backend)
    s = xs.to_sparse(s, layout=layout)
    xp = s._xp
    one = xp.ones((3, 2), dtype=xp.float64), xp.ones((2, 2), dtype=xp.float64)
    r = xs.sampled_addmm(s, *one, beta=0.0)
    np.testing.assert_array_equal(np.asarray(xs.to_backend(xs.to_dense(r), "numpy")), [[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])


@pytest.mark.skipif(backend_skip_reason("torch") is not None, reason=str(backend_skip_reason("torch")))
def test_torch_operands_with_conjugate_and_negative_bits() -> None:
    """torch's lazy conjugate and negative bits on an operand are honoured: addmm of a COO operand (torch.addmm
    reads the bit as unset), the compiled CSR @ CSR (which reads the values' memory), spsolve's right-hand side."""
    import torch

    a = xs.to_backend(xs.to_sparse_coo(np.asarray([[1 + 1j, 0], [0, 2]], dtype=np.complex64)), "torch")
    bv = np.asarray([[1 + 1j], [1 - 2j]], dtype=np.complex64)
    b = torch.from_numpy(np.conj(bv)).conj()
    assert b.is_conj()
    got = xs.addmm(torch.zeros(2, 1, dtype=torch.complex64), a, b, beta=0.0)
    np.testing.assert_allclose(got.numpy(), xs.to_dense(xs.to_backend(a, "numpy")) @ bv)
    v = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex128)
    ptr, col = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    left, right = xs.sparse_csr_array(ptr, col, v.conj(), (2, 2)), xs.sparse_csr_array(ptr, col, v, (2, 2))
    want = np.diag(np.conj(v.numpy()) * v.numpy())
    np.testing.assert_allclose(xs.to_dense(left @ right).numpy(), want)
    np.testing.assert_allclose(xs.to_dense(left.T @ right.T).numpy(), want.T)
    m = xs.to_backend(xs.to_sparse_csr(np.asarray([[4.0, 1.0], [1.0, 3.0]])), "torch")
    rhs = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex128).conj().imag
    assert rhs.is_neg()
    np.testing.assert_allclose(xs.spsolve(m, rhs).numpy(), np.linalg.solve([[4.0, 1.0], [1.0, 3.0]], [-2.0, 1.0]))


def test_vector_norm_inf_of_no_elements() -> None:
    """The inf-norm over an axis of size 0 is 0, as NumPy's (and xsparse's on strided input); -inf still raises."""
    x = np.zeros((3, 0))
    for layout in (xs.sparse_coo, xs.sparse_csr):
        s = xs.to_sparse(x, layout=layout, fill_value=-3.0)
        np.testing.assert_array_equal(xs.to_dense(xs.linalg.vector_norm(s, ord=math.inf, axis=-1)), np.linalg.vector_norm(x, ord=math.inf, axis=-1))
        assert float(xs.linalg.vector_norm(s, ord=math.inf)) == 0.0
        assert xs.to_dense(xs.linalg.vector_norm(s, ord=math.inf, axis=0)).shape == (0,)
        with pytest.raises(ValueError, match=r"min: the reduction is over zero elements"):
            xs.linalg.vector_norm(s, ord=-math.inf, axis=-1)


def test_hybrid_products() -> None:
    """A contraction over a dense dimension keeps the sparse structure; row-sparse COO from the right."""
    rng = np.random.default_rng(3)
    host = sparse_host(rng, "float64", (), 4, 3, (1, 1), (2,), 0, 0.5, False)
    a = xs.to_sparse_csr(host, dense_dim=1)
    w = np.arange(6.0).reshape(2, 3)
    r = xs.matmul(a, w)
    assert r.layout is xs.sparse_csr and r.dense_dim() == 1 and r.nnz == a.nnz
    np.testing.assert_allclose(xs.to_dense(r), host @ w)
    rows = xs.to_sparse_coo(np.asarray([[0, 0.0], [1.0, 2.0], [0, 0]]), sparse_dim=1)
    np.testing.assert_allclose(xs.matmul(np.ones((2, 3)), rows), np.ones((2, 3)) @ xs.to_dense(rows))
    np.testing.assert_allclose(xs.matmul(rows, np.ones((2, 4))).to_dense(), xs.to_dense(rows) @ np.ones((2, 4)))
    # two dense dimensions: every stored (2, 2) matrix is multiplied from the left
    stack = xs.to_sparse_coo(np.asarray([[[1.0, 2.0], [3.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]]]), sparse_dim=1)
    r = xs.matmul(np.arange(8.0).reshape(4, 2), stack)
    assert r.layout is xs.sparse_coo and r.shape == (3, 4, 2) and r.nnz == 2
    np.testing.assert_allclose(xs.to_dense(r), np.arange(8.0).reshape(4, 2) @ xs.to_dense(stack))


def test_batched_sparse_product_shares_the_union_pattern() -> None:
    """A batched compressed product holds the same number of elements per batch (explicit zeros pad)."""
    host = np.zeros((2, 2, 2))
    host[0, 0, 0] = 1.0
    host[1, 1, 1] = 2.0
    a = xs.to_sparse_csr(host)  # one element per batch, at different places
    c = a @ xs.to_sparse_csr(np.stack([np.eye(2), np.eye(2)]))
    assert c.layout is xs.sparse_csr and c.nnz == 2
    check_invariants(c)
    np.testing.assert_allclose(xs.to_dense(c), host)


def test_sparse_vector_products() -> None:
    v = xs.sparse_coo_array([[1, 3]], [2.0, 5.0], (4,))
    m = np.arange(8.0).reshape(4, 2)
    np.testing.assert_allclose(xs.matmul(v, m), xs.to_dense(v) @ m)
    np.testing.assert_allclose(xs.matmul(m.T, v), m.T @ xs.to_dense(v))
    dot = xs.matmul(v, v)
    assert dot.layout is xs.sparse_coo and dot.shape == ()
    assert float(xs.to_dense(dot)) == 29.0
    mv = xs.matmul(xs.to_sparse_csr(np.eye(4)), v)
    assert mv.layout is xs.sparse_coo and mv.shape == (4,)


# -- spsolve -------------------------------------------------------------------------------------------------


def system(n: int, seed: int, dtype: str = "float64") -> np.ndarray:
    """A sparse, diagonally dominant (so well-conditioned) non-symmetric matrix."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)) * (rng.random((n, n)) < 0.3)
    a = a + np.diag(np.abs(a).sum(axis=1) + 1.0)
    if dtype.startswith("complex"):
        a = a + 1j * np.diag(rng.standard_normal(n))
    return a.astype(dtype)


def with_layouts(cases: list[Any], layouts: list[xs.Layout], *rest: xs.Layout) -> list[Any]:
    """``(kernel, backend, layout)`` for each case and each of ``layouts`` the kernel's signature takes."""
    return [
        pytest.param(*case.values, layout, id=f"{case.id}-{layout}", marks=case.marks)
        for case in cases
        for layout in layouts
        if case.values[0].matches((layout, *rest))
    ]


@pytest.mark.parametrize(("kernel", "backend", "layout"), with_layouts(kernel_cases("spsolve", 2), [xs.strided, *SPARSE], xs.strided))
@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
def test_spsolve_kernel(kernel: dispatch.Kernel, backend: str, layout: xs.Layout, dtype: str) -> None:
    xp = namespace(backend)
    host = system(6, 0, dtype)
    a = xp.asarray(host) if layout is xs.strided else xs.to_sparse(xp.asarray(host), layout=layout, blocksize=(2, 3) if layout.is_blocked else None)
    for rhs in (np.arange(1.0, 7.0), np.arange(12.0).reshape(6, 2)):
        b = xp.asarray(rhs.astype(dtype))
        x = run_kernel(kernel, xp, a, b)
        assert x is not None, f"{kernel.name} declined a plain system"
        np.testing.assert_allclose(host @ to_numpy(x), rhs, rtol=1e-3 if dtype == "float32" else 1e-9, atol=1e-4 if dtype == "float32" else 1e-9)


@pytest.mark.parametrize(("kernel", "backend", "layout"), with_layouts(kernel_cases("spsolve", 2), [xs.sparse_coo, xs.sparse_csr], xs.strided))
def test_spsolve_kernel_without_right_hand_sides(kernel: dispatch.Kernel, backend: str, layout: xs.Layout) -> None:
    # the generic kernel stacked its solutions, of which a (6, 0) right-hand side has none: "at least one
    # array or dtype is required" (the Array API suite's test_solve drew one on array_api_strict)
    xp = namespace(backend)
    host = system(6, 0, "float64")
    a = xs.to_sparse(xp.asarray(host), layout=layout)
    x = run_kernel(kernel, xp, a, xp.zeros((6, 0), dtype=xp.float64))
    assert x is not None and tuple(x.shape) == (6, 0) and x.dtype == xp.float64
    assert tuple(xs.linalg.solve(a, xp.zeros((2, 6, 0), dtype=xp.float64)).shape) == tuple(np.linalg.solve(host, np.zeros((2, 6, 0))).shape)


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_spsolve_public(backend: str) -> None:
    xp = namespace(backend)
    host = system(8, 1)
    a = xs.to_sparse_csr(xp.asarray(host))
    b = xp.asarray(np.arange(16.0).reshape(8, 2))
    np.testing.assert_allclose(host @ to_numpy(xs.spsolve(a, b)), to_numpy(b), atol=1e-9)
    bt = xp.asarray(np.arange(16.0).reshape(2, 8))
    np.testing.assert_allclose(to_numpy(xs.spsolve(a, bt, left=False)) @ host, to_numpy(bt), atol=1e-9)
    np.testing.assert_allclose(to_numpy(xs.spsolve(a, bt[0, ...], left=False)) @ host, to_numpy(bt)[0], atol=1e-9)


@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_solve_errors_name_solve(backend: str) -> None:
    # sizes that disagree raised NumPy's gufunc error (naming "solve1") after densifying x1; the sparse
    # system's errors named spsolve, the function solve runs
    xp = namespace(backend)
    a = xs.to_sparse_csr(xp.asarray(np.array([[1.0, 0.0], [0.0, 0.0]])))
    sizes = r"^solve: x1 must hold square matrices and x2 a right-hand side of as many rows, of shape \(\.\.\., M\) or \(\.\.\., M, K\) "
    with pytest.raises(ValueError, match=sizes + r"\(x1\.shape=\(2, 2\), x2\.shape=\(3,\)\)\. Pass a system whose sizes agree\.$"):
        xs.linalg.solve(a, xp.ones(3, dtype=xp.float64))
    with pytest.raises(ValueError, match=sizes + r"\(x1\.shape=\(2, 2, 3\), x2\.shape=\(2, 2\)\)"):
        xs.linalg.solve(xs.to_sparse_coo(xp.ones((2, 2, 3), dtype=xp.float64)), xp.ones((2, 2), dtype=xp.float64))
    # SuperLU finds the matrix singular; array_api_strict's GMRES does not converge on it
    with pytest.raises(ValueError, match=r"^solve: the (matrix is singular|iterative solver did not converge) \("):
        xs.linalg.solve(a, xp.ones(2, dtype=xp.float64))


@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_spsolve_of_a_matrix_with_a_nan(backend: str) -> None:
    # SuperLU read the NaN pivot as a singular factor, GMRES failed in LAPACK: the message says what it is
    a = xs.to_backend(xs.to_sparse_csr(np.array([[1.0, 0.0], [math.nan, 2.0]])), backend)
    with pytest.raises(ValueError, match=r"^spsolve: the matrix holds a NaN or an infinity \(shape=\(2, 2\), nnz=3\)\. Pass a matrix of finite values"):
        xs.spsolve(a, xs.to_backend(np.ones(2), backend))


def test_spsolve_singular_and_nonconvergent_systems() -> None:
    singular = xs.sparse_csr_array([0, 1, 2], [0, 0], [1.0, 1.0], (2, 2))
    with pytest.raises(ValueError, match=r"^spsolve: the matrix is singular \(shape=\(2, 2\), nnz=2; SuperLU: .*\)\. Pass a non-singular system"):
        xs.spsolve(singular, np.ones(2))
    strict = xs.to_backend(singular, "array_api_strict")
    with pytest.raises(ValueError, match=r"^spsolve: the iterative solver did not converge \(relative residual=.*\)\. .*xsparse.to_backend\(A, 'numpy'\)"):
        xs.spsolve(strict, xs.get_backend("array_api_strict").namespace().asarray([1.0, 0.0]))


def test_spsolve_of_a_consistent_singular_system_on_the_generic_kernel() -> None:
    # docs/linalg.md: GMRES cannot see a null space its Krylov space never meets; it returns a solution of
    # the consistent system (the one in span{b}, here the minimum-norm one), where SuperLU refuses the matrix
    host = np.asarray([[1.0, 1.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match=r"^spsolve: the matrix is singular"):
        xs.spsolve(xs.to_sparse_csr(host), np.asarray([2.0, 2.0]))
    sxp = xs.get_backend("array_api_strict").namespace()
    x = xs.spsolve(xs.to_sparse_csr(sxp.asarray(host)), sxp.asarray([2.0, 2.0]))
    np.testing.assert_allclose(np.asarray(x), [1.0, 1.0], rtol=1e-12)
    np.testing.assert_allclose(host @ np.asarray(x), [2.0, 2.0], rtol=1e-12)


# -- low-rank decompositions and LOBPCG ------------------------------------------------------------------------


def low_rank(seed: int, m: int = 12, n: int = 9) -> np.ndarray:
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((m, 4)))
    v, _ = np.linalg.qr(rng.standard_normal((n, 4)))
    a = u @ np.diag([8.0, 4.0, 2.0, 1.0]) @ v.T
    return a


@pytest.mark.parametrize(
    ("kernel", "backend", "layout"),
    with_layouts(kernel_cases("svd_lowrank", 1) + kernel_cases("pca_lowrank", 1), [xs.strided, xs.sparse_coo, xs.sparse_csr, xs.sparse_bsc]),
)
def test_low_rank_kernels(kernel: dispatch.Kernel, backend: str, layout: xs.Layout) -> None:
    xp = namespace(backend)
    host = low_rank(0)
    a = xp.asarray(host) if layout is xs.strided else xs.to_sparse(xp.asarray(host), layout=layout, blocksize=(3, 3) if layout.is_blocked else None)
    if kernel.op == "svd_lowrank":
        args: tuple[Any, ...] = (4, 2, None, 0)
        reference = host
    else:
        args = (4, True, 2, 0)
        reference = host - host.mean(axis=0, keepdims=True)
    result = run_kernel(kernel, xp, a, *args)
    assert result is not None, f"{kernel.name} declined a plain matrix"
    u, s, v = (to_numpy(r) for r in result)
    np.testing.assert_allclose(s, np.linalg.svd(reference, compute_uv=False)[:4], rtol=1e-8)
    np.testing.assert_allclose(u @ np.diag(s) @ v.T, reference, atol=1e-8)


@pytest.mark.parametrize(("kernel", "backend"), kernel_cases("lobpcg", 1))
@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_kernels(kernel: dispatch.Kernel, backend: str, largest: bool) -> None:
    xp = namespace(backend)
    rng = np.random.default_rng(5)
    q, _ = np.linalg.qr(rng.standard_normal((20, 20)))
    host = (q * np.arange(1.0, 21.0)) @ q.T
    layout = xs.sparse_coo if kernel.backend is not None else xs.sparse_csr
    a = xs.to_sparse(xp.asarray(host), layout=layout)
    options = LobpcgOptions("ortho", None, ORTHO_DEFAULTS[0], dict.fromkeys(ORTHO_DEFAULTS[1], 1e-10), ORTHO_DEFAULTS[2])
    e, x = (to_numpy(r) for r in run_kernel(kernel, xp, a, 2, None, None, 2, None, 500, 1e-10, largest, options, 0))
    expected = np.linalg.eigvalsh(host)
    expected = expected[::-1][:2] if largest else expected[:2]
    np.testing.assert_allclose(e, expected, rtol=1e-7)
    np.testing.assert_allclose(host @ x, x * e, atol=1e-5)


ORTHO_DEFAULTS = (ORTHO_IPARAMS, ORTHO_FPARAMS, ORTHO_BPARAMS)


def test_lobpcg_generalized_problem() -> None:
    rng = np.random.default_rng(2)
    q, _ = np.linalg.qr(rng.standard_normal((18, 18)))
    host = (q * np.arange(1.0, 19.0)) @ q.T
    mass = np.diag(np.linspace(1.0, 2.0, 18))
    e, x = xs.lobpcg(xs.to_sparse_csr(host), k=2, B=xs.to_sparse_csr(mass), largest=False, seed=1)
    import scipy.linalg

    np.testing.assert_allclose(e, scipy.linalg.eigh(host, mass, eigvals_only=True)[:2], rtol=1e-7)
    np.testing.assert_allclose(x.T @ mass @ x, np.eye(2), atol=1e-8)


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc], ids=str)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_numpy_small_product_fast_path(layout: Any, index_dtype: Any) -> None:
    """The direct call into the extension: vectors and matrices of any strides, and its fallback."""
    rng = np.random.default_rng(0)
    dense = rng.random((7, 5)) * (rng.random((7, 5)) < 0.5)
    a = xs.to_sparse(dense, layout=layout)
    compressed, plain = (c.astype(index_dtype) for c in list(a._components().values())[:2])
    a = xs.sparse_compressed_array(compressed, plain, a._vals, a.shape, layout=layout)
    assert a._plain.dtype == index_dtype
    base = rng.random((10, 6))
    for b in (base[::2, 0], base[:5, :3], np.asfortranarray(base[:5, :4]), base[:5, :0]):
        np.testing.assert_allclose(a @ b, dense @ b, rtol=1e-12, atol=1e-12)


def test_matmul_checks_after_the_operand_types_are_known() -> None:
    """The memo of backends by type shortens the checks of known operands; the errors stay the same."""
    if (reason := backend_skip_reason("torch")) is not None:
        pytest.skip(reason)
    xp = namespace("torch")
    a, t = xs.to_sparse_csr(np.eye(2)), xp.ones(2, dtype=xp.float64)
    np.testing.assert_allclose(a @ np.ones(2), [1.0, 1.0])
    np.testing.assert_allclose(to_numpy(xs.to_sparse_csr(xp.eye(2, dtype=xp.float64)) @ t), [1.0, 1.0])
    with pytest.raises(xs.BackendMismatchError, match=r"^matmul: the operands live on different backends \('numpy', 'torch'\)\. Move"):
        a @ t
    with pytest.raises(TypeError, match=r"^matmul: x2 has a boolean dtype \(x2\.dtype=bool\); products are defined"):
        a @ np.ones(2, dtype=bool)
    with pytest.raises(TypeError, match=r"^matmul: x1 must be an xsparse array or a backend array, got float\. Wrap"):
        xs.matmul(1.0, a)


def test_numpy_small_product_falls_back_to_the_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    from xsparse.backends import _cpu

    class Declines:
        def csr_mm(self, *args: Any) -> Any:
            return NotImplemented

    calls: list[int] = []
    real = _cpu.csr_matmul

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        monkeypatch.setattr(_cpu, "_NATIVE", saved)
        return real(*args, **kwargs)

    saved = list(_cpu._NATIVE) or [_cpu._native_module()]
    monkeypatch.setattr(_cpu, "_NATIVE", [Declines()])
    monkeypatch.setattr(_cpu, "csr_matmul", wrapper)
    dense = np.array([[0.0, 2.0], [3.0, 0.0]])
    np.testing.assert_allclose(xs.to_sparse_csr(dense) @ np.array([1.0, 10.0]), [20.0, 3.0])
    assert calls == [1]


def _spectrum_matrix(size: int, seed: int, dtype: Any = np.float64) -> np.ndarray:
    """A symmetric (Hermitian) matrix with eigenvalues 1..size and random eigenvectors."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((size, size))
    if np.dtype(dtype).kind == "c":
        g = g + 1j * rng.standard_normal((size, size))
    q, _ = np.linalg.qr(g)
    return np.asarray((q * np.arange(1.0, size + 1.0)) @ q.conj().T, dtype=dtype)


LOBPCG_LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr]


@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
@pytest.mark.parametrize("layout", LOBPCG_LAYOUTS, ids=str)
@pytest.mark.parametrize("method", ["basic", "ortho"])
@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_methods_against_eigh(backend: str, layout: Any, method: str, largest: bool) -> None:
    if (reason := backend_skip_reason(backend)) is not None:
        pytest.skip(reason)
    xp = namespace(backend)
    host = _spectrum_matrix(24, 3)
    a = xs.to_sparse(xp.asarray(host), layout=layout, blocksize=(2, 2) if layout.is_blocked else None)
    e, x = xs.lobpcg(a, k=3, largest=largest, method=method, seed=4)
    e, x = to_numpy(e), to_numpy(x)
    expected = np.linalg.eigvalsh(host)
    expected = expected[::-1][:3] if largest else expected[:3]
    np.testing.assert_allclose(e, expected, rtol=1e-7)
    np.testing.assert_allclose(host @ x, x * e, atol=1e-5 * 24)
    np.testing.assert_allclose(x.T @ x, np.eye(3), atol=1e-8)


@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_integer_matrix_takes_the_floating_operands_dtype(backend: str) -> None:
    # docs/linalg.md: an integer operand takes the promotion of the floating ones; an integer A was refused
    if (reason := backend_skip_reason(backend)) is not None:
        pytest.skip(reason)
    xp = namespace(backend)
    host = np.array([[2, 0, 1], [0, 3, 0], [1, 0, 4], [0, 0, 1]])
    a = xs.to_sparse_csr(xp.asarray(host, dtype=xp.int64))
    _, s, _ = xs.svd_lowrank(a, q=3, M=xp.full((4, 3), 0.5, dtype=xp.float32), seed=0)
    assert s.dtype == xp.float32
    np.testing.assert_allclose(to_numpy(s), np.linalg.svd(host - 0.5, compute_uv=False), rtol=1e-5)
    spectrum = _spectrum_matrix(12, 2)
    ints = xs.to_sparse_csr(xp.asarray(np.round(spectrum * 10), dtype=xp.int64))
    e, _ = xs.lobpcg(ints, k=2, B=xs.to_sparse_csr(xp.eye(12, dtype=xp.float64)), seed=1)
    np.testing.assert_allclose(to_numpy(e), np.linalg.eigvalsh(np.round(spectrum * 10))[::-1][:2], rtol=1e-7)
    with pytest.raises(TypeError, match=r"^pca_lowrank: A must have a floating or complex dtype \(A\.dtype=int64\), or another"):
        xs.pca_lowrank(a, q=2)
    with pytest.raises(TypeError, match=r"^svd_lowrank: A must have a floating or complex dtype \(A\.dtype=int64, M\.dtype=int32\)"):
        xs.svd_lowrank(a, q=2, M=xp.ones((4, 3), dtype=xp.int32))


@pytest.mark.parametrize("method", ["basic", "ortho"])
def test_lobpcg_complex_hermitian(method: str) -> None:
    host = _spectrum_matrix(21, 6, np.complex128)
    e, x = xs.lobpcg(xs.to_sparse_csr(host), k=2, largest=False, method=method, seed=2)
    np.testing.assert_allclose(e, np.linalg.eigvalsh(host)[:2], rtol=1e-7)
    np.testing.assert_allclose(x.conj().T @ x, np.eye(2), atol=1e-8)


@pytest.mark.parametrize("method", ["basic", "ortho"])
@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_agrees_with_torch(method: str, largest: bool) -> None:
    if (reason := backend_skip_reason("torch")) is not None:
        pytest.skip(reason)
    import torch

    host = _spectrum_matrix(30, 8)
    x0 = np.random.default_rng(9).standard_normal((30, 3))
    e_torch, _ = torch.lobpcg(torch.asarray(host).to_sparse(), k=3, X=torch.asarray(x0), largest=largest, method=method)
    for backend in ("numpy", "torch"):
        xp = namespace(backend)
        e, _ = xs.lobpcg(xs.to_sparse_csr(xp.asarray(host)), k=3, X=xp.asarray(x0), largest=largest, method=method)
        np.testing.assert_allclose(to_numpy(e), e_torch.numpy(), rtol=1e-7)
    # the same problem through the native kernel (COO on torch), method and ortho parameters passed on
    xp = namespace("torch")
    e, _ = xs.lobpcg(xs.to_sparse_coo(xp.asarray(host)), k=3, X=xp.asarray(x0), largest=largest, method=method,
                     ortho_iparams={"ortho_i_max": 2} if method == "ortho" else None)  # fmt: skip
    np.testing.assert_allclose(to_numpy(e), e_torch.numpy(), rtol=1e-7)


@pytest.mark.parametrize("method", ["basic", "ortho"])
def test_lobpcg_tracker_sees_every_step(method: str) -> None:
    host = _spectrum_matrix(24, 1)
    seen: list[tuple[int, int, Any, Any]] = []

    def tracker(state: LobpcgState) -> None:
        assert state.method == method and state.iparams["k"] == 2 and state.fparams["tol"] == 1e-9
        assert state.E.shape == (2,) and state.X.shape == (24, 2) and state.R.shape == (24, 2)
        assert state.S.shape[0] == 24 and 2 <= state.S.shape[1] <= 6
        assert state.tvars["rerr"].shape == (2,) and {"A_norm", "B_norm", "X_norm"} <= set(state.fvars)
        seen.append((state.istep, state.converged_count, state.E, state.X))

    e, x = xs.lobpcg(xs.to_sparse_csr(host), k=2, tol=1e-9, method=method, tracker=tracker, seed=0)
    steps = [s[0] for s in seen]
    assert steps == list(range(1, len(seen) + 1)) and len(seen) > 3
    assert [s[1] for s in seen][-1] == 2 and seen[0][1] < 2
    # the arrays a tracker keeps are not modified by later steps: the first estimate is still worse
    assert np.abs(seen[0][2] - np.array([24.0, 23.0])).max() > np.abs(e - np.array([24.0, 23.0])).max()
    np.testing.assert_array_equal(seen[-1][3], x)


def test_lobpcg_tracker_can_stop_the_iteration() -> None:
    host = _spectrum_matrix(24, 1)
    seen: list[int] = []

    def tracker(state: LobpcgState) -> None:
        seen.append(state.istep)
        if state.istep == 3:
            state.bvars["force_stop"] = True

    xs.lobpcg(xs.to_sparse_csr(host), k=2, tracker=tracker, seed=0)
    assert seen == [1, 2, 3]
    seen.clear()
    xs.lobpcg(xs.to_sparse_csr(host), k=2, tracker=lambda s: (seen.append(s.istep), s.istep == 2 and s.stop()), seed=0)
    assert seen == [1, 2]
    assert "istep=" in repr(LobpcgState(None, None, None, "ortho", {"niter": 1, "n": 1}, {}, {}))


def test_lobpcg_tracker_on_torch_runs_the_generic_kernel() -> None:
    if (reason := backend_skip_reason("torch")) is not None:
        pytest.skip(reason)
    xp = namespace("torch")
    states: list[Any] = []
    e, _ = xs.lobpcg(xs.to_sparse_coo(xp.asarray(_spectrum_matrix(24, 1))), k=1, tracker=states.append, seed=0)
    assert states and all(isinstance(s, LobpcgState) for s in states)
    np.testing.assert_allclose(to_numpy(e), [24.0], rtol=1e-7)


def test_lobpcg_torch_kernel_declines_what_it_would_mean_differently() -> None:
    if (reason := backend_skip_reason("torch")) is not None:
        pytest.skip(reason)
    xp = namespace("torch")
    (kernel,) = [k for k in xs.kernels("lobpcg") if k.backend == "torch"]
    assert kernel.supports is not None
    a = xs.to_sparse_coo(xp.asarray(_spectrum_matrix(12, 1)))
    ik = xp.eye(12, dtype=xp.float64)
    plain = LobpcgOptions("ortho", None, ORTHO_IPARAMS, dict.fromkeys(ORTHO_FPARAMS, 1e-8), ORTHO_BPARAMS)
    args = (1, None, None, 1, None, 10, 1e-8, True)
    assert kernel.supports(xp, a, *args, plain, 0) is None
    assert "tracker" in kernel.supports(xp, a, *args, LobpcgOptions("basic", print), 0)
    assert "iK" in kernel.supports(xp, a, 1, None, None, 1, ik, 10, 1e-8, True, plain, 0)
    assert kernel.supports(xp, a, 1, None, None, 1, ik, 10, 1e-8, True, LobpcgOptions("basic"), 0) is None
    drop = LobpcgOptions("ortho", None, ORTHO_IPARAMS, dict.fromkeys(ORTHO_FPARAMS, 1e-8), {"ortho_use_drop": True})
    assert "ortho_use_drop" in kernel.supports(xp, a, *args, drop, 0)
    # torch's ortho variant keeps no eigenvalues from its first step: after one iteration it returned zeros
    one = (1, None, None, 1, None, 1, 1e-8, True)
    assert kernel.supports(xp, a, *one, plain, 0) == "torch's method='ortho' returns zeros for the eigenvalues after one iteration"
    assert kernel.supports(xp, a, *one, LobpcgOptions("basic"), 0) is None
    e_coo, _ = xs.lobpcg(a, k=1, niter=1, seed=0)
    e_csr, _ = xs.lobpcg(xs.to_sparse_csr(a), k=1, niter=1, seed=0)
    assert float(e_coo[0]) != 0 and np.allclose(to_numpy(e_coo), to_numpy(e_csr))


@pytest.mark.parametrize(
    ("iparams", "fparams", "bparams"),
    [
        ({"ortho_i_max": 1, "ortho_j_max": 1}, None, None),
        (None, {"ortho_tol": 1e-12, "ortho_tol_drop": 1e-10, "ortho_tol_replace": 1e-10}, {"ortho_use_drop": True}),
        ({"ortho_j_max": 5}, {"ortho_tol": 1e-6}, {"ortho_use_drop": False}),
    ],
)
def test_lobpcg_ortho_parameters(iparams: Any, fparams: Any, bparams: Any) -> None:
    host = _spectrum_matrix(30, 2)
    ik = np.diag(1 / np.diag(host))  # a Jacobi preconditioner, applied by both methods
    states: list[dict[str, Any]] = []

    def tracker(state: LobpcgState) -> None:
        states.append({"i": dict(state.iparams), "f": dict(state.fparams), "b": dict(state.bparams), "fvars": dict(state.fvars), "ivars": dict(state.ivars)})

    e, x = xs.lobpcg(xs.to_sparse_csr(host), k=2, iK=xs.to_sparse_csr(ik), largest=False, tracker=tracker, seed=3,
                     ortho_iparams=iparams, ortho_fparams=fparams, ortho_bparams=bparams)  # fmt: skip
    np.testing.assert_allclose(e, [1.0, 2.0], rtol=1e-7)
    last = states[-1]
    for given, got in ((iparams, last["i"]), (fparams, last["f"]), (bparams, last["b"])):
        assert given is None or given.items() <= got.items()
    assert last["i"]["ortho_i_max"] == (iparams or {}).get("ortho_i_max", 3)
    assert last["f"]["ortho_tol_replace"] == (fparams or {}).get("ortho_tol_replace", np.finfo(np.float64).eps ** 0.5)
    assert any(key.startswith("ortho_VBU_rerr") for key in states[1]["fvars"])
    assert states[1]["ivars"]["ortho_i"] < last["i"]["ortho_i_max"] and states[1]["ivars"]["ortho_j"] < last["i"]["ortho_j_max"]


def test_lobpcg_methods_with_mass_matrix_and_preconditioner() -> None:
    import scipy.linalg

    host = _spectrum_matrix(27, 5)
    mass = np.diag(np.linspace(1.0, 3.0, 27))
    expected = scipy.linalg.eigh(host, mass, eigvals_only=True)
    for method in ("basic", "ortho"):
        e, x = xs.lobpcg(xs.to_sparse_csc(host), k=2, B=xs.to_sparse_coo(mass), iK=np.eye(27), method=method, seed=7)
        np.testing.assert_allclose(e, expected[::-1][:2], rtol=1e-7)
        np.testing.assert_allclose(x.T @ mass @ x, np.eye(2), atol=1e-8)


def test_decompositions_public() -> None:
    host = low_rank(1)
    u, s, v = xs.svd_lowrank(xs.to_sparse_csr(host), q=4, seed=3)
    np.testing.assert_allclose(u @ np.diag(s) @ v.T, host, atol=1e-8)
    m = np.ones((1, 9))
    u, s, v = xs.svd_lowrank(xs.to_sparse_coo(host), q=5, M=m, seed=3)  # host - m has rank 5
    np.testing.assert_allclose(s, np.linalg.svd(host - m, compute_uv=False)[:5], rtol=1e-8)
    np.testing.assert_allclose(u @ np.diag(s) @ v.T, host - m, atol=1e-8)
    u, s, v = xs.pca_lowrank(xs.to_sparse_csc(host), q=4, seed=3, layout=xs.sparse_coo)
    assert u.layout is xs.sparse_coo
    e, x = xs.lobpcg(host @ host.T, k=1, seed=0)
    np.testing.assert_allclose(e, [64.0], rtol=1e-8)


# -- regressions: operands, arguments and backends of the decompositions ----------------------------------------


def _needs_torch() -> None:
    if (reason := backend_skip_reason("torch")) is not None:
        pytest.skip(reason)


def _sym12() -> np.ndarray:
    a = np.diag(np.arange(1.0, 13.0))
    a[0, 5] = a[5, 0] = 0.5
    return a


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch", "array_api_strict"]))
@pytest.mark.parametrize("operand", ["B", "iK"])
def test_lobpcg_reads_the_fill_value_of_every_operand(backend: str, operand: str) -> None:
    import scipy.linalg

    xp = namespace(backend)
    host_a = np.diag(np.arange(1.0, 13.0))
    mass = np.full((12, 12), 0.1) + np.eye(12)
    a = xs.to_sparse_coo(xp.asarray(host_a))
    b = xs.to_sparse_coo(xp.asarray(mass), fill_value=0.1)  # only the diagonal is specified
    if operand == "B":
        e, x = xs.lobpcg(a, k=2, B=b, seed=0)
        expected = scipy.linalg.eigh(host_a, mass, eigvals_only=True)[::-1][:2]
        np.testing.assert_allclose(to_numpy(e), expected, rtol=1e-7)
        np.testing.assert_allclose(to_numpy(x).T @ mass @ to_numpy(x), np.eye(2), atol=1e-8)
    else:
        # the preconditioner changes the iteration, not the answer; with method="basic" torch's kernel takes iK
        e, _ = xs.lobpcg(a, k=2, iK=b, method="basic", seed=0)
        np.testing.assert_allclose(to_numpy(e), [12.0, 11.0], rtol=1e-7)


def test_lobpcg_torch_kernel_declines_operands_it_would_misread() -> None:
    _needs_torch()
    xp = namespace("torch")
    (kernel,) = [k for k in xs.kernels("lobpcg") if k.backend == "torch"]
    (svd,) = [k for k in xs.kernels("svd_lowrank") if k.backend == "torch"]
    assert kernel.supports is not None and svd.supports is not None
    a = xs.to_sparse_coo(xp.asarray(_sym12()))
    plain = LobpcgOptions("ortho", None, ORTHO_IPARAMS, dict.fromkeys(ORTHO_FPARAMS, 1e-8), ORTHO_BPARAMS)
    basic = LobpcgOptions("basic")

    def reason(b: Any = None, x: Any = None, ik: Any = None, options: LobpcgOptions = plain) -> Any:
        return kernel.supports(xp, a, 1, b, x, 2, ik, 10, 1e-8, True, options, 0)

    filled = xs.to_sparse_coo(xp.asarray(np.eye(12)), fill_value=0.5)
    assert "fill value" in reason(b=filled)
    assert "fill value" in reason(ik=filled, options=basic)
    assert "one dtype" in reason(b=xs.to_sparse_coo(xp.eye(12, dtype=xp.float32)))
    assert "one dtype" in reason(x=xp.ones((12, 2), dtype=xp.float32))
    assert "dense dimensions" in reason(b=xs.to_sparse_coo(xp.ones((12, 12, 1), dtype=xp.float64), dense_dim=1))
    assert reason(b=xs.to_sparse_coo(xp.eye(12, dtype=xp.float64)), x=xp.ones((12, 2), dtype=xp.float64)) is None
    assert "one dtype" in svd.supports(xp, a, 2, 2, xp.ones((12, 12), dtype=xp.float32), 0)


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch", "array_api_strict"]))
@pytest.mark.parametrize("niter", [0, -1])
@pytest.mark.parametrize("method", ["basic", "ortho"])
def test_lobpcg_nonpositive_niter_iterates_until_convergence(backend: str, niter: int, method: str) -> None:
    # torch.lobpcg documents niter=-1 as "until convergence", and treats 0 alike
    xp = namespace(backend)
    host_a = _sym12()
    e, _ = xs.lobpcg(xs.to_sparse_csr(xp.asarray(host_a)), k=1, niter=niter, method=method, seed=0)
    np.testing.assert_allclose(to_numpy(e), np.linalg.eigvalsh(host_a)[::-1][:1], rtol=1e-7)
    if backend == "torch":
        import torch

        expected, _ = torch.lobpcg(torch.asarray(host_a), k=1, niter=niter, method=method)
        np.testing.assert_allclose(to_numpy(e), expected.numpy(), rtol=1e-7)


@pytest.mark.parametrize("method", ["basic", "ortho"])
def test_lobpcg_on_torch_leaves_the_callers_x_alone(method: str) -> None:
    _needs_torch()
    import torch

    host_a = _sym12()
    x = torch.asarray(np.random.default_rng(0).standard_normal((12, 2)))
    before = x.clone()
    a = xs.to_sparse_coo(torch.asarray(host_a))
    e1, _ = xs.lobpcg(a, X=x, method=method)
    assert torch.equal(x, before)
    e2, _ = xs.lobpcg(a, X=x, method=method)
    expected = np.linalg.eigvalsh(host_a)[::-1][:2]
    np.testing.assert_allclose(to_numpy(e1), expected, rtol=1e-7)
    np.testing.assert_allclose(to_numpy(e2), to_numpy(e1), rtol=1e-12)


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch", "array_api_strict"]))
def test_lobpcg_basic_breakdown_is_reported_on_every_backend(backend: str) -> None:
    xp = namespace(backend)
    x0 = np.column_stack([np.random.default_rng(0).standard_normal(12), np.eye(12)[:, 10]])
    a = xs.to_sparse_coo(xp.asarray(_sym12()))
    with pytest.raises(ValueError, match=r"^lobpcg: method='basic' broke down at step \d+: .*Use method='ortho'"):
        xs.lobpcg(a, X=xp.asarray(x0), method="basic")


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
@pytest.mark.parametrize("m_dtype", ["float32", "int64", "complex128"])
def test_svd_lowrank_promotes_a_mixed_dtype_m(backend: str, m_dtype: str) -> None:
    xp = namespace(backend)
    host_a = np.arange(12.0).reshape(4, 3)
    host_m = np.full((4, 3), 1 + 1j if m_dtype == "complex128" else 1).astype(m_dtype)
    u, s, v = xs.svd_lowrank(xs.to_sparse_coo(xp.asarray(host_a)), q=2, M=xp.asarray(host_m), seed=0)
    expected = host_a - host_m
    np.testing.assert_allclose(to_numpy(s), np.linalg.svd(expected, compute_uv=False)[:2], rtol=1e-6)
    u, s, v = to_numpy(u), to_numpy(s), to_numpy(v)
    # rank 2 exactly: the factors reproduce A - M
    np.testing.assert_allclose(u @ np.diag(s) @ v.conj().T, expected, atol=1e-5)
    assert u.dtype == np.result_type(np.float64, np.float32 if m_dtype == "int64" else m_dtype)


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_svd_lowrank_of_float32_a_and_float64_m_is_float64(backend: str) -> None:
    xp = namespace(backend)
    host_a = np.arange(12.0).reshape(4, 3)
    a = xs.astype(xs.to_sparse_coo(xp.asarray(host_a)), xp.float32)
    u, s, _ = xs.svd_lowrank(a, q=2, M=xp.ones((4, 3), dtype=xp.float64), seed=0)
    assert to_numpy(u).dtype == np.float64
    np.testing.assert_allclose(to_numpy(s), np.linalg.svd(host_a - 1, compute_uv=False)[:2], rtol=1e-6)


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_lobpcg_promotes_mixed_dtypes(backend: str) -> None:
    import scipy.linalg

    xp = namespace(backend)
    host_a = _sym12()
    mass = np.diag(np.linspace(1.0, 2.0, 12))
    a = xs.to_sparse_coo(xp.asarray(host_a))
    e, x = xs.lobpcg(a, X=xp.asarray(np.random.default_rng(1).standard_normal((12, 2)), dtype=xp.float32))
    assert to_numpy(e).dtype == np.float64
    np.testing.assert_allclose(to_numpy(e), np.linalg.eigvalsh(host_a)[::-1][:2], rtol=1e-7)
    e, x = xs.lobpcg(a, k=1, B=xs.astype(xs.to_sparse_coo(xp.asarray(mass)), xp.float32), seed=0)
    np.testing.assert_allclose(to_numpy(e), scipy.linalg.eigh(host_a, mass, eigvals_only=True)[::-1][:1], rtol=1e-6)
    # a float32 A with a float64 B is solved in float64
    e, _ = xs.lobpcg(xs.astype(a, xp.float32), k=1, B=xs.to_sparse_coo(xp.asarray(mass)), seed=0)
    assert to_numpy(e).dtype == np.float64


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_lobpcg_with_a_rank_deficient_x(backend: str) -> None:
    xp = namespace(backend)
    host_a = _sym12()
    e, x = xs.lobpcg(xs.to_sparse_coo(xp.asarray(host_a)), X=xp.ones((12, 2), dtype=xp.float64))
    np.testing.assert_allclose(to_numpy(e), np.linalg.eigvalsh(host_a)[::-1][:2], rtol=1e-7)
    np.testing.assert_allclose(to_numpy(x).T @ to_numpy(x), np.eye(2), atol=1e-8)


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch", "array_api_strict"]))
@pytest.mark.parametrize("method", ["basic", "ortho"])
@pytest.mark.parametrize("mass", ["negative", "indefinite"])
def test_lobpcg_refuses_a_b_that_is_not_positive_definite(backend: str, method: str, mass: str) -> None:
    xp = namespace(backend)
    b = -np.eye(12) if mass == "negative" else np.diag(np.r_[np.ones(8), -np.ones(4)])
    assert np.linalg.eigvalsh(b).min() < 0
    a = xs.to_sparse_coo(xp.asarray(_sym12()))
    with pytest.raises(ValueError, match=r"^lobpcg: (B is not positive definite|method='basic' broke down .*B is not positive definite)") as info:
        xs.lobpcg(a, k=2, B=xs.to_sparse_coo(xp.asarray(b)), method=method, seed=0)
    assert MESSAGE_SHAPE.fullmatch(str(info.value)), str(info.value)


def test_decompositions_refuse_operands_of_another_backend() -> None:
    _needs_torch()
    import torch

    a = xs.to_sparse_coo(_sym12())
    move = r"live on different backends \('numpy', 'torch'\)\. Move them to one, e\.g\. xsparse\.to_backend"
    with pytest.raises(xs.BackendMismatchError, match=r"^svd_lowrank: the operands " + move):
        xs.svd_lowrank(a, q=2, M=torch.ones(12, 12, dtype=torch.float64))
    with pytest.raises(xs.BackendMismatchError, match=r"^lobpcg: the operands " + move):
        xs.lobpcg(a, X=torch.ones(12, 2, dtype=torch.float64))
    with pytest.raises(xs.BackendMismatchError, match=r"^lobpcg: the operands " + move):
        xs.lobpcg(a, k=1, B=xs.to_sparse_coo(torch.eye(12, dtype=torch.float64)))


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_decomposition_arguments_are_checked_alike_on_every_backend(backend: str) -> None:
    xp = namespace(backend)
    a = xs.to_sparse_coo(xp.asarray(low_rank(0)))
    for q, what in ((2.0, "got float"), (True, "not a bool")):
        with pytest.raises(TypeError, match=rf"^svd_lowrank: q must be an integer, {what} \(q={q!r}\)\. Pass an integer\.$"):
            xs.svd_lowrank(a, q=q)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^pca_lowrank: seed must be None, a non-negative int, .*\(seed='abc'\)\. Pass an integer"):
        xs.pca_lowrank(a, q=2, seed="abc")
    with pytest.raises(ValueError, match=r"^svd_lowrank: niter must be at least 0 \(niter=-1\)\. Pass"):
        xs.svd_lowrank(a, q=2, niter=-1)
    # a NumPy integer is an int, as NumPy's own functions take it
    _, s, _ = xs.svd_lowrank(a, q=np.int64(4), niter=np.int64(2), seed=np.int64(0))
    np.testing.assert_allclose(to_numpy(s), np.linalg.svd(low_rank(0), compute_uv=False)[:4], rtol=1e-8)


def test_svd_lowrank_m_without_batch_dimensions() -> None:
    host = low_rank(0)
    with pytest.raises(ValueError, match=r"^svd_lowrank: M must broadcast to A's shape without batch dimensions \(M\.shape=\(2, 12, 9\), A\.shape=\(12, 9\)\)\. Pass a 2-D M\.$"):
        xs.svd_lowrank(xs.to_sparse_coo(host), q=2, M=np.ones((2, 12, 9)))
    # a row of column means still broadcasts
    _, s, _ = xs.svd_lowrank(xs.to_sparse_coo(host), q=4, M=host.mean(axis=0), seed=0)
    np.testing.assert_allclose(s, np.linalg.svd(host - host.mean(axis=0), compute_uv=False)[:4], rtol=1e-8)


# -- errors ----------------------------------------------------------------------------------------------------

_A = xs.sparse_csr_array([0, 1, 2], [0, 1], [1.0, 2.0], (2, 2))


# a fill value other than 0: products of two such arrays are refused, in errors that name the function called
_F = xs.to_sparse(np.asarray([[0.0, 1.5, 0.0, 2.0], [3.0, 0.0, 0.0, 0.0]]), fill_value=1.5)


def _strict_ones(n: int) -> Any:
    return xs.to_backend(np.ones(n), "array_api_strict")

_D = np.ones((2, 2))
_E6 = xs.to_sparse_csr(np.diag(np.arange(1.0, 7.0)))
ERRORS: list[tuple[Any, type[BaseException], str]] = [
    (lambda: xs.matmul(_A, [1.0, 2.0]), TypeError, r"^matmul: x2 must be an xsparse array or a backend array, got list\. Wrap"),
    (lambda: xs.matmul(_A, np.ones(3)), ValueError, r"^matmul: the contracted dimensions differ \(x1\.shape=\(2, 2\), x2\.shape=\(3,\): 2 != 3\)\. Give x1's"),
    (lambda: xs.matmul(_A, np.asarray(1.0)), ValueError, r"^matmul: both operands need at least one dimension \(x1\.shape=\(2, 2\), x2\.shape=\(\)\)\. Multiply"),
    (lambda: xs.matmul(xs.to_sparse_coo(np.ones((3, 2, 2))), np.ones((2, 2, 2))), ValueError, r"^matmul: the batch dimensions do not broadcast \(\(3,\), \(2,\)\)\. Make each size"),
    (lambda: xs.matmul(xs.sparse_coo_array([[0]], [True], (2,)), np.ones(2)), TypeError, r"^matmul: x1 has a boolean dtype \(x1\.dtype=bool\); products are defined for numeric dtypes\. Convert"),
    (lambda: xs.mm(_A, np.ones(2)), ValueError, r"^mm: mat2 must be 2-D \(mat2\.shape=\(2,\)\)\. Use xsparse\.matmul"),
    (lambda: xs.mm(_A, _D, reduce="max"), ValueError, r"^mm: reduce must be one of 'sum', 'mean', 'amax', 'amin' or None \(reduce='max'\)\. Pick one"),
    (lambda: xs.mm(_D, _A, reduce="sum"), TypeError, r"^mm: reduce= needs a sparse first and a strided second operand \(layouts=\(strided, sparse_csr\)\)\. Convert"),
    (lambda: xs.mv(_A, _D), ValueError, r"^mv: vec must be 1-D \(vec\.shape=\(2, 2\)\)\. Use"),
    (lambda: xs.bmm(xs.to_sparse_coo(np.ones((2, 2, 2))), np.ones((3, 2, 2))), ValueError, r"^bmm: the batch sizes differ \(input\.shape=\(2, 2, 2\), mat2\.shape=\(3, 2, 2\)\)\. Pass batches of one size"),
    (lambda: xs.addmm(_A, _A, _D), TypeError, r"^addmm: input must be strided \(input layout=sparse_csr\)\. For a sparse input .*sspaddmm"),
    (lambda: xs.addmm(np.ones((3, 2)), _A, _D), ValueError, r"^addmm: input \(input\.shape=\(3, 2\)\) must broadcast to the product's shape \(2, 2\)\. Pass"),
    (lambda: xs.sampled_addmm(xs.to_sparse_csr(np.ones((2, 2, 2))), np.ones((3, 2, 2)), np.ones((2, 2))), ValueError, r"^sampled_addmm: mat1 @ mat2 \(shape \(3, 2, 2\)\) must broadcast to input's shape"),
    (lambda: xs.addmm(np.ones(2), _A, _D, alpha="2"), TypeError, r"^addmm: alpha must be a Python number, got str \(alpha='2'\)\. Pass"),
    (lambda: xs.addmm(np.ones(2, dtype=np.int64), xs.sparse_csr_array([0, 1], [0], [1], (1, 2)), np.ones((2, 2), dtype=np.int64), beta=0.5), TypeError, r"^addmm: beta must be an integer for operands of an integer dtype \(beta=0\.5\)\. Pass"),
    (lambda: xs.addmm(np.ones(2), _A, _D, beta=1j), TypeError, r"^addmm: beta is complex but the operands are real \(beta=1j\)\. Pass a real"),
    (lambda: xs.addmm(np.ones((2, 2)), _A, np.ones((3, 2))), ValueError, r"^addmm: the contracted dimensions differ \(mat1\.shape=\(2, 2\), mat2\.shape=\(3, 2\): 2 != 3\)"),
    (lambda: xs.sampled_addmm(_D, _D, _D), TypeError, r"^sampled_addmm: input must be sparse and mat1, mat2 strided \(layouts=\(strided, strided, strided\)\)\. Convert"),
    (lambda: xs.sampled_addmm(_A, np.ones(2), _D), ValueError, r"^sampled_addmm: input, mat1 and mat2 must be \(batched\) matrices .*\. Add the missing"),
    (lambda: xs.addmm(np.ones((3, 1, 2)), _A, _D), ValueError, r"^addmm: input \(input\.shape=\(3, 1, 2\)\) must broadcast to the product's shape \(2, 2\)\. Pass"),
    (lambda: xs.sampled_addmm(_A, np.ones((3, 2)), _D), ValueError, r"^sampled_addmm: mat1 @ mat2 \(shape \(3, 2\)\) must broadcast to input's shape \(input\.shape=\(2, 2\)\)\. Give"),
    (lambda: xs.smm(_D, _D), TypeError, r"^smm: input must be sparse and mat strided \(layouts=\(strided, strided\)\)\. Convert"),
    (lambda: xs.hspmm(_A, np.ones((3, 2))), ValueError, r"^hspmm: the contracted dimensions differ"),
    (lambda: xs.sspaddmm(_D, _A, _D), TypeError, r"^sspaddmm: input must be sparse \(input layout=strided\)\. For a strided input use xsparse\.addmm\."),
    (lambda: xs.sspaddmm(xs.to_sparse_coo(np.ones((3, 2))), _A, _D), ValueError, r"^sspaddmm: input must have the product's shape \(2, 2\) \(input\.shape=\(3, 2\)\)\. Pass"),
    (lambda: xs.tensordot(_A, _D, axes=3), ValueError, r"^tensordot: axes=3 must lie in \[0, 2\] \(x1\.shape=\(2, 2\), x2\.shape=\(2, 2\)\)\. Pass fewer"),
    (lambda: xs.tensordot(_A, _D, axes=([0], [0, 1])), ValueError, r"^tensordot: axes must be an int or two sequences of equal length \(axes=\(\[0\], \[0, 1\]\)\)\. Pass"),
    (lambda: xs.tensordot(_A, _D, axes=([0, 0], [0, 1])), ValueError, r"^tensordot: an axis is repeated \(axes=\(\[0, 0\], \[0, 1\]\)\)\. Name each axis once\."),
    (lambda: xs.tensordot(_A, _D, axes=([5], [0])), ValueError, r"^tensordot: axis 5 is out of range for 2 dimensions \(axis=5, ndim=2\)\. Pass an axis"),
    (lambda: xs.tensordot(_A, np.ones((3, 2)), axes=([0], [0])), ValueError, r"^tensordot: contracted dimensions differ in size \(x1\.shape=\(2, 2\) axis 0, x2\.shape=\(3, 2\) axis 0\)\. Contract"),
    (lambda: xs.vecdot(_A, np.asarray(1.0)), ValueError, r"^vecdot: both operands need at least one dimension \(x1\.shape=\(2, 2\), x2\.shape=\(\)\)\. Use"),
    (lambda: xs.vecdot(_A, np.ones(2), axis=-2), ValueError, r"^vecdot: axis -2 is not a dimension of both operands \(x1\.shape=\(2, 2\), x2\.shape=\(2,\)\)\. Pass an axis in \[-1, -1\]\."),
    (lambda: xs.vecdot(_A, np.ones((2, 3)), axis=0), ValueError, r"^vecdot: the shapes do not broadcast"),
    (lambda: xs.vecdot(_A, np.ones((3, 2)), axis=0), ValueError, r"^vecdot: the shapes do not broadcast"),
    (lambda: xs.vecdot(xs.to_sparse_coo(np.ones((2, 1))), np.ones((2, 3)), axis=-1), ValueError, r"^vecdot: the vectors differ in length along axis -1 \(x1\.shape=\(2, 1\), x2\.shape=\(2, 3\)\)\. Pass"),
    (lambda: xs.linalg.vecdot(_F, _F), xs.NoKernelError, r"^vecdot: no kernel for layouts \(sparse_coo, sparse_coo\) on backend 'numpy'\. .*declined: vecdot of two sparse arrays is sparse only with fill values 0, got 1\.5 and 1\.5\."),
    (lambda: xs.linalg.tensordot(_F, _F, axes=([1], [1])), xs.NoKernelError, r"^tensordot: no kernel for layouts \(sparse_coo, sparse_coo\) on backend 'numpy'\. .*declined: tensordot of two sparse arrays is sparse only"),
    (lambda: xs.spsolve(_A, _A), TypeError, r"^spsolve: B must be strided \(B layout=sparse_csr\)\. Pass xsparse\.to_dense\(B\)\."),
    (lambda: xs.spsolve(xs.to_sparse_csr(np.ones((2, 3))), np.ones(2)), ValueError, r"^spsolve: A must be a square matrix \(A\.shape=\(2, 3\)\)\. Pass an \(N, N\) system\."),
    (lambda: xs.spsolve(xs.sparse_csr_array([0, 1, 2], [0, 1], [1, 2], (2, 2)), np.ones(2)), TypeError, r"^spsolve: A must have a floating or complex dtype \(A\.dtype=int64\)\. Convert"),
    (lambda: xs.spsolve(xs.to_backend(xs.sparse_csr_array([0, 1, 2], [0, 1], [1, 2], (2, 2)), "array_api_strict"), _strict_ones(2)), TypeError, r"^spsolve: A must have a floating or complex dtype \(A\.dtype=int64\)\. Convert"),
    (lambda: xs.spsolve(_A, np.ones(3)), ValueError, r"^spsolve: B must be \(2,\) or \(2, K\) for A of shape \(2, 2\) \(B\.shape=\(3,\)\)\. Pass"),
    (lambda: xs.spsolve(_A, np.ones((2, 3)), left=False), ValueError, r"^spsolve: B must be \(2,\) or \(K, 2\) for A of shape \(2, 2\) \(B\.shape=\(2, 3\)\)\. Pass"),
    (lambda: xs.svd_lowrank(xs.to_sparse_coo(np.ones((2, 2, 2)))), ValueError, r"^svd_lowrank: A must be 2-D \(A\.shape=\(2, 2, 2\)\)\. Decompose"),
    (lambda: xs.svd_lowrank(xs.sparse_csr_array([0, 1], [0], [1], (1, 1)), q=1), TypeError, r"^svd_lowrank: A must have a floating or complex dtype \(A\.dtype=int64\), or another operand one, whose dtype it then takes\. Convert"),
    (lambda: xs.svd_lowrank(_A, q=3), ValueError, r"^svd_lowrank: q must lie in \[1, min\(A\.shape\)\] \(q=3, A\.shape=\(2, 2\)\)\. Ask for a smaller rank\."),
    (lambda: xs.svd_lowrank(_A, q=1, M=_A), TypeError, r"^svd_lowrank: M must be strided \(M layout=sparse_csr\)\. Pass xsparse\.to_dense\(M\)\."),
    (lambda: xs.pca_lowrank(_A, q=0), ValueError, r"^pca_lowrank: q must lie in \[1, min\(A\.shape\)\] \(q=0, A\.shape=\(2, 2\)\)\."),
    (lambda: xs.lobpcg(xs.to_sparse_csr(np.ones((6, 3)))), ValueError, r"^lobpcg: A must be square \(A\.shape=\(6, 3\)\)\. Pass a symmetric matrix\."),
    (lambda: xs.lobpcg(_A), ValueError, r"^lobpcg: LOBPCG needs at least 3 \* n rows \(A\.shape=\(2, 2\), n=1\)\. Ask for fewer"),
    (lambda: xs.lobpcg(xs.to_sparse_csr(np.eye(6)), k=3, n=2), ValueError, r"^lobpcg: k must lie in \[1, n\] \(k=3, n=2\)\. Ask for at most n eigenpairs\."),
    (lambda: xs.lobpcg(xs.to_sparse_csr(np.eye(6)), B=np.eye(5)), ValueError, r"^lobpcg: B must have A's shape \(B\.shape=\(5, 5\), A\.shape=\(6, 6\)\)\. Pass a \(6, 6\) matrix\."),
    (lambda: xs.lobpcg(xs.to_sparse_csr(np.eye(6)), X=np.ones((5, 1))), ValueError, r"^lobpcg: X must be a strided \(6, n\) array \(X\.shape=\(5, 1\)\)\. Pass one column"),
    (lambda: xs.lobpcg(_E6, method="lanczos"), ValueError, r"^lobpcg: method must be 'basic', 'ortho' or None \(method='lanczos'\)\. Pick one"),
    (lambda: xs.lobpcg(_E6, tracker=3), TypeError, r"^lobpcg: tracker must be callable or None \(tracker=3\)\. Pass a function"),
    (lambda: xs.lobpcg(_E6, ortho_iparams=[1]), TypeError, r"^lobpcg: ortho_iparams must be a dict or None \(ortho_iparams=\[1\]\)\. Pass a dict"),
    (lambda: xs.lobpcg(_E6, method="basic", ortho_fparams={"ortho_tol": 1e-3}), ValueError, r"^lobpcg: ortho_fparams apply to method='ortho' only \(method='basic'\)\. Leave them out"),
    (lambda: xs.lobpcg(_E6, ortho_iparams={"niter": 3}), ValueError, r"^lobpcg: ortho_iparams has an unknown key \('niter'\)\. Use 'ortho_i_max', 'ortho_j_max'\."),
    (lambda: xs.lobpcg(_E6, ortho_iparams={"ortho_i_max": 0}), ValueError, r"^lobpcg: ortho_iparams\['ortho_i_max'\] must be a positive integer \(ortho_i_max=0\)\. Pass"),
    (lambda: xs.lobpcg(_E6, ortho_fparams={"ortho_tol": -1.0}), ValueError, r"^lobpcg: ortho_fparams\['ortho_tol'\] must be a positive finite number \(ortho_tol=-1\.0\)\."),
    (lambda: xs.lobpcg(_E6, ortho_bparams={"ortho_use_drop": 1}), ValueError, r"^lobpcg: ortho_bparams\['ortho_use_drop'\] must be a bool \(ortho_use_drop=1\)\."),
    (lambda: xs.lobpcg(_E6, X=np.ones((6, 2)), method="basic"), ValueError, r"^lobpcg: method='basic' broke down at step 1: the Gram matrix of the search basis is not positive definite \(.*\)\. Use method='ortho'"),
    (lambda: xs.lobpcg(_E6, tol=0), ValueError, r"^lobpcg: tol must be positive \(tol=0\); no pair would ever converge\. Pass a positive float"),
    (lambda: xs.lobpcg(_E6, tol=-1.0), ValueError, r"^lobpcg: tol must be positive \(tol=-1\.0\);"),
    (lambda: xs.lobpcg(_E6, tol="1e-8"), TypeError, r"^lobpcg: tol must be a real number, got str \(tol='1e-8'\)\. Pass a positive float"),
    (lambda: xs.lobpcg(_E6, niter=2.5), TypeError, r"^lobpcg: niter must be an integer, got float \(niter=2\.5\)\. Pass an integer\."),
    (lambda: xs.lobpcg(_E6, seed="abc"), TypeError, r"^lobpcg: seed must be None, a non-negative int, a sequence of them or a NumPy Generator \(seed='abc'\)\. Pass"),
    (lambda: xs.lobpcg(_E6, X=np.ones((6, 1), dtype=complex)), TypeError, r"^lobpcg: X's dtype does not fit the problem's \(X\.dtype=complex128, dtype=float64\)\. Pass a real X"),
    (lambda: xs.lobpcg(_E6, k=1, B=xs.to_sparse_csr(np.eye(6, dtype=bool))), TypeError, r"^lobpcg: B has a boolean dtype \(B\.dtype=bool\)\. Convert"),
    (lambda: xs.svd_lowrank(_A, q=2.0), TypeError, r"^svd_lowrank: q must be an integer, got float \(q=2\.0\)\. Pass an integer\."),
    (lambda: xs.svd_lowrank(_A, q=True), TypeError, r"^svd_lowrank: q must be an integer, not a bool \(q=True\)\. Pass an integer\."),
    (lambda: xs.svd_lowrank(_A, q=1, niter=-1), ValueError, r"^svd_lowrank: niter must be at least 0 \(niter=-1\)\. Pass the number of subspace iterations"),
    (lambda: xs.svd_lowrank(_A, q=1, seed=-1), TypeError, r"^svd_lowrank: seed must be None, a non-negative int"),
    (lambda: xs.pca_lowrank(_A, q=1, niter=1.5), TypeError, r"^pca_lowrank: niter must be an integer, got float \(niter=1\.5\)\."),
    (lambda: xs.lobpcg(_E6, X=np.zeros((6, 2))), ValueError, r"^lobpcg: the initial X has a zero column \(X\.shape=\(6, 2\)\)\. Pass linearly independent"),
    (lambda: xs.kron(xs.to_sparse_coo(np.eye(2), fill_value=1.0), _D), xs.NoKernelError, r"^kron: no kernel for layouts \(sparse_coo, strided\) on backend 'numpy'\..*sparse only with fill value 0, got 1\.0"),
    (lambda: xs.kron(np.eye(2, dtype=bool), _A), TypeError, r"^kron: x1 has a boolean dtype \(x1\.dtype=bool\); products are defined for numeric dtypes\. Convert"),
    (lambda: xs.kron([1, 2], _A), TypeError, r"^kron: x1 must be an xsparse array or a backend array, got list\. Wrap"),
    (lambda: xs.kron(xs.sparse_coo_array([[0]], [1.0], (2**40,)), xs.sparse_coo_array([[0]], [1.0], (2**40,))), ValueError, r"^kron: the result would have a dimension of 1208925819614629174706176 elements, more than int64 indices address \(x1\.shape=\(1099511627776,\), x2\.shape=\(1099511627776,\)\)\. Multiply smaller arrays\."),
    (lambda: xs.matmul(xs.to_sparse_csr(np.ones((2, 2, 2)), dense_dim=1), np.ones((1, 2, 2))), xs.NoKernelError, r"^matmul: no kernel for layouts \(sparse_csr, strided\) on backend 'numpy'\..*a batched strided operand against a sparse array contracted over a dense dimension"),
]


@pytest.mark.parametrize(("fn", "exc", "match"), ERRORS)
def test_error_message(fn: Any, exc: type[BaseException], match: str) -> None:
    with pytest.raises(exc, match=match) as info:
        fn()
    if not isinstance(info.value, xs.NoKernelError):
        assert MESSAGE_SHAPE.fullmatch(str(info.value)), str(info.value)


def test_kernels_are_registered_for_every_operation() -> None:
    ops = ("matmul", "addmm", "sampled_addmm", "matmul_reduce", "smm", "hspmm", "sspaddmm", "tensordot", "kron", "vecdot", "spsolve", "svd_lowrank", "pca_lowrank", "lobpcg")
    for op in ops:
        generic = [k for k in xs.kernels(op) if k.backend is None]
        assert generic, f"{op} has no generic kernel"
        if HAS_TORCH:
            assert any(k.backend == "torch" for k in xs.kernels(op)) or op in ("tensordot", "kron", "vecdot"), f"{op} has no torch kernel"
    assert dispatch.ambiguities() == []


def test_generic_matmul_covers_every_indexed_layout() -> None:
    for la in INDEXED:
        for sig in ((la, xs.strided), (xs.strided, la), (la, la)):
            assert any(k.backend is None for k in dispatch.resolve("matmul", sig, "array_api_strict")), sig


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_integer_scalars_out_of_the_dtype_range_are_refused_on_every_layout(backend: str) -> None:
    # torch's COO addmm raised its own RuntimeError, its CSR addmm and NumPy wrapped (alpha=1000 in int8)
    xp = namespace(backend)
    c = xp.ones((2, 2), dtype=xp.int8)
    a = xp.asarray([[1, 0], [0, 2]], dtype=xp.int8)
    for layout in [xs.strided, *SPARSE]:
        m = a if layout is xs.strided else xs.to_sparse(a, layout=layout, blocksize=(1, 1) if layout.is_blocked else None)
        for kwargs in ({"alpha": 1000}, {"beta": -129}, {"alpha": 2**70}):
            name, value = next(iter(kwargs.items()))
            with pytest.raises(OverflowError, match=rf"^addmm: {name} does not fit the operands' dtype int8, \[-128, 127\] \({name}={value}\)\. Pass a value"):
                xs.addmm(c, m, c, **kwargs)
    coo = xs.to_sparse_coo(a)
    with pytest.raises(OverflowError, match=r"^sspaddmm: alpha does not fit the operands' dtype int8"):
        xs.sspaddmm(xs.to_sparse_coo(c), coo, c, alpha=1000)
    with pytest.raises(OverflowError, match=r"^sampled_addmm: beta does not fit the operands' dtype int8"):
        xs.sampled_addmm(xs.to_sparse_csr(c), a, c, beta=128)
    # the edges of the range are accepted, and the result is the dense one
    got = xs.addmm(c, xs.to_sparse_csr(a), c, beta=-128, alpha=127)
    np.testing.assert_array_equal(host(got), host(xs.addmm(c, a, c, beta=-128, alpha=127)))


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_sampled_addmm_of_integer_operands_with_the_default_scalars(backend: str) -> None:
    # the defaults were beta=1.0, alpha=1.0, which integer operands refuse
    xp = namespace(backend)
    m = xp.asarray([[1, 0], [0, 1]], dtype=xp.int64)
    a = xp.asarray([[1, 2], [3, 4]], dtype=xp.int64)
    for layout in (xs.sparse_csr, xs.sparse_coo):
        r = xs.sampled_addmm(xs.to_sparse(m, layout=layout), a, a)
        assert r.dtype == xp.int64
        np.testing.assert_array_equal(host(r), (host(m) + host(a) @ host(a)) * host(m))


def test_kinds_that_array_api_strict_does_not_mix_are_refused_by_name() -> None:
    xp = namespace("array_api_strict") if backend_skip_reason("array_api_strict") is None else pytest.skip("no array_api_strict")
    i, f = xp.ones((2, 2), dtype=xp.int32), xp.ones((2, 2), dtype=xp.float32)
    csr, coo = xs.to_sparse_csr(i), xs.to_sparse_coo(i)
    calls = {
        "matmul": lambda: csr @ f, "vecdot": lambda: xs.vecdot(csr, f), "tensordot": lambda: xs.tensordot(f, csr, axes=1),
        "addmm": lambda: xs.addmm(f, csr, f), "sampled_addmm": lambda: xs.sampled_addmm(xs.to_sparse_csr(f), i, f),
        "mm": lambda: xs.mm(coo, f), "smm": lambda: xs.smm(coo, f), "hspmm": lambda: xs.hspmm(coo, f),
        "sspaddmm": lambda: xs.sspaddmm(coo, coo, f), "outer": lambda: xs.linalg.outer(xs.to_sparse_coo(i[0, :]), f[0, :]),
    }  # fmt: skip
    for name, call in calls.items():
        with pytest.raises(TypeError, match=rf"^{name}: backend 'array_api_strict' does not promote these dtypes together \(.*(int32|float32).*(int32|float32).*\)\. Cast an operand"):
            call()


def test_torch_spgemm_results_are_sorted_only_where_needed() -> None:
    # torch's CPU SpGEMM (MKL) leaves a row's columns in any order, cuSPARSE's writes them sorted: the
    # components come back sorted either way, and a product already sorted is returned as it is (no sort)
    torch = pytest.importorskip("torch")
    from xsparse.backends.torch.linalg import _sorted_csr

    dense = torch.tensor([[0.0, 1.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 4.0, 5.0], [6.0, 0.0, 0.0, 0.0]])
    crow = torch.tensor([0, 2, 2, 5, 6])
    for cols, vals, sorted_already in (
        ([1, 2, 0, 2, 3, 0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], True),
        ([2, 1, 3, 0, 2, 0], [2.0, 1.0, 5.0, 3.0, 4.0, 6.0], False),
    ):
        col = torch.tensor(cols)
        r = torch.sparse_csr_tensor(crow, col, torch.tensor(vals), (4, 4), check_invariants=False)
        out_crow, out_col, out_vals = _sorted_csr(r)
        assert out_col.tolist() == [1, 2, 0, 2, 3, 0] and out_vals.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert (out_col.data_ptr() == r.col_indices().data_ptr()) is sorted_already
        back = torch.sparse_csr_tensor(out_crow, out_col, out_vals, (4, 4), check_invariants=True)
        assert torch.equal(back.to_dense(), dense)


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 4), min_size=1, max_size=7), n=st.integers(1, 6), shuffle=st.booleans(),
    index_dtype=st.sampled_from(["int32", "int64"]), seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_torch_spgemm_sortedness_check_on_random_rows(counts: list[int], n: int, shuffle: bool, index_dtype: str, seed: int) -> None:
    # rows of random lengths (empty ones first, last and between), each row's distinct columns in order or
    # shuffled: the check finds exactly the products that need sorting, and the components come back sorted
    torch = pytest.importorskip("torch")
    from xsparse.backends.torch.linalg import _sorted_csr

    rng = np.random.default_rng(seed)
    rows = [np.sort(rng.choice(n, size=min(c, n), replace=False)) for c in counts]
    if shuffle:
        rows = [rng.permutation(r) for r in rows]
    crow = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    col = np.concatenate(rows).astype(np.int64)
    vals = rng.standard_normal(col.size)
    needs_sort = any(np.any(np.diff(r) < 0) for r in rows)
    idt = getattr(torch, index_dtype)
    r = torch.sparse_csr_tensor(torch.tensor(crow, dtype=idt), torch.tensor(col, dtype=idt), torch.tensor(vals), (len(rows), n), check_invariants=False)
    out_crow, out_col, out_vals = _sorted_csr(r)
    assert (out_col.data_ptr() == r.col_indices().data_ptr()) is (not needs_sort or col.size < 2)
    back = torch.sparse_csr_tensor(out_crow, out_col, out_vals, (len(rows), n), check_invariants=True)
    assert torch.equal(back.to_dense(), r.to_dense())


def test_torch_products_keep_one_sparse_tensor_per_array() -> None:
    # building torch's sparse tensor is a sixth of a small SpMV: it is made once per array, for the products
    # on either side, and goes with the array; values with autograd history, and inference mode, keep none
    torch = pytest.importorskip("torch")
    from xsparse.backends.torch import conversion as torch_conversion

    kept = torch_conversion._KEPT
    dense = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]], dtype=torch.float64)
    x, y = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64), torch.tensor([2.0, 5.0], dtype=torch.float64)
    a = xs.to_sparse_csr(dense)
    with torch.inference_mode():
        assert torch.equal(a @ x, dense @ x)
    assert id(a) not in kept, "a tensor made in inference mode cannot be saved for a later backward"
    assert torch.equal(a @ x, dense @ x)
    t = kept[id(a)]
    assert torch.equal(y @ a, y @ dense) and torch.equal(a @ x[:, None], dense @ x[:, None]) and kept[id(a)] is t
    xg = x.clone().requires_grad_(True)
    (a @ xg).sum().backward()  # the kept tensor, saved for the backward of a product outside inference mode
    assert torch.equal(xg.grad, dense.sum(dim=0))
    a.values().requires_grad_(True)  # values that gain autograd history get it in the next product
    (a @ x).sum().backward()
    assert a.values().grad is not None and torch.equal(a.values().grad, torch.tensor([1.0, 3.0, -2.0], dtype=torch.float64))
    key = id(a)
    del a
    gc.collect()
    assert key not in kept, "the entry goes with the array"
    c = xs.to_sparse_coo(dense, index_dtype=torch.int32)  # torch's COO indices are int64: widened once, not per product
    assert torch.equal(c @ x, dense @ x)
    t = kept[id(c)]
    assert t.indices().dtype == torch.int64 and c.indices().dtype == torch.int32
    assert torch.equal(c @ x[:, None], dense @ x[:, None]) and kept[id(c)] is t


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (2, 0, 0), (2, 3, 0)])
def test_matrix_rank_of_matrices_without_rows_or_columns(backend: str, xp: Any, shape: tuple[int, ...]) -> None:
    # the rank is 0 (torch's answer); NumPy's matrix_rank raised on the empty singular values
    x = xp.zeros(shape, dtype=xp.float64)
    for operand in (x, xs.asarray(x, layout=xs.sparse_coo)):
        r = xs.linalg.matrix_rank(operand)
        assert tuple(r.shape) == shape[:-2] and xs.isdtype(r.dtype, "integral")
        assert to_numpy(r).tolist() == np.zeros(shape[:-2], dtype=np.int64).tolist()



def test_products_sum_duplicates_before_they_meet_an_infinity(backend: str, xp: Any) -> None:
    """Duplicates -2 and 4.5 of an uncoalesced COO array mean 2.5: times inf that is inf, where their two
    products with inf add up to NaN. Every product coalesces such an operand first (finite ones need not)."""
    w = xs.sparse_coo_array(xp.asarray([[0, 0]]), xp.asarray([-2.0, 4.5], dtype=xp.float64), (2,))
    m = xs.sparse_coo_array(xp.asarray([[0, 0], [1, 1]]), xp.asarray([-2.0, 4.5], dtype=xp.float64), (2, 2))
    assert not w.is_coalesced() and not m.is_coalesced()
    v = xp.asarray([math.inf, 1.0], dtype=xp.float64)
    col = xp.asarray([[1.0], [math.inf]], dtype=xp.float64)
    for got, want in (
        (xs.matmul(w, v), math.inf),
        (xs.vecdot(w, v), math.inf),
        (xs.tensordot(w, v, axes=1), math.inf),
        (xs.matmul(v, w), math.inf),
        (xs.matmul(m, col), [[math.inf], [0.0]]),
        (xs.mm(m, col), [[math.inf], [0.0]]),
        (xs.to_dense(xs.kron(w, xs.to_sparse(v))), [math.inf, 2.5, 0.0, 0.0]),
    ):
        np.testing.assert_array_equal(to_numpy(got), want)


def test_matrix_rank_reads_rtol_relative_to_the_largest_singular_value(backend: str, xp: Any) -> None:
    # the standard's cutoff is rtol * the largest singular value: 0.2 * 10 = 2 keeps 10 and 4 (jax.numpy's
    # matrix_rank compared with 0.2 itself and counted 3)
    host = np.stack([np.diag([10.0, 4.0, 1.0]), np.diag([1.0, 1e-3, 0.0])])
    x = xp.asarray(host)
    for operand in (x, xs.asarray(x, layout=xs.sparse_coo)):
        assert to_numpy(xs.linalg.matrix_rank(operand, rtol=0.2)).tolist() == [2, 1]
        assert to_numpy(xs.linalg.matrix_rank(operand, rtol=xp.asarray([0.2, 1e-4]))).tolist() == [2, 2]
        assert to_numpy(xs.linalg.matrix_rank(operand)).tolist() == [3, 2]
    with pytest.raises(TypeError, match=r"^matrix_rank: x must have a floating-point dtype"):
        xs.linalg.matrix_rank(xp.ones((2, 2), dtype=xp.int64), rtol=0.1)


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc], ids=str)
def test_sampled_addmm_and_addmm_with_non_finite_scalars(backend: str, xp: Any, layout: xs.Layout) -> None:
    # sampled_addmm's unspecified elements are beta times the input's (NaN for beta = inf or NaN); addmm
    # scales the product by alpha, so alpha = inf times a row summing to 1 is inf, not inf - inf
    mask = xs.to_sparse(xp.asarray([[1.0, 0.0], [0.0, 2.0]], dtype=xp.float64), layout=layout)
    a, b = xp.ones((2, 3), dtype=xp.float64), xp.ones((3, 2), dtype=xp.float64)
    for beta in (math.nan, math.inf):
        r = xs.sampled_addmm(mask, a, b, beta=beta)
        assert math.isnan(r.fill_value)
        assert np.isnan(to_numpy(xs.to_dense(r))[[0, 1], [1, 0]]).all()
    m = xs.to_sparse(xp.asarray([[1.0, 0.0, 0.0], [0.0, 2.0, -1.0]], dtype=xp.float64), layout=layout)
    c = xp.ones((2, 2), dtype=xp.float64)
    assert (to_numpy(xs.addmm(c, m, xp.ones((3, 2), dtype=xp.float64), alpha=math.inf)) == math.inf).all()
    m_t = xs.to_sparse(xp.asarray([[1.0, 0.0], [0.0, 2.0], [0.0, -1.0]], dtype=xp.float64), layout=layout)
    assert (to_numpy(xs.addmm(c, xp.ones((2, 3), dtype=xp.float64), m_t, alpha=math.inf)) == math.inf).all()

def test_solve_and_matrix_power_with_a_nonzero_fill_value(backend: str, xp: Any) -> None:
    # a system with fill value 1.0 is a dense matrix: solved as one (the sparse LU reads unspecified
    # elements as 0, and its decline named spsolve); a power of it has no sparse product, said by
    # matrix_power itself (it named matmul)
    dense = xp.asarray([[2.0, 1.0], [1.0, 3.0]], dtype=xp.float64)
    a = xs.to_sparse_csr(dense, fill_value=1.0)
    assert a.nnz == 2
    b = xp.asarray([3.0, 5.0], dtype=xp.float64)
    np.testing.assert_allclose(to_numpy(xs.linalg.solve(a, b)), np.linalg.solve(to_numpy(dense), to_numpy(b)))
    with pytest.raises(xs.NoKernelError, match=r"^matrix_power: a power of a sparse x is a product of sparse matrices, which needs fill value 0 \(x\.fill_value=1\.0\)\. Compute it on the dense matrix"):
        xs.linalg.matrix_power(a, 2)
    assert xs.linalg.matrix_power(a, 1) is a
    np.testing.assert_array_equal(to_numpy(xs.linalg.matrix_power(xs.to_dense(a), 2)), to_numpy(dense) @ to_numpy(dense))


@pytest.mark.parametrize("backend", BACKENDS)
def test_products_with_a_fill_value_use_the_values_as_they_are(backend: str) -> None:
    # A @ B was S' @ B + f * colsum(B) with S' = values - f, computed in the values' dtype before the promotion
    # (int8's 127 - (-100) wrapped to -29) and rounded (1.0 - 1e16 is -1e16 in float64, 1e308 + 1e308 is inf):
    # now S @ B + f * (colsum(B) - P @ B), P the pattern, with the values as they are
    if backend_skip_reason(backend):
        pytest.skip(str(backend_skip_reason(backend)))

    def on(x: Any) -> Any:
        return xs.to_backend(xs.asarray(x), backend)

    cases = [
        (np.array([[127, -100, -100]], np.int8), -100, np.ones((3, 2), np.int64)),
        (np.array([[3, 4], [4, 4]], np.uint8), 4, np.array([[1, 2], [3, 4]], np.uint16)),
        (np.array([[0.1, 1.3, 0.1]], np.float32), 0.1, np.eye(3)),
        (np.array([[1e16, 1.0, 1e16]]), 1e16, np.array([[0.0], [1.0], [0.0]])),
        (np.array([[1e308, -1e308]]), -1e308, np.array([[1.0], [0.0]])),
    ]
    for dense_a, fill, dense_b in cases:
        a_on, b_on = on(dense_a), on(dense_b)
        expected = to_numpy(xs.matmul(a_on, b_on))  # the dense product on the backend, whose dtype is the standard's
        np.testing.assert_array_equal(expected, dense_a.astype(expected.dtype) @ dense_b.astype(expected.dtype))
        for layout in (xs.sparse_coo, xs.sparse_csr, xs.sparse_csc):
            sa = xs.to_sparse(a_on, layout=layout, fill_value=fill)
            assert sa.nnz < dense_a.size
            got = xs.matmul(sa, b_on)
            assert to_numpy(got).dtype == expected.dtype
            np.testing.assert_array_equal(to_numpy(got), expected, err_msg=f"{dense_a.dtype} {layout}")
            # strided @ sparse: (A.T @ B.T).T through the same split
            np.testing.assert_array_equal(to_numpy(xs.matmul(on(dense_b.T), xs.matrix_transpose(sa))), expected.T)


def test_half_precision_products_with_a_fill_value_add_in_float32() -> None:
    torch = pytest.importorskip("torch")
    for dtype in (torch.float16, torch.bfloat16):
        d = torch.tensor([[3.0, 2048.0, 2048.0, 1.0]], dtype=dtype)
        s = xs.to_sparse(d, layout=xs.sparse_csr, fill_value=2048.0)
        b = torch.ones(4, 1, dtype=dtype)
        assert torch.equal(xs.matmul(s, b), d @ b)  # 4100 (a float16 running sum would stop at 4096)


def test_addmm_takes_the_inputs_dtype_whatever_beta() -> None:
    # with beta=0 the strided kernel returned the product's dtype, complex64, the sparse one complex128
    d = np.array([[1 + 1j, 0], [0, 2]], np.complex64)
    b, c = np.ones((2, 2), np.complex64), np.ones((2, 2))
    for beta in (0, 1):
        assert xs.addmm(c, d, b, beta=beta).dtype == np.complex128
        assert xs.addmm(c, xs.to_sparse_csr(d), b, beta=beta).dtype == np.complex128


def test_torch_unsigned_operands_of_addmm_and_sampled_addmm() -> None:
    # the scalars were checked against array_api_compat's result_type (torch's promotion refuses uint16 with
    # int64), and the generic sampled_addmm added uint32 values, which torch cannot ("add_stub")
    torch = pytest.importorskip("torch")
    a = xs.to_sparse(torch.tensor([[1], [2]], dtype=torch.uint16), layout=xs.sparse_csr)
    out = xs.addmm(torch.ones(2, 1, dtype=torch.int64), a, torch.tensor([[3]], dtype=torch.int64))
    assert out.dtype == torch.int64 and out.tolist() == [[4], [7]]
    mask = xs.to_sparse(torch.tensor([[1, 0], [0, 2]], dtype=torch.uint32), layout=xs.sparse_csr)
    ones = torch.ones(2, 2, dtype=torch.uint32)
    r = xs.sampled_addmm(mask, ones, ones, beta=2, alpha=3)
    assert r.dtype == torch.uint32 and xs.to_dense(r).tolist() == [[8, 0], [0, 10]]


def test_torch_declines_sparse_arrays_with_more_elements_than_it_counts() -> None:
    # torch's sparse tensors count their elements in int64: coalesce raised "numel: integer multiplication
    # overflow"; the torch kernels decline such an operand, and the generic ones run
    torch = pytest.importorskip("torch")
    a = xs.sparse_coo_array(torch.tensor([[0, 0, 5], [1, 1, 2]]), torch.tensor([1.0, 2.0, 4.0]), (2**32, 2**32))
    c = a.coalesce()
    assert c.nnz == 2 and c._values().tolist() == [3.0, 4.0] and c._indices().tolist() == [[0, 5], [1, 2]]
    assert xs.max(a, axis=0).nnz == 2
    assert (a * a).coalesce()._values().tolist() == [9.0, 16.0]


def test_matrix_norms_of_half_precision_strided_matrices() -> None:
    # NumPy's and torch's SVDs take no float16 or bfloat16 ("array type float16 is unsupported in linalg"):
    # 'nuc', 2 and -2 of a strided matrix compute in float32, as they did for a sparse one
    torch = pytest.importorskip("torch")
    for x in (np.diag(np.array([1.0, 2.0, 3.0], dtype=np.float16)), torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16))):
        for ord_, expected in (("nuc", 6.0), (2, 3.0), (-2, 1.0)):
            got = xs.linalg.matrix_norm(x, ord=ord_)
            assert got.dtype == x.dtype and float(got) == expected
            assert float(xs.linalg.matrix_norm(xs.to_sparse_csr(x), ord=ord_)) == expected


@pytest.mark.parametrize("backend", backend_params())
def test_matrix_norm_keepdims_has_the_layout_of_one_reduction_for_every_order(backend: str) -> None:
    # ord 1, -1, inf and -inf reduced in two steps with keepdims: a kept size-1 sparse dimension made the
    # norm of one matrix a (1, 1) COO array, where 'fro' (and the dense call) give a strided one
    xp = namespace(backend)
    host = np.array([[3.0, 0.0], [-1.0, 4.0]])
    a = xs.to_sparse_csr(xp.asarray(host))
    batched = xs.to_sparse_csr(xp.asarray(np.stack([host, 2 * host])))
    for ord_ in ("fro", 1, -1, math.inf, -math.inf):
        r = xs.linalg.matrix_norm(a, ord=ord_, keepdims=True)
        assert not isinstance(r, xs.SparseArray) and tuple(r.shape) == (1, 1)
        np.testing.assert_allclose(to_numpy(r), np.linalg.norm(host, ord=ord_, keepdims=True))
        rb = xs.linalg.matrix_norm(batched, ord=ord_, keepdims=True)
        assert xs.layout_of(rb) is xs.layout_of(xs.linalg.matrix_norm(batched, ord="fro", keepdims=True)) and tuple(rb.shape) == (2, 1, 1)
        np.testing.assert_allclose(to_numpy(xs.to_dense(rb)).ravel(), [np.linalg.norm(host, ord=ord_), np.linalg.norm(2 * host, ord=ord_)])


def test_trace_of_a_sparse_bool_array_names_itself() -> None:
    with pytest.raises(TypeError, match=r"^trace: x must have a numeric dtype \(x\.dtype=bool\)\. Cast it first"):
        xs.linalg.trace(xs.to_sparse_csr(np.eye(3, dtype=bool)))
