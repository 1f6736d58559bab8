"""The kernel registry and its resolution (xsparse.dispatch).

Most tests run against a private, empty registry (the ``registry`` fixture) so that their kernels do not
leak into the real one; the last tests check the real registry, with every installed backend loaded.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import pytest

import xsparse as xs
from xsparse import dispatch
from xsparse.formats import ANY_SPARSE, BLOCKED, COMPRESSED, INDEXED

CSR, CSC, BSR, COO, STRIDED = xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_coo, xs.strided
XP = object()  # stands for the backend namespace: the dispatcher only hands it on


def _load_installed_backends() -> None:
    """Import the native kernels of every installed backend into the real registry."""
    for backend in xs.registered_backends():
        if backend.kernels is not None and backend.is_available():
            backend.load()


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[dispatch.Kernel]]:
    """A fresh, empty registry in place of the real one for the duration of a test."""
    # Load the real kernels first: a backend module imported for the first time while the registry is
    # swapped would register into the private dict and be missing from the real one afterwards.
    _load_installed_backends()
    private: dict[str, list[dispatch.Kernel]] = {}
    monkeypatch.setattr(dispatch, "_REGISTRY", private)
    return private


def _kernel(result: str, doc: str = "A test kernel.") -> Callable[..., Any]:
    def func(xp: Any, *args: Any, **kwargs: Any) -> Any:
        assert xp is XP
        return result

    func.__name__ = f"_frob_{result}"
    func.__doc__ = doc
    return func


def _names(op: str, layouts: tuple[Any, ...], backend: str) -> list[str]:
    return [k.name for k in dispatch.resolve(op, layouts, backend)]


# -- registration ---------------------------------------------------------------------------------


def test_register_exact_layouts(registry: dict[str, list[dispatch.Kernel]]) -> None:
    func = _kernel("csr_strided_numpy")
    assert dispatch.register("frob", (CSR, STRIDED), backend="numpy")(func) is func
    (kernel,) = dispatch.kernels("frob")
    assert (kernel.op, kernel.signature, kernel.backend, kernel.kind) == ("frob", (CSR, STRIDED), "numpy", "native")
    assert kernel.func is func and kernel.name == "_frob_csr_strided_numpy"
    assert kernel.describe() == "frob(sparse_csr, strided) [native, numpy]"
    assert kernel.matches((CSR, STRIDED))
    assert not kernel.matches((CSC, STRIDED))
    assert not kernel.matches((STRIDED, CSR))
    assert not kernel.matches((CSR,)), "a signature of another arity never matches"
    assert dispatch.call("frob", (CSR, STRIDED), "numpy", XP) == "csr_strided_numpy"


def test_register_families(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (COMPRESSED, ANY_SPARSE))(_kernel("compressed_any_sparse"))
    (kernel,) = dispatch.kernels("frob")
    assert kernel.kind == "generic"
    assert kernel.describe() == "frob(COMPRESSED, ANY_SPARSE) [generic, any backend]"
    for first in (CSR, CSC, BSR, xs.sparse_bsc):
        for second in (COO, CSR, xs.sparse_semi_structured):
            assert kernel.matches((first, second))
    assert not kernel.matches((COO, CSR)), "COO is not in the COMPRESSED family"
    assert not kernel.matches((CSR, STRIDED)), "strided is not in ANY_SPARSE"
    assert dispatch.call("frob", (BSR, COO), "torch", XP) == "compressed_any_sparse"


def test_kernels_introspection(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (CSR,), backend="numpy")(_kernel("csr_numpy"))
    dispatch.register("frob", (COMPRESSED,))(_kernel("compressed"))
    dispatch.register("twiddle", (COO,), backend="torch")(_kernel("coo_torch"))
    assert [k.name for k in xs.kernels("frob")] == ["_frob_csr_numpy", "_frob_compressed"], "registration order"
    assert [k.name for k in xs.kernels()] == ["_frob_csr_numpy", "_frob_compressed", "_frob_coo_torch"]
    assert xs.kernels("nothing") == []
    assert dispatch.operations() == ["frob", "twiddle"]
    # the returned list is a copy: changing it leaves the registry alone
    xs.kernels("frob").clear()
    assert len(xs.kernels("frob")) == 2


# -- resolution order -----------------------------------------------------------------------------


def test_most_specific_wins(registry: dict[str, list[dispatch.Kernel]]) -> None:
    # registered least specific first, so that registration order cannot be what decides
    dispatch.register("frob", (ANY_SPARSE,))(_kernel("any_sparse"))
    dispatch.register("frob", (INDEXED,))(_kernel("indexed"))
    dispatch.register("frob", (COMPRESSED,))(_kernel("compressed"))
    dispatch.register("frob", (BLOCKED,))(_kernel("blocked"))
    dispatch.register("frob", (BSR,))(_kernel("bsr"))
    assert _names("frob", (BSR,), "numpy") == [
        "_frob_bsr", "_frob_blocked", "_frob_compressed", "_frob_indexed", "_frob_any_sparse",
    ]  # fmt: skip
    assert dispatch.call("frob", (BSR,), "numpy", XP) == "bsr"
    assert dispatch.call("frob", (xs.sparse_bsc,), "numpy", XP) == "blocked"
    assert dispatch.call("frob", (CSC,), "numpy", XP) == "compressed"
    assert dispatch.call("frob", (COO,), "numpy", XP) == "indexed"
    assert dispatch.call("frob", (xs.sparse_semi_structured,), "numpy", XP) == "any_sparse"


def test_specificity_is_per_element(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (COMPRESSED, STRIDED))(_kernel("compressed_strided"))
    dispatch.register("frob", (CSR, STRIDED))(_kernel("csr_strided"))
    dispatch.register("frob", (ANY_SPARSE, STRIDED))(_kernel("any_sparse_strided"))
    assert _names("frob", (CSR, STRIDED), "numpy") == [
        "_frob_csr_strided", "_frob_compressed_strided", "_frob_any_sparse_strided",
    ]  # fmt: skip
    assert _names("frob", (CSR, CSR), "numpy") == []


def test_resolution_memo_follows_the_registry(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (COMPRESSED,), backend="numpy")(_kernel("family"))
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "family"
    # a registration after the order was memoised is seen at once
    dispatch.register("frob", (CSR,), backend="numpy")(_kernel("exact"))
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "exact"
    assert dispatch.call("frob", [CSR], "numpy", XP) == "exact", "layouts as a list resolve the same"
    # kernels removed from the list in place (as tests that forget their kernels do), then one
    # registered that brings it back to a length seen before: neither reuses a stale order
    registry["frob"][:] = registry["frob"][:1]
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "family"
    registry["frob"].pop()
    dispatch.register("frob", (CSR,), backend="numpy")(_kernel("again"))
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "again"


def test_resolution_memo_follows_a_replaced_registry(monkeypatch: pytest.MonkeyPatch, registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (CSR,), backend="numpy")(_kernel("first"))
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "first"
    other: dict[str, list[dispatch.Kernel]] = {}
    monkeypatch.setattr(dispatch, "_REGISTRY", other)
    with pytest.raises(xs.NoKernelError, match=r"^frob: no kernel for layouts \(sparse_csr\) on backend 'numpy'\. Registered: none\."):
        dispatch.call("frob", (CSR,), "numpy", XP)
    dispatch.register("frob", (CSR,), backend="numpy")(_kernel("second"))
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "second"
    monkeypatch.setattr(dispatch, "_REGISTRY", registry)
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "first"


def test_resolution_memo_is_not_stamped_newer_than_the_registry_it_read(
    monkeypatch: pytest.MonkeyPatch, registry: dict[str, list[dispatch.Kernel]]
) -> None:
    """A kernel registered by another thread while an order is computed (after the computation read the
    registry, before the order is stored) makes the stored order stale: the next call sees the kernel."""
    dispatch.register("frob", (CSR,))(_kernel("generic"))
    real = dispatch._resolve
    registered: list[threading.Thread] = []

    def resolve_then_register(*args: Any) -> list[dispatch.Kernel]:
        order = real(*args)
        if not registered:  # the interleaving forced: the other thread registers right after the computation
            registered.append(threading.Thread(target=lambda: dispatch.register("frob", (CSR,), backend="numpy")(_kernel("native"))))
            registered[0].start()
            registered[0].join()
        return order

    monkeypatch.setattr(dispatch, "_resolve", resolve_then_register)
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "generic", "the order computed before the registration"
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "native"
    assert _names("frob", (CSR,), "numpy") == ["_frob_native", "_frob_generic"]


def test_priority_orders_kernels_of_one_signature(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (CSR,), backend="numpy")(_kernel("low"))
    dispatch.register("frob", (CSR,), backend="numpy", priority=5)(_kernel("high"))
    dispatch.register("frob", (CSR,), backend="numpy", priority=-1)(_kernel("lowest"))
    assert _names("frob", (CSR,), "numpy") == ["_frob_high", "_frob_low", "_frob_lowest"]
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "high"


def test_specificity_beats_priority(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (COMPRESSED,), backend="numpy", priority=10)(_kernel("family"))
    dispatch.register("frob", (CSR,), backend="numpy")(_kernel("exact"))
    assert _names("frob", (CSR,), "numpy") == ["_frob_exact", "_frob_family"]


def test_native_then_generic_then_rewrite(registry: dict[str, list[dispatch.Kernel]]) -> None:
    # A native kernel for a whole family comes before an exact generic one: the tier decides first.
    dispatch.register("frob", (CSC,), rewrite=True)(_kernel("csc_rewrite"))
    dispatch.register("frob", (CSC,))(_kernel("csc"))
    dispatch.register("frob", (ANY_SPARSE,), backend="numpy")(_kernel("any_sparse_numpy"))
    kinds = [k.kind for k in dispatch.resolve("frob", (CSC,), "numpy")]
    assert kinds == ["native", "generic", "rewrite"]
    assert dispatch.call("frob", (CSC,), "numpy", XP) == "any_sparse_numpy"
    # on another backend the numpy kernel does not exist: the generic one runs
    assert _names("frob", (CSC,), "torch") == ["_frob_csc", "_frob_csc_rewrite"]
    assert dispatch.call("frob", (CSC,), "torch", XP) == "csc"


def test_rewrite_warns(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (CSR,))(_kernel("csr"))
    dispatch.register("frob", (CSC,), rewrite=True)(_kernel("csc_as_transposed_csr"))
    # a direct kernel: no warning (pytest turns any warning into an error)
    assert dispatch.call("frob", (CSR,), "numpy", XP) == "csr"

    def public_frob(layout: xs.Layout) -> Any:  # a public function of xsparse, one frame above dispatch.call
        return dispatch.call("frob", (layout,), "numpy", XP)

    with pytest.warns(xs.SparseEfficiencyWarning) as record:
        assert public_frob(CSC) == "csc_as_transposed_csr"
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith(
        "frob: no direct kernel for layouts (sparse_csc) on backend 'numpy'; computing it through the declared "
        "rewrite _frob_csc_as_transposed_csr."
    )
    assert "xsparse.kernels('frob')" in message
    assert record[0].filename == __file__, "the warning points at the user's call of the public function"


def test_rewrites_of_the_backend_before_generic_rewrites(registry: dict[str, list[dispatch.Kernel]]) -> None:
    # registered generic first, so that registration order cannot be what decides
    dispatch.register("frob", (CSC,), rewrite=True)(_kernel("csc_rewrite"))
    dispatch.register("frob", (CSC,), backend="numpy", rewrite=True)(_kernel("csc_rewrite_numpy"))
    dispatch.register("frob", (CSC,), backend="torch", rewrite=True)(_kernel("csc_rewrite_torch"))
    assert _names("frob", (CSC,), "numpy") == ["_frob_csc_rewrite_numpy", "_frob_csc_rewrite"]
    assert _names("frob", (CSC,), "cupy") == ["_frob_csc_rewrite"]
    with pytest.warns(xs.SparseEfficiencyWarning, match="declared rewrite _frob_csc_rewrite_numpy"):
        assert dispatch.call("frob", (CSC,), "numpy", XP) == "csc_rewrite_numpy"


def test_kernels_of_another_backend_are_not_used(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (CSR,), backend="torch")(_kernel("csr_torch"))
    dispatch.register("frob", (CSR,), backend="torch", rewrite=True)(_kernel("csr_rewrite_torch"))
    assert _names("frob", (CSR,), "numpy") == []
    with pytest.raises(xs.NoKernelError, match=r"frob: no kernel for layouts \(sparse_csr\) on backend 'numpy'\."):
        dispatch.call("frob", (CSR,), "numpy", XP)
    assert dispatch.call("frob", (CSR,), "torch", XP) == "csr_torch"


# -- declining and failing ------------------------------------------------------------------------


def test_decline_moves_on_to_the_next_kernel(registry: dict[str, list[dispatch.Kernel]]) -> None:
    seen: list[tuple[Any, ...]] = []

    def only_float(xp: Any, x: Any, *, fill_value: Any = 0) -> str | None:
        seen.append((xp, x, fill_value))
        return None if isinstance(x, float) else f"needs a float, got {type(x).__name__}"

    dispatch.register("frob", (CSR,), backend="numpy", supports=only_float)(_kernel("csr_numpy"))
    dispatch.register("frob", (CSR,))(_kernel("csr"))
    assert dispatch.call("frob", (CSR,), "numpy", XP, 1.5, fill_value=2) == "csr_numpy"
    assert seen == [(XP, 1.5, 2)], "supports() gets the namespace and the kernel's own arguments"
    assert dispatch.call("frob", (CSR,), "numpy", XP, 1) == "csr"


def test_decline_reaches_the_rewrite_and_warns(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (CSC,), supports=lambda xp, x: "fill value must be 0")(_kernel("csc"))
    dispatch.register("frob", (CSC,), rewrite=True)(_kernel("csc_rewrite"))
    with pytest.warns(xs.SparseEfficiencyWarning, match="declared rewrite _frob_csc_rewrite"):
        assert dispatch.call("frob", (CSC,), "numpy", XP, 1) == "csc_rewrite"


def test_no_kernel_error_lists_signatures_and_reasons(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (CSR,), backend="numpy", supports=lambda xp, x: "float16 is not supported")(
        _kernel("csr_numpy")
    )
    dispatch.register("frob", (COMPRESSED,), supports=lambda xp, x: "only fill value 0 is supported")(
        _kernel("compressed")
    )
    dispatch.register("frob", (COO,), backend="torch")(_kernel("coo_torch"))
    with pytest.raises(xs.NoKernelError, match=r"^frob: no kernel for layouts \(sparse_csr\) on backend 'numpy'\.") as info:
        dispatch.call("frob", (CSR,), "numpy", XP, 1)
    message = str(info.value)
    assert "frob(sparse_csr) [native, numpy] declined: float16 is not supported" in message
    assert "frob(COMPRESSED) [generic, any backend] declined: only fill value 0 is supported" in message
    assert (
        "Registered: frob(sparse_csr) [native, numpy]; frob(COMPRESSED) [generic, any backend]; "
        "frob(sparse_coo) [native, torch]." in message
    )
    assert message.endswith("xsparse.to_backend.")
    assert re.search(r"xsparse\.to_sparse_csr", message), "the message says how to fix it"
    # a kernel for these layouts declined: its reason is the first thing to change
    assert "Change what a declining kernel's reason names, or convert an operand" in message
    assert isinstance(info.value, NotImplementedError) and isinstance(info.value, xs.XSparseError)


def test_no_kernel_error_for_unknown_operation(registry: dict[str, list[dispatch.Kernel]]) -> None:
    with pytest.raises(xs.NoKernelError, match=r"^nothing: no kernel for layouts \(sparse_coo, strided\) on backend 'numpy'\. Registered: none\."):
        dispatch.call("nothing", (COO, STRIDED), "numpy", XP)
    with pytest.raises(xs.NoKernelError, match=r"Registered: none\. Convert an operand to a supported layout"):
        dispatch.call("nothing", (COO, STRIDED), "numpy", XP)


def test_ambiguities_are_reported(registry: dict[str, list[dispatch.Kernel]]) -> None:
    assert dispatch.ambiguities() == []
    dispatch.register("frob", (CSR, COMPRESSED))(_kernel("csr_compressed"))
    dispatch.register("frob", (COMPRESSED, CSR))(_kernel("compressed_csr"))
    # nested signatures, other tiers, other backends, other priorities and disjoint signatures do not clash
    dispatch.register("frob", (CSR, CSR))(_kernel("csr_csr"))
    dispatch.register("frob", (COMPRESSED, CSR), backend="numpy")(_kernel("compressed_csr_numpy"))
    dispatch.register("frob", (CSR, COMPRESSED), backend="torch")(_kernel("csr_compressed_torch"))
    dispatch.register("frob", (CSR, COMPRESSED), rewrite=True)(_kernel("csr_compressed_rewrite"))
    dispatch.register("frob", (COMPRESSED, CSR), priority=1)(_kernel("compressed_csr_first"))
    dispatch.register("frob", (COO, COMPRESSED))(_kernel("coo_compressed"))
    assert [(a.name, b.name) for a, b in dispatch.ambiguities()] == [("_frob_csr_compressed", "_frob_compressed_csr")]


def test_same_signature_twice_is_an_ambiguity(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (CSR,), backend="numpy")(_kernel("one"))
    dispatch.register("frob", (CSR,), backend="numpy")(_kernel("two"))
    assert [(a.name, b.name) for a, b in dispatch.ambiguities()] == [("_frob_one", "_frob_two")]


def test_private_registry_does_not_leak(registry: dict[str, list[dispatch.Kernel]]) -> None:
    assert registry == {}
    dispatch.register("frob", (CSR,))(_kernel("csr"))
    assert [k.name for k in registry["frob"]] == ["_frob_csr"]


# -- the real registry ----------------------------------------------------------------------------


def test_real_registry_is_untouched_by_private_tests() -> None:
    assert "frob" not in dispatch.operations()
    assert {"convert", "coalesce"} <= set(dispatch.operations())


def test_real_registry_has_no_ambiguities() -> None:
    pytest.importorskip("torch")  # importing torch is what makes its kernels register
    _load_installed_backends()
    assert {k.backend for k in xs.kernels()} >= {None, "numpy", "torch"}
    assert dispatch.ambiguities() == []


def test_real_kernels_follow_the_style() -> None:
    """STYLE: a kernel is named ``_<op>_<layouts>[_<backend>]`` and has a one-line docstring."""
    _load_installed_backends()
    backend_names = {b.name for b in xs.registered_backends()}
    for k in xs.kernels():
        assert k.name.startswith(f"_{k.op}_"), f"{k.describe()} is named {k.name}"
        if k.backend is not None:
            assert k.name.endswith(f"_{k.backend}"), f"{k.describe()} is named {k.name}, without its backend"
        else:
            assert not any(k.name.endswith(f"_{b}") for b in backend_names), f"generic {k.name} names a backend"
        doc = (k.func.__doc__ or "").strip()
        assert doc, f"{k.name} has no docstring"
        assert "\n" not in doc, f"{k.name}'s docstring is not one line: {doc!r}"


def test_real_resolution_of_a_conversion() -> None:
    """The numpy backend's native CSR conversion comes first, then the generic one."""
    _load_installed_backends()
    kinds = [k.kind for k in dispatch.resolve("convert", (STRIDED, CSR), "numpy")]
    assert kinds[0] == "native" and "generic" in kinds
    assert [k.kind for k in dispatch.resolve("convert", (STRIDED, CSR), "array_api_strict")] == ["generic"]
