"""The CuPy backend's cuSPARSELt path (``xsparse/backends/cupy/semi_structured.py``) run on a stand-in of
CuPy's cuSPARSELt binding, without a GPU.

The stand-in keeps the rules of cuSPARSELt that the kernels are written around, and refuses what breaks
them: a 16-byte aligned pointer for every matrix, the descriptor's leading dimension and order, dense
operands whose free size is a multiple of 16 (int8) or 8 (16-bit types), ``opA = N`` on the structured
matrix, ``opB = T`` only for int8, an int32 result for int8, no search of a column-ordered result (which
failed inside cuSPARSELt 0.8.0 on an H200 and poisoned the CUDA context). It computes ``D = alpha op(A) op(B) + beta C``
from the memory the pointers and descriptors name, so the kernels' orientations, padding, copies of
unusable operands, the transposed right product, batch folding and plan memo are checked against NumPy's
product. Its "compressed" buffer is the dense matrix itself (the real one is opaque), so this is no test
of cuSPARSELt: ``tests/test_cupy_semi_structured.py`` runs the real thing on a GPU.
"""

from __future__ import annotations

import contextlib
import gc
import ctypes
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xsparse.backends.cupy import semi_structured as lt_kernels
from test_semi_structured import random_pattern

_ORDER_COL, _ORDER_ROW = 1, 2
_OP_N, _OP_T = 0, 1
_NOT_SUPPORTED = 10
_INTERNAL_ERROR = 7
_DTYPES = {2: np.float16, 3: np.int8, 10: np.int32}  # cudaDataType -> NumPy
_CONFIG, _SPLIT_K, _SPLIT_K_MODE = 0, 3, 4


class DeviceArray(np.ndarray):
    """A NumPy array with the attributes of a CuPy array that the kernels read."""

    @property
    def data(self) -> Any:  # type: ignore[override]
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])

    @property
    def device(self) -> Any:  # type: ignore[override]
        return types.SimpleNamespace(id=0)

    def get(self) -> np.ndarray:
        return np.asarray(self)


def _on_device(x: Any) -> DeviceArray:
    return np.asarray(x).view(DeviceArray)


class CuSparseError(RuntimeError):
    def __init__(self, status: int, what: str) -> None:
        super().__init__(f"cuSPARSELt status {status}: {what}")
        self.status = status


def _memory(ptr: int, rows: int, cols: int, ld: int, order: int, dtype: Any) -> np.ndarray:
    """The (writable) ``rows x cols`` matrix at ``ptr`` with leading dimension ``ld`` in ``order``."""
    item = np.dtype(dtype).itemsize
    span = ((rows - 1) * ld + cols) if order == _ORDER_ROW else ((cols - 1) * ld + rows)
    raw = np.frombuffer((ctypes.c_char * (span * item)).from_address(ptr), dtype=dtype)
    strides = (ld * item, item) if order == _ORDER_ROW else (item, ld * item)
    return np.lib.stride_tricks.as_strided(raw, (rows, cols), strides)


class Binding:
    """The stand-in of ``cupy_backends.cuda.libs.cusparselt`` (one per test)."""

    CUSPARSELT_SPARSITY_50_PERCENT = 0
    CUSPARSELT_MATMUL_ALG_DEFAULT = 0
    CUSPARSELT_MATMUL_ALG_CONFIG_ID = _CONFIG
    CUSPARSELT_MATMUL_SPLIT_K = _SPLIT_K
    CUSPARSELT_MATMUL_SPLIT_K_MODE = _SPLIT_K_MODE
    CUSPARSE_COMPUTE_32F = 1
    CUSPARSE_COMPUTE_32I = 0

    def __init__(self, search_split_k: int = 2) -> None:
        self.search_split_k = search_split_k  # what the search settles (1: no split)
        self.log: list[tuple[str, Any]] = []
        self.live = 0  # descriptors, selections and plans not yet destroyed

    # objects
    def Handle(self) -> Any:  # noqa: N802 - the binding's names
        return types.SimpleNamespace()

    def MatDescriptor(self) -> Any:  # noqa: N802
        return types.SimpleNamespace()

    MatmulDescriptor = MatDescriptor
    MatmulAlgSelection = MatDescriptor
    MatmulPlan = MatDescriptor

    def init(self, handle: Any) -> None:
        handle.ready = True

    def structuredDescriptorInit(self, handle: Any, d: Any, rows: int, cols: int, ld: int, alignment: int, value: int, order: int, sparsity: int) -> None:  # noqa: N802
        assert handle.ready and order == _ORDER_ROW and ld >= cols and alignment == 16 and value in _DTYPES
        d.__dict__.update(rows=rows, cols=cols, ld=ld, order=order, dtype=_DTYPES[value], structured=True)
        self.live += 1

    def denseDescriptorInit(self, handle: Any, d: Any, rows: int, cols: int, ld: int, alignment: int, value: int, order: int) -> None:  # noqa: N802
        assert ld >= (cols if order == _ORDER_ROW else rows) and alignment == 16
        d.__dict__.update(rows=rows, cols=cols, ld=ld, order=order, dtype=_DTYPES[value], structured=False)
        self.live += 1

    def matDescriptorDestroy(self, d: Any) -> None:  # noqa: N802
        self.live -= 1

    def matmulDescriptorInit(self, handle: Any, md: Any, op_a: int, op_b: int, a: Any, b: Any, c: Any, d: Any, compute: int) -> None:  # noqa: N802
        assert a.structured and op_a == _OP_N and c is d
        int8 = a.dtype == np.int8
        if int8 and op_b != _OP_T:
            raise CuSparseError(_NOT_SUPPORTED, "int8 takes opB = T only")
        assert b.dtype == a.dtype and d.dtype == (np.int32 if int8 else a.dtype)
        assert compute == (self.CUSPARSE_COMPUTE_32I if int8 else self.CUSPARSE_COMPUTE_32F)
        k, n = (b.cols, b.rows) if op_b == _OP_T else (b.rows, b.cols)
        assert a.cols == k and (d.rows, d.cols) == (a.rows, n), "the shapes of op(A), op(B) and D disagree"
        minimum = 16 if int8 else 8
        if n % minimum or k % minimum or a.rows % minimum:
            raise CuSparseError(_NOT_SUPPORTED, f"dense dimensions must be multiples of {minimum}")
        md.__dict__.update(op_b=op_b, a=a, b=b, d=d)

    def matmulAlgSelectionInit(self, handle: Any, sel: Any, md: Any, alg: int) -> None:  # noqa: N802
        sel.attributes = {_CONFIG: 0, _SPLIT_K: 1, _SPLIT_K_MODE: 0}
        self.live += 1

    def matmulAlgSelectionDestroy(self, sel: Any) -> None:  # noqa: N802
        self.live -= 1

    def matmulAlgSetAttribute(self, handle: Any, sel: Any, attribute: int, ptr: int, size: int) -> None:  # noqa: N802
        assert size == 4
        sel.attributes[attribute] = ctypes.c_int32.from_address(ptr).value
        self.log.append(("set", (attribute, sel.attributes[attribute])))

    def matmulAlgGetAttribute(self, handle: Any, sel: Any, attribute: int, ptr: int, size: int) -> None:  # noqa: N802
        assert size == 4
        ctypes.c_int32.from_address(ptr).value = sel.attributes[attribute]

    def matmulPlanInit(self, handle: Any, plan: Any, md: Any, sel: Any) -> None:  # noqa: N802
        plan.__dict__.update(md=md, sel=sel)
        self.log.append(("plan", None))
        self.live += 1

    def matmulPlanDestroy(self, plan: Any) -> None:  # noqa: N802
        self.live -= 1

    def matmulGetWorkspace(self, handle: Any, plan: Any) -> int:  # noqa: N802
        return 64

    def _run(self, plan: Any, alpha: int, a: int, b: int, beta: int, c: int, d: int) -> None:
        md = plan.md
        for ptr in (a, b, c, d):
            assert ptr % 16 == 0, "cuSPARSELt needs 16-byte aligned matrices"
        wa = _memory(a, md.a.rows, md.a.cols, md.a.ld, md.a.order, md.a.dtype).astype(np.float64)
        mb = _memory(b, md.b.rows, md.b.cols, md.b.ld, md.b.order, md.b.dtype).astype(np.float64)
        out = _memory(d, md.d.rows, md.d.cols, md.d.ld, md.d.order, md.d.dtype)
        scale, shift = ctypes.c_float.from_address(alpha).value, ctypes.c_float.from_address(beta).value
        product = scale * (wa @ (mb.T if md.op_b == _OP_T else mb))
        if shift:
            product += shift * out.astype(np.float64)
        out[...] = product.astype(md.d.dtype)

    def matmul(self, handle: Any, plan: Any, alpha: int, a: int, b: int, beta: int, c: int, d: int, workspace: int) -> None:
        self.log.append(("matmul", dict(plan.sel.attributes)))
        self._run(plan, alpha, a, b, beta, c, d)

    def matmulSearch(self, handle: Any, plan: Any, alpha: int, a: int, b: int, beta: int, c: int, d: int, workspace: int) -> None:  # noqa: N802
        if plan.md.d.order == _ORDER_COL:
            raise CuSparseError(_INTERNAL_ERROR, "the search of a column-ordered result failed (cuSPARSELt 0.8.0, H200)")
        self.log.append(("search", None))
        self._run(plan, alpha, a, b, beta, c, d)
        split = self.search_split_k
        plan.sel.attributes.update({_CONFIG: 3, _SPLIT_K: split, _SPLIT_K_MODE: 1 if split > 1 else 0})

    def spMMAPruneCheck2(self, handle: Any, desc: Any, is_sparse_a: int, op: int, dense: int, valid: int) -> None:  # noqa: N802
        self.log.append(("prune check", None))
        w = _memory(dense, desc.rows, desc.cols, desc.ld, desc.order, desc.dtype)
        kept = (w.reshape(desc.rows, desc.cols // 4, 4) != 0).sum(-1)
        ctypes.c_int32.from_address(valid).value = int((kept > 2).any())

    def spMMACompressedSize2(self, handle: Any, desc: Any) -> tuple[int, int]:  # noqa: N802
        return desc.rows * desc.cols * np.dtype(desc.dtype).itemsize, 32

    def spMMACompress2(self, handle: Any, desc: Any, is_sparse_a: int, op: int, dense: int, buffer: int, scratch: int) -> None:  # noqa: N802
        # the stand-in's "compressed" form is the row-major matrix itself
        self.log.append(("compress", None))
        w = _memory(dense, desc.rows, desc.cols, desc.ld, desc.order, desc.dtype)
        _memory(buffer, desc.rows, desc.cols, desc.cols, _ORDER_ROW, desc.dtype)[...] = w


class Stream:
    """A CUDA stream that logs the events it records and waits for (into the binding's log)."""

    def __init__(self, ptr: int, log: list[tuple[str, Any]]) -> None:
        self.ptr, self.log = ptr, log

    def record(self) -> Any:
        self.log.append(("record", self.ptr))
        return ("event", self.ptr)

    def wait_event(self, event: Any) -> None:
        self.log.append(("wait", (self.ptr, event[1])))

    def synchronize(self) -> None:
        self.log.append(("host waits", self.ptr))


def _cupy(log: list[tuple[str, Any]], current: int = 0) -> Any:
    """What of CuPy the cuSPARSELt kernels use, on NumPy; ``current`` is the current stream's pointer."""
    legacy = Stream(0, log)
    stream = legacy if current == 0 else Stream(current, log)

    class Device:
        compute_capability = "90"

        def __init__(self, device_id: int = 0) -> None:
            self.id = device_id

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

    cuda = types.SimpleNamespace(Device=Device, get_current_stream=lambda: stream, Stream=types.SimpleNamespace(null=legacy))
    return types.SimpleNamespace(
        cuda=cuda, int8=np.int8, int32=np.int32, uint8=np.uint8,
        empty=lambda shape, dtype: _on_device(np.empty(shape, dtype=dtype)),
        zeros=lambda shape, dtype: _on_device(np.zeros(shape, dtype=dtype)),
        ascontiguousarray=lambda x: _on_device(np.ascontiguousarray(x)),
    )  # fmt: skip


@contextlib.contextmanager
def _standin(current_stream: int = 0, search_split_k: int = 2) -> Iterator[Binding]:
    """The stand-ins in place of CuPy, its cuSPARSE constants and its cuSPARSELt binding."""
    lt = Binding(search_split_k)
    sp = types.SimpleNamespace(CUSPARSE_ORDER_ROW=_ORDER_ROW, CUSPARSE_ORDER_COL=_ORDER_COL, CUSPARSE_OPERATION_NON_TRANSPOSE=_OP_N, CUSPARSE_OPERATION_TRANSPOSE=_OP_T)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lt_kernels, "_cusparselt", lambda: lt)
        mp.setattr(lt_kernels, "_cusparse", lambda: sp)
        cupy = _cupy(lt.log, current_stream)
        mp.setattr(lt_kernels, "cupy_module", lambda: cupy)
        mp.setattr(lt_kernels, "_HANDLES", {})
        yield lt


def _expected(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` (exact integers) in ``dtype``'s arithmetic: int8 wraps."""
    return ((x.astype(np.int64) + 128) % 256 - 128).astype(np.float64) if dtype == "int8" else x


def _operand(a: np.ndarray, dtype: str, form: str) -> DeviceArray:
    """``a`` as a stand-in device array in memory form ``form`` (its values do not change)."""
    x = a.astype(dtype)
    if form == "fortran":
        return _on_device(np.asfortranarray(x))
    if form == "strided":
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        wide[..., ::2] = x
        return _on_device(wide)[..., ::2]
    if form == "unaligned":
        flat = np.zeros(x.size + 1, dtype=x.dtype)
        flat[1:] = x.reshape(-1)
        return _on_device(flat)[1:].reshape(x.shape)
    return _on_device(x)


def _packed(dtype: str, rows: int, cols: int, seed: int) -> tuple[np.ndarray, Any]:
    dense = random_pattern(np.random.default_rng(seed), rows, cols, dtype, unit=True)
    packed = lt_kernels._pack(_on_device(dense.astype(dtype)))
    assert isinstance(packed, lt_kernels.CusparseLtPacked)
    return dense, packed


def _let_go(binding: Any, packed: Any) -> None:
    """The packed array keeps one plan per product shape (3 descriptors, a selection and the plan, alive
    while it is kept); once the array is let go, every object cuSPARSELt made is destroyed."""
    assert binding.live == 5 * len(packed._made), "nothing but the kept plans is alive"
    made = packed._made
    packed._made = {}
    del made
    gc.collect()
    assert binding.live == 0, "every descriptor, selection and plan is destroyed"


# every memory form, dtype and free size (each path of the kernels) is a case of its own; the values are drawn
EXAMPLES = settings(max_examples=4, deadline=None)
FORMS = ["c", "fortran", "strided", "unaligned", "vector", "batched"]
DTYPES = ["float16", "int8"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n", [1, 3, 16, 40])
@pytest.mark.parametrize("dtype", DTYPES)
@EXAMPLES
@given(scale=st.integers(1, 2), seed=st.integers(0, 2**32 - 1))
def test_sparse_times_dense(dtype: str, n: int, form: str, scale: int, seed: int) -> None:
    rng = np.random.default_rng(seed + 1)
    shape = {"vector": (64,), "batched": (2, 64, n)}.get(form, (64, n))
    host = rng.integers(-2, 3, size=shape).astype(np.float64)
    with _standin() as binding:
        dense, packed = _packed(dtype, 32 * scale, 64, seed)
        result = lt_kernels._left_product(packed, _operand(host, dtype, form))
    assert result.dtype == np.dtype(dtype) and result.flags.c_contiguous and result.shape == (dense @ host).shape
    np.testing.assert_array_equal(np.asarray(result, dtype=np.float64), _expected(dense @ host, dtype))
    _let_go(binding, packed)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("m", [1, 3, 16, 17, 64])
@pytest.mark.parametrize("dtype", DTYPES)
@EXAMPLES
@given(seed=st.integers(0, 2**32 - 1))
def test_dense_times_transposed_sparse(dtype: str, m: int, form: str, seed: int) -> None:
    rng = np.random.default_rng(seed + 1)
    shape = {"vector": (64,), "batched": (2, m, 64)}.get(form, (m, 64))
    host = rng.integers(-2, 3, size=shape).astype(np.float64)
    with _standin() as binding:
        dense, packed = _packed(dtype, 32, 64, seed)
        result = lt_kernels._right_product(packed, _operand(host, dtype, form))
    assert result.dtype == np.dtype(dtype) and result.shape == (host @ dense.T).shape
    np.testing.assert_array_equal(np.asarray(result, dtype=np.float64), _expected(host @ dense.T, dtype))
    _let_go(binding, packed)


def test_the_plan_memo_of_the_right_product() -> None:
    a = np.random.default_rng(1).integers(-2, 3, size=(16, 64)).astype(np.float64)
    with _standin() as binding:
        dense, packed = _packed("float16", 32, 64, 0)
        first = lt_kernels._right_product(packed, _on_device(a.astype(np.float16)))
        second = lt_kernels._right_product(packed, _on_device(a.astype(np.float16)))
    for result in (first, second):
        np.testing.assert_array_equal(np.asarray(result, dtype=np.float64), a @ dense.T)
    choice = packed.planned(lt_kernels.plan_key(16, True))
    assert choice is not None
    # one search; the later product builds its plan with the algorithm and split-K the search settled
    assert [what for what, _ in binding.log].count("search") == 1
    assert (choice.alg_id, dict(choice.split_k)) == (3, {"CUSPARSELT_MATMUL_SPLIT_K": 2, "CUSPARSELT_MATMUL_SPLIT_K_MODE": 1})
    matmuls = [attributes for what, attributes in binding.log if what == "matmul"]
    assert matmuls[-1] == {_CONFIG: 3, _SPLIT_K: 2, _SPLIT_K_MODE: 1}
    # the second product reuses the plan the first one made after its search: no selection is made again
    events = [what for what, _ in binding.log]
    first_product = events.index("matmul")
    assert events[first_product:].count("plan") == 0 and events[:first_product].count("plan") >= 2  # search's, kept one
    _let_go(binding, packed)


def test_the_prune_check_and_the_compressed_buffer() -> None:
    with _standin() as binding:
        dense, packed = _packed("int8", 32, 64, 3)
        assert packed.shape == (32, 64) and packed.dtype == "int8" and packed.device_id == 0
        np.testing.assert_array_equal(np.asarray(packed.buffer).view(np.int8).reshape(32, 64), dense.astype(np.int8))
        broken = dense.astype(np.float16)
        broken[0, :4] = 1  # four kept elements in a group of four
        assert lt_kernels._pack(_on_device(broken)) is None
    assert binding.live == 0


def _two_products(**standin: Any) -> tuple[Binding, Any]:
    """Two products ``a @ W.T`` of one shape (a search, then a planned one), checked; the binding and W."""
    a = np.random.default_rng(2).integers(-2, 3, size=(16, 64)).astype(np.float64)
    with _standin(**standin) as binding:
        dense, packed = _packed("float16", 32, 64, 0)
        for _ in range(2):
            result = lt_kernels._right_product(packed, _on_device(a.astype(np.float16)))
            np.testing.assert_array_equal(np.asarray(result, dtype=np.float64), a @ dense.T)
    return binding, packed


def test_another_current_stream_is_ordered_on_the_device() -> None:
    # xsparse's binding runs on the legacy stream (0), CuPy's binding checks and compresses on the current
    # one, CuPy's own work runs on the current one (7): each waits for the other on the device, never the host
    binding, _ = _two_products(current_stream=7)
    before, after = [("record", 7), ("wait", (0, 7))], [("record", 0), ("wait", (7, 0))]
    assert [entry for entry in binding.log if entry[0] not in ("set", "plan")] == [
        *before, ("prune check", None), *after,  # the check reads the input, the current stream its result
        *before, ("compress", None), *after, *before,  # the products wait for the compression, whichever stream ran it
        *before, ("search", None), ("matmul", {_CONFIG: 3, _SPLIT_K: 2, _SPLIT_K_MODE: 1}), *after,  # first product
        *before, ("matmul", {_CONFIG: 3, _SPLIT_K: 2, _SPLIT_K_MODE: 1}), *after,  # the second, planned
    ]


def test_a_search_without_split_k_sets_only_the_algorithm() -> None:
    binding, packed = _two_products(search_split_k=1)
    choice = packed.planned(lt_kernels.plan_key(16, True))
    assert choice is not None and choice.alg_id == 3 and choice.split_k == ()
    # set once, on the plan the first product keeps (the second product reuses it)
    assert [entry for entry in binding.log if entry[0] == "set"] == [("set", (_CONFIG, 3))]
