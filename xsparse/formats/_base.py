"""The base class of every sparse array."""

from __future__ import annotations

import abc
import math
import operator
from typing import Any, cast

import array_api_compat

from .._errors import DensificationError, LayoutError
from ._layout import Layout

__all__ = ["SparseArray", "array_device"]


def array_device(x: Any) -> Any:
    """The device of a backend array: its ``device`` attribute (the standard's), else array-api-compat's
    lookup (NumPy before 2.0)."""
    try:
        return x.device
    except AttributeError:
        return array_api_compat.device(x)


class SparseArray(abc.ABC):
    """An immutable handle on the components of one sparse array, all owned by one backend.

    Subclasses (one per format family) hold the component arrays; this class holds what every format
    shares: the backend, its namespace ``xp``, the shape, the layout and the fill value, the value of
    every unspecified element. Operations return new arrays; views (``values()``, the CSR <-> CSC
    transpose) share component buffers.
    """

    __slots__ = ("_backend", "_xp", "_shape", "_layout", "_fill_value", "__weakref__")

    def __init__(self, *, backend: Any, xp: Any, shape: tuple[int, ...], layout: Layout, fill_value: Any) -> None:
        self._backend = backend
        self._xp = xp
        self._shape = tuple(int(s) for s in shape)
        self._layout = layout
        self._fill_value = fill_value

    # -- what every format provides ------------------------------------------------------------
    _vals: Any

    @property
    @abc.abstractmethod
    def nnz(self) -> int:
        """The number of specified elements (per batch, counting blocks and dense sub-arrays as one)."""

    @abc.abstractmethod
    def sparse_dim(self) -> int:
        """The number of sparse dimensions."""

    @abc.abstractmethod
    def dense_dim(self) -> int:
        """The number of dense (trailing, per-element) dimensions."""

    @abc.abstractmethod
    def _components(self) -> dict[str, Any]:
        """The component arrays by their torch names, in constructor order."""

    @abc.abstractmethod
    def _with_values(self, values: Any, fill_value: Any) -> SparseArray:
        """The same sparsity structure with new values and fill value (indices shared)."""

    @abc.abstractmethod
    def _map_components(self, fn: Any, backend: Any, xp: Any) -> SparseArray:
        """The same array with ``fn`` applied to every component (used to move between backends)."""

    # -- attributes ----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the array, dense dimensions included."""
        return self._shape

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """The number of elements (specified or not)."""
        return math.prod(self._shape)

    @property
    def layout(self) -> Layout:
        """The layout (``xs.sparse_coo``, ``xs.sparse_csr``, ...)."""
        return self._layout

    @property
    def dtype(self) -> Any:
        """The backend dtype of the values."""
        return self._vals.dtype

    @property
    def device(self) -> Any:
        """The backend device the components live on."""
        return array_device(self._vals)

    @property
    def fill_value(self) -> Any:
        """The value of every unspecified element (0 unless set)."""
        return self._fill_value

    @property
    def backend(self) -> str:
        """The name of the backend that owns the components (``"numpy"``, ``"torch"``, ...)."""
        return str(self._backend.name)

    @property
    def is_sparse(self) -> bool:
        return True

    def is_coalesced(self) -> bool:
        """Whether the indices are sorted and unique (always true for compressed layouts)."""
        return True

    def to_device(self, device: Any, /, *, stream: Any = None) -> SparseArray:
        """The same array with every component on ``device`` (``self`` when already there)."""
        if device == self.device:
            return self
        return self._map_components(
            lambda c: array_api_compat.to_device(c, device, stream=stream), self._backend, self._xp
        )

    def _backend_device(self, x: Any) -> Any:
        return array_device(x)

    @property
    def T(self) -> SparseArray:
        """The transpose of a 2-D array; CSR <-> CSC and BSR <-> BSC are views."""
        from .._conversion import matrix_transpose

        if self.ndim != 2:
            raise ValueError(f"T: the array must be 2-D, got ndim={self.ndim}. Use mT to transpose the last two dimensions.")
        return cast(SparseArray, matrix_transpose(self))

    @property
    def mT(self) -> SparseArray:
        """The transpose of the last two dimensions."""
        from .._conversion import matrix_transpose

        return cast(SparseArray, matrix_transpose(self))

    # -- conversions (one-line calls into the public functions) ----------------------------------
    def to_dense(self) -> Any:
        """The strided array of the backend with the same elements (see :func:`xsparse.to_dense`)."""
        from .._conversion import to_dense

        return to_dense(self)

    def to_sparse(self, **kwargs: Any) -> SparseArray:
        """See :func:`xsparse.to_sparse`."""
        from .._conversion import to_sparse

        return to_sparse(self, **kwargs)

    def to_sparse_coo(self, sparse_dim: int | None = None, **kwargs: Any) -> SparseArray:
        """See :func:`xsparse.to_sparse_coo`."""
        from .._conversion import to_sparse_coo

        return to_sparse_coo(self, sparse_dim, **kwargs)

    def to_sparse_csr(self, dense_dim: int | None = None, **kwargs: Any) -> SparseArray:
        """See :func:`xsparse.to_sparse_csr`."""
        from .._conversion import to_sparse_csr

        return to_sparse_csr(self, dense_dim, **kwargs)

    def to_sparse_csc(self, dense_dim: int | None = None, **kwargs: Any) -> SparseArray:
        """See :func:`xsparse.to_sparse_csc`."""
        from .._conversion import to_sparse_csc

        return to_sparse_csc(self, dense_dim, **kwargs)

    def to_sparse_bsr(self, blocksize: tuple[int, int], dense_dim: int | None = None, **kwargs: Any) -> SparseArray:
        """See :func:`xsparse.to_sparse_bsr`."""
        from .._conversion import to_sparse_bsr

        return to_sparse_bsr(self, blocksize, dense_dim, **kwargs)

    def to_sparse_bsc(self, blocksize: tuple[int, int], dense_dim: int | None = None, **kwargs: Any) -> SparseArray:
        """See :func:`xsparse.to_sparse_bsc`."""
        from .._conversion import to_sparse_bsc

        return to_sparse_bsc(self, blocksize, dense_dim, **kwargs)

    def coalesce(self) -> SparseArray:
        """See :func:`xsparse.coalesce`."""
        from .._conversion import coalesce

        return coalesce(self)

    # -- torch's shape methods whose names the Array API has no function for ---------------------
    def permute(self, *dims: Any) -> Any:
        """torch's ``permute(*dims)``: see :func:`xsparse.permute_dims`."""
        from .._shape import permute_dims

        return permute_dims(self, dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims)

    def transpose(self, dim0: int, dim1: int) -> Any:
        """torch's ``transpose(dim0, dim1)``: swap two dimensions (see :func:`xsparse.permute_dims`)."""
        from .._shape import swap_dims

        return swap_dims(self, dim0, dim1)

    def unsqueeze(self, dim: int) -> Any:
        """torch's ``unsqueeze(dim)``: see :func:`xsparse.expand_dims`."""
        from .._shape import expand_dims

        return expand_dims(self, axis=dim)

    def __getitem__(self, key: Any) -> Any:
        """``x[key]`` with integers, slices of any step, None and Ellipsis: a sparse array with ``x``'s fill value."""
        from .._indexing import getitem

        return getitem(self, key)

    def __iter__(self) -> Any:
        """The sub-arrays ``x[0], x[1], ...`` along the first dimension; a 0-d array raises ``TypeError``, as
        NumPy's and torch's do (without this, Python's fallback to ``__getitem__`` gave an empty iteration)."""
        if not self._shape:
            raise TypeError(f"__iter__: iteration over a 0-d array (shape={self._shape}). Read its value with float(x), int(x) or bool(x).")
        return (self[i] for i in range(self._shape[0]))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickling and ``copy.deepcopy``: the components and the metadata, and the backend by its name (its
        namespace, a module, is looked up again when loaded). A backend's accelerator encoding of a
        semi-structured array (``packed``) is left out; the reference encoding it was built from is kept."""
        state = {
            name: None if name == "_packed" else getattr(self, name)
            for cls in type(self).__mro__
            for name in getattr(cls, "__slots__", ())
            if name not in ("_backend", "_xp", "__weakref__")
        }
        return (_restore, (type(self), self._backend.name, state))

    def __setitem__(self, key: Any, value: Any, /) -> None:
        """Always raises: sparse arrays are immutable handles (their views share component buffers)."""
        raise LayoutError(
            f"__setitem__: xsparse sparse arrays are immutable and cannot be assigned to (layout={self._layout}, "
            f"shape={self._shape}). Build the result as a new array instead, e.g. xsparse.where(mask, value, x) "
            "for a boolean mask, or assign into a dense copy (to_dense()) and convert it back with xsparse.to_sparse."
        )

    def astype(self, dtype: Any, /, *, copy: bool = True) -> Any:
        """See :func:`xsparse.astype`."""
        from .._indexing import astype

        return astype(self, dtype, copy=copy)

    def clone(self) -> Any:
        """See :func:`xsparse.clone`."""
        from .._indexing import clone

        return clone(self)

    # -- operators: one-line calls into the elementwise functions ----------------------------------
    # NumPy defers to these reflected operators instead of converting the array (which would densify).
    __array_ufunc__ = None

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """A torch tensor's in-place operator with a sparse right operand (``D += A``, ``D.mul_(A)``): the
        result is written into ``D``, as torch's own ``D += S`` does, where Python's fallback would rebind
        ``D`` to a new array. Every other torch function declines (``NotImplemented``), so that ``D + A``
        reaches the reflected operators below."""
        name = _TORCH_IN_PLACE.get(getattr(func, "__name__", ""))
        if name is None or kwargs or len(args) != 2 or isinstance(args[0], SparseArray) or not isinstance(args[1], SparseArray):
            return NotImplemented
        return _ew().in_place(name, args[0], args[1])

    def __add__(self, other: Any) -> Any:
        return _ew().add(self, other)

    def __radd__(self, other: Any) -> Any:
        return _ew().add(other, self)

    def __sub__(self, other: Any) -> Any:
        return _ew().subtract(self, other)

    def __rsub__(self, other: Any) -> Any:
        return _ew().subtract(other, self)

    def __mul__(self, other: Any) -> Any:
        return _ew().multiply(self, other)

    def __rmul__(self, other: Any) -> Any:
        return _ew().multiply(other, self)

    def __truediv__(self, other: Any) -> Any:
        return _ew().divide(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _ew().divide(other, self)

    def __floordiv__(self, other: Any) -> Any:
        return _ew().floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return _ew().floor_divide(other, self)

    def __mod__(self, other: Any) -> Any:
        return _ew().remainder(self, other)

    def __rmod__(self, other: Any) -> Any:
        return _ew().remainder(other, self)

    def __pow__(self, other: Any) -> Any:
        return _ew().pow(self, other)

    def __rpow__(self, other: Any) -> Any:
        return _ew().pow(other, self)

    def __and__(self, other: Any) -> Any:
        return _ew().bitwise_and(self, other)

    def __rand__(self, other: Any) -> Any:
        return _ew().bitwise_and(other, self)

    def __or__(self, other: Any) -> Any:
        return _ew().bitwise_or(self, other)

    def __ror__(self, other: Any) -> Any:
        return _ew().bitwise_or(other, self)

    def __xor__(self, other: Any) -> Any:
        return _ew().bitwise_xor(self, other)

    def __rxor__(self, other: Any) -> Any:
        return _ew().bitwise_xor(other, self)

    def __lshift__(self, other: Any) -> Any:
        return _ew().bitwise_left_shift(self, other)

    def __rlshift__(self, other: Any) -> Any:
        return _ew().bitwise_left_shift(other, self)

    def __rshift__(self, other: Any) -> Any:
        return _ew().bitwise_right_shift(self, other)

    def __rrshift__(self, other: Any) -> Any:
        return _ew().bitwise_right_shift(other, self)

    def __eq__(self, other: Any) -> Any:
        return _ew().equal(self, other)

    def __ne__(self, other: Any) -> Any:
        return _ew().not_equal(self, other)

    def __lt__(self, other: Any) -> Any:
        return _ew().less(self, other)

    def __le__(self, other: Any) -> Any:
        return _ew().less_equal(self, other)

    def __gt__(self, other: Any) -> Any:
        return _ew().greater(self, other)

    def __ge__(self, other: Any) -> Any:
        return _ew().greater_equal(self, other)

    def __matmul__(self, other: Any) -> Any:
        return _la().matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return _la().matmul(other, self)

    def __neg__(self) -> Any:
        return _ew().negative(self)

    def __pos__(self) -> Any:
        return _ew().positive(self)

    def __abs__(self) -> Any:
        return _ew().abs(self)

    def __invert__(self) -> Any:
        return _ew().bitwise_invert(self)

    __hash__ = None  # type: ignore[assignment]

    # -- namespaces and protocols ----------------------------------------------------------------
    def __array_namespace__(self, *, api_version: str | None = None) -> Any:
        """The xsparse namespace bound to this array's backend."""
        from .._namespace import bound_namespace

        return bound_namespace(self._backend, api_version=api_version)

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(
                f"__bool__: the truth value of an array with {self.size} elements is ambiguous (shape={self._shape}). "
                "Reduce it first, e.g. with xsparse.any or xsparse.all on to_dense(a)."
            )
        return bool(self._element("__bool__"))

    def __int__(self) -> int:
        return self._integer(self._element("__int__"), int)

    def __float__(self) -> float:
        return float(self._element("__float__"))

    def __complex__(self) -> complex:
        return complex(self._element("__complex__"))

    def __index__(self) -> int:
        return self._integer(self._element("__index__"), operator.index)

    def _integer(self, element: Any, convert: Any) -> int:
        """``convert`` of a 0-d array; a uint64 above int64's range, which torch reads as no Python int,
        from its int64 bits (the cast keeps them)."""
        try:
            return int(convert(element))
        except RuntimeError:
            xp = self._xp
            if element.dtype != getattr(xp, "uint64", None):
                raise
            return int(convert(xp.astype(element, xp.int64))) % 2**64

    def _element(self, op: str) -> Any:
        """The one element of a one-element array, as a 0-d strided array of the backend.

        The Python conversion of that 0-d array gives the backend's rules (``__index__`` of a float array
        is a TypeError, ``__int__`` of NaN a ValueError); densifying one element is not densification.
        """
        if self.size != 1:
            raise ValueError(
                f"{op}: only an array with one element converts to a Python scalar (size={self.size}, "
                f"shape={self._shape}). Index one element first, or reduce the array (xsparse.sum, xsparse.max, ...)."
            )
        from .._conversion import to_dense

        return self._xp.reshape(to_dense(self), ())

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise DensificationError(
            f"__array__: a {self._layout} array is not converted to a dense array implicitly (shape={self._shape}). "
            "Call to_dense() (or xsparse.to_dense(a)) to make the dense copy explicitly."
        )

    def __dlpack__(
        self, /, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: bool | None = None
    ) -> Any:
        # DLPack describes strided memory only: exporting a sparse array would be an implicit dense copy.
        raise DensificationError(
            f"__dlpack__: a {self._layout} array has no DLPack representation (shape={self._shape}). Call to_dense() "
            "first to exchange a dense copy, or xsparse.to_backend(a, name) to move the sparse array itself."
        )

    def __dlpack_device__(self) -> tuple[Any, Any]:
        """The DLPack ``(device type, device id)`` of the components; it exports nothing (``__dlpack__`` raises)."""
        return cast("tuple[Any, Any]", self._vals.__dlpack_device__())

    def __repr__(self) -> str:
        from .._repr import sparse_repr

        return sparse_repr(self)


# The operators call into xsparse._elementwise and xsparse._linalg, which import this module: they are
# imported at the first operator call and then kept here, since re-running ``from .. import`` on every
# call costs about 0.6 us, a sixth of a small ``A @ x``.
_elementwise: Any = None
_linalg: Any = None


def _restore(cls: type[SparseArray], backend_name: str, state: dict[str, Any]) -> SparseArray:
    """A pickled sparse array (:meth:`SparseArray.__reduce__`) on the backend of that name."""
    from ..backends import get_backend

    backend = get_backend(backend_name)
    a = cls.__new__(cls)
    a._backend, a._xp = backend, backend.load()
    for name, value in state.items():
        setattr(a, name, value)
    return a


# torch's in-place methods (the names its ``__torch_function__`` protocol passes) -> xsparse's functions
_TORCH_IN_PLACE = {
    "add_": "add", "sub_": "subtract", "mul_": "multiply", "div_": "divide", "floor_divide_": "floor_divide",
    "remainder_": "remainder", "pow_": "pow", "__iand__": "bitwise_and", "__ior__": "bitwise_or",
    "__ixor__": "bitwise_xor", "__ilshift__": "bitwise_left_shift", "__irshift__": "bitwise_right_shift",
}  # fmt: skip


def _ew() -> Any:
    global _elementwise
    if _elementwise is None:
        from .. import _elementwise as module

        _elementwise = module
    return _elementwise


def _la() -> Any:
    global _linalg
    if _linalg is None:
        from .. import _linalg as module

        _linalg = module
    return _linalg
