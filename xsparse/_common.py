"""Helpers of the public layer: which backend a call runs on, and dtype and scalar normalisation."""

from __future__ import annotations

from typing import Any

import array_api_compat

from ._errors import BackendMismatchError
from .backends import Backend, backend_of_array, get_backend, get_default_backend
from .formats import SparseArray

__all__ = ["backend_of", "resolve_dtype", "scalar_for", "is_strided", "dtype_name"]


def is_strided(x: Any) -> bool:
    """Whether ``x`` is an array of some backend (not an xsparse array, not a Python scalar or list)."""
    return not isinstance(x, (SparseArray, bool, int, float, complex, list, tuple)) and array_api_compat.is_array_api_obj(x)


def backend_of(*objs: Any, op: str, backend: str | Backend | None = None) -> Backend:
    """The backend a call with these operands runs on.

    Sparse arrays and backend arrays name their backend; Python scalars and lists follow ``backend``
    or, without it, the default backend. Operands of two backends are an error that says how to move one.
    """
    found: dict[str, Backend] = {}
    for obj in objs:
        if isinstance(obj, SparseArray):
            b = obj._backend
        elif obj is not None and is_strided(obj):
            b = backend_of_array(obj)
        else:
            continue
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
        raise BackendMismatchError(
            f"{op}: the operands live on different backends ({', '.join(repr(n) for n in names)}). Move them to one, "
            f"e.g. xsparse.to_backend(a, {names[0]!r}) (zero-copy through DLPack where the libraries allow)."
        )
    if found:
        return next(iter(found.values()))
    return get_default_backend()


def dtype_name(dtype: Any) -> str:
    """The Array API name of a dtype (``float64``), whatever library spells it."""
    from .formats._invariants import dtype_name as _name

    return _name(dtype)


_PYTHON_KINDS = {bool: "bool", int: "int64", float: "float64", complex: "complex128"}


def resolve_dtype(xp: Any, dtype: Any) -> Any:
    """The backend's dtype object for ``dtype``: a backend dtype, a name, a NumPy dtype, or a Python type."""
    if dtype is None:
        return None
    if isinstance(dtype, type) and dtype in _PYTHON_KINDS:
        name = _PYTHON_KINDS[dtype]
    elif isinstance(dtype, str):
        name = dtype
    else:
        name = dtype_name(dtype)
    found = getattr(xp, name, None)
    if found is None:
        raise TypeError(f"dtype: the backend {xp.__name__} has no dtype {name!r}. Pass one of the backend's dtypes.")
    return found


def scalar_for(xp: Any, dtype: Any, value: Any) -> Any:
    """``value`` as the Python scalar type that the dtype's kind mixes with (bool, int, float, complex)."""
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
        return float(value)
    return complex(value)
