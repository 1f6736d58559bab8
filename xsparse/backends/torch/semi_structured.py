"""Native kernels of the torch backend for the semi-structured (2:4) layout.

On CPU torch has no semi-structured kernels (its ``SparseSemiStructuredTensor`` needs CUDA), so the
generic kernels compute every product and conversion; what torch adds is autograd, which ``detach`` cuts.
"""

from __future__ import annotations

from typing import Any

from ...dispatch import register
from ...formats import sparse_semi_structured
from ...formats._semi_structured import SemiStructuredArray

__all__: list[str] = []


@register("detach", (sparse_semi_structured,), backend="torch")
def _detach_semi_structured_torch(xp: Any, a: SemiStructuredArray) -> SemiStructuredArray:
    """detach(semi-structured) on torch: the values detached from autograd, the metadata shared; O(1)."""
    return a._with_values(a._vals.detach(), a.fill_value)
