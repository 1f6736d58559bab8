"""The sparse conformance suite: every registered operation and layout signature of a backend, on
Hypothesis inputs, against the same backend's dense computation and the generic kernels.

Run it with ``python -m xsparse conformance --backend NAME``; see ``docs/conformance.md``.
"""
