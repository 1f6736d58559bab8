"""Bad input that once gave a wrong answer, a library's own error or a huge allocation: each case now gives
the right result or a clear xsparse error (compressed offsets that do not run from 0 to nse, integers out of
a dtype's range, offsets past int64, byte-swapped arrays, malformed SciPy matrices, pydata/sparse's DOK,
tall nearly empty operands)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import backend_params

import xsparse as xs
from xsparse.backends.numpy.linalg import _supports_kron
from xsparse.testing import to_numpy

HAS_TORCH = importlib.util.find_spec("torch") is not None
ONES = np.ones(2)

# Each reads every entry through the compiled kernels of the NumPy backend (or its pointer searches)
WHOLE_ARRAY_OPS: dict[str, Callable[[Any], Any]] = {
    "matmul": lambda a: a @ ONES,
    "to_dense": xs.to_dense,
    "sum": lambda a: xs.sum(a, axis=1),
    "add": lambda a: a + a,
    "spgemm": lambda a: a @ a,
    "to_coo": xs.to_sparse_coo,
    "to_csc": xs.to_sparse_csc,
    "rows": lambda a: a[np.asarray([1])],
    "points": lambda a: a[np.asarray([1]), np.asarray([1])],
    "element": lambda a: a[1, 1],
    "diagonal": xs.linalg.diagonal,
    "tril": xs.tril,
}


@pytest.mark.parametrize("op", list(WHOLE_ARRAY_OPS))
@pytest.mark.parametrize(
    ("crow", "invariant"), [([1, 1, 2], r"5\.1"), ([-1, 1, 2], r"5\.1"), ([0, 1, 1], r"5\.2")], ids=["starts-at-1", "starts-below-0", "ends-early"]
)
def test_offsets_that_leave_entries_out_are_refused(op: str, crow: list[int], invariant: str) -> None:
    # entries before the first offset or after the last were skipped without a word (the first entry of
    # [[1, 0], [0, 2]] went missing), and an array a product had read was then trusted by the others
    a = xs.sparse_csr_array(crow, [0, 1], [1.0, 2.0], (2, 2))
    with pytest.raises(xs.InvariantError, match=rf"^invariant {invariant} violated: [^:]+: crow_indices\[\.\.\., (0|-1)\] must"):
        WHOLE_ARRAY_OPS[op](a)


def test_a_product_does_not_vouch_for_offsets_it_did_not_check() -> None:
    a = xs.sparse_csr_array([0, 1, 1], [0, 1], [1.0, 2.0], (2, 2))
    with pytest.raises(xs.InvariantError, match=r"^invariant 5\.2 violated: matmul:"):
        a @ ONES
    with pytest.raises(xs.InvariantError, match=r"^invariant 5\.2 violated: to_dense:"):
        xs.to_dense(a)


def test_a_product_does_not_vouch_for_the_order_of_indices() -> None:
    # a product checks that the indices it reads are in range, not that they are sorted and distinct: it
    # marked the array checked, after which spsolve handed the unsorted, duplicated column indices to
    # SuperLU, which sorted and summed them in the caller's own arrays (the array then held 11 for 7)
    crow, col, val = np.array([0, 2, 4]), np.array([1, 0, 1, 1]), np.array([1.0, 2.0, 3.0, 4.0])
    a = xs.sparse_csr_array(crow, col, val, (2, 2))
    assert (a @ ONES).tolist() == [3.0, 7.0]
    with pytest.raises(xs.InvariantError, match=r"^invariant 5\.6 violated: spsolve: col_indices must be sorted"):
        xs.spsolve(a, ONES)
    with pytest.raises(xs.InvariantError, match=r"^invariant 5\.6 violated: add: col_indices must be sorted"):
        a + a
    assert (crow.tolist(), col.tolist(), val.tolist()) == ([0, 2, 4], [1, 0, 1, 1], [1.0, 2.0, 3.0, 4.0])
    assert xs.to_dense(a).tolist() == [[2.0, 1.0], [0.0, 7.0]]


def test_superlu_never_writes_into_an_arrays_components() -> None:
    # SuperLU sums duplicates in place; the factorization gets copies of components it would change, even
    # for an array that claims to have been checked
    from xsparse.backends import _superlu

    crow, col, val = np.array([0, 2, 4]), np.array([1, 0, 1, 1]), np.array([1.0, 2.0, 3.0, 4.0])
    a = xs.sparse_csr_array(crow, col, val, (2, 2))
    a._bounds_checked = True
    x = _superlu.factorize("spsolve", a, np.float64).solve(ONES)
    np.testing.assert_allclose(x, np.linalg.solve([[2.0, 1.0], [0.0, 7.0]], ONES))
    assert (crow.tolist(), col.tolist(), val.tolist()) == ([0, 2, 4], [1, 0, 1, 1], [1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
@pytest.mark.parametrize(("dtype", "value"), [("uint8", -1), ("uint8", 256), ("int8", 1000), ("uint64", -1), ("int64", 2**63)])
def test_integers_a_dtype_cannot_hold_are_refused(backend: str, dtype: str, value: int) -> None:
    # torch wrapped them (-1 as uint8 was 255); NumPy raised its own OverflowError
    info = np.iinfo(dtype)
    message = rf"the values hold {value}, which {dtype} cannot represent \(range \[{info.min}, {info.max}\]\)\. Pass values in that range, or a wider dtype\.$"
    with pytest.raises(ValueError, match=r"^sparse_coo_array: " + message):
        xs.sparse_coo_array([[0]], [value], (2,), dtype=dtype, backend=backend)
    with pytest.raises(ValueError, match=r"^asarray: " + message):
        xs.asarray([[value, 0]], dtype=dtype, layout=xs.sparse_coo, backend=backend)
    with pytest.raises(ValueError, match=r"^asarray: " + message):
        xs.asarray([value], dtype=dtype, backend=backend)
    # the range's ends are values like any other
    kept = xs.sparse_coo_array([[0, 1]], [int(info.min), int(info.max)], (2,), dtype=dtype, backend=backend, is_coalesced=True)
    assert to_numpy(kept.values()).tolist() == [int(info.min), int(info.max)]


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch", "array_api_strict"]))
def test_constructors_refuse_complex_values_for_a_real_dtype(backend: str) -> None:
    # a complex array given with a real dtype= lost its imaginary parts (NumPy only warned), where
    # xsparse.astype refuses the cast
    xp = xs.get_backend(backend).load()
    values = xp.asarray([1 + 1j, 2 + 0j])
    message = r"casting complex values to a real dtype drops their imaginary parts \(values dtype=complex\d+, dtype=float64\)\. Pass xsparse\.real\(values\)"
    with pytest.raises(TypeError, match=r"^sparse_coo_array: " + message):
        xs.sparse_coo_array([[0, 1]], values, (2,), dtype="float64")
    with pytest.raises(TypeError, match=r"^sparse_compressed_array\(layout=sparse_csr\): " + message):
        xs.sparse_csr_array([0, 2], [0, 1], values, (1, 2), dtype="float64")
    # to a complex dtype, or from real values, the cast is made as before
    wide = xs.sparse_coo_array([[0, 1]], values, (2,), dtype="complex128")
    assert to_numpy(xs.to_dense(wide)).tolist() == [1 + 1j, 2 + 0j]
    real = xs.sparse_coo_array([[0, 1]], xp.asarray([1.5, -2.0]), (2,), dtype="float32")
    assert to_numpy(xs.to_dense(real)).tolist() == [1.5, -2.0] and real.dtype == xp.float32


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
@pytest.mark.parametrize(
    ("value", "dtype", "error"),
    [(float("nan"), "int64", ValueError), (float("inf"), "int32", ValueError), (1e20, "int64", ValueError), (1 + 1j, "float64", TypeError)],
)
def test_listed_values_a_dtype_cannot_take_name_the_constructor(backend: str, value: Any, dtype: str, error: type) -> None:
    # the backend's own message ("cannot convert float NaN to integer") named neither the function nor the
    # dtype, and its type was the backend's (NumPy's OverflowError, torch's RuntimeError)
    with pytest.raises(error, match=rf"^sparse_coo_array: the values cannot be made {dtype} \(.+\)\. Pass values that {dtype} holds, or another dtype\.$"):
        xs.sparse_coo_array([[0]], [value], (2,), dtype=dtype, backend=backend)


@pytest.mark.parametrize(
    "offsets",
    [[2**64 - 1], np.asarray([2**64 - 1], dtype=np.uint64), [2**63], [-(2**63)], np.asarray([-(2**63)]), np.asarray([2**63 - 1])],
    ids=["list-2**64-1", "uint64", "list-2**63", "list--2**63", "int64-min", "int64-max"],
)
def test_spdiags_offsets_past_the_matrix_are_empty(offsets: Any) -> None:
    # 2**64 - 1 became -1 and filled the subdiagonal; int64's ends overflowed the row arithmetic
    a = xs.spdiags(np.asarray([[1.0, 2.0, 3.0]]), offsets, (3, 3))
    assert a.nnz == 0 and xs.to_dense(a).tolist() == [[0.0] * 3] * 3


def test_spdiags_mixed_offsets_and_their_distinctness() -> None:
    a = xs.spdiags(np.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), [-1, 2**63], (3, 3))
    np.testing.assert_array_equal(xs.to_dense(a), [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    # two offsets past the matrix are distinct offsets, though both diagonals are empty
    assert xs.spdiags(np.ones((2, 3)), [5, 6], (3, 3)).nnz == 0
    for offsets in ([1, 1], np.asarray([1, 1])):
        with pytest.raises(ValueError, match=r"^spdiags: offsets must be distinct \(offsets=\[1, 1\]\)\. Sum the diagonals"):
            xs.spdiags(np.ones((2, 2)), offsets, (2, 2))


def test_eye_of_a_wide_matrix_builds_only_its_diagonal() -> None:
    # it made a row of ones as long as the matrix is wide (8 TiB for 2**40 columns)
    a = xs.eye(3, 2**40, layout=xs.sparse_coo)
    assert a.shape == (3, 2**40) and a.indices().tolist() == [[0, 1, 2], [0, 1, 2]]
    b = xs.eye(2**40, 3, k=-(2**40 - 2), layout=xs.sparse_csc)
    assert b.nnz == 2 and xs.to_sparse_coo(b).indices().tolist() == [[2**40 - 2, 2**40 - 1], [0, 1]]


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr])
@pytest.mark.parametrize(("rows", "cols", "k"), [(4, 6, 2), (6, 4, -3), (3, 3, 5), (3, 3, -5), (0, 3, 0), (5, 5, 0), (5, 5, -4)])
def test_eye_against_numpy(layout: xs.Layout, rows: int, cols: int, k: int) -> None:
    a = xs.eye(rows, cols, k=k, layout=layout, blocksize=(1, 1) if layout.is_blocked else None)
    assert a.layout is layout
    np.testing.assert_array_equal(xs.to_dense(a), np.eye(rows, cols, k=k))


def test_random_refuses_a_blocksize_it_would_ignore() -> None:
    with pytest.raises(ValueError, match=r"^random: blocksize applies to sparse_bsr and sparse_bsc only, not to sparse_coo \(blocksize=\(3, 3\)\)\."):
        xs.random((6, 6), 0.5, seed=0, blocksize=(3, 3))
    with pytest.raises(ValueError, match=r"^random: blocksize applies to sparse_bsr and sparse_bsc only, not to strided \(blocksize=\(2, 2\)\)\."):
        xs.random((6, 6), 0.5, seed=0, layout=xs.strided, blocksize=(2, 2))


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_bsc])
@pytest.mark.parametrize("byteorder", [">", "<"])
def test_byte_swapped_dense_input(layout: xs.Layout, byteorder: str) -> None:
    # the values kept the other byte order, which NumPy's reductions refused with a ufunc error
    dense = np.asarray([[1.0, 0.0], [0.0, 2.0]], dtype=byteorder + "f8")
    blocksize = (1, 1) if layout.is_blocked else None
    for a in (xs.to_sparse(dense, layout=layout, blocksize=blocksize), xs.asarray(dense, layout=layout, blocksize=blocksize)):
        assert a.values().dtype.isnative
        assert float(xs.sum(a)) == 3.0 and float(xs.max(a)) == 2.0 and float(xs.mean(a)) == 0.75


def test_malformed_scipy_matrices_get_the_validators_error() -> None:
    m = sp.csr_matrix(([1.0, 2.0], [0, 1], [0, 2, 1, 2]), shape=(3, 2))  # SciPy accepts it, then trips over it
    with pytest.raises(xs.InvariantError, match=r"^invariant 5\.2 violated: asarray: crow_indices\[\.\.\., -1\] must equal nse=2, got 3\."):
        xs.asarray(m)
    for attr, dtype, name in (("indices", np.uint64, "col_indices"), ("indptr", np.float64, "crow_indices")):
        m = sp.csr_array(np.asarray([[1.0, 0.0], [0.0, 2.0]]))
        setattr(m, attr, getattr(m, attr).astype(dtype))  # converted exactly by no widening: refused
        with pytest.raises(xs.InvariantError, match=rf"^invariant 1\.3 violated: .*{name} must have dtype int32 or int64, got {np.dtype(dtype).name}\."):
            xs.asarray(m)
    m = sp.csr_array(np.asarray([[1.0, 0.0], [0.0, 2.0]]))
    m.indices = m.indices.astype(np.uint16)  # narrower integers widen exactly
    a = xs.asarray(m)
    assert a.col_indices().dtype == np.int64 and xs.to_dense(a).tolist() == [[1.0, 0.0], [0.0, 2.0]]


def test_pydata_dok_converts() -> None:
    sparse = pytest.importorskip("sparse")
    k = sparse.DOK.from_numpy(np.asarray([[0.0, 1.0], [2.0, 0.0]]))
    a = xs.asarray(k)  # DOK has no tocoo
    assert a.layout is xs.sparse_coo and xs.to_dense(a).tolist() == [[0.0, 1.0], [2.0, 0.0]]


def test_tall_nearly_empty_operands_of_kron_stay_on_their_entries() -> None:
    # the compiled kernel's CSR form of a column with 2**31 - 1 rows allocated 16 GiB for one entry
    column = xs.sparse_coo_array([[2**31 - 2], [0]], [3.0], (2**31 - 1, 1))
    row = xs.sparse_coo_array([[0], [5]], [2.0], (1, 7))
    assert _supports_kron(None, column, row, (2**31 - 1, 7)) is not None
    assert _supports_kron(None, row, row, (1, 49)) is None
    k = xs.kron(column, row)
    assert k.shape == (2**31 - 1, 7) and k.indices().tolist() == [[2**31 - 2], [5]] and k.values().tolist() == [6.0]
    v = xs.sparse_coo_array([[2**31 - 2]], [1.5], (2**31 - 1,))
    o = xs.linalg.outer(v, v)
    assert o.indices().tolist() == [[2**31 - 2], [2**31 - 2]] and o.values().tolist() == [2.25]


def test_torch_tensors_on_the_meta_device_are_refused_by_the_constructors() -> None:
    # a meta tensor holds a shape and no values: the array was made, and every operation on it failed inside
    # torch ("Tensor.item() cannot be called on meta tensors")
    torch = pytest.importorskip("torch")
    meta = torch.empty(2, device="meta")
    msg = r"is a torch tensor on the 'meta' device, which holds no values \(shape=\((2,|1, 2)\)\)\. Create it on a device that holds data"
    with pytest.raises(ValueError, match=rf"^sparse_coo_array: values {msg}"):
        xs.sparse_coo_array([[0, 1]], meta, (3,))
    with pytest.raises(ValueError, match=rf"^sparse_coo_array: indices {msg}"):
        xs.sparse_coo_array(torch.zeros((1, 2), dtype=torch.int64, device="meta"), torch.ones(2), (3,))
    with pytest.raises(ValueError, match=rf"^sparse_compressed_array\(layout=sparse_csr\): values {msg}"):
        xs.sparse_csr_array([0, 1, 2], [0, 1], meta, (2, 2))
    with pytest.raises(ValueError, match=rf"^sparse_coo_array: indices {msg}"):
        xs.sparse_coo_array([[0, 1]], [1.0, 2.0], (3,), device="meta", backend="torch")
    # refused before a move that device= asks for (torch's own error there: "Cannot copy out of meta tensor")
    with pytest.raises(ValueError, match=rf"^sparse_coo_array: values {msg}"):
        xs.sparse_coo_array([[0, 1]], meta, (3,), device="cpu")
    with pytest.raises(ValueError, match=rf"^sparse_coo_array: indices {msg}"):
        xs.sparse_coo_array(torch.zeros((1, 2), dtype=torch.int64, device="meta"), torch.ones(2), (3,), device="cpu")
    a = xs.sparse_coo_array([[0, 1]], torch.ones(2), (3,))  # the same on the CPU is fine
    assert xs.to_dense(a).tolist() == [1.0, 1.0, 0.0]
