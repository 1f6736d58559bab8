"""Helpers of the public layer: which backend a call runs on, and dtype and scalar normalisation."""

from __future__ import annotations

import math
import operator
from typing import Any

import array_api_compat
import numpy as np

from ._errors import BackendMismatchError
from .backends import _BUILTIN, Backend, backend_of_array, get_backend, get_default_backend
from .formats import SparseArray
from .formats._invariants import dtype_name  # the Array API name of a dtype (``float64``), whatever library spells it

__all__ = ["backend_of", "strided_backend", "known_backend", "namespace_of", "resolve_dtype", "device_argument", "scalar_for", "is_strided", "refuse_foreign", "dtype_name"]

# Which built-in backend owns a strided array depends on nothing but the array's type (array-api-compat
# decides from the type too, and keeps its own per-type cache), while asking it costs microseconds: more
# than a SpMV of a small matrix. So the answer is memoised per type, for the built-in backends only (a
# plug-in or generic backend may be registered or replaced later; those are found afresh every time).
# This is a memo of a pure function of the type, never of an array's state. The one exception
# array-api-compat makes, a NumPy array of JAX's float0 dtype (JAX's placeholder for the gradient of an
# integer array), is treated as a NumPy array once NumPy arrays are in the memo; no kernel handles that
# dtype, so it fails with the NumPy backend's error instead of JAX's.
_STRIDED_BACKENDS: dict[type, Backend] = {}
# A built-in backend's namespace, once loaded (Backend.load imports a module on every call).
_NAMESPACES: dict[Backend, Any] = {}


def _is_builtin(backend: Backend) -> bool:
    return _BUILTIN.get(backend.name) is backend


# torch's sparse tensors share the type torch.Tensor with its strided ones, which is in the memo: a memo
# hit for torch reads the tensor's layout too (one attribute read). Set when torch's type enters the memo.
_TORCH = _BUILTIN["torch"]
_torch_strided: Any = None


def refuse_foreign(x: Any, op: str | None = None) -> None:
    """Raise the TypeError for another library's sparse array (a torch sparse tensor, a pydata/sparse
    array, a SciPy sparse matrix, a JAX BCOO or BCSR), which is no strided array; nothing for anything else."""
    from ._foreign import foreign_sparse_kind, refuse_foreign_sparse

    kind = foreign_sparse_kind(x)
    if kind is not None:
        raise refuse_foreign_sparse(x, kind, op)


def is_strided(x: Any, op: str | None = None) -> bool:
    """Whether ``x`` is an array of some backend (not an xsparse array, not a Python scalar or list).

    Raises
    ------
    TypeError
        Where ``x`` is a sparse array of another library (torch, pydata/sparse, SciPy, JAX): every function that
        classifies its operands here refuses it, saying to convert it with :func:`xsparse.asarray`. The
        message starts with ``op``, the calling function's name, where given.
    """
    found = _STRIDED_BACKENDS.get(type(x))
    if found is not None:
        if found is _TORCH and x.layout is not _torch_strided:
            refuse_foreign(x, op)
        return True
    if isinstance(x, (SparseArray, bool, int, float, complex, list, tuple)):
        return False
    # SciPy's and JAX's sparse arrays are no Array API arrays: refused here too, so that the message says
    # how to convert them rather than that they are no arrays
    refuse_foreign(x, op)
    return bool(array_api_compat.is_array_api_obj(x))


def strided_backend(x: Any, op: str | None = None) -> Backend | None:
    """The backend that owns the strided array ``x``, or ``None`` when ``x`` is not a strided array."""
    global _torch_strided
    found = _STRIDED_BACKENDS.get(type(x))
    if found is not None:
        if found is _TORCH and x.layout is not _torch_strided:
            refuse_foreign(x, op)
        return found
    if x is None or not is_strided(x, op):
        return None
    found = backend_of_array(x)
    if _is_builtin(found):
        if found is _TORCH and _torch_strided is None:
            import torch

            _torch_strided = torch.strided
        _STRIDED_BACKENDS[type(x)] = found
    return found


def known_backend(x: Any) -> Backend | None:
    """The backend of a sparse array, or of a strided array whose type is memoised; ``None`` otherwise.

    A fast path that never inspects ``x`` further: ``None`` means "not known yet", not "not an array".
    """
    found = _STRIDED_BACKENDS.get(type(x))
    if found is None and isinstance(x, SparseArray):
        sparse_backend: Backend = x._backend
        return sparse_backend
    if found is _TORCH and x.layout is not _torch_strided:
        return None  # a torch sparse tensor: the full checks refuse it
    return found


def namespace_of(backend: Backend) -> Any:
    """``backend.load()``: the backend's namespace, its native kernels imported (memoised for built-ins)."""
    xp = _NAMESPACES.get(backend)
    if xp is None:
        xp = backend.load()
        if _is_builtin(backend):
            _NAMESPACES[backend] = xp
    return xp


def backend_of(*objs: Any, op: str, backend: str | Backend | None = None) -> Backend:
    """The backend a call with these operands runs on.

    Sparse arrays and backend arrays name their backend; Python scalars and lists follow ``backend``
    or, without it, the default backend. Operands of two backends are an error that says how to move one.
    """
    found: dict[str, Backend] = {}
    for obj in objs:
        if isinstance(obj, SparseArray):
            b = obj._backend
        else:
            found_b = strided_backend(obj, op)
            if found_b is None:
                continue
            b = found_b
        found.setdefault(b.name, b)
    if backend is not None:
        wanted = get_backend(backend)
        others = [name for name in found if name != wanted.name]
        if others:
            raise BackendMismatchError(
                f"{op}: backend={wanted.name!r} was requested but an operand lives on backend {others[0]!r}. "
                f"Move it first with xsparse.to_backend(a, {wanted.name!r})."
            )
        return wanted
    if len(found) > 1:
        names = list(found)
        rest = " or ".join(repr(n) for n in names[1:])
        raise BackendMismatchError(
            f"{op}: the operands live on different backends ({', '.join(repr(n) for n in names)}). Move them to one, "
            f"e.g. xsparse.to_backend(a, {names[0]!r}) for each operand a on {rest} (zero-copy through DLPack "
            "where the libraries allow)."
        )
    if found:
        return next(iter(found.values()))
    return get_default_backend()


_PYTHON_KINDS = {bool: "bool", int: "int64", float: "float64", complex: "complex128"}

#: The dtype names a string ``dtype=`` may give: the Array API standard's, and the two half-precision
#: dtypes the backends that have them share. A backend's own aliases (torch's ``"float"`` for float32,
#: ``"long"``, ``"half"``) and its other attributes (``"e"``, ``"sin"``) are refused: the same program would
#: mean another dtype, or raise a raw error, on another backend.
DTYPE_NAME_STRINGS = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128", "float16", "bfloat16",
)  # fmt: skip


def resolve_dtype(xp: Any, dtype: Any, op: str | None = None) -> Any:
    """The backend's dtype object for ``dtype``: a backend dtype, a name, a NumPy dtype, or a Python type.

    A name must be one of :data:`DTYPE_NAME_STRINGS`; a dtype object of another backend is translated by
    its name. ``op``, the calling function, starts the error message where given (else ``dtype``).
    """
    if dtype is None:
        return None
    where = op or "dtype"
    if isinstance(dtype, type) and dtype in _PYTHON_KINDS:
        name = _PYTHON_KINDS[dtype]
    elif isinstance(dtype, str):
        name = dtype
        if name not in DTYPE_NAME_STRINGS:
            raise TypeError(
                f"{where}: {name!r} is not a dtype name of the Array API standard (dtype={dtype!r}). Pass one of "
                f"{', '.join(repr(n) for n in DTYPE_NAME_STRINGS)} (float16 and bfloat16 where the backend has them), a Python type such as float, or a dtype "
                "of the backend."
            )
    else:
        name = dtype_name(dtype)
    found = getattr(xp, name, None)
    # a dtype object's name found on the backend must name a dtype there too: NumPy's namespace has
    # ``e`` and ``sin``, and an object whose ``name`` is one of those is no dtype
    if found is None or (name not in DTYPE_NAME_STRINGS and dtype_name(found) != name):
        if found is None and (isinstance(dtype, str) or name.isidentifier()):
            raise TypeError(f"{where}: the backend {xp.__name__} has no dtype {name!r} (dtype={dtype!r}). Pass one of the backend's dtypes.")
        raise TypeError(
            f"{where}: dtype must be a dtype of a backend, a dtype name or a Python type, got {type(dtype).__name__} "
            f"(dtype={dtype!r}). Pass e.g. xsparse.float64 or 'float64'."
        )
    return found


def device_argument(op: str, backend: Backend, device: Any) -> Any:
    """A ``device=`` given by the user for an array of ``backend``: one of the backend's devices, or anything
    else its own functions accept (torch's ``"cpu"`` or ``"cuda:0"``); ``None`` stays ``None``.

    A device of another library (a torch device for NumPy, ``"cpu"`` for JAX, which wants its ``Device``)
    would fail inside the backend with a message of its own, different on every backend and path: it
    is refused here, naming the devices to pass. Unlike dtypes, devices are not translated: a device is
    a place, and which of another library's places one means is not the backend's to guess.
    """
    if device is None:
        return None
    devices = backend.devices()
    for d in devices:
        try:
            if d is device or (d is not None and type(d) is type(device) and bool(d == device)):
                return device
        except Exception:  # a device type whose == raises on a stranger: not this one
            continue
    xp = namespace_of(backend)
    try:
        xp.empty((0,), device=device)  # what the backend accepts besides its listed devices
    except Exception as exc:  # every backend raises its own kind (ValueError, TypeError, AttributeError, RuntimeError)
        raise ValueError(
            f"{op}: device={device!r} is not a device of backend {backend.name!r} (devices={[d for d in devices if d is not None]}). Pass one of "
            f"xsparse.__array_namespace_info__(backend={backend.name!r}).devices()."
        ) from exc
    return device


def scalar_for(xp: Any, dtype: Any, value: Any) -> Any:
    """``value`` as the Python scalar type that the dtype's kind mixes with (bool, int, float, complex)."""
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        value = value.item()  # a NumPy scalar (np.float32 has no __complex__)
    if getattr(value, "ndim", 0) != 0:
        raise TypeError(
            f"fill_value: expected a number, got an array of shape {tuple(getattr(value, 'shape', ()))}. Pass a Python "
            "bool, int, float or complex (or a 0-d array)."
        )
    if not isinstance(value, (bool, int, float, complex)) and not hasattr(value, "__complex__"):
        raise TypeError(
            f"fill_value: expected a number, got {type(value).__name__} ({value!r}). Pass a Python bool, int, float or complex."
        )
    if xp.isdtype(dtype, "bool"):
        return bool(value)
    if xp.isdtype(dtype, "integral"):
        as_int = int(value.real if isinstance(value, complex) else value)
        if as_int != value:
            raise ValueError(f"fill_value: {value!r} is not representable in the integer dtype {dtype_name(dtype)}. Use an integer fill value.")
        return as_int
    if xp.isdtype(dtype, "real floating"):
        if isinstance(value, complex):
            raise ValueError(f"fill_value: {value!r} is complex but the dtype is {dtype_name(dtype)}. Use a real fill value.")
        return _rounded(dtype_name(dtype), float(value))
    value = complex(value)
    if dtype_name(dtype) == "complex64":
        return complex(_rounded("float32", value.real), _rounded("float32", value.imag))
    return value


def _rounded(name: str, value: float) -> float:
    """``value`` rounded to the floating dtype ``name``, as a Python float: the fill value is the element
    that ``to_dense`` writes, so that ``fill_value=0.1`` of a float32 array is float32's 0.1, and compares
    equal to the elements it stands for. Past the dtype's range it is an infinity, as a cast makes it."""
    if name == "float64" or math.isnan(value):
        return value
    with np.errstate(over="ignore"):
        if name == "float16":
            return float(np.float16(value))
        single = np.float32(value)
    if name == "bfloat16":
        # bfloat16 is float32's upper half: round to nearest, ties to even, on the bits
        bits = int(single.view(np.uint32))
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return float(np.uint32(bits).view(np.float32))
    return float(single)


def fill_argument(xp: Any, dtype: Any, value: Any) -> Any:
    """A fill value given by the user for an array of ``dtype``: :func:`scalar_for`, and an error where an integer
    dtype cannot hold it (300 in int8, NaN), rather than the wrapped or truncated value a cast would make. Any
    value is a bool, and a float past the range an infinity, as in the backends' ``full``."""
    integral = xp.isdtype(dtype, "integral")
    if integral and isinstance(value, (float, complex)) and not math.isfinite(abs(value)):
        raise ValueError(f"fill_value: {value!r} is not representable in the integer dtype {dtype_name(dtype)}. Use an integer fill value.")
    fill = scalar_for(xp, dtype, value)
    # a floating value past the dtype's range becomes an infinity, as in the backends' own ``full`` (the
    # Array API test suite draws fill values at that boundary); an integer one would wrap or raise there
    ok = not integral or xp.iinfo(dtype).min <= fill <= xp.iinfo(dtype).max
    if not ok:
        raise ValueError(f"fill_value: {value!r} is out of the range of the dtype {dtype_name(dtype)}. Use a fill value that the dtype holds, or another dtype.")
    return fill


def integer_argument(op: str, name: str, value: Any, hint: str = "Pass an integer.") -> int:
    """``value`` as an int, by ``operator.index``: NumPy and torch integers are one; a float, a string or NaN
    is not (``int()`` would take ``2.5`` for 2 and ``"2"`` for 2), nor a bool of any library, which is never
    meant as a count, a size or an axis (``q=True`` would run a rank-1 decomposition). ``hint`` ends the
    message."""
    if _is_bool(value):
        raise TypeError(f"{op}: {name} must be an integer, not a bool ({name}={value!r}). {hint}")
    try:
        if len(tuple(getattr(value, "shape", ()))):
            raise TypeError  # a one-element torch tensor converts with __index__ too: only a 0-d array is an integer
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an integer, got {type(value).__name__} ({name}={value!r}). {hint}") from None


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or (hasattr(value, "dtype") and dtype_name(value.dtype) == "bool")


def shape_argument(op: str, shape: Any) -> tuple[int, ...]:
    """A shape: a sequence of integers (each by ``operator.index``, as :func:`integer_argument`; no bools)."""
    try:
        if any(_is_bool(s) for s in shape):
            raise TypeError
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{op}: shape must be a sequence of integers, got {shape!r}. Pass a tuple such as (2, 3).") from None


def blocksize_argument(op: str, blocksize: Any) -> tuple[int, int]:
    """A block shape: two positive integers (a string's characters are not integers, nor a bool a size)."""
    try:
        if any(_is_bool(b) for b in blocksize):
            raise TypeError
        rows, cols = (operator.index(b) for b in blocksize)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: blocksize must be two integers (rows, columns), got {blocksize!r}. Pass e.g. blocksize=(2, 2).") from None
    if rows <= 0 or cols <= 0:
        raise ValueError(f"{op}: blocksize must be two positive integers (blocksize=({rows}, {cols})). Pass sizes of at least 1.")
    return rows, cols


def seed_argument(op: str, seed: Any) -> Any:
    """``seed`` as the kernels take it: None, a NumPy generator or seed sequence, or what seeds one."""
    if seed is None or isinstance(seed, (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence)):
        return seed
    try:
        np.random.SeedSequence(seed)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{op}: seed must be None, a non-negative int, a sequence of them or a NumPy Generator (seed={seed!r}). "
            "Pass an integer such as seed=0."
        ) from exc
    # a NumPy integer seeds torch's generator too, which takes Python ints only
    return int(seed) if isinstance(seed, np.integer) else seed


def flag_argument(op: str, name: str, value: Any) -> bool:
    """A boolean argument: ``True`` or ``False`` (NumPy's bools too). ``bool()`` would read ``"no"`` as true."""
    if isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")):
        return bool(value)
    raise TypeError(f"{op}: {name} must be True or False, got {type(value).__name__} ({name}={value!r}). Pass a bool.")
