"""Namespaces bound to one backend: what ``A.__array_namespace__()`` returns."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

from .backends import Backend, default_backend, get_backend
from ._common import blocksize_argument
from ._errors import LayoutError
from .formats import Layout, sparse_coo, strided

__all__ = ["BoundExtension", "BoundNamespace", "bound_namespace"]

# The Array API's creation functions that make an array from nothing array-like of xsparse's: these take
# the namespace's default layout. The ``*_like`` functions and ``tril``/``triu`` keep their input's
# layout (torch's rule), and operations choose their result layout themselves (sparse + strided is
# strided), so neither is bound. ``to_sparse`` is bound so that ``xp.to_sparse(x)`` means "to this
# namespace's layout".
_CREATION = frozenset(
    {"arange", "asarray", "empty", "eye", "from_dlpack", "full", "linspace", "meshgrid", "ones", "zeros", "to_sparse"}
)
# The creation functions of xsparse's extensions (``xp.fft``, ``xp.linalg``): they make arrays from nothing
# array-like either, so they too take the namespace's backend and default layout.
_EXTENSION_CREATION = {"fft": frozenset({"fftfreq", "rfftfreq"})}


class BoundNamespace:
    """The xsparse namespace with its creation functions bound to one backend.

    Functions that take ``backend=`` get this namespace's backend; dtypes and constants come from the
    backend's own namespace, so code written against the Array API runs unchanged on xsparse arrays.
    With a default ``layout``, the creation functions (``asarray``, ``zeros``, ``arange``, ...) return
    arrays of that layout: a function that takes ``layout=`` gets it, and the strided result of one that
    does not is converted with :func:`xsparse.to_sparse` (a compressed default gives COO arrays where
    it cannot hold them: see :func:`bound_namespace`). The extensions ``fft`` and ``linalg`` are
    xsparse's own (:class:`BoundExtension`, bound the same way); any other extension module of the
    backend takes only the backend's own arrays and is hidden.
    """

    def __init__(self, backend: Backend, layout: Any = None, api_version: str | None = None, blocksize: tuple[int, int] | None = None) -> None:
        self._backend = backend
        self._layout = layout
        # the block shape of a BSR or BSC default layout, passed where a creation function takes one
        self._blocks = {} if blocksize is None else {"blocksize": blocksize}
        self.__array_api_version__ = api_version or "2024.12"
        # Array API test tools (Hypothesis, the array-api-tests suite) name a namespace by ``__name__``.
        self.__name__ = f"xsparse(backend={backend.name}{self._suffix()})"

    def _suffix(self) -> str:
        layout = f", layout={self._layout}" if self._layout is not None else ""
        return layout + "".join(f", blocksize={b}" for b in self._blocks.values())

    def __repr__(self) -> str:
        return f"xsparse namespace(backend={self._backend.name}{self._suffix()})"

    def __dir__(self) -> list[str]:
        import xsparse

        backend = self._backend.namespace()
        theirs = [
            n for n in dir(backend)
            if not n.startswith("_") and not (self._layout is not None and isinstance(getattr(backend, n, None), types.ModuleType))
        ]  # fmt: skip
        return sorted({*xsparse.__all__, *theirs, "__array_api_version__", "__array_namespace_info__"})

    def __getattr__(self, name: str) -> Any:
        import xsparse

        ours = name in xsparse.__all__
        private = name.startswith("_") and name != "__array_namespace_info__"
        if not ours and (private or not hasattr(self._backend.namespace(), name)):
            raise AttributeError(f"the xsparse namespace has no attribute {name!r}")
        if not ours:
            obj = getattr(self._backend.namespace(), name)
            if self._layout is not None and isinstance(obj, types.ModuleType):
                # The backend's extensions (fft, linalg) take only its own arrays: a namespace whose
                # arrays are sparse offers only the extensions xsparse defines.
                raise AttributeError(
                    f"the xsparse namespace has no attribute {name!r} (the backend's extension takes no sparse arrays)"
                )
            if self._layout is not None and name in _CREATION and callable(obj):
                return _bind(obj, functools.partial(_to_layout, self._backend, obj, {}, self._layout, self._blocks))
            return obj
        obj = getattr(xsparse, name)
        if isinstance(obj, types.ModuleType):
            return _extension(obj.__name__, self._backend.name, self._layout)
        return _bound_function(obj, self._backend, self._layout if name in _CREATION else None, self._blocks)


class BoundExtension:
    """An extension of the xsparse namespace (``fft``, ``linalg``) bound to one backend.

    Its functions are xsparse's, with the same binding as the namespace's: a function that takes
    ``backend=`` gets the namespace's backend, and the extension's creation functions (``fft.fftfreq``,
    ``fft.rfftfreq``) the namespace's default layout.
    """

    def __init__(self, module: types.ModuleType, backend: Backend, layout: Any) -> None:
        self._module = module
        self._backend = backend
        self._layout = layout
        self._creation = _EXTENSION_CREATION.get(module.__name__.rpartition(".")[2], frozenset())
        self.__name__ = module.__name__
        self.__doc__ = module.__doc__

    def __repr__(self) -> str:
        layout = f", layout={self._layout}" if self._layout is not None else ""
        return f"xsparse namespace extension {self._module.__name__}(backend={self._backend.name}{layout})"

    def __dir__(self) -> list[str]:
        return sorted(getattr(self._module, "__all__", ()))

    def __getattr__(self, name: str) -> Any:
        if name not in getattr(self._module, "__all__", ()):
            raise AttributeError(f"the xsparse extension {self._module.__name__!r} has no attribute {name!r}")
        obj = getattr(self._module, name)
        return _bound_function(obj, self._backend, self._layout if name in self._creation else None)


@functools.lru_cache(maxsize=None)
def _extension(module_name: str, backend_name: str, layout: Any) -> BoundExtension:
    import importlib

    return BoundExtension(importlib.import_module(module_name), get_backend(backend_name), layout)


def _bound_function(obj: Any, backend: Backend, creation_layout: Any, blocks: dict[str, Any] | None = None) -> Any:
    """``obj`` with ``backend=`` bound where it takes one and, for a creation function, the default layout.

    ``creation_layout`` is the layout a creation function makes (``None`` for any other function, and in a
    namespace without a default layout): it is passed as ``layout=`` where the function takes one, and
    otherwise the strided result is converted to it. ``blocks`` (``{"blocksize": ...}`` or empty) is the
    block shape of a blocked ``creation_layout``.
    """
    blocks = blocks or {}
    if not callable(obj) or isinstance(obj, type):
        return obj
    params, var_keyword = _keyword_parameters(obj)
    bound: dict[str, Any] = {}
    if "backend" in params:
        bound["backend"] = backend
    if creation_layout is not None:
        from ._creation import from_dlpack

        if obj is from_dlpack:
            return _bind(obj, functools.partial(_from_dlpack, backend, obj, bound, creation_layout, blocks))
        if "layout" not in params:
            return _bind(obj, functools.partial(_to_layout, backend, obj, bound, creation_layout, blocks))
        if creation_layout.is_compressed:
            return _bind(obj, functools.partial(_compressed_default, backend, obj, bound, creation_layout, blocks))
        bound["layout"] = creation_layout
    if bound or var_keyword:
        return _bind(obj, functools.partial(_with_defaults, backend, obj, bound))
    return obj


def _bind(func: Any, call: Any) -> Any:
    """A function that runs ``call`` and shows ``func``'s name, docstring and signature."""

    # A plain function (not the partial itself): ``inspect.signature`` follows ``__wrapped__`` to
    # ``func``, so signature checks (the Array API test suite's) see the public parameters.
    def bound(*args: Any, **kwargs: Any) -> Any:
        return call(*args, **kwargs)

    return functools.update_wrapper(bound, func)


def _keyword_parameters(func: Any) -> tuple[frozenset[str], bool]:
    """The keyword-only parameters of ``func``, and whether it takes ``**kwargs``."""
    # Only keyword-only parameters are bound: ``to_backend(x, backend, /)`` names its target, not the
    # backend of its input, and a positional parameter would clash with the caller's arguments.
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return frozenset(), False
    keyword_only = frozenset(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)
    return keyword_only, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _with_defaults(backend: Backend, func: Any, defaults: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    # The namespace's backend is also the default backend during the call, so that lists and scalars go
    # to it where a function takes ``backend=`` only through ``**kwargs`` (``sparse_csr_array``).
    if "layout" in defaults and _kept_as_it_is(args, kwargs):
        defaults = {k: v for k, v in defaults.items() if k != "layout"}
    with default_backend(backend):
        return func(*args, **{**defaults, **kwargs})


def _kept_as_it_is(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a creation call on a sparse array with ``copy=False`` and no ``layout=`` keeps the array's
    layout instead of the namespace's default: a conversion copies, which copy=False forbids, and the
    namespace's layout is only a default (operations in the namespace give other layouts too, and taking
    their results back with ``asarray(x, copy=False)`` or ``from_dlpack`` must not fail)."""
    from .formats import SparseArray

    return kwargs.get("copy") is False and "layout" not in kwargs and bool(args) and isinstance(args[0], SparseArray)


def _to_layout(backend: Backend, func: Any, defaults: dict[str, Any], layout: Any, blocks: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """Call a creation function that has no ``layout=`` and convert its strided result(s) to ``layout`` (with
    the block shape ``blocks``, ``{"blocksize": ...}`` or empty)."""
    from .formats import SparseArray

    result = _with_defaults(backend, func, defaults, *args, **kwargs)

    def convert(x: Any) -> Any:
        return x if isinstance(x, SparseArray) else _convert(x, layout, blocks)

    # ``meshgrid`` returns a list (or tuple) of arrays; everything else returns one array.
    return type(result)(convert(x) for x in result) if isinstance(result, (list, tuple)) else convert(result)


def _from_dlpack(backend: Backend, func: Any, defaults: dict[str, Any], layout: Any, blocks: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """``from_dlpack`` in a namespace whose default is ``layout``: its result in the layout the namespace's
    ``asarray`` gives the same array. A sparse array of another layout is converted too, as ``asarray``
    converts it, except with ``copy=False`` (:func:`_kept_as_it_is`)."""
    from ._conversion import to_sparse
    from .formats import SparseArray

    result = _with_defaults(backend, func, defaults, *args, **kwargs)
    if not isinstance(result, SparseArray):
        return _convert(result, layout, blocks)

    def make(target: Any, changed: bool) -> Any:
        if target is result.layout and (changed or not blocks or getattr(result, "blocksize", None) == blocks["blocksize"]):
            return result
        if _kept_as_it_is((result,), kwargs):
            return result
        return to_sparse(result, layout=target, **_without_blocks(blocks, changed))

    return _made_in(layout, result.ndim, make)


def _layout_for(layout: Any, ndim: int) -> Any:
    """The layout a namespace whose default is ``layout`` gives a created array of ``ndim`` dimensions:
    a compressed layout holds 2 or more, so fewer are COO (the layout that holds every ndim)."""
    from .formats import sparse_coo

    return sparse_coo if layout.is_compressed and ndim < 2 else layout


def _made_in(layout: Any, ndim: int, make: Callable[[Any, bool], Any]) -> Any:
    """``make(target, changed)``: an array of ``ndim`` dimensions made in the layout a namespace whose
    default is ``layout`` gives it (``changed`` when that is not ``layout``: a COO array has no blocks),
    and in COO where a compressed layout refuses batches of unequal numbers of specified elements
    (invariant 3.9), which only COO holds."""
    from ._errors import InvariantError
    from .formats import sparse_coo

    target = _layout_for(layout, ndim)
    try:
        return make(target, target is not layout)
    except InvariantError as exc:
        if target is not layout or not layout.is_compressed or exc.invariant != "3.9":
            raise
        return make(sparse_coo, True)


def _without_blocks(kwargs: dict[str, Any], changed: bool) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k != "blocksize"} if changed else kwargs


def _convert(x: Any, layout: Any, extra: dict[str, Any]) -> Any:
    """The strided ``x`` converted to the layout a namespace whose default is ``layout`` gives it."""
    from ._conversion import to_sparse

    return _made_in(layout, x.ndim, lambda target, changed: to_sparse(x, layout=target, **_without_blocks(extra, changed)))


def _shape_ndim(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    """The ndim of the ``shape`` argument (an int or a sequence), or None where it is neither (the
    function's own argument check then raises)."""
    shape: Any = args[0] if args else kwargs.get("shape")
    if hasattr(shape, "__index__"):
        return 1
    return len(shape) if hasattr(shape, "__len__") else None


# The ndim of the result of the creation functions with a ``layout=`` parameter whose ndim follows from
# their arguments, before anything is made; ``asarray`` and ``to_sparse`` of an array have the array's, and
# ``asarray`` of a scalar or a sequence is converted first.
def _one(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    return 1


def _two(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    return 2


_RESULT_NDIM: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], int | None]] = {
    "zeros": _shape_ndim, "ones": _shape_ndim, "empty": _shape_ndim, "full": _shape_ndim,
    "arange": _one, "linspace": _one, "eye": _two,
}  # fmt: skip


def _compressed_default(
    backend: Backend, func: Any, defaults: dict[str, Any], layout: Any, blocks: dict[str, Any], /, *args: Any, **kwargs: Any
) -> Any:
    """Call a creation function that takes ``layout=`` in a namespace whose default layout is compressed
    (with the block shape ``blocks``, ``{"blocksize": ...}`` or empty): an array of 2 or more dimensions
    gets that layout, one of fewer is COO, and so is a batched array whose batches hold different numbers
    of specified elements (invariant 3.9)."""
    from .formats import SparseArray

    if "layout" in kwargs or _kept_as_it_is(args, kwargs):
        return _with_defaults(backend, func, defaults, *args, **kwargs)
    first: Any = args[0] if args else None
    result_ndim = _RESULT_NDIM.get(func.__name__)
    ndim = result_ndim(args, kwargs) if result_ndim is not None else getattr(first, "ndim", None)
    if ndim is not None:
        return _made_in(
            layout, ndim,
            lambda target, changed: _with_defaults(
                backend, func, _without_blocks({**defaults, **blocks, "layout": target}, changed), *args, **_without_blocks(kwargs, changed)
            ),
        )  # fmt: skip
    # asarray of a scalar, a sequence or a buffer: made strided, then converted as it would have been
    extra = {**blocks, **{k: kwargs.pop(k) for k in ("blocksize", "fill_value") if kwargs.get(k) is not None}}
    x = _with_defaults(backend, func, defaults, *args, **kwargs)
    return x if isinstance(x, SparseArray) else _convert(x, layout, extra)


# the versions of the standard whose functions xsparse has (each is a superset of the one before)
_API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")


@functools.lru_cache(maxsize=None)
def _cached(backend_name: str, layout: Any, api_version: str | None, blocksize: tuple[int, int] | None) -> BoundNamespace:
    return BoundNamespace(get_backend(backend_name), layout, api_version, blocksize)


def bound_namespace(
    backend: Backend | str, *, layout: Any = None, api_version: str | None = None, blocksize: tuple[int, int] | None = None
) -> BoundNamespace:
    """The xsparse namespace bound to ``backend`` (and, optionally, defaulting to a sparse ``layout``).

    Parameters
    ----------
    backend
        The backend (or its name) whose arrays the namespace's creation functions make.
    layout
        The layout of the arrays its creation functions (``asarray``, ``zeros``, ``full``, ``arange``,
        ``linspace``, ``eye``, ``meshgrid``, ...) make when no ``layout=`` is passed; ``None`` keeps
        them strided. ``xs.sparse_coo`` makes every array sparse, whatever its ndim (0-d included). A
        compressed layout holds 2 or more dimensions with as many specified elements in every batch:
        the arrays it cannot hold (0-d, 1-d, batches of unequal counts) are made COO instead.
    blocksize
        The block shape of a ``sparse_bsr`` or ``sparse_bsc`` default layout, passed to the creation
        functions that make a blocked array (a call's own ``blocksize=`` wins). Without it every such
        call must pass one, which Array API code cannot. A created array whose sparse sizes it does not
        divide raises, as ``to_sparse`` does.
    api_version
        The value of ``__array_api_version__``: one of ``"2021.12"``, ``"2022.12"``, ``"2023.12"`` and
        ``"2024.12"`` (the default); any other raises ``ValueError``, as the standard asks.

    Examples
    --------
    >>> import xsparse as xs
    >>> xp = xs.bound_namespace("numpy", layout=xs.sparse_csr)
    >>> xp.zeros((3, 4)).layout
    xsparse.sparse_csr
    >>> xp.zeros(3).layout  # 1-d: COO
    xsparse.sparse_coo
    >>> sp = xs.bound_namespace("numpy", layout=xs.sparse_coo)
    >>> x = sp.asarray(2.5)
    >>> x.layout, x.shape, float(x)
    (xsparse.sparse_coo, (), 2.5)
    """
    if api_version is not None and api_version not in _API_VERSIONS:
        raise ValueError(
            f"bound_namespace: xsparse implements the Array API versions {', '.join(_API_VERSIONS)}, not {api_version!r} "
            f"(api_version={api_version!r}). Pass one of them, or None for {_API_VERSIONS[-1]}."
        )
    if layout is strided:
        layout = None
    elif layout is not None and not (isinstance(layout, Layout) and (layout is sparse_coo or layout.is_compressed)):
        raise LayoutError(
            f"bound_namespace: the creation functions make strided, COO or compressed arrays, so layout must be one of "
            f"None, strided, sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc (layout={layout!r}). Pass one of "
            "them, e.g. xsparse.sparse_coo."
        )
    if blocksize is not None and not (layout is not None and layout.is_blocked):
        raise ValueError(
            f"bound_namespace: blocksize is the block shape of a sparse_bsr or sparse_bsc default layout (layout={layout}, "
            f"blocksize={blocksize}). Leave blocksize out, or pass layout=xsparse.sparse_bsr or xsparse.sparse_bsc."
        )
    bs = None if blocksize is None else blocksize_argument("bound_namespace", blocksize)
    name = backend.name if isinstance(backend, Backend) else get_backend(backend).name
    return _cached(name, layout, api_version, bs)
