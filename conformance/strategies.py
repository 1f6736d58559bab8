"""Hypothesis strategies for sparse arrays, shared by the conformance suite and xsparse's own tests:
dense arrays of controlled sparsity, and the parameters that convert them to every layout, on any
backend namespace.

The structure of an example (shape, blocksize, density, dtype, index dtype, fill value) is drawn by
Hypothesis, so it shrinks towards the simplest failing structure; the contents are drawn by a NumPy
generator seeded from Hypothesis, so they replay exactly.

Every batched example holds the same number of specified elements in each batch at both levels that
torch counts (invariant 3.9): specified blocks of ``blocksize`` for BSR/BSC, and specified (row, column)
positions for CSR/CSC. Each batch picks its own block cells, but they are as many as every other batch's
and hold the same multiset of per-block element counts, so one example converts to every layout.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

import xsparse as xs
from xsparse.backends.array_api.conversion import from_host
from xsparse.testing import to_numpy

__all__ = [
    "DeviceNamespace",
    "device_named",
    "DTYPE_NAMES",
    "is_fill",
    "INDEX_DTYPE_NAMES",
    "DenseCase",
    "CooCase",
    "dtype_names",
    "dtypes",
    "index_dtypes",
    "fill_values",
    "dense_cases",
    "coo_dense_cases",
    "unequal_nse_cases",
    "uncoalesced_coo",
    "uncoalesced_like",
    "nonzero_values",
    "sizes",
]

DTYPE_NAMES = (
    "bool",
    "int8", "int16", "int32", "int64",
    "uint8",
    "float32", "float64",
    "complex64", "complex128",
)  # fmt: skip
INDEX_DTYPE_NAMES = ("int32", "int64")

# Keeps an example's element count small enough for the generic kernels on array_api_strict.
_MAX_NUMEL = 600


class DeviceNamespace:
    """The namespace ``xp`` with its array-creating functions defaulting to ``device``.

    The conformance suite and the tests draw every input through their namespace's ``asarray`` (and a
    few other creation functions), so handing them this wrapper puts every input on ``device``: a CUDA
    device of torch, or one of array-api-strict's extra devices, which refuse to mix with the default
    one. Any array a kernel creates without passing the device on then surfaces as an error instead of a
    silent copy. The ``*_like`` functions follow their argument and need no default.
    """

    CREATION = frozenset({"asarray", "arange", "empty", "eye", "full", "linspace", "ones", "zeros"})

    def __init__(self, xp: Any, device: Any) -> None:
        self._xp = xp
        self.device = device

    def __repr__(self) -> str:
        return f"DeviceNamespace({getattr(self._xp, '__name__', self._xp)}, device={self.device!r})"

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._xp, name)
        if name in self.CREATION:
            return functools.partial(_on_device, attr, self.device)
        return attr


def _on_device(func: Any, default: Any, /, *args: Any, **kwargs: Any) -> Any:
    if kwargs.get("device") is None:
        kwargs["device"] = default
    return func(*args, **kwargs)


def device_named(backend: Any, name: str) -> Any:
    """The device of ``backend`` (an :class:`xsparse.backends.Backend`) that ``name`` names.

    ``name`` is how the device prints (``"cuda:0"``), its type alone for the first of that type
    (``"cuda"``), or the name inside the device's repr (array-api-strict's ``"device1"``).
    """
    devices = backend.devices()
    for d in devices:
        text, rep = str(d), repr(d)
        if name in (text, rep) or text.startswith(name + ":") or rep.endswith(f"({name!r})"):
            return d
    raise ValueError(
        f"device_named: backend {backend.name!r} has no device {name!r} (devices={[str(d) for d in devices]}). "
        "Pick one of those."
    )


def dtype_names(xp: Any) -> list[str]:
    """The names of :data:`DTYPE_NAMES` that the namespace ``xp`` has."""
    return [name for name in DTYPE_NAMES if hasattr(xp, name)]


def dtypes(xp: Any) -> st.SearchStrategy[str]:
    """The name of a value dtype that the namespace has (bool, int8..int64, uint8, float, complex)."""
    return st.sampled_from(dtype_names(xp))


def index_dtypes() -> st.SearchStrategy[str]:
    """``"int32"`` or ``"int64"``."""
    return st.sampled_from(INDEX_DTYPE_NAMES)


def fill_values(dtype: str) -> st.SearchStrategy[Any]:
    """A non-zero fill value representable in ``dtype`` (NaN included for floating dtypes)."""
    if dtype == "bool":
        return st.just(True)
    if dtype == "uint8":
        return st.sampled_from([1, 3])
    if dtype.startswith("int"):
        return st.sampled_from([1, -2, 3])
    if dtype.startswith("float"):
        return st.sampled_from([1.5, -1.0, float("nan")])
    return st.sampled_from([1 + 1j, -2.0 + 0j])


def is_fill(x: np.ndarray, fill: Any) -> np.ndarray:
    """Where ``x`` is the fill value: equal to it with the same sign bits (so -0.0 is not the fill
    value +0.0, docs/decisions.md "Fill values"), or NaN where the fill value is NaN."""
    if isinstance(fill, float) and math.isnan(fill):
        return np.asarray(np.isnan(x))
    same = np.asarray(x == fill)
    if x.dtype.kind in "fc":
        f = np.asarray(fill, dtype=x.dtype)
        same = same & (np.signbit(x.real) == np.signbit(f.real)) & (np.signbit(x.imag) == np.signbit(f.imag))
    return same


def nonzero_values(rng: np.random.Generator, dtype: str, n: int, fill: Any, *, specials: bool = True) -> np.ndarray:
    """``n`` values of ``dtype`` that all differ from ``fill``: small integers (sums stay exact), some
    halves, and for floating dtypes the odd NaN (a specified NaN differs from every other fill value)."""
    np_dtype = np.dtype(dtype)
    if dtype == "bool":
        return np.full(n, not bool(fill), dtype=np_dtype)
    if dtype == "uint8":
        out = rng.integers(0, 9, n).astype(np_dtype)
    elif dtype.startswith("int"):
        out = rng.integers(-4, 5, n).astype(np_dtype)
    elif dtype.startswith("float"):
        out = (rng.integers(-8, 9, n) / 2).astype(np_dtype)
        if specials and not (isinstance(fill, float) and math.isnan(fill)):
            out[rng.random(n) < 0.05] = np.nan
        if specials and fill == 0:
            # -0.0 is not the fill value +0.0: a specified element, which conversions must keep
            out[rng.random(n) < 0.05] = -0.0
    else:
        out = (rng.integers(-4, 5, n) + 1j * rng.integers(-4, 5, n)).astype(np_dtype)
        if specials and fill == 0:
            out[rng.random(n) < 0.05] = complex(-0.0, 0.0)
    clash = is_fill(out, fill)
    if np.any(clash):
        # fill + 1 differs from fill in every dtype here (uint8 fill values are small; NaN + 1 is NaN,
        # but a NaN fill never clashes with the finite values drawn above)
        out[clash] = np.asarray(fill, dtype=np_dtype) + np.asarray(1, dtype=np_dtype)
    return out


def _unspecified(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], fill: Any) -> np.ndarray:
    # the fill value itself, sign included: -0.0 is specified with fill value +0.0 (nonzero_values)
    return np.full(shape, fill, dtype=np.dtype(dtype))


@dataclass(frozen=True)
class DenseCase:
    """A dense array on a backend plus the parameters that convert it to each layout.

    The array has shape ``(*batch_shape, M, N, *dense_shape)``; ``M`` and ``N`` are multiples of
    ``blocksize``, and ``alt_blocksize`` is another blocksize that divides them and keeps every batch's
    number of specified blocks equal (it is ``blocksize`` itself when there are several batches).
    """

    array: Any
    host: np.ndarray = field(repr=False)
    batch_shape: tuple[int, ...]
    sparse_shape: tuple[int, int]
    dense_shape: tuple[int, ...]
    blocksize: tuple[int, int]
    alt_blocksize: tuple[int, int]
    dtype: str
    index_dtype: str
    fill_value: Any
    nse: int  # specified (row, column) positions per batch (the nnz of CSR/CSC)
    nse_blocks: int  # specified blocks of ``blocksize`` per batch (the nnz of BSR/BSC)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.batch_shape + self.sparse_shape + self.dense_shape

    @property
    def batch_dim(self) -> int:
        return len(self.batch_shape)

    @property
    def dense_dim(self) -> int:
        return len(self.dense_shape)

    @property
    def has_fill(self) -> bool:
        return not (self.fill_value == 0 and not (isinstance(self.fill_value, float) and math.isnan(self.fill_value)))

    def kwargs(self, layout: xs.Layout, *, blocksize: tuple[int, int] | None = None, fill: bool = True) -> dict[str, Any]:
        """The keyword arguments of ``xs.to_sparse`` that convert :attr:`array` to ``layout``."""
        kw: dict[str, Any] = {"layout": layout, "index_dtype": self.index_dtype}
        if fill and self.has_fill:
            kw["fill_value"] = self.fill_value
        if layout is xs.sparse_coo:
            kw["sparse_dim"] = self.batch_dim + 2
        else:
            kw["dense_dim"] = self.dense_dim
        if layout.is_blocked:
            kw["blocksize"] = blocksize or self.blocksize
        return kw

    def sparse(self, layout: xs.Layout, **kwargs: Any) -> Any:
        """:attr:`array` converted to ``layout`` (the array itself for ``strided``)."""
        if layout is xs.strided:
            return self.array
        return xs.to_sparse(self.array, **{**self.kwargs(layout), **kwargs})


def sizes(top: int, zero_one_in: int = 8) -> st.SearchStrategy[int]:
    """A size in ``0..top``, 0 once in ``zero_one_in`` draws by the odds, that shrinks to 1.

    Zero-size dimensions are covered without making most examples empty: Hypothesis draws the simplest
    value of a draw far more often than its share (the first value of ``sampled_from``, the lower bound
    of ``integers``, a third of the time after a large draw), so the simplest size is 1 and 0 is the
    last value.
    """
    return st.sampled_from(range(zero_one_in * top)).map(lambda i: 0 if i >= (zero_one_in - 1) * top else 1 + i % top)


# A dense case draws about five sizes (batch, grid and dense dimensions), each 0 once in this many
# draws (by the odds; Hypothesis's bias towards the simplest value, a size of 1, makes it rarer).
_ZERO_SIZE_ONE_IN = 48
# The share of a batch's blocks that are specified: one block (the simplest), some, all of them, or
# none (nnz = 0, once in thirteen draws by the odds), the last value for the reason sizes() gives.
_SHARES = (*(0.01, 0.3, 0.5, 1.0) * 3, 0.0)


def _draw_shape_parts(
    draw: Any, max_batch_dims: int, max_dense_dims: int, max_grid: int
) -> tuple[tuple[int, ...], tuple[int, int], tuple[int, int], tuple[int, ...]]:
    grid = (draw(sizes(max_grid, _ZERO_SIZE_ONE_IN)), draw(sizes(max_grid, _ZERO_SIZE_ONE_IN)))
    blocksize = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    batch_shape = tuple(draw(st.lists(sizes(5, _ZERO_SIZE_ONE_IN), max_size=max_batch_dims)))
    dense_shape = tuple(draw(st.lists(sizes(5, _ZERO_SIZE_ONE_IN), max_size=max_dense_dims)))
    numel = math.prod(batch_shape) * grid[0] * grid[1] * math.prod(blocksize) * math.prod(dense_shape)
    if numel > _MAX_NUMEL:
        # keep every zero-size and structural choice, but shrink the leading and trailing sizes
        batch_shape = tuple(min(s, 2) for s in batch_shape)
        dense_shape = tuple(min(s, 2) for s in dense_shape)
    return batch_shape, blocksize, grid, dense_shape


def _divisor(draw: Any, n: int) -> int:
    if n == 0:
        return int(draw(st.integers(1, 3)))
    return int(draw(st.sampled_from([d for d in range(1, min(n, 4) + 1) if n % d == 0])))


@st.composite
def dense_cases(
    draw: Any,
    xp: Any,
    *,
    dtype: str | None = None,
    fill: bool | None = False,
    max_batch_dims: int = 2,
    max_dense_dims: int = 2,
    max_grid: int = 3,
    index_dtype: str | None = None,
) -> DenseCase:
    """A :class:`DenseCase` on the namespace ``xp`` whose batches hold equal numbers of specified elements.

    Parameters
    ----------
    xp
        The backend namespace the array is created on.
    dtype
        The value dtype's name; drawn from those ``xp`` has when None.
    fill
        False: fill value 0; True: a non-zero fill value (see :func:`fill_values`); None: either.
    max_batch_dims, max_dense_dims
        At most this many batch (leading) and dense (trailing) dimensions, each of size 0..5.
    max_grid
        At most this many blocks along each sparse dimension (0 included).
    index_dtype
        ``"int32"`` or ``"int64"``; drawn when None.
    """
    dt = dtype if dtype is not None else draw(dtypes(xp))
    idt = index_dtype if index_dtype is not None else draw(index_dtypes())
    use_fill = draw(st.booleans()) if fill is None else fill
    fill_value = draw(fill_values(dt)) if use_fill else np.zeros((), dtype=np.dtype(dt)).item()
    # the number of specified blocks per batch, from none to all, then how full each block is
    share = draw(st.sampled_from(_SHARES))
    per_block = draw(st.sampled_from(["one", "some", "full"]))
    batch_shape, (bm, bn), (gm, gn), dense_shape = _draw_shape_parts(draw, max_batch_dims, max_dense_dims, max_grid)
    n_cells = gm * gn
    n_blocks = min(n_cells, math.ceil(share * n_cells))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cap = bm * bn
    if per_block == "one":
        counts = np.ones(n_blocks, dtype=np.int64)
    elif per_block == "full":
        counts = np.full(n_blocks, cap, dtype=np.int64)
    else:
        counts = rng.integers(1, cap + 1, n_blocks)

    nb = math.prod(batch_shape)
    m, n = gm * bm, gn * bn
    blocks = np.zeros((nb, gm, gn, bm, bn), dtype=bool)
    for b in range(nb):
        cells = rng.permutation(n_cells)[:n_blocks]
        for cell, count in zip(cells, rng.permutation(counts)):
            inside = np.zeros(cap, dtype=bool)
            inside[rng.permutation(cap)[:count]] = True
            blocks[b, cell // gn, cell % gn] = inside.reshape(bm, bn)
    mask = blocks.transpose(0, 1, 3, 2, 4).reshape(nb, m, n)

    host = _unspecified(rng, dt, (nb, m, n, *dense_shape), fill_value)
    n_specified = int(mask.sum())
    dense_size = math.prod(dense_shape)
    if n_specified and dense_size:
        sub = _unspecified(rng, dt, (n_specified, dense_size), fill_value)
        # each specified position holds a dense sub-array with at least one element unlike the fill
        keep = rng.random((n_specified, dense_size)) < 0.6
        keep[np.arange(n_specified), rng.integers(0, dense_size, n_specified)] = True
        sub[keep] = nonzero_values(rng, dt, int(keep.sum()), fill_value)
        host[mask] = sub.reshape(n_specified, *dense_shape)
    host = host.reshape(*batch_shape, m, n, *dense_shape)

    alt = (bm, bn)
    if nb <= 1 and draw(st.booleans()):
        alt = (_divisor(draw, m), _divisor(draw, n))
    holds_elements = dense_size > 0 and nb > 0
    nse = int(counts.sum()) if holds_elements else 0
    return DenseCase(
        array=from_host(xp, host),
        host=host,
        batch_shape=batch_shape,
        sparse_shape=(m, n),
        dense_shape=dense_shape,
        blocksize=(bm, bn),
        alt_blocksize=alt,
        dtype=dt,
        index_dtype=idt,
        fill_value=fill_value,
        nse=nse,
        nse_blocks=n_blocks if holds_elements else 0,
    )


@dataclass(frozen=True)
class CooCase:
    """A dense array of any rank with the ``sparse_dim`` to convert it to COO with."""

    array: Any
    host: np.ndarray = field(repr=False)
    sparse_dim: int
    dtype: str
    index_dtype: str
    fill_value: Any


@st.composite
def coo_dense_cases(draw: Any, xp: Any, *, fill: bool | None = False, max_ndim: int = 4) -> CooCase:
    """A dense array of rank 0..``max_ndim`` (sizes 0..5) and a ``sparse_dim`` in ``[0, ndim]``, for COO."""
    dt = draw(dtypes(xp))
    idt = draw(index_dtypes())
    use_fill = draw(st.booleans()) if fill is None else fill
    fill_value = draw(fill_values(dt)) if use_fill else np.zeros((), dtype=np.dtype(dt)).item()
    shape = tuple(draw(st.lists(sizes(5), max_size=max_ndim)))
    if math.prod(shape) > _MAX_NUMEL:
        shape = tuple(min(s, 3) for s in shape)
    sparse_dim = draw(st.integers(0, len(shape)))
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    host = _unspecified(rng, dt, shape, fill_value)
    mask = rng.random(shape) < density
    host[mask] = nonzero_values(rng, dt, int(mask.sum()), fill_value)
    return CooCase(from_host(xp, host), host, sparse_dim, dt, idt, fill_value)


@st.composite
def unequal_nse_cases(draw: Any, xp: Any) -> tuple[Any, int, tuple[int, int]]:
    """``(dense, dense_dim, blocksize)``: a batched dense array whose batches hold different numbers of
    specified blocks (and so of elements), which no compressed layout can hold (invariant 3.9)."""
    dt = draw(st.sampled_from([d for d in ("float64", "int32", "bool", "float32") if hasattr(xp, d)]))
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    if math.prod(batch) < 2:
        batch = (2, *batch[1:])
    bm, bn = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    gm, gn = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dense_shape = tuple(draw(st.lists(st.integers(1, 2), max_size=1)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    nb = math.prod(batch)
    grid = np.zeros((nb, gm, gn), dtype=bool)
    # batch 0 has no specified block, batch 1 has one; the rest are random
    grid[1, rng.integers(0, gm), rng.integers(0, gn)] = True
    grid[2:] = rng.random((nb - 2, gm, gn)) < 0.5
    mask = np.repeat(np.repeat(grid, bm, axis=1), bn, axis=2)
    host = np.zeros((nb, gm * bm, gn * bn, *dense_shape), dtype=np.dtype(dt))
    n_specified = int(mask.sum())
    host[mask] = nonzero_values(rng, dt, n_specified * math.prod(dense_shape), 0, specials=False).reshape(
        n_specified, *dense_shape
    )
    return xp.asarray(host.reshape(*batch, gm * bm, gn * bn, *dense_shape)), len(dense_shape), (bm, bn)


def _split_values(rng: np.random.Generator, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` with ``a + b == values`` exactly (``a | b`` for bool), elementwise."""
    if values.dtype == np.bool_:
        a = values & (rng.random(values.shape) < 0.5)
        return a, values.copy()
    if values.dtype.kind == "u":
        a = (rng.random(values.shape) * (values.astype(np.float64) + 1)).astype(values.dtype)
        return a, values - a
    a = rng.integers(-3, 4, values.shape).astype(values.dtype)
    with np.errstate(invalid="ignore"):
        return a, values - a


def uncoalesced_like(xp: Any, rng: np.random.Generator, coo: Any, index_dtype: str) -> Any:
    """An uncoalesced COO array equal to the coalesced COO ``coo``: some entries (one at least, where
    one can be) split into duplicates whose values sum to the original (exactly: the values are small
    integers), all in random order."""
    idx = to_numpy(coo._indices())
    vals = to_numpy(coo._values())
    nse = idx.shape[1]
    split: np.ndarray = np.asarray(rng.random(nse) < 0.6)
    finite: np.ndarray = np.isfinite(vals).reshape(nse, math.prod(vals.shape[1:])).all(axis=1) if vals.dtype.kind in "fc" else np.ones(nse, dtype=bool)
    split &= finite
    can_split = finite.copy()
    if vals.dtype.kind in "fc":
        # a -0.0 is no sum of two numbers that add to it exactly in every order (x + -x is +0.0): keep it whole
        parts = (vals.real, vals.imag) if vals.dtype.kind == "c" else (vals,)
        negative_zero = np.any([np.signbit(p) & (p == 0) for p in parts], axis=0).reshape(nse, math.prod(vals.shape[1:])).any(axis=1)
        split &= ~negative_zero
        can_split &= ~negative_zero
    if not split.any() and can_split.any():
        # at least one duplicate: an "uncoalesced" array that holds none tests nothing of coalescing
        split[rng.choice(np.flatnonzero(can_split))] = True
    a, b = _split_values(rng, vals[split])
    new_idx = np.concatenate([idx[:, ~split], idx[:, split], idx[:, split]], axis=1)
    new_vals = np.concatenate([vals[~split], a, b], axis=0)
    order = rng.permutation(new_idx.shape[1])
    new_idx, new_vals = new_idx[:, order], new_vals[order]
    return xs.sparse_coo_array(
        xp.asarray(new_idx.astype(index_dtype)), xp.asarray(new_vals), coo.shape, fill_value=coo.fill_value
    )


@st.composite
def uncoalesced_coo(
    draw: Any,
    xp: Any,
    *,
    min_sparse_dims: int = 1,
    max_sparse_dims: int = 3,
    max_dense_dims: int = 2,
    fill: bool | None = False,
) -> tuple[Any, np.ndarray]:
    """``(coo, expected)``: a COO array with duplicate indices in random order, and its dense value
    (duplicates summed, logical or for bool; unspecified elements the fill value) as a NumPy array.

    The entries are drawn with replacement from a pool of half as many positions, so every example of
    two entries or more has duplicates; ``nse`` is 2 to 12, or 1 or 0 (once in thirteen draws each, by
    the odds: the last values, see :func:`sizes`), and some values are explicit zeros, which stay
    specified.
    """
    dt = draw(dtypes(xp))
    idt = draw(index_dtypes())
    use_fill = draw(st.booleans()) if fill is None else fill
    fill_value = draw(fill_values(dt)) if use_fill else 0
    nse = draw(st.sampled_from((*range(2, 13), 1, 0)))
    sparse_shape = tuple(draw(st.lists(st.integers(1, 5), min_size=min_sparse_dims, max_size=max_sparse_dims)))
    dense_shape = tuple(draw(st.lists(sizes(3), max_size=max_dense_dims)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    pool = rng.integers(0, np.asarray(sparse_shape)[:, None], (len(sparse_shape), max(1, nse // 2)))
    indices = pool[:, rng.integers(0, pool.shape[1], nse)]
    values = nonzero_values(rng, dt, nse * math.prod(dense_shape), 0, specials=False).reshape(nse, *dense_shape)
    if dt != "bool":
        values[rng.random(values.shape) < 0.2] = 0  # explicit zeros stay specified
    expected = np.zeros(sparse_shape + dense_shape, dtype=np.dtype(dt))
    np.add.at(expected, tuple(indices), values)
    specified = np.zeros(sparse_shape, dtype=bool)
    specified[tuple(indices)] = True
    expected[~specified] = fill_value
    coo = xs.sparse_coo_array(
        xp.asarray(indices.astype(idt)), xp.asarray(values), sparse_shape + dense_shape, fill_value=fill_value
    )
    return coo, expected
