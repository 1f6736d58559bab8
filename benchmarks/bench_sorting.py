"""Benchmark xsparse's sorting, set and searching functions against what a user would otherwise write.

The xsparse side is the public API (``xs.sort``, ``xs.unique_*``, ``xs.searchsorted``): dispatch, the
kernels' ``supports`` checks and the kernels, everything a user's call pays.

Usage::

    python benchmarks/bench_sorting.py [--quick]

Cases (``--quick`` shrinks them fourfold): a 2000 x 2000 CSR array with 5 % of its elements specified
(200,000 float64 values at uniformly random positions, int32 indices) and the same array as a
(coalesced) COO array, fill value 0.

NumPy backend, references on the SciPy ``csr_array`` of the same matrix, the fill value handled as
xsparse handles it (it is a value when an element is unspecified):

* ``unique_values``, ``unique_counts``, ``unique_inverse``: ``np.unique`` of the stored values and one 0
  (counts: the 0 counted once per unspecified element);
* ``unique_all``: the same with ``return_index`` too;
* ``sort(A, axis=1)`` of the CSR and the COO array: the stored values sorted within each row with
  ``np.lexsort((values, rows))``, and the columns they move to (those below 0 to the row's start, the
  others to its end), assembled as a ``csr_array``;
* ``searchsorted(x1, q)`` with ``x1`` a sparse vector of the 200,000 values (a COO vector) and 1,000
  queries: ``np.sort`` of the stored values, ``np.searchsorted``, and the unspecified elements counted
  where 0 sorts before the query.

torch backend: ``torch.unique`` (``return_counts``, ``return_inverse``) of the values of the torch
sparse tensor and one 0, and for ``sort`` a ``torch.sort`` of the values followed by a stable
``torch.sort`` of their row indices (torch has no per-row sort of a sparse tensor; the fill value is not
placed, so the reference does less than xsparse).

Times are the best of a few repeats in this process, ours and the reference's alternating, as
wall-clock time and as CPU time of the process (all threads). Each result is checked against the
reference once. Report the load (``uptime``) with the figures: the machine may be shared.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_elementwise import _as_xsparse, _random_csr, _time_pair, cli  # noqa: E402

import xsparse as xs  # noqa: E402  (bench_elementwise made it importable from a checkout)


def _with_fill(values: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """The stored values and one 0 when an element is unspecified; the number of unspecified elements."""
    unspecified = size - values.shape[0]
    return (np.append(values, 0.0) if unspecified else values), unspecified


def _np_unique_counts(m: sp.csr_array) -> tuple[np.ndarray, np.ndarray]:
    v, unspecified = _with_fill(m.data, m.shape[0] * m.shape[1])
    values, counts = np.unique(v, return_counts=True)
    if unspecified:
        counts[np.searchsorted(values, 0.0)] += unspecified - 1
    return values, counts


def _row_sort(rows: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    """What a SciPy user writes for xs.sort(A, axis=1): a per-row sort of the values, and their columns."""
    order = np.lexsort((values, rows))
    v, r = values[order], rows[order]
    counts = np.bincount(r, minlength=shape[0])
    starts = np.cumsum(counts) - counts
    rank = np.arange(v.shape[0]) - starts[r]
    cols = np.where(v < 0, rank, shape[1] - counts[r] + rank)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sp.csr_array((v, cols, indptr), shape=shape)


def _same(x: Any, m: sp.csr_array) -> None:
    got = np.asarray(xs.to_dense(x))
    np.testing.assert_array_equal(got, m.toarray())


def numpy_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    n = 1000 if quick else 2000
    m = _random_csr(np.random.default_rng(0), n, n * n // 20)
    a = _as_xsparse(m)
    c = xs.to_sparse_coo(a)
    rows_of = np.repeat(np.arange(n), np.diff(m.indptr))
    vector = xs.sparse_coo_array(np.arange(0, 10 * m.nnz, 10)[None, :], m.data, (10 * m.nnz,))
    queries = np.random.default_rng(1).standard_normal(1000)
    size = n * n

    def ref_searchsorted() -> np.ndarray:
        s = np.sort(m.data)
        return np.asarray(np.searchsorted(s, queries) + (0.0 < queries) * (10 * m.nnz - m.nnz))

    cases = [
        ("unique_values", lambda: xs.unique_values(a), lambda: np.unique(_with_fill(m.data, size)[0]), "np.unique"),
        ("unique_counts", lambda: xs.unique_counts(a), lambda: _np_unique_counts(m), "np.unique counts"),
        ("unique_inverse", lambda: xs.unique_inverse(a), lambda: np.unique(_with_fill(m.data, size)[0], return_inverse=True), "np.unique inverse"),
        ("unique_all", lambda: xs.unique_all(a), lambda: np.unique(_with_fill(m.data, size)[0], return_index=True, return_inverse=True, return_counts=True), "np.unique all"),
        ("sort CSR axis=1", lambda: xs.sort(a, axis=1), lambda: _row_sort(rows_of, m.data, m.shape), "np.lexsort rows"),
        ("sort COO axis=1", lambda: xs.sort(c, axis=1), lambda: _row_sort(rows_of, m.data, m.shape), "np.lexsort rows"),
        ("searchsorted COO x1", lambda: xs.searchsorted(vector, queries), ref_searchsorted, "np.sort+searchsorted"),
    ]
    np.testing.assert_array_equal(np.asarray(xs.unique_values(a)), np.unique(_with_fill(m.data, size)[0]))
    np.testing.assert_array_equal(np.asarray(xs.unique_counts(a).counts), _np_unique_counts(m)[1])
    _same(xs.sort(a, axis=1), _row_sort(rows_of, m.data, m.shape))
    _same(xs.sort(c, axis=1), _row_sort(rows_of, m.data, m.shape))
    np.testing.assert_array_equal(np.asarray(xs.searchsorted(vector, queries)), ref_searchsorted())
    return [
        {"backend": "numpy", "case": name, "reference": ref_name, **_time_pair(ours, ref, repeats)}
        for name, ours, ref, ref_name in cases
    ]


def torch_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    import torch

    from xsparse.backends.torch import to_torch

    n = 1000 if quick else 2000
    m = _random_csr(np.random.default_rng(0), n, n * n // 20)
    a = xs.to_backend(xs.to_sparse_csr(_as_xsparse(m), index_dtype="int64"), "torch")
    c = xs.to_sparse_coo(a)
    t = to_torch(c)
    vals, rows = t.values(), t.indices()[0]
    zero = torch.zeros(1, dtype=vals.dtype)
    torch.set_num_threads(os.cpu_count() or 1)

    def torch_row_sort() -> Any:
        v, i = torch.sort(vals)
        _, j = torch.sort(rows[i], stable=True)
        return v[j]

    cases = [
        ("unique_values", lambda: xs.unique_values(a), lambda: torch.unique(torch.cat([vals, zero]))),
        ("unique_counts", lambda: xs.unique_counts(a), lambda: torch.unique(torch.cat([vals, zero]), return_counts=True)),
        ("unique_inverse", lambda: xs.unique_inverse(a), lambda: torch.unique(torch.cat([vals, zero]), return_inverse=True)),
        ("sort CSR axis=1", lambda: xs.sort(a, axis=1), torch_row_sort),
        ("sort COO axis=1", lambda: xs.sort(c, axis=1), torch_row_sort),
    ]
    assert torch.equal(xs.unique_values(a), torch.unique(torch.cat([vals, zero])))
    return [
        {"backend": "torch", "case": name, "reference": "torch.unique/sort", **_time_pair(ours, ref, repeats)}
        for name, ours, ref in cases
    ]


def _print_table(rows: list[dict[str, Any]], quick: bool) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"xsparse {xs.__version__}, numpy {np.__version__}, scipy {scipy.__version__}, python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f}{', quick sizes' if quick else ''}"
    )
    print("best of the repeats; ratio = xsparse / reference (wall clock, and CPU time of all threads)")
    head = f"{'backend':<7} {'case':<20} {'reference':<21} {'xsparse ms':>10} {'ref ms':>8} {'ratio':>6} {'cpu ratio':>9}"
    print(head)
    print("-" * len(head))
    for r in rows:
        cpu_ratio = r["ours_cpu"] / r["ref_cpu"] if r["ref_cpu"] > 0 else float("nan")
        print(
            f"{r['backend']:<7} {r['case']:<20} {r['reference']:<21} {1e3 * r['ours']:>10.2f} {1e3 * r['ref']:>8.2f} "
            f"{r['ours'] / r['ref']:>6.2f} {cpu_ratio:>9.2f}"
        )


def main() -> None:
    cli(__doc__ or "", numpy_cases, torch_cases, _print_table)


if __name__ == "__main__":
    main()
