"""The invariants of every sparse format, and the switch that turns on the checks that read index data.

Invariants are numbered as in the BSR invariants of the specification (``seeds/bsr_invariants_blog.txt``),
generalised from BSR to every compressed layout in compressed/plain terms (for CSC and BSC the compressed
dimension is the columns), and to any number of batch and dense dimensions; COO's are numbered ``coo.N``.
``docs/invariants.md`` lists them all. Checks that need only shapes, dtypes and devices always run; those
that read index data (5.x, coo.5-coo.6) run when a constructor gets ``check_invariants=True`` or inside
:class:`check_sparse_tensor_invariants`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import InvariantError
from .._scoped import Scope, ScopeEntry
from ._base import SparseArray
from ._ops import expand_compressed
from ._layout import sparse_coo

if TYPE_CHECKING:
    from ._coo import COOArray
    from ._compressed import CompressedArray

__all__ = ["check_sparse_tensor_invariants", "full_checks_enabled", "INDEX_DTYPE_NAMES", "VALUE_DTYPE_NAMES"]

INDEX_DTYPE_NAMES = ("int32", "int64")
VALUE_DTYPE_NAMES = (
    "bool",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
    "complex64", "complex128",
)  # fmt: skip

# The stack of the enclosing switches' entries in this context (innermost last). A stack held in the
# ContextVar itself, rather than state held by each switch instance, lets one instance be entered in
# several threads or tasks at once and re-entered while active; each exit removes its own entry.
_enabled: contextvars.ContextVar[tuple[ScopeEntry, ...]] = contextvars.ContextVar("xsparse_check_invariants", default=())


class check_sparse_tensor_invariants(Scope):
    """Context manager and decorator that turns the full invariant checks on (or off) in its scope.

    The setting lives in a :class:`contextvars.ContextVar`, so it is scoped to the current thread (and
    asyncio task), nests, and is restored on exit. As a decorator it applies while the function's body
    runs: for a generator (or async generator) function, during each resumption only, so the caller does
    not see it between items; for a coroutine function, until the coroutine returns.

    Parameters
    ----------
    enable
        ``True`` (default) runs the checks that read index data for every sparse array constructed
        in the scope; ``False`` turns them off in the scope.

    Examples
    --------
    >>> import xsparse as xs
    >>> with xs.check_sparse_tensor_invariants():
    ...     xs.sparse_csr_array([0, 2, 1], [0, 1], [1.0, 2.0])
    Traceback (most recent call last):
        ...
    xsparse.InvariantError: invariant 5.2 violated: sparse_compressed_array(layout=sparse_csr): crow_indices[..., -1] must equal nse=2, got 1. End every batch's crow_indices at the number of specified elements.
    >>> xs.check_sparse_tensor_invariants.is_enabled()
    False
    """

    _var = _enabled
    _op = "check_sparse_tensor_invariants"

    def __init__(self, enable: bool = True) -> None:
        # bool() would read "false" or "no" as true; NumPy's bools are bools (as for every flag argument)
        if not (isinstance(enable, bool) or (type(enable).__module__ == "numpy" and type(enable).__name__ in ("bool", "bool_"))):
            raise TypeError(
                f"check_sparse_tensor_invariants: enable must be True or False, got {type(enable).__name__} "
                f"(enable={enable!r}). Pass a bool."
            )
        self.enable = bool(enable)

    def __repr__(self) -> str:
        return f"check_sparse_tensor_invariants({self.enable})"

    def _value(self) -> bool:
        return self.enable

    def __enter__(self) -> check_sparse_tensor_invariants:
        self._enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._leave()

    @staticmethod
    def is_enabled() -> bool:
        """Whether the full checks are on in the current context."""
        stack = _enabled.get()
        return bool(stack[-1].value) if stack else False


def full_checks_enabled(check_invariants: bool | None) -> bool:
    """Resolve a constructor's ``check_invariants=`` argument against the current context."""
    return check_sparse_tensor_invariants.is_enabled() if check_invariants is None else bool(check_invariants)


# Keyed by (type, dtype): dtypes of different libraries never meet in a comparison (array-api-strict
# warns when one of its dtypes is compared with a NumPy one).
_DTYPE_NAMES: dict[tuple[type, Any], str] = {}


def dtype_name(dtype: Any) -> str:
    """The Array API name of a backend dtype (``float64``), whatever the backend spells it."""
    key = (type(dtype), dtype)
    try:
        return _DTYPE_NAMES[key]
    except (KeyError, TypeError):
        pass
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        name = str(dtype).rsplit(".", 1)[-1].strip("'>")
    try:
        # every array's check asks; NumPy computes a dtype's name in Python, a few microseconds each time
        if len(_DTYPE_NAMES) < 1024:
            _DTYPE_NAMES[key] = name
    except TypeError:
        pass  # an unhashable dtype object
    return name


def is_half_precision(dtype: Any) -> bool:
    """Whether ``dtype`` (of any backend) is float16 or bfloat16, whose sums xsparse adds in float32."""
    return dtype_name(dtype) in ("float16", "bfloat16")


def validate(check: Callable[[Any, bool], None], a: SparseArray, full: bool, op: str | None) -> None:
    """Run ``check`` (one family's validator) on ``a``, a violation naming ``op``, the constructor the user
    called with the bad components, where one is given."""
    try:
        check(a, full)
    except InvariantError as e:
        if op is None:
            raise
        raise e.met_by(op) from None


def check_index_data(a: COOArray | CompressedArray) -> None:
    """Run every check of ``a``'s family, the ones that read index data included."""
    (check_coo if a.layout is sparse_coo else check_compressed)(a, True)  # type: ignore[arg-type]


_Checked = TypeVar("_Checked")


def verified(a: _Checked) -> _Checked:
    """``a`` (COO or compressed), once its index-reading invariants are checked, for kernels that trust the
    indices they read (torch's, cuSPARSE's: an index out of range reads, or writes, outside a buffer). An
    array checks once: the answer is kept on it (arrays are immutable), so one its constructor checked, one
    a trusted kernel made or a view of either is not read again."""
    if not a._bounds_checked:  # type: ignore[attr-defined]
        check_index_data(a)  # type: ignore[arg-type]
        a._bounds_checked = True  # type: ignore[attr-defined]
    return a


def explain_bad_indices(args: tuple[Any, ...]) -> None:
    """Raise the :class:`InvariantError` of the first operand among ``args`` (or in a list among them) whose
    unchecked indices are invalid; return where they are all valid."""
    for arg in args:
        for a in arg if isinstance(arg, (list, tuple)) else (arg,):
            if isinstance(a, SparseArray) and getattr(a, "_bounds_checked", True) is False:
                check_index_data(a)  # type: ignore[arg-type]  # a COO or compressed array: only they carry the flag


def _fail(invariant: str, message: str, op: str | None = None) -> InvariantError:
    return InvariantError(invariant, message if message.endswith(".") else message + ".", op)


def _is_array(xp: Any, x: Any) -> bool:
    return not isinstance(x, SparseArray) and hasattr(x, "shape") and hasattr(x, "dtype")


# the Python scalar type of the fill value of each dtype (docs/decisions.md, "The fill value takes the array's kind")
_FILL_KINDS: dict[str, type] = {
    name: bool if name == "bool" else int if "int" in name else complex if "complex" in name else float for name in VALUE_DTYPE_NAMES
}


def _fill_of_kind(a: Any, kind: type) -> None:
    """Store ``a``'s fill value as the scalar type of its dtype's kind where that keeps its value (a
    constructor given ``0`` for float values stores ``0.0``); a value the kind cannot hold is left for
    the conversions' own checks to refuse."""
    fill = a._fill_value
    if type(fill) is kind:
        return
    try:
        same = kind(fill)
    except (TypeError, ValueError, OverflowError):
        return
    if same == fill or (same != same and fill != fill):
        a._fill_value = same


# (namespace, device) -> whether the device has no int64 (array_api_strict's "no_x64" device), memoised
_NO_INT64: dict[tuple[int, Any], bool] = {}


def _lacks_int64(xp: Any, device: Any) -> bool:
    """Whether ``device`` of the namespace ``xp`` cannot hold int64 arrays, by its inspection API (memoised)."""
    key = (id(xp), device)
    try:
        known = _NO_INT64.get(key)
    except TypeError:
        return False  # a device that is no dictionary key: not checked
    if known is not None:
        return known
    lacks = False
    info = getattr(xp, "__array_namespace_info__", None)
    if info is not None:
        try:
            lacks = "int64" not in info().dtypes(device=device, kind="signed integer")
        except Exception:  # a namespace whose inspection API does not know the device or the kind
            lacks = False
    _NO_INT64[key] = lacks
    return lacks


def int64_device_violation(xp: Any, device: Any) -> InvariantError | None:
    """Invariant 4.1's violation where ``device`` has no int64 (see :func:`_lacks_int64`), else None."""
    if not _lacks_int64(xp, device):
        return None
    return _fail(
        "4.1", f"device {device} has no int64, in which xsparse computes positions and sort keys. Put the arrays on a "
        "device with 64-bit integers"
    )


def _check_common_types(a: Any, index_arrays: dict[str, Any], values: Any) -> None:
    """Type (1.x), layout (2.x) and device (4.x) invariants shared by every format."""
    xp = a._xp
    names = list(index_arrays)
    for inv, name in zip(("2.1", "2.2"), names):
        if not _is_array(xp, index_arrays[name]):
            raise _fail(inv, f"{name} must be a strided array of the backend, got {type(index_arrays[name]).__name__}. Pass an array of the backend, e.g. xp.asarray({name})")
    if not _is_array(xp, values):
        raise _fail("2.3", f"values must be a strided array of the backend, got {type(values).__name__}. Pass an array of the backend, e.g. xp.asarray(values)")
    first_name = names[0]
    index_dtype = dtype_name(index_arrays[first_name].dtype)
    for name in names[1:]:
        other = dtype_name(index_arrays[name].dtype)
        if other != index_dtype:
            raise _fail("1.2", f"{name}.dtype ({other}) differs from {first_name}.dtype ({index_dtype}). Give both the same integer dtype, e.g. with xp.astype({name}, xp.int64)")
    if index_dtype not in INDEX_DTYPE_NAMES:
        raise _fail("1.3", f"the indices dtype must be int32 or int64, got {index_dtype}. Cast the indices with xp.astype(indices, xp.int64)")
    value_dtype = dtype_name(values.dtype)
    if value_dtype not in VALUE_DTYPE_NAMES:
        raise _fail("1.5", f"values dtype {value_dtype} is not a supported numeric or bool dtype. Cast the values to one of {', '.join(VALUE_DTYPE_NAMES)}")
    _fill_of_kind(a, _FILL_KINDS[value_dtype])
    device = a._backend_device(values)
    for inv, name in zip(("4.2", "4.3"), names):
        d = a._backend_device(index_arrays[name])
        if d != device:
            raise _fail(inv, f"{name} is on device {d} but values are on device {device}. Move them to one device, e.g. with xp.asarray({name}, device=values.device)")
    for inv, name in zip(("3.5", "3.6"), names):
        if a._backend.is_contiguous(index_arrays[name]) is False:
            raise _fail(inv, f"{name} must be contiguous. Pass a contiguous copy (the public constructors make one)")


def check_compressed(a: CompressedArray, full: bool) -> None:
    """Check the invariants of a CSR, CSC, BSR or BSC array; ``full`` adds those that read index data."""
    xp = a._xp
    layout = a.layout
    if not layout.is_compressed:
        raise _fail(
            "2.4",
            f"layout must be one of sparse_csr, sparse_csc, sparse_bsr, sparse_bsc, got {layout}. Pass one of them, "
            "or build a COO array with xsparse.sparse_coo_array",
        )
    cname, pname = layout.index_names
    ci, pi, values = a._compressed, a._plain, a._vals
    _check_common_types(a, {cname: ci, pname: pi}, values)
    shape = a.shape
    if ci.ndim < 1:
        raise _fail("3.2", f"{cname} must have at least one dimension, got a 0-d array. Give it the shape (*batch, n_compressed + 1)")
    n_batch = ci.ndim - 1
    if pi.ndim != 1 + n_batch:
        raise _fail("3.3", f"{pname}.ndim ({pi.ndim}) must equal {cname}.ndim ({ci.ndim}). Give both index arrays the same batch dimensions")
    n_block = 2 if layout.is_blocked else 0
    n_dense = values.ndim - n_batch - 1 - n_block
    if n_dense < 0:
        raise _fail("3.4", f"values.ndim ({values.ndim}) must be at least {n_batch + 1 + n_block} for {layout} with {n_batch} batch dimensions. Give values the shape (*batch, nse{', *block' if n_block else ''}, *dense)")
    if len(shape) != n_batch + 2 + n_dense:
        raise _fail("3.1", f"shape {shape} must have {n_batch} batch + 2 sparse + {n_dense} dense dimensions (from the components' shapes). Fix the shape, or leave it out to infer it")
    if any(s < 0 for s in shape):
        raise _fail("3.1", f"shape {shape} has a negative size. Give non-negative sizes")
    batch = tuple(shape[:n_batch])
    blocksize = tuple(values.shape[n_batch + 1 : n_batch + 1 + n_block]) if n_block else (1, 1)
    dense = tuple(shape[n_batch + 2 :])
    rows, cols = shape[n_batch], shape[n_batch + 1]
    if blocksize[0] <= 0 or blocksize[1] <= 0:
        raise _fail(
            "3.1", f"the blocks of the values (values.shape={tuple(values.shape)}) have a zero size, blocksize {blocksize}. Give every block at least one row and one column"
        )
    if rows % blocksize[0] or cols % blocksize[1]:
        raise _fail("3.1", f"shape {shape} is not a whole number of blocks of blocksize {blocksize}. Make every block dimension divide the matching sparse dimension")
    nblocks = (rows // blocksize[0], cols // blocksize[1])
    n_compressed = nblocks[layout.compressed_dim]
    n_plain = nblocks[1 - layout.compressed_dim]
    if tuple(ci.shape) != batch + (n_compressed + 1,):
        raise _fail("3.8", f"{cname}.shape must be {batch + (n_compressed + 1,)} for shape {shape}, got {tuple(ci.shape)}. Give it one entry per compressed {'block ' if n_block else ''}slice plus one, or fix the shape")
    nse = pi.shape[-1]
    if tuple(pi.shape) != batch + (nse,):
        raise _fail("3.9", f"{pname}.shape must be {batch + (nse,)} (batch dimensions {batch}), got {tuple(pi.shape)}. Give {pname} the batch dimensions of {cname}")
    expected_values = batch + (nse,) + (blocksize if n_block else ()) + dense
    if tuple(values.shape) != expected_values:
        raise _fail("3.10", f"values.shape must be {expected_values}, got {tuple(values.shape)}. Give one value{' block' if n_block else ''} per plain index, or fix the shape")
    contiguous = a._backend.is_contiguous(values)
    if contiguous is False and n_block:
        swapped = xp.permute_dims(values, _swap_axes(values.ndim, n_batch + 1, n_batch + 2))
        contiguous = a._backend.is_contiguous(swapped)
    if contiguous is False:
        raise _fail("3.7", "values must be contiguous (or, for blocks, contiguous after swapping the two block dimensions). Pass a contiguous copy")
    if index_overflows(dtype_name(ci.dtype), max(n_compressed, n_plain, nse, 1)):
        raise _fail("1.3", f"{dtype_name(ci.dtype)} indices cannot address {max(n_compressed, n_plain, nse)} elements. {_wider(ci.dtype)}")
    if full:
        _check_compressed_indices(xp, a, ci, pi, n_batch, n_compressed, n_plain, nse, cname, pname)


def _swap_axes(ndim: int, i: int, j: int) -> tuple[int, ...]:
    axes = list(range(ndim))
    axes[i], axes[j] = axes[j], axes[i]
    return tuple(axes)


def _first(xp: Any, mask: Any) -> int:
    """The flat position of the first True of a boolean array (the caller knows there is one)."""
    flat = xp.reshape(mask, (-1,))
    return int(xp.argmax(xp.astype(flat, xp.int8)))


def _flat_value(xp: Any, x: Any, position: int) -> int:
    return int(xp.reshape(x, (-1,))[position])


def _check_compressed_indices(
    xp: Any, a: Any, ci: Any, pi: Any, n_batch: int, n_compressed: int, n_plain: int, nse: int, cname: str, pname: str
) -> None:
    canonical = a._backend.canonical
    if canonical is not None and canonical(ci, pi, n_plain):
        return  # the backend's one pass found nothing; the checks below name what it finds
    first = ci[..., :1]
    bad = first != 0
    if bool(xp.any(bad)):
        raise _fail("5.1", f"{cname}[..., 0] must be 0, got {_flat_value(xp, first, _first(xp, bad))}. Start every batch's {cname} at 0")
    last = ci[..., -1:]
    bad = last != nse
    if bool(xp.any(bad)):
        raise _fail("5.2", f"{cname}[..., -1] must equal nse={nse}, got {_flat_value(xp, last, _first(xp, bad))}. End every batch's {cname} at the number of specified elements")
    if n_compressed:
        counts = ci[..., 1:] - ci[..., :-1]
        bad = (counts < 0) | (counts > n_plain)
        if bool(xp.any(bad)):
            at = _first(xp, bad)
            raise _fail(
                "5.3",
                f"0 <= {cname}[..., i] - {cname}[..., i-1] <= {n_plain} must hold for every i, got a difference of "
                f"{_flat_value(xp, counts, at)} at flat position {at}. Make {cname} the running count of elements per slice, and check the shape",
            )
    if nse:
        if bool(xp.any(pi < 0)):
            raise _fail("5.4", f"{pname} must be non-negative, got {int(xp.min(pi))}. Every index must lie in [0, {n_plain})")
        if bool(xp.any(pi >= n_plain)):
            raise _fail("5.5", f"{pname} must be < {n_plain} (the number of plain {'block ' if a.layout.is_blocked else ''}dimensions), got {int(xp.max(pi))}. Fix the indices, or give a shape that holds them")
    if nse > 1:
        # Within a compressed slice consecutive plain indices must strictly increase.
        major = expand_compressed(xp, ci, nse, a._backend)
        same_slice = major[..., 1:] == major[..., :-1]
        bad = same_slice & (pi[..., 1:] <= pi[..., :-1])
        if bool(xp.any(bad)):
            at = _first(xp, bad)
            raise _fail(
                "5.6",
                f"{pname} must be sorted and distinct within each compressed slice, got {_flat_value(xp, pi[..., :-1], at)} "
                f"followed by {_flat_value(xp, pi[..., 1:], at)}. Build the array with to_sparse_csr (or another to_sparse_*) "
                "from a COO array, which sorts and sums duplicates",
            )


def unequal_batches(layout: Any, batch: tuple[int, ...], fewest: int, most: int) -> InvariantError:
    """The error for a conversion whose batches would hold different numbers of specified elements."""
    return _fail(
        "3.9",
        f"every batch of a {layout} array must hold the same number of specified elements, got between "
        f"{fewest} and {most} (batch shape {batch}). Convert to sparse_coo instead, or give every batch the same "
        "number of specified elements.",
        "to_sparse",
    )


def _wider(index_dtype: Any) -> str:
    """How to fix an index dtype too narrow for the array: int64 where it is int32, else smaller sizes."""
    if dtype_name(index_dtype) == "int32":
        return "Use int64 indices"
    return "Sizes and counts above 2**63 - 1 cannot be indexed; use smaller dimensions"


def index_overflows(index_dtype: str, largest: int) -> bool:
    """Whether ``largest`` (a size or an index) does not fit the index dtype."""
    return largest > (2**31 - 1 if index_dtype == "int32" else 2**63 - 1)


def check_coo_bounds(a: COOArray, context: str = "") -> None:
    """Invariant coo.5 of a COO array with entries: every index within its dimension (one read of the
    indices). ``context`` says, in the message, who found a violation."""
    xp = a._xp
    lo = xp.min(a._idx, axis=1)
    hi = xp.max(a._idx, axis=1)
    for d in range(a._idx.shape[0]):
        if int(lo[d]) < 0 or int(hi[d]) >= a.shape[d]:
            bad = int(lo[d]) if int(lo[d]) < 0 else int(hi[d])
            where = f" ({context})" if context else ""
            raise _fail("coo.5", f"indices[{d}] must lie in [0, {a.shape[d]}), got {bad}{where}. Fix the indices, or give a shape that holds them")


def check_coo(a: COOArray, full: bool) -> None:
    """Check the invariants of a COO array; ``full`` adds the bounds and coalesced-order checks."""
    xp = a._xp
    indices, values = a._idx, a._vals
    _check_common_types(a, {"indices": indices}, values)
    if indices.ndim != 2:
        raise _fail("coo.1", f"indices must be 2-D (sparse_dim, nse), got shape {tuple(indices.shape)}. A list of index tuples must be transposed first")
    sparse_dim, nse = indices.shape
    shape = a.shape
    if sparse_dim > len(shape) or values.ndim < 1 or sparse_dim + values.ndim - 1 != len(shape):
        raise _fail(
            "coo.2",
            f"sparse_dim ({sparse_dim}) + dense_dim ({values.ndim - 1}) must equal ndim ({len(shape)}) for shape {shape}. Give one "
            "size per index row plus one per trailing dimension of the values",
        )
    if values.shape[0] != nse:
        raise _fail("coo.3", f"values.shape[0] ({values.shape[0]}) must equal indices.shape[1] (nse={nse}). Give one value per index column")
    if tuple(values.shape[1:]) != tuple(shape[sparse_dim:]):
        raise _fail("coo.4", f"values.shape[1:] must equal the dense shape {tuple(shape[sparse_dim:])}, got {tuple(values.shape[1:])}. Fix the values or the shape")
    if any(s < 0 for s in shape):
        raise _fail("coo.2", f"shape {shape} has a negative size. Give non-negative sizes")
    if index_overflows(dtype_name(indices.dtype), max([nse, *shape[:sparse_dim], 1])):
        raise _fail("1.3", f"{dtype_name(indices.dtype)} indices cannot address shape {shape} with nse={nse}. {_wider(indices.dtype)}")
    if full and nse:
        check_coo_bounds(a)
        if a._coalesced and nse > 1 and not sparse_dim:
            raise _fail(
                "coo.6",
                f"an array marked coalesced must have sorted, distinct indices; with sparse_dim=0 its {nse} entries all "
                "share the empty index. Pass is_coalesced=False or call coalesce().",
            )
        if a._coalesced and nse > 1 and sparse_dim:
            diff = indices[:, 1:] - indices[:, :-1]
            # lexicographic strict increase: the first non-zero difference of each column is positive
            nonzero = diff != 0
            first_nz = xp.argmax(xp.astype(nonzero, xp.int8), axis=0)
            lead = xp.take_along_axis(diff, xp.reshape(first_nz, (1, -1)), axis=0)[0, :]
            bad = lead <= 0
            if bool(xp.any(bad)):
                at = _first(xp, bad)
                raise _fail(
                    "coo.6",
                    f"an array marked coalesced must have sorted, distinct indices; column {at + 1} does not follow column {at}. "
                    "Pass is_coalesced=False or call coalesce().",
                )
