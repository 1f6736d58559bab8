"""Every native elementwise kernel on drawn inputs it accepts, against the generic kernel and the dense result.

The kernels are the registry's (``kind == "native"``, but the NumPy backend's ``errstate`` wrappers of the
generic kernels), so a new native kernel is tested the day it is registered. Each one is called directly
(``kernel.func(xp, *operands)``, which the dispatcher would call) on operands in its layout signature that
its ``supports`` accepts and whose dtypes the public function takes (``_elementwise.check_dtypes``):
every dtype of the backend (bool, signed and unsigned integers of every width, float, complex), the same or
different dtypes, int32, int64 and mixed index dtypes, operands without entries (one or both), empty rows,
uncoalesced COO with duplicates, batch and dense dimensions, and values with NaN, -0.0 and infinities or
without them. The draws are biased towards what each kernel takes (its dtypes are probed on a small
input), and every kernel must accept :data:`MIN_ACCEPTED` of them: a kernel that declines whatever is
drawn would otherwise be tested by nothing.

The result must equal, under :func:`xsparse.testing.assert_sparse_equal`:

- a binary kernel's: the generic kernel's result (what the dispatcher computes without the native kernel),
  with its layout and signs of zeros, and ``xp.<op>`` of the dense operands (with the documented rule for
  the zeros of sparse products);
- a unary (strided) kernel's: the same backend's own function where the generic kernel calls it
  (real values), and the other library's (NumPy or SciPy for torch, torch for NumPy) on every value.
"""

from __future__ import annotations

import functools
import importlib.util
import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from conftest import backend_skip_reason, load_native_kernels
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse._common import dtype_name
from xsparse._elementwise import check_dtypes
from xsparse.backends.array_api import elementwise as generic
from xsparse.testing import apply_products_rule, assert_sparse_equal, generic_to_dense, maps_duplicates, to_numpy

load_native_kernels()

HAS_TORCH = importlib.util.find_spec("torch") is not None
ELEMENTWISE_OPS = sorted({*generic.UNARY, *generic.NATIVE_ONLY_UNARY, "clip", *generic.BINARY})
# the NumPy backend's errstate wrappers of the generic kernels (``__wrapped__``) compute what those do;
# torch's uint64 floor_divide and remainder wrap them too, but divide uint64 themselves: those of two
# arrays are here (those with a Python scalar, which this file does not draw, are in test_torch_unsigned.py)
NATIVE = [
    k for op in ELEMENTWISE_OPS for k in dispatch.kernels(op)
    if k.kind == "native" and (not hasattr(k.func, "__wrapped__") or (k.backend == "torch" and "scalar" not in k.signature))
]  # fmt: skip
# the strategies' dtypes, and the unsigned ones that the NumPy and torch backends also store
WIDE_UNSIGNED = ("uint16", "uint32", "uint64")
EXAMPLES = 10
MIN_ACCEPTED = 5
DRAWS = settings(
    max_examples=EXAMPLES, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip


@contextmanager
def quiet() -> Iterator[None]:
    with np.errstate(all="ignore"):
        yield


def _kernel_id(k: dispatch.Kernel) -> str:
    return f"{k.name}({', '.join(str(s) for s in k.signature)})"


def _namespace(kernel: dispatch.Kernel) -> Any:
    assert kernel.backend is not None
    return xs.get_backend(kernel.backend).load()


def _dtype_names(xp: Any) -> list[str]:
    return [*S.dtype_names(xp), *(d for d in WIDE_UNSIGNED if hasattr(xp, d))]


def _concrete(member: Any) -> list[xs.Layout]:
    """The layouts a signature entry stands for, blocked ones left out (no native elementwise kernel takes them)."""
    members = sorted(member, key=str) if isinstance(member, frozenset) else [member]
    return [m for m in members if m is xs.strided or not m.is_blocked]


def _refusal(kernel: dispatch.Kernel, xp: Any, args: tuple[Any, ...]) -> str | None:
    """Why the dispatcher would not call ``kernel`` with ``args`` (None: it would)."""
    try:
        check_dtypes(kernel.op, *args)
        if len(args) == 2:
            xs.result_type(*args)  # torch has no promotion of uint16/32/64 with bool or signed integers
    except TypeError as error:
        return f"the public function refuses the dtypes: {error}"
    return None if kernel.supports is None else kernel.supports(xp, *args)


# -- operands --------------------------------------------------------------------------------------------


def _astype(h: np.ndarray, dtype: str) -> np.ndarray:
    return h.astype(np.dtype(dtype))


def _sanitize(h: np.ndarray, mode: str, rng: np.random.Generator) -> np.ndarray:
    """``h`` with its NaNs and negative zeros made 1 (``finite``), then some elements made infinite (``inf``)."""
    if mode == "drawn" or h.dtype.kind not in "fc":
        return h
    h = h.copy()
    parts = (h.real, h.imag) if h.dtype.kind == "c" else (h,)
    odd = np.zeros(h.shape, dtype=bool)
    for p in parts:
        odd |= np.isnan(p) | ((p == 0) & np.signbit(p))
    h[odd] = 1
    if mode == "inf":
        specified = h != 0
        h[specified & (rng.random(h.shape) < 0.2)] = np.inf * rng.choice([1, -1])
    return h


def _values_like(rng: np.random.Generator, base: str, mask: np.ndarray, dense_shape: tuple[int, ...]) -> np.ndarray:
    """A host array of ``mask``'s shape plus ``dense_shape`` holding non-zero values where ``mask`` is set."""
    out = np.zeros(mask.shape + dense_shape, dtype=np.dtype(base))
    count = int(mask.sum())
    out[mask] = S.nonzero_values(rng, base, count * math.prod(dense_shape), 0).reshape(count, *dense_shape)
    return out


def _second(draw: Any, rng: np.random.Generator, case: S.DenseCase, base: str) -> np.ndarray:
    """A host array of ``case``'s shape: the same specified positions, them flipped along both sparse
    dimensions (both keep every batch's count), independent ones (no batches), or none."""
    nb = case.batch_dim
    mask = np.asarray(~S.is_fill(case.host, case.fill_value))
    if case.dense_dim:
        lead = mask.shape[: mask.ndim - case.dense_dim]
        mask = np.asarray(mask.reshape(*lead, math.prod(case.dense_shape)).any(axis=-1))
    # mostly overlapping entries: where both operands hold one, the kernel computes with two values
    kind = draw(st.sampled_from(["same", "same", "flipped", "independent", "empty"]), label="second operand's entries")
    if kind == "flipped" or (kind == "independent" and nb):
        mask = np.flip(mask, axis=(nb, nb + 1))
    elif kind == "independent":
        mask = rng.random(mask.shape) < draw(st.sampled_from([0.2, 0.5, 1.0]))
    elif kind == "empty":
        mask = np.zeros_like(mask)
    return _values_like(rng, base, mask, case.dense_shape)


def _operand(xp: Any, rng: np.random.Generator, h: np.ndarray, layout: xs.Layout, dense_dim: int, index_dtype: str, uncoalesced: bool) -> Any:
    x = xp.asarray(h)
    if layout is xs.strided:
        return x
    kw: dict[str, Any] = {"layout": layout, "index_dtype": index_dtype}
    if layout is xs.sparse_coo:
        kw["sparse_dim"] = h.ndim - dense_dim
    else:
        kw["dense_dim"] = dense_dim
    a = xs.to_sparse(x, **kw)
    if layout is xs.sparse_coo and uncoalesced:
        a = S.uncoalesced_like(xp, rng, a, index_dtype)
    return a


@functools.cache
def _accepted_dtypes(kernel: dispatch.Kernel) -> tuple[str, ...]:
    """The dtypes (both operands of one dtype) with which the kernel takes a small 2-D input."""
    xp = _namespace(kernel)
    out = []
    for name in _dtype_names(xp):
        h = np.asarray([[1, 0, 2], [0, 0, 3]]).astype(np.dtype(name))
        layouts = [_concrete(m)[0] for m in kernel.signature]
        args = tuple(_operand(xp, np.random.default_rng(0), h, lay, 0, "int64", False) for lay in layouts)
        if _refusal(kernel, xp, args) is None:
            out.append(name)
    return tuple(out)


@st.composite
def binary_operands(draw: Any, xp: Any, kernel: dispatch.Kernel, dtypes: tuple[str, ...]) -> tuple[Any, Any]:
    """Two operands of one shape in the layouts of ``kernel``'s signature (one CSR or CSC choice for both),
    the first of one of ``dtypes``, the second mostly of the same dtype, else of any."""
    dt1 = draw(st.sampled_from(dtypes), label="dtype")
    dt2 = dt1 if draw(st.integers(0, 2)) else draw(st.sampled_from(_dtype_names(xp)), label="other dtype")
    chosen = {m: draw(st.sampled_from(_concrete(m))) for m in set(kernel.signature)}
    layouts = [chosen[m] for m in kernel.signature]
    plain = draw(st.booleans(), label="2-D without batch or dense dimensions")
    base1, base2 = ("uint8" if d in WIDE_UNSIGNED else d for d in (dt1, dt2))
    case = draw(S.dense_cases(xp, dtype=base1, fill=False, max_batch_dims=0 if plain else 1, max_dense_dims=0 if plain else 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    hosts = [case.host, _second(draw, rng, case, base2)]
    if draw(st.integers(0, 5)) == 0:
        hosts[0] = np.zeros_like(hosts[0])  # no entries in the first operand
    mode = draw(st.sampled_from(["drawn", "finite", "finite", "inf"]), label="values")
    hosts = [_astype(_sanitize(h, mode, rng), d) for h, d in zip(hosts, (dt1, dt2))]
    index_dtypes = [case.index_dtype, case.index_dtype if draw(st.booleans()) else draw(S.index_dtypes())]
    uncoalesced = [draw(st.integers(0, 2)) == 0 for _ in range(2)]
    x, y = (
        _operand(xp, rng, h, lay, case.dense_dim, idt, u) for h, lay, idt, u in zip(hosts, layouts, index_dtypes, uncoalesced)
    )  # fmt: skip
    return x, y


SPECIAL_REALS = (0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, math.inf, -math.inf, math.nan)
# NumPy's complex expm1, log1p and tanh are not the standard's at zeros and infinities (signs of zeros, NaN
# parts at an infinity, C99's imaginary part 0 * sin(2y) of tanh(inf + yj) where the standard's is +0 for
# y > 0): those values are not drawn for them. torch's kernels put the standard's values there, which
# tests/test_torch_complex_special_cases.py checks.
NUMPY_COMPLEX_DIFFERS = frozenset({"expm1", "log1p", "tanh"})


@st.composite
def unary_operand(draw: Any, xp: Any, kernel: dispatch.Kernel, dtypes: tuple[str, ...]) -> Any:
    """A strided array (0-d to 4-D, empty ones included) of one of ``dtypes``, with special values."""
    dtype = draw(st.sampled_from(dtypes), label="dtype")
    base = "uint8" if dtype in WIDE_UNSIGNED else dtype
    case = draw(S.dense_cases(xp, dtype=base, fill=None, max_batch_dims=1, max_dense_dims=1))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    h = case.host
    if h.dtype.kind in "fc":
        if draw(st.booleans()):
            h = h / 4  # within [-1, 1], where erfinv and acos are finite
        if draw(st.booleans(), label="special values"):
            special = rng.choice(SPECIAL_REALS, h.shape)
            if h.dtype.kind == "c":
                special = special.astype(h.dtype)
                special.imag = rng.choice(SPECIAL_REALS, h.shape)  # (a multiplication would make NaNs)
            if h.dtype.kind == "c" and kernel.op in NUMPY_COMPLEX_DIFFERS:
                special[~np.isfinite(special) | (special == 0)] = 0.5 - 0.25j
            h = np.where(rng.random(h.shape) < 0.5, special, h)
        if h.dtype.kind == "c" and kernel.op in NUMPY_COMPLEX_DIFFERS:
            h = np.where(~np.isfinite(h) | (h == 0), 0.25 + 0.5j, h)
    h = _astype(h, dtype)
    shape = draw(st.sampled_from(["as drawn", "1-D", "0-d"]), label="shape")
    if shape == "1-D":
        h = h.reshape(-1)
    elif shape == "0-d" and h.size:
        h = h.reshape(-1)[0]
    return xp.asarray(h)


# -- references --------------------------------------------------------------------------------------------


def _dense(x: Any) -> Any:
    return generic_to_dense(x) if isinstance(x, xs.SparseArray) else x


def _same_fill(got: Any, want: Any) -> None:
    if isinstance(want, xs.SparseArray):
        assert isinstance(got, xs.SparseArray)
        assert type(got.fill_value) is type(want.fill_value), (got.fill_value, want.fill_value)
        assert got.fill_value == want.fill_value or (got.fill_value != got.fill_value and want.fill_value != want.fill_value)


def check_binary_kernel(kernel: dispatch.Kernel, xp: Any, x: Any, y: Any) -> None:
    layouts = (xs.layout_of(x), xs.layout_of(y))
    generic_kernel = next(k for k in dispatch.resolve(kernel.op, layouts, kernel.backend or "") if k.kind == "generic")
    with quiet():
        got = kernel.func(xp, x, y)
        try:
            want = generic_kernel.func(xp, x, y)
        except (NotImplementedError, RuntimeError):
            if kernel.op not in ("floor_divide", "remainder"):
                raise
            # torch neither divides uint64 nor promotes it with other integers, which its wrapper kernel
            # does: the dense result (NumPy's division) checks it
            want = None
        try:
            dense = getattr(xp, kernel.op)(_dense(x), _dense(y))
        except (RuntimeError, NotImplementedError):
            # torch raises for an integer division by 0 and does not divide uint64, where xsparse gives
            # NumPy's results (docs/decisions.md): NumPy's division is the reference there
            if kernel.op not in ("floor_divide", "remainder"):
                raise
            host = [np.asarray(to_numpy(_dense(v))) for v in (x, y)]
            dense = xp.asarray(getattr(np, kernel.op)(*host))
        if kernel.op == "remainder" and xp.isdtype(dense.dtype, "real floating"):
            # the standard's zero remainder takes the divisor's sign (NumPy's); torch's takes the dividend's
            divisor = xp.astype(xp.broadcast_to(_dense(y), dense.shape), dense.dtype)
            dense = xp.where(dense == 0, xp.copysign(dense, divisor), dense)
        dense = apply_products_rule(kernel.op, x, y, got, dense)
    signs = not maps_duplicates(kernel.op, x, y)
    if want is None:
        assert_sparse_equal(got, dense, check_layout=xs.layout_of(got), check_signed_zeros=signs)
        return
    assert_sparse_equal(got, _dense(want), check_layout=xs.layout_of(want), check_signed_zeros=signs)
    _same_fill(got, want)
    assert_sparse_equal(got, dense, check_layout=xs.layout_of(want), check_signed_zeros=signs)


def _other_library(op: str, h: np.ndarray, dtype: np.dtype[Any], backend: str | None) -> Any:
    """``op`` of the host values ``h``, cast to the result's dtype first, by another library than the
    kernel's: NumPy or SciPy for a torch kernel, torch for the others (SciPy's and CuPy's functions, the
    latter a port of SciPy's); None where that library is not installed."""
    if op in generic.NATIVE_ONLY_UNARY and backend != "torch":
        if not HAS_TORCH:
            return None
        import torch

        return getattr(torch.special, op)(torch.from_numpy(h.astype(dtype))).numpy()
    a = h.astype(dtype)
    if op in generic.NATIVE_ONLY_UNARY:
        from scipy import special

        out = getattr(special, op)(a)
        return np.copysign(out, a) if op == "erfinv" else out  # erfinv is odd: erfinv(-0.0) is -0.0
    return {"acos": np.arccos}.get(op, getattr(np, op))(a)


def _tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) for a result of ``dtype`` computed by two libraries."""
    if dtype in ("float32", "complex64"):
        return 1e-5, 1e-6
    return (1e-12, 1e-14) if dtype in ("float64", "complex128") else (0.0, 0.0)


def check_unary_kernel(kernel: dispatch.Kernel, xp: Any, x: Any) -> None:
    with quiet():
        got = kernel.func(xp, x)
        # SciPy's functions give NumPy scalars for 0-d arrays (the public function makes them arrays)
        got = np.asarray(got) if isinstance(got, np.generic) else got
        host = to_numpy(x)
        dtype = to_numpy(got).dtype
        other = _other_library(kernel.op, host, dtype, kernel.backend)
        if kernel.op in generic.UNARY and not xp.isdtype(x.dtype, "complex floating"):
            # the generic kernel calls the backend's own function, which is right for real values
            assert_sparse_equal(got, generic.UNARY[kernel.op](xp, x))
    if other is not None:
        rtol, atol = _tolerance(dtype_name(got.dtype))
        assert_sparse_equal(xp.asarray(to_numpy(got)), np.asarray(other), check_dtype=False, rtol=rtol, atol=atol)
        assert to_numpy(got).dtype == np.asarray(other).dtype


# -- the test ------------------------------------------------------------------------------------------------


def _features(args: tuple[Any, ...]) -> set[str]:
    """What an accepted example exercised."""
    out = {f"dtype {'/'.join(dtype_name(a.dtype) for a in args)}"}
    sparse = [a for a in args if isinstance(a, xs.SparseArray)]
    if any(a.nnz == 0 for a in sparse):
        out.add("an operand without entries")
    if sparse and all(a.nnz == 0 for a in sparse):
        out.add("no entries at all")
    if any(a.layout is xs.sparse_coo and not a.is_coalesced() for a in sparse):
        out.add("uncoalesced")
    if any(a.dense_dim() for a in sparse):
        out.add("dense dimensions")
    if any(a.ndim - a.dense_dim() > 2 for a in sparse):
        out.add("batch or more sparse dimensions")
    idts = {str(getattr(a, "index_dtype")) for a in sparse}
    if len(idts) > 1:
        out.add("mixed index dtypes")
    out |= {f"index {i.rsplit('.', 1)[-1]}" for i in idts}
    return out


def _run(kernel: dispatch.Kernel, dtypes: tuple[str, ...]) -> tuple[int, Counter[str], Counter[str]]:
    """Draw inputs for ``kernel`` (the first operand of one of ``dtypes``) and check each that it accepts:
    (how many it accepted, what they exercised, why it declined the others)."""
    xp = _namespace(kernel)
    binary = len(kernel.signature) == 2
    accepted: list[int] = []
    features: Counter[str] = Counter()
    declined: Counter[str] = Counter()

    @DRAWS
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        args: tuple[Any, ...]
        if binary:
            args = data.draw(binary_operands(xp, kernel, dtypes))
        else:
            args = (data.draw(unary_operand(xp, kernel, dtypes)),)
        reason = _refusal(kernel, xp, args)
        if reason is not None:
            declined[reason.split("(")[0][:100]] += 1
        assume(reason is None)
        if binary:
            check_binary_kernel(kernel, xp, *args)
        else:
            check_unary_kernel(kernel, xp, args[0])
        accepted.append(1)
        features.update(_features(args))

    run()
    return len(accepted), features, declined


DTYPE_KINDS = {
    "bool": ("bool",),
    "signed": ("int8", "int16", "int32", "int64"),
    "unsigned": ("uint8", *WIDE_UNSIGNED),
    "real": ("float32", "float64"),
    "complex": ("complex64", "complex128"),
}


def _kernel_params() -> list[Any]:
    """(kernel, dtypes): each native kernel with each kind of dtype that it takes (of the first operand)."""
    out = []
    for k in NATIVE:
        reason = backend_skip_reason(k.backend or "")
        if reason is not None:
            out.append(pytest.param(k, (), id=_kernel_id(k), marks=pytest.mark.skip(reason=reason)))
            continue
        for kind, names in DTYPE_KINDS.items():
            dtypes = tuple(d for d in names if d in _accepted_dtypes(k))
            if dtypes:
                out.append(pytest.param(k, dtypes, id=f"{_kernel_id(k)}-{kind}"))
    return out


@pytest.mark.parametrize(("kernel", "dtypes"), _kernel_params())
def test_native_kernel_on_drawn_inputs(kernel: dispatch.Kernel, dtypes: tuple[str, ...]) -> None:
    accepted, _, declined = _run(kernel, dtypes)
    assert accepted >= MIN_ACCEPTED, (
        f"{_kernel_id(kernel)} accepted {accepted} of the inputs drawn with dtypes {dtypes} (at least "
        f"{MIN_ACCEPTED} expected); declined: {dict(declined.most_common(5))}"
    )


@pytest.mark.parametrize("kernel", NATIVE, ids=_kernel_id)
def test_every_native_kernel_takes_some_dtype(kernel: dispatch.Kernel) -> None:
    # a kernel that declines every dtype would get no parameter in the test above, and be tested by nothing
    if (reason := backend_skip_reason(kernel.backend or "")) is not None:
        pytest.skip(reason)
    assert _accepted_dtypes(kernel), f"{_kernel_id(kernel)} declines a small 2-D input of every dtype"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_hybrid_coo_product_keeps_signed_zeros() -> None:
    # found by the draws above: torch's mul of two COO tensors with dense dimensions gave +0.0 for 0.0 * -2.0
    # and -0.0 * 2.0 (its dense product gives -0.0); the kernel declines those, the generic kernel computes them
    import torch

    for values, other in (([0.0, 1.0], [-2.0, 1.0]), ([-0.0, 1.0], [2.0, 1.0])):
        x = xs.sparse_coo_array(torch.tensor([[0]]), torch.tensor([values]), (1, 2))
        y = xs.sparse_coo_array(torch.tensor([[0]]), torch.tensor([other]), (1, 2))
        assert_sparse_equal(xs.multiply(x, y), xs.to_dense(x) * xs.to_dense(y), check_layout=xs.sparse_coo)
