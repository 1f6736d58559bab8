"""Runs tests/test_cupy_backend.py with NumPy and SciPy standing in for CuPy and cupyx
(``tests/cupy_standin.py``), where CuPy and a GPU are absent: the CuPy kernels' Python side (index
narrowing, batch folding, transposed views, result orders, reasons to decline) and the index arithmetic
of the two custom kernels (their C bodies translated into Python) are then tested on every machine, CI
included. Where CuPy and a GPU are present, test_cupy_backend.py runs on them instead."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import backend_skip_reason

HERE = Path(__file__).resolve().parent


def test_the_cupy_kernels_python_side_on_standins() -> None:
    if backend_skip_reason("cupy") is None:
        pytest.skip("CuPy and a GPU are here: tests/test_cupy_backend.py runs on them")
    env = {**os.environ, "XSPARSE_CUPY_STANDIN": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(HERE / "test_cupy_backend.py")]
    proc = subprocess.run(command, env=env, cwd=HERE.parent, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    passed = re.search(r"(\d+) passed", proc.stdout)
    skipped = re.search(r"(\d+) skipped", proc.stdout)
    # the conversions, the products (the two custom kernels' bodies too) and the reasons to decline ran;
    # only the tests that need CuPy itself skip (wrapped buffers, public functions on CuPy arrays, the move
    # to the host, device addresses)
    assert passed is not None and int(passed.group(1)) >= 18, proc.stdout[-2000:]
    assert skipped is not None and int(skipped.group(1)) <= 5, proc.stdout[-2000:]
    needing_cupy = sum(int(n) for n in re.findall(r"SKIPPED \[(\d+)\][^\n]*needs CuPy itself", proc.stdout))
    assert needing_cupy == int(skipped.group(1)), proc.stdout[-2000:]
