"""xsparse: torch.sparse's sparse arrays as an Array API namespace, with pluggable backends.

>>> import xsparse as xs
>>> a = xs.sparse_csr_array([0, 2, 4], [0, 1, 0, 1], [1.0, 2.0, 3.0, 4.0])
>>> a.T.layout
xsparse.sparse_csc
"""

from __future__ import annotations

import sys

from . import dispatch
from ._conversion import (
    coalesce,
    is_coalesced,
    layout_of,
    matrix_transpose,
    to_backend,
    to_dense,
    to_sparse,
    to_sparse_bsc,
    to_sparse_bsr,
    to_sparse_coo,
    to_sparse_csc,
    to_sparse_csr,
)
from ._creation import (
    empty,
    sparse_bsc_array,
    sparse_bsr_array,
    sparse_compressed_array,
    sparse_coo_array,
    sparse_csc_array,
    sparse_csr_array,
    zeros,
)
from ._elementwise import (  # noqa: A004  (the Array API names shadow builtins, as in NumPy)
    abs,
    acos,
    acosh,
    add,
    angle,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    conj,
    conj_physical,
    copysign,
    cos,
    cosh,
    deg2rad,
    divide,
    equal,
    erf,
    erfinv,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    hypot,
    imag,
    isfinite,
    isinf,
    isnan,
    isneginf,
    isposinf,
    less,
    less_equal,
    log,
    log10,
    log1p,
    log2,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    multiply,
    negative,
    nextafter,
    not_equal,
    positive,
    pow,
    rad2deg,
    real,
    reciprocal,
    remainder,
    round,
    sgn,
    sign,
    signbit,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    trunc,
)
from ._errors import (
    BackendMismatchError,
    DensificationError,
    InvariantError,
    LayoutError,
    NoKernelError,
    SparseEfficiencyWarning,
    XSparseError,
)
from ._namespace import bound_namespace
from .backends import (
    Backend,
    default_backend,
    get_backend,
    get_default_backend,
    registered_backends,
    set_default_backend,
)
from .backends import array_api as _generic_kernels  # noqa: F401  (registers the generic kernels)
from .formats import (
    COOArray,
    CompressedArray,
    Layout,
    SparseArray,
    check_sparse_tensor_invariants,
    sparse_bsc,
    sparse_bsr,
    sparse_coo,
    sparse_csc,
    sparse_csr,
    sparse_semi_structured,
    strided,
)

__version__ = "0.1.0"

__all__ = [
    # layouts
    "Layout",
    "strided",
    "sparse_coo",
    "sparse_csr",
    "sparse_csc",
    "sparse_bsr",
    "sparse_bsc",
    "sparse_semi_structured",
    # array classes
    "SparseArray",
    "COOArray",
    "CompressedArray",
    # construction
    "sparse_coo_array",
    "sparse_compressed_array",
    "sparse_csr_array",
    "sparse_csc_array",
    "sparse_bsr_array",
    "sparse_bsc_array",
    "zeros",
    "empty",
    # conversion
    "to_sparse",
    "to_sparse_coo",
    "to_sparse_csr",
    "to_sparse_csc",
    "to_sparse_bsr",
    "to_sparse_bsc",
    "to_dense",
    "coalesce",
    "is_coalesced",
    "matrix_transpose",
    "layout_of",
    # elementwise functions
    "abs",
    "acos",
    "acosh",
    "add",
    "angle",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "ceil",
    "conj",
    "conj_physical",
    "copysign",
    "cos",
    "cosh",
    "deg2rad",
    "divide",
    "equal",
    "erf",
    "erfinv",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "isneginf",
    "isposinf",
    "less",
    "less_equal",
    "log",
    "log10",
    "log1p",
    "log2",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "nextafter",
    "not_equal",
    "positive",
    "pow",
    "rad2deg",
    "real",
    "reciprocal",
    "remainder",
    "round",
    "sgn",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
    # backends
    "Backend",
    "to_backend",
    "get_backend",
    "registered_backends",
    "default_backend",
    "set_default_backend",
    "get_default_backend",
    "bound_namespace",
    # invariants, dispatch, errors
    "check_sparse_tensor_invariants",
    "kernels",
    "XSparseError",
    "LayoutError",
    "InvariantError",
    "NoKernelError",
    "DensificationError",
    "BackendMismatchError",
    "SparseEfficiencyWarning",
]


def kernels(op: str | None = None) -> list[dispatch.Kernel]:
    """The registered kernels (of one operation, or all), for introspection.

    The native kernels of a backend are registered once its library has been imported (importing
    xsparse imports no backend library but NumPy), so the list covers every backend in use.

    Examples
    --------
    >>> import xsparse as xs
    >>> sorted({k.kind for k in xs.kernels("convert")})
    ['generic', 'native']
    """
    for backend in registered_backends():
        if backend.library in sys.modules and backend.kernels is not None:
            backend.load()
    return dispatch.kernels(op)


def __dir__() -> list[str]:
    return sorted(__all__)
