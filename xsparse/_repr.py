"""torch-like ``repr`` of sparse arrays, identical across backends but for the ``backend=`` field."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import dtype_name
from .backends.array_api.conversion import is_plus_zero, to_host

__all__ = ["sparse_repr"]


def _component(name: str, x: Any, indent: int) -> str:
    arr = to_host(x)
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
