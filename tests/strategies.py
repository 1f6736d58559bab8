"""The Hypothesis strategies of the tests: those of the conformance suite (``conformance/strategies.py``,
installed as ``xsparse.conformance.strategies``), so the tests and the suite draw from one set."""

from __future__ import annotations

from xsparse.conformance.strategies import (
    DTYPE_NAMES,
    INDEX_DTYPE_NAMES,
    CooCase,
    DenseCase,
    DeviceNamespace,
    coo_dense_cases,
    device_named,
    dense_cases,
    dtype_names,
    dtypes,
    fill_values,
    index_dtypes,
    is_fill,
    nonzero_values,
    sizes,
    uncoalesced_coo,
    uncoalesced_like,
    unequal_nse_cases,
)

__all__ = [
    "DTYPE_NAMES",
    "INDEX_DTYPE_NAMES",
    "DenseCase",
    "DeviceNamespace",
    "device_named",
    "is_fill",
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
