"""Benchmark xsparse's n-dimensional COO arrays against pydata/sparse (NumPy backend) and torch.sparse.

pydata/sparse's home ground is the n-dimensional COO array with NumPy's semantics; torch.sparse's is
the hybrid COO tensor. The xsparse side is the public API (``X + Y``, ``xs.sum(X, axis=0)``,
``X @ B``, ...): dispatch, the kernels' ``supports`` checks and the kernels, everything a user's call
pays.

Usage::

    python benchmarks/bench_coo.py [--quick]

Inputs (full sizes; ``--quick`` shrinks the entries tenfold): two 200 x 300 x 400 COO arrays of
1,000,000 random entries each (float64 values, int64 indices), coalesced (pydata/sparse's arrays are
canonical; torch's tensors are coalesced first, outside the timing), and an uncoalesced copy of the
first with its entries in random order for the product.

NumPy backend, against pydata/sparse ``COO`` arrays of the same entries, target: at least as fast
(ratio <= 1.0):

* elementwise: ``X + Y``, ``X * Y``, ``sin(X)``, ``X * b`` (b a dense vector broadcast along the last
  dimension), ``abs(X) > 1``;
* reductions: ``sum`` over axis 0, axis 2 and every axis, ``max`` over axis 1, ``mean`` over axis 0;
* structure: ``permute_dims`` (2, 0, 1), ``reshape`` to 600 x 40,000, ``X[10:100, :, 5]``,
  ``concat([X, Y])``, ``take`` of 50 random indices (repeats likely) along axis 0 and along axis 1
  (pydata/sparse: ``X[idx]``, ``X[:, idx]``);
* products: ``X @ B`` and ``tensordot(X, B, axes=1)`` with ``B`` a dense 400 x 16 matrix, ``U @ B``
  for the uncoalesced copy ``U``, and ``S @ S`` for a 20,000 x 20,000 COO matrix ``S`` of 400,000
  random entries (40,000 with ``--quick``).

torch backend, against the same operations on torch sparse COO tensors where torch has them, target:
within 10 % (ratio <= 1.1): ``X + Y``, ``X * Y``, ``sin(X)``, ``sum`` over axis 0 and axis 2,
``X @ B`` (torch: ``torch.bmm`` is for equal batches, so its reference is the 2-D product of the
reshaped 60,000 x 400 tensor, as a user of torch would write it).

Times are the best of a few repeats in this process, ours and the reference's alternating, as
wall-clock time and as CPU time of the process (all threads). Each result is checked against the
reference once (through a dense array).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_elementwise import _print_table, _time_pair, cli  # noqa: E402

import xsparse as xs  # noqa: E402  (bench_elementwise made it importable from a checkout)

SHAPE = (200, 300, 400)


def _entries(seed: int, nnz: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, s, nnz) for s in SHAPE]), rng.standard_normal(nnz)


def _dense(x: Any) -> np.ndarray:
    if isinstance(x, xs.SparseArray):
        return np.asarray(xs.to_dense(x))
    if hasattr(x, "todense"):  # pydata/sparse
        return np.asarray(x.todense())
    return np.asarray(x)


def _check(ours: Any, ref: Any, name: str) -> None:
    np.testing.assert_allclose(_dense(ours), _dense(ref), rtol=1e-10, atol=1e-10, err_msg=name)


def numpy_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    try:
        import sparse
    except ImportError:
        print("pydata/sparse is not installed (pip install sparse): the NumPy-backend cases are left out")
        return []
    nnz = 100_000 if quick else 1_000_000
    (ix, vx), (iy, vy) = _entries(0, nnz), _entries(1, nnz)
    px, py = sparse.COO(ix, vx, shape=SHAPE), sparse.COO(iy, vy, shape=SHAPE)  # canonical: sorted, summed
    x = xs.sparse_coo_array(np.asarray(px.coords), np.asarray(px.data), SHAPE, is_coalesced=True)
    y = xs.sparse_coo_array(np.asarray(py.coords), np.asarray(py.data), SHAPE, is_coalesced=True)
    order = np.random.default_rng(2).permutation(nnz)
    u = xs.sparse_coo_array(ix[:, order], vx[order], SHAPE)
    pu = sparse.COO(ix[:, order], vx[order], shape=SHAPE, has_duplicates=True, sorted=False)
    b = np.random.default_rng(3).standard_normal((SHAPE[2], 16))
    row = np.random.default_rng(4).standard_normal(SHAPE[2])
    picks0, picks1 = (np.random.default_rng(5 + d).integers(0, SHAPE[d], 50) for d in (0, 1))
    side, nnz2 = 20_000, nnz * 2 // 5
    rng2 = np.random.default_rng(6)
    ps = sparse.COO(np.stack([rng2.integers(0, side, nnz2), rng2.integers(0, side, nnz2)]), rng2.standard_normal(nnz2), shape=(side, side))
    s2 = xs.sparse_coo_array(np.asarray(ps.coords), np.asarray(ps.data), (side, side), is_coalesced=True)
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("X + Y", lambda: x + y, lambda: px + py),
        ("X * Y", lambda: x * y, lambda: px * py),
        ("sin(X)", lambda: xs.sin(x), lambda: np.sin(px)),
        ("X * b", lambda: x * row, lambda: px * row),
        ("abs(X) > 1", lambda: xs.abs(x) > 1, lambda: abs(px) > 1),
        ("sum axis=0", lambda: xs.sum(x, axis=0), lambda: px.sum(axis=0)),
        ("sum axis=2", lambda: xs.sum(x, axis=2), lambda: px.sum(axis=2)),
        ("sum", lambda: xs.sum(x), lambda: px.sum()),
        ("max axis=1", lambda: xs.max(x, axis=1), lambda: px.max(axis=1)),
        ("mean axis=0", lambda: xs.mean(x, axis=0), lambda: px.mean(axis=0)),
        ("permute", lambda: xs.permute_dims(x, (2, 0, 1)), lambda: px.transpose((2, 0, 1))),
        ("reshape", lambda: xs.reshape(x, (600, 40_000)), lambda: px.reshape((600, 40_000))),
        ("X[10:100,:,5]", lambda: x[10:100, :, 5], lambda: px[10:100, :, 5]),
        ("concat", lambda: xs.concat([x, y]), lambda: sparse.concatenate([px, py])),
        ("take axis=0", lambda: xs.take(x, picks0, axis=0), lambda: px[picks0]),
        ("take axis=1", lambda: xs.take(x, picks1, axis=1), lambda: px[:, picks1]),
        ("X @ B", lambda: x @ b, lambda: px @ b),
        ("tensordot", lambda: xs.tensordot(x, b, axes=1), lambda: sparse.tensordot(px, b, axes=1)),
        ("U @ B", lambda: u @ b, lambda: pu @ b),
        ("S @ S", lambda: s2 @ s2, lambda: ps @ ps),
    ]
    rows = []
    for name, ours, ref in cases:
        # pydata/sparse compiles its kernels with numba on first use: the check is its warm-up
        _check(ours(), ref(), name)
        rows.append({"backend": "numpy", "case": name, "reference": "pydata/sparse", **_time_pair(ours, ref, repeats), "target": 1.0})
    return rows


def torch_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    import torch

    from xsparse.backends.torch import to_torch

    nnz = 100_000 if quick else 1_000_000
    (ix, vx), (iy, vy) = _entries(0, nnz), _entries(1, nnz)
    tx = torch.sparse_coo_tensor(torch.from_numpy(ix), torch.from_numpy(vx), SHAPE).coalesce()
    ty = torch.sparse_coo_tensor(torch.from_numpy(iy), torch.from_numpy(vy), SHAPE).coalesce()
    x = xs.sparse_coo_array(tx.indices(), tx.values(), SHAPE, is_coalesced=True)
    y = xs.sparse_coo_array(ty.indices(), ty.values(), SHAPE, is_coalesced=True)
    b = torch.from_numpy(np.random.default_rng(3).standard_normal((SHAPE[2], 16)))
    t2 = torch.sparse_coo_tensor(
        torch.stack([tx.indices()[0] * SHAPE[1] + tx.indices()[1], tx.indices()[2]]), tx.values(), (SHAPE[0] * SHAPE[1], SHAPE[2])
    ).coalesce()
    torch.set_num_threads(os.cpu_count() or 1)
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("X + Y", lambda: x + y, lambda: tx + ty),
        ("X * Y", lambda: x * y, lambda: tx * ty),
        ("sin(X)", lambda: xs.sin(x), lambda: torch.sin(tx)),
        ("sum axis=0", lambda: xs.sum(x, axis=0), lambda: torch.sparse.sum(tx, dim=0)),
        ("sum axis=2", lambda: xs.sum(x, axis=2), lambda: torch.sparse.sum(tx, dim=2)),
        ("X @ B", lambda: x @ b, lambda: (t2 @ b).reshape(*SHAPE[:2], 16)),
    ]
    rows = []
    for name, ours, ref in cases:
        got, want = ours(), ref()
        got = to_torch(got) if isinstance(got, xs.SparseArray) else got
        got = got.to_dense() if got.is_sparse else got
        want = want.to_dense() if want.is_sparse else want
        assert torch.allclose(got, want, rtol=1e-10, atol=1e-10), name
        rows.append({"backend": "torch", "case": name, "reference": "torch.sparse", **_time_pair(ours, ref, repeats), "target": 1.1})
    return rows


def main() -> None:
    cli(__doc__ or "", numpy_cases, torch_cases, _print_table)


if __name__ == "__main__":
    main()
