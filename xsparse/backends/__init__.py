"""The backend registry: which array library owns an array, and how to reach its namespace.

A backend is an Array API library (NumPy, torch, CuPy, array-api-strict, or any other namespace that
array-api-compat recognises). Nothing here imports a library the user has not imported: detection goes
through :func:`array_api_compat.array_namespace`, which inspects the array's type, and a backend's
native kernel module is imported the first time an array of that backend reaches the dispatcher.

Third-party backends register through the ``xsparse.backends`` entry-point group: each entry point loads
a :class:`Backend` instance.
"""

from __future__ import annotations

import contextvars
import importlib
import importlib.util
import sys
import threading
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import array_api_compat

from .._scoped import Scope, ScopeEntry, ignoring_warnings

__all__ = [
    "Backend",
    "get_backend",
    "backend_of_array",
    "registered_backends",
    "default_backend",
    "set_default_backend",
    "get_default_backend",
    "release_cached_memory",
]


def _compat(module: str) -> Callable[[], Any]:
    imported: list[Any] = []

    def namespace() -> Any:
        # Memoised once imported: import_module's own lookup costs tens of microseconds per operation. Not
        # read from sys.modules, where a module appears before its body has run: import_module waits for an
        # import that another thread has under way.
        if not imported:
            imported.append(importlib.import_module(module))
        return imported[0]

    return namespace


def _info_devices(xp: Any) -> list[Any]:
    return list(xp.__array_namespace_info__().devices())


def _numpy_repeat(x: Any, counts: Any, total: int) -> Any:
    import numpy as np

    return np.repeat(x, counts)


def _torch_repeat(x: Any, counts: Any, total: int) -> Any:
    import torch

    # output_size spares a CUDA device a synchronisation to learn the result's length; torch then trusts
    # the counts, and counts of an array built without the index checks would write out of bounds. On the
    # CPU the length costs nothing, and torch checks the counts itself.
    if x.device.type == "cpu":
        return torch.repeat_interleave(x, counts)
    return torch.repeat_interleave(x, counts, output_size=total)


def _numpy_canonical(compressed: Any, plain: Any, n_plain: int) -> bool:
    from . import _cpu

    # the compiled passes where the extension is built; else False, and the validator checks on its own
    return _cpu.unavailable_reason() is None and _cpu.compressed_canonical(compressed, plain, n_plain)


def _numpy_extrema(xp: Any, x: Any) -> tuple[int, int]:
    # the array's own methods: half the cost of the namespace's wrapped functions on a small array
    return int(x.min()), int(x.max())


def _torch_extrema(xp: Any, x: Any) -> tuple[int, int]:
    import torch

    # both in one pass, and one copy to the host (one wait for a CUDA device, where two reads wait twice)
    lo, hi = torch.stack(torch.aminmax(x)).tolist()
    return int(lo), int(hi)


def _cupy_extrema(xp: Any, x: Any) -> tuple[int, int]:
    # one copy to the host (one wait for the device) for both
    lo, hi = xp.stack((xp.min(x), xp.max(x))).get().tolist()
    return int(lo), int(hi)


def _generic_extrema(xp: Any, x: Any) -> tuple[int, int]:
    return int(xp.min(x)), int(xp.max(x))


def _torch_devices(xp: Any) -> list[Any]:
    import torch

    cuda = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return [torch.device("cpu"), *cuda]


@dataclass(frozen=True, eq=False)
class Backend:
    """An array library that can own the components of xsparse arrays.

    Parameters
    ----------
    name
        The name users pass to ``backend=`` and :func:`xsparse.to_backend` (``"numpy"``, ``"torch"``).
    library
        The top-level module of the library; the backend is *available* when it can be imported.
    namespace_loader
        Returns the library's Array API namespace (its array-api-compat wrapper where it needs one).
    kernels
        The module that registers the backend's native kernels, imported on first use; ``None`` for a
        backend that runs on the generic kernels alone.
    devices_of
        Lists the devices the backend can place arrays on, given its namespace.
    contiguity
        Tells whether an array is C-contiguous, or ``None`` where the library has no such notion.
    repeat
        ``repeat(x, counts, total)``: each element of the 1-D ``x`` repeated by the matching element of
        ``counts`` (``total`` elements in all), where the library has a primitive that takes an array of
        counts; ``None`` otherwise (the index arithmetic then uses a binary search, which the Array API
        has everywhere).
    extrema
        ``extrema(xp, x)``: the smallest and the largest element of the non-empty integer array ``x``, as
        Python integers (every index array's bounds check asks).
    canonical
        ``canonical(compressed, plain, n_plain)``: True where compressed indices are known to hold
        invariants 5.1-5.6 by a faster check of the library's (the validator then skips its own), False
        where they may not (the validator's checks then run and name what fails); ``None`` where the
        library has no such check.
    integer_matmul
        ``integer_matmul(x)``: whether the library's ``matmul`` multiplies integer arrays on the device of
        ``x`` (torch's has no integer kernels on CUDA: the generic kernels then sum the products).
    """

    name: str
    library: str
    namespace_loader: Callable[[], Any] = field(repr=False)
    kernels: str | None = None
    devices_of: Callable[[Any], list[Any]] = field(default=_info_devices, repr=False)
    contiguity: Callable[[Any], bool | None] = field(default=lambda x: None, repr=False)
    repeat: Callable[[Any, Any, int], Any] | None = field(default=None, repr=False)
    extrema: Callable[[Any, Any], tuple[int, int]] = field(default=_generic_extrema, repr=False)
    canonical: Callable[[Any, Any, int], bool] | None = field(default=None, repr=False)
    integer_matmul: Callable[[Any], bool] = field(default=lambda x: True, repr=False)

    def is_available(self) -> bool:
        """Whether the library can be imported here."""
        return self.library in sys.modules or importlib.util.find_spec(self.library) is not None

    def namespace(self) -> Any:
        """The Array API namespace of the library (importing it); ImportError naming the backend where the
        library is not installed."""
        try:
            return self.namespace_loader()
        except ImportError as exc:
            if self.is_available():
                raise
            raise ImportError(
                f"backend {self.name!r} is not installed: its library {self.library!r} cannot be imported ({exc}). "
                f"Install {self.library}, or use an installed backend ({', '.join(b.name for b in registered_backends() if b.is_available())})."
            ) from exc

    def load(self) -> Any:
        """Import the backend's native kernels (once) and return its namespace.

        Returns only once the kernel module has finished registering its kernels: a thread that arrives
        while another imports it waits.
        """
        xp = self.namespace()
        if self.kernels is not None and self.kernels not in _KERNELS_LOADED:
            _import_kernels(self.kernels)
        return xp

    def is_contiguous(self, x: Any) -> bool | None:
        """Whether ``x`` is C-contiguous; ``None`` where the library has no such notion."""
        return self.contiguity(x)

    def devices(self) -> list[Any]:
        """The devices arrays of this backend can live on."""
        return self.devices_of(self.namespace())


# The kernel modules whose import has finished, and a lock per module for importing it. "In sys.modules" is no
# such test: Python puts a module there before running its body, so a thread that arrived while another
# imported the kernels (half a second for NumPy's) would dispatch on a half-filled registry, the generic
# kernels in place of the native ones. Once a module is in the set, load() takes no lock.
_KERNELS_LOADED: set[str] = set()
_KERNELS_IMPORTING: set[str] = set()
_KERNELS_LOCKS: dict[str, threading.RLock] = {}
_KERNELS_LOCKS_LOCK = threading.Lock()


def _import_kernels(module: str) -> None:
    with _KERNELS_LOCKS_LOCK:
        lock = _KERNELS_LOCKS.setdefault(module, threading.RLock())
    with lock:
        # the thread holding the lock finds its own module here only when that module's body reached
        # load() again: as for a circular import, it goes on with what is registered so far
        if module in _KERNELS_LOADED or module in _KERNELS_IMPORTING:
            return
        _KERNELS_IMPORTING.add(module)
        try:
            importlib.import_module(module)
        finally:
            _KERNELS_IMPORTING.discard(module)
        _KERNELS_LOADED.add(module)


def _strict_contiguity(x: Any) -> bool | None:
    # array-api-strict has no public notion of memory layout, but its arrays wrap NumPy arrays, whose
    # strides (a broadcast's zeros, a flip's negatives) DLPack hands on to the library an array moves to
    flags = getattr(getattr(x, "_array", None), "flags", None)
    return None if flags is None else bool(flags.c_contiguous)


_BUILTIN = {
    b.name: b
    for b in (
        Backend(
            "numpy", "numpy", _compat("array_api_compat.numpy"), "xsparse.backends.numpy",
            contiguity=lambda x: bool(x.flags.c_contiguous), repeat=_numpy_repeat, extrema=_numpy_extrema,
            canonical=_numpy_canonical,
        ),
        Backend(
            "torch", "torch", _compat("array_api_compat.torch"), "xsparse.backends.torch", _torch_devices,
            contiguity=lambda x: bool(x.is_contiguous()), repeat=_torch_repeat, extrema=_torch_extrema,
            # cuBLAS has no integer GEMM, and torch's CUDA matmul no integer kernel ("addmm_cuda" not
            # implemented for 'Long')
            integer_matmul=lambda x: x.device.type != "cuda",
        ),
        Backend(
            "cupy", "cupy", _compat("array_api_compat.cupy"), "xsparse.backends.cupy",
            contiguity=lambda x: bool(x.flags.c_contiguous), extrema=_cupy_extrema,
        ),
        Backend("array_api_strict", "array_api_strict", _compat("array_api_strict"), contiguity=_strict_contiguity),
    )
}
_DETECT: list[tuple[Callable[[Any], bool], str]] = [
    (array_api_compat.is_numpy_namespace, "numpy"),
    (array_api_compat.is_torch_namespace, "torch"),
    (array_api_compat.is_cupy_namespace, "cupy"),
    (array_api_compat.is_array_api_strict_namespace, "array_api_strict"),
]
_EXTRA: dict[str, Backend] = {}
# The entry points are loaded once, under a lock, and marked loaded only after the last: a thread that
# asks for a plug-in while another loads them waits for it rather than finding it unknown. Each entry
# point loads on its own, so a broken one (its library missing) costs only its own backend: it is
# recorded here, by entry point name, with the reason, and warned about once.
_entry_points_loaded = False
_entry_points_loading = False
_ENTRY_POINTS_LOCK = threading.RLock()
_FAILED: dict[str, str] = {}


def _load_entry_points() -> None:
    global _entry_points_loaded, _entry_points_loading
    if _entry_points_loaded:
        return
    with _ENTRY_POINTS_LOCK:
        # _entry_points_loading: an entry point's own import looked a backend up (the lock is reentrant)
        if _entry_points_loaded or _entry_points_loading:
            return
        _entry_points_loading = True
        failed: dict[str, str] = {}
        try:
            for ep in entry_points(group="xsparse.backends"):
                try:
                    backend = _load_entry_point(ep)
                except Exception as exc:  # any error of a plug-in's import is that plug-in's alone
                    failed[ep.name] = f"failed to load (entry point '{ep.name} = {ep.value}' raised {type(exc).__name__}: {str(exc).rstrip('.')})"
                    continue
                refused = _refusal(backend)
                if refused:
                    failed[backend.name if backend.name not in _BUILTIN else ep.name] = f"is refused (entry point '{ep.name} = {ep.value}': {refused})"
                    continue
                _EXTRA[backend.name] = backend
            _FAILED.update(failed)
            _entry_points_loaded = True
        finally:
            _entry_points_loading = False
    # warned after the registry is complete: a warning turned into an error must not leave it half-loaded
    for name, why in failed.items():
        warnings.warn(
            f"xsparse.backends: the plug-in backend {name!r} {why}. The other backends work; fix or "
            f"uninstall the package that provides the entry point to use {name!r}.",
            RuntimeWarning,
            stacklevel=2,
        )


def _refusal(backend: Backend) -> str | None:
    """Why a plug-in ``backend`` cannot be registered, or None.

    Arrays go to a backend by their library, and those of the built-in backends' libraries always to the
    built-in ones: a plug-in for one of them would own sparse arrays that no dense array of its library could
    meet (every mixed call a BackendMismatchError), and the conformance suite, which builds its inputs from
    that library's arrays, would test the built-in backend in its name. Its kernels belong to the built-in
    backend instead (``register(..., backend="numpy")``).
    """
    if backend.name in _BUILTIN or backend.name in _EXTRA:
        return f"the name {backend.name!r} is taken by another backend; give the plug-in a name of its own"
    builtin = next((b.name for b in _BUILTIN.values() if b.library == backend.library), None)
    if builtin is not None:
        return (
            f"its library {backend.library!r} is that of the built-in backend {builtin!r}, whose arrays always go to it; "
            f"register the plug-in's kernels for that backend instead (register(..., backend={builtin!r}))"
        )
    return None


def _load_entry_point(ep: Any) -> Backend:
    backend = ep.load()
    if callable(backend) and not isinstance(backend, Backend):
        backend = backend()
    if not isinstance(backend, Backend):
        raise TypeError(
            f"xsparse.backends entry point '{ep.name}' loaded {type(backend).__name__}, not an "
            "xsparse.backends.Backend. Make the entry point name a Backend instance or a function returning one."
        )
    return backend


def registered_backends() -> list[Backend]:
    """Every backend xsparse knows: the built-in ones and those of installed entry points."""
    _load_entry_points()
    return [*_BUILTIN.values(), *_EXTRA.values()]


def get_backend(name: str | Backend) -> Backend:
    """The backend called ``name``; raises ValueError naming the known ones when there is none."""
    return _find_backend("get_backend", name)


def _find_backend(op: str, name: Any) -> Backend:
    if isinstance(name, Backend):
        return name
    if not isinstance(name, str):
        fix = f"Pass its name, {name.__name__!r}" if isinstance(name, types.ModuleType) else "Pass a name such as 'numpy'"
        raise TypeError(
            f"{op}: a backend is given by its name (a str) or as an xsparse.backends.Backend, got {type(name).__name__} "
            f"(backend={name!r}). {fix}."
        )
    if name in _BUILTIN:
        return _BUILTIN[name]
    _load_entry_points()
    if name in _EXTRA:
        return _EXTRA[name]
    if name in _FAILED:
        raise ImportError(
            f"{op}: the plug-in backend {name!r} {_FAILED[name]}. Fix or uninstall the package that "
            "provides the entry point, or use another backend."
        )
    namespace = _array_api_module(name)
    if namespace is not None:
        _refuse_namespace(op, namespace, name)
        # any Array API library, by the name of its namespace module (jax.numpy): the generic backend
        return backend_of_array(namespace.asarray(0))
    known = ", ".join(repr(b.name) for b in registered_backends())
    raise ValueError(
        f"{op}: unknown backend (backend={name!r}). Known backends: {known}; any module that is an Array API "
        "namespace (jax.numpy) works by its name too (import it first, unless array-api-compat knows the "
        "library), and a third-party backend registers through the 'xsparse.backends' entry-point group."
    )


# The namespaces of the libraries array-api-compat knows, recognised by their module name alone.
_KNOWN_NAMESPACES: tuple[Callable[[Any], bool], ...] = (
    array_api_compat.is_numpy_namespace,
    array_api_compat.is_torch_namespace,
    array_api_compat.is_cupy_namespace,
    array_api_compat.is_array_api_strict_namespace,
    array_api_compat.is_jax_namespace,
    array_api_compat.is_dask_namespace,
    array_api_compat.is_ndonnx_namespace,
)
# pydata/sparse is an Array API namespace whose arrays are sparse arrays of another library: as a backend
# its arrays would become the components of xsparse arrays (a sparse array as the values of one). It is
# refused as a backend; xsparse.asarray converts its arrays instead.
_REFUSED_NAMESPACES: tuple[Callable[[Any], bool], ...] = (array_api_compat.is_pydata_sparse_namespace,)


def _refuse_namespace(op: str, xp: Any, name: Any) -> None:
    if any(is_it(xp) for is_it in _REFUSED_NAMESPACES):
        raise TypeError(
            f"{op}: {xp.__name__!r} is a library of sparse arrays, not a backend of strided arrays (backend={name!r}). "
            "Use a backend such as 'numpy', and convert its arrays with xsparse.asarray(s), which keeps them sparse."
        )


def _array_api_module(name: str) -> Any:
    """The module called ``name`` where it is an Array API namespace (it declares ``__array_api_version__``),
    else None.

    A name is imported only where array-api-compat knows it as a namespace (``jax.numpy``); any other module
    must have been imported already. Importing runs a module's code, and a backend name is no reason to run
    the code of whatever module is called that (``this`` prints a poem, ``antigravity`` opens a browser).
    """
    if not name or not all(part.isidentifier() for part in name.split(".")):
        return None
    module = sys.modules.get(name)
    if module is None:
        if not any(is_it(types.ModuleType(name)) for is_it in _KNOWN_NAMESPACES):
            return None
        try:
            module = importlib.import_module(name)
        except ImportError:
            return None
    return module if hasattr(module, "__array_api_version__") and hasattr(module, "asarray") else None


def backend_of_array(x: Any) -> Backend:
    """The backend that owns the (strided) array ``x``.

    A namespace that is none of the built-in ones becomes a generic backend named after its module, so
    any Array API library works on the generic kernels.
    """
    xp = array_api_compat.array_namespace(x)
    for is_it, name in _DETECT:
        if is_it(xp):
            return _BUILTIN[name]
    _refuse_namespace("backend_of_array", xp, xp.__name__)
    # a plug-in backend for this library wins over the generic one made up below
    _load_entry_points()
    for backend in _EXTRA.values():
        if backend.library == xp.__name__.split(".")[0]:
            return backend
    name = xp.__name__
    if name not in _EXTRA:
        _require_int64(xp, name)
    backend = Backend(name, name.split(".")[0], lambda: xp)
    _EXTRA.setdefault(name, backend)
    return _EXTRA[name]


def _require_int64(xp: Any, name: str) -> None:
    """Raise where the namespace makes another dtype when int64 is asked (JAX without its 64-bit mode): the
    generic kernels compute positions and sort keys in int64, which would silently wrap around."""
    if not (hasattr(xp, "asarray") and hasattr(xp, "int64")):
        return  # no namespace to compute with: its first operation says so
    # JAX warns that it gives int32 instead, which is what is asked here
    with ignoring_warnings(Warning):
        got = xp.asarray(0, dtype=xp.int64).dtype
    if got != xp.int64:
        hint = " (JAX without 64-bit mode: call jax.config.update('jax_enable_x64', True) at start-up, or set JAX_ENABLE_X64=1)"
        raise TypeError(
            f"backend {name!r}: xsparse computes indices in int64, and this library gives {got} where int64 is asked"
            f"{hint if name.split('.')[0] == 'jax' else ''}. Enable its 64-bit integers first."
        )


# The default backend of this context: the entries of the enclosing default_backend scopes, innermost
# last, below them the one set_default_backend set (owned by no scope). The stack holds the Backend
# objects themselves, so a lookup is no search of the registry.
_default: contextvars.ContextVar[tuple[ScopeEntry, ...]] = contextvars.ContextVar("xsparse_default_backend", default=())


def get_default_backend() -> Backend:
    """The backend that Python scalars and lists go to (NumPy unless changed in this context)."""
    stack = _default.get()
    backend: Backend = stack[-1].value if stack else _BUILTIN["numpy"]
    return backend


def _is_registered(backend: Backend) -> bool:
    if _BUILTIN.get(backend.name) is backend:
        return True
    _load_entry_points()
    return _EXTRA.get(backend.name) is backend


def _registered(op: str, name: Any) -> Backend:
    """The backend ``name`` gives, where it is a registered one: arrays and namespaces name their backend,
    and the name of an unregistered Backend finds another backend, or none."""
    backend = _find_backend(op, name)
    if not backend.is_available():
        raise ImportError(
            f"{op}: backend {backend.name!r} is not installed: its library {backend.library!r} cannot be imported "
            f"(backend={backend.name!r}). Install {backend.library}, or pick an installed backend."
        )
    if backend is name and not _is_registered(backend):
        raise ValueError(
            f"{op}: the backend is not registered: its name finds another backend, or none (backend={backend!r}). "
            "Register it through the 'xsparse.backends' entry-point group (see docs/backends.md), or pass the name "
            "of a registered backend."
        )
    return backend


def set_default_backend(name: str | Backend) -> None:
    """Set the default backend for the current thread / context (see :func:`default_backend`).

    Inside a ``with default_backend(...)`` block, the setting lasts until the block ends.
    """
    backend = _registered("set_default_backend", name)
    stack = _default.get()
    if stack:
        # a new entry (never one changed in place: a task or context copied from this one shares the entries)
        top = stack[-1]
        _default.set((*stack[:-1], ScopeEntry(top.owner, backend, top.token)))
    else:
        _default.set((ScopeEntry(None, backend),))


class default_backend(Scope):
    """Context manager and decorator that makes ``name`` the default backend inside its scope.

    ``name`` is the name of a backend (or a registered :class:`Backend`). The setting lives in a
    :class:`contextvars.ContextVar`, like :class:`~xsparse.check_sparse_tensor_invariants`: it belongs to
    the current thread (and asyncio task), nests, and each scope restores its own entry on exit. As a
    decorator it applies while the function's body runs (for a generator function, during each resumption).

    Examples
    --------
    >>> import xsparse as xs
    >>> with xs.default_backend("array_api_strict"):
    ...     print(xs.get_default_backend().name)
    array_api_strict
    >>> xs.get_default_backend().name
    'numpy'
    """

    _var = _default
    _op = "default_backend"

    def __init__(self, name: str | Backend) -> None:
        self.backend = _registered("default_backend", name)

    def __repr__(self) -> str:
        return f"default_backend({self.backend.name!r})"

    def _value(self) -> Backend:
        return self.backend

    def __enter__(self) -> Backend:
        self._enter()
        return self.backend

    def __exit__(self, *exc: object) -> None:
        self._leave()


def release_cached_memory() -> int:
    """Give back to the system the large output buffers the NumPy backend keeps for reuse.

    Products and sums whose result is 4 MiB or more (a SpMM of many columns, the sums of a million
    columns) take its memory from the blocks that earlier results of about that size released, instead of a fresh mapping with a page fault per page.
    The pool holds at most four blocks and an eighth of the machine's memory; this empties it (as
    ``torch.cuda.empty_cache`` does for torch's CUDA allocator).

    Returns
    -------
    int
        The number of bytes freed; 0 when nothing was held (or the compiled kernels were never used).

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.backends.release_cached_memory() >= 0
    True
    """
    if "xsparse.backends._cpu" not in sys.modules:
        return 0
    return int(sys.modules["xsparse.backends._cpu"].release_cached_memory())
