"""torch-like ``repr`` of sparse arrays, identical across backends but for the ``backend=`` field."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import dtype_name
from .backends.array_api.conversion import is_plus_zero

__all__ = ["sparse_repr"]


def _host(x: Any) -> np.ndarray:
    """A NumPy copy (or view) of a component, for printing only."""
    if hasattr(x, "resolve_conj"):
        # torch refuses to export a tensor that requires grad or carries a lazy conjugate, and exports a
        # lazy negation without applying it; values on an accelerator are copied to the host
        x = x.detach().resolve_conj().resolve_neg().cpu()
        try:
            return np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError):  # a dtype NumPy lacks (bfloat16): print it widened
            return np.from_dlpack(x.cfloat() if x.is_complex() else x.float())
    try:
        return np.from_dlpack(x)
    except (TypeError, ValueError, RuntimeError, BufferError, AttributeError):
        if hasattr(x, "get"):  # CuPy
            return np.asarray(x.get())
        return np.from_dlpack(x, device="cpu")


def _component(name: str, x: Any, indent: int) -> str:
    arr = _host(x)
    if arr.size == 0:
        return f"{name}=[], shape={arr.shape}"
    text = np.array2string(arr, separator=", ", prefix=" " * (indent + len(name) + 1), threshold=200)
    return f"{name}={text}"


def sparse_repr(a: Any) -> str:
    head = "sparse_array("
    pad = " " * len(head)
    parts = [_component(name, comp, len(head)) for name, comp in a._components().items()]
    extra = "" if is_plus_zero(a.fill_value) else f", fill_value={a.fill_value!r}"
    tail = f"shape={a.shape}, nnz={a.nnz}, dtype={dtype_name(a.dtype)}, layout={a.layout}{extra}, backend={a.backend})"
    return head + (",\n" + pad).join([*parts, tail])
