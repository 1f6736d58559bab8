"""NumPy and SciPy standing in for CuPy, ``cupyx.scipy.sparse`` and ``cupyx.cusparse``, so that the CuPy
backend's Python side (index narrowing, batch folding, transposed views, result orders, reasons to
decline) runs on a machine without a GPU.

``XSPARSE_CUPY_STANDIN=1 python -m pytest tests/test_cupy_backend.py`` runs that module on these stand-ins
(``tests/test_cupy_standin.py`` does, in the regular suite). It is no GPU test: cuSPARSE's arithmetic is
SciPy's here, and the two custom kernels (``cupy.ElementwiseKernel``) do not run. The stand-ins keep the
contracts of CuPy 14.2 that the backend relies on, checked as CuPy checks them:

- ``csr_matrix._from_parts`` / ``csc_matrix._from_parts`` / ``coo_matrix._from_parts``: equal index dtypes,
  consistent lengths, the canonical flag set as given; int32 indices only (stricter than CuPy, which
  takes int64 ones but leaves cuSPARSE for its own code then: the kernels narrow them first);
- ``cupyx.cusparse.denseToSparse``: float32/64 and complex64/128 only, the result flagged canonical;
- ``cupyx.cusparse.sparseToDense``: a column-major result;
- ``cupyx.cusparse.spmm``: a column-major ``b`` (``ValueError`` otherwise, as CuPy's), a canonical ``a``,
  ``transa``/``transb``, a column-major result;
- ``cupy_backends.cuda.libs.cusparse`` (the low-level binding of the direct SpMV and SpMM, :class:`Library`)
  and ``cupyx.cusparse.SpMatDescriptor``: descriptors over host memory, products computed from what the
  descriptors name, every dense descriptor destroyed;
- ``cupy.ElementwiseKernel``: the kernel's C body is translated line by line into Python (the subset the
  backend's two kernels are written in: declarations, ``for`` loops, casts, integer division) and run once
  per element, with CuPy's parameter rules (``raw`` arrays indexed whole, the others element by element,
  ``i`` the element index, the type names bound to the arguments' dtypes). This runs the kernels' index
  arithmetic, not their CUDA compilation.
"""

from __future__ import annotations

import ctypes
import re
import sys
import types
import weakref
from typing import Any

import numpy as np
import scipy.sparse as sps

_CUSPARSE_CHARS = "fdFD"


def _check_parts(data: Any, indices: Any, other: Any) -> None:
    if indices.dtype != other.dtype:
        raise ValueError(f"index arrays must have the same dtype, got {indices.dtype} and {other.dtype}")
    if indices.dtype != np.int32:
        # stricter than CuPy, which takes int64 indices but then runs its own code instead of cuSPARSE's:
        # the kernels narrow them first, and this holds them to it
        raise ValueError(f"the kernels hand cupyx int32 indices, got {indices.dtype}")
    if data.ndim != 1 or indices.ndim != 1 or other.ndim != 1:
        raise ValueError("data and index arrays must be 1-D")


class _FromParts:
    """cupyx's ``_from_parts`` of a compressed matrix; ``_major`` is the axis ``indptr`` runs along."""

    _major = 0

    @classmethod
    def _from_parts(cls, data: Any, indices: Any, indptr: Any, shape: Any, has_canonical_format: Any = None, has_sorted_indices: Any = None) -> Any:
        _check_parts(data, indices, indptr)
        if indptr.size != shape[cls._major] + 1 or data.size != indices.size:
            raise ValueError("indptr must have one entry more than its axis, and indices as many as data")
        m = cls((data, indices, indptr), shape=shape, copy=False)  # type: ignore[call-arg]
        if has_canonical_format:
            m.has_canonical_format = True
        return m


class csr_matrix(_FromParts, sps.csr_matrix):  # noqa: N801 - cupyx's name
    _major = 0


class csc_matrix(_FromParts, sps.csc_matrix):  # noqa: N801
    _major = 1


class coo_matrix(sps.coo_matrix):  # noqa: N801
    @classmethod
    def _from_parts(cls, data: Any, row: Any, col: Any, shape: Any, has_canonical_format: bool = False) -> Any:
        _check_parts(data, row, col)
        if not data.size == row.size == col.size:
            raise ValueError("data, row and col must have the same length")
        m = cls((data, (row, col)), shape=shape, copy=False)
        m.has_canonical_format = bool(has_canonical_format)
        return m


def _check_availability(name: str) -> bool:
    return name in ("denseToSparse", "sparseToDense", "spmm")


def _dense_to_sparse(x: Any, format: str = "csr") -> Any:
    if x.ndim != 2:
        raise ValueError("expected 2-D matrix")
    if x.dtype.char not in _CUSPARSE_CHARS:
        raise ValueError("unsupported dtype")
    m = {"csr": csr_matrix, "csc": csc_matrix, "coo": coo_matrix}[format](x)
    m.has_canonical_format = True
    return m


def _sparse_to_dense(x: Any, out: Any = None) -> Any:
    if x.dtype.char not in _CUSPARSE_CHARS:
        raise ValueError("unsupported dtype")
    return np.asfortranarray(x.toarray())


def _spmm(a: Any, b: Any, c: Any = None, alpha: Any = 1, beta: Any = 0, transa: bool = False, transb: bool = False) -> Any:
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError("expected 2-D matrices")
    if not b.flags.f_contiguous:
        raise ValueError("expected F-contiguous array for b")
    if not a.has_canonical_format:
        raise ValueError("expected canonical format for a")
    op_a = a.T if transa else a
    op_b = b.T if transb else b
    if op_a.shape[1] != op_b.shape[0]:
        raise ValueError("dimension mismatch")
    return np.asfortranarray(alpha * (op_a @ op_b))


def _python_of(body: str) -> str:
    """The Python of an ElementwiseKernel body in the C subset of the backend's kernels."""
    lines, depth = [], 1
    for raw in body.strip().splitlines():
        line = raw.strip()
        if line == "}":
            depth -= 1
            continue
        loop = re.fullmatch(r"for \(long long (\w+) = (.+); \1 < (.+); \+\+\1\) \{", line)
        if loop:
            var, start, stop = loop.groups()
            lines.append("    " * depth + f"for {var} in range(int({_expression(start)}), int({_expression(stop)})):")
            depth += 1
            continue
        assert line.endswith(";"), f"not in the translated subset: {line!r}"
        line = re.sub(r"^(const )?(long long|T) ", "", line[:-1])
        lines.append("    " * depth + _expression(line))
    return "def kernel(i, T, out_name, env):\n    globals().update(env)\n" + "\n".join(lines) + "\n    return out\n"


def _expression(text: str) -> str:
    text = re.sub(r"\(long long\)\s*(\w+(\[[^\]]*\])?)", r"int(\1)", text)
    return text.replace(" / ", " // ")


class ElementwiseKernel:
    """``cupy.ElementwiseKernel`` on NumPy: the body translated into Python and run once per element."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str = "kernel") -> None:
        self.inputs = [p.split() for p in in_params.split(",")]
        self.output = out_params.split()
        namespace: dict[str, Any] = {}
        exec(_python_of(operation), namespace)
        self.kernel = namespace["kernel"]

    def __call__(self, *args: Any) -> Any:
        types_: dict[str, Any] = {}
        env: dict[str, Any] = {}
        elementwise = []
        for spec, value in zip(self.inputs, args):
            raw = spec[0] == "raw"
            type_name, name = spec[-2], spec[-1]
            if isinstance(value, np.ndarray):
                if type_name not in ("int64", "int32", "float32", "float64"):
                    types_.setdefault(type_name, value.dtype)
                env[name] = value.reshape(-1) if raw else value
                if not raw:
                    elementwise.append((name, value))
            else:
                env[name] = int(value)
        out_type, out_name = self.output
        given = args[len(self.inputs)] if len(args) > len(self.inputs) else None
        dtype = types_[out_type]
        out = given if given is not None else np.empty(np.broadcast_shapes(*(v.shape for _, v in elementwise)), dtype=dtype)
        flat_out = out.reshape(-1)
        t = dtype.type
        for index in range(flat_out.size):
            local = dict(env)
            local.update({name: value.reshape(-1)[index] for name, value in elementwise})
            local["T"] = t
            flat_out[index] = self.kernel(index, t, out_name, local)
        return out


# -- CuPy's low-level cuSPARSE binding (cupy_backends.cuda.libs.cusparse), for the direct SpMV and SpMM ------

_ORDER_COL, _ORDER_ROW = 1, 2
_VALUE_TYPES = {0: np.float32, 1: np.float64, 4: np.complex64, 5: np.complex128}


def _memory(ptr: int, rows: int, cols: int, ld: int, order: int, dtype: Any) -> np.ndarray:
    """The (rows, cols) array a dense descriptor describes, over the memory its pointer names."""
    item = np.dtype(dtype).itemsize
    span = ((rows - 1) * ld + cols) if order == _ORDER_ROW else ((cols - 1) * ld + rows)
    raw = np.frombuffer((ctypes.c_char * (max(span, 0) * item)).from_address(ptr), dtype=dtype)
    strides = (ld * item, item) if order == _ORDER_ROW else (item, ld * item)
    return np.lib.stride_tricks.as_strided(raw, (rows, cols), strides)


def _scalar(ptr: int, dtype: Any) -> Any:
    return np.frombuffer((ctypes.c_char * np.dtype(dtype).itemsize).from_address(ptr), dtype=dtype)[0]


class SparseDescriptor:
    """The stand-in of ``cupyx.cusparse.SpMatDescriptor``: ``desc`` names the SciPy matrix it describes."""

    made: list[int] = []  # the handles of every descriptor made (a count of creations)
    live: "weakref.WeakValueDictionary[int, SparseDescriptor]" = weakref.WeakValueDictionary()

    def __init__(self, matrix: Any) -> None:
        self.desc, self.matrix = 5000 + len(SparseDescriptor.made), matrix
        SparseDescriptor.made.append(self.desc)
        SparseDescriptor.live[self.desc] = self

    @classmethod
    def create(cls, matrix: Any) -> SparseDescriptor:
        if matrix.format != "csr":
            raise ValueError(f"the direct routes describe CSR matrices only, got {matrix.format}")
        return cls(matrix)


class Library:
    """The stand-in of ``cupy_backends.cuda.libs.cusparse``: the calls of the direct SpMV and SpMM.

    It keeps what the call sequences must get right: a sparse descriptor of the CSR matrix, dense
    descriptors whose sizes, leading dimension and order describe the memory their pointer names,
    ``op = N``, host-side ``alpha`` and ``beta`` of the value type, a buffer, and every dense descriptor
    destroyed. SpMV and SpMM compute ``y = alpha A x + beta y`` from that memory (``y`` unread where
    ``beta = 0``), so a wrong size, order or pointer shows as a wrong product. It is no test of cuSPARSE.
    """

    CUSPARSE_ORDER_ROW = _ORDER_ROW
    CUSPARSE_OPERATION_NON_TRANSPOSE = 0

    def __init__(self) -> None:
        self.dense: dict[int, tuple[int, ...]] = {}
        self.calls: list[str] = []
        self._next = 1000

    def _describe(self, *fields: int) -> int:
        self._next += 1
        self.dense[self._next] = fields
        return self._next

    def createDnVec(self, size: int, ptr: int, value_type: int) -> int:  # noqa: N802 - CuPy's names
        self.calls.append("createDnVec")
        return self._describe(size, 1, size, ptr, value_type, _ORDER_COL)

    def createDnMat(self, rows: int, cols: int, ld: int, ptr: int, value_type: int, order: int) -> int:  # noqa: N802
        if not ((ld >= cols) if order == _ORDER_ROW else (ld >= rows)):
            raise ValueError("CUSPARSE_STATUS_INVALID_VALUE: a leading dimension below the row length")
        return self._describe(rows, cols, ld, ptr, value_type, order)

    def destroyDnVec(self, handle: int) -> None:  # noqa: N802
        del self.dense[handle]

    def dnVecSetValues(self, handle: int, ptr: int) -> None:  # noqa: N802
        """Point a dense vector's descriptor at other memory (of its size and value type)."""
        size, cols, ld, _, value_type, order = self.dense[handle]
        self.dense[handle] = (size, cols, ld, ptr, value_type, order)
        self.calls.append("dnVecSetValues")

    destroyDnMat = destroyDnVec  # noqa: N815

    def spMV_bufferSize(self, *args: Any) -> int:  # noqa: N802
        self.calls.append("spMV_bufferSize")
        return 0  # cuSPARSE asks no buffer for many CSR products: the route still passes a valid one

    def spMM_bufferSize(self, *args: Any) -> int:  # noqa: N802
        self.calls.append("spMM_bufferSize")
        return 7

    def spMV(self, handle: Any, op: int, alpha: int, a: int, x: int, beta: int, y: int, value_type: int, alg: int, buffer: int) -> None:  # noqa: N802
        self._product("spMV", handle, (op, op), alpha, a, x, beta, y, value_type, buffer)

    def spMM(self, handle: Any, op_a: int, op_b: int, alpha: int, a: int, b: int, beta: int, c: int, value_type: int, alg: int, buffer: int) -> None:  # noqa: N802
        self._product("spMM", handle, (op_a, op_b), alpha, a, b, beta, c, value_type, buffer)

    def _product(self, name: str, handle: Any, ops: tuple[int, int], alpha: int, a: int, b: int, beta: int, c: int, value_type: int, buffer: int) -> None:
        if ops != (0, 0) or handle != "handle" or not buffer:
            raise ValueError(f"{name}: op N, the handle and a buffer are expected, got {ops}, {handle!r}, {buffer}")
        dtype = _VALUE_TYPES[value_type]
        matrix = SparseDescriptor.live[a].matrix
        rb, cb, ldb, pb, tb, ob = self.dense[b]
        rc, cc, ldc, pc, tc, oc = self.dense[c]
        if not (tb == tc == value_type and matrix.dtype == dtype):
            raise ValueError(f"{name}: the value types differ")
        if matrix.shape != (rc, rb) or cb != cc:
            raise ValueError(f"{name}: A (m x k) times B (k x n) into C (m x n), got {matrix.shape}, {(rb, cb)}, {(rc, cc)}")
        B, C = _memory(pb, rb, cb, ldb, ob, dtype), _memory(pc, rc, cc, ldc, oc, dtype)
        beta_v = _scalar(beta, dtype)
        C[...] = _scalar(alpha, dtype) * (matrix @ B) + (beta_v * C if beta_v else 0)
        self.calls.append(name)


def binding() -> tuple[Library, type[SparseDescriptor], Any]:
    """What ``_binding()`` of ``xsparse/backends/cupy/linalg.py`` returns, stood in for."""
    return Library(), SparseDescriptor, lambda: "handle"


class _Stream:
    """CuPy's current stream, as the kernels read it: one stream (the null stream's pointer, 0)."""

    ptr = 0


class _Cuda:
    """``cupy.cuda``, as far as the kernels use it."""

    @staticmethod
    def get_current_stream() -> _Stream:
        return _Stream()


class _Cupy(types.ModuleType):
    """NumPy, with CuPy's ``ElementwiseKernel`` and current stream."""

    ElementwiseKernel = ElementwiseKernel
    cuda = _Cuda

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


def install(monkeypatch: Any = None) -> Any:
    """Put the stand-ins in place of ``cupyx`` (in ``sys.modules``) and of the CuPy backend's module
    lookups; return the stand-in for ``cupy`` (NumPy itself). With a pytest ``monkeypatch``, every change
    is undone after the test; without one, they stay for the process (``XSPARSE_CUPY_STANDIN=1``)."""
    from xsparse.backends.cupy import conversion, linalg

    set_attr = setattr if monkeypatch is None else monkeypatch.setattr
    set_module = sys.modules.__setitem__ if monkeypatch is None else (lambda name, m: monkeypatch.setitem(sys.modules, name, m))
    cupyx = types.ModuleType("cupyx")
    cusparse = types.ModuleType("cupyx.cusparse")
    cusparse.check_availability = _check_availability  # type: ignore[attr-defined]
    cusparse.denseToSparse = _dense_to_sparse  # type: ignore[attr-defined]
    cusparse.sparseToDense = _sparse_to_dense  # type: ignore[attr-defined]
    cusparse.spmm = _spmm  # type: ignore[attr-defined]
    scipy_ = types.ModuleType("cupyx.scipy")
    sparse = types.ModuleType("cupyx.scipy.sparse")
    sparse.csr_matrix, sparse.csc_matrix, sparse.coo_matrix = csr_matrix, csc_matrix, coo_matrix  # type: ignore[attr-defined]
    import scipy.special as special  # cupyx.scipy.special's ufuncs are SciPy's, on the device

    cupyx.cusparse, cupyx.scipy, scipy_.sparse, scipy_.special = cusparse, scipy_, sparse, special  # type: ignore[attr-defined]
    modules = {"cupyx": cupyx, "cupyx.cusparse": cusparse, "cupyx.scipy": scipy_, "cupyx.scipy.sparse": sparse, "cupyx.scipy.special": special}
    for name, module in modules.items():
        set_module(name, module)
    cupy = _Cupy("cupy_standin")
    found = binding()
    set_attr(linalg, "_binding", lambda: found)
    for module in (conversion, linalg):
        set_attr(module, "cupy_module", lambda: cupy)
        set_attr(module, "cupyx_sparse", lambda: sparse)
    return cupy


def asarray_dropping_zero_signs(monkeypatch: Any, namespace: Any, *, host_types: tuple[type, ...] = ()) -> None:
    """Give ``namespace`` CuPy's ``asarray`` of a number: a 0-d array filled by a memset where the number
    compares equal to 0 (CuPy 14's ``ndarray.fill``), so that -0.0, and a complex zero's -0.0 part, come
    out +0.0. Arrays of the namespace pass as they are, except those of ``host_types`` (NumPy arrays,
    standing for the host arrays that CuPy treats as numbers when they are 0-d)."""
    original = namespace.asarray

    def asarray(obj: Any, /, **kwargs: Any) -> Any:
        out = original(obj, **kwargs)
        from_number = not isinstance(obj, type(out)) or isinstance(obj, host_types)
        if from_number and out.ndim == 0 and not namespace.isdtype(out.dtype, "bool") and bool(out == 0):
            return namespace.zeros((), dtype=out.dtype, device=out.device)
        return out

    monkeypatch.setattr(namespace, "asarray", asarray)
