"""Index arithmetic on format components, written against the Array API namespace ``xp`` alone."""

from __future__ import annotations

import math
from typing import Any

import array_api_compat

__all__ = ["expand_compressed", "compress", "lexsort_indices", "prod", "contiguous"]


def prod(shape: tuple[int, ...] | list[int]) -> int:
    return math.prod(shape)


def expand_compressed(xp: Any, compressed: Any, nse: int, backend: Any = None) -> Any:
    """The major (compressed-dimension) index of every specified element: shape ``(*batch, nse)``.

    Cost: O(batch * (nse + n_compressed)) where ``backend`` repeats by an array of counts (each slice's
    index repeated by its count of elements); otherwise one ``searchsorted`` of ``batch * nse`` queries
    into ``batch * n_compressed`` boundaries, O(batch * nse * log n_compressed). Batches are handled in
    one call: repeated by one flat array of counts, or searched with each batch's boundaries offset by
    ``batch_index * nse``, which keeps the concatenated boundaries non-decreasing.
    """
    device = array_api_compat.device(compressed)
    batch = tuple(compressed.shape[:-1])
    nb = prod(batch)
    n_compressed = compressed.shape[-1] - 1
    if nse == 0 or nb == 0:
        return xp.zeros(batch + (nse,), dtype=compressed.dtype, device=device)
    flat = xp.reshape(compressed, (nb, n_compressed + 1))
    repeat = getattr(backend, "repeat", None)
    if repeat is not None:
        counts = xp.reshape(flat[:, 1:] - flat[:, :-1], (-1,))
        slices = xp.arange(n_compressed, dtype=compressed.dtype, device=device)
        if nb > 1:
            slices = xp.reshape(xp.broadcast_to(slices[None, :], (nb, n_compressed)), (-1,))
        return xp.reshape(repeat(slices, counts, nb * nse), batch + (nse,))
    flat = xp.astype(flat, xp.int64)
    offsets = xp.arange(nb, dtype=xp.int64, device=device) * nse
    bounds = xp.reshape(flat[:, 1:] + offsets[:, None], (-1,))
    queries = xp.reshape(xp.arange(nse, dtype=xp.int64, device=device)[None, :] + offsets[:, None], (-1,))
    major = xp.searchsorted(bounds, queries, side="right")
    major = xp.reshape(major, (nb, nse)) - xp.arange(nb, dtype=xp.int64, device=device)[:, None] * n_compressed
    return xp.reshape(xp.astype(major, compressed.dtype), batch + (nse,))


def compress(xp: Any, batch_lin: Any, major: Any, nb: int, n_compressed: int, nse: int, index_dtype: Any) -> Any:
    """Compressed indices ``(nb, n_compressed + 1)`` from per-element batch and major indices.

    The elements must be sorted by (batch, major) and every batch must hold ``nse`` of them.
    """
    device = array_api_compat.device(major)
    key = xp.astype(batch_lin, xp.int64) * n_compressed + xp.astype(major, xp.int64)
    b = xp.arange(nb, dtype=xp.int64, device=device)[:, None]
    targets = b * n_compressed + xp.arange(n_compressed + 1, dtype=xp.int64, device=device)[None, :]
    pos = xp.searchsorted(key, xp.reshape(targets, (-1,)), side="left")
    pos = xp.reshape(pos, (nb, n_compressed + 1)) - b * nse
    return xp.astype(pos, index_dtype)


def lexsort_indices(xp: Any, indices: Any) -> Any:
    """The permutation that sorts the columns of ``indices`` (k, n) lexicographically, stably.

    Sorting by the last row first and by each earlier row after, stably, needs no linearised key, so
    it cannot overflow however large the shape.
    """
    n = indices.shape[1]
    perm = xp.arange(n, dtype=xp.int64, device=array_api_compat.device(indices))
    for d in range(indices.shape[0] - 1, -1, -1):
        key = xp.take(indices[d, :], perm)
        perm = xp.take(perm, xp.argsort(key, stable=True))
    return perm


def contiguous(backend: Any, xp: Any, x: Any) -> Any:
    """``x``, or a row-major copy of it where the backend says it is not contiguous (invariants 3.5-3.7).

    A plain copy is not enough: torch's copy keeps the strides of a permuted (dense but not row-major)
    tensor, while a flat reshape lays the elements out in row-major order on every library.
    """
    if backend.is_contiguous(x) is False:
        # astype, not asarray: torch's asarray(copy=True) warns about the autograd flag of values that require grad
        x = xp.reshape(xp.reshape(xp.astype(x, x.dtype, copy=True), (-1,)), tuple(x.shape))
    return x
