"""Data types, constants and the data type functions of the Array API (``can_cast``, ``finfo``, ``iinfo``,
``isdtype``, ``result_type``).

xsparse has no dtype objects of its own: a sparse array's dtype is its backend's. The names
``xs.float64``, ``xs.int32``, ... are therefore looked up, when read, in the namespace of the *current
default backend* (:func:`xsparse.get_default_backend`), through the module ``__getattr__`` below, so
``with xs.default_backend("torch"): xs.float64`` is ``torch.float64``. A namespace bound to one backend
(``A.__array_namespace__()``) gives that backend's dtypes.

Every function here accepts a dtype of any backend, a dtype name (``"float64"``) or a Python type
(``float``) wherever the standard takes a dtype; a dtype object tells which backend answers (a
``torch.dtype`` goes to torch), and a name or Python type goes to the default backend. An array (sparse
or strided) goes to its own backend.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

from ._common import backend_of, dtype_name, is_strided, resolve_dtype
from .backends import Backend, get_backend, get_default_backend, registered_backends
from .formats import SparseArray

__all__ = [
    "DTYPE_NAMES",
    "e",
    "pi",
    "inf",
    "nan",
    "newaxis",
    "can_cast",
    "finfo",
    "iinfo",
    "isdtype",
    "result_type",
    "dtype_backend",
    "finfo_object",
    "iinfo_object",
]

#: The data types of the Array API standard, by name.
DTYPE_NAMES = (
    "bool",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float32", "float64",
    "complex64", "complex128",
)  # fmt: skip

e = math.e
pi = math.pi
inf = math.inf
nan = math.nan
newaxis = None


def __getattr__(name: str) -> Any:
    """A dtype name resolves to the default backend's dtype of that name (PEP 562)."""
    if name in DTYPE_NAMES:
        xp = get_default_backend().namespace()
        found = getattr(xp, name, None)
        if found is None:
            raise AttributeError(
                f"xsparse.{name}: the default backend {get_default_backend().name!r} has no dtype {name!r}. Use a "
                f"backend that has it (xsparse.default_backend('numpy')), or another dtype."
            )
        return found
    raise AttributeError(f"module 'xsparse' has no attribute {name!r}")


def dtype_backend(dtype: Any) -> Backend:
    """The backend whose dtype object ``dtype`` is; the default backend for a name or a Python type."""
    if isinstance(dtype, str) or dtype in (bool, int, float, complex):
        return get_default_backend()
    # NumPy's dtypes in its Array API namespace are the scalar types (numpy.float64), torch's are objects
    module = (dtype if isinstance(dtype, type) else type(dtype)).__module__
    library = module.split(".")[0]
    for backend in registered_backends():
        if backend.library == library and library in sys.modules:
            return backend
    if library in sys.modules and module in sys.modules and hasattr(sys.modules[module], "__array_api_version__"):
        # a type of an Array API namespace's own module (JAX's scalar types, jax.numpy.float32), whose
        # promotion is that library's (int64 with float32 is float32 on JAX, float64 on NumPy)
        return get_backend(module)
    return get_default_backend()


def _is_array(obj: Any, op: str | None = None) -> bool:
    # numpy.float64 (a dtype of NumPy's namespace) is a class with __array_namespace__, not an array
    return isinstance(obj, SparseArray) or (not isinstance(obj, type) and is_strided(obj, op))


def _backend_of_operands(op: str, *objs: Any) -> Backend:
    """The backend of the arrays among ``objs``, else of their dtype objects, else the default one."""
    arrays = [o for o in objs if _is_array(o, op)]
    if arrays:
        return backend_of(*arrays, op=op)
    dtypes = [o for o in objs if not isinstance(o, (bool, int, float, complex, str)) and o not in (bool, int, float, complex) and o is not None]
    return dtype_backend(dtypes[0]) if dtypes else get_default_backend()


def _as_dtype(op: str, xp: Any, obj: Any, name: str) -> Any:
    """``obj`` (an array's dtype, a dtype of any backend, a name or a Python type) as ``xp``'s dtype."""
    if _is_array(obj, op):
        return obj.dtype
    try:
        return resolve_dtype(xp, obj)
    except (TypeError, AttributeError, KeyError):
        raise TypeError(
            f"{op}: {name} is neither an array nor a dtype ({name}={obj!r}). Pass an array, a backend dtype such as "
            "xsparse.float64, or a dtype name such as 'float64'."
        ) from None


def can_cast(from_: Any, to: Any, /) -> bool:
    """Whether the Array API's type promotion rules allow casting ``from_`` to ``to``.

    ``from_`` is a dtype or an array (sparse or strided); ``to`` a dtype. Names and Python types are
    read on the backend of the other argument (the default backend when neither names one). Between two
    integer dtypes, or two floating-point ones (real or complex), the answer is the standard's on every
    backend: whether promoting ``from_`` with ``to`` gives ``to``. Across kinds (bool to an integer, an
    integer to a floating-point dtype), which the standard leaves to the library, it is the backend's.

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.can_cast(xs.int32, xs.float64), xs.can_cast("float64", "int8")
    (True, False)
    >>> xs.can_cast(xs.sparse_coo_array([[0]], [1.0], (2,)), "float32")
    False
    """
    op = "can_cast"
    xp = _backend_of_operands(op, from_, to).namespace()
    source, target = _as_dtype(op, xp, from_, "from_"), _as_dtype(op, xp, to, "to")
    a, b = dtype_name(source), dtype_name(target)
    # within a kind, the standard's promotion table decides (torch's can_cast allows every cast down a
    # kind, int64 to int32 and uint64 to int64 too); across kinds the standard leaves it to the library
    if a in _SIGNED.keys() | _UNSIGNED.keys() and b in _SIGNED.keys() | _UNSIGNED.keys():
        try:
            return _promote(op, a, b) == b
        except TypeError:
            return False  # no promotion of the pair (int64 with uint64)
    if a in _FLOATING_BITS and b in _FLOATING_BITS:
        # float16 and bfloat16 (outside the standard) widen as its floating-point dtypes do, and neither
        # holds the other
        if a.startswith("complex") and not b.startswith("complex"):
            return False
        return a == b or (_FLOATING_BITS[a] <= _FLOATING_BITS[b] and {a, b} != {"float16", "bfloat16"})
    return bool(xp.can_cast(source, target))


# the bits of a floating-point dtype's real part
_FLOATING_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64, "complex64": 32, "complex128": 64}


def result_type(*arrays_and_dtypes: Any) -> Any:
    """The dtype that the Array API's promotion rules give for these arrays, dtypes and Python scalars.

    Sparse arrays take part through their dtype; the result is the backend's dtype object.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1], [0], [1], (1, 1), dtype="int8")
    >>> xs.result_type(a, "int16") == xs.int16
    True
    >>> xs.result_type(a, 1.5) == xs.float64
    True
    """
    op = "result_type"
    if not arrays_and_dtypes:
        raise ValueError(f"{op}: at least one array or dtype is needed (got none). Pass arrays, dtypes or Python scalars.")
    xp = _backend_of_operands(op, *arrays_and_dtypes).namespace()
    args: list[Any] = []
    for i, obj in enumerate(arrays_and_dtypes):
        if isinstance(obj, (bool, int, float, complex)):
            args.append(obj)
        else:
            args.append(_as_dtype(op, xp, obj, f"arrays_and_dtypes[{i}]"))
    if all(isinstance(a, (bool, int, float, complex)) for a in args):
        raise ValueError(
            f"{op}: at least one argument must be an array or a dtype (arrays_and_dtypes={arrays_and_dtypes!r}). Python "
            "scalars alone have no dtype; add one."
        )
    # Python scalars go to the backend as they are: the standard leaves float-with-integer mixing to the
    # library, and array-api-strict refuses what NumPy and torch accept.
    try:
        return xp.result_type(*args)
    except (RuntimeError, TypeError):
        # torch refuses every promotion that involves uint16, uint32 or uint64 ("limited support"
        # dtypes); the standard's table defines them, so the dtypes are promoted here by name and the
        # backend only mixes in the Python scalars. array-api-strict refuses the pairs that the table
        # leaves undefined (mixed kinds) in its own words: the table names them in xsparse's.
        dtypes = [a for a in args if not isinstance(a, (bool, int, float, complex))]
        scalars = [a for a in args if isinstance(a, (bool, int, float, complex))]
        name = dtype_name(dtypes[0])
        for other in dtypes[1:]:
            name = _promote(op, name, dtype_name(other))
        promoted = getattr(xp, name)
        return xp.result_type(promoted, *scalars) if scalars else promoted


_SIGNED = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UNSIGNED = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_FLOAT = {"float32": 32, "float64": 64, "complex64": 32, "complex128": 64}


def _promote(op: str, a: str, b: str) -> str:
    """The standard's type promotion table for two dtype names; TypeError where it defines no result."""
    if a == b:
        return a
    given = (a, b)
    if a in _SIGNED and b in _SIGNED:
        return a if _SIGNED[a] >= _SIGNED[b] else b
    if a in _UNSIGNED and b in _UNSIGNED:
        return a if _UNSIGNED[a] >= _UNSIGNED[b] else b
    if a in _UNSIGNED and b in _SIGNED:
        a, b = b, a
    if a in _SIGNED and b in _UNSIGNED and _UNSIGNED[b] < 64:
        # the smallest signed integer that holds both: wider than the unsigned one
        return f"int{max(_SIGNED[a], 2 * _UNSIGNED[b])}"
    if a in _FLOAT and b in _FLOAT:
        bits = max(_FLOAT[a], _FLOAT[b])
        complex_ = a.startswith("complex") or b.startswith("complex")
        return f"complex{2 * bits}" if complex_ else f"float{bits}"
    raise TypeError(
        f"{op}: the Array API defines no promotion of {given[0]} with {given[1]} (dtypes=({given[0]}, {given[1]})). Cast one operand "
        "explicitly with xsparse.astype."
    )


@dataclass(frozen=True)
class finfo_object:  # noqa: N801  (the standard's name)
    """Machine limits of a floating-point dtype, as the standard specifies them: Python numbers and the
    backend's real floating dtype object (for a complex dtype, that of its real and imaginary parts)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: Any


@dataclass(frozen=True)
class iinfo_object:  # noqa: N801  (the standard's name)
    """Machine limits of an integer dtype: Python ints and the backend's dtype object."""

    bits: int
    max: int
    min: int
    dtype: Any


def finfo(type: Any, /) -> finfo_object:  # noqa: A002  (the standard's parameter name)
    """Machine limits of a floating-point dtype, read from the backend's ``finfo`` of it.

    The numbers are Python ``int`` and ``float`` (NumPy's ``finfo`` gives NumPy scalars) and ``dtype`` is
    the backend's dtype object (torch's ``finfo`` gives a name), as the standard specifies.

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.finfo("float32").bits, xs.finfo(xs.float64).eps == 2.0 ** -52
    (32, True)
    >>> xs.finfo(xs.complex64).dtype == xs.float32
    True
    """
    op = "finfo"
    xp = _backend_of_operands(op, type).namespace()
    dt = _as_dtype(op, xp, type, "type")
    if not xp.isdtype(dt, ("real floating", "complex floating")):
        raise TypeError(f"{op}: the dtype must be a floating-point one (type={dtype_name(dt)}). Use xsparse.iinfo for integer dtypes.")
    own = xp.finfo(dt)
    real = {"complex64": "float32", "complex128": "float64"}.get(dtype_name(dt), dtype_name(dt))
    return finfo_object(
        bits=int(own.bits), eps=float(own.eps), max=float(own.max), min=float(own.min),
        smallest_normal=float(own.smallest_normal), dtype=getattr(xp, real),
    )  # fmt: skip


def iinfo(type: Any, /) -> iinfo_object:  # noqa: A002  (the standard's parameter name)
    """Machine limits of an integer dtype, read from the backend's ``iinfo`` of it (Python ints, and the
    backend's dtype object as ``dtype``).

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.iinfo("int8").min, xs.iinfo(xs.uint8).max
    (-128, 255)
    >>> xs.iinfo(xs.int16).dtype == xs.int16
    True
    """
    op = "iinfo"
    xp = _backend_of_operands(op, type).namespace()
    dt = _as_dtype(op, xp, type, "type")
    if not xp.isdtype(dt, "integral"):
        raise TypeError(f"{op}: the dtype must be an integer one (type={dtype_name(dt)}). Use xsparse.finfo for floating-point dtypes.")
    own = xp.iinfo(dt)
    return iinfo_object(bits=int(own.bits), max=int(own.max), min=int(own.min), dtype=getattr(xp, dtype_name(dt)))


def isdtype(dtype: Any, kind: str | Any | tuple[Any, ...]) -> bool:
    """Whether ``dtype`` is of ``kind``: a kind name (``"integral"``, ``"real floating"``, ...), a dtype, or a
    tuple of them.

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.isdtype(xs.float32, "real floating"), xs.isdtype(xs.int8, ("bool", "unsigned integer"))
    (True, False)
    >>> xs.isdtype(xs.int8, xs.int8)
    True
    """
    op = "isdtype"
    if _is_array(dtype, op):
        raise TypeError(f"{op}: the first argument must be a dtype, got an array ({type(dtype).__name__}). Pass x.dtype.")
    xp = dtype_backend(dtype).namespace()
    dt = _as_dtype(op, xp, dtype, "dtype")

    def one(k: Any) -> Any:
        return k if isinstance(k, str) else _as_dtype(op, xp, k, "kind")

    kinds = tuple(one(k) for k in kind) if isinstance(kind, tuple) else one(kind)
    return bool(xp.isdtype(dt, kinds))
