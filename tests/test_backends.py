"""The backend registry: detection, lazy imports, the default backend, moving arrays, plug-ins."""

from __future__ import annotations

import contextvars
import importlib.metadata
import math
import re
import subprocess
import sys
import threading
import types
import warnings
from typing import Any

import array_api_compat
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xsparse as xs
import xsparse.backends
from xsparse.backends import Backend, backend_of_array
from xsparse.testing import check_invariants, to_numpy

torch = pytest.importorskip("torch")
strict = pytest.importorskip("array_api_strict")

CPU_BACKENDS = ["numpy", "torch", "array_api_strict"]
DTYPES = ["bool", "int32", "int64", "float32", "float64", "complex64", "complex128"]


def _ns(name: str) -> Any:
    return xs.get_backend(name).namespace()


def _host(x: Any) -> np.ndarray:
    """A NumPy copy of an array of any of the backends, on any device (for comparing values)."""
    return to_numpy(x)


def _dtype_name(x: Any) -> str:
    return next(n for n in DTYPES if x.dtype == getattr(array_api_compat.array_namespace(x), n))


def _sample(name: str, dtype: str) -> Any:
    """A 4 x 6 array with zeros, on backend ``name``."""
    base = np.arange(24).reshape(4, 6) % 4
    data = (base % 2 == 1) if dtype == "bool" else base * (1 + 1j if dtype.startswith("complex") else 1)
    xp = _ns(name)
    return xp.asarray(np.asarray(data).astype(dtype), dtype=getattr(xp, dtype))


# -- detection ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: np.zeros(3), "numpy"),
        (lambda: np.zeros((2, 2), dtype=np.int32)[:, 0], "numpy"),
        (lambda: torch.zeros(3), "torch"),
        (lambda: strict.zeros(3), "array_api_strict"),
    ],
    ids=["numpy", "numpy-view", "torch", "array_api_strict"],
)
def test_detection(make: Any, name: str) -> None:
    x = make()
    backend = backend_of_array(x)
    assert backend is xs.get_backend(name)
    assert backend.name == name and backend.is_available()
    assert xs.to_sparse(x).backend == name


def test_get_backend_accepts_a_backend() -> None:
    backend = xs.get_backend("torch")
    assert xs.get_backend(backend) is backend
    assert isinstance(backend, xs.Backend) and backend.library == "torch"


def test_unknown_backend_lists_the_known_ones() -> None:
    known = ", ".join(repr(b.name) for b in xs.registered_backends())
    with pytest.raises(ValueError, match=r"get_backend: unknown backend \(backend='nope'\)\. Known backends: " + known):
        xs.get_backend("nope")
    with pytest.raises(ValueError, match="'numpy', 'torch', 'cupy', 'array_api_strict'"):
        xs.set_default_backend("nope")
    with pytest.raises(ValueError, match="unknown backend"):
        with xs.default_backend("nope"):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="unknown backend"):
        xs.to_backend(np.zeros(2), "nope")
    assert xs.get_default_backend().name == "numpy"


def test_get_backend_by_the_name_of_an_array_api_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name that is no registered backend but an importable Array API namespace (as jax.numpy) gives the
    backend of that namespace's arrays; a module that is not one, or no module, is unknown."""
    import array_api_strict

    fake = types.ModuleType("xsparse_test_namespace")
    fake.__array_api_version__ = "2024.12"  # type: ignore[attr-defined]
    fake.asarray = array_api_strict.asarray  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "xsparse_test_namespace", fake)
    assert xs.get_backend("xsparse_test_namespace") is xs.get_backend("array_api_strict")
    for name in ("json", "no_such_module_anywhere", "not a name"):
        with pytest.raises(ValueError, match=r"unknown backend .* any module that is an Array API namespace \(jax.numpy\)"):
            xs.get_backend(name)


def test_a_library_without_int64_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A namespace that gives another dtype where int64 is asked (JAX without its 64-bit mode) is refused with
    a message that says how to enable it, rather than let index arithmetic wrap around."""
    from xsparse.backends import _require_int64, backend_of_array

    narrow = types.ModuleType("xsparse_test_narrow")
    narrow.int64 = np.dtype(np.int64)  # type: ignore[attr-defined]
    narrow.asarray = lambda v, dtype=None: np.asarray(v, dtype=np.int32)  # type: ignore[attr-defined]

    class Narrow:
        shape, dtype = (), np.dtype(np.int32)

        def __array_namespace__(self, api_version: Any = None) -> Any:
            return narrow

    monkeypatch.setitem(sys.modules, "xsparse_test_narrow", narrow)
    message = r"backend 'xsparse_test_narrow': xsparse computes indices in int64, and this library gives int32 where int64 is asked"
    with pytest.raises(TypeError, match=message):
        backend_of_array(Narrow())
    with pytest.raises(TypeError, match=r"gives int32 where int64 is asked \(JAX without 64-bit mode: call jax.config.update"):
        _require_int64(narrow, "jax.numpy")


def test_a_backend_is_used_only_once_its_kernels_are_registered(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A thread that needs a backend while another imports its kernel module waits for the import to finish,
    rather than dispatch on the kernels registered so far (Python lists a module in sys.modules before its
    body runs)."""
    from xsparse import dispatch

    op, module = "xsparse_test_slow_op", "xsparse_test_slow_kernels"
    gate = types.ModuleType("xsparse_test_gate")
    gate.started, gate.release = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, gate.__name__, gate)
    monkeypatch.setitem(dispatch._REGISTRY, op, [])
    (tmp_path / f"{module}.py").write_text(
        "import xsparse_test_gate as gate\n"
        "from xsparse import dispatch\n"
        f"dispatch.register({op!r}, ('L',), backend='slowlib')(lambda xp: 'generic stand-in')\n"
        "gate.started.set()\n"
        "gate.release.wait(30)  # the rest of a long kernel module\n"
        f"dispatch.register({op!r}, ('L',), backend='slowlib', priority=1)(lambda xp: 'native')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    backend = Backend("slowlib", "numpy", lambda: np, kernels=module)
    got: dict[str, Any] = {}

    def use(who: str) -> None:
        try:
            backend.load()
            got[who] = dispatch.call(op, ("L",), "slowlib", None)
        except Exception as exc:  # compared below
            got[who] = exc

    try:
        first = threading.Thread(target=use, args=("first",))
        first.start()
        assert gate.started.wait(30)  # type: ignore[attr-defined]
        assert module in sys.modules
        second = threading.Thread(target=use, args=("second",))
        second.start()
        second.join(0.5)  # time to dispatch, if it does not wait (it used the half-filled registry at once)
        gate.release.set()  # type: ignore[attr-defined]
        first.join(30)
        second.join(30)
    finally:
        sys.modules.pop(module, None)
        getattr(xsparse.backends, "_KERNELS_LOADED", set()).discard(module)
    assert got == {"first": "native", "second": "native"}


def test_a_backend_name_imports_no_arbitrary_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A name that is no backend is imported only where array-api-compat knows it as a namespace: importing
    runs a module's code (``this`` prints a poem). A module the user imported that is no namespace is refused."""
    name = "xsparse_test_side_effect"
    (tmp_path / f"{name}.py").write_text("RAN = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = rf"unknown backend \(backend='{name}'\)\. Known backends: .*works by its name too \(import it first, unless array-api-compat knows the library\)"
    try:
        with pytest.raises(ValueError, match=r"^get_backend: " + message):
            xs.get_backend(name)
        with pytest.raises(ValueError, match=r"^set_default_backend: " + message):
            xs.set_default_backend(name)
        with pytest.raises(ValueError, match=r"^default_backend: " + message):
            with xs.default_backend(name):
                pass  # pragma: no cover
        assert name not in sys.modules
        importlib.import_module(name)
        with pytest.raises(ValueError, match=message):
            xs.get_backend(name)
    finally:
        sys.modules.pop(name, None)
    assert xs.get_default_backend().name == "numpy"


def test_import_is_lazy() -> None:
    """Importing xsparse, and using it on NumPy arrays, imports no other array library."""
    code = (
        "import sys, numpy as np, xsparse as xs\n"
        "loaded = lambda: sorted(m for m in ('torch', 'cupy', 'array_api_strict', 'jax') if m in sys.modules)\n"
        "print(loaded())\n"
        "s = xs.sparse_coo_array([[0, 1]], [1.0, 2.0]); xs.to_dense(xs.to_sparse_csr(np.eye(3))); repr(s)\n"
        "xs.kernels(); xs.registered_backends(); [b.is_available() for b in xs.registered_backends()]\n"
        "print(loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "[]"]


# -- the default backend --------------------------------------------------------------------------


def test_default_backend_is_numpy_and_lists_go_to_it() -> None:
    assert xs.get_default_backend() is xs.get_backend("numpy")
    s = xs.sparse_coo_array([[0, 2]], [1.0, 2.0], (3,))
    assert s.backend == "numpy" and isinstance(s._values(), np.ndarray)
    assert isinstance(xs.zeros((2, 3)), np.ndarray)
    # arrays keep their own backend whatever the default
    assert xs.sparse_coo_array(torch.tensor([[0, 2]]), torch.tensor([1.0, 2.0])).backend == "torch"


def test_default_backend_context_manager() -> None:
    with xs.default_backend("torch") as backend:
        assert backend is xs.get_backend("torch")
        assert xs.get_default_backend() is backend
        s = xs.sparse_csr_array([0, 1, 2], [1, 0], [5.0, 6.0])
        assert s.backend == "torch" and isinstance(s.values(), torch.Tensor)
        assert isinstance(xs.zeros((2, 3)), torch.Tensor)
        # arrays still decide over lists
        assert xs.sparse_coo_array(np.asarray([[0]]), np.asarray([1.0])).backend == "numpy"
    assert xs.get_default_backend().name == "numpy"


def test_default_backend_nesting_and_exceptions() -> None:
    with xs.default_backend("torch"):
        with xs.default_backend(xs.get_backend("array_api_strict")):
            assert xs.get_default_backend().name == "array_api_strict"
        assert xs.get_default_backend().name == "torch"
        with pytest.raises(RuntimeError, match="boom"):
            with xs.default_backend("array_api_strict"):
                raise RuntimeError("boom")
        assert xs.get_default_backend().name == "torch"
    assert xs.get_default_backend().name == "numpy"


def test_default_backend_is_per_thread() -> None:
    barrier = threading.Barrier(2, timeout=30)
    seen: dict[str, list[str]] = {"torch": [], "array_api_strict": []}
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            seen[name].append(xs.get_default_backend().name)  # a new thread starts at the default
            barrier.wait()
            with xs.default_backend(name):
                barrier.wait()  # both threads are inside their own with-block now
                seen[name].append(xs.get_default_backend().name)
                seen[name].append(xs.sparse_coo_array([[0]], [1.0]).backend)
                barrier.wait()
            seen[name].append(xs.get_default_backend().name)
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)
            barrier.abort()

    with xs.default_backend("torch"):  # the main thread's setting is not inherited by the workers
        threads = [threading.Thread(target=worker, args=(n,)) for n in seen]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert xs.get_default_backend().name == "torch"
    assert not errors, errors
    assert seen == {
        "torch": ["numpy", "torch", "torch", "numpy"],
        "array_api_strict": ["numpy", "array_api_strict", "array_api_strict", "numpy"],
    }


def test_set_default_backend_is_scoped_to_the_context() -> None:
    def body() -> tuple[str, str]:
        xs.set_default_backend("array_api_strict")
        return xs.get_default_backend().name, xs.sparse_coo_array([[0]], [1.0]).backend

    assert contextvars.copy_context().run(body) == ("array_api_strict", "array_api_strict")
    assert xs.get_default_backend().name == "numpy"

    def nested() -> str:
        xs.set_default_backend(xs.get_backend("torch"))
        with xs.default_backend("array_api_strict"):
            pass
        return xs.get_default_backend().name

    assert contextvars.copy_context().run(nested) == "torch"
    assert xs.get_default_backend().name == "numpy"


@pytest.mark.parametrize(
    ("bad", "got", "fix"),
    [
        (3, "int (backend=3)", "Pass a name such as 'numpy'"),
        (None, "NoneType (backend=None)", "Pass a name such as 'numpy'"),
        (["numpy"], "list (backend=['numpy'])", "Pass a name such as 'numpy'"),
        (np, "module (backend=<module 'numpy'", "Pass its name, 'numpy'"),
    ],
    ids=["int", "None", "list", "module"],
)
def test_default_backend_takes_a_name_or_a_backend(bad: Any, got: str, fix: str) -> None:
    for op, setting in [("set_default_backend", xs.set_default_backend), ("default_backend", xs.default_backend), ("get_backend", xs.get_backend)]:
        with pytest.raises(
            TypeError,
            match=rf"^{op}: a backend is given by its name \(a str\) or as an xsparse\.backends\.Backend, got "
            rf"{re.escape(got)}.*\. {re.escape(fix)}\.$",
        ):
            setting(bad)
    assert xs.get_default_backend().name == "numpy"


def test_default_backend_refuses_an_unregistered_backend() -> None:
    """The default is a backend that names find again: an unregistered Backend would make every lookup of the
    default fail."""
    custom = Backend("mystrict", "array_api_strict", lambda: strict)
    for op, setting in [("set_default_backend", xs.set_default_backend), ("default_backend", xs.default_backend)]:
        with pytest.raises(
            ValueError,
            match=rf"^{op}: the backend is not registered: its name finds another backend, or none \(backend=Backend\("
            r"name='mystrict', library='array_api_strict', kernels=None\)\)\. Register it through the 'xsparse\.backends' "
            r"entry-point group \(see docs/backends\.md\), or pass the name of a registered backend\.$",
        ):
            setting(custom)
        assert xs.get_default_backend().name == "numpy"
        assert xs.asarray([1.0]).dtype == np.float64
    # a registered one, as an object or by name, is fine
    with xs.default_backend(xs.get_backend("array_api_strict")) as backend:
        assert xs.get_default_backend() is backend


def test_default_backend_as_decorator() -> None:
    """As a decorator it applies while the body runs: of a generator, at each resumption only (its caller does
    not see it between items); of a coroutine, until it returns."""
    import asyncio

    def name() -> str:
        return xs.get_default_backend().name

    @xs.default_backend("array_api_strict")
    def plain() -> str:
        return name()

    @xs.default_backend("array_api_strict")
    def items() -> Any:
        yield name()
        yield name()

    @xs.default_backend("array_api_strict")
    async def coroutine() -> str:
        await asyncio.sleep(0)
        return name()

    assert plain() == "array_api_strict" and name() == "numpy"
    gen = items()
    assert next(gen) == "array_api_strict"
    assert name() == "numpy", "the caller does not see the generator's default between items"
    with xs.default_backend("torch"):
        assert list(gen) == ["array_api_strict"]
        assert name() == "torch"
    assert asyncio.run(coroutine()) == "array_api_strict"
    assert name() == "numpy"


def test_default_backend_left_out_of_order_or_in_another_context() -> None:
    """A generator that leaves its block inside one its caller opened meanwhile restores only its own entry;
    one left in another context raises (a context variable cannot be restored from another context)."""

    def on_strict() -> Any:
        with xs.default_backend("array_api_strict"):
            yield
            yield

    gen = on_strict()
    next(gen)
    with xs.default_backend("torch"):
        assert list(gen) == [None]
        assert xs.get_default_backend().name == "torch", "the caller's own block is still in force"
    assert xs.get_default_backend().name == "numpy"

    started, elsewhere = contextvars.copy_context(), contextvars.copy_context()
    gen = on_strict()
    started.run(next, gen)
    with pytest.raises(RuntimeError, match=r"^default_backend: the block is left in another context than the one that entered it .*\(scope=default_backend\('array_api_strict'\)\)\. Enter and leave"):
        elsewhere.run(list, gen)
    assert elsewhere.run(lambda: xs.get_default_backend().name) == "numpy"


# -- warnings of torch ------------------------------------------------------------------------------


def _configure_meanwhile(text: str) -> None:
    """Another thread adds a warnings filter (while this one waits for it)."""
    t = threading.Thread(target=warnings.filterwarnings, args=("error",), kwargs={"message": text})
    t.start()
    t.join()


def test_spending_torch_beta_warning_keeps_other_threads_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter that silences torch's beta warning is removed alone: catch_warnings() would put back a copy
    of the process's filter list, dropping a filter another thread added meanwhile."""
    from xsparse.backends.torch import conversion

    real = torch.sparse_compressed_tensor

    def compressed_tensor(*args: Any, **kwargs: Any) -> Any:
        _configure_meanwhile("xsparse test filter")
        warnings.warn("Sparse CSR tensor support is in beta state", UserWarning)  # what torch warns, once
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "sparse_compressed_tensor", compressed_tensor)
    with warnings.catch_warnings():  # the test's own: everything put back afterwards
        before = list(warnings.filters)
        conversion._spend_beta_warning()
        added = [f for f in warnings.filters if f not in before]
    assert [(f[0], f[1].pattern if f[1] else None) for f in added] == [("error", "xsparse test filter")]


def test_packing_semi_structured_keeps_other_threads_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    from xsparse.backends.torch import semi_structured

    class Packer:
        @staticmethod
        def from_dense(dense: Any) -> str:
            _configure_meanwhile("xsparse test filter")
            warnings.warn("The PyTorch API of SparseSemiStructuredTensor is in prototype stage", UserWarning)
            return "packed"

    monkeypatch.setattr(semi_structured, "_packer", lambda dtype, device: (Packer, None))
    with warnings.catch_warnings():
        before = list(warnings.filters)
        assert semi_structured._pack(torch.zeros(2, 2)) == "packed"
        added = [f for f in warnings.filters if f not in before]
    assert [(f[0], f[1].pattern if f[1] else None) for f in added] == [("error", "xsparse test filter")]


# -- moving arrays between backends ---------------------------------------------------------------


PAIRS = [(a, b) for a in CPU_BACKENDS for b in CPU_BACKENDS]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_to_backend_strided(src: str, dst: str, dtype: str) -> None:
    x = _sample(src, dtype)
    y = xs.to_backend(x, dst)
    assert backend_of_array(y).name == dst
    assert y.dtype == getattr(_ns(dst), dtype)
    assert tuple(y.shape) == tuple(x.shape)
    np.testing.assert_array_equal(_host(y), _host(x))


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_to_backend_sparse(src: str, dst: str, layout: xs.Layout) -> None:
    kwargs: dict[str, Any] = {"blocksize": (2, 3)} if layout.is_blocked else {}
    for dtype in ("bool", "int32", "float32", "complex128"):
        for index_dtype in ("int32", "int64"):
            s = xs.to_sparse(_sample(src, dtype), layout=layout, index_dtype=index_dtype, **kwargs)
            t = xs.to_backend(s, dst)
            assert type(t) is type(s) and t.backend == dst
            assert (t.layout, t.shape, t.nnz, t.fill_value) == (s.layout, s.shape, s.nnz, s.fill_value)
            assert t.dtype == getattr(_ns(dst), dtype)
            assert t.index_dtype == getattr(_ns(dst), index_dtype)
            assert t.is_coalesced() == s.is_coalesced()
            if layout.is_compressed:
                assert t.blocksize == s.blocksize
            for (name, a), (name_t, b) in zip(s._components().items(), t._components().items()):
                assert name == name_t
                assert backend_of_array(b).name == dst
                np.testing.assert_array_equal(_host(b), _host(a))
            np.testing.assert_array_equal(_host(xs.to_dense(t)), _host(xs.to_dense(s)))


def test_to_backend_keeps_the_fill_value() -> None:
    s = xs.sparse_coo_array([[0, 2]], [1.0, 2.0], (4,), fill_value=-1.5)
    t = xs.to_backend(s, "array_api_strict")
    assert t.fill_value == -1.5
    np.testing.assert_array_equal(_host(xs.to_dense(t)), [1.0, -1.5, 2.0, -1.5])


@pytest.mark.parametrize("dst", CPU_BACKENDS)
def test_views_of_array_api_strict_components_move(dst: str) -> None:
    # a broadcast (stride 0) or flipped (negative strides) component of an array_api_strict array goes
    # through DLPack with its strides; the moved array's components must be contiguous (invariants 3.5-3.7)
    s = xs.to_backend(xs.to_sparse(np.array([[1, 0], [0, 2], [3, 0]], dtype=np.int32), layout=xs.sparse_csr), "array_api_strict")
    b = xs.to_backend(xs.to_sparse(np.arange(16.0).reshape(4, 4), layout=xs.sparse_bsr, blocksize=(2, 2)), "array_api_strict")
    for view in (xs.broadcast_to(s, (2, 3, 2)), xs.flip(b, axis=1), xs.flip(b, axis=None)):
        moved = xs.to_backend(view, dst)
        check_invariants(moved)
        np.testing.assert_array_equal(_host(xs.to_dense(moved)), _host(xs.to_dense(view)))


def test_to_backend_same_backend_is_the_same_data() -> None:
    x = np.arange(3.0)
    assert xs.to_backend(x, "numpy") is x
    s = xs.to_sparse_csr(np.eye(3))
    assert xs.to_backend(s, "numpy").values() is s.values()


def test_to_backend_numpy_torch_is_zero_copy() -> None:
    x = np.arange(6.0).reshape(2, 3)
    t = xs.to_backend(x, "torch")
    assert t.data_ptr() == x.ctypes.data
    back = xs.to_backend(t, "numpy")
    assert np.shares_memory(back, x)

    s = xs.to_sparse_csr(np.asarray([[0.0, 1.0], [2.0, 0.0]]), index_dtype="int32")
    st = xs.to_backend(s, "torch")
    for a, b in zip(s._components().values(), st._components().values()):
        assert b.data_ptr() == a.ctypes.data
    sn = xs.to_backend(st, "numpy")
    for a, b in zip(s._components().values(), sn._components().values()):
        assert np.shares_memory(a, b)

    c = xs.to_sparse_coo(torch.tensor([[0.0, 1.0], [2.0, 0.0]]))
    cn = xs.to_backend(c, "numpy")
    assert cn._indices().ctypes.data == c._indices().data_ptr()
    assert cn._values().ctypes.data == c._values().data_ptr()


def test_to_backend_device() -> None:
    x = np.arange(3.0)
    t = xs.to_backend(x, "torch", device="cpu")
    assert t.device == torch.device("cpu")
    assert xs.to_backend(x, "numpy", device="cpu") is x

    device = strict.Device("device1")
    y = xs.to_backend(x, "array_api_strict", device=device)
    assert y.device == device
    s = xs.to_backend(xs.to_sparse_csr(np.eye(3)), "array_api_strict", device=device)
    assert s.device == device
    assert all(c.device == device for c in s._components().values())
    s2 = xs.to_backend(s, "array_api_strict", device=strict.Device("device2"))
    assert s2.device == strict.Device("device2")


def test_to_backend_rejects_non_arrays() -> None:
    with pytest.raises(TypeError, match="to_backend: expected an xsparse array or a backend array, got list"):
        xs.to_backend([1, 2], "torch")


def test_to_backend_of_a_flipped_numpy_array_does_not_abort() -> None:
    # torch's DLPack import aborts the interpreter on a negative stride, so the old behaviour runs in a
    # process of its own: it must exit cleanly with the flipped values
    code = (
        "import numpy as np, xsparse as xs\n"
        "a = np.arange(12.0).reshape(3, 4)\n"
        "for v in (xs.flip(a, axis=0), a[::-1], a[:, ::-2], np.flip(a)):\n"
        "    assert xs.to_backend(v, 'torch').tolist() == v.tolist()\n"
        "    assert np.from_dlpack(xs.to_backend(v, 'array_api_strict')).tolist() == v.tolist()\n"
        "print('done')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-2000:]


def test_to_backend_copies_a_read_only_source_for_a_writable_target() -> None:
    # torch's DLPack import drops the read-only flag: the source must not change through the result
    r = np.asarray([[0.0, 1.5], [2.0, 0.0]])
    r.flags.writeable = False
    t = xs.to_backend(r, "torch")
    t += 1
    assert r.tolist() == [[0.0, 1.5], [2.0, 0.0]]
    s = xs.to_sparse_csr(r)
    for c in s._components().values():
        c.flags.writeable = False
    st = xs.to_backend(s, "torch")
    st.values().mul_(0)
    assert s.values().tolist() == [1.5, 2.0]
    # NumPy and array-api-strict keep the flag, so the memory is still shared there
    n = xs.to_backend(r, "array_api_strict")
    assert np.shares_memory(np.from_dlpack(n), r)
    # a writable source is still shared with torch
    w = np.arange(3.0)
    assert xs.to_backend(w, "torch").data_ptr() == w.ctypes.data


def test_from_dlpack_copy_true_copies_a_moved_sparse_array() -> None:
    a = xs.to_sparse_csr(np.asarray([[0.0, 1.5], [2.0, 0.0]]))
    k = xs.from_dlpack(a, copy=True, backend="torch")
    assert k.backend == "torch"
    for c in k._components().values():
        c.zero_()
    assert xs.to_dense(a).tolist() == [[0.0, 1.5], [2.0, 0.0]]
    assert a.crow_indices().tolist() == [0, 1, 2]


@pytest.mark.parametrize("dst", ["torch", "array_api_strict"])
def test_to_backend_of_non_native_byte_order(dst: str) -> None:
    be = np.asarray([[0, 1.5], [2, 0]], dtype=">f8")
    t = xs.to_backend(be, dst)
    assert t.dtype == _ns(dst).float64
    np.testing.assert_array_equal(_host(t), be)
    s = xs.to_backend(xs.to_sparse_csr(be), dst)
    np.testing.assert_array_equal(_host(xs.to_dense(s)), be)


def test_to_backend_of_a_numpy_scalar() -> None:
    t = xs.to_backend(np.int64(3), "torch")
    assert t.shape == () and t.dtype == torch.int64 and int(t) == 3
    f = xs.to_backend(np.float64(2.5), "array_api_strict")
    assert f.shape == () and f.dtype == strict.float64 and float(f) == 2.5


def test_to_backend_of_a_meta_tensor() -> None:
    with pytest.raises(ValueError, match=r"to_backend: a tensor on the meta device has no data to move \(device=meta\)\. Materialize"):
        xs.to_backend(torch.empty(2, device="meta"), "numpy")


def test_backend_mismatch_names_clip_and_stack() -> None:
    a = xs.to_sparse_csr(np.asarray([[0.0, 1.5], [2.0, 0.0]]))
    with pytest.raises(xs.BackendMismatchError, match=r"^clip: the operands live on different backends \('numpy', 'torch'\)"):
        xs.clip(a, torch.zeros(2, 2, dtype=torch.float64), None)
    with pytest.raises(xs.BackendMismatchError, match=r"^clip: the operands live on different backends"):
        xs.clip(a, None, torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(xs.BackendMismatchError, match=r"^stack: the operands live on different backends \('numpy', 'torch'\)"):
        xs.stack([a, xs.to_backend(a, "torch")])


# -- mixing backends ------------------------------------------------------------------------------


def test_mixing_backends_in_one_call() -> None:
    with pytest.raises(
        xs.BackendMismatchError,
        match=r"sparse_coo_array: the operands live on different backends \('numpy', 'torch'\)\. "
        r"Move them to one, e\.g\. xsparse\.to_backend\(a, 'numpy'\) for each operand a on 'torch' \(zero-copy",
    ):
        xs.sparse_coo_array(np.asarray([[0, 1]]), torch.tensor([1.0, 2.0]))
    # the operand to move is named by its backend, never the first operand's (already there)
    with pytest.raises(xs.BackendMismatchError, match=r"to_backend\(a, 'torch'\) for each operand a on 'numpy' or 'array_api_strict'"):
        xs.stack([torch.ones(2), np.ones(2), strict.ones(2)])
    with pytest.raises(xs.BackendMismatchError, match=r"different backends \('torch', 'array_api_strict'\).*to_backend"):
        xs.sparse_csr_array(torch.tensor([0, 1, 2]), strict.asarray([1, 0]), [5.0, 6.0])


def test_requested_backend_against_the_operands() -> None:
    with pytest.raises(
        xs.BackendMismatchError,
        match=r"sparse_coo_array: backend='torch' was requested but an operand lives on backend 'numpy'\. "
        r"Move it first with xsparse\.to_backend\(a, 'torch'\)\.",
    ):
        xs.sparse_coo_array(np.asarray([[0, 1]]), np.asarray([1.0, 2.0]), backend="torch")
    with pytest.raises(xs.BackendMismatchError, match="to_backend"):
        xs.sparse_csr_array([0, 1], [0], torch.tensor([1.0]), backend="array_api_strict")
    # lists follow backend=; the same backend as the arrays is fine
    assert xs.sparse_coo_array([[0, 1]], [1.0, 2.0], backend="torch").backend == "torch"
    assert xs.sparse_coo_array(torch.tensor([[0]]), [1.0], backend="torch").backend == "torch"
    err = xs.BackendMismatchError("x")
    assert isinstance(err, TypeError) and isinstance(err, xs.XSparseError)


# -- third-party backends -------------------------------------------------------------------------


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A fake installed plug-in module, and the backend registry reset to load entry points afresh."""
    module = types.ModuleType("xsparse_test_plugin")
    # the library named is the plug-in module itself: a plug-in for a built-in backend's library is refused
    module.strict2 = Backend("strict2", "xsparse_test_plugin", lambda: strict)  # type: ignore[attr-defined]
    module.make_strict3 = lambda: Backend("strict3", "xsparse_test_plugin", lambda: strict)  # type: ignore[attr-defined]
    module.not_a_backend = 42  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(xsparse.backends, "_EXTRA", {})
    monkeypatch.setattr(xsparse.backends, "_entry_points_loaded", False)
    monkeypatch.setattr(xsparse.backends, "_FAILED", {}, raising=False)
    return module


def _use_entry_points(monkeypatch: pytest.MonkeyPatch, *targets: tuple[str, str]) -> None:
    eps = [importlib.metadata.EntryPoint(name, f"xsparse_test_plugin:{attr}", "xsparse.backends") for name, attr in targets]

    def entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        return eps if group == "xsparse.backends" else []

    monkeypatch.setattr(xsparse.backends, "entry_points", entry_points)


def test_entry_point_backend(monkeypatch: pytest.MonkeyPatch, plugins: types.ModuleType) -> None:
    _use_entry_points(monkeypatch, ("strict2", "strict2"), ("strict3", "make_strict3"))
    names = [b.name for b in xs.registered_backends()]
    assert names == ["numpy", "torch", "cupy", "array_api_strict", "strict2", "strict3"]
    assert xs.get_backend("strict2") is plugins.strict2
    assert xs.get_backend("strict3").name == "strict3"
    with pytest.raises(ValueError, match="'array_api_strict', 'strict2', 'strict3'"):
        xs.get_backend("strict4")
    # a plug-in backend runs on the generic kernels
    s = xs.sparse_coo_array([[0, 2]], [1.0, 2.0], (4,), backend="strict2")
    assert s.backend == "strict2" and array_api_compat.is_array_api_strict_namespace(array_api_compat.array_namespace(s._values()))
    np.testing.assert_array_equal(_host(xs.to_dense(s)), [1.0, 0.0, 2.0, 0.0])
    with xs.default_backend("strict2"):
        assert xs.sparse_csr_array([0, 1], [0], [3.0]).backend == "strict2"
    assert xs.to_backend(xs.to_sparse_csr(np.eye(2)), "strict2").backend == "strict2"


def test_entry_point_loading_only_once(monkeypatch: pytest.MonkeyPatch, plugins: types.ModuleType) -> None:
    calls: list[str] = []
    _use_entry_points(monkeypatch, ("strict2", "strict2"))
    real = xsparse.backends.entry_points

    def counting(*, group: str) -> Any:
        calls.append(group)
        return real(group=group)

    monkeypatch.setattr(xsparse.backends, "entry_points", counting)
    xs.registered_backends()
    xs.get_backend("strict2")
    xs.registered_backends()
    assert calls == ["xsparse.backends"]


def test_bad_entry_point(monkeypatch: pytest.MonkeyPatch, plugins: types.ModuleType) -> None:
    _use_entry_points(monkeypatch, ("broken", "not_a_backend"), ("strict2", "strict2"))
    with pytest.warns(
        RuntimeWarning,
        match=r"^xsparse\.backends: the plug-in backend 'broken' failed to load \(entry point 'broken = "
        r"xsparse_test_plugin:not_a_backend' raised TypeError: xsparse\.backends entry point 'broken' loaded int, not "
        r"an xsparse\.backends\.Backend\. Make the entry point name a Backend instance or a function returning one\)\. "
        r"The other backends work; fix or uninstall the package that provides the entry point to use 'broken'\.$",
    ):
        assert [b.name for b in xs.registered_backends()][-1] == "strict2"


def test_a_broken_entry_point_costs_only_its_own_backend(monkeypatch: pytest.MonkeyPatch, plugins: types.ModuleType) -> None:
    """An entry point whose import raises (its library missing) is warned about once; the entry points after it
    still load, and asking for its backend says why it is missing, every time."""

    def broken() -> Backend:
        raise ImportError("its library is missing")

    plugins.broken = broken  # type: ignore[attr-defined]
    _use_entry_points(monkeypatch, ("aaa_broken", "broken"), ("strict2", "strict2"))
    with pytest.warns(RuntimeWarning, match=r"the plug-in backend 'aaa_broken' failed to load \(entry point 'aaa_broken = xsparse_test_plugin:broken' raised ImportError: its library is missing\)"):
        names = [b.name for b in xs.registered_backends()]
    assert names == ["numpy", "torch", "cupy", "array_api_strict", "strict2"]
    for _ in range(2):
        with pytest.raises(
            ImportError,
            match=r"^get_backend: the plug-in backend 'aaa_broken' failed to load \(entry point 'aaa_broken = "
            r"xsparse_test_plugin:broken' raised ImportError: its library is missing\)\. Fix or uninstall the package "
            r"that provides the entry point, or use another backend\.$",
        ):
            xs.get_backend("aaa_broken")
    assert xs.get_backend("strict2") is plugins.strict2


def test_a_plugin_asked_for_while_another_thread_loads_it(monkeypatch: pytest.MonkeyPatch, plugins: types.ModuleType) -> None:
    """A thread that asks for a plug-in while another thread loads the entry points waits for them, rather
    than find the plug-in unknown."""
    started, release = threading.Event(), threading.Event()

    def slow() -> Backend:
        started.set()
        release.wait(30)  # a plug-in whose import takes a while
        return Backend("slow", "xsparse_test_plugin", lambda: strict)

    plugins.slow = slow  # type: ignore[attr-defined]
    _use_entry_points(monkeypatch, ("slow", "slow"))
    got: dict[str, str] = {}

    def ask(who: str) -> None:
        try:
            got[who] = xs.get_backend("slow").name
        except Exception as exc:  # compared below
            got[who] = f"{type(exc).__name__}: {exc}"

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    assert started.wait(30)
    second = threading.Thread(target=ask, args=("second",))
    second.start()
    second.join(0.5)  # time to answer, if it does not wait (it answered "unknown backend" at once)
    release.set()
    first.join(30)
    second.join(30)
    assert got == {"first": "slow", "second": "slow"}


def _fake_library(monkeypatch: pytest.MonkeyPatch) -> tuple[types.ModuleType, Any]:
    """An importable module whose arrays name it as their Array API namespace."""
    lib = types.ModuleType("xsparse_test_lib")

    class LibArray:
        def __array_namespace__(self, api_version: str | None = None) -> types.ModuleType:
            return lib

    monkeypatch.setitem(sys.modules, lib.__name__, lib)
    return lib, LibArray()


def test_array_of_a_plugin_library(monkeypatch: pytest.MonkeyPatch, plugins: types.ModuleType) -> None:
    lib, array = _fake_library(monkeypatch)
    plugins.lib_backend = Backend("testlib", lib.__name__, lambda: lib)  # type: ignore[attr-defined]
    _use_entry_points(monkeypatch, ("testlib", "lib_backend"))
    # the first thing asked is the backend of an array: the plug-in must be found, not made up
    assert backend_of_array(array) is plugins.lib_backend
    assert xs.get_backend("testlib") is plugins.lib_backend


def test_array_of_an_unknown_library(monkeypatch: pytest.MonkeyPatch, plugins: types.ModuleType) -> None:
    lib, array = _fake_library(monkeypatch)
    _use_entry_points(monkeypatch)
    backend = backend_of_array(array)
    assert (backend.name, backend.library, backend.kernels) == (lib.__name__, lib.__name__, None)
    assert backend.namespace() is lib
    assert backend_of_array(array) is backend and xs.get_backend(lib.__name__) is backend
    assert backend in xs.registered_backends()


# -- devices --------------------------------------------------------------------------------------


def test_devices(backend: str, xp: Any) -> None:
    devices = xs.get_backend(backend).devices()
    assert devices, f"{backend} lists no device"
    assert array_api_compat.device(xp.zeros(1)) in devices
    s = xs.to_sparse_csr(xp.eye(3))
    assert s.device in devices


def test_backend_repr_and_availability() -> None:
    b = xs.get_backend("numpy")
    assert repr(b) == "Backend(name='numpy', library='numpy', kernels='xsparse.backends.numpy')"
    missing = Backend("nolib", "xsparse_no_such_library", lambda: None)
    assert not missing.is_available()


def test_plugins_that_cannot_be_told_apart_are_refused(monkeypatch: pytest.MonkeyPatch, plugins: types.ModuleType) -> None:
    """A plug-in named like another backend, or for a built-in backend's library (whose arrays always go to
    the built-in backend: its sparse arrays could meet no dense array, and the conformance suite would test
    the built-in backend in its name), is refused with a warning that says why; the others load."""
    plugins.clash = Backend("numpy", "xsparse_test_plugin", lambda: strict)  # type: ignore[attr-defined]
    plugins.second_strict = Backend("strict2", "xsparse_test_plugin", lambda: strict)  # type: ignore[attr-defined]
    plugins.numpy_again = Backend("nptoy", "numpy", lambda: np)  # type: ignore[attr-defined]
    _use_entry_points(monkeypatch, ("numpy", "clash"), ("strict2", "strict2"), ("strict2b", "second_strict"), ("nptoy", "numpy_again"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = [b.name for b in xs.registered_backends()]
    assert names == ["numpy", "torch", "cupy", "array_api_strict", "strict2"]
    messages = sorted(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning))
    assert len(messages) == 3, messages
    assert any("the plug-in backend 'numpy' is refused (entry point 'numpy = xsparse_test_plugin:clash': the name 'numpy' is taken by another backend; give the plug-in a name of its own)" in m for m in messages)
    assert any("the plug-in backend 'strict2' is refused (entry point 'strict2b = xsparse_test_plugin:second_strict': the name 'strict2' is taken" in m for m in messages)
    assert xs.get_backend("numpy").library == "numpy" and xs.get_backend("strict2") is plugins.strict2
    with pytest.raises(
        ImportError,
        match=r"^get_backend: the plug-in backend 'nptoy' is refused \(entry point 'nptoy = xsparse_test_plugin:numpy_again': its "
        r"library 'numpy' is that of the built-in backend 'numpy', whose arrays always go to it; register the plug-in's kernels "
        r"for that backend instead \(register\(\.\.\., backend='numpy'\)\)\)\. Fix or uninstall",
    ):
        xs.get_backend("nptoy")


def test_a_backend_whose_library_is_missing_says_so(monkeypatch: pytest.MonkeyPatch, plugins: types.ModuleType) -> None:
    def absent() -> Any:
        import xsparse_no_such_library  # type: ignore[import-not-found]

        return xsparse_no_such_library

    plugins.ghost = Backend("ghost", "xsparse_no_such_library", absent)  # type: ignore[attr-defined]
    _use_entry_points(monkeypatch, ("ghost", "ghost"))
    message = r"backend 'ghost' is not installed: its library 'xsparse_no_such_library' cannot be imported"
    with pytest.raises(ImportError, match=rf"^{message} \(No module named 'xsparse_no_such_library'\)\. Install xsparse_no_such_library, or use an installed backend \(numpy, "):
        xs.to_backend(xs.to_sparse_csr(np.eye(2)), "ghost")
    with pytest.raises(ImportError, match=rf"^{message}"):
        xs.zeros((2,), backend="ghost")
    for op, setting in [("set_default_backend", xs.set_default_backend), ("default_backend", xs.default_backend)]:
        with pytest.raises(ImportError, match=rf"^{op}: {message} \(backend='ghost'\)\. Install xsparse_no_such_library, or pick an installed backend\.$"):
            setting("ghost")
    assert xs.get_default_backend().name == "numpy"


# -- index primitives ---------------------------------------------------------------------------------


@given(data=st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_repeat_hook_expands_compressed_indices_as_the_binary_search(backend: str, xp: Any, data: st.DataObject) -> None:
    """A backend's ``repeat`` gives the slice index of every element exactly as the generic binary search does
    (batches, empty slices, nse = 0, int32 and int64), and as NumPy's reference."""
    from xsparse.formats._ops import expand_compressed

    batch = data.draw(st.lists(st.integers(1, 3), max_size=2), label="batch")
    n = data.draw(st.integers(0, 6), label="n_compressed")
    nse = data.draw(st.integers(0, 9), label="nse") if n else 0
    cuts = data.draw(st.lists(st.lists(st.integers(0, nse), min_size=n - 1 if n else 0, max_size=n - 1 if n else 0),
                              min_size=math.prod(batch), max_size=math.prod(batch)), label="cuts")  # fmt: skip
    idt = data.draw(st.sampled_from(["int32", "int64"]), label="index dtype")
    ptr = np.asarray([[0, *sorted(c), nse] if n else [0] for c in cuts], dtype=idt).reshape(*batch, max(n, 0) + 1)
    counts = np.diff(ptr.reshape(-1, ptr.shape[-1]), axis=1)
    expected = np.stack([np.repeat(np.arange(n), c) for c in counts]).reshape(*batch, nse) if n else np.zeros((*batch, 0))
    b = xs.get_backend(backend)
    ci = xp.asarray(ptr)
    for hook in (b, None):
        got = expand_compressed(xp, ci, nse, hook)
        assert got.dtype == ci.dtype and tuple(got.shape) == (*batch, nse)
        np.testing.assert_array_equal(_host(got), expected)


def test_the_cpu_libraries_repeat_by_counts() -> None:
    # the hook is the fast path of the index arithmetic; a library that loses it falls back silently
    assert xs.get_backend("numpy").repeat is not None and xs.get_backend("torch").repeat is not None
    assert xs.get_backend("array_api_strict").repeat is None


@given(data=st.data())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_extrema_hook_gives_the_smallest_and_largest_element(backend: str, xp: Any, data: st.DataObject) -> None:
    """A backend's ``extrema`` (the bounds check of every index array, which has been cast to int64 by then)
    gives the min and max as Python integers: one element or many, negatives and int64's limits included."""
    dtype = data.draw(st.sampled_from(["int32", "int64"]), label="dtype")
    info = np.iinfo(dtype)
    values = data.draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=1, max_size=50), label="values")
    x = np.asarray(values, dtype=dtype)
    lo, hi = xs.get_backend(backend).extrema(xp, xp.asarray(x))
    assert (type(lo), type(hi)) == (int, int) and (lo, hi) == (min(values), max(values))


def test_to_backend_of_a_dtype_the_target_lacks() -> None:
    # DLPack's own error ("Unsupported dtype in DLTensor") said neither which dtype nor what to do
    bf16 = torch.tensor([1.0, 0.0, 2.0], dtype=torch.bfloat16)
    for x in (bf16, xs.to_sparse(bf16)):
        with pytest.raises(TypeError, match=r"^to_backend: backend 'numpy' has no dtype bfloat16 \(dtype=bfloat16\)\. Cast the array first"):
            xs.to_backend(x, "numpy")
    f16 = np.asarray([1.0, 0.0], dtype=np.float16)
    with pytest.raises(TypeError, match=r"^to_backend: backend 'array_api_strict' has no dtype float16"):
        xs.to_backend(xs.to_sparse(f16), "array_api_strict")
    assert xs.to_backend(xs.to_sparse(f16), "torch").dtype == torch.float16
    # the 2:4 layout has no cast (its pattern depends on the dtype): the hint casts its COO form
    ss = xs.to_sparse_semi_structured(np.tile(np.asarray([1.0, 2.0, 0.0, 0.0], dtype=np.float16), (64, 16)))
    with pytest.raises(TypeError, match=r"^to_backend: backend 'array_api_strict' has no dtype float16 \(dtype=float16\)\. Cast the array first, e\.g\. with xsparse\.astype\(xsparse\.to_sparse_coo\(x\), 'float32'\)\.$"):
        xs.to_backend(ss, "array_api_strict")
    moved = xs.to_backend(xs.astype(xs.to_sparse_coo(ss), "float32"), "array_api_strict")
    assert moved.layout is xs.sparse_coo and moved.nnz == 64 * 32
