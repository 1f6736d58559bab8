"""xsparse's ctypes binding of cuSPARSELt (``xsparse/backends/cupy/_cusparselt.py``), without a GPU.

CuPy's wheels ship no cuSPARSELt binding, so the CuPy backend's 2:4 kernels call the library of the NVIDIA
wheel through ctypes. Here a stand-in library, compiled from the C below with the C compiler that builds
xsparse's CPU kernels, exports the same symbols and records what each call received: the tests check that
every argument reaches the C function in its place and type (64-bit sizes, 32-bit enumerators, the opaque
objects by address, the streams array), that results come back, that a failing status raises with its
code, and that releases before 0.5 are refused. The library's behaviour itself is tested on a GPU
(``tests/test_cupy_semi_structured.py``).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from xsparse.backends.cupy import _cusparselt as binding_module

_SOURCE = r"""
#include <stdint.h>
#include <stddef.h>
#include <string.h>

static int major = 0, minor = 8, fail_with = 0;
static int64_t last[16];   /* the integer arguments of the last call */
static const void* ptrs[16]; /* its pointer arguments */

void fake_set(int a, int b, int f) { major = a; minor = b; fail_with = f; }
int64_t fake_int(int i) { return last[i]; }
const void* fake_ptr(int i) { return ptrs[i]; }

int cusparseLtGetProperty(int which, int* value) { *value = which == 0 ? major : which == 1 ? minor : 1; return 0; }
int cusparseLtInit(void* h) { memset(h, 7, 512); ptrs[0] = h; return fail_with; }
int cusparseLtDenseDescriptorInit(const void* h, void* d, int64_t r, int64_t c, int64_t ld, uint32_t al, int t, int o) {
  ptrs[0] = h; ptrs[1] = d; last[0] = r; last[1] = c; last[2] = ld; last[3] = al; last[4] = t; last[5] = o; return fail_with; }
int cusparseLtStructuredDescriptorInit(const void* h, void* d, int64_t r, int64_t c, int64_t ld, uint32_t al, int t, int o, int s) {
  ptrs[0] = h; ptrs[1] = d; last[0] = r; last[1] = c; last[2] = ld; last[3] = al; last[4] = t; last[5] = o; last[6] = s; return fail_with; }
int cusparseLtMatDescriptorDestroy(const void* d) { ptrs[0] = d; return fail_with; }
int cusparseLtMatmulDescriptorInit(const void* h, void* m, int oa, int ob, const void* a, const void* b, const void* c, const void* d, int ct) {
  ptrs[0] = h; ptrs[1] = m; ptrs[2] = a; ptrs[3] = b; ptrs[4] = c; ptrs[5] = d; last[0] = oa; last[1] = ob; last[2] = ct; return fail_with; }
int cusparseLtMatmulAlgSelectionInit(const void* h, void* s, const void* m, int alg) { ptrs[0] = h; ptrs[1] = s; ptrs[2] = m; last[0] = alg; return fail_with; }
#ifndef BEFORE_0_8
int cusparseLtMatmulAlgSelectionDestroy(const void* s) { ptrs[0] = s; return fail_with; }
#endif
int cusparseLtMatmulAlgSetAttribute(const void* h, void* s, int a, const void* data, size_t n) {
  ptrs[0] = h; ptrs[1] = s; last[0] = a; last[1] = *(const int*)data; last[2] = (int64_t)n; return fail_with; }
int cusparseLtMatmulAlgGetAttribute(const void* h, const void* s, int a, void* data, size_t n) {
  ptrs[0] = h; ptrs[1] = s; last[0] = a; last[2] = (int64_t)n; *(int*)data = 40 + a; return fail_with; }
int cusparseLtMatmulPlanInit(const void* h, void* p, const void* m, const void* s) { ptrs[0] = h; ptrs[1] = p; ptrs[2] = m; ptrs[3] = s; return fail_with; }
int cusparseLtMatmulPlanDestroy(const void* p) { ptrs[0] = p; return fail_with; }
int cusparseLtMatmulGetWorkspace(const void* h, const void* p, size_t* n) { ptrs[0] = h; ptrs[1] = p; *n = 123456789012ULL; return fail_with; }
static int run(const void* h, const void* p, const void* al, const void* a, const void* b, const void* be, const void* c, void* d, void* w, void** streams, int32_t n) {
  ptrs[0] = h; ptrs[1] = p; ptrs[2] = al; ptrs[3] = a; ptrs[4] = b; ptrs[5] = be; ptrs[6] = c; ptrs[7] = d; ptrs[8] = w;
  last[0] = n; last[1] = streams ? (int64_t)(intptr_t)streams[0] : -1; return fail_with; }
int cusparseLtMatmul(const void* h, const void* p, const void* al, const void* a, const void* b, const void* be, const void* c, void* d, void* w, void** s, int32_t n) {
  return run(h, p, al, a, b, be, c, d, w, s, n); }
int cusparseLtMatmulSearch(const void* h, void* p, const void* al, const void* a, const void* b, const void* be, const void* c, void* d, void* w, void** s, int32_t n) {
  return run(h, p, al, a, b, be, c, d, w, s, n); }
int cusparseLtSpMMAPruneCheck2(const void* h, const void* d, int sa, int op, const void* in, int* valid, void* stream) {
  ptrs[0] = h; ptrs[1] = d; ptrs[2] = in; ptrs[3] = valid; ptrs[4] = stream; last[0] = sa; last[1] = op; return fail_with; }
int cusparseLtSpMMACompressedSize2(const void* h, const void* d, size_t* size, size_t* buffer) { ptrs[0] = h; ptrs[1] = d; *size = 5000000000ULL; *buffer = 77; return fail_with; }
int cusparseLtSpMMACompress2(const void* h, const void* d, int sa, int op, const void* in, void* out, void* buf, void* stream) {
  ptrs[0] = h; ptrs[1] = d; ptrs[2] = in; ptrs[3] = out; ptrs[4] = buf; ptrs[5] = stream; last[0] = sa; last[1] = op; return fail_with; }
"""


def _compile(tmp_path_factory: pytest.TempPathFactory, *flags: str) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None or not sys.platform.startswith("linux"):
        pytest.skip("needs a C compiler on Linux to build the stand-in library")
    folder = tmp_path_factory.mktemp("cusparselt")
    source, library = folder / "fake.c", folder / "libcusparseLt.so.0"
    source.write_text(_SOURCE)
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", *flags, "-o", str(library), str(source)], check=True, capture_output=True)
    return library


@pytest.fixture(scope="module")
def fake_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _compile(tmp_path_factory)


@pytest.fixture(scope="module")
def library_before_0_8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in as a 0.7 release: without cusparseLtMatmulAlgSelectionDestroy, which 0.8 introduced."""
    return _compile(tmp_path_factory, "-DBEFORE_0_8")


@pytest.fixture()
def lt(fake_library: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(binding_module, "_candidates", lambda: [str(fake_library)])
    monkeypatch.setattr(binding_module, "_LOADED", [])
    binding = binding_module.load()
    binding.fake = ctypes.CDLL(str(fake_library))
    binding.fake.fake_int.restype = ctypes.c_int64
    binding.fake.fake_ptr.restype = ctypes.c_void_p
    binding.fake.fake_set(0, 8, 0)
    yield binding
    binding.fake.fake_set(0, 8, 0)


def _ints(lt: Any, n: int) -> list[int]:
    return [int(lt.fake.fake_int(i)) for i in range(n)]


def _ptr(lt: Any, i: int) -> int | None:
    return lt.fake.fake_ptr(i)


def _address(obj: Any) -> int:
    return ctypes.addressof(obj._buffer)


def test_loads_the_library_once_and_reads_its_version(lt: Any, fake_library: Path) -> None:
    assert lt.version == (0, 8, 1) and lt.path == str(fake_library)
    assert binding_module.load() is lt


def test_descriptors_receive_every_argument_in_place(lt: Any) -> None:
    h, d = lt.Handle(), lt.MatDescriptor()
    lt.init(h)
    assert _ptr(lt, 0) == _address(h) and h._buffer.raw[:4] == b"\x07" * 4  # the library wrote into the object
    lt.structuredDescriptorInit(h, d, 2**33, 64, 2**33 + 1, 16, 2, 2, lt.CUSPARSELT_SPARSITY_50_PERCENT)
    assert (_ptr(lt, 0), _ptr(lt, 1)) == (_address(h), _address(d))
    assert _ints(lt, 7) == [2**33, 64, 2**33 + 1, 16, 2, 2, 0]
    lt.denseDescriptorInit(h, d, 3, 5, 7, 16, 14, 1)
    assert _ints(lt, 6) == [3, 5, 7, 16, 14, 1]
    lt.matDescriptorDestroy(d)
    assert _ptr(lt, 0) == _address(d)


def test_matmul_descriptor_selection_and_plan(lt: Any) -> None:
    h, m, sel, plan = lt.Handle(), lt.MatmulDescriptor(), lt.MatmulAlgSelection(), lt.MatmulPlan()
    a, b, c, d = (lt.MatDescriptor() for _ in range(4))
    lt.matmulDescriptorInit(h, m, 0, 1, a, b, c, d, lt.CUSPARSE_COMPUTE_32F)
    assert [_ptr(lt, i) for i in range(6)] == [_address(o) for o in (h, m, a, b, c, d)]
    assert _ints(lt, 3) == [0, 1, 2]
    lt.matmulAlgSelectionInit(h, sel, m, lt.CUSPARSELT_MATMUL_ALG_DEFAULT)
    assert [_ptr(lt, i) for i in range(3)] == [_address(o) for o in (h, sel, m)]
    value = ctypes.c_int(25)
    lt.matmulAlgSetAttribute(h, sel, lt.CUSPARSELT_MATMUL_SPLIT_K, ctypes.addressof(value), 4)
    assert _ints(lt, 3) == [3, 25, 4]
    lt.matmulAlgGetAttribute(h, sel, lt.CUSPARSELT_MATMUL_SPLIT_K_MODE, ctypes.addressof(value), 4)
    assert value.value == 44 and _ints(lt, 1) == [4]
    lt.matmulPlanInit(h, plan, m, sel)
    assert [_ptr(lt, i) for i in range(4)] == [_address(o) for o in (h, plan, m, sel)]
    assert lt.matmulGetWorkspace(h, plan) == 123456789012  # a size_t past 32 bits
    lt.matmulPlanDestroy(plan)
    lt.matmulAlgSelectionDestroy(sel)


@pytest.mark.parametrize("name", ["matmul", "matmulSearch"])
def test_products_pass_pointers_and_the_stream(lt: Any, name: str) -> None:
    h, plan = lt.Handle(), lt.MatmulPlan()
    pointers = [0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000]
    getattr(lt, name)(h, plan, *pointers)
    assert [_ptr(lt, i) for i in range(9)] == [_address(h), _address(plan), *pointers]
    assert _ints(lt, 2) == [0, -1]  # the legacy default stream: no streams array
    getattr(lt, name)(h, plan, *pointers, stream=0xABC0)
    assert _ints(lt, 2) == [1, 0xABC0]


def test_prune_check_and_compression(lt: Any) -> None:
    h, d = lt.Handle(), lt.MatDescriptor()
    lt.spMMAPruneCheck2(h, d, 1, 0, 0x1000, 0x2000)
    assert [_ptr(lt, i) for i in range(5)] == [_address(h), _address(d), 0x1000, 0x2000, None]
    assert _ints(lt, 2) == [1, 0]
    assert lt.spMMACompressedSize2(h, d) == (5000000000, 77)
    lt.spMMACompress2(h, d, 1, 1, 0x1000, 0x2000, 0x3000, stream=0x40)
    assert [_ptr(lt, i) for i in range(6)] == [_address(h), _address(d), 0x1000, 0x2000, 0x3000, 0x40]
    assert _ints(lt, 2) == [1, 1]


def test_a_failing_status_raises_with_its_code(lt: Any) -> None:
    lt.fake.fake_set(0, 8, 10)
    with pytest.raises(binding_module.CuSparseLtError, match=r"cusparseLtMatmulPlanInit: CUSPARSE_STATUS_NOT_SUPPORTED \(10\)") as info:
        lt.matmulPlanInit(lt.Handle(), lt.MatmulPlan(), lt.MatmulDescriptor(), lt.MatmulAlgSelection())
    assert info.value.status == 10


def test_releases_before_0_5_are_refused(fake_library: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ctypes.CDLL(str(fake_library))
    fake.fake_set(0, 4, 0)
    try:
        monkeypatch.setattr(binding_module, "_candidates", lambda: [str(fake_library)])
        monkeypatch.setattr(binding_module, "_LOADED", [])
        with pytest.raises(ImportError, match=r"cuSPARSELt 0\.4\.1 at .* is older than 0\.5"):
            binding_module.load()
    finally:
        fake.fake_set(0, 8, 0)


def test_a_missing_library_is_named_with_where_it_was_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = str(tmp_path / "libcusparseLt.so.0")
    monkeypatch.setattr(binding_module, "_candidates", lambda: [missing])
    monkeypatch.setattr(binding_module, "_LOADED", [])
    with pytest.raises(OSError, match=r"cannot load cuSPARSELt \(libcusparseLt\.so\.0\): .*libcusparseLt\.so\.0.*Install the nvidia-cusparselt"):
        binding_module.load()


def test_the_wheel_folders_are_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    placed = tmp_path / "nvidia" / "cusparselt" / "lib" / "libcusparseLt.so.0"
    placed.parent.mkdir(parents=True)
    placed.write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    # the wheel's copy first (torch's, and the newest in the environment), then the name on the loader's path
    assert binding_module._candidates()[:2] == [str(placed), "libcusparseLt.so.0"]


def test_a_release_before_0_8_loads_without_destroying_selections(library_before_0_8: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ctypes.CDLL(str(library_before_0_8))
    fake.fake_set(0, 7, 0)
    monkeypatch.setattr(binding_module, "_candidates", lambda: [str(library_before_0_8)])
    monkeypatch.setattr(binding_module, "_LOADED", [])
    lt = binding_module.load()
    assert lt.version[:2] == (0, 7)
    selection = lt.MatmulAlgSelection()
    lt.matmulAlgSelectionInit(lt.Handle(), selection, lt.MatmulDescriptor(), lt.CUSPARSELT_MATMUL_ALG_DEFAULT)
    fake.fake_ptr.restype = ctypes.c_void_p
    assert fake.fake_ptr(1) == ctypes.addressof(selection._buffer)  # the init reached the library
    plan = lt.MatmulPlan()
    lt.matmulPlanDestroy(plan)  # records its argument in the same slot as a selection's destroy would
    lt.matmulAlgSelectionDestroy(selection)  # 0.7 has nothing to call: no error, and no call made
    assert fake.fake_ptr(0) == ctypes.addressof(plan._buffer)
