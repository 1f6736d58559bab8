// Compiled CPU conversion kernels of the NumPy backend: COO -> compressed, dense -> compressed and
// compressed -> dense, for 2-D arrays with optional trailing dense dimensions (the caller linearises
// batch dimensions into the major index).
//
// The module only uses the Python C API and the buffer protocol, so building it needs nothing but a
// C++17 compiler (no NumPy headers). Outputs are allocated by the Python wrapper (`_cpu.py`) with
// numpy and lent here as writable buffers, so their memory is visible to numpy/tracemalloc and no
// result is copied out of a C++ container. Every kernel releases the GIL while it runs.
//
// Trailing dense dimensions are seen here as one "block" axis of B elements per specified entry;
// the wrapper merges them with a reshape (a view whenever numpy can express it as one).

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__GNUC__) && defined(__x86_64__) && !defined(XSPARSE_NO_AVX2)
#include <immintrin.h>  // the AVX2 tiles' streaming stores, in functions built for AVX2 only
#endif

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#endif
#include <cstdlib>
#include <new>

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMinEntries = 1 << 15;
// The scatter form of a product (A^T @ D) runs in parallel on private copies of its output up to this
// many bytes of copies; a larger output is shared between the threads by columns. Tests lower it
// (scatter_copy_limit) to reach the column split without a 256 MiB output.
double scatter_copy_max_bytes = 256.0 * (1 << 20);

// Slices of up to kRankSortMax entries are sorted by rank (see sort_and_emit), longer ones of up to
// kInsertionSortMax by a stable insertion sort in place, which for them beats std::sort of pairs
// (what SciPy does) by avoiding the pair copies and the sort's set-up.
constexpr int64_t kRankSortMax = 16;
constexpr int64_t kInsertionSortMax = 64;

// The COO scatter prefetches the destination of the entry this far ahead, and the cursor of the
// one twice as far: its writes go to random places, and without prefetching each waits for its
// cache miss in turn (measured: the scatter took about twice as long).
constexpr int64_t kPrefetchDistance = 32;
// The output size (bytes) from which the transpose's scatter prefetches its destinations.
constexpr int64_t kPrefetchMinBytes = int64_t{8} << 20;

// ---------------------------------------------------------------------------------------------
// Value types and their arithmetic.

// numpy's bool is one byte holding 0 or 1; reading it through C++ `bool` would be undefined for any
// other byte, so it is kept as a byte with logical semantics.
struct Bool8 {
    uint8_t v;
};

// Whether any bit of x is set. For the floating types (and both parts of a complex) that is "x is not
// +0.0": -0.0 has its sign bit set and NaN its exponent, and +0.0 is the only value whose bits are all
// zero; for the integers it is x != 0. One integer compare per value, which vectorises.
template <class T>
inline bool any_bit_set(const T& x) {
    if constexpr (sizeof(T) == 16) {
        uint64_t w[2];
        std::memcpy(w, &x, sizeof(T));
        return (w[0] | w[1]) != 0;
    } else {
        using U = std::conditional_t<sizeof(T) == 8, uint64_t,
                  std::conditional_t<sizeof(T) == 4, uint32_t, std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
        static_assert(sizeof(U) == sizeof(T), "any_bit_set: unsupported value size");
        U u;
        std::memcpy(&u, &x, sizeof(T));
        return u != 0;
    }
}

template <class T>
struct ValueOps {
    // Whether x is a specified element of an array with fill value +0 (docs/decisions.md, "Fill
    // values"): every value but +0.0 (per part of a complex) is, so -0.0 and NaN are kept.
    static bool specified(const T& x) { return any_bit_set(x); }

    static void add_to(T& acc, const T& x) {
        if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
            // numpy's integer sums wrap around; signed overflow is undefined in C++, unsigned is not.
            using U = std::make_unsigned_t<T>;
            acc = static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(x)));
        } else if constexpr (std::is_integral_v<T>) {
            acc = static_cast<T>(acc + x);
        } else {
            acc += x;
        }
    }
};

template <class T>
struct IsComplex : std::false_type {};
template <class R>
struct IsComplex<std::complex<R>> : std::true_type {};

// acc += x for a scatter into an output of zeros: where acc is still +0 (all bits zero) it becomes x,
// so that a stored -0.0 keeps its sign (+0.0 + -0.0 is +0.0). In a valid compressed array every
// position is written once (plain indices are distinct within a slice), so this is assignment; of
// unchecked duplicates it sums from the first value, which differs from a sum from +0 only in that a
// prefix that cancels to +0.0 followed by -0.0 gives -0.0.
template <class T>
inline void scatter_add(T& acc, const T& x) {
    if constexpr (std::is_floating_point_v<T> || IsComplex<T>::value) {
        if (!any_bit_set(acc)) {
            acc = x;
            return;
        }
    }
    ValueOps<T>::add_to(acc, x);
}

template <>
struct ValueOps<Bool8> {
    static bool specified(const Bool8& x) { return x.v != 0; }
    static void add_to(Bool8& acc, const Bool8& x) { acc.v = static_cast<uint8_t>((acc.v | x.v) != 0); }
};

template <class T>
struct Tag {
    using type = T;
};

// Calls f(Tag<T>{}) for the value type with numpy kind `kind` ('b', 'i', 'u', 'f', 'c') and the
// given item size; returns false when that combination is not supported.
template <class F>
bool dispatch_value(int kind, Py_ssize_t itemsize, F&& f) {
    switch (kind) {
        case 'b':
            if (itemsize == 1) return f(Tag<Bool8>{}), true;
            break;
        case 'i':
            if (itemsize == 1) return f(Tag<int8_t>{}), true;
            if (itemsize == 2) return f(Tag<int16_t>{}), true;
            if (itemsize == 4) return f(Tag<int32_t>{}), true;
            if (itemsize == 8) return f(Tag<int64_t>{}), true;
            break;
        case 'u':
            if (itemsize == 1) return f(Tag<uint8_t>{}), true;
            if (itemsize == 2) return f(Tag<uint16_t>{}), true;
            if (itemsize == 4) return f(Tag<uint32_t>{}), true;
            if (itemsize == 8) return f(Tag<uint64_t>{}), true;
            break;
        case 'f':
            if (itemsize == 4) return f(Tag<float>{}), true;
            if (itemsize == 8) return f(Tag<double>{}), true;
            break;
        case 'c':
            if (itemsize == 8) return f(Tag<std::complex<float>>{}), true;
            if (itemsize == 16) return f(Tag<std::complex<double>>{}), true;
            break;
        default:
            break;
    }
    return false;
}

// Calls f(Tag<I>{}) for a signed index type of 4 or 8 bytes.
template <class F>
void dispatch_index(Py_ssize_t itemsize, F&& f) {
    if (itemsize == 4) {
        f(Tag<int32_t>{});
    } else {
        f(Tag<int64_t>{});
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers.

// A buffer lent by a Python object, released when this goes out of scope.
class Buffer {
  public:
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() {
        if (held_) PyBuffer_Release(&view_);
    }

    // Strided (any strides, possibly negative) when `contiguous` is false, else C-contiguous.
    bool acquire(PyObject* obj, const char* name, int ndim, bool writable, bool contiguous) {
        return acquire(obj, name, ndim, ndim, writable, contiguous);
    }

    // The same with between min_ndim and max_ndim dimensions.
    bool acquire(PyObject* obj, const char* name, int min_ndim, int max_ndim, bool writable, bool contiguous) {
        int flags = contiguous ? PyBUF_C_CONTIGUOUS : PyBUF_STRIDES;
        flags |= PyBUF_FORMAT;
        if (writable) flags |= PyBUF_WRITABLE;
        if (PyObject_GetBuffer(obj, &view_, flags) < 0) return false;
        held_ = true;
        if (min_ndim == max_ndim && view_.ndim != min_ndim) {
            PyErr_Format(PyExc_ValueError, "%s must be %d-dimensional, got %d dimensions", name, min_ndim,
                         view_.ndim);
            return false;
        }
        if (view_.ndim < min_ndim || view_.ndim > max_ndim) {
            PyErr_Format(PyExc_ValueError, "%s must have %d to %d dimensions, got %d", name, min_ndim, max_ndim,
                         view_.ndim);
            return false;
        }
        return true;
    }

    // Checks that the buffer holds signed integers of 4 or 8 bytes.
    bool check_index(const char* name) const {
        const char* fmt = view_.format ? view_.format : "B";
        while (*fmt == '@' || *fmt == '=' || *fmt == '<') ++fmt;
        const bool is_int = (*fmt == 'i' || *fmt == 'l' || *fmt == 'q') && fmt[1] == '\0';
        if (!is_int || (view_.itemsize != 4 && view_.itemsize != 8)) {
            PyErr_Format(PyExc_TypeError, "%s must hold int32 or int64 values (buffer format '%s')", name,
                         view_.format ? view_.format : "B");
            return false;
        }
        return true;
    }

    char* ptr() const { return static_cast<char*>(view_.buf); }
    int ndim() const { return view_.ndim; }
    const char* format() const { return view_.format ? view_.format : "B"; }
    Py_ssize_t itemsize() const { return view_.itemsize; }
    Py_ssize_t shape(int i) const { return view_.shape[i]; }
    // Contiguous requests may leave strides NULL; they are then the C-order ones.
    Py_ssize_t stride(int i) const {
        if (view_.strides) return view_.strides[i];
        Py_ssize_t s = view_.itemsize;
        for (int d = view_.ndim - 1; d > i; --d) s *= view_.shape[d];
        return s;
    }

  private:
    Py_buffer view_{};
    bool held_ = false;
};

// A read-only strided 1-D view of typed elements.
template <class T>
struct Strided1 {
    const char* base;
    Py_ssize_t stride;
    T operator[](int64_t i) const {
        T x;
        std::memcpy(&x, base + i * stride, sizeof(T));
        return x;
    }
};

// Copies a block of B values, read with stride `stride` (bytes), to contiguous `dst`.
template <class T>
inline void load_block(T* dst, const char* src, int64_t B, Py_ssize_t stride) {
    if (stride == static_cast<Py_ssize_t>(sizeof(T))) {
        std::memcpy(dst, src, static_cast<size_t>(B) * sizeof(T));
    } else {
        for (int64_t b = 0; b < B; ++b) std::memcpy(dst + b, src + b * stride, sizeof(T));
    }
}

template <class T>
inline void add_block(T* acc, const T* x, int64_t B) {
    for (int64_t b = 0; b < B; ++b) ValueOps<T>::add_to(acc[b], x[b]);
}

inline int max_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// ---------------------------------------------------------------------------------------------
// COO -> compressed.
//
// Algorithm: a counting scatter puts every entry in its major slice in input order (stable), then
// each slice is sorted by minor index (stable) and, if asked, its duplicates are summed in place.
// The output arrays are the only large buffers: they are allocated at the input's nnz, compacted
// in place and shrunk by the caller, so the peak is about nnz_in / nnz_out times the result.
//
// The scatter is the expensive, memory-bound step (random writes, prefetched). With a workspace
// of one counter array per thread, the input is split into one contiguous range per thread and
// each thread scatters its range to its own precomputed offsets, so no two threads write the same
// element, no atomics are needed and the result is identical to the serial (stable) one. Without a
// workspace the classic serial scatter uses indptr itself as the cursors.
//
// The sort/sum pass is parallel over contiguous groups of rows of equal nnz; each group compacts
// its rows towards the group's start, then the groups are moved together with one memmove each
// (cheap next to the scatter: a sequential copy).

template <class T>
struct RowScratch {
    std::vector<std::pair<int64_t, int64_t>> keys;  // (minor index, position) for long rows
    std::vector<T> block;                           // one value block, or a rank-sorted slice
};

// Stable sort of one major slice: n entries, indices idx[0..n) and value blocks val[k*B..(k+1)*B).
template <class I, class T>
void sort_slice(I* idx, T* val, int64_t n, int64_t B, RowScratch<T>& scratch) {
    int64_t first_unsorted = 1;
    while (first_unsorted < n && idx[first_unsorted - 1] <= idx[first_unsorted]) ++first_unsorted;
    if (first_unsorted >= n) return;  // already sorted, e.g. input in row-major order

    if (n <= kInsertionSortMax) {
        if (B == 1) {
            for (int64_t i = first_unsorted; i < n; ++i) {
                const I key = idx[i];
                if (idx[i - 1] <= key) continue;
                const T v = val[i];
                int64_t j = i;
                for (; j > 0 && idx[j - 1] > key; --j) {
                    idx[j] = idx[j - 1];
                    val[j] = val[j - 1];
                }
                idx[j] = key;
                val[j] = v;
            }
        } else {
            scratch.block.resize(static_cast<size_t>(B));
            T* tmp = scratch.block.data();
            for (int64_t i = first_unsorted; i < n; ++i) {
                const I key = idx[i];
                if (idx[i - 1] <= key) continue;
                std::copy(val + i * B, val + (i + 1) * B, tmp);
                int64_t j = i;
                for (; j > 0 && idx[j - 1] > key; --j) {
                    idx[j] = idx[j - 1];
                    std::copy(val + (j - 1) * B, val + j * B, val + j * B);
                }
                idx[j] = key;
                std::copy(tmp, tmp + B, val + j * B);
            }
        }
        return;
    }

    // Long slice: sort (index, position) pairs, which is stable because positions break ties, then
    // permute the value blocks in place by following the permutation's cycles (no copy of the
    // values; the scratch is 16 bytes per entry of the longest unsorted slice, per thread).
    auto& keys = scratch.keys;
    keys.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) keys[i] = {static_cast<int64_t>(idx[i]), i};
    std::sort(keys.begin(), keys.end());
    for (int64_t i = 0; i < n; ++i) idx[i] = static_cast<I>(keys[i].first);
    scratch.block.resize(static_cast<size_t>(std::max<int64_t>(B, 1)));
    T* tmp = scratch.block.data();
    for (int64_t i = 0; i < n; ++i) {
        if (keys[i].second == i) continue;
        std::copy(val + i * B, val + (i + 1) * B, tmp);
        int64_t j = i;
        for (;;) {
            const int64_t src = keys[j].second;
            keys[j].second = j;  // done
            if (src == i) {
                std::copy(tmp, tmp + B, val + j * B);
                break;
            }
            std::copy(val + src * B, val + (src + 1) * B, val + j * B);
            j = src;
        }
    }
}

// Writes the n sorted entries (sidx, sval) to (didx, dval), summing runs of equal indices when
// sum_duplicates, and returns how many it wrote. The source may be the destination itself or lie
// after it (the in-place compaction towards a group's start), so copies run forwards.
template <class I, class T>
int64_t emit_slice(const I* sidx, const T* sval, int64_t n, int64_t B, I* didx, T* dval, bool sum_duplicates) {
    if (!sum_duplicates) {
        if (didx != sidx) {
            std::copy(sidx, sidx + n, didx);
            std::copy(sval, sval + n * B, dval);
        }
        return n;
    }
    if (B == 1 && n > 0) {
        // Branch-free: a duplicate's position and value are selected rather than branched to, as
        // duplicates at random places would mispredict (measured: this pass took 20 % longer).
        didx[0] = sidx[0];
        dval[0] = sval[0];
        int64_t w = 1;
        for (int64_t k = 1; k < n; ++k) {
            const I key = sidx[k];
            const T v = sval[k];
            const bool dup = key == didx[w - 1];
            T sum = dval[w - 1];
            ValueOps<T>::add_to(sum, v);
            const int64_t pos = dup ? w - 1 : w;
            didx[pos] = key;
            dval[pos] = dup ? sum : v;
            w += dup ? 0 : 1;
        }
        return w;
    }
    int64_t w = 0;
    for (int64_t k = 0; k < n; ++k) {
        if (w > 0 && sidx[k] == didx[w - 1]) {
            add_block(dval + (w - 1) * B, sval + k * B, B);
        } else {
            if (didx + w != sidx + k) {
                didx[w] = sidx[k];
                std::copy(sval + k * B, sval + (k + 1) * B, dval + w * B);
            }
            ++w;
        }
    }
    return w;
}

// Sorts one major slice (n entries at idx/val) stably and emits it to didx/dval (see emit_slice).
//
// Slices of up to kRankSortMax entries -- nearly all of them in a sparse array -- are sorted by
// computing each entry's rank with branch-free comparisons and placing it in a small buffer: on
// random input a comparison sort mispredicts about one branch per entry, which dominated this pass.
template <class I, class T>
int64_t sort_and_emit(I* idx, T* val, int64_t n, int64_t B, I* didx, T* dval, bool sum_duplicates,
                      RowScratch<T>& scratch) {
    if (n > kRankSortMax) {
        sort_slice(idx, val, n, B, scratch);
    } else if (n >= 2) {
        bool sorted = true;
        for (int64_t i = 1; i < n; ++i) sorted &= idx[i - 1] <= idx[i];
        if (!sorted) {
            I tidx[kRankSortMax];
            T tval1[kRankSortMax];
            T* tval = tval1;
            if (B != 1) {
                scratch.block.resize(static_cast<size_t>(kRankSortMax * B));
                tval = scratch.block.data();
            }
            for (int64_t i = 0; i < n; ++i) {
                const I key = idx[i];
                int64_t rank = 0;
                for (int64_t j = 0; j < i; ++j) rank += idx[j] <= key;  // equal keys: input order
                for (int64_t j = i + 1; j < n; ++j) rank += idx[j] < key;
                tidx[rank] = key;
                if (B == 1) {
                    tval[rank] = val[i];
                } else {
                    std::copy(val + i * B, val + (i + 1) * B, tval + rank * B);
                }
            }
            return emit_slice<I, T>(tidx, tval, n, B, didx, dval, sum_duplicates);
        }
    }
    return emit_slice<I, T>(idx, val, n, B, didx, dval, sum_duplicates);
}

enum Status : int { kOk = 0, kMajorOutOfRange = 1 };

// Moves entries k0..k1 to their slices' cursors (the COO scatter). Everything it reads is a by-value
// parameter and every output a restrict pointer: through the kernel's captured references the compiler
// had to reload the index arrays' bases and strides after each store (an int64 store may alias a
// stride), which made the scatter three times as slow as SciPy's (one thread, 100,000 entries).
template <bool Prefetch, class I, class P, class T>
void coo_scatter(Strided1<I> major, Strided1<I> minor, const char* vals, Py_ssize_t vs0, Py_ssize_t vs1,
                 int64_t k0, int64_t k1, int64_t B, P* __restrict cursor, I* __restrict indices,
                 T* __restrict data) {
    for (int64_t k = k0; k < k1; ++k) {
        if (Prefetch && k + 2 * kPrefetchDistance < k1) __builtin_prefetch(cursor + major[k + 2 * kPrefetchDistance], 1);
        if (Prefetch && k + kPrefetchDistance < k1) {
            const int64_t pf = cursor[major[k + kPrefetchDistance]];
            __builtin_prefetch(indices + pf, 1);
            __builtin_prefetch(data + pf * B, 1);
        }
        const int64_t p = cursor[major[k]]++;
        indices[p] = minor[k];
        if (B == 1) {
            std::memcpy(data + p, vals + k * vs0, sizeof(T));
        } else {
            load_block(data + p * B, vals + k * vs0, B, vs1);
        }
    }
}

template <class I, class P, class T>
int coo_to_compressed_kernel(Strided1<I> major, Strided1<I> minor, const char* vals, Py_ssize_t vs0,
                             Py_ssize_t vs1, int64_t nnz, int64_t B, P* indptr, int64_t n_major,
                             I* indices, T* data, P* workspace, int n_work, bool sum_duplicates,
                             int64_t* nnz_out) {
    using UI = std::make_unsigned_t<I>;
    const UI n_major_u = static_cast<UI>(n_major);

    // The destinations are prefetched only where the output outgrows the caches, as in the transpose's
    // scatter: below that the extra loads cost more than they save.
    const bool prefetch = nnz * (static_cast<int64_t>(sizeof(I)) + B * static_cast<int64_t>(sizeof(T))) > kPrefetchMinBytes;
    auto scatter_range = [&](int64_t k0, int64_t k1, P* cursor) {
        if (prefetch) {
            coo_scatter<true>(major, minor, vals, vs0, vs1, k0, k1, B, cursor, indices, data);
        } else {
            coo_scatter<false>(major, minor, vals, vs0, vs1, k0, k1, B, cursor, indices, data);
        }
    };

    if (workspace == nullptr) {
        std::fill(indptr, indptr + n_major + 1, P(0));
        for (int64_t k = 0; k < nnz; ++k) {
            const I r = major[k];
            if (static_cast<UI>(r) >= n_major_u) return kMajorOutOfRange;
            ++indptr[r + 1];
        }
        for (int64_t r = 0; r < n_major; ++r) indptr[r + 1] += indptr[r];
        // indptr[r] is row r's cursor; after the scatter it holds row r's end, i.e. row r+1's start.
        scatter_range(0, nnz, indptr);
        for (int64_t r = n_major; r > 0; --r) indptr[r] = indptr[r - 1];
        indptr[0] = 0;
    } else {
        const int T_ = n_work;
        bool bad = false;
#pragma omp parallel for num_threads(T_) schedule(dynamic, 1) reduction(|| : bad)
        for (int t = 0; t < T_; ++t) {
            P* count = workspace + static_cast<int64_t>(t) * n_major;
            std::fill(count, count + n_major, P(0));
            const int64_t k0 = nnz * t / T_, k1 = nnz * (t + 1) / T_;
            for (int64_t k = k0; k < k1; ++k) {
                const I r = major[k];
                if (static_cast<UI>(r) >= n_major_u) {
                    bad = true;
                    break;
                }
                if (k + kPrefetchDistance < k1) {
                    const UI ahead = static_cast<UI>(major[k + kPrefetchDistance]);
                    if (ahead < n_major_u) __builtin_prefetch(count + ahead, 1);
                }
                ++count[r];
            }
        }
        if (bad) return kMajorOutOfRange;

        // Exclusive scan in row-major, then thread order: thread t's cursor for row r starts after
        // the entries of row r that threads < t hold, which keeps the scatter stable. Two parallel
        // sweeps over row blocks: block totals, then the running offsets.
        std::vector<int64_t> block_start(static_cast<size_t>(T_) + 1, 0);
#pragma omp parallel for num_threads(T_) schedule(dynamic, 1)
        for (int b = 0; b < T_; ++b) {
            const int64_t r0 = n_major * b / T_, r1 = n_major * (b + 1) / T_;
            int64_t sum = 0;
            for (int t = 0; t < T_; ++t) {
                const P* count = workspace + static_cast<int64_t>(t) * n_major;
                for (int64_t r = r0; r < r1; ++r) sum += count[r];
            }
            block_start[b + 1] = sum;
        }
        for (int b = 0; b < T_; ++b) block_start[b + 1] += block_start[b];
#pragma omp parallel for num_threads(T_) schedule(dynamic, 1)
        for (int b = 0; b < T_; ++b) {
            const int64_t r0 = n_major * b / T_, r1 = n_major * (b + 1) / T_;
            P run = static_cast<P>(block_start[b]);
            for (int64_t r = r0; r < r1; ++r) {
                indptr[r] = run;
                for (int t = 0; t < T_; ++t) {
                    P& c = workspace[static_cast<int64_t>(t) * n_major + r];
                    const P n = c;
                    c = run;
                    run += n;
                }
            }
        }
        indptr[n_major] = static_cast<P>(nnz);

#pragma omp parallel for num_threads(T_) schedule(dynamic, 1)
        for (int t = 0; t < T_; ++t) {
            scatter_range(nnz * t / T_, nnz * (t + 1) / T_, workspace + static_cast<int64_t>(t) * n_major);
        }
    }

    // Groups of contiguous rows with about equal nnz, a few per thread so that a thread that gets
    // less CPU time (e.g. on a loaded machine) does not hold up the others.
    const int threads = std::max(1, max_threads());
    const int n_groups = (nnz >= kParallelMinEntries && n_major > 1 && threads > 1) ? 4 * threads : 1;
    std::vector<int64_t> g_row(static_cast<size_t>(n_groups) + 1), g_begin(static_cast<size_t>(n_groups) + 1),
        g_end(static_cast<size_t>(n_groups));
    for (int g = 0; g <= n_groups; ++g) {
        const int64_t target = nnz * g / n_groups;
        g_row[g] = (g == n_groups) ? n_major : std::lower_bound(indptr, indptr + n_major + 1, static_cast<P>(target)) - indptr;
        g_row[g] = std::min(g_row[g], n_major);
    }
    for (int g = 0; g <= n_groups; ++g) g_begin[g] = indptr[g_row[g]];

#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (n_groups > 1)
    for (int g = 0; g < n_groups; ++g) {
        RowScratch<T> scratch;
        int64_t start = g_begin[g];
        int64_t w = start;
        for (int64_t r = g_row[g]; r < g_row[g + 1]; ++r) {
            // Row r+1's start is read before this group may overwrite it; the group's last end is
            // the next group's first start, which that group overwrites, hence g_begin.
            const int64_t end = (r + 1 < g_row[g + 1]) ? static_cast<int64_t>(indptr[r + 1]) : g_begin[g + 1];
            if (sum_duplicates) indptr[r] = static_cast<P>(w);
            w += sort_and_emit(indices + start, data + start * B, end - start, B, indices + w, data + w * B,
                               sum_duplicates, scratch);
            start = end;
        }
        g_end[g] = w;
    }

    if (!sum_duplicates) {
        *nnz_out = nnz;
        return kOk;
    }
    // Move each group's compacted entries next to the previous group's (left moves, in order) and
    // shift its row offsets to match. Serial: it is one memmove per group, and another parallel
    // region would cost more on a loaded machine (every region waits for all its threads).
    int64_t dst = 0;
    for (int g = 0; g < n_groups; ++g) {
        const int64_t len = g_end[g] - g_begin[g];
        const int64_t shift = dst - g_begin[g];
        if (shift != 0) {
            std::memmove(indices + dst, indices + g_begin[g], static_cast<size_t>(len) * sizeof(I));
            std::memmove(data + dst * B, data + g_begin[g] * B, static_cast<size_t>(len * B) * sizeof(T));
            for (int64_t r = g_row[g]; r < g_row[g + 1]; ++r) indptr[r] = static_cast<P>(indptr[r] + shift);
        }
        dst += len;
    }
    indptr[n_major] = static_cast<P>(dst);
    *nnz_out = dst;
    return kOk;
}

// coo_to_compressed(major, minor, values, indptr, indices, data, workspace, sum_duplicates, kind)
PyObject* py_coo_to_compressed(PyObject*, PyObject* args) {
    PyObject *o_major, *o_minor, *o_values, *o_indptr, *o_indices, *o_data, *o_work;
    int sum_duplicates;
    int kind;  // "C" stores an int
    if (!PyArg_ParseTuple(args, "OOOOOOOpC", &o_major, &o_minor, &o_values, &o_indptr, &o_indices, &o_data,
                          &o_work, &sum_duplicates, &kind))
        return nullptr;
    Buffer major, minor, values, indptr, indices, data, work;
    if (!major.acquire(o_major, "major", 1, false, false) || !major.check_index("major") ||
        !minor.acquire(o_minor, "minor", 1, false, false) || !minor.check_index("minor") ||
        !values.acquire(o_values, "values", 2, false, false) ||
        !indptr.acquire(o_indptr, "indptr", 1, true, true) || !indptr.check_index("indptr") ||
        !indices.acquire(o_indices, "indices", 1, true, true) || !indices.check_index("indices") ||
        !data.acquire(o_data, "data", 2, true, true))
        return nullptr;
    const bool use_work = (o_work != Py_None);
    if (use_work && (!work.acquire(o_work, "workspace", 2, true, true) || !work.check_index("workspace")))
        return nullptr;

    const int64_t nnz = major.shape(0);
    const int64_t n_major = indptr.shape(0) - 1;
    const int64_t B = values.shape(1);
    if (minor.shape(0) != nnz || values.shape(0) != nnz || indices.shape(0) != nnz || data.shape(0) != nnz ||
        data.shape(1) != B || n_major < 0) {
        PyErr_SetString(PyExc_ValueError, "coo_to_compressed: inconsistent array lengths");
        return nullptr;
    }
    if (minor.itemsize() != major.itemsize() || indices.itemsize() != major.itemsize() ||
        indptr.itemsize() < major.itemsize() || values.itemsize() != data.itemsize() ||
        (use_work && (work.itemsize() != indptr.itemsize() || work.shape(1) != n_major || work.shape(0) < 1))) {
        PyErr_SetString(PyExc_TypeError, "coo_to_compressed: inconsistent array dtypes or workspace shape");
        return nullptr;
    }
    if (indptr.itemsize() == 4 && nnz > std::numeric_limits<int32_t>::max()) {
        PyErr_SetString(PyExc_OverflowError, "coo_to_compressed: nnz does not fit an int32 indptr");
        return nullptr;
    }

    int status = kOk;
    int64_t nnz_out = 0;
    const bool ok = dispatch_value(kind, values.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(major.itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            auto run = [&](auto ptag) {
                using P = typename decltype(ptag)::type;
                Py_BEGIN_ALLOW_THREADS;
                status = coo_to_compressed_kernel<I, P, T>(
                    Strided1<I>{major.ptr(), major.stride(0)}, Strided1<I>{minor.ptr(), minor.stride(0)},
                    values.ptr(), values.stride(0), values.stride(1), nnz, B, reinterpret_cast<P*>(indptr.ptr()),
                    n_major, reinterpret_cast<I*>(indices.ptr()), reinterpret_cast<T*>(data.ptr()),
                    use_work ? reinterpret_cast<P*>(work.ptr()) : nullptr,
                    use_work ? static_cast<int>(work.shape(0)) : 0, sum_duplicates != 0, &nnz_out);
                Py_END_ALLOW_THREADS;
            };
            if constexpr (std::is_same_v<I, int32_t>) {
                if (indptr.itemsize() == 4) {
                    run(Tag<int32_t>{});
                    return;
                }
            }
            run(Tag<int64_t>{});
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "coo_to_compressed: unsupported value type (kind '%c', %zd bytes)", kind,
                     values.itemsize());
        return nullptr;
    }
    if (status == kMajorOutOfRange) {
        PyErr_SetString(PyExc_ValueError, "coo_to_compressed: a major index is out of range");
        return nullptr;
    }
    return PyLong_FromLongLong(nnz_out);
}

// ---------------------------------------------------------------------------------------------
// Dense -> compressed: one pass counts each row's specified entries (into indptr), a scan makes
// indptr, and a second pass writes indices and values. Both passes are parallel over rows and read
// the input through its strides, so a transposed (Fortran-order) array is not copied; consecutive
// rows of one thread then share cache lines, which keeps the strided reads cheap.

// Rows handed to a thread at a time: at least 16 consecutive rows (with a transposed input they
// share cache lines) and about 64 Ki elements, so that scheduling costs nothing for short rows, yet
// dynamic, so that a thread that gets less CPU time does not hold up the others.
inline int dense_rows_per_chunk(int64_t n1, int64_t B) {
    const int64_t per_row = std::max<int64_t>(n1 * B, 1);
    return static_cast<int>(std::clamp<int64_t>((int64_t{1} << 16) / per_row, 16, 1 << 20));
}

// Whether entry (i, j) -- the block at p, B values with stride s2 -- has a value other than +0.
template <class T>
inline bool block_specified(const char* p, int64_t B, Py_ssize_t s2) {
    for (int64_t b = 0; b < B; ++b) {
        T x;
        std::memcpy(&x, p + b * s2, sizeof(T));
        if (ValueOps<T>::specified(x)) return true;
    }
    return false;
}

template <class I, class T>
int64_t dense_count_kernel(const char* base, int64_t n0, int64_t n1, int64_t B, Py_ssize_t s0, Py_ssize_t s1,
                           Py_ssize_t s2, I* indptr) {
#pragma omp parallel for schedule(dynamic, dense_rows_per_chunk(n1, B)) if (n0 * n1 * B >= kParallelMinEntries)
    for (int64_t i = 0; i < n0; ++i) {
        const char* row = base + i * s0;
        int64_t count = 0;
        if (B == 1) {
            for (int64_t j = 0; j < n1; ++j) {
                T x;
                std::memcpy(&x, row + j * s1, sizeof(T));
                count += ValueOps<T>::specified(x) ? 1 : 0;
            }
        } else {
            for (int64_t j = 0; j < n1; ++j) count += block_specified<T>(row + j * s1, B, s2) ? 1 : 0;
        }
        indptr[i + 1] = static_cast<I>(count);  // <= n1, which the caller checked fits I
    }
    // Scan in int64 so that an overflowing total is reported, not wrapped; indptr is only
    // meaningful when the total fits I (the caller raises OverflowError otherwise).
    int64_t total = 0;
    indptr[0] = 0;
    for (int64_t i = 0; i < n0; ++i) {
        total += static_cast<int64_t>(indptr[i + 1]);
        indptr[i + 1] = static_cast<I>(total);
    }
    return total;
}

template <class I, class T>
void dense_fill_kernel(const char* base, int64_t n0, int64_t n1, int64_t B, Py_ssize_t s0, Py_ssize_t s1,
                       Py_ssize_t s2, const I* indptr, I* indices, T* data) {
#pragma omp parallel for schedule(dynamic, dense_rows_per_chunk(n1, B)) if (n0 * n1 * B >= kParallelMinEntries)
    for (int64_t i = 0; i < n0; ++i) {
        const char* row = base + i * s0;
        int64_t p = indptr[i];
        const int64_t end = indptr[i + 1];
        if (B == 1) {
            // Branch-free: every element is written at p and p advances only past non-zeros, so
            // half-zero data costs no mispredicted branches. Stopping once p reaches the row's end
            // keeps every write inside this row's range (the j bound only matters if indptr
            // disagrees with the data, e.g. if another thread changed it since the count).
            for (int64_t j = 0; j < n1 && p < end; ++j) {
                T x;
                std::memcpy(&x, row + j * s1, sizeof(T));
                indices[p] = static_cast<I>(j);
                data[p] = x;
                p += ValueOps<T>::specified(x) ? 1 : 0;
            }
        } else {
            for (int64_t j = 0; j < n1 && p < end; ++j) {
                const char* blk = row + j * s1;
                if (block_specified<T>(blk, B, s2)) {
                    indices[p] = static_cast<I>(j);
                    load_block(data + p * B, blk, B, s2);
                    ++p;
                }
            }
        }
    }
}

bool acquire_dense(Buffer& dense, PyObject* obj) { return dense.acquire(obj, "dense", 3, false, false); }

// dense_count(dense, indptr, kind) -> nnz
PyObject* py_dense_count(PyObject*, PyObject* args) {
    PyObject *o_dense, *o_indptr;
    int kind;  // "C" stores an int
    if (!PyArg_ParseTuple(args, "OOC", &o_dense, &o_indptr, &kind)) return nullptr;
    Buffer dense, indptr;
    if (!acquire_dense(dense, o_dense) || !indptr.acquire(o_indptr, "indptr", 1, true, true) ||
        !indptr.check_index("indptr"))
        return nullptr;
    if (indptr.shape(0) != dense.shape(0) + 1) {
        PyErr_SetString(PyExc_ValueError, "dense_count: indptr must have n_major + 1 entries");
        return nullptr;
    }
    int64_t total = 0;
    const bool ok = dispatch_value(kind, dense.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(indptr.itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            Py_BEGIN_ALLOW_THREADS;
            total = dense_count_kernel<I, T>(dense.ptr(), dense.shape(0), dense.shape(1), dense.shape(2),
                                             dense.stride(0), dense.stride(1), dense.stride(2),
                                             reinterpret_cast<I*>(indptr.ptr()));
            Py_END_ALLOW_THREADS;
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "dense_count: unsupported value type (kind '%c', %zd bytes)", kind,
                     dense.itemsize());
        return nullptr;
    }
    return PyLong_FromLongLong(total);
}

// Whether indptr is non-decreasing from `first` (>= 0) up to at most `limit`: the kernels index
// with it, so it is checked before they run (O(n_major), negligible beside the conversions).
template <class P>
bool indptr_valid(Strided1<P> indptr, int64_t n0, int64_t limit, bool exact) {
    if (indptr[0] < 0 || (exact && indptr[0] != 0)) return false;
    for (int64_t i = 0; i < n0; ++i) {
        if (indptr[i] > indptr[i + 1]) return false;
    }
    const int64_t last = static_cast<int64_t>(indptr[n0]);
    return exact ? last == limit : last <= limit;
}

// dense_fill(dense, indptr, indices, data, kind)
PyObject* py_dense_fill(PyObject*, PyObject* args) {
    PyObject *o_dense, *o_indptr, *o_indices, *o_data;
    int kind;  // "C" stores an int
    if (!PyArg_ParseTuple(args, "OOOOC", &o_dense, &o_indptr, &o_indices, &o_data, &kind)) return nullptr;
    Buffer dense, indptr, indices, data;
    if (!acquire_dense(dense, o_dense) || !indptr.acquire(o_indptr, "indptr", 1, false, true) ||
        !indptr.check_index("indptr") || !indices.acquire(o_indices, "indices", 1, true, true) ||
        !indices.check_index("indices") || !data.acquire(o_data, "data", 2, true, true))
        return nullptr;
    const int64_t n0 = dense.shape(0);
    if (indptr.shape(0) != n0 + 1 || indices.itemsize() != indptr.itemsize() ||
        data.itemsize() != dense.itemsize() || data.shape(1) != dense.shape(2) ||
        indices.shape(0) != data.shape(0)) {
        PyErr_SetString(PyExc_ValueError, "dense_fill: inconsistent arrays");
        return nullptr;
    }
    const int64_t nnz = indices.shape(0);
    bool valid = true;
    const bool ok = dispatch_value(kind, dense.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(indptr.itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            valid = indptr_valid(Strided1<I>{indptr.ptr(), indptr.itemsize()}, n0, nnz, true);
            if (!valid) return;
            Py_BEGIN_ALLOW_THREADS;
            dense_fill_kernel<I, T>(dense.ptr(), n0, dense.shape(1), dense.shape(2), dense.stride(0),
                                    dense.stride(1), dense.stride(2), reinterpret_cast<const I*>(indptr.ptr()),
                                    reinterpret_cast<I*>(indices.ptr()), reinterpret_cast<T*>(data.ptr()));
            Py_END_ALLOW_THREADS;
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "dense_fill: unsupported value type (kind '%c', %zd bytes)", kind,
                     dense.itemsize());
        return nullptr;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "dense_fill: indptr does not match the output arrays");
        return nullptr;
    }
    Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// Compressed -> dense: a scatter-add (scatter_add: a stored -0.0 stays -0.0) into a zeroed (strided)
// output, parallel over major slices.
// Distinct slices write disjoint parts of the output and duplicates of one slice are summed by
// the one thread that owns it, so no atomics are needed and sums follow storage order.

template <class IP, class II, class T>
bool compressed_to_dense_kernel(Strided1<IP> indptr, Strided1<II> indices, const char* vals, Py_ssize_t vs0,
                                Py_ssize_t vs1, int64_t n0, int64_t n1, int64_t B, char* out, Py_ssize_t os0,
                                Py_ssize_t os1, Py_ssize_t os2) {
    using UI = std::make_unsigned_t<II>;
    [[maybe_unused]] const int64_t nnz = n0 > 0 ? static_cast<int64_t>(indptr[n0]) : 0;  // OpenMP only
    bool bad = false;
#pragma omp parallel for schedule(dynamic, 256) reduction(|| : bad) if (nnz * B >= kParallelMinEntries)
    for (int64_t i = 0; i < n0; ++i) {
        char* row = out + i * os0;
        for (int64_t k = indptr[i], end = indptr[i + 1]; k < end; ++k) {
            const II j = indices[k];
            if (static_cast<uint64_t>(static_cast<UI>(j)) >= static_cast<uint64_t>(n1)) {
                bad = true;
                continue;
            }
            char* dst = row + j * os1;
            const char* src = vals + k * vs0;
            for (int64_t b = 0; b < B; ++b) {
                T acc, x;
                std::memcpy(&acc, dst + b * os2, sizeof(T));
                std::memcpy(&x, src + b * vs1, sizeof(T));
                scatter_add(acc, x);
                std::memcpy(dst + b * os2, &acc, sizeof(T));
            }
        }
    }
    return !bad;
}

// compressed_to_dense(indptr, indices, data, out, kind)
PyObject* py_compressed_to_dense(PyObject*, PyObject* args) {
    PyObject *o_indptr, *o_indices, *o_data, *o_out;
    int kind;  // "C" stores an int
    if (!PyArg_ParseTuple(args, "OOOOC", &o_indptr, &o_indices, &o_data, &o_out, &kind)) return nullptr;
    Buffer indptr, indices, data, out;
    if (!indptr.acquire(o_indptr, "indptr", 1, false, false) || !indptr.check_index("indptr") ||
        !indices.acquire(o_indices, "indices", 1, false, false) || !indices.check_index("indices") ||
        !data.acquire(o_data, "data", 2, false, false) || !out.acquire(o_out, "out", 3, true, false))
        return nullptr;
    const int64_t n0 = out.shape(0), n1 = out.shape(1), B = out.shape(2);
    if (indptr.shape(0) != n0 + 1 || data.shape(0) != indices.shape(0) || data.shape(1) != B ||
        data.itemsize() != out.itemsize()) {
        PyErr_SetString(PyExc_ValueError, "compressed_to_dense: inconsistent arrays");
        return nullptr;
    }
    bool valid = true, in_range = true;
    const bool ok = dispatch_value(kind, data.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(indptr.itemsize(), [&](auto ptag) {
            using IP = typename decltype(ptag)::type;
            dispatch_index(indices.itemsize(), [&](auto itag) {
                using II = typename decltype(itag)::type;
                const Strided1<IP> ip{indptr.ptr(), indptr.stride(0)};
                valid = indptr_valid(ip, n0, indices.shape(0), false);
                if (!valid) return;
                Py_BEGIN_ALLOW_THREADS;
                in_range = compressed_to_dense_kernel<IP, II, T>(
                    ip, Strided1<II>{indices.ptr(), indices.stride(0)}, data.ptr(), data.stride(0), data.stride(1),
                    n0, n1, B, out.ptr(), out.stride(0), out.stride(1), out.stride(2));
                Py_END_ALLOW_THREADS;
            });
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "compressed_to_dense: unsupported value type (kind '%c', %zd bytes)", kind,
                     data.itemsize());
        return nullptr;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError,
                        "compressed_to_dense: indptr must be non-decreasing and within the indices' length");
        return nullptr;
    }
    if (!in_range) {
        PyErr_SetString(PyExc_ValueError, "compressed_to_dense: an index is out of range");
        return nullptr;
    }
    Py_RETURN_NONE;
}

// =============================================================================================
// Linear algebra: products of a compressed matrix with a strided one (SpMV and SpMM, as A @ D and as
// A^T @ D), of two compressed matrices (SpGEMM), and dense products sampled at a sparsity pattern
// (SDDMM), for float32, float64, complex64 and complex128 values and int32 or int64 indices.
//
// Everything is written in CSR terms (major = rows): a CSC array is the CSR array of its transpose,
// and the Python wrapper picks the form of the product that reads it as stored (A^T @ D for CSC @ D,
// (A^T @ X^T)^T for X @ CSR, ...), so no index array is ever converted or copied.
//
// Batches: sparse components are 2-D, (batch, n) -- one batch serving every batch of the other
// operands is read with batch stride 0 -- and strided operands are 3-D (batch, rows, columns) with any
// strides, so transposed and broadcast views are read in place. Outputs are allocated by the wrapper.
//
// Ranges are checked before the data is read: rows whose offsets are not 0 <= start <= end <= nse,
// or that hold an index out of range, are skipped and reported (ValueError), never dereferenced. The
// checks are done block by block (kCheckRows) or folded into the kernel's loop, so that the data they
// read is still in cache when the kernel reads it. A caller that knows an earlier call (or the
// validator) checked the same arrays says so (CsrView::checked), and the checks are skipped.

// Products in numpy's formula: for complex values std::complex's operator* adds the C99 Annex G
// recovery of infinities (a library call on every NaN result), which numpy and SciPy do not do.
template <class T>
struct Arith {
    static T mul(const T& a, const T& b) { return a * b; }
};

template <class R>
struct Arith<std::complex<R>> {
    using C = std::complex<R>;
    static C mul(const C& a, const C& b) {
        return C(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
    }
};

template <class T>
inline T mul(const T& a, const T& b) {
    return Arith<T>::mul(a, b);
}

template <class T>
T scalar_from(const Py_complex& z) {
    if constexpr (IsComplex<T>::value) {
        using R = typename T::value_type;
        return T(static_cast<R>(z.real), static_cast<R>(z.imag));
    } else {
        return static_cast<T>(z.real);
    }
}

// Calls f(Tag<T>{}) for the floating value types (numpy kinds 'f' and 'c').
template <class F>
bool dispatch_float(int kind, Py_ssize_t itemsize, F&& f) {
    if (kind == 'f' && itemsize == 4) return f(Tag<float>{}), true;
    if (kind == 'f' && itemsize == 8) return f(Tag<double>{}), true;
    if (kind == 'c' && itemsize == 8) return f(Tag<std::complex<float>>{}), true;
    if (kind == 'c' && itemsize == 16) return f(Tag<std::complex<double>>{}), true;
    return false;
}

// About the size of the caches a kernel's data would otherwise stay in: operands larger than this are
// prefetched or streamed.
constexpr int64_t kCacheBytes = int64_t{16} << 20;

// Rows whose offsets are checked at a time (their offsets then stay in the first-level cache).
constexpr int64_t kCheckRows = 2048;

// Below this much work (entries times columns) a kernel keeps the GIL.
constexpr int64_t kReleaseGilMinWork = 4096;

// Runs f(), without the GIL where the work (elements read and written) is worth releasing it: releasing
// it costs about as much as a small product, so, as numpy does, only work of a few microseconds does.
template <class F>
void run_releasing_gil(int64_t work, F&& f) {
    if (work < kReleaseGilMinWork) {
        f();
    } else {
        Py_BEGIN_ALLOW_THREADS;
        f();
        Py_END_ALLOW_THREADS;
    }
}

// Rows of work handed to a thread at a time: about this many chunks per thread, scheduled
// dynamically, so that a thread that gets less CPU time (a loaded machine) does not hold up the
// others, while a chunk still holds enough work to make its scheduling cost nothing.
constexpr int64_t kChunksPerThread = 8;

// Column tiles of the SpMM kernel: this many bytes of one output row are accumulated in registers
// while the row's entries stream past (a whole 64-column float64 row is 512 bytes).
constexpr int kTileBytes = 128;

// A strided operand (batch, rows, columns); strides in elements.
template <class T>
struct View3 {
    T* base = nullptr;
    int64_t n0 = 0, n1 = 0, n2 = 0;
    int64_t s0 = 0, s1 = 0, s2 = 0;
    T* at(int64_t b, int64_t i, int64_t j) const { return base + b * s0 + i * s1 + j * s2; }
};

// Acquires a strided operand, (batch, rows, columns) with any strides, or (rows, columns) -- one
// batch -- or (rows,) -- one column --, and checks that its strides are whole elements (which numpy
// arrays of one dtype always are; a view into records with another item size is refused).
bool acquire3(Buffer& buf, PyObject* obj, const char* name, bool writable) {
    if (!buf.acquire(obj, name, 1, 3, writable, false)) return false;
    for (int d = 0; d < buf.ndim(); ++d) {
        if (buf.stride(d) % buf.itemsize() != 0) {
            PyErr_Format(PyExc_ValueError, "%s: strides must be multiples of the item size", name);
            return false;
        }
    }
    return true;
}

// (size, stride in elements) of dimension d of the 3-D view of a buffer acquired by acquire3.
inline std::pair<int64_t, int64_t> dim3(const Buffer& buf, int d) {
    const int nd = buf.ndim();
    const int src = nd == 3 ? d : nd == 2 ? d - 1 : (d == 1 ? 0 : -1);
    if (src < 0) return {1, 0};
    return {buf.shape(src), buf.stride(src) / buf.itemsize()};
}

template <class T>
View3<T> view3(const Buffer& buf) {
    View3<T> v;
    v.base = reinterpret_cast<T*>(buf.ptr());
    std::tie(v.n0, v.s0) = dim3(buf, 0);
    std::tie(v.n1, v.s1) = dim3(buf, 1);
    std::tie(v.n2, v.s2) = dim3(buf, 2);
    if (v.n0 == 1) v.s0 = 0;
    return v;
}

// The components of a batch of CSR matrices: indptr (nb, n_major + 1), indices and data (nb, nse).
template <class I, class T>
struct CsrView {
    const I* indptr = nullptr;
    const I* indices = nullptr;
    const T* data = nullptr;
    int64_t ptr_bs = 0, idx_bs = 0, val_bs = 0;  // batch strides in elements, 0 for a shared matrix
    int64_t nb = 1, n_major = 0, n_minor = 0, nse = 0;
    // Whether the caller vouches that the offsets and indices were already checked (an array whose
    // bounds an earlier kernel or the validator checked): the kernels then skip their own checks.
    bool checked = false;
    // Whether the view's rows are a range of a larger matrix's (a thread's share): its first offset
    // need not be 0, nor its last nse, and the caller checks the matrix's ends itself.
    bool partial = false;
    const I* ptr(int64_t b) const { return indptr + b * ptr_bs; }
    const I* idx(int64_t b) const { return indices + b * idx_bs; }
    const T* val(int64_t b) const { return data + b * val_bs; }


    // Where row r of n_batches batches laid end to end starts among their entries, clamped into
    // range: non-decreasing in r whenever the offsets are valid, which is all that splitting needs.
    int64_t entry_offset(int64_t r, int64_t n_batches) const {
        if (n_major == 0) return 0;
        const int64_t b = r / n_major, i = r - b * n_major;
        if (b >= n_batches) return n_batches * nse;
        return b * nse + std::clamp<int64_t>(static_cast<int64_t>(ptr(b)[i]), 0, nse);
    }
};

// Acquires the components of a CSR batch, (batch, n) arrays or 1-D ones (one matrix); the index
// and value arrays must have unit inner strides.
inline int64_t comp_shape(const Buffer& b, int d) { return b.ndim() == 2 ? b.shape(d) : (d == 0 ? 1 : b.shape(0)); }
inline int64_t comp_stride(const Buffer& b, int d) {
    return b.ndim() == 2 ? b.stride(d) : (d == 0 ? 0 : b.stride(0));
}

// 1 when acquired; 0 on an error (raised); kNormalise, nothing raised, when they are fine but for
// index arrays of two dtypes or inner strides that are not the item size: the wrapper then makes
// them so and calls again (it does not check beforehand, which would cost more than a small product).
constexpr int kNormalise = -1;

template <class Bufs>
int acquire_csr(Bufs& ip, Bufs& ix, Bufs* dv, PyObject* o_ip, PyObject* o_ix, PyObject* o_dv) {
    if (!ip.acquire(o_ip, "indptr", 1, 2, false, false) || !ip.check_index("indptr") ||
        !ix.acquire(o_ix, "indices", 1, 2, false, false) || !ix.check_index("indices"))
        return 0;
    if (dv != nullptr && !dv->acquire(o_dv, "data", 1, 2, false, false)) return 0;
    auto unit = [](const Buffer& b) { return comp_shape(b, 1) <= 1 || comp_stride(b, 1) == b.itemsize(); };
    auto whole = [](const Buffer& b) { return comp_stride(b, 0) % b.itemsize() == 0; };
    const bool batches = comp_shape(ip, 0) == comp_shape(ix, 0) && comp_shape(ip, 1) >= 1 &&
                         (dv == nullptr || (comp_shape(*dv, 0) == comp_shape(ip, 0) &&
                                            comp_shape(*dv, 1) == comp_shape(ix, 1)));
    if (!batches) {
        PyErr_SetString(PyExc_ValueError,
                        "indptr, indices and data must be (batch, n) or 1-D arrays of one batch size and nse");
        return 0;
    }
    const bool inner = unit(ip) && unit(ix) && (dv == nullptr || unit(*dv));
    const bool strides = whole(ip) && whole(ix) && (dv == nullptr || whole(*dv));
    return (inner && strides && ip.itemsize() == ix.itemsize()) ? 1 : kNormalise;
}

// The kind of a floating buffer's values from its format: 'f' (float32, float64), 'c' (complex64,
// complex128), or 0 for anything else.
inline int float_kind(const Buffer& b) {
    const char* fmt = b.format();
    while (*fmt == '@' || *fmt == '=' || *fmt == '<') ++fmt;
    if ((fmt[0] == 'f' || fmt[0] == 'd') && fmt[1] == '\0') return 'f';
    if (fmt[0] == 'Z' && (fmt[1] == 'f' || fmt[1] == 'd') && fmt[2] == '\0') return 'c';
    return 0;
}

template <class I, class T>
CsrView<I, T> csr_view(const Buffer& ip, const Buffer& ix, const Buffer* dv, int64_t n_minor) {
    CsrView<I, T> a;
    a.indptr = reinterpret_cast<const I*>(ip.ptr());
    a.indices = reinterpret_cast<const I*>(ix.ptr());
    a.data = dv != nullptr ? reinterpret_cast<const T*>(dv->ptr()) : nullptr;
    a.nb = comp_shape(ip, 0);
    const bool shared = a.nb == 1;
    a.ptr_bs = shared ? 0 : comp_stride(ip, 0) / ip.itemsize();
    a.idx_bs = shared ? 0 : comp_stride(ix, 0) / ix.itemsize();
    a.val_bs = (shared || dv == nullptr) ? 0 : comp_stride(*dv, 0) / dv->itemsize();
    a.n_major = comp_shape(ip, 1) - 1;
    a.n_minor = n_minor;
    a.nse = comp_shape(ix, 1);
    return a;
}

// Splits rows [0, n_rows) into n_chunks ranges of about equal cost, where cost(r) is the cost of the
// rows before r (non-decreasing): one binary search per boundary, nothing read per row.
template <class Cost>
std::vector<int64_t> split_rows(int64_t n_rows, int64_t n_chunks, Cost cost) {
    std::vector<int64_t> bounds(static_cast<size_t>(n_chunks) + 1, n_rows);
    bounds[0] = 0;
    const int64_t total = cost(n_rows);
    for (int64_t c = 1; c < n_chunks; ++c) {
        const int64_t target = static_cast<int64_t>(static_cast<double>(total) * c / n_chunks);
        int64_t lo = bounds[c - 1], hi = n_rows;
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (cost(mid) < target) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        bounds[c] = lo;
    }
    return bounds;
}

inline int64_t chunks_for(int64_t work) {
    const int threads = max_threads();
    return (work >= kParallelMinEntries && threads > 1) ? threads * kChunksPerThread : 1;
}

// Whether every index of idx[0..n) is in [0, bound). Written so that it vectorises with SSE2 (which
// has no 64-bit or unsigned comparisons): i is in [0, hi] exactly when neither i nor hi - i has its
// sign bit set (in unsigned arithmetic), so the check is an OR of both over the array -- a fraction of
// a cycle per index, where a comparison per index cost a third of a SpMV's time.
template <class I>
inline bool indices_in_range(const I* idx, int64_t n, int64_t bound) {
    using UI = std::make_unsigned_t<I>;
    if (n <= 0) return true;
    if (bound <= 0) return false;
    const UI hi = static_cast<UI>(std::min<int64_t>(bound - 1, std::numeric_limits<I>::max()));
    UI acc = 0;
    for (int64_t k = 0; k < n; ++k) {
        const UI i = static_cast<UI>(idx[k]);
        acc |= i | static_cast<UI>(hi - i);
    }
    return (acc >> (sizeof(UI) * 8 - 1)) == 0;
}

// Whether rows [i0, i1) of a batch have offsets 0 <= ptr[i0] <= ... <= ptr[i1] <= nse, and, when
// there are no columns, no entries. Checked block by block before the block is computed (its offsets
// then stay in cache for the computation), so the kernels' row loops need no checks of their own.
template <class I>
inline bool offsets_valid(const I* ptr, int64_t i0, int64_t i1, int64_t n_major, int64_t nse, bool no_columns) {
    // the first offset is 0 and the last nse (invariants 5.1 and 5.2), checked where a range reaches
    // them: entries before the first offset or after the last would be skipped silently. n_major < 0
    // marks the rows of a view that are a range of a larger matrix's, whose ends are checked apart.
    bool ok = (i0 == 0 && n_major >= 0 ? ptr[0] == 0 : ptr[i0] >= 0) && (i1 == n_major ? ptr[i1] == nse : ptr[i1] <= nse) &&
              !(no_columns && ptr[i1] > ptr[i0]);
    for (int64_t i = i0; i < i1; ++i) ok &= ptr[i] <= ptr[i + 1];
    return ok;
}

// The two checks through a view: nothing to do for a view whose bounds were already checked.
template <class I, class T>
inline bool rows_valid(const CsrView<I, T>& A, const I* ptr, int64_t i0, int64_t i1) {
    return A.checked || offsets_valid(ptr, i0, i1, A.partial ? -1 : A.n_major, A.nse, A.n_minor == 0);
}

template <class I, class T>
inline bool columns_valid(const CsrView<I, T>& A, const I* idx, int64_t n) {
    return A.checked || indices_in_range(idx, n, A.n_minor);
}

// Calls fn(b, i0, i1) for ranges of rows [i0, i1) of batch b that together cover every row of nb
// batches, in parallel chunks of about equal cost (rows + entries), once their offsets are checked
// (offsets_valid); fn returns whether the indices it read were in range. Returns whether all were
// valid. `work` (about entries times columns) decides whether to go parallel.
template <class I, class T, class Fn>
bool for_each_range(const CsrView<I, T>& A, int64_t nb, int64_t work, Fn&& fn) {
    const int64_t m = A.n_major, n_rows = nb * m;
    if (n_rows == 0) return true;
    // In blocks of at most kCheckRows rows, so that the offsets are still in cache when the block is
    // computed after they have been checked.
    auto rows = [&](int64_t r, int64_t r1) {
        bool ok = true;
        while (r < r1) {
            const int64_t b = r / m, i0 = r - b * m, i1 = std::min({m, i0 + (r1 - r), i0 + kCheckRows});
            ok = rows_valid(A, A.ptr(b), i0, i1) && fn(b, i0, i1) && ok;
            r += i1 - i0;
        }
        return ok;
    };
    const int64_t n_chunks = chunks_for(work);
    // Serially, without entering a parallel region at all: even one with a false `if` clause costs
    // a team's set-up, which is most of the time of a small product.
    if (n_chunks == 1) return rows(0, n_rows);
    const std::vector<int64_t> bounds =
        split_rows(n_rows, n_chunks, [&](int64_t r) { return r + A.entry_offset(r, nb); });
    bool ok = true;
#pragma omp parallel for schedule(dynamic, 1) reduction(&& : ok)
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) ok = rows(bounds[chunk], bounds[chunk + 1]) && ok;
    return ok;
}

// The index and value arrays of a SpMV are read as streams; the hardware's prefetchers alone kept
// too few lines in flight (measured on the Laplacian: 2 threads reached 31 GB/s, with this 60 GB/s,
// and one thread twice as fast as SciPy instead of on par). Both streams are fetched the same number
// of entries ahead (fewer bytes ahead for the narrower one gained nothing). The address is formed as
// an integer: it may lie past the array's end, which a prefetch (it never faults) does not mind.
constexpr uintptr_t kStreamPrefetchEntries = 512;

template <class P>
inline void prefetch_ahead(const P* p) {
    __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + kStreamPrefetchEntries * sizeof(P)));
}

// Every cache line of [begin, end) as far ahead: rows whose entries span several lines (ten float64
// values are 80 bytes) need more than one prefetch to keep the stream ahead.
template <class P>
inline void prefetch_span_ahead(const P* begin, const P* end) {
    constexpr uintptr_t ahead = kStreamPrefetchEntries * sizeof(P);
    uintptr_t a = (reinterpret_cast<uintptr_t>(begin) + ahead) & ~uintptr_t{63};
    const uintptr_t e = reinterpret_cast<uintptr_t>(end) + ahead;
    for (; a < e; a += 64) __builtin_prefetch(reinterpret_cast<const void*>(a));
}

// sum_k val[k] * x[idx[k] * stride], in storage order (as SciPy sums, so results agree bitwise).
template <class I, class T>
inline T sparse_dot(const I* idx, const T* val, int64_t n, const T* x, int64_t stride) {
    T sum = T(0);
    if (stride == 1) {
        for (int64_t k = 0; k < n; ++k) sum += mul(val[k], x[idx[k]]);
    } else {
        for (int64_t k = 0; k < n; ++k) sum += mul(val[k], x[static_cast<int64_t>(idx[k]) * stride]);
    }
    return sum;
}

// out = alpha * sum + beta * c (c is not read when beta is 0, so that its NaNs do not propagate).
template <class T>
struct Epilogue {
    T alpha, beta;
    View3<const T> c;
    bool has_c;
    inline T operator()(T sum, int64_t b, int64_t i, int64_t j) const {
        T r = mul(alpha, sum);
        if (has_c) r += mul(beta, *c.at(b, i, j));
        return r;
    }
};

// Columns [j0, K) of one output row of a SpMM, D's rows ds apart with unit column stride: tiles of W
// columns are accumulated in registers while the row's entries stream past, the rest by narrower
// tiles. store(j, sum) writes column j.
template <int W, class I, class T, class Store>
inline void sparse_rows(const I* __restrict idx, const T* __restrict val, int64_t n, const T* __restrict D,
                        int64_t ds, int64_t j0, int64_t K, Store&& store) {
    for (; j0 + W <= K; j0 += W) {
        T acc[W];
        for (int w = 0; w < W; ++w) acc[w] = T(0);
        for (int64_t k = 0; k < n; ++k) {
            const T v = val[k];
            const T* __restrict d = D + static_cast<int64_t>(idx[k]) * ds + j0;
            for (int w = 0; w < W; ++w) acc[w] += mul(v, d[w]);
        }
        for (int w = 0; w < W; ++w) store(j0 + w, acc[w]);
    }
    if constexpr (W > 1) {
        if (j0 < K) sparse_rows<W / 2>(idx, val, n, D, ds, j0, K, store);
    }
}

// Register tiles of real values as SIMD vectors of 16 bytes (GCC/Clang vector extensions, which
// compile to the baseline SSE2 of x86-64 and to NEON on ARM): the compiler then keeps a tile in
// registers and multiplies whole vectors, which it did not do reliably for the scalar loop above
// (float32 tiles ran 3 times slower). Complex values keep the scalar loop.
template <class T>
struct Simd {
    static constexpr bool enabled = false;
};

#if defined(__GNUC__)
template <>
struct Simd<float> {
    static constexpr bool enabled = true;
    typedef float V __attribute__((vector_size(16)));
    static constexpr int lanes = 4;
};

template <>
struct Simd<double> {
    static constexpr bool enabled = true;
    typedef double V __attribute__((vector_size(16)));
    static constexpr int lanes = 2;
};
#endif

// acc[0..NV) = sum_k val[k] * D[idx[k], 0 .. NV * lanes), D's rows ds apart, unit column stride.
template <int NV, class I, class T, class V = typename Simd<T>::V>
inline void simd_tile(const I* __restrict idx, const T* __restrict val, int64_t n, const T* __restrict D, int64_t ds,
                      V* acc) {
    constexpr int L = Simd<T>::lanes;
    for (int v = 0; v < NV; ++v) acc[v] = V{};
    for (int64_t k = 0; k < n; ++k) {
        const T a = val[k];
        const T* d = D + static_cast<int64_t>(idx[k]) * ds;
        for (int v = 0; v < NV; ++v) {
            V x;
            std::memcpy(&x, d + v * L, sizeof(V));
            acc[v] += a * x;
        }
    }
}

// Writes n_vec vectors to contiguous out, bypassing the caches when `stream` (an output larger than
// the caches would otherwise be read into them before being overwritten: a third more traffic).
template <class T, class V>
inline void store_vectors(T* out, const V* acc, int n_vec, bool stream) {
    constexpr int L = static_cast<int>(sizeof(V) / sizeof(T));
#if defined(__SSE2__)
    if (stream && (reinterpret_cast<uintptr_t>(out) & 15) == 0) {
        for (int v = 0; v < n_vec; ++v) {
            if constexpr (std::is_same_v<T, float>) {
                _mm_stream_ps(out + v * L, reinterpret_cast<const __m128&>(acc[v]));
            } else {
                _mm_stream_pd(out + v * L, reinterpret_cast<const __m128d&>(acc[v]));
            }
        }
        return;
    }
#endif
    (void)stream;
    std::memcpy(out, acc, static_cast<size_t>(n_vec) * sizeof(V));
}

// The SpMM's output rows with 32-byte vectors, for CPUs with AVX2 (checked once, at run time; the
// package is built for the baseline x86-64, whose vectors are 16 bytes): half the instructions of
// the 16-byte tiles, and the same additions in the same order, so the results agree bit for bit.
// Only the plain product into contiguous rows (out = A @ D) takes it.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(XSPARSE_NO_AVX2)
#define XSPARSE_AVX2_TILES 1

inline bool cpu_has_avx2() {
    static const bool has = __builtin_cpu_supports("avx2");
    return has;
}

template <class T>
struct Wide {
    typedef T V __attribute__((vector_size(32)));
    static constexpr int lanes = static_cast<int>(32 / sizeof(T));
};

template <int NV, class I, class T>
__attribute__((target("avx2"), always_inline)) inline void wide_tile(const I* __restrict idx, const T* __restrict val,
                                                                     int64_t n, const T* __restrict D, int64_t ds,
                                                                     T* __restrict out, bool stream) {
    using V = typename Wide<T>::V;
    constexpr int L = Wide<T>::lanes;
    V acc[NV];
    for (int v = 0; v < NV; ++v) acc[v] = V{};
    for (int64_t k = 0; k < n; ++k) {
        V a;
        if constexpr (std::is_same_v<T, float>) {
            a = reinterpret_cast<V>(_mm256_set1_ps(val[k]));
        } else {
            a = reinterpret_cast<V>(_mm256_set1_pd(val[k]));
        }
        const T* d = D + static_cast<int64_t>(idx[k]) * ds;
        for (int v = 0; v < NV; ++v) {
            V x;
            std::memcpy(&x, d + v * L, sizeof(V));
            acc[v] += a * x;
        }
    }
    // as twice as many 16-byte vectors: streamed at NumPy's 16-byte alignment too
    store_vectors(out, reinterpret_cast<const typename Simd<T>::V*>(acc), 2 * NV, stream);
}

// Columns [0, K) of one output row; returns the first column it did not write (fewer than a
// 32-byte vector remain), which the caller's 16-byte and scalar loops finish.
template <class I, class T>
__attribute__((target("avx2"))) int64_t wide_row(const I* __restrict idx, const T* __restrict val, int64_t n,
                                                 const T* __restrict D, int64_t ds, T* __restrict out, int64_t K,
                                                 bool stream) {
    constexpr int L = Wide<T>::lanes;
    int64_t j0 = 0;
    for (; j0 + 8 * L <= K; j0 += 8 * L) wide_tile<8>(idx, val, n, D + j0, ds, out + j0, stream);
    if (j0 + 4 * L <= K) {
        wide_tile<4>(idx, val, n, D + j0, ds, out + j0, stream);
        j0 += 4 * L;
    }
    if (j0 + 2 * L <= K) {
        wide_tile<2>(idx, val, n, D + j0, ds, out + j0, stream);
        j0 += 2 * L;
    }
    if (j0 + L <= K) {
        wide_tile<1>(idx, val, n, D + j0, ds, out + j0, stream);
        j0 += L;
    }
    return j0;
}
#endif

// The 32-byte forms below (the count of nonzero values, the plain-index pass of the invariant check) are
// clones of their loops compiled for AVX2, chosen at run time; elsewhere (other CPUs and compilers, or a
// build with XSPARSE_NO_AVX2 defined) they are the baseline loops.
#ifdef XSPARSE_AVX2_TILES
#define XSPARSE_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define XSPARSE_TARGET_AVX2
inline bool cpu_has_avx2() { return false; }
#endif

// Entries this far ahead have the rows of D they will read prefetched (up to kPrefetchRowBytes of
// each): with D larger than the caches and rows at random (a uniformly random matrix), each entry
// otherwise waits for its row in turn; measured, SpMM took twice as long without it.
constexpr int64_t kRowPrefetchDistance = 16;
constexpr int64_t kPrefetchRowBytes = 1024;

// The SpMM of csr_mm_gather for real values: each output row in tiles of kTileBytes (8 vectors), the
// rest in narrower ones, the last columns (fewer than a vector) by the scalar loop; rows of D
// prefetched ahead when D exceeds the caches, and the output streamed past them when it does.
template <bool Plain, class I, class T>
bool csr_mm_simd(const CsrView<I, T>& A, const View3<const T>& D, const View3<T>& O, const Epilogue<T>& ep,
                 int64_t work) {
    using V = typename Simd<T>::V;
    constexpr int L = Simd<T>::lanes;
    constexpr int NV = kTileBytes / static_cast<int>(sizeof(V));
    const int64_t nb = O.n0, K = O.n2;
    const int64_t d_bytes = (D.s0 == 0 ? 1 : nb) * D.n1 * K * static_cast<int64_t>(sizeof(T));
    const bool prefetch = d_bytes > kCacheBytes;
    const bool stream = Plain && O.s2 == 1 && nb * O.n1 * K * static_cast<int64_t>(sizeof(T)) > kCacheBytes;
    const int64_t pf_bytes = std::min<int64_t>(K * static_cast<int64_t>(sizeof(T)), kPrefetchRowBytes);
#ifdef XSPARSE_AVX2_TILES
    const bool wide = Plain && O.s2 == 1 && cpu_has_avx2();
#endif
    return for_each_range(A, nb, work, [&](int64_t b, int64_t i0, int64_t i1) {
        const I* __restrict ptr = A.ptr(b);
        const I* __restrict idx = A.idx(b);
        const T* __restrict val = A.val(b);
        const T* __restrict Db = D.base + b * D.s0;
        const int64_t ds = D.s1, os1 = O.s1, os2 = O.s2, n_minor = A.n_minor, nse = A.nse;
        T* __restrict Ob = O.base + b * O.s0;
        const Epilogue<T> e = ep;
        alignas(16) V acc[NV];
        // Writes columns [j0, j0 + n_vec * L) of row i from acc.
        auto emit = [&](T* out, int64_t i, int64_t j0, int n_vec) {
            if (Plain && os2 == 1) {
                store_vectors(out + j0, acc, n_vec, stream);
            } else {
                const T* s = reinterpret_cast<const T*>(acc);
                for (int w = 0; w < n_vec * L; ++w) out[(j0 + w) * os2] = Plain ? s[w] : e(s[w], b, i, j0 + w);
            }
        };
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t start = ptr[i], n = ptr[i + 1] - start;
            if (!columns_valid(A, idx + start, n)) return false;
            if (prefetch) {
                for (int64_t k = start + kRowPrefetchDistance, end = std::min(start + n + kRowPrefetchDistance, nse);
                     k < end; ++k) {
                    const uint64_t r = static_cast<std::make_unsigned_t<I>>(idx[k]);
                    if (r >= static_cast<uint64_t>(n_minor)) continue;  // not yet checked
                    const char* row = reinterpret_cast<const char*>(Db + static_cast<int64_t>(r) * ds);
                    for (int64_t off = 0; off < pf_bytes; off += 64) __builtin_prefetch(row + off);
                }
            }
            const I* ri = idx + start;
            const T* rv = val + start;
            T* out = Ob + i * os1;
            int64_t j0 = 0;
#ifdef XSPARSE_AVX2_TILES
            if (wide) j0 = wide_row(ri, rv, n, Db, ds, out, K, stream);
#endif
            for (; j0 + NV * L <= K; j0 += NV * L) {
                simd_tile<NV>(ri, rv, n, Db + j0, ds, acc);
                emit(out, i, j0, NV);
            }
            if (j0 + (NV / 2) * L <= K) {
                simd_tile<NV / 2>(ri, rv, n, Db + j0, ds, acc);
                emit(out, i, j0, NV / 2);
                j0 += (NV / 2) * L;
            }
            if (j0 + (NV / 4) * L <= K) {
                simd_tile<NV / 4>(ri, rv, n, Db + j0, ds, acc);
                emit(out, i, j0, NV / 4);
                j0 += (NV / 4) * L;
            }
            for (; j0 + L <= K; j0 += L) {
                simd_tile<1>(ri, rv, n, Db + j0, ds, acc);
                emit(out, i, j0, 1);
            }
            for (; j0 < K; ++j0) {  // fewer columns than a vector
                const T sum = sparse_dot(ri, rv, n, Db + j0, ds);
                out[j0 * os2] = Plain ? sum : e(sum, b, i, j0);
            }
        }
#if defined(__SSE2__)
        if (stream) _mm_sfence();  // streamed stores are weakly ordered: complete them before returning
#endif
        return true;
    });
}

// stream_scalar writes one float or double past the caches (SSE2's movnti).
template <class T>
inline void stream_scalar(T* p, T v) {
#if defined(__SSE2__)
    if constexpr (std::is_same_v<T, float>) {
        int32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        _mm_stream_si32(reinterpret_cast<int*>(p), bits);
    } else {
        long long bits;
        std::memcpy(&bits, &v, sizeof bits);
        _mm_stream_si64(reinterpret_cast<long long*>(p), bits);
    }
#else
    *p = v;
#endif
}

template <class T>
constexpr bool kStreamable = std::is_same_v<T, float> || std::is_same_v<T, double>;

// Rows per prefetch of the SpMV's streams: one span of lines for a group of rows costs a fraction of
// a span per row (a stencil's row is 20-40 bytes, less than a line).
constexpr int64_t kSpmvGroup = 16;

// y[i * ys] = (row i of A) . x for rows [i0, i1) of batch b: the SpMV's loop, each row summed in
// storage order (SciPy's order: the results agree bit for bit). One row at a time, a row's end
// offset carried over as the next one's start. `Prefetch` (a matrix larger than the caches) fetches
// the index and value streams ahead, a group of rows at a time; `Stream` also writes a contiguous
// float or double output past the caches, which it would otherwise be read into before being
// overwritten. Measured on the 5-point Laplacian of a 1000 x 1000 grid, two threads: a fifth faster
// than two rows at a time with a prefetch per pair. Built without the vectoriser: it turned the
// float32 loop into four-lane products of values gathered one by one (and summed one by one, the
// order being fixed), half again slower than the scalar loop.
template <bool Plain, bool Prefetch, bool Stream, class I, class T>
__attribute__((optimize("no-tree-vectorize"))) void spmv_rows(const I* __restrict ptr, const I* __restrict idx,
                                                              const T* __restrict val, const T* __restrict x,
                                                              T* __restrict y, int64_t ys, const Epilogue<T>& e,
                                                              int64_t b, int64_t i0, int64_t i1) {
    static_assert(!Stream || (Plain && Prefetch && kStreamable<T>), "streamed stores are plain float/double stores");
    int64_t start = ptr[i0];
    for (int64_t g = i0; g < i1; g += kSpmvGroup) {
        const int64_t g1 = std::min(g + kSpmvGroup, i1);
        if constexpr (Prefetch) {
            prefetch_span_ahead(idx + start, idx + ptr[g1]);
            prefetch_span_ahead(val + start, val + ptr[g1]);
        }
        for (int64_t i = g; i < g1; ++i) {
            const int64_t end = ptr[i + 1];
            T sum = T(0);
            for (int64_t k = start; k < end; ++k) sum += mul(val[k], x[idx[k]]);
            if constexpr (Stream) {
                stream_scalar(y + i, sum);
            } else {
                y[i * ys] = Plain ? sum : e(sum, b, i, 0);
            }
            start = end;
        }
    }
#if defined(__SSE2__)
    if constexpr (Stream) _mm_sfence();  // streamed stores are weakly ordered: complete them before returning
#endif
}

// O[b] = alpha * A[b] @ D[b] + beta * C[b]: the gather form, parallel over rows of A.
//   one column, D contiguous (SpMV): spmv_rows, after one vectorised pass checks the block's indices;
//   unit column strides (SpMM): register tiles of each output row (sparse_rows);
//   otherwise (D stored by columns): a strided dot product per output element.
// The row loops copy what they use into locals first: read through the structs, every store to the
// output would make the compiler reload them.
template <bool Plain, class I, class T>
bool csr_mm_gather(const CsrView<I, T>& A, const View3<const T>& D, const View3<T>& O, const Epilogue<T>& ep) {
    const int64_t nb = O.n0, K = O.n2;
    const int64_t work = (A.nb == 1 ? nb : 1) * A.nse * std::max<int64_t>(K, 1) + nb * A.n_major;
    if (K == 1 && D.s1 == 1) {
        const bool large = A.nb * A.nse * static_cast<int64_t>(sizeof(I) + sizeof(T)) > kCacheBytes;
        const bool stream = large && Plain && kStreamable<T> && O.s1 == 1;
        return for_each_range(A, nb, work, [&](int64_t b, int64_t i0, int64_t i1) {
            const I* __restrict ptr = A.ptr(b);
            const I* __restrict idx = A.idx(b);
            const T* __restrict val = A.val(b);
            const T* __restrict x = D.base + b * D.s0;
            T* __restrict y = O.base + b * O.s0;
            const int64_t ys = O.s1;
            const Epilogue<T> e = ep;
            // The block's indices are checked in one vectorised pass first (they are then in cache for
            // the products): a check folded into the product loop, even without a branch, cost a third
            // of its time.
            if (!columns_valid(A, idx + ptr[i0], static_cast<int64_t>(ptr[i1] - ptr[i0]))) return false;
            if constexpr (Plain && kStreamable<T>) {
                if (stream) {
                    spmv_rows<Plain, true, true>(ptr, idx, val, x, y, ys, e, b, i0, i1);
                    return true;
                }
            }
            if (large) {
                spmv_rows<Plain, true, false>(ptr, idx, val, x, y, ys, e, b, i0, i1);
            } else {
                spmv_rows<Plain, false, false>(ptr, idx, val, x, y, ys, e, b, i0, i1);
            }
            return true;
        });
    }
    if constexpr (Simd<T>::enabled) {
        if (K > 1 && D.s2 == 1) return csr_mm_simd<Plain, I, T>(A, D, O, ep, work);
    }
    if (K > 1 && D.s2 == 1) {
        constexpr int W = std::max<int>(1, kTileBytes / static_cast<int>(sizeof(T)));
        return for_each_range(A, nb, work, [&](int64_t b, int64_t i0, int64_t i1) {
            const I* __restrict ptr = A.ptr(b);
            const I* __restrict idx = A.idx(b);
            const T* __restrict val = A.val(b);
            const T* __restrict Db = D.base + b * D.s0;
            const int64_t ds = D.s1, os1 = O.s1, os2 = O.s2, n_minor = A.n_minor;
            T* __restrict Ob = O.base + b * O.s0;
            const Epilogue<T> e = ep;
            for (int64_t i = i0; i < i1; ++i) {
                const int64_t start = ptr[i], n = ptr[i + 1] - start;
                if (!columns_valid(A, idx + start, n)) return false;
                T* __restrict out = Ob + i * os1;
                sparse_rows<W>(idx + start, val + start, n, Db, ds, 0, K, [&](int64_t j, T sum) {
                    out[j * os2] = Plain ? sum : e(sum, b, i, j);
                });
            }
            return true;
        });
    }
    return for_each_range(A, nb, work, [&](int64_t b, int64_t i0, int64_t i1) {
        const I* ptr = A.ptr(b);
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t start = ptr[i], n = ptr[i + 1] - start;
            const I* idx = A.idx(b) + start;
            if (!columns_valid(A, idx, n)) return false;
            const T* val = A.val(b) + start;
            for (int64_t j = 0; j < K; ++j) {
                const T sum = sparse_dot(idx, val, n, D.at(b, 0, j), D.s1);
                *O.at(b, i, j) = Plain ? sum : ep(sum, b, i, j);
            }
        }
        return true;
    });
}

// Rows [0, n) of one matrix scattered into contiguous rows of O: O[idx[k], j0:j1] += alpha * val[k] *
// D[i, j0:j1] for the entries k of row i. Every row of O and D is a unit-stride vector, and O never
// overlaps D or the sparse operand (the wrapper allocates O), which the restrict qualifiers tell the
// compiler so that the update vectorises. Returns false at the first row holding an index out of range.
template <class I, class T>
__attribute__((always_inline)) inline bool scatter_rows(const CsrView<I, T>& A, const I* __restrict ptr,
                                                        const I* __restrict idx, const T* __restrict val,
                                                        const T* __restrict Db, int64_t ds, T* __restrict Ob,
                                                        int64_t os, T alpha, int64_t j0, int64_t j1) {
    for (int64_t i = 0; i < A.n_major; ++i) {
        const int64_t start = ptr[i], end = ptr[i + 1];
        if (!columns_valid(A, idx + start, end - start)) return false;
        const T* __restrict d = Db + i * ds + j0;
        for (int64_t k = start; k < end; ++k) {
            const T a = mul(alpha, val[k]);
            T* __restrict o = Ob + static_cast<int64_t>(idx[k]) * os + j0;
            for (int64_t j = 0; j < j1 - j0; ++j) o[j] += mul(a, d[j]);
        }
    }
    return true;
}

#ifdef XSPARSE_AVX2_TILES
// The same with 32-byte vectors (the same operations in the same order, so the same results).
template <class I, class T>
__attribute__((target("avx2"))) bool scatter_rows_avx2(const CsrView<I, T>& A, const I* ptr, const I* idx, const T* val,
                                                       const T* Db, int64_t ds, T* Ob, int64_t os, T alpha, int64_t j0,
                                                       int64_t j1) {
    return scatter_rows(A, ptr, idx, val, Db, ds, Ob, os, alpha, j0, j1);
}
#endif

// O[b] += alpha * A[b]^T @ D[b] for batches [b0, b1) and columns [j0, j1), serially: row i of A
// scatters alpha * A[i, r] * D[i, j0:j1] into row r of O (unit column strides make it a vector update;
// the wrapper copies D to get them when it has several columns).
template <class I, class T>
bool scatter_add(const CsrView<I, T>& A, const View3<const T>& D, const View3<T>& O, T alpha, int64_t b0, int64_t b1,
                 int64_t j0, int64_t j1) {
    const bool unit = O.s2 == 1 && D.s2 == 1;
    for (int64_t b = b0; b < b1; ++b) {
        const I* ptr = A.ptr(b);
        const I* idx = A.idx(b);
        const T* val = A.val(b);
        const T* Db = D.base + b * D.s0;
        T* Ob = O.base + b * O.s0;
        if (!rows_valid(A, ptr, 0, A.n_major)) return false;
        if (j1 - j0 == 1) {  // one column (a CSC SpMV): the factor of row i is hoisted
            T* __restrict o = Ob + j0 * O.s2;
            const int64_t os = O.s1;
            for (int64_t i = 0; i < A.n_major; ++i) {
                const int64_t start = ptr[i], end = ptr[i + 1];
                prefetch_ahead(idx + start);
                prefetch_ahead(val + start);
                if (!columns_valid(A, idx + start, end - start)) return false;
                const T d = mul(alpha, Db[i * D.s1 + j0 * D.s2]);
                for (int64_t k = start; k < end; ++k) o[static_cast<int64_t>(idx[k]) * os] += mul(val[k], d);
            }
            continue;
        }
        if (unit) {
#ifdef XSPARSE_AVX2_TILES
            if (cpu_has_avx2()) {
                if (!scatter_rows_avx2(A, ptr, idx, val, Db, D.s1, Ob, O.s1, alpha, j0, j1)) return false;
                continue;
            }
#endif
            if (!scatter_rows(A, ptr, idx, val, Db, D.s1, Ob, O.s1, alpha, j0, j1)) return false;
            continue;
        }
        for (int64_t i = 0; i < A.n_major; ++i) {
            const int64_t start = ptr[i], end = ptr[i + 1];
            if (!columns_valid(A, idx + start, end - start)) return false;
            const T* d = Db + i * D.s1;
            for (int64_t k = start; k < end; ++k) {
                const T a = mul(alpha, val[k]);
                T* o = Ob + static_cast<int64_t>(idx[k]) * O.s1;
                for (int64_t j = j0; j < j1; ++j) o[j * O.s2] += mul(a, d[j * D.s2]);
            }
        }
    }
    return true;
}

// O[b] = alpha * A[b]^T @ D[b] + beta * C[b]: the scatter form (A^T's rows are A's columns). O is first
// set to beta * C (or zero). Then, in parallel: by column ranges when there are columns to share,
// else by batches when there are enough, else each thread scatters a share of A's rows into a
// private copy of O, and the copies are summed.
template <class I, class T>
bool csr_mm_scatter(const CsrView<I, T>& A, View3<const T> D, View3<T> O, const View3<const T>* C, T alpha, T beta) {
    const int64_t nb = O.n0, n = O.n1, K = O.n2;
    const int64_t work = nb * A.nse * std::max<int64_t>(K, 1) + nb * n * K;
    const int threads = (work >= kParallelMinEntries) ? max_threads() : 1;
#pragma omp parallel for schedule(static) if (threads > 1 && nb * n * K >= kParallelMinEntries)
    for (int64_t r = 0; r < nb * n; ++r) {
        const int64_t b = r / n, i = r - b * n;
        for (int64_t j = 0; j < K; ++j) {
            T& o = *O.at(b, i, j);
            o = (C != nullptr) ? mul(beta, *C->at(b, i, j)) : T(0);
        }
    }
    if (threads == 1) return scatter_add(A, D, O, alpha, 0, nb, 0, K);
    bool ok = true;
    if (nb >= 2 * threads) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(&& : ok)
        for (int64_t b = 0; b < nb; ++b) ok = scatter_add(A, D, O, alpha, b, b + 1, 0, K);
        return ok;
    }
    const int64_t size = nb * n * K;
    // Private copies: thread 0 adds into O itself, thread t > 0 into copy t - 1, which it clears first
    // (so its pages are first touched by the thread that uses them). Not thrown on failure: this runs
    // without the GIL, where an exception could not reach Python.
    std::unique_ptr<T[]> priv;
    if (static_cast<double>(size) * sizeof(T) * (threads - 1) <= scatter_copy_max_bytes) {
        priv.reset(new (std::nothrow) T[static_cast<size_t>(size) * static_cast<size_t>(threads - 1)]);
    }
    if (!priv) {
        if (K < threads) return scatter_add(A, D, O, alpha, 0, nb, 0, K);
        // Too large to copy: each thread takes a range of the columns of every row of O. The threads
        // then all read every entry, and rows of O shared between them cost cache-line transfers, so
        // this is the last resort (measured: about twice the time of private copies on 2 CPUs).
#pragma omp parallel for num_threads(threads) schedule(static, 1) reduction(&& : ok)
        for (int t = 0; t < threads; ++t) ok = scatter_add(A, D, O, alpha, 0, nb, K * t / threads, K * (t + 1) / threads);
        return ok;
    }
    const int64_t m = A.n_major;
    // the threads take ranges of rows, as views of their own (partial): the matrix's ends are checked here
    for (int64_t b = 0; b < nb && !A.checked; ++b) {
        if (A.ptr(b)[0] != 0 || A.ptr(b)[m] != A.nse) return false;
    }
    int used = 1;
#pragma omp parallel num_threads(threads) reduction(&& : ok)
    {
#ifdef _OPENMP
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int t = 0, nt = 1;
#endif
        if (t == 0) used = nt;
        View3<T> target = O;
        if (t > 0) {
            target.base = priv.get() + static_cast<size_t>(t - 1) * static_cast<size_t>(size);
            target.s0 = n * K, target.s1 = K, target.s2 = 1;
            std::fill(target.base, target.base + size, T(0));
        }
        // This thread's share of the rows of every batch, by entries.
        for (int64_t b = 0; b < nb; ++b) {
            const std::vector<int64_t> bounds = split_rows(m, nt, [&](int64_t r) {
                return r + std::clamp<int64_t>(static_cast<int64_t>(A.ptr(b)[r]), 0, A.nse);
            });
            const int64_t r0 = bounds[t], r1 = bounds[t + 1];
            // Rows [r0, r1) of batch b as a matrix of their own.
            CsrView<I, T> Ab = A;
            Ab.indptr = A.ptr(b) + r0, Ab.indices = A.idx(b), Ab.data = A.val(b);
            Ab.ptr_bs = Ab.idx_bs = Ab.val_bs = 0, Ab.nb = 1, Ab.n_major = r1 - r0, Ab.partial = true;
            View3<const T> Dr = D;
            Dr.base = D.base + b * D.s0 + r0 * D.s1, Dr.s0 = 0;
            View3<T> Or = target;
            Or.base = target.base + b * target.s0, Or.s0 = 0;
            ok = scatter_add(Ab, Dr, Or, alpha, 0, 1, 0, K) && ok;
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (int64_t r = 0; r < nb * n; ++r) {
            const int64_t b = r / n, i = r - b * n;
            for (int u = 0; u < used - 1; ++u) {
                const T* p = priv.get() + static_cast<size_t>(u) * static_cast<size_t>(size) + r * K;
                for (int64_t j = 0; j < K; ++j) *O.at(b, i, j) += p[j];
            }
        }
    }
    return ok;
}

// coo_mm of one column (y starts at zero): each run of entries of one row (all of a row's, in a
// coalesced array) sums in a register, stored when the row changes. Adding each entry to its output
// element instead made every addition wait for the previous one's store (1.6 times the time). A function
// of its own, so that its pointers stay in registers (inlined in the binding, they were reloaded from the
// stack every entry).
template <class I, class T>
__attribute__((noinline)) bool coo_mv(const I* __restrict to, const I* __restrict from, const T* __restrict val,
                                      int64_t nse, const T* __restrict x, int64_t sx, T* __restrict y, int64_t sy,
                                      uint64_t n_to, uint64_t n_from) {
    uint64_t row = 0;
    T acc = T(0);  // row 0's value so far
    for (int64_t k = 0; k < nse; ++k) {
        const uint64_t r = static_cast<uint64_t>(static_cast<int64_t>(to[k]));
        const uint64_t c = static_cast<uint64_t>(static_cast<int64_t>(from[k]));
        if ((r >= n_to) | (c >= n_from)) return false;
        if (r != row) {
            y[static_cast<int64_t>(row) * sy] = acc;
            row = r;
            acc = y[static_cast<int64_t>(r) * sy];
        }
        acc += val[k] * x[static_cast<int64_t>(c) * sx];
    }
    if (nse > 0) y[static_cast<int64_t>(row) * sy] = acc;
    return true;
}

// out[to[k], :] += val[k] * d[from[k], :] for every entry k of a COO matrix, in any order, duplicates
// included: A @ d with (to, from) = (rows, columns), A^T @ d with them swapped. One thread, one pass, no
// grouping of the entries (SciPy's coo_matvec): grouping them by row first (a sort, or the offsets of
// a coalesced array) cost more than the product itself. Every index is checked as it is read (an
// unsigned comparison, predicted); false, with out partly written, where one is out of range.
template <class I, class T>
bool coo_mm(const I* __restrict to, const I* __restrict from, const T* __restrict val, int64_t nse, View3<const T> D,
            View3<T> O) {
    const uint64_t n_to = static_cast<uint64_t>(O.n1), n_from = static_cast<uint64_t>(D.n1);
    const int64_t K = O.n2;
    for (int64_t i = 0; i < O.n1; ++i)
        for (int64_t j = 0; j < K; ++j) *O.at(0, i, j) = T(0);
    if (K == 1) return coo_mv<I, T>(to, from, val, nse, D.base, D.s1, O.base, O.s1, n_to, n_from);
    for (int64_t k = 0; k < nse; ++k) {
        const uint64_t r = static_cast<uint64_t>(static_cast<int64_t>(to[k]));
        const uint64_t c = static_cast<uint64_t>(static_cast<int64_t>(from[k]));
        if (r >= n_to || c >= n_from) return false;
        const T v = val[k];
        T* o = O.at(0, static_cast<int64_t>(r), 0);
        const T* x = D.at(0, static_cast<int64_t>(c), 0);
        for (int64_t j = 0; j < K; ++j) o[j * O.s2] += v * x[j * D.s2];
    }
    return true;
}

// coo_mm(to, from, values, d, out) -> bool: to, from (nse,) contiguous, of one index dtype; values (nse,)
// contiguous; d (rows_d,) or (rows_d, K) and out (rows_out,) or (rows_out, K), any strides, of the values'
// dtype (float32, float64, complex64, complex128). False where an index is out of range.
PyObject* py_coo_mm(PyObject*, PyObject* args) {
    PyObject *o_to, *o_from, *o_val, *o_d, *o_out;
    if (!PyArg_ParseTuple(args, "OOOOO", &o_to, &o_from, &o_val, &o_d, &o_out)) return nullptr;
    Buffer to, from, val, d, out;
    if (!to.acquire(o_to, "to", 1, false, true) || !to.check_index("to") || !from.acquire(o_from, "from", 1, false, true) ||
        !from.check_index("from") || !val.acquire(o_val, "values", 1, false, true) || !acquire3(d, o_d, "d", false) ||
        !acquire3(out, o_out, "out", true))
        return nullptr;
    const int64_t nse = to.shape(0);
    if (from.shape(0) != nse || val.shape(0) != nse || from.itemsize() != to.itemsize() || d.ndim() > 2 ||
        out.ndim() != d.ndim() || dim3(d, 2).first != dim3(out, 2).first) {
        PyErr_SetString(PyExc_ValueError, "coo_mm: inconsistent shapes or index dtypes");
        return nullptr;
    }
    const int kind = float_kind(val);
    if (d.itemsize() != val.itemsize() || out.itemsize() != val.itemsize() || float_kind(d) != kind ||
        float_kind(out) != kind) {
        PyErr_SetString(PyExc_TypeError, "coo_mm: values, d and out must have one dtype");
        return nullptr;
    }
    bool in_range = true;
    const bool ok = dispatch_float(kind, val.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(to.itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            const View3<const T> D = view3<const T>(d);
            const View3<T> O = view3<T>(out);
            run_releasing_gil(nse * std::max<int64_t>(O.n2, 1) + O.n1 * O.n2, [&] {
                in_range = coo_mm<I, T>(reinterpret_cast<const I*>(to.ptr()), reinterpret_cast<const I*>(from.ptr()),
                                        reinterpret_cast<const T*>(val.ptr()), nse, D, O);
            });
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "coo_mm: unsupported value type (buffer format '%s')", val.format());
        return nullptr;
    }
    return PyBool_FromLong(in_range);
}

// csr_mm(indptr, indices, data, n_minor, d, out, c, alpha, beta, transpose) -> None or NotImplemented
//   out[b] = alpha * op(A[b]) @ d[b] + beta * c[b], op(A) = A or A^T; c may be None. The value type
//   (float32, float64, complex64, complex128) is read from the buffers' formats, which must agree.
//   NotImplemented: index arrays of two dtypes, or inner strides that are not the item size (see
//   acquire_csr).
PyObject* py_csr_mm(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_dv, *o_d, *o_out, *o_c;
    long long n_minor;
    Py_complex alpha, beta;
    int transpose;
    int checked = 0;
    int threads = 0;  // 0: every thread OpenMP has (max_threads); else at most this many (the caller's load check)
    if (!PyArg_ParseTuple(args, "OOOLOOODDp|pi", &o_ip, &o_ix, &o_dv, &n_minor, &o_d, &o_out, &o_c, &alpha, &beta,
                          &transpose, &checked, &threads))
        return nullptr;
    Buffer ip, ix, dv, d, out, c;
    const bool has_c = o_c != Py_None;
    const int got = acquire_csr(ip, ix, &dv, o_ip, o_ix, o_dv);
    if (got == 0) return nullptr;
    if (got == kNormalise) Py_RETURN_NOTIMPLEMENTED;
    if (!acquire3(d, o_d, "d", false) || !acquire3(out, o_out, "out", true) || (has_c && !acquire3(c, o_c, "c", false)))
        return nullptr;
    auto n3 = [](const Buffer& b, int dim) { return dim3(b, dim).first; };
    const int64_t nb = n3(out, 0), m = comp_shape(ip, 1) - 1, K = n3(out, 2);
    const int64_t rows_out = transpose ? n_minor : m, rows_d = transpose ? m : n_minor;
    const bool consistent = n_minor >= 0 && (comp_shape(ip, 0) == 1 || comp_shape(ip, 0) == nb) &&
                            n3(d, 0) == nb && n3(d, 1) == rows_d && n3(d, 2) == K && n3(out, 1) == rows_out &&
                            (!has_c || (n3(c, 0) == nb && n3(c, 1) == rows_out && n3(c, 2) == K));
    if (!consistent) {
        PyErr_SetString(PyExc_ValueError, "csr_mm: inconsistent shapes");
        return nullptr;
    }
    const int kind = float_kind(dv);
    const bool same = d.itemsize() == dv.itemsize() && out.itemsize() == dv.itemsize() && float_kind(d) == kind &&
                      float_kind(out) == kind && (!has_c || (c.itemsize() == dv.itemsize() && float_kind(c) == kind));
    if (!same) {
        PyErr_SetString(PyExc_TypeError, "csr_mm: data, d, out and c must have one dtype");
        return nullptr;
    }
    bool in_range = true;
    const bool ok = dispatch_float(kind, dv.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(ip.itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            CsrView<I, T> A = csr_view<I, T>(ip, ix, &dv, n_minor);
            A.checked = checked != 0;
            const View3<const T> D = view3<const T>(d);
            const View3<T> O = view3<T>(out);
            View3<const T> C;
            if (has_c) C = view3<const T>(c);
            const T a = scalar_from<T>(alpha), bt = scalar_from<T>(beta);
            const bool use_c = has_c && bt != T(0);
            auto run = [&] {
                // fewer threads for this call only: the kernels read max_threads(), the calling thread's
                // OpenMP setting, which is restored after
                const int all = max_threads();
                const bool fewer = threads > 0 && threads < all;
#ifdef _OPENMP
                if (fewer) omp_set_num_threads(threads);
#endif
                if (transpose) {
                    in_range = csr_mm_scatter<I, T>(A, D, O, use_c ? &C : nullptr, a, bt);
                } else {
                    const Epilogue<T> ep{a, bt, C, use_c};
                    in_range = (a == T(1) && !use_c) ? csr_mm_gather<true, I, T>(A, D, O, ep)
                                                     : csr_mm_gather<false, I, T>(A, D, O, ep);
                }
#ifdef _OPENMP
                if (fewer) omp_set_num_threads(all);
#endif
                (void)fewer;
            };
            run_releasing_gil((A.nb == 1 ? nb : 1) * A.nse * std::max<int64_t>(K, 1) + O.n1 * K, run);
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "csr_mm: unsupported value type (buffer format '%s')", dv.format());
        return nullptr;
    }
    if (!in_range) {
        PyErr_SetString(PyExc_ValueError,
                        "csr_mm: the compressed indices are not non-decreasing from 0 to nse, or an index is out of range");
        return nullptr;
    }
    Py_RETURN_NONE;
}

// After a failed acquisition: the error raised, or, where acquire_csr asked for normalised arrays
// (which these wrappers pass), a ValueError.
PyObject* normalise_error(const char* op) {
    if (!PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "%s: index arrays must have one dtype and contiguous rows", op);
    }
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// SpGEMM, C = A @ B for CSR A (m x n) and B (n x p): Gustavson's row-by-row product in two parallel
// passes, as SciPy does serially. The first counts each row's distinct columns with a per-thread
// marker array (so the outputs are allocated at their exact size); the second accumulates each
// row in a per-thread dense accumulator, records the columns in the order first met, sorts them
// (the result is canonical: sorted, no duplicates) and gathers the values.

// Whether a CSR matrix's offsets are in order and in range and its indices in [0, n_minor): one
// parallel pass before the SpGEMM passes read it unchecked (B's rows are read once per entry of A
// in the matching column, so checking them as they are read would repeat each check that often).
template <class I, class T>
bool csr_valid(const CsrView<I, T>& A) {
    return for_each_range(A, 1, A.nse + A.n_major, [&](int64_t b, int64_t i0, int64_t i1) {
        const I* ptr = A.ptr(b);
        return columns_valid(A, A.idx(b) + ptr[i0], static_cast<int64_t>(ptr[i1] - ptr[i0]));
    });
}

// counts[i + 1] = the number of distinct columns of row i of A @ B, then their running sum (the result's
// indptr). M, the marker type, holds a row number (int32 when the rows allow: half the cache footprint).
template <class M, class I>
void spgemm_count_kernel(const CsrView<I, char>& A, const CsrView<I, char>& B, int64_t* counts) {
    const int64_t m = A.n_major, p = B.n_minor;
    const int64_t n_chunks = chunks_for(A.nse + m);
    const std::vector<int64_t> bounds = n_chunks > 1 ? split_rows(m, n_chunks, [&](int64_t r) { return r + A.entry_offset(r, 1); })
                                                     : std::vector<int64_t>{0, m};
    const I* __restrict aptr = A.indptr;
    const I* __restrict aidx = A.indices;
    const I* __restrict bptr = B.indptr;
    const I* __restrict bidx = B.indices;
#pragma omp parallel if (n_chunks > 1)
    {
        std::unique_ptr<M[]> mark(new M[static_cast<size_t>(p)]);
        std::fill(mark.get(), mark.get() + p, M(-1));
#pragma omp for schedule(dynamic, 1)
        for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
            for (int64_t i = bounds[chunk]; i < bounds[chunk + 1]; ++i) {
                const M mi = static_cast<M>(i);
                int64_t count = 0;
                for (int64_t k = aptr[i], end = aptr[i + 1]; k < end; ++k) {
                    const int64_t r = aidx[k];
                    for (int64_t l = bptr[r], e = bptr[r + 1]; l < e; ++l) {
                        const int64_t j = bidx[l];
                        count += mark[j] != mi;
                        mark[j] = mi;
                    }
                }
                counts[i + 1] = count;
            }
        }
    }
    counts[0] = 0;
    for (int64_t i = 0; i < m; ++i) counts[i + 1] += counts[i];
}

template <class O>
inline void sort_indices(O* first, O* last) {
    if (last - first <= 32) {
        for (O* i = first + 1; i < last; ++i) {
            const O key = *i;
            O* j = i;
            for (; j > first && *(j - 1) > key; --j) *j = *(j - 1);
            *j = key;
        }
    } else {
        std::sort(first, last);
    }
}

template <class M, class I, class O, class T>
void spgemm_fill_kernel(const CsrView<I, T>& A, const CsrView<I, T>& B, const O* c_indptr, O* c_indices, T* c_data) {
    const int64_t m = A.n_major, p = B.n_minor;
    const int64_t n_chunks = chunks_for(A.nse + m);
    const std::vector<int64_t> bounds = n_chunks > 1 ? split_rows(m, n_chunks, [&](int64_t r) { return r + A.entry_offset(r, 1); })
                                                     : std::vector<int64_t>{0, m};
    const I* __restrict aptr = A.indptr;
    const I* __restrict aidx = A.indices;
    const T* __restrict aval = A.data;
    const I* __restrict bptr = B.indptr;
    const I* __restrict bidx = B.indices;
    const T* __restrict bval = B.data;
#pragma omp parallel if (n_chunks > 1)
    {
        std::unique_ptr<M[]> mark(new M[static_cast<size_t>(p)]);
        std::fill(mark.get(), mark.get() + p, M(-1));
        std::unique_ptr<T[]> acc(new T[static_cast<size_t>(p)]);
#pragma omp for schedule(dynamic, 1)
        for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
            for (int64_t i = bounds[chunk]; i < bounds[chunk + 1]; ++i) {
                const M mi = static_cast<M>(i);
                const int64_t first = c_indptr[i], last = c_indptr[i + 1];
                int64_t q = first;
                // spgemm_count checked every range read here, and c_indptr is its result; the q < last
                // guard only keeps the writes inside the row if the operands changed in between.
                for (int64_t k = aptr[i], end = aptr[i + 1]; k < end; ++k) {
                    const int64_t r = aidx[k];
                    const T a = aval[k];
                    for (int64_t l = bptr[r], e = bptr[r + 1]; l < e; ++l) {
                        const int64_t j = bidx[l];
                        const T prod = mul(a, bval[l]);
                        if (mark[j] != mi) {
                            mark[j] = mi;
                            acc[j] = prod;
                            if (q < last) c_indices[q++] = static_cast<O>(j);
                        } else {
                            acc[j] += prod;
                        }
                    }
                }
                sort_indices(c_indices + first, c_indices + q);
                for (int64_t s = first; s < q; ++s) c_data[s] = acc[c_indices[s]];
                for (int64_t s = q; s < last; ++s) c_indices[s] = 0, c_data[s] = T(0);  // only if changed
            }
        }
    }
}

// spgemm_count(a_indptr, a_indices, b_indptr, b_indices, n_cols, counts) -> nnz
//   counts (m + 1,) int64 receives the result's indptr.
PyObject* py_spgemm_count(PyObject*, PyObject* args) {
    PyObject *o_aip, *o_aix, *o_bip, *o_bix, *o_counts;
    long long n_cols;
    if (!PyArg_ParseTuple(args, "OOOOLO", &o_aip, &o_aix, &o_bip, &o_bix, &n_cols, &o_counts)) return nullptr;
    Buffer aip, aix, bip, bix, counts;
    if (acquire_csr(aip, aix, static_cast<Buffer*>(nullptr), o_aip, o_aix, nullptr) != 1 ||
        acquire_csr(bip, bix, static_cast<Buffer*>(nullptr), o_bip, o_bix, nullptr) != 1 ||
        !counts.acquire(o_counts, "counts", 1, true, true))
        return normalise_error("spgemm_count");
    if (comp_shape(aip, 0) != 1 || comp_shape(bip, 0) != 1 || aip.itemsize() != bip.itemsize() ||
        counts.itemsize() != 8 || counts.shape(0) != comp_shape(aip, 1) || n_cols < 0) {
        PyErr_SetString(PyExc_ValueError, "spgemm_count: inconsistent arrays");
        return nullptr;
    }
    bool valid = true;
    dispatch_index(aip.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        const CsrView<I, char> A = csr_view<I, char>(aip, aix, nullptr, comp_shape(bip, 1) - 1);
        const CsrView<I, char> B = csr_view<I, char>(bip, bix, nullptr, n_cols);
        int64_t* c = reinterpret_cast<int64_t*>(counts.ptr());
        Py_BEGIN_ALLOW_THREADS;
        valid = csr_valid(A) && csr_valid(B);
        if (valid && A.n_major < std::numeric_limits<int32_t>::max()) {
            spgemm_count_kernel<int32_t>(A, B, c);
        } else if (valid) {
            spgemm_count_kernel<int64_t>(A, B, c);
        }
        Py_END_ALLOW_THREADS;
    });
    if (!valid) {
        PyErr_SetString(PyExc_ValueError,
                        "spgemm: the compressed indices are not non-decreasing from 0 to nse, or an index is out of range");
        return nullptr;
    }
    return PyLong_FromLongLong(reinterpret_cast<int64_t*>(counts.ptr())[comp_shape(aip, 1) - 1]);
}

// spgemm_fill(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, n_cols, c_indptr, c_indices, c_data)
//   after spgemm_count on the same operands (c_indptr is its counts, in the output index dtype).
PyObject* py_spgemm_fill(PyObject*, PyObject* args) {
    PyObject *o_aip, *o_aix, *o_adv, *o_bip, *o_bix, *o_bdv, *o_cip, *o_cix, *o_cdv;
    long long n_cols;
    if (!PyArg_ParseTuple(args, "OOOOOOLOOO", &o_aip, &o_aix, &o_adv, &o_bip, &o_bix, &o_bdv, &n_cols, &o_cip, &o_cix,
                          &o_cdv))
        return nullptr;
    Buffer aip, aix, adv, bip, bix, bdv, cip, cix, cdv;
    if (acquire_csr(aip, aix, &adv, o_aip, o_aix, o_adv) != 1 || acquire_csr(bip, bix, &bdv, o_bip, o_bix, o_bdv) != 1 ||
        !cip.acquire(o_cip, "c_indptr", 1, false, true) || !cip.check_index("c_indptr") ||
        !cix.acquire(o_cix, "c_indices", 1, true, true) || !cix.check_index("c_indices") ||
        !cdv.acquire(o_cdv, "c_data", 1, true, true))
        return normalise_error("spgemm_fill");
    const int64_t m = comp_shape(aip, 1) - 1;
    if (comp_shape(aip, 0) != 1 || comp_shape(bip, 0) != 1 || aip.itemsize() != bip.itemsize() || cip.shape(0) != m + 1 ||
        cix.itemsize() != cip.itemsize() || cix.shape(0) != cdv.shape(0) || adv.itemsize() != bdv.itemsize() ||
        cdv.itemsize() != adv.itemsize() || n_cols < 0 || float_kind(bdv) != float_kind(adv) ||
        float_kind(cdv) != float_kind(adv)) {
        PyErr_SetString(PyExc_ValueError, "spgemm_fill: inconsistent arrays");
        return nullptr;
    }
    const int kind = float_kind(adv);
    bool valid = true;
    const bool ok = dispatch_float(kind, adv.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(aip.itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            dispatch_index(cip.itemsize(), [&](auto otag) {
                using O = typename decltype(otag)::type;
                const CsrView<I, T> A = csr_view<I, T>(aip, aix, &adv, comp_shape(bip, 1) - 1);
                const CsrView<I, T> B = csr_view<I, T>(bip, bix, &bdv, n_cols);
                const O* cp = reinterpret_cast<const O*>(cip.ptr());
                // The operands again (cheap next to the product, and this entry point may be called on
                // its own), and c_indptr, which the kernel writes by.
                valid = cp[0] == 0 && cp[m] == cix.shape(0);
                for (int64_t i = 0; valid && i < m; ++i) valid = cp[i] <= cp[i + 1];
                if (!valid) return;
                Py_BEGIN_ALLOW_THREADS;
                valid = csr_valid(A) && csr_valid(B);
                Py_END_ALLOW_THREADS;
                if (!valid) return;
                O* ci = reinterpret_cast<O*>(cix.ptr());
                T* cd = reinterpret_cast<T*>(cdv.ptr());
                Py_BEGIN_ALLOW_THREADS;
                if (m < std::numeric_limits<int32_t>::max()) {
                    spgemm_fill_kernel<int32_t, I, O, T>(A, B, cp, ci, cd);
                } else {
                    spgemm_fill_kernel<int64_t, I, O, T>(A, B, cp, ci, cd);
                }
                Py_END_ALLOW_THREADS;
            });
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "spgemm_fill: unsupported value type (buffer format '%s')", adv.format());
        return nullptr;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError,
                        "spgemm_fill: an operand's compressed indices are not non-decreasing from 0 to nse, an index "
                        "is out of range, or c_indptr is not the result of spgemm_count");
        return nullptr;
    }
    Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// SDDMM: out[b, k] = alpha * (a[b] @ b[b])[i, j] + beta * values[b, k] for each entry k = (i, j) of a
// CSR pattern, i.e. a dot product of row i of a with column j of b. The wrapper passes b transposed
// (bt, (batch, n, K)), so both dot operands are rows, read with any strides.

template <class T>
inline T dense_dot(const T* x, int64_t sx, const T* y, int64_t sy, int64_t K) {
    if constexpr (Simd<T>::enabled) {
        if (sx == 1 && sy == 1) {
            // Four vectors of partial sums: a single running sum would wait for each addition in turn.
            using V = typename Simd<T>::V;
            constexpr int L = Simd<T>::lanes;
            V acc[4] = {V{}, V{}, V{}, V{}};
            int64_t k = 0;
            for (; k + 4 * L <= K; k += 4 * L) {
                for (int u = 0; u < 4; ++u) {
                    V a, b;
                    std::memcpy(&a, x + k + u * L, sizeof(V));
                    std::memcpy(&b, y + k + u * L, sizeof(V));
                    acc[u] += a * b;
                }
            }
            for (; k + L <= K; k += L) {
                V a, b;
                std::memcpy(&a, x + k, sizeof(V));
                std::memcpy(&b, y + k, sizeof(V));
                acc[0] += a * b;
            }
            const V total = (acc[0] + acc[1]) + (acc[2] + acc[3]);
            T sum = T(0);
            for (int l = 0; l < L; ++l) sum += total[l];
            for (; k < K; ++k) sum += x[k] * y[k];
            return sum;
        }
    }
    T sum = T(0);
    if (sx == 1 && sy == 1) {
        for (int64_t k = 0; k < K; ++k) sum += mul(x[k], y[k]);
    } else {
        for (int64_t k = 0; k < K; ++k) sum += mul(x[k * sx], y[k * sy]);
    }
    return sum;
}

template <class I, class T>
bool sddmm_kernel(const CsrView<I, T>& P, View3<const T> A, View3<const T> Bt, T* out, T alpha, T beta, bool use_values) {
    const int64_t nb = A.n0, K = A.n2;
    const int64_t work = (P.nb == 1 ? nb : 1) * P.nse * std::max<int64_t>(K, 1) + nb * P.n_major;
    return for_each_range(P, nb, work, [&](int64_t b, int64_t i0, int64_t i1) {
        const I* ptr = P.ptr(b);
        const I* idx = P.idx(b);
        const T* v = use_values ? P.val(b) : nullptr;
        T* o = out + b * P.nse;
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t start = ptr[i], end = ptr[i + 1];
            if (!columns_valid(P, idx + start, end - start)) return false;
            const T* x = A.at(b, i, 0);
            for (int64_t k = start; k < end; ++k) {
                const T dot = mul(alpha, dense_dot(x, A.s2, Bt.at(b, idx[k], 0), Bt.s2, K));
                o[k] = use_values ? dot + mul(beta, v[k]) : dot;
            }
        }
        return true;
    });
}

// sddmm(indptr, indices, values, a, bt, out, alpha, beta)
//   out (nb, nse) receives alpha * (a @ bt^T) sampled at the pattern, plus beta * values (None: 0).
PyObject* py_sddmm(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_vals, *o_a, *o_bt, *o_out;
    Py_complex alpha, beta;
    if (!PyArg_ParseTuple(args, "OOOOOODD", &o_ip, &o_ix, &o_vals, &o_a, &o_bt, &o_out, &alpha, &beta))
        return nullptr;
    Buffer ip, ix, vals, a, bt, out;
    const bool has_vals = o_vals != Py_None;
    if (acquire_csr(ip, ix, has_vals ? &vals : nullptr, o_ip, o_ix, o_vals) != 1 || !acquire3(a, o_a, "a", false) ||
        !acquire3(bt, o_bt, "bt", false) || !out.acquire(o_out, "out", 2, true, true))
        return normalise_error("sddmm");
    auto n3 = [](const Buffer& b, int dim) { return dim3(b, dim).first; };
    const int64_t nb = out.shape(0), m = comp_shape(ip, 1) - 1, nse = comp_shape(ix, 1);
    const bool consistent = (comp_shape(ip, 0) == 1 || comp_shape(ip, 0) == nb) && n3(a, 0) == nb &&
                            n3(bt, 0) == nb && n3(a, 1) == m && n3(a, 2) == n3(bt, 2) && out.shape(1) == nse &&
                            a.itemsize() == out.itemsize() && bt.itemsize() == out.itemsize() &&
                            (!has_vals || vals.itemsize() == out.itemsize()) && float_kind(a) == float_kind(out) &&
                            float_kind(bt) == float_kind(out) && (!has_vals || float_kind(vals) == float_kind(out));
    if (!consistent) {
        PyErr_SetString(PyExc_ValueError, "sddmm: inconsistent shapes or dtypes");
        return nullptr;
    }
    const int kind = float_kind(out);
    bool in_range = true;
    const bool ok = dispatch_float(kind, out.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(ip.itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            const CsrView<I, T> P = csr_view<I, T>(ip, ix, has_vals ? &vals : nullptr, n3(bt, 1));
            const T al = scalar_from<T>(alpha), be = scalar_from<T>(beta);
            Py_BEGIN_ALLOW_THREADS;
            in_range = sddmm_kernel<I, T>(P, view3<const T>(a), view3<const T>(bt), reinterpret_cast<T*>(out.ptr()), al,
                                          be, has_vals && be != T(0));
            Py_END_ALLOW_THREADS;
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "sddmm: unsupported value type (buffer format '%s')", out.format());
        return nullptr;
    }
    if (!in_range) {
        PyErr_SetString(PyExc_ValueError,
                        "sddmm: the compressed indices are not non-decreasing from 0 to nse, or an index is out of range");
        return nullptr;
    }
    Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// Elementwise add, subtract and multiply of two CSR matrices of one shape whose rows are canonical
// (sorted, distinct indices: invariant 5.6 of the compressed layouts), with the generic kernel's
// semantics: the result holds the union of the two operands' entries -- a side without an entry
// contributes 0, and explicit zeros (x - x) are kept -- except for multiply, which keeps only the
// entries both sides hold and those whose product is not 0 (x * 0 for an infinite or NaN x is NaN,
// which IEEE 754 and the generic kernel keep).
//
// Two parallel passes over chunks of rows of about equal cost: merge_count checks the rows and writes
// each row's count, then their running sums (the result's indptr); merge_fill writes the entries where
// the indptr says. Short rows are merged by comparing every pair of indices (see kPairwiseFactor):
// with a dozen entries per row in random columns, a merge's branch per entry is mispredicted about
// half the time, which is most of the time of SciPy's merge.

enum MergeOp : int { kMergeAdd = 0, kMergeSubtract = 1, kMergeMultiply = 2 };

// Integer results wrap around as in numpy (signed overflow is undefined in C++, unsigned is not).
template <int Op, class T>
inline T merge_apply(const T& a, const T& b) {
    if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        const U x = static_cast<U>(a), y = static_cast<U>(b);
        if constexpr (Op == kMergeAdd) return static_cast<T>(static_cast<U>(x + y));
        if constexpr (Op == kMergeSubtract) return static_cast<T>(static_cast<U>(x - y));
        if constexpr (Op == kMergeMultiply) return static_cast<T>(static_cast<U>(x * y));
    } else {
        if constexpr (Op == kMergeAdd) return a + b;
        if constexpr (Op == kMergeSubtract) return a - b;
        if constexpr (Op == kMergeMultiply) return mul(a, b);
    }
}

// Whether x * 0 can be non-zero (NaN): only for floating values.
template <class T>
constexpr bool kHasNaN = !std::is_integral_v<T>;

// Whether row [s, e) of idx is strictly increasing within [0, n_minor).
template <class I>
inline bool row_canonical(const I* idx, int64_t s, int64_t e, int64_t n_minor) {
    if (s == e) return true;
    bool ok = idx[s] >= 0 && static_cast<int64_t>(idx[e - 1]) < n_minor;
    for (int64_t k = s + 1; k < e; ++k) ok &= idx[k - 1] < idx[k];
    return ok;
}

// Rows this short -- entries of one times entries of the other at most kPairwiseFactor times their
// sum -- are merged by comparing every pair of their indices: each comparison is independent of the
// others (and vectorised), where a merge's next step waits for the last one (a mispredicted branch,
// or a load feeding a select, about 7 cycles an entry either way), which made the merge loop the
// whole cost of a sum of two random matrices.
constexpr int64_t kPairwiseFactor = 16;

inline bool pairwise(int64_t na, int64_t nb) { return na * nb <= kPairwiseFactor * (na + nb); }

// The number of indices of a[0, na) that b[0, nb) holds too (each row strictly increasing).
template <class I>
inline int64_t count_common(const I* __restrict a, int64_t na, const I* __restrict b, int64_t nb) {
    int64_t c = 0;
    for (int64_t k = 0; k < na; ++k) {
        const I x = a[k];
        I m = 0;
        for (int64_t j = 0; j < nb; ++j) m += b[j] == x;
        c += m;
    }
    return c;
}

// The number of indices of b[0, nb) below x.
template <class I>
inline int64_t rank_below(const I* __restrict b, int64_t nb, I x) {
    I c = 0;
    for (int64_t j = 0; j < nb; ++j) c += b[j] < x;
    return c;
}

// Whether some v[k] * 0 is not 0 (an infinite or NaN value): only then can a product with a missing
// entry be kept.
template <class T>
inline bool has_nan_products(const T* __restrict v, int64_t n) {
    if constexpr (!kHasNaN<T>) {
        return false;
    } else {
        bool any = false;
        for (int64_t k = 0; k < n; ++k) any |= mul(v[k], T(0)) != T(0);
        return any;
    }
}

// The merge of rows a[pa, ea) and b[pb, eb), one entry at a time (as SciPy merges): returns the
// number of entries of the result and, with Write, writes those that fit in [o, end).
template <int Op, bool Write, class I, class T>
inline int64_t merge_exact(const I* __restrict ai, const T* __restrict av, int64_t pa, int64_t ea,
                           const I* __restrict bi, const T* __restrict bv, int64_t pb, int64_t eb,
                           I* __restrict oi, T* __restrict ov, int64_t o, int64_t end) {
    const int64_t o0 = o;
    auto emit = [&](I j, T r, bool both) {
        if (Op == kMergeMultiply && !both && r == T(0)) return;
        if constexpr (Write) {
            if (o < end) oi[o] = j, ov[o] = r;
        }
        ++o;
    };
    while (pa < ea && pb < eb) {
        const I x = ai[pa], y = bi[pb];
        if (x == y) {
            emit(x, merge_apply<Op>(av[pa++], bv[pb++]), true);
        } else if (x < y) {
            emit(x, merge_apply<Op>(av[pa++], T(0)), false);
        } else {
            emit(y, merge_apply<Op>(T(0), bv[pb++]), false);
        }
    }
    for (; pa < ea; ++pa) emit(ai[pa], merge_apply<Op>(av[pa], T(0)), false);
    for (; pb < eb; ++pb) emit(bi[pb], merge_apply<Op>(T(0), bv[pb]), false);
    return o - o0;
}

// The number of entries of the merge of rows a[sa, ea) and b[sb, eb).
template <int Op, class I, class T>
inline int64_t merge_count_row(const I* ai, const T* av, int64_t sa, int64_t ea, const I* bi, const T* bv, int64_t sb,
                               int64_t eb) {
    const int64_t na = ea - sa, nb = eb - sb;
    if constexpr (Op != kMergeMultiply) {
        if (pairwise(na, nb)) return na + nb - count_common(ai + sa, na, bi + sb, nb);
    } else {
        // Without infinities and NaNs a product keeps the entries both sides hold, and only those.
        if (pairwise(na, nb) && !has_nan_products(av + sa, na) && !has_nan_products(bv + sb, nb))
            return count_common(ai + sa, na, bi + sb, nb);
    }
    return merge_exact<Op, false>(ai, av, sa, ea, bi, bv, sb, eb, static_cast<I*>(nullptr), static_cast<T*>(nullptr), 0, 0);
}

// Writes the merge of rows a[sa, ea) and b[sb, eb) at [o, end); returns whether it had that many
// entries (it always has, unless the operands changed since they were counted).
template <int Op, class I, class T>
inline bool merge_fill_row(const I* __restrict ai, const T* __restrict av, int64_t sa, int64_t ea,
                           const I* __restrict bi, const T* __restrict bv, int64_t sb, int64_t eb,
                           I* __restrict oi, T* __restrict ov, int64_t o, int64_t end) {
    const int64_t na = ea - sa, nb = eb - sb;
    const I* a = ai + sa;
    const I* b = bi + sb;
    if constexpr (Op != kMergeMultiply) {
        if (pairwise(na, nb) && end - o == na + nb) {
            // No index in common: each entry goes to its own index plus the other row's entries
            // below it (at most na + nb - 1 past o, whatever the rows hold).
            for (int64_t k = 0; k < na; ++k) {
                const int64_t q = o + k + rank_below(b, nb, a[k]);
                oi[q] = a[k];
                ov[q] = merge_apply<Op>(av[sa + k], T(0));
            }
            for (int64_t j = 0; j < nb; ++j) {
                const int64_t q = o + j + rank_below(a, na, b[j]);
                oi[q] = b[j];
                ov[q] = merge_apply<Op>(T(0), bv[sb + j]);
            }
            return true;
        }
    } else {
        if (pairwise(na, nb) && !has_nan_products(av + sa, na) && !has_nan_products(bv + sb, nb)) {
            for (int64_t k = 0; k < na; ++k) {
                const I x = a[k];
                for (int64_t j = 0; j < nb; ++j) {
                    if (b[j] == x) {  // rarely taken: random rows have few indices in common
                        if (o < end) oi[o] = x, ov[o] = merge_apply<Op>(av[sa + k], bv[sb + j]);
                        ++o;
                    }
                }
            }
            return o == end;
        }
    }
    return merge_exact<Op, true>(ai, av, sa, ea, bi, bv, sb, eb, oi, ov, o, end) == end - o;
}

// Row ranges of about equal cost (rows plus both operands' entries), one per chunk.
template <class I, class T>
std::vector<int64_t> merge_bounds(const CsrView<I, T>& A, const CsrView<I, T>& B, int64_t n_chunks) {
    if (n_chunks == 1) return {0, A.n_major};
    return split_rows(A.n_major, n_chunks,
                      [&](int64_t r) { return r + A.entry_offset(r, 1) + B.entry_offset(r, 1); });
}

// Chunks of work for `threads` threads (the caller's choice: see _cpu.available_threads).
inline int64_t chunks_for_threads(int64_t work, int threads) {
    return (work >= kParallelMinEntries && threads > 1) ? int64_t{threads} * kChunksPerThread : 1;
}

template <int Op, class I, class T>
bool merge_count_kernel(const CsrView<I, T>& A, const CsrView<I, T>& B, I* cp, int threads) {
    const int64_t m = A.n_major;
    const int64_t n_chunks = chunks_for_threads(m + A.nse + B.nse, threads);
    const std::vector<int64_t> bounds = merge_bounds(A, B, n_chunks);
    bool ok = true;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(&& : ok) if (n_chunks > 1)
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
        const int64_t i0 = bounds[chunk], i1 = bounds[chunk + 1];
        const I* ap = A.indptr;
        const I* bp = B.indptr;
        bool good = offsets_valid(ap, i0, i1, m, A.nse, A.n_minor == 0) && offsets_valid(bp, i0, i1, m, B.nse, B.n_minor == 0);
        for (int64_t i = i0; good && i < i1; ++i) {
            const int64_t sa = ap[i], ea = ap[i + 1], sb = bp[i], eb = bp[i + 1];
            good = row_canonical(A.indices, sa, ea, A.n_minor) && row_canonical(B.indices, sb, eb, B.n_minor);
            cp[i + 1] = static_cast<I>(merge_count_row<Op>(A.indices, A.data, sa, ea, B.indices, B.data, sb, eb));
        }
        ok = good && ok;
    }
    if (!ok) return false;
    cp[0] = 0;
    for (int64_t i = 0; i < m; ++i) cp[i + 1] += cp[i];
    return true;
}

template <int Op, class I, class T>
bool merge_fill_kernel(const CsrView<I, T>& A, const CsrView<I, T>& B, const I* cp, int64_t nnz, I* ci, T* cd, int threads) {
    const int64_t m = A.n_major;
    const int64_t n_chunks = chunks_for_threads(m + A.nse + B.nse, threads);
    const std::vector<int64_t> bounds = merge_bounds(A, B, n_chunks);
    bool ok = cp[0] == 0 && cp[m] == nnz;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(&& : ok) if (n_chunks > 1)
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
        const int64_t i0 = bounds[chunk], i1 = bounds[chunk + 1];
        const I* ap = A.indptr;
        const I* bp = B.indptr;
        bool good = offsets_valid(ap, i0, i1, m, A.nse, A.n_minor == 0) && offsets_valid(bp, i0, i1, m, B.nse, B.n_minor == 0) &&
                    offsets_valid(cp, i0, i1, m, nnz, false);
        for (int64_t i = i0; good && i < i1; ++i) {
            if (cp[i] == cp[i + 1]) continue;  // nothing to write (most rows of a product)
            good = merge_fill_row<Op>(A.indices, A.data, ap[i], ap[i + 1], B.indices, B.data, bp[i], bp[i + 1], ci, cd,
                                      cp[i], cp[i + 1]);
        }
        ok = good && ok;
    }
    return ok;
}

// Calls f(Tag<T>{}) for the value types of the merges and sums: the floating ones, int32 and int64.
template <class F>
bool dispatch_arith(int kind, Py_ssize_t itemsize, F&& f) {
    if (kind == 'i' && itemsize == 4) return f(Tag<int32_t>{}), true;
    if (kind == 'i' && itemsize == 8) return f(Tag<int64_t>{}), true;
    return dispatch_float(kind, itemsize, f);
}

template <class F>
void dispatch_merge_op(int op, F&& f) {
    if (op == kMergeAdd) {
        f(std::integral_constant<int, kMergeAdd>{});
    } else if (op == kMergeSubtract) {
        f(std::integral_constant<int, kMergeSubtract>{});
    } else {
        f(std::integral_constant<int, kMergeMultiply>{});
    }
}

// Acquires two 1-D CSR matrices of one index dtype and one value dtype (contiguous, as the wrapper
// passes them), and the result's indptr.
bool acquire_merge(Buffer (&bufs)[7], PyObject* const (&objs)[7], int64_t n_minor) {
    static const char* const names[7] = {"a_indptr", "a_indices", "a_data", "b_indptr", "b_indices", "b_data", "c_indptr"};
    for (int k = 0; k < 7; ++k) {
        const bool writable = k == 6;
        if (!bufs[k].acquire(objs[k], names[k], 1, writable, true)) return false;
        if (k % 3 != 2 && !bufs[k].check_index(names[k])) return false;
    }
    const bool consistent = bufs[0].itemsize() == bufs[1].itemsize() && bufs[3].itemsize() == bufs[0].itemsize() &&
                            bufs[4].itemsize() == bufs[0].itemsize() && bufs[6].itemsize() == bufs[0].itemsize() &&
                            bufs[0].shape(0) >= 1 && bufs[3].shape(0) == bufs[0].shape(0) &&
                            bufs[6].shape(0) == bufs[0].shape(0) && bufs[2].shape(0) == bufs[1].shape(0) &&
                            bufs[5].shape(0) == bufs[4].shape(0) && bufs[2].itemsize() == bufs[5].itemsize() &&
                            n_minor >= 0;
    if (!consistent) PyErr_SetString(PyExc_ValueError, "merge: inconsistent arrays");
    return consistent;
}

template <class I, class T>
CsrView<I, T> flat_csr(const Buffer& ip, const Buffer& ix, const Buffer& dv, int64_t n_minor) {
    return csr_view<I, T>(ip, ix, &dv, n_minor);
}

const char kMergeInvalid[] =
    "merge: an operand's compressed indices are not non-decreasing from 0 to nse, or a row's indices are not "
    "strictly increasing within [0, n_minor) (a compressed array must be canonical)";

// merge_count(op, kind, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, n_minor, c_indptr, threads) -> nnz
//   op: 0 add, 1 subtract, 2 multiply; kind: numpy's kind of the values ('f', 'c', 'i').
PyObject* py_merge_count(PyObject*, PyObject* args) {
    int op, kind, threads;
    long long n_minor;
    PyObject* o[7];
    if (!PyArg_ParseTuple(args, "iCOOOOOOLOi", &op, &kind, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &n_minor, &o[6],
                          &threads))
        return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer b[7];
    if (!acquire_merge(b, o, n_minor)) return nullptr;
    bool valid = true;
    long long nnz = 0;
    const bool ok = dispatch_arith(kind, b[2].itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(b[0].itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            const CsrView<I, T> A = flat_csr<I, T>(b[0], b[1], b[2], n_minor);
            const CsrView<I, T> B = flat_csr<I, T>(b[3], b[4], b[5], n_minor);
            I* cp = reinterpret_cast<I*>(b[6].ptr());
            dispatch_merge_op(op, [&](auto otag) {
                constexpr int Op = decltype(otag)::value;
                Py_BEGIN_ALLOW_THREADS;
                valid = merge_count_kernel<Op, I, T>(A, B, cp, threads);
                Py_END_ALLOW_THREADS;
            });
            if (valid) nnz = static_cast<long long>(cp[A.n_major]);
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "merge_count: unsupported value type (buffer format '%s')", b[2].format());
        return nullptr;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, kMergeInvalid);
        return nullptr;
    }
    return PyLong_FromLongLong(nnz);
}

// merge_fill(op, kind, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, n_minor, c_indptr, c_indices, c_data,
//            threads)
//   after merge_count on the same operands (c_indptr is its result).
PyObject* py_merge_fill(PyObject*, PyObject* args) {
    int op, kind, threads;
    long long n_minor;
    PyObject* o[7];
    PyObject *o_cix, *o_cdv;
    if (!PyArg_ParseTuple(args, "iCOOOOOOLOOOi", &op, &kind, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &n_minor, &o[6],
                          &o_cix, &o_cdv, &threads))
        return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer b[7], cix, cdv;
    if (!acquire_merge(b, o, n_minor) || !cix.acquire(o_cix, "c_indices", 1, true, true) ||
        !cix.check_index("c_indices") || !cdv.acquire(o_cdv, "c_data", 1, true, true))
        return nullptr;
    if (cix.itemsize() != b[0].itemsize() || cdv.itemsize() != b[2].itemsize() || cdv.shape(0) != cix.shape(0)) {
        PyErr_SetString(PyExc_ValueError, "merge_fill: inconsistent arrays");
        return nullptr;
    }
    bool valid = true;
    const bool ok = dispatch_arith(kind, b[2].itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(b[0].itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            const CsrView<I, T> A = flat_csr<I, T>(b[0], b[1], b[2], n_minor);
            const CsrView<I, T> B = flat_csr<I, T>(b[3], b[4], b[5], n_minor);
            dispatch_merge_op(op, [&](auto otag) {
                constexpr int Op = decltype(otag)::value;
                Py_BEGIN_ALLOW_THREADS;
                valid = merge_fill_kernel<Op, I, T>(A, B, reinterpret_cast<const I*>(b[6].ptr()), cix.shape(0),
                                                    reinterpret_cast<I*>(cix.ptr()), reinterpret_cast<T*>(cdv.ptr()), threads);
                Py_END_ALLOW_THREADS;
            });
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "merge_fill: unsupported value type (buffer format '%s')", b[2].format());
        return nullptr;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "merge_fill: the operands are not canonical, or c_indptr is not the result of merge_count");
        return nullptr;
    }
    Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// Sums of a CSR matrix along one dimension (fill value 0): the row sums (each row's values in
// storage order, in parallel over rows), and the column sums with which columns hold an entry (each
// thread scatters a range of rows into its own copy of the sums and marks, then the copies are
// added up in parallel over columns: no atomics).

template <class T>
inline T sum_add(const T& a, const T& b) {
    return merge_apply<kMergeAdd>(a, b);
}

template <class I, class T>
bool row_sums_kernel(const CsrView<I, T>& A, T* out, int threads) {
    const int64_t m = A.n_major;
    const int64_t n_chunks = chunks_for_threads(A.nse + m, threads);
    const std::vector<int64_t> bounds =
        n_chunks > 1 ? split_rows(m, n_chunks, [&](int64_t r) { return r + A.entry_offset(r, 1); }) : std::vector<int64_t>{0, m};
    const I* ptr = A.indptr;
    const T* v = A.data;
    bool ok = true;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(&& : ok) if (n_chunks > 1)
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
        bool good = true;
        for (int64_t r = bounds[chunk], i1 = bounds[chunk + 1]; good && r < i1; r += kCheckRows) {
            const int64_t r1 = std::min(i1, r + kCheckRows);
            good = offsets_valid(ptr, r, r1, m, A.nse, A.n_minor == 0);
            for (int64_t i = r; good && i < r1; ++i) {
                T s = T(0);
                for (int64_t k = ptr[i], e = ptr[i + 1]; k < e; ++k) s = sum_add(s, v[k]);
                out[i] = s;
            }
        }
        ok = good && ok;
    }
    return ok;
}

// Whether x is -0.0 (bitwise: -0.0 == 0.0 compares equal). One integer comparison, so that the
// column sums' scatter loop, which checks every value, stays as short as it can.
template <class T>
inline bool negative_zero(const T& x) {
    if constexpr (std::is_same_v<T, double>) {
        uint64_t u;
        std::memcpy(&u, &x, sizeof u);
        return u == (uint64_t{1} << 63);
    } else if constexpr (std::is_same_v<T, float>) {
        uint32_t u;
        std::memcpy(&u, &x, sizeof u);
        return u == (uint32_t{1} << 31);
    } else {
        return false;
    }
}

// Column sums into out, and (unless seen is null) which columns hold an entry. For real floating
// values the columns met need no marks of their own: the sums start from -0.0, which adding any value
// x turns into x (-0.0 + 0.0 = 0.0), so a sum is still -0.0 exactly where no value but -0.0 was
// added -- the empty columns, when no stored value is -0.0. Marking each entry instead doubled the
// scatter's time, and so did looking for a stored -0.0 in its loop: the values are read for one only
// when some sum is -0.0 (a column looks empty), in a pass of their own. Returns false when indices or
// offsets are out of range; *seen_known says whether seen was filled (not when a value is -0.0: the
// caller then finds the columns itself, and their sums are -0.0 where they should be 0.0 if empty).
template <class I, class T>
bool col_sums_kernel(const CsrView<I, T>& A, T* out, uint8_t* seen, bool* seen_known, int max_team) {
    const int64_t m = A.n_major, n = A.n_minor;
    const int64_t work = A.nse + m;
    const int threads = (work >= kParallelMinEntries && n <= A.nse) ? max_team : 1;
    constexpr bool kSignedZeros = std::is_floating_point_v<T>;
    const bool zero_marks = kSignedZeros && seen != nullptr;
    const T start = zero_marks ? -T(0) : T(0);
    // Row ranges of about equal entries, taken by the threads as they come (a thread that gets no CPU
    // time on a busy machine leaves its share to the others); each thread adds into its own copy,
    // thread 0 into `out`.
    const int64_t n_chunks = threads > 1 ? int64_t{threads} * kChunksPerThread : 1;
    const std::vector<int64_t> bounds =
        n_chunks > 1 ? split_rows(m, n_chunks, [&](int64_t r) { return r + A.entry_offset(r, 1); }) : std::vector<int64_t>{0, m};
    std::vector<T> part(static_cast<size_t>(threads - 1) * static_cast<size_t>(n));
    // Otherwise the columns each thread met, as bits: an eighth of the cache footprint of bytes.
    const int64_t words = (n + 63) / 64;
    const bool bit_marks = seen != nullptr && !zero_marks;
    std::vector<uint64_t> bits(bit_marks ? static_cast<size_t>(threads) * static_cast<size_t>(words) : 0);
    std::vector<uint8_t> used(static_cast<size_t>(threads), 0);
    int64_t looks_empty = 0;    // columns whose sum is -0.0
    bool stored_negz = false;  // a stored value is -0.0 (read only when looks_empty)
    bool ok = true;
#pragma omp parallel num_threads(threads) reduction(&& : ok) if (threads > 1)
    {
#ifdef _OPENMP
        const int t = omp_get_thread_num();
        const int nt = omp_get_num_threads();
#else
        const int t = 0, nt = 1;
#endif
        T* s = t == 0 ? out : part.data() + static_cast<size_t>(t - 1) * n;
        uint64_t* mk = bit_marks ? bits.data() + static_cast<size_t>(t) * words : nullptr;
        // out is always cleared (and its marks); a helper's copy once it takes a chunk
        if (t == 0) {
            std::fill(s, s + n, start);
            if (mk != nullptr) std::fill(mk, mk + words, uint64_t{0});
            used[0] = 1;
        }
        const I* ptr = A.indptr;
        const I* idx = A.indices;
        const T* v = A.data;
        bool good = true;
#pragma omp for schedule(dynamic, 1)
        for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
            if (!used[static_cast<size_t>(t)]) {
                std::fill(s, s + n, start);
                if (mk != nullptr) std::fill(mk, mk + words, uint64_t{0});
                used[static_cast<size_t>(t)] = 1;
            }
            for (int64_t r = bounds[chunk], i1 = bounds[chunk + 1]; good && r < i1; r += kCheckRows) {
                const int64_t r1 = std::min(i1, r + kCheckRows);
                good = offsets_valid(ptr, r, r1, A.n_major, A.nse, n == 0) &&
                       indices_in_range(idx + ptr[r], static_cast<int64_t>(ptr[r1] - ptr[r]), n);
                if (!good) break;
                if (mk != nullptr) {
                    for (int64_t k = ptr[r], e = ptr[r1]; k < e; ++k) {
                        const int64_t j = idx[k];
                        s[j] = sum_add(s[j], v[k]);
                        mk[j >> 6] |= uint64_t{1} << (j & 63);
                    }
                } else {
                    for (int64_t k = ptr[r], e = ptr[r1]; k < e; ++k) s[idx[k]] = sum_add(s[idx[k]], v[k]);
                }
            }
        }
        ok = good;
        // (the loop's implicit barrier: every copy is complete)
#pragma omp for schedule(dynamic, 16384) reduction(+ : looks_empty)
        for (int64_t j = 0; j < n; ++j) {
            T acc = out[j];
            for (int u = 1; u < nt; ++u) {
                if (used[static_cast<size_t>(u)]) acc = sum_add(acc, part[static_cast<size_t>(u - 1) * n + j]);
            }
            if (zero_marks) {
                const bool empty = negative_zero(acc);
                seen[j] = static_cast<uint8_t>(!empty);
                looks_empty += empty;
            } else if (bit_marks) {
                uint64_t any = 0;
                for (int u = 0; u < nt; ++u) {
                    if (used[static_cast<size_t>(u)]) any |= bits[static_cast<size_t>(u) * words + (j >> 6)];
                }
                seen[j] = static_cast<uint8_t>((any >> (j & 63)) & 1);
            }
            out[j] = acc;
        }
        // (the reduction's barrier: looks_empty is final for every thread)
        if (zero_marks && looks_empty > 0) {
#pragma omp for schedule(static) reduction(|| : stored_negz)
            for (int64_t k = 0; k < A.nse; ++k) stored_negz |= negative_zero(v[k]);
            // (no stored -0.0: the columns whose sum is -0.0 are the empty ones, whose sum is +0.0)
            if (!stored_negz) {
#pragma omp for schedule(static)
                for (int64_t j = 0; j < n; ++j) {
                    if (!seen[j]) out[j] = T(0);
                }
            }
        }
#pragma omp single
        *seen_known = seen != nullptr && (!zero_marks || looks_empty == 0 || !stored_negz);
    }
    return ok;
}

// csr_sums(axis, kind, indptr, indices, data, n_minor, out, seen, threads) -> whether seen was filled
//   axis 1: out (m,) = the row sums; axis 0: out (n_minor,) = the column sums, and seen (n_minor,) uint8
//   (or None) = whether the column holds an entry. kind: numpy's kind of the values ('f', 'c', 'i').
PyObject* py_csr_sums(PyObject*, PyObject* args) {
    int axis, kind, threads;
    long long n_minor;
    PyObject *o_ip, *o_ix, *o_dv, *o_out, *o_seen;
    if (!PyArg_ParseTuple(args, "iCOOOLOOi", &axis, &kind, &o_ip, &o_ix, &o_dv, &n_minor, &o_out, &o_seen, &threads))
        return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ip, ix, dv, out, seen;
    const bool has_seen = o_seen != Py_None;
    if (!ip.acquire(o_ip, "indptr", 1, false, true) || !ip.check_index("indptr") ||
        !ix.acquire(o_ix, "indices", 1, false, true) || !ix.check_index("indices") ||
        !dv.acquire(o_dv, "data", 1, false, true) || !out.acquire(o_out, "out", 1, true, true) ||
        (has_seen && !seen.acquire(o_seen, "seen", 1, true, true)))
        return nullptr;
    const int64_t m = ip.shape(0) - 1;
    if (ip.itemsize() != ix.itemsize() || m < 0 || dv.shape(0) != ix.shape(0) || out.itemsize() != dv.itemsize() ||
        out.shape(0) != (axis == 1 ? m : n_minor) || n_minor < 0 || (has_seen && (seen.itemsize() != 1 || seen.shape(0) != n_minor))) {
        PyErr_SetString(PyExc_ValueError, "csr_sums: inconsistent arrays");
        return nullptr;
    }
    bool valid = true, seen_known = false;
    const bool ok = dispatch_arith(kind, dv.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(ip.itemsize(), [&](auto itag) {
            using I = typename decltype(itag)::type;
            const CsrView<I, T> A = flat_csr<I, T>(ip, ix, dv, n_minor);
            T* o = reinterpret_cast<T*>(out.ptr());
            uint8_t* sn = has_seen ? reinterpret_cast<uint8_t*>(seen.ptr()) : nullptr;
            Py_BEGIN_ALLOW_THREADS;
            valid = axis == 1 ? row_sums_kernel<I, T>(A, o, threads) : col_sums_kernel<I, T>(A, o, sn, &seen_known, threads);
            Py_END_ALLOW_THREADS;
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "csr_sums: unsupported value type (buffer format '%s')", dv.format());
        return nullptr;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError,
                        "csr_sums: the compressed indices are not non-decreasing from 0 to nse, or an index is out of range");
        return nullptr;
    }
    return PyBool_FromLong(seen_known);
}

// ---------------------------------------------------------------------------------------------
// Structure kernels of compressed arrays: the compressed indices expanded into COO index rows, the
// transpose of the structure (CSR <-> CSC of one matrix), and the join of several arrays along the
// plain dimension (CSR side by side). Batches are laid end to end: batch b, slice i is global slice
// b * n_major + i, its entries at b * nse + ptr[b][i] in (nb, nse) component arrays. The values are
// moved as opaque entries of `eb` bytes (an element, or a block with its dense dimensions), so every
// dtype takes one path; the kernels never read them.

// Whether every batch's offsets start at 0 and end at nse, the exact bounds these kernels rely on to
// write every output position (the order between them is checked block by block, offsets_valid).
template <class I>
bool batch_bounds_exact(const I* ptr, int64_t nb, int64_t m, int64_t nse) {
    for (int64_t b = 0; b < nb; ++b) {
        if (ptr[b * (m + 1)] != 0 || ptr[b * (m + 1) + m] != nse) return false;
    }
    return true;
}

// Copies one entry of E bytes (a constant for the common sizes, so that the copy is one move).
template <int E>
inline void copy_entry(char* dst, const char* src, int64_t eb) {
    if constexpr (E > 0) {
        std::memcpy(dst, src, E);
    } else {
        std::memcpy(dst, src, static_cast<size_t>(eb));
    }
}

template <class F>
void dispatch_entry_bytes(int64_t eb, F&& f) {
    switch (eb) {
        case 1: return f(std::integral_constant<int, 1>{});
        case 2: return f(std::integral_constant<int, 2>{});
        case 4: return f(std::integral_constant<int, 4>{});
        case 8: return f(std::integral_constant<int, 8>{});
        case 16: return f(std::integral_constant<int, 16>{});
        default: return f(std::integral_constant<int, 0>{});
    }
}

// Splits nb * m global slices into n_chunks ranges of about equal rows + entries.
template <class I>
std::vector<int64_t> split_slices(const I* ptr, int64_t nb, int64_t m, int64_t nse, int64_t n_chunks) {
    if (n_chunks <= 1 || nb * m == 0) return {0, nb * m};
    return split_rows(nb * m, n_chunks, [&](int64_t r) {
        const int64_t b = r / m, i = r - b * m;
        if (b >= nb) return r + nb * nse;
        return r + b * nse + std::clamp<int64_t>(static_cast<int64_t>(ptr[b * (m + 1) + i]), 0, nse);
    });
}

// Calls fn(b, i0, i1) for blocks of at most kCheckRows slices of one batch covering global slices
// [r, r1), each after its offsets are checked; returns whether all were valid.
template <class I, class Fn>
bool for_each_block(const I* ptr, int64_t m, int64_t nse, int64_t r, int64_t r1, Fn&& fn) {
    while (r < r1) {
        const int64_t b = r / m, i0 = r - b * m, i1 = std::min({m, i0 + (r1 - r), i0 + kCheckRows});
        if (!offsets_valid(ptr + b * (m + 1), i0, i1, m, nse, false)) return false;
        fn(b, i0, i1);
        r += i1 - i0;
    }
    return true;
}

// The compressed indices expanded: major[b * nse + k] is the slice of entry k of batch b, and
// minor[...] its plain index (converted to O); in parallel over ranges of slices. Returns 1, or -1
// when some slice's plain indices do not increase strictly (everything is written all the same: the
// caller then sorts and sums), or 0 when the offsets are out of order or range.
constexpr int64_t kFillRun = 8;

template <class I, class O>
int expand_kernel(const I* ptr, const I* plain, int64_t nb, int64_t m, int64_t nse, O* major, O* minor, int threads) {
    if (!batch_bounds_exact(ptr, nb, m, nse)) return 0;
    const int64_t n_chunks = (nb * nse + nb * m >= kParallelMinEntries && threads > 1) ? int64_t{threads} * kChunksPerThread : 1;
    const std::vector<int64_t> bounds = split_slices(ptr, nb, m, nse, n_chunks);
    bool ok = true, increasing = true;
    const int64_t n_ranges = static_cast<int64_t>(bounds.size()) - 1;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(&& : ok, increasing) if (n_ranges > 1)
    for (int64_t c = 0; c < n_ranges; ++c) {
        bool up = true;
        ok = for_each_block(ptr, m, nse, bounds[c], bounds[c + 1], [&](int64_t b, int64_t i0, int64_t i1) {
            const I* p = ptr + b * (m + 1);
            const int64_t base = b * nse;
            const I* src = plain + base;
            O* out = major + base;
            O* dst = minor + base;
            const int64_t k0 = p[i0], k1 = p[i1];
            // Each slice's index is written over kFillRun positions at once (one or two vector stores),
            // past its end where it is short: the slices after it overwrite that, and the last ones of
            // the block, whose run would reach past it (another thread's range), are written exactly.
            // A slice loop of a few stores, where a loop per position cost most of the time.
            int64_t i = i0;
            for (; i < i1 && p[i] + kFillRun <= k1; ++i) {
                const O v = static_cast<O>(i);
                const int64_t s = p[i], e = p[i + 1];
                for (int64_t j = 0; j < kFillRun; ++j) out[s + j] = v;
                for (int64_t k = s + kFillRun; k < e; ++k) out[k] = v;
            }
            for (; i < i1; ++i) {
                const O v = static_cast<O>(i);
                for (int64_t k = p[i], e = p[i + 1]; k < e; ++k) out[k] = v;
            }
            // The plain indices are copied and compared with their predecessors on one pass: within
            // the block they may decrease only where a slice starts, and a canonical block has exactly
            // as many decreases (or repeats) as starts of non-empty slices that follow a lower index.
            int64_t falls = 0, starts = 0;
            if (k0 < k1) dst[k0] = static_cast<O>(src[k0]);
            for (int64_t k = k0 + 1; k < k1; ++k) {
                dst[k] = static_cast<O>(src[k]);
                falls += src[k - 1] >= src[k];
            }
            for (int64_t r = i0; r < i1; ++r) {
                const int64_t s = p[r];
                if (s > k0 && s < p[r + 1]) starts += src[s - 1] >= src[s];
            }
            up = up && falls == starts;
        }) && ok;
        increasing = up && increasing;
    }
    return ok ? (increasing ? 1 : -1) : 0;
}

// The transpose of the structure: the compressed array of the same batches of matrices in the other
// layout (a CSR array's CSC), a counting sort by plain index. The input's slices are visited in
// order, so each output slice receives its entries in increasing index order: canonical whenever
// every input slice holds distinct plain indices. Each of the `threads` threads counts a range of
// input slices into its own counters, the counters are turned into that thread's first output
// position per plain index, and each thread then scatters its range: no atomics, and the result is
// the serial one. Returns 1, or 0 when offsets or plain indices are out of range, or -1 (nothing
// written) when an input slice's indices are not strictly increasing -- then they may repeat, and
// the caller sums them another way.
template <class I, class O, class P, int E>
int transpose_kernel(const I* ptr, const I* idx, const char* val, int64_t nb, int64_t m, int64_t n, int64_t nse,
                     int64_t eb, O* optr, O* oidx, char* oval, int threads) {
    if (!batch_bounds_exact(ptr, nb, m, nse)) return 0;
    const int64_t C = nb * n;  // global output slices
    if (nb * nse + C < kParallelMinEntries || nb * m == 0) threads = 1;
    // one range of input slices per thread, each with its own counters (then cursors): a range is
    // worked on by one thread, whichever, so the result holds however many threads the runtime gives
    const std::vector<int64_t> bounds = split_slices(ptr, nb, m, nse, threads);
    const int n_ranges = static_cast<int>(bounds.size()) - 1;
    std::vector<P> cursor(static_cast<size_t>(n_ranges) * static_cast<size_t>(C));
    std::vector<int64_t> start(static_cast<size_t>(C) + 1);
    std::vector<int> status(static_cast<size_t>(n_ranges), 1);
    auto counters = [&](int r) { return cursor.data() + static_cast<size_t>(r) * static_cast<size_t>(C); };
    // Counts the range's entries per plain index; its status: 1, 0 (out of range) or -1 (a slice's
    // indices do not increase strictly).
    auto count_range = [&](int r) {
        P* cnt = counters(r);
        std::fill(cnt, cnt + C, P{0});
        int st = 1;
        // One flat pass over the block's entries: a loop per slice would mispredict its exit once per
        // short slice, which cost three times the counting itself. The indices may fall (or repeat) only
        // where a slice starts; a block with more falls than such starts has a slice out of order.
        auto count = [&](int64_t b, int64_t i0, int64_t i1) {
            if (st != 1) return;
            const I* p = ptr + b * (m + 1);
            const I* ix = idx + b * nse;
            P* c = cnt + b * n;
            const int64_t k0 = p[i0], k1 = p[i1];
            int64_t falls = 0, starts = 0, prev = -1;
            for (int64_t k = k0; k < k1; ++k) {
                const int64_t j = ix[k];
                if (static_cast<uint64_t>(j) >= static_cast<uint64_t>(n)) {
                    st = 0;
                    return;
                }
                ++c[j];
                falls += prev >= j;
                prev = j;
            }
            for (int64_t i = i0 + 1; i < i1; ++i) {
                const int64_t s = p[i];
                starts += s > k0 && s < p[i + 1] && ix[s - 1] >= ix[s];
            }
            if (falls != starts) st = -1;
        };
        if (!for_each_block(ptr, m, nse, bounds[r], bounds[r + 1], count)) st = 0;
        status[static_cast<size_t>(r)] = st;
    };
    // Scatters the range's entries from its cursors. Where the output outgrows the caches, the cursor
    // of the entry 2 * kPrefetchDistance ahead and the destinations of the one kPrefetchDistance ahead
    // are prefetched: the writes go to random places (as in the COO scatter). Below that the extra
    // loads and instructions cost a fifth of the scatter (one thread, 200,000 float64 entries:
    // 0.62 ms with them, 0.52 without; 2,000,000: 10.3 ms with them, 14.9 without).
    const bool prefetch = nb * nse * (eb + static_cast<int64_t>(sizeof(O))) > kPrefetchMinBytes;
    auto scatter_range = [&](int r) {
        P* cnt = counters(r);
        for (int64_t j = 0; j < C; ++j) cnt[j] = static_cast<P>(cnt[j] + start[static_cast<size_t>(j)]);
        for_each_block(ptr, m, nse, bounds[r], bounds[r + 1], [&](int64_t b, int64_t i0, int64_t i1) {
            const I* p = ptr + b * (m + 1);
            const I* ix = idx + b * nse;
            const char* v = val + b * nse * eb;
            P* c = cnt + b * n;
            const int64_t k1 = p[i1];
            const int64_t step = E > 0 ? E : eb;  // a constant where E is: no load and multiply per entry
            for (int64_t i = i0; i < i1; ++i) {
                const O row = static_cast<O>(i);
                for (int64_t k = p[i], e = p[i + 1]; k < e; ++k) {
                    if (prefetch && k + 2 * kPrefetchDistance < k1) __builtin_prefetch(c + ix[k + 2 * kPrefetchDistance], 1);
                    if (prefetch && k + kPrefetchDistance < k1) {
                        const int64_t pf = c[ix[k + kPrefetchDistance]];
                        __builtin_prefetch(oidx + pf, 1);
                        __builtin_prefetch(oval + pf * step, 1);
                    }
                    const int64_t q = c[ix[k]]++;
                    oidx[q] = row;
                    copy_entry<E>(oval + q * step, v + k * step, step);
                }
            }
        });
    };
#pragma omp parallel num_threads(n_ranges) if (n_ranges > 1)
    {
#ifdef _OPENMP
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int t = 0, nt = 1;
#endif
        for (int r = t; r < n_ranges; r += nt) count_range(r);
#pragma omp barrier
        int all = 1;
        for (int st : status) all = st == 0 ? 0 : (all == 1 ? st : all);
        if (all == 1) {
            // each range's first position per output slice, relative to the slice's start
#pragma omp for schedule(static)
            for (int64_t j = 0; j < C; ++j) {
                int64_t sum = 0;
                for (int r = 0; r < n_ranges; ++r) {
                    P& x = counters(r)[j];
                    const int64_t here = x;
                    x = static_cast<P>(sum);
                    sum += here;
                }
                start[static_cast<size_t>(j) + 1] = sum;
            }
#pragma omp single
            {
                for (int64_t j = 0; j < C; ++j) start[static_cast<size_t>(j) + 1] += start[static_cast<size_t>(j)];
            }
            for (int r = t; r < n_ranges; r += nt) scatter_range(r);
        }
    }
    int result = 1;
    for (int s : status) result = s == 0 ? 0 : (result == 1 ? s : result);
    if (result != 1) return result;
    for (int64_t b = 0; b < nb; ++b) {
        O* op = optr + b * (n + 1);
        for (int64_t j = 0; j < n; ++j) op[j] = static_cast<O>(start[static_cast<size_t>(b * n + j)] - b * nse);
        op[n] = static_cast<O>(nse);
    }
    return 1;
}

// One operand of a join along the plain dimension.
template <class I>
struct JoinPart {
    const I* ptr;
    const I* idx;
    const char* val;
    int64_t nse;
    int64_t offset;  // added to its plain indices
};

// Compressed arrays of one number of slices joined along the plain dimension: every output slice
// holds the first operand's entries of that slice, then the second's (indices offset), ... The
// output offsets are the sums of the operands'; index runs are copied with their offset added,
// value runs with memcpy; in parallel over ranges of slices.
template <class I, class O>
bool join_plain_kernel(const std::vector<JoinPart<I>>& parts, int64_t nb, int64_t m, int64_t eb, O* optr, O* oidx,
                       char* oval, int threads) {
    int64_t total = 0;
    for (const JoinPart<I>& a : parts) {
        if (!batch_bounds_exact(a.ptr, nb, m, a.nse)) return false;
        total += a.nse;
    }
    const int64_t n_chunks = (nb * total + nb * m >= kParallelMinEntries && threads > 1) ? int64_t{threads} * kChunksPerThread : 1;
    std::vector<int64_t> bounds{0, nb * m};
    if (n_chunks > 1 && nb * m > 0) {
        bounds = split_rows(nb * m, n_chunks, [&](int64_t r) {
            const int64_t b = r / m, i = r - b * m;
            if (b >= nb) return r + nb * total;
            int64_t s = r + b * total;
            for (const JoinPart<I>& a : parts) s += std::clamp<int64_t>(static_cast<int64_t>(a.ptr[b * (m + 1) + i]), 0, a.nse);
            return s;
        });
    }
    const int64_t n_ranges = static_cast<int64_t>(bounds.size()) - 1;
    bool ok = true;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(&& : ok) if (n_ranges > 1)
    for (int64_t c = 0; c < n_ranges; ++c) {
        bool good = true;
        for (int64_t r = bounds[c], r1 = bounds[c + 1]; good && r < r1;) {
            const int64_t b = r / m, i0 = r - b * m, i1 = std::min({m, i0 + (r1 - r), i0 + kCheckRows});
            for (const JoinPart<I>& a : parts) good = good && offsets_valid(a.ptr + b * (m + 1), i0, i1, m, a.nse, false);
            if (!good) break;
            O* op = optr + b * (m + 1);
            const int64_t base = b * total;
            for (int64_t i = i0; i < i1; ++i) {
                int64_t q = 0;
                for (const JoinPart<I>& a : parts) q += a.ptr[b * (m + 1) + i];
                op[i] = static_cast<O>(q);
                for (const JoinPart<I>& a : parts) {
                    const I* p = a.ptr + b * (m + 1);
                    const int64_t s = p[i], e = p[i + 1];
                    if (s == e) continue;
                    const I* src = a.idx + b * a.nse;
                    O* dst = oidx + base + q;
                    const O off = static_cast<O>(a.offset);
                    for (int64_t k = s; k < e; ++k) dst[k - s] = static_cast<O>(src[k]) + off;
                    std::memcpy(oval + (base + q) * eb, a.val + (b * a.nse + s) * eb, static_cast<size_t>((e - s) * eb));
                    q += e - s;
                }
            }
            r += i1 - i0;
        }
        ok = good && ok;
    }
    for (int64_t b = 0; b < nb; ++b) optr[b * (m + 1) + m] = static_cast<O>(total);
    return ok;
}

template <class F>
void dispatch_index_pair(Py_ssize_t in_size, Py_ssize_t out_size, F&& f) {
    dispatch_index(in_size, [&](auto itag) {
        dispatch_index(out_size, [&](auto otag) { f(itag, otag); });
    });
}

// Acquires a C-contiguous 1-D buffer (read-only or writable) of at least `count` items of `size` bytes.
bool acquire_flat(Buffer& buf, PyObject* obj, const char* name, bool writable, int64_t count, Py_ssize_t size) {
    if (!buf.acquire(obj, name, 1, writable, true)) return false;
    if (buf.itemsize() != size || buf.shape(0) != count) {
        PyErr_Format(PyExc_ValueError, "%s: expected %lld items of %lld bytes", name, static_cast<long long>(count),
                     static_cast<long long>(size));
        return false;
    }
    return true;
}

// The status a structure kernel's caller records when the kernel could not allocate its work space.
constexpr int kOutOfMemory = -2;

const char kStructureInvalid[] =
    "the compressed indices are not non-decreasing from 0 to nse in every batch, or a plain index is out of range";

// expand_compressed(indptr, plain, nb, n_major, major, minor, threads) -> bool: indptr (nb * (n_major + 1),),
// plain (nb * nse,), of one index dtype; major and minor (nb * nse,) of one (maybe another) index dtype.
// False when a slice's plain indices do not increase strictly.
PyObject* py_expand_compressed(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_maj, *o_min;
    long long nb, m;
    int threads;
    if (!PyArg_ParseTuple(args, "OOLLOOi", &o_ip, &o_ix, &nb, &m, &o_maj, &o_min, &threads)) return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ip, ix, maj, mnr;
    if (!ip.acquire(o_ip, "indptr", 1, false, true) || !ip.check_index("indptr") ||
        !ix.acquire(o_ix, "plain", 1, false, true) || !ix.check_index("plain") ||
        !maj.acquire(o_maj, "major", 1, true, true) || !maj.check_index("major") ||
        !mnr.acquire(o_min, "minor", 1, true, true) || !mnr.check_index("minor"))
        return nullptr;
    if (nb < 0 || m < 0 || ip.itemsize() != ix.itemsize() || maj.itemsize() != mnr.itemsize() ||
        ip.shape(0) != nb * (m + 1) || (nb > 0 && ix.shape(0) % nb != 0) || (nb == 0 && ix.shape(0) != 0) ||
        maj.shape(0) != ix.shape(0) || mnr.shape(0) != ix.shape(0)) {
        PyErr_SetString(PyExc_ValueError, "expand_compressed: inconsistent arrays");
        return nullptr;
    }
    const int64_t nse = nb > 0 ? ix.shape(0) / nb : 0;
    int status = 1;
    dispatch_index_pair(ip.itemsize(), maj.itemsize(), [&](auto itag, auto otag) {
        using I = typename decltype(itag)::type;
        using O = typename decltype(otag)::type;
        Py_BEGIN_ALLOW_THREADS;
        try {
            status = expand_kernel<I, O>(reinterpret_cast<const I*>(ip.ptr()), reinterpret_cast<const I*>(ix.ptr()), nb, m,
                                         nse, reinterpret_cast<O*>(maj.ptr()), reinterpret_cast<O*>(mnr.ptr()), threads);
        } catch (const std::bad_alloc&) {
            status = kOutOfMemory;
        }
        Py_END_ALLOW_THREADS;
    });
    if (status == kOutOfMemory) return PyErr_NoMemory();
    if (status == 0) {
        PyErr_Format(PyExc_ValueError, "expand_compressed: %s", kStructureInvalid);
        return nullptr;
    }
    return PyBool_FromLong(status == 1);
}

// transpose_compressed(indptr, plain, values, nb, n_major, n_minor, out_indptr, out_plain, out_values, threads) -> bool
//   indptr (nb * (n_major + 1),), plain (nb * nse,) of one index dtype; values (nb * nse * eb,) bytes;
//   out_indptr (nb * (n_minor + 1),), out_plain (nb * nse,) of one index dtype, out_values like values.
//   False (nothing written) when an input slice's plain indices are not strictly increasing.
PyObject* py_transpose_compressed(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_v, *o_oip, *o_oix, *o_ov;
    long long nb, m, n;
    int threads;
    if (!PyArg_ParseTuple(args, "OOOLLLOOOi", &o_ip, &o_ix, &o_v, &nb, &m, &n, &o_oip, &o_oix, &o_ov, &threads))
        return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ip, ix, v, oip, oix, ov;
    if (!ip.acquire(o_ip, "indptr", 1, false, true) || !ip.check_index("indptr") ||
        !ix.acquire(o_ix, "plain", 1, false, true) || !ix.check_index("plain") ||
        !v.acquire(o_v, "values", 1, false, true) || !oip.acquire(o_oip, "out_indptr", 1, true, true) ||
        !oip.check_index("out_indptr") || !oix.acquire(o_oix, "out_plain", 1, true, true) ||
        !oix.check_index("out_plain") || !ov.acquire(o_ov, "out_values", 1, true, true))
        return nullptr;
    const int64_t nse = nb > 0 ? ix.shape(0) / nb : 0;
    const int64_t total = ix.shape(0);
    const int64_t eb = total > 0 ? v.shape(0) * v.itemsize() / total : 1;
    if (nb < 0 || m < 0 || n < 0 || ip.itemsize() != ix.itemsize() || oip.itemsize() != oix.itemsize() ||
        ip.shape(0) != nb * (m + 1) || nse * nb != total || oip.shape(0) != nb * (n + 1) || oix.shape(0) != total ||
        v.shape(0) * v.itemsize() != total * eb || ov.shape(0) * ov.itemsize() != total * eb) {
        PyErr_SetString(PyExc_ValueError, "transpose_compressed: inconsistent arrays");
        return nullptr;
    }
    int status = 1;
    dispatch_index_pair(ip.itemsize(), oip.itemsize(), [&](auto itag, auto otag) {
        using I = typename decltype(itag)::type;
        using O = typename decltype(otag)::type;
        dispatch_entry_bytes(eb, [&](auto etag) {
            constexpr int E = decltype(etag)::value;
            // cursors as narrow as the positions allow: half the cache footprint of int64 ones
            dispatch_index(total <= std::numeric_limits<int32_t>::max() ? 4 : 8, [&](auto ptag) {
                using P = typename decltype(ptag)::type;
                Py_BEGIN_ALLOW_THREADS;
                try {
                    status = transpose_kernel<I, O, P, E>(reinterpret_cast<const I*>(ip.ptr()),
                                                          reinterpret_cast<const I*>(ix.ptr()), v.ptr(), nb, m, n, nse, eb,
                                                          reinterpret_cast<O*>(oip.ptr()), reinterpret_cast<O*>(oix.ptr()),
                                                          ov.ptr(), threads);
                } catch (const std::bad_alloc&) {
                    status = kOutOfMemory;
                }
                Py_END_ALLOW_THREADS;
            });
        });
    });
    if (status == kOutOfMemory) return PyErr_NoMemory();
    if (status == 0) {
        PyErr_Format(PyExc_ValueError, "transpose_compressed: %s", kStructureInvalid);
        return nullptr;
    }
    return PyBool_FromLong(status == 1);
}

// join_plain(indptrs, plains, values, offsets, nb, n_major, out_indptr, out_plain, out_values, threads)
//   one tuple entry per operand: indptr (nb * (n_major + 1),), plain (nb * nse_k,) of one index dtype,
//   values (nb * nse_k * eb,) bytes, and the offset added to its plain indices; out_indptr
//   (nb * (n_major + 1),) and out_plain (nb * sum nse_k,) of one index dtype, out_values its values.
PyObject* py_join_plain(PyObject*, PyObject* args) {
    PyObject *o_ips, *o_ixs, *o_vs, *o_offs, *o_oip, *o_oix, *o_ov;
    long long nb, m;
    int threads;
    if (!PyArg_ParseTuple(args, "O!O!O!O!LLOOOi", &PyTuple_Type, &o_ips, &PyTuple_Type, &o_ixs, &PyTuple_Type, &o_vs,
                          &PyTuple_Type, &o_offs, &nb, &m, &o_oip, &o_oix, &o_ov, &threads))
        return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    const Py_ssize_t K = PyTuple_GET_SIZE(o_ips);
    if (K == 0 || PyTuple_GET_SIZE(o_ixs) != K || PyTuple_GET_SIZE(o_vs) != K || PyTuple_GET_SIZE(o_offs) != K || nb < 0 ||
        m < 0) {
        PyErr_SetString(PyExc_ValueError, "join_plain: inconsistent operands");
        return nullptr;
    }
    std::unique_ptr<Buffer[]> bufs(new Buffer[static_cast<size_t>(3 * K)]);
    Buffer oip, oix, ov;
    if (!oip.acquire(o_oip, "out_indptr", 1, true, true) || !oip.check_index("out_indptr") ||
        !oix.acquire(o_oix, "out_plain", 1, true, true) || !oix.check_index("out_plain") ||
        !ov.acquire(o_ov, "out_values", 1, true, true))
        return nullptr;
    const int64_t out_total = oix.shape(0);
    const int64_t eb = out_total > 0 ? ov.shape(0) * ov.itemsize() / out_total : 0;
    std::vector<int64_t> nses(static_cast<size_t>(K)), offsets(static_cast<size_t>(K));
    int64_t total = 0;
    Py_ssize_t isize = 0;
    for (Py_ssize_t k = 0; k < K; ++k) {
        Buffer& ip = bufs[static_cast<size_t>(3 * k)];
        Buffer& ix = bufs[static_cast<size_t>(3 * k + 1)];
        Buffer& v = bufs[static_cast<size_t>(3 * k + 2)];
        if (!ip.acquire(PyTuple_GET_ITEM(o_ips, k), "indptr", 1, false, true) || !ip.check_index("indptr") ||
            !ix.acquire(PyTuple_GET_ITEM(o_ixs, k), "plain", 1, false, true) || !ix.check_index("plain") ||
            !v.acquire(PyTuple_GET_ITEM(o_vs, k), "values", 1, false, true))
            return nullptr;
        offsets[static_cast<size_t>(k)] = PyLong_AsLongLong(PyTuple_GET_ITEM(o_offs, k));
        if (PyErr_Occurred()) return nullptr;
        if (k == 0) isize = ip.itemsize();
        const int64_t nse = nb > 0 ? ix.shape(0) / nb : 0;
        if (ip.itemsize() != isize || ix.itemsize() != isize || ip.shape(0) != nb * (m + 1) || nse * nb != ix.shape(0) ||
            v.shape(0) * v.itemsize() != ix.shape(0) * eb) {
            PyErr_SetString(PyExc_ValueError, "join_plain: inconsistent operands");
            return nullptr;
        }
        nses[static_cast<size_t>(k)] = nse;
        total += ix.shape(0);
    }
    if (oip.itemsize() != oix.itemsize() || oip.shape(0) != nb * (m + 1) || total != out_total ||
        ov.shape(0) * ov.itemsize() != out_total * eb) {
        PyErr_SetString(PyExc_ValueError, "join_plain: inconsistent outputs");
        return nullptr;
    }
    bool valid = true, oom = false;
    dispatch_index_pair(isize, oip.itemsize(), [&](auto itag, auto otag) {
        using I = typename decltype(itag)::type;
        using O = typename decltype(otag)::type;
        std::vector<JoinPart<I>> parts;
        for (Py_ssize_t k = 0; k < K; ++k) {
            parts.push_back(JoinPart<I>{reinterpret_cast<const I*>(bufs[static_cast<size_t>(3 * k)].ptr()),
                                        reinterpret_cast<const I*>(bufs[static_cast<size_t>(3 * k + 1)].ptr()),
                                        bufs[static_cast<size_t>(3 * k + 2)].ptr(), nses[static_cast<size_t>(k)],
                                        offsets[static_cast<size_t>(k)]});
        }
        Py_BEGIN_ALLOW_THREADS;
        try {
            valid = join_plain_kernel<I, O>(parts, nb, m, eb, reinterpret_cast<O*>(oip.ptr()),
                                            reinterpret_cast<O*>(oix.ptr()), ov.ptr(), threads);
        } catch (const std::bad_alloc&) {
            oom = true;
        }
        Py_END_ALLOW_THREADS;
    });
    if (oom) return PyErr_NoMemory();
    if (!valid) {
        PyErr_Format(PyExc_ValueError, "join_plain: %s", kStructureInvalid);
        return nullptr;
    }
    Py_RETURN_NONE;
}

// ---------------------------------------------------------------------------------------------
// The number of nonzero floating or complex values (numpy.count_nonzero: NaN counts, -0.0 does not,
// a complex value counts when either part is nonzero), in parallel over equal ranges. Each value is
// read as unsigned words of its width: a float is nonzero when its word is with the sign bit shifted
// out (NaN's exponent bits are set, +-0.0 has none), a complex value when either of its two words
// is. One integer comparison per value, which vectorises, where the floating comparison (NaN is
// unordered) kept the loop scalar, slower than NumPy's. (NumPy's own count of integers and bools is
// vectorised already.)

template <class U, int Parts>
__attribute__((always_inline)) inline int64_t count_words(const U* __restrict u, int64_t n) {
    uint64_t count = 0;
    for (int64_t k = 0; k < n; ++k) {
        U w = u[Parts * k];
        if constexpr (Parts == 2) w = static_cast<U>(w | u[2 * k + 1]);
        count += static_cast<U>(w << 1) != 0;
    }
    return static_cast<int64_t>(count);
}

// Out of line, so that the serial call and every thread's share run the one vectorised loop; with 32-byte
// vectors where the CPU has them, as x86-64's baseline (16-byte) vectors have no 64-bit comparison, which
// leaves the float64 count scalar (half the speed of a sum).
template <class U, int Parts>
__attribute__((noinline)) int64_t count_words_base(const U* u, int64_t n) {
    return count_words<U, Parts>(u, n);
}

template <class U, int Parts>
__attribute__((noinline)) XSPARSE_TARGET_AVX2 int64_t count_words_avx2(const U* u, int64_t n) {
    return count_words<U, Parts>(u, n);
}

template <class U, int Parts>
int64_t count_words_best(const U* u, int64_t n) {
    return cpu_has_avx2() ? count_words_avx2<U, Parts>(u, n) : count_words_base<U, Parts>(u, n);
}

template <class U, int Parts>
int64_t count_nonzero_kernel(const char* data, int64_t n, int threads) {
    const U* u = reinterpret_cast<const U*>(data);
    if (threads <= 1 || n < kParallelMinEntries) return count_words_best<U, Parts>(u, n);
    int64_t count = 0;
#pragma omp parallel num_threads(threads) reduction(+ : count)
    {
#ifdef _OPENMP
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int64_t t = 0, nt = 1;
#endif
        const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
        count += count_words_best<U, Parts>(u + Parts * lo, hi - lo);
    }
    return count;
}

// count_nonzero(values, kind, threads) -> int: values C-contiguous 1-D of numpy's kind `kind`, 'f'
// (float32, float64) or 'c' (complex64, complex128).
PyObject* py_count_nonzero(PyObject*, PyObject* args) {
    PyObject* o_v;
    int kind, threads;
    if (!PyArg_ParseTuple(args, "OCi", &o_v, &kind, &threads)) return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer v;
    if (!v.acquire(o_v, "values", 1, false, true)) return nullptr;
    const char* p = v.ptr();
    const int64_t n = v.shape(0);
    const Py_ssize_t size = v.itemsize();
    long long count = -1;
    Py_BEGIN_ALLOW_THREADS;
    if (kind == 'f' && size == 4) count = count_nonzero_kernel<uint32_t, 1>(p, n, threads);
    if (kind == 'f' && size == 8) count = count_nonzero_kernel<uint64_t, 1>(p, n, threads);
    if (kind == 'c' && size == 8) count = count_nonzero_kernel<uint32_t, 2>(p, n, threads);
    if (kind == 'c' && size == 16) count = count_nonzero_kernel<uint64_t, 2>(p, n, threads);
    Py_END_ALLOW_THREADS;
    if (count < 0) {
        PyErr_Format(PyExc_TypeError, "count_nonzero: unsupported value type (buffer format '%s')", v.format());
        return nullptr;
    }
    return PyLong_FromLongLong(count);
}

// Where each (slice, plain index) query lies in a compressed matrix: a binary search of the slice's
// plain indices (sorted, as invariant 5.6 asks). The slice and its offsets are checked per query, so a
// malformed array or query reads nothing outside the buffers; the plain indices are only compared.
template <class I>
bool find_kernel(const I* indptr, int64_t n, const I* plain, int64_t nse, const int64_t* major, const int64_t* minor,
                 int64_t k, int64_t* out, int threads) {
    bool ok = true;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(&& : ok) if (threads > 1 && k >= 4096)
    for (int64_t q = 0; q < k; ++q) {
        out[q] = -1;
        const int64_t i = major[q];
        if (i < 0 || i >= n) {
            ok = false;
            continue;
        }
        const int64_t lo = indptr[i], hi = indptr[i + 1];
        if (lo < 0 || lo > hi || hi > nse) {
            ok = false;
            continue;
        }
        if (lo == hi) continue;
        // the first entry not below t, by halving without a branch on the comparison (a conditional
        // move): the slices are short and their searches unpredictable, so a mispredicted branch per
        // halving cost more than the comparisons (one thread, 200,000 searches in slices of about 10:
        // 2.6 -> 1.6 ms for the diagonal, 3.9 -> 1.6 ms for random points)
        const int64_t t = minor[q];
        const I* base = plain + lo;
        for (int64_t len = hi - lo; len > 1;) {
            const int64_t half = len / 2;
            base = static_cast<int64_t>(base[half]) < t ? base + half : base;
            len -= half;
        }
        base += static_cast<int64_t>(*base) < t;
        if (base != plain + hi && static_cast<int64_t>(*base) == t) out[q] = base - plain;
    }
    return ok;
}

// compressed_find(indptr, plain, major, minor, out, threads): indptr (n + 1,) and plain (nse,) of one
// index dtype; major, minor and out (k,) int64. out[q] is the position of plain index minor[q] in
// slice major[q], or -1 where the slice does not hold it. ValueError for a query outside the slices
// or offsets out of order.
PyObject* py_compressed_find(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_maj, *o_min, *o_out;
    int threads;
    if (!PyArg_ParseTuple(args, "OOOOOi", &o_ip, &o_ix, &o_maj, &o_min, &o_out, &threads)) return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ip, ix, maj, mnr, out;
    if (!ip.acquire(o_ip, "indptr", 1, false, true) || !ip.check_index("indptr") ||
        !ix.acquire(o_ix, "plain", 1, false, true) || !ix.check_index("plain") ||
        !maj.acquire(o_maj, "major", 1, false, true) || !maj.check_index("major") ||
        !mnr.acquire(o_min, "minor", 1, false, true) || !mnr.check_index("minor") ||
        !out.acquire(o_out, "out", 1, true, true) || !out.check_index("out"))
        return nullptr;
    const int64_t k = maj.shape(0);
    if (ip.itemsize() != ix.itemsize() || ip.shape(0) < 1 || maj.itemsize() != 8 || mnr.itemsize() != 8 ||
        out.itemsize() != 8 || mnr.shape(0) != k || out.shape(0) != k) {
        PyErr_SetString(PyExc_ValueError, "compressed_find: inconsistent arrays");
        return nullptr;
    }
    bool ok = true;
    dispatch_index(ip.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        Py_BEGIN_ALLOW_THREADS;
        ok = find_kernel<I>(reinterpret_cast<const I*>(ip.ptr()), ip.shape(0) - 1, reinterpret_cast<const I*>(ix.ptr()),
                            ix.shape(0), reinterpret_cast<const int64_t*>(maj.ptr()),
                            reinterpret_cast<const int64_t*>(mnr.ptr()), k, reinterpret_cast<int64_t*>(out.ptr()), threads);
        Py_END_ALLOW_THREADS;
    });
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "compressed_find: a query names no slice, or a slice's offsets are out of order or beyond the entries");
        return nullptr;
    }
    Py_RETURN_NONE;
}

// take along the plain dimension of one compressed matrix (A[:, cols]): every entry is copied once
// per pick of its plain index. `count` (n_plain,) holds how often each plain index is picked, and the
// picks of index j are order[first[j]], ..., order[first[j] + count[j] - 1] (ascending). The count pass
// gives each slice its number of copies, checking the offsets and plain indices; the fill pass writes
// each slice's copies (source entry, new plain index) into its own range, sorted by the new index when
// `sort` (the picks are not in ascending order). Both in parallel over slices.
template <class I>
bool take_plain_count(const I* ptr, int64_t m, const I* plain, int64_t nse, const int64_t* count, int64_t n_plain,
                      int64_t* new_ptr, int threads) {
    if (ptr[0] != 0 || ptr[m] != nse) return false;
    bool ok = true;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(&& : ok) if (threads > 1)
    for (int64_t i = 0; i < m; ++i) {
        const int64_t lo = ptr[i], hi = ptr[i + 1];
        int64_t copies = 0;
        if (lo < 0 || lo > hi || hi > nse) {
            ok = false;
        } else {
            for (int64_t e = lo; e < hi; ++e) {
                const int64_t j = plain[e];
                if (j < 0 || j >= n_plain) {
                    ok = false;
                    break;
                }
                copies += count[j];
            }
        }
        new_ptr[i + 1] = copies;
    }
    if (!ok) return false;
    new_ptr[0] = 0;
    for (int64_t i = 0; i < m; ++i) new_ptr[i + 1] += new_ptr[i];
    return true;
}

// Fills each slice's copies; a slice whose copies do not fit its range of new_ptr (or that names a plain
// index out of range) is left unwritten and reported, so nothing is written outside the outputs. A slice
// whose range is empty is skipped unread: the count pass (which take_plain runs first) gave it no copies.
template <class I>
bool take_plain_fill(const I* ptr, int64_t m, const I* plain, int64_t nse, const int64_t* count, const int64_t* first,
                     int64_t n_plain, const int64_t* order, const int64_t* new_ptr, int64_t total, int64_t* entry,
                     int64_t* position, bool sort, int threads) {
    if (ptr[0] != 0 || ptr[m] != nse || new_ptr[0] != 0 || new_ptr[m] != total) return false;
    bool ok = true;
#pragma omp parallel num_threads(threads) reduction(&& : ok) if (threads > 1)
    {
        std::vector<std::pair<int64_t, int64_t>> row;
#pragma omp for schedule(dynamic, 256)
        for (int64_t i = 0; i < m; ++i) {
            const int64_t lo = ptr[i], hi = ptr[i + 1], a = new_ptr[i], b = new_ptr[i + 1];
            if (lo < 0 || lo > hi || hi > nse || a < 0 || a > b || b > total) {
                ok = false;
                continue;
            }
            // a slice given no copies is not read: the count pass, which checked every index, gave it none
            // (few picks among many plain indices leave most slices so)
            if (a == b) continue;
            // every write is checked against the slice's range, and the range must come out full
            int64_t q = a;
            for (int64_t e = lo; e < hi; ++e) {
                const int64_t j = plain[e];
                if (j < 0 || j >= n_plain) {
                    q = -1;
                    break;
                }
                const int64_t c = count[j];
                if (c == 0) continue;
                if (c > b - q) {
                    q = -1;
                    break;
                }
                for (int64_t r = first[j], end = first[j] + c; r < end; ++r, ++q) {
                    entry[q] = e;
                    position[q] = order[r];
                }
            }
            if (q != b) {
                ok = false;
                continue;
            }
            if (sort && b - a > 1) {
                row.clear();
                for (int64_t k = a; k < b; ++k) row.emplace_back(position[k], entry[k]);
                std::sort(row.begin(), row.end());
                for (int64_t k = a; k < b; ++k) {
                    position[k] = row[static_cast<size_t>(k - a)].first;
                    entry[k] = row[static_cast<size_t>(k - a)].second;
                }
            }
        }
    }
    return ok;
}

// Whole compressed slices of one matrix gathered by position (A[rows] of a CSR matrix): the count pass
// (serial, one read of two offsets per pick) checks each pick and its offsets and writes the running
// count of entries; the fill pass copies each picked slice's plain indices and value bytes to its range,
// in parallel over the picks, re-checking every range so that nothing is read or written out of bounds.
template <class I>
bool gather_slices_count(const I* ptr, int64_t m, int64_t nse, const int64_t* rows, int64_t k, int64_t* new_ptr) {
    new_ptr[0] = 0;
    for (int64_t q = 0; q < k; ++q) {
        const int64_t r = rows[q];
        if (r < 0 || r >= m) return false;
        const int64_t lo = ptr[r], hi = ptr[r + 1];
        if (lo < 0 || lo > hi || hi > nse || new_ptr[q] > std::numeric_limits<int64_t>::max() - (hi - lo)) return false;
        new_ptr[q + 1] = new_ptr[q] + (hi - lo);
    }
    return true;
}

template <class I>
bool gather_slices_fill(const I* ptr, int64_t m, const I* plain, int64_t nse, const char* vals, int64_t eb,
                        const int64_t* rows, int64_t k, const int64_t* new_ptr, int64_t total, I* out_plain,
                        char* out_vals, int threads) {
    bool ok = true;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 64) reduction(&& : ok) if (threads > 1)
    for (int64_t q = 0; q < k; ++q) {
        const int64_t r = rows[q];
        if (r < 0 || r >= m) {
            ok = false;
            continue;
        }
        const int64_t lo = ptr[r], hi = ptr[r + 1], a = new_ptr[q], b = new_ptr[q + 1];
        if (lo < 0 || lo > hi || hi > nse || a < 0 || a > b || b > total || b - a != hi - lo) {
            ok = false;
            continue;
        }
        if (hi > lo) {
            std::memcpy(out_plain + a, plain + lo, static_cast<size_t>(hi - lo) * sizeof(I));
            if (eb > 0) std::memcpy(out_vals + a * eb, vals + lo * eb, static_cast<size_t>((hi - lo) * eb));
        }
    }
    return ok;
}

// gather_slices_count(indptr, nse, rows, new_ptr): indptr (m + 1,) int32 or int64, rows (k,) int64;
// writes new_ptr (k + 1,) int64. gather_slices_fill(indptr, plain, values, rows, new_ptr, out_plain,
// out_values, threads): values and out_values flat bytes of nse and new_ptr[k] entries; out_plain of
// plain's dtype. ValueError for a pick out of range, offsets out of order or inconsistent arrays.
PyObject* py_gather_slices_count(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_rows, *o_new;
    long long nse;
    if (!PyArg_ParseTuple(args, "OLOO", &o_ip, &nse, &o_rows, &o_new)) return nullptr;
    Buffer ip, rows, nw;
    if (!ip.acquire(o_ip, "indptr", 1, false, true) || !ip.check_index("indptr") ||
        !rows.acquire(o_rows, "rows", 1, false, true) || !rows.check_index("rows") ||
        !nw.acquire(o_new, "new_ptr", 1, true, true) || !nw.check_index("new_ptr"))
        return nullptr;
    const int64_t k = rows.shape(0);
    if (ip.shape(0) < 1 || nse < 0 || rows.itemsize() != 8 || nw.itemsize() != 8 || nw.shape(0) != k + 1) {
        PyErr_SetString(PyExc_ValueError, "gather_slices: inconsistent arrays");
        return nullptr;
    }
    bool ok = true;
    dispatch_index(ip.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        Py_BEGIN_ALLOW_THREADS;
        ok = gather_slices_count<I>(reinterpret_cast<const I*>(ip.ptr()), ip.shape(0) - 1, nse,
                                    reinterpret_cast<const int64_t*>(rows.ptr()), k, reinterpret_cast<int64_t*>(nw.ptr()));
        Py_END_ALLOW_THREADS;
    });
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "gather_slices: a pick is out of range, or %s", kStructureInvalid);
        return nullptr;
    }
    Py_RETURN_NONE;
}

PyObject* py_gather_slices_fill(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_v, *o_rows, *o_new, *o_oix, *o_ov;
    int threads;
    if (!PyArg_ParseTuple(args, "OOOOOOOi", &o_ip, &o_ix, &o_v, &o_rows, &o_new, &o_oix, &o_ov, &threads)) return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ip, ix, v, rows, nw, oix, ov;
    if (!ip.acquire(o_ip, "indptr", 1, false, true) || !ip.check_index("indptr") ||
        !ix.acquire(o_ix, "plain", 1, false, true) || !ix.check_index("plain") ||
        !v.acquire(o_v, "values", 1, false, true) || !rows.acquire(o_rows, "rows", 1, false, true) ||
        !rows.check_index("rows") || !nw.acquire(o_new, "new_ptr", 1, false, true) || !nw.check_index("new_ptr") ||
        !oix.acquire(o_oix, "out_plain", 1, true, true) || !oix.check_index("out_plain") ||
        !ov.acquire(o_ov, "out_values", 1, true, true))
        return nullptr;
    const int64_t nse = ix.shape(0), k = rows.shape(0), total = oix.shape(0);
    const int64_t vbytes = v.shape(0) * v.itemsize();
    const int64_t eb = nse > 0 ? vbytes / nse : 0;
    if (ip.shape(0) < 1 || ip.itemsize() != ix.itemsize() || oix.itemsize() != ix.itemsize() || rows.itemsize() != 8 ||
        nw.itemsize() != 8 || nw.shape(0) != k + 1 || eb * nse != vbytes || ov.shape(0) * ov.itemsize() != total * eb ||
        reinterpret_cast<const int64_t*>(nw.ptr())[k] != total) {
        PyErr_SetString(PyExc_ValueError, "gather_slices: inconsistent arrays");
        return nullptr;
    }
    bool ok = true;
    dispatch_index(ip.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        Py_BEGIN_ALLOW_THREADS;
        ok = gather_slices_fill<I>(reinterpret_cast<const I*>(ip.ptr()), ip.shape(0) - 1, reinterpret_cast<const I*>(ix.ptr()),
                                   nse, v.ptr(), eb, reinterpret_cast<const int64_t*>(rows.ptr()), k,
                                   reinterpret_cast<const int64_t*>(nw.ptr()), total, reinterpret_cast<I*>(oix.ptr()),
                                   ov.ptr(), threads);
        Py_END_ALLOW_THREADS;
    });
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "gather_slices: a pick is out of range, or %s", kStructureInvalid);
        return nullptr;
    }
    Py_RETURN_NONE;
}

// The entries of one compressed matrix on one side of a diagonal (tril and triu in compressed terms):
// slice i keeps the entries whose plain index j has j <= i + d (below) or j >= i + d (above). The count
// pass counts each slice's kept entries, in parallel over the slices, and sums the counts serially; the
// fill pass copies each slice's runs of kept entries with memcpy, in parallel over the slices. A slice
// sorted as the invariants require holds one run, but an unsorted one is still filtered entry by entry,
// so the result is the mask's whatever the order. Every range is checked before it is read or written.
template <class I>
bool band_count(const I* ptr, int64_t m, const I* plain, int64_t nse, int64_t d, bool below, int64_t* new_ptr,
                int threads) {
    bool ok = true;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256) reduction(&& : ok) if (threads > 1)
    for (int64_t i = 0; i < m; ++i) {
        const int64_t lo = ptr[i], hi = ptr[i + 1], bound = i + d;
        int64_t c = 0;
        if (lo < 0 || lo > hi || hi > nse) {
            ok = false;
        } else if (below) {
            for (int64_t p = lo; p < hi; ++p) c += static_cast<int64_t>(plain[p]) <= bound;
        } else {
            for (int64_t p = lo; p < hi; ++p) c += static_cast<int64_t>(plain[p]) >= bound;
        }
        new_ptr[i + 1] = c;
    }
    if (!ok) return false;
    new_ptr[0] = 0;
    for (int64_t i = 0; i < m; ++i) new_ptr[i + 1] += new_ptr[i];
    return true;
}

template <class I>
bool band_fill(const I* ptr, int64_t m, const I* plain, int64_t nse, const char* vals, int64_t eb, int64_t d, bool below,
               const int64_t* new_ptr, int64_t total, I* out_plain, char* out_vals, int threads) {
    bool ok = true;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256) reduction(&& : ok) if (threads > 1)
    for (int64_t i = 0; i < m; ++i) {
        const int64_t lo = ptr[i], hi = ptr[i + 1], a = new_ptr[i], b = new_ptr[i + 1], bound = i + d;
        if (lo < 0 || lo > hi || hi > nse || a < 0 || a > b || b > total) {
            ok = false;
            continue;
        }
        auto kept = [&](int64_t p) {
            const int64_t j = plain[p];
            return below ? j <= bound : j >= bound;
        };
        int64_t q = a;
        for (int64_t p = lo; p < hi;) {
            while (p < hi && !kept(p)) ++p;
            const int64_t start = p;
            while (p < hi && kept(p)) ++p;
            const int64_t n = p - start;
            if (n == 0) continue;
            if (n > b - q) {
                ok = false;
                break;
            }
            std::memcpy(out_plain + q, plain + start, static_cast<size_t>(n) * sizeof(I));
            if (eb > 0) std::memcpy(out_vals + q * eb, vals + start * eb, static_cast<size_t>(n * eb));
            q += n;
        }
        if (q != b) ok = false;
    }
    return ok;
}

// band_count(indptr, plain, d, below, new_ptr, threads): indptr (m + 1,) and plain (nse,) of one index
// dtype, |d| at most m + n + 1 (no overflow); writes new_ptr (m + 1,) int64. band_fill(indptr, plain, values,
// d, below, new_ptr, out_plain, out_values, threads): values and out_values flat bytes of nse and
// new_ptr[m] entries; out_plain of plain's dtype. ValueError for offsets out of order or inconsistent arrays.
PyObject* py_band_count(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_new;
    long long d;
    int below, threads;
    if (!PyArg_ParseTuple(args, "OOLpOi", &o_ip, &o_ix, &d, &below, &o_new, &threads)) return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ip, ix, nw;
    if (!ip.acquire(o_ip, "indptr", 1, false, true) || !ip.check_index("indptr") ||
        !ix.acquire(o_ix, "plain", 1, false, true) || !ix.check_index("plain") ||
        !nw.acquire(o_new, "new_ptr", 1, true, true) || !nw.check_index("new_ptr"))
        return nullptr;
    const int64_t m = ip.shape(0) - 1;
    if (m < 0 || ip.itemsize() != ix.itemsize() || nw.itemsize() != 8 || nw.shape(0) != m + 1 ||
        d > (int64_t{1} << 62) || d < -(int64_t{1} << 62)) {
        PyErr_SetString(PyExc_ValueError, "band: inconsistent arrays");
        return nullptr;
    }
    bool ok = true;
    dispatch_index(ip.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        Py_BEGIN_ALLOW_THREADS;
        ok = band_count<I>(reinterpret_cast<const I*>(ip.ptr()), m, reinterpret_cast<const I*>(ix.ptr()), ix.shape(0), d,
                           below != 0, reinterpret_cast<int64_t*>(nw.ptr()), threads);
        Py_END_ALLOW_THREADS;
    });
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "band: %s", kStructureInvalid);
        return nullptr;
    }
    Py_RETURN_NONE;
}

PyObject* py_band_fill(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_v, *o_new, *o_oix, *o_ov;
    long long d;
    int below, threads;
    if (!PyArg_ParseTuple(args, "OOOLpOOOi", &o_ip, &o_ix, &o_v, &d, &below, &o_new, &o_oix, &o_ov, &threads)) return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ip, ix, v, nw, oix, ov;
    if (!ip.acquire(o_ip, "indptr", 1, false, true) || !ip.check_index("indptr") ||
        !ix.acquire(o_ix, "plain", 1, false, true) || !ix.check_index("plain") ||
        !v.acquire(o_v, "values", 1, false, true) || !nw.acquire(o_new, "new_ptr", 1, false, true) ||
        !nw.check_index("new_ptr") || !oix.acquire(o_oix, "out_plain", 1, true, true) || !oix.check_index("out_plain") ||
        !ov.acquire(o_ov, "out_values", 1, true, true))
        return nullptr;
    const int64_t m = ip.shape(0) - 1, nse = ix.shape(0), total = oix.shape(0);
    const int64_t vbytes = v.shape(0) * v.itemsize();
    const int64_t eb = nse > 0 ? vbytes / nse : 0;
    if (m < 0 || ip.itemsize() != ix.itemsize() || oix.itemsize() != ix.itemsize() || nw.itemsize() != 8 ||
        nw.shape(0) != m + 1 || eb * nse != vbytes || ov.shape(0) * ov.itemsize() != total * eb ||
        reinterpret_cast<const int64_t*>(nw.ptr())[m] != total || d > (int64_t{1} << 62) || d < -(int64_t{1} << 62)) {
        PyErr_SetString(PyExc_ValueError, "band: inconsistent arrays");
        return nullptr;
    }
    bool ok = true;
    dispatch_index(ip.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        Py_BEGIN_ALLOW_THREADS;
        ok = band_fill<I>(reinterpret_cast<const I*>(ip.ptr()), m, reinterpret_cast<const I*>(ix.ptr()), nse, v.ptr(), eb, d,
                          below != 0, reinterpret_cast<const int64_t*>(nw.ptr()), total, reinterpret_cast<I*>(oix.ptr()),
                          ov.ptr(), threads);
        Py_END_ALLOW_THREADS;
    });
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "band: %s", kStructureInvalid);
        return nullptr;
    }
    Py_RETURN_NONE;
}

// take_plain_count(indptr, plain, count, new_ptr, threads): indptr (m + 1,) and plain (nse,) of one
// index dtype, count (n_plain,) int64; writes new_ptr (m + 1,) int64, the running count of copies.
// take_plain_fill(indptr, plain, count, first, order, new_ptr, entry, position, sort, threads): first
// (n_plain,) the running sum of count, order (picks,); writes entry and position (new_ptr[m],) int64.
// ValueError for offsets out of order, a plain index out of range or inconsistent counts, except in a
// slice whose range in new_ptr is empty: the fill pass does not read it, and relies on the count pass
// (which _cpu.take_plain always runs first, on the same arrays) to have checked it and given it none.
bool acquire_take_plain(Buffer& ip, Buffer& ix, Buffer& cnt, PyObject* o_ip, PyObject* o_ix, PyObject* o_cnt) {
    if (!ip.acquire(o_ip, "indptr", 1, false, true) || !ip.check_index("indptr") ||
        !ix.acquire(o_ix, "plain", 1, false, true) || !ix.check_index("plain") ||
        !cnt.acquire(o_cnt, "count", 1, false, true) || !cnt.check_index("count"))
        return false;
    if (ip.itemsize() != ix.itemsize() || ip.shape(0) < 1 || cnt.itemsize() != 8) {
        PyErr_SetString(PyExc_ValueError, "take_plain: inconsistent arrays");
        return false;
    }
    return true;
}

PyObject* py_take_plain_count(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_cnt, *o_new;
    int threads;
    if (!PyArg_ParseTuple(args, "OOOOi", &o_ip, &o_ix, &o_cnt, &o_new, &threads)) return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ip, ix, cnt, nw;
    if (!acquire_take_plain(ip, ix, cnt, o_ip, o_ix, o_cnt) || !nw.acquire(o_new, "new_ptr", 1, true, true) ||
        !nw.check_index("new_ptr"))
        return nullptr;
    const int64_t m = ip.shape(0) - 1;
    if (nw.itemsize() != 8 || nw.shape(0) != m + 1) {
        PyErr_SetString(PyExc_ValueError, "take_plain: inconsistent arrays");
        return nullptr;
    }
    bool ok = true;
    dispatch_index(ip.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        Py_BEGIN_ALLOW_THREADS;
        ok = take_plain_count<I>(reinterpret_cast<const I*>(ip.ptr()), m, reinterpret_cast<const I*>(ix.ptr()), ix.shape(0),
                                 reinterpret_cast<const int64_t*>(cnt.ptr()), cnt.shape(0),
                                 reinterpret_cast<int64_t*>(nw.ptr()), threads);
        Py_END_ALLOW_THREADS;
    });
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "take_plain: %s", kStructureInvalid);
        return nullptr;
    }
    Py_RETURN_NONE;
}

PyObject* py_take_plain_fill(PyObject*, PyObject* args) {
    PyObject *o_ip, *o_ix, *o_cnt, *o_first, *o_order, *o_new, *o_entry, *o_pos;
    int sort, threads;
    if (!PyArg_ParseTuple(args, "OOOOOOOOpi", &o_ip, &o_ix, &o_cnt, &o_first, &o_order, &o_new, &o_entry, &o_pos, &sort,
                          &threads))
        return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ip, ix, cnt, first, order, nw, entry, pos;
    if (!acquire_take_plain(ip, ix, cnt, o_ip, o_ix, o_cnt) || !first.acquire(o_first, "first", 1, false, true) ||
        !first.check_index("first") || !order.acquire(o_order, "order", 1, false, true) || !order.check_index("order") ||
        !nw.acquire(o_new, "new_ptr", 1, false, true) || !nw.check_index("new_ptr") ||
        !entry.acquire(o_entry, "entry", 1, true, true) || !entry.check_index("entry") ||
        !pos.acquire(o_pos, "position", 1, true, true) || !pos.check_index("position"))
        return nullptr;
    const int64_t m = ip.shape(0) - 1, n_plain = cnt.shape(0), total = entry.shape(0);
    const int64_t* c = reinterpret_cast<const int64_t*>(cnt.ptr());
    const int64_t* f = reinterpret_cast<const int64_t*>(first.ptr());
    bool consistent = first.itemsize() == 8 && order.itemsize() == 8 && nw.itemsize() == 8 && entry.itemsize() == 8 &&
                      pos.itemsize() == 8 && first.shape(0) == n_plain && nw.shape(0) == m + 1 && pos.shape(0) == total;
    int64_t picks = 0;
    for (int64_t j = 0; consistent && j < n_plain; ++j) {
        consistent = c[j] >= 0 && f[j] == picks && c[j] <= std::numeric_limits<int64_t>::max() - picks;
        if (consistent) picks += c[j];
    }
    if (!consistent || picks != order.shape(0)) {
        PyErr_SetString(PyExc_ValueError, "take_plain: inconsistent arrays or counts");
        return nullptr;
    }
    bool ok = true, oom = false;
    dispatch_index(ip.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        Py_BEGIN_ALLOW_THREADS;
        try {
            ok = take_plain_fill<I>(reinterpret_cast<const I*>(ip.ptr()), m, reinterpret_cast<const I*>(ix.ptr()),
                                    ix.shape(0), c, f, n_plain, reinterpret_cast<const int64_t*>(order.ptr()),
                                    reinterpret_cast<const int64_t*>(nw.ptr()), total,
                                    reinterpret_cast<int64_t*>(entry.ptr()), reinterpret_cast<int64_t*>(pos.ptr()),
                                    sort != 0, threads);
        } catch (const std::bad_alloc&) {
            oom = true;
        }
        Py_END_ALLOW_THREADS;
    });
    if (oom) return PyErr_NoMemory();
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "take_plain: %s", kStructureInvalid);
        return nullptr;
    }
    Py_RETURN_NONE;
}

PyObject* py_max_threads(PyObject*, PyObject*) { return PyLong_FromLong(max_threads()); }

// scatter_copy_limit(nbytes) -> the previous limit: sets scatter_copy_max_bytes.
PyObject* py_scatter_copy_limit(PyObject*, PyObject* args) {
    double nbytes;
    if (!PyArg_ParseTuple(args, "d", &nbytes)) return nullptr;
    const double previous = scatter_copy_max_bytes;
    scatter_copy_max_bytes = nbytes;
    return PyFloat_FromDouble(previous);
}


// =============================================================================================
// Large output buffers, kept for reuse
//
// A product's output of hundreds of megabytes is a fresh mapping from the system on every call
// (allocators map blocks that large on their own and unmap them when freed), and touching it for
// the first time costs a page fault and the kernel's zeroing per page: a third of a 64-column SpMM's
// time on the benchmark's Laplacian. A Block is a buffer of such an output (NumPy views it without
// copying); when the last array that views it is freed, the memory goes back to a small pool, from
// which the next output of about its size is served, already mapped. The pool holds at most
// kPoolMaxBlocks blocks and pool_capacity() bytes; pool_release() returns them to the system.
// Every use is under the GIL (allocation, and deallocation of the Python object), so the pool needs
// no lock of its own.

struct PooledMemory {
    void* ptr;
    size_t size;
};

std::vector<PooledMemory>& pool() {
    static std::vector<PooledMemory> blocks;
    return blocks;
}

constexpr size_t kPoolMaxBlocks = 4;
constexpr size_t kPoolAlignment = size_t{2} << 20;  // a huge page

size_t pool_capacity() {
    static const size_t cap = [] {
        size_t limit = size_t{2} << 30;
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0) limit = std::min(limit, static_cast<size_t>(pages) * static_cast<size_t>(page) / 8);
#endif
        return limit;
    }();
    return cap;
}

size_t pooled_bytes() {
    size_t total = 0;
    for (const PooledMemory& b : pool()) total += b.size;
    return total;
}

void* allocate_block(size_t size) {
    void* p = nullptr;
#if defined(__unix__) || defined(__APPLE__)
    if (posix_memalign(&p, kPoolAlignment, size) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, size, MADV_HUGEPAGE);  // fewer faults on first touch, where the system allows it
#endif
#else
    p = std::malloc(size);
#endif
    return p;
}

struct BlockObject {
    PyObject_HEAD
    void* ptr;
    Py_ssize_t size;      // bytes exposed
    size_t capacity;      // bytes allocated
};

int block_getbuffer(PyObject* self, Py_buffer* view, int flags) {
    BlockObject* b = reinterpret_cast<BlockObject*>(self);
    return PyBuffer_FillInfo(view, self, b->ptr, b->size, 0, flags);
}

void block_dealloc(PyObject* self) {
    BlockObject* b = reinterpret_cast<BlockObject*>(self);
    if (b->ptr != nullptr) {
        std::vector<PooledMemory>& blocks = pool();
        if (blocks.size() < kPoolMaxBlocks && pooled_bytes() + b->capacity <= pool_capacity()) {
            blocks.push_back({b->ptr, b->capacity});
        } else {
            std::free(b->ptr);
        }
    }
    Py_TYPE(self)->tp_free(self);
}

PyBufferProcs block_as_buffer = {block_getbuffer, nullptr};

PyTypeObject BlockType = [] {
    PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
    t.tp_name = "xsparse.backends._native.Block";
    t.tp_basicsize = sizeof(BlockObject);
    t.tp_dealloc = block_dealloc;
    t.tp_as_buffer = &block_as_buffer;
    t.tp_flags = Py_TPFLAGS_DEFAULT;
    t.tp_doc = "A writable buffer of a large output; its memory is kept for reuse when it is freed.";
    return t;
}();

PyObject* py_pool_block(PyObject*, PyObject* args) {
    long long n;
    if (!PyArg_ParseTuple(args, "L", &n)) return nullptr;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "pool_block: negative size");
        return nullptr;
    }
    const size_t size = static_cast<size_t>(n);
    // the smallest pooled block that holds n bytes without wasting more than half of it
    std::vector<PooledMemory>& blocks = pool();
    size_t best = blocks.size();
    for (size_t i = 0; i < blocks.size(); ++i) {
        if (blocks[i].size >= size && blocks[i].size / 2 <= size && (best == blocks.size() || blocks[i].size < blocks[best].size))
            best = i;
    }
    void* ptr;
    size_t capacity;
    if (best < blocks.size()) {
        ptr = blocks[best].ptr;
        capacity = blocks[best].size;
        blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(best));
    } else {
        capacity = std::max<size_t>((size + kPoolAlignment - 1) / kPoolAlignment * kPoolAlignment, kPoolAlignment);
        ptr = allocate_block(capacity);
        if (ptr == nullptr) return PyErr_NoMemory();
    }
    BlockObject* b = PyObject_New(BlockObject, &BlockType);
    if (b == nullptr) {
        std::free(ptr);
        return nullptr;
    }
    b->ptr = ptr;
    b->size = static_cast<Py_ssize_t>(size);
    b->capacity = capacity;
    return reinterpret_cast<PyObject*>(b);
}

PyObject* py_pool_release(PyObject*, PyObject*) {
    size_t freed = 0;
    for (const PooledMemory& b : pool()) {
        freed += b.size;
        std::free(b.ptr);
    }
    pool().clear();
    return PyLong_FromSize_t(freed);
}

PyObject* py_pool_bytes(PyObject*, PyObject*) { return PyLong_FromSize_t(pooled_bytes()); }

// The compressed offsets of the entries of a coalesced COO matrix (slice index major, plain index minor):
// offset s is the number of entries before slice s. A first pass checks that the entries are in
// row-major order with distinct positions and their slices within [0, n_major), and returns false
// (writing nothing) where they are not; the second writes, at each boundary between slices, the offsets
// of the slices it opens, every offset once. Both run over ranges of entries in parallel.
template <class I>
bool sorted_offsets(const I* major, const I* minor, int64_t nnz, int64_t n_major, int64_t* out, int threads) {
    if (nnz == 0) {
        for (int64_t s = 0; s <= n_major; ++s) out[s] = 0;
        return true;
    }
    const int64_t first = major[0], last = major[nnz - 1];
    if (first < 0 || last >= n_major) return false;
    int out_of_order = 0;  // without branches, so that the check vectorises
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : out_of_order) if (threads > 1)
    for (int64_t t = 1; t < nnz; ++t) {
        const I a = major[t - 1], b = major[t];
        out_of_order |= static_cast<int>(b < a) | (static_cast<int>(a == b) & static_cast<int>(minor[t] <= minor[t - 1]));
    }
    if (out_of_order) return false;
    for (int64_t s = 0; s <= first; ++s) out[s] = 0;
    for (int64_t s = last + 1; s <= n_major; ++s) out[s] = nnz;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t t = 1; t < nnz; ++t) {
        const int64_t a = major[t - 1], b = major[t];
        for (int64_t s = a + 1; s <= b; ++s) out[s] = t;
    }
    return true;
}

// sorted_offsets(major, minor, n_major, out, threads) -> bool: major and minor (nnz,) of one index dtype, out
// (n_major + 1,) int64; False (out unwritten) where the entries are not in row-major order with distinct
// positions, or a slice index is out of range.
PyObject* py_sorted_offsets(PyObject*, PyObject* args) {
    PyObject *o_major, *o_minor, *o_out;
    long long n_major;
    int threads;
    if (!PyArg_ParseTuple(args, "OOLOi", &o_major, &o_minor, &n_major, &o_out, &threads)) return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer major, minor, out;
    if (!major.acquire(o_major, "major", 1, false, true) || !major.check_index("major") ||
        !minor.acquire(o_minor, "minor", 1, false, true) || !minor.check_index("minor") ||
        !out.acquire(o_out, "out", 1, true, true) || !out.check_index("out"))
        return nullptr;
    if (n_major < 0 || out.itemsize() != 8 || out.shape(0) != n_major + 1 || minor.itemsize() != major.itemsize() ||
        minor.shape(0) != major.shape(0)) {
        PyErr_SetString(PyExc_ValueError, "sorted_offsets: inconsistent arrays");
        return nullptr;
    }
    bool ok = true;
    dispatch_index(major.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        Py_BEGIN_ALLOW_THREADS;
        ok = sorted_offsets<I>(reinterpret_cast<const I*>(major.ptr()), reinterpret_cast<const I*>(minor.ptr()),
                               major.shape(0), n_major, reinterpret_cast<int64_t*>(out.ptr()), threads);
        Py_END_ALLOW_THREADS;
    });
    return PyBool_FromLong(ok);
}

// Whether the plain indices x[0..n) of one set lie in [0, hi) (false where one does not), and the number of
// descents (an index not above the one before it) among them: two branch-free reductions, which vectorise.
template <class I>
__attribute__((always_inline)) inline bool plain_pass(const I* __restrict x, int64_t n, I hi, int64_t& descents) {
    int64_t bad = 0, d = 0;
    for (int64_t k = 0; k < n; ++k) bad |= static_cast<int64_t>(x[k] < 0) | static_cast<int64_t>(x[k] >= hi);
    for (int64_t k = 1; k < n; ++k) d += static_cast<int64_t>(x[k] <= x[k - 1]);
    descents = d;
    return bad == 0;
}

// The same with 32-byte vectors: x86-64's baseline (16-byte) vectors have no 64-bit comparison, so there
// the int64 passes stay scalar (a third of SciPy's full check's speed).
template <class I>
XSPARSE_TARGET_AVX2 bool plain_pass_avx2(const I* __restrict x, int64_t n, I hi, int64_t& descents) {
    return plain_pass<I>(x, n, hi, descents);
}

// Whether nb sets of compressed indices (offsets (nb, n_major + 1), plain indices (nb, nse)) hold the
// validator's invariants 5.1-5.6: offsets from 0 to nse, each step in [0, n_minor], indices in
// [0, n_minor), strictly increasing within each slice. Every pass is a branch-free reduction (a loop per
// slice mispredicts its exit once per short slice): a descent is allowed only where a slice starts, so
// the descents counted over all entries must equal those counted at the slices' starts. False where any
// invariant fails (or an int32 index equals 2**31 - 1 of a longer dimension); the validator then checks on
// its own and names what fails.
template <class I>
bool compressed_canonical(const I* __restrict ptr, const I* __restrict idx, int64_t nb, int64_t n_major, int64_t nse,
                          int64_t n_minor) {
    const I hi = static_cast<I>(std::min<int64_t>(n_minor, std::numeric_limits<I>::max()));
    const bool wide = cpu_has_avx2();
    for (int64_t b = 0; b < nb; ++b) {
        const I* p = ptr + b * (n_major + 1);
        const I* x = idx + b * nse;
        if (p[0] != 0 || static_cast<int64_t>(p[n_major]) != nse) return false;
        int bad = 0;
        for (int64_t r = 0; r < n_major; ++r) {
            const int64_t step = static_cast<int64_t>(p[r + 1]) - static_cast<int64_t>(p[r]);
            bad |= static_cast<int>(step < 0) | static_cast<int>(step > n_minor);
        }
        if (bad) return false;
        int64_t descents = 0, at_starts = 0;
        if (!(wide ? plain_pass_avx2<I>(x, nse, hi, descents) : plain_pass<I>(x, nse, hi, descents))) return false;
        if (nse < 2) continue;
        // the offsets are in order from here on: slice r starts a run at p[r] where slice r - 1 holds
        // entries, and that start lies inside the entries where p[r] < nse (clamped to be read anyway)
        for (int64_t r = 1; r < n_major; ++r) {
            const int64_t s = p[r];
            const int64_t c = std::min<int64_t>(std::max<int64_t>(s, 1), nse - 1);
            at_starts += static_cast<int64_t>(s > static_cast<int64_t>(p[r - 1])) & static_cast<int64_t>(s < nse) &
                         static_cast<int64_t>(x[c] <= x[c - 1]);
        }
        if (descents != at_starts) return false;
    }
    return true;
}

// compressed_canonical(indptr, indices, n_minor) -> bool: indptr (nb, n_major + 1) and indices (nb, nse),
// C-contiguous, of one index dtype (1-D for one set).
PyObject* py_compressed_canonical(PyObject*, PyObject* args) {
    PyObject *o_ptr, *o_idx;
    long long n_minor;
    if (!PyArg_ParseTuple(args, "OOL", &o_ptr, &o_idx, &n_minor)) return nullptr;
    Buffer ptr, idx;
    if (!ptr.acquire(o_ptr, "indptr", 1, 2, false, true) || !ptr.check_index("indptr") ||
        !idx.acquire(o_idx, "indices", 1, 2, false, true) || !idx.check_index("indices"))
        return nullptr;
    const int nd = ptr.ndim();
    const int64_t nb = nd == 2 ? ptr.shape(0) : 1;
    if (idx.ndim() != nd || (nd == 2 && idx.shape(0) != nb) || idx.itemsize() != ptr.itemsize() || n_minor < 0 ||
        ptr.shape(nd - 1) < 1) {
        PyErr_SetString(PyExc_ValueError, "compressed_canonical: inconsistent arrays");
        return nullptr;
    }
    const int64_t n_major = ptr.shape(nd - 1) - 1, nse = idx.shape(nd - 1);
    bool ok = true;
    dispatch_index(ptr.itemsize(), [&](auto itag) {
        using I = typename decltype(itag)::type;
        run_releasing_gil(nb * (n_major + nse), [&] {
            ok = compressed_canonical<I>(reinterpret_cast<const I*>(ptr.ptr()), reinterpret_cast<const I*>(idx.ptr()), nb,
                                         n_major, nse, n_minor);
        });
    });
    return PyBool_FromLong(ok);
}

// ---------------------------------------------------------------------------------------------
// The Kronecker product of two CSR matrices A (m x n) and B (p x q), as sorted COO. Result row i * p + k
// holds, for each entry a of A's row i and then each entry b of B's row k, column col(a) * q + col(b)
// and value val(a) * val(b): rows and columns increase where A's and B's rows are sorted. A's row i
// fills the range that starts at ptr_a[i] * nnz(B), so A's rows are written in parallel with no count
// pass; only B's non-empty rows (brows) are visited. Every range is checked before it is read or
// written; the column indices are not (they only enter the arithmetic of the result's).
template <class I, class T>
bool kron_fill(const I* ap, int64_t m, const I* ai, const T* av, int64_t annz, const I* bp, int64_t p, const I* bi,
               const T* bv, int64_t bnnz, const int64_t* brows, int64_t nbrows, int64_t q, I* out_row, I* out_col,
               T* out_val, int threads) {
    if (ap[0] != 0 || static_cast<int64_t>(ap[m]) != annz || bp[0] != 0 || static_cast<int64_t>(bp[p]) != bnnz) return false;
    for (int64_t r = 0; r < nbrows; ++r) {
        const int64_t k = brows[r];
        if (k < 0 || k >= p || bp[k] < 0 || bp[k] > bp[k + 1] || bp[k + 1] > bnnz) return false;
    }
    bool ok = true;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 64) reduction(&& : ok) if (threads > 1)
    for (int64_t i = 0; i < m; ++i) {
        const int64_t lo = ap[i], hi = ap[i + 1];
        if (lo < 0 || lo > hi || hi > annz) {
            ok = false;
            continue;
        }
        if (lo == hi) continue;
        int64_t t = lo * bnnz;
        const int64_t end = hi * bnnz;
        for (int64_t r = 0; r < nbrows; ++r) {
            const int64_t k = brows[r], blo = bp[k], bhi = bp[k + 1];
            if ((hi - lo) * (bhi - blo) > end - t) {
                ok = false;
                break;
            }
            const I row = static_cast<I>(i * p + k);
            for (int64_t a = lo; a < hi; ++a) {
                const int64_t base = static_cast<int64_t>(ai[a]) * q;
                const T x = av[a];
                for (int64_t b = blo; b < bhi; ++b, ++t) {
                    out_row[t] = row;
                    out_col[t] = static_cast<I>(base + bi[b]);
                    out_val[t] = merge_apply<kMergeMultiply>(x, bv[b]);
                }
            }
        }
        if (ok && t != end) ok = false;
    }
    return ok;
}

// kron(kind, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, b_rows, q, out_row, out_col, out_data, threads):
// one index dtype for every index array but b_rows (int64, B's non-empty rows), one value dtype ('i' of 4 or 8
// bytes, 'f', 'c'); out_* of nnz(A) * nnz(B) entries. ValueError for offsets out of order or inconsistent arrays.
PyObject* py_kron(PyObject*, PyObject* args) {
    int kind, threads;
    long long q;
    PyObject *o_ap, *o_ai, *o_av, *o_bp, *o_bi, *o_bv, *o_br, *o_or, *o_oc, *o_ov;
    if (!PyArg_ParseTuple(args, "COOOOOOOLOOOi", &kind, &o_ap, &o_ai, &o_av, &o_bp, &o_bi, &o_bv, &o_br, &q, &o_or, &o_oc,
                          &o_ov, &threads))
        return nullptr;
    threads = std::clamp(threads, 1, max_threads());
    Buffer ap, ai, av, bp, bi, bv, br, orow, ocol, oval;
    if (!ap.acquire(o_ap, "a_indptr", 1, false, true) || !ap.check_index("a_indptr") ||
        !ai.acquire(o_ai, "a_indices", 1, false, true) || !ai.check_index("a_indices") ||
        !av.acquire(o_av, "a_data", 1, false, true) || !bp.acquire(o_bp, "b_indptr", 1, false, true) ||
        !bp.check_index("b_indptr") || !bi.acquire(o_bi, "b_indices", 1, false, true) || !bi.check_index("b_indices") ||
        !bv.acquire(o_bv, "b_data", 1, false, true) || !br.acquire(o_br, "b_rows", 1, false, true) ||
        !br.check_index("b_rows") || !orow.acquire(o_or, "out_row", 1, true, true) || !orow.check_index("out_row") ||
        !ocol.acquire(o_oc, "out_col", 1, true, true) || !ocol.check_index("out_col") ||
        !oval.acquire(o_ov, "out_data", 1, true, true))
        return nullptr;
    const int64_t m = ap.shape(0) - 1, p = bp.shape(0) - 1, annz = ai.shape(0), bnnz = bi.shape(0);
    const Py_ssize_t is = ap.itemsize();
    const bool consistent = m >= 0 && p >= 0 && q >= 0 && ai.itemsize() == is && bp.itemsize() == is &&
                            bi.itemsize() == is && orow.itemsize() == is && ocol.itemsize() == is && br.itemsize() == 8 &&
                            av.shape(0) == annz && bv.shape(0) == bnnz && av.itemsize() == bv.itemsize() &&
                            oval.itemsize() == av.itemsize() && (bnnz == 0 || annz <= INT64_MAX / bnnz) &&
                            orow.shape(0) == annz * bnnz && ocol.shape(0) == annz * bnnz && oval.shape(0) == annz * bnnz;
    if (!consistent) {
        PyErr_SetString(PyExc_ValueError, "kron: inconsistent arrays");
        return nullptr;
    }
    bool valid = true;
    const bool ok = dispatch_arith(kind, av.itemsize(), [&](auto vtag) {
        using T = typename decltype(vtag)::type;
        dispatch_index(is, [&](auto itag) {
            using I = typename decltype(itag)::type;
            Py_BEGIN_ALLOW_THREADS;
            valid = kron_fill<I, T>(reinterpret_cast<const I*>(ap.ptr()), m, reinterpret_cast<const I*>(ai.ptr()),
                                    reinterpret_cast<const T*>(av.ptr()), annz, reinterpret_cast<const I*>(bp.ptr()), p,
                                    reinterpret_cast<const I*>(bi.ptr()), reinterpret_cast<const T*>(bv.ptr()), bnnz,
                                    reinterpret_cast<const int64_t*>(br.ptr()), br.shape(0), q,
                                    reinterpret_cast<I*>(orow.ptr()), reinterpret_cast<I*>(ocol.ptr()),
                                    reinterpret_cast<T*>(oval.ptr()), threads);
            Py_END_ALLOW_THREADS;
        });
    });
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "kron: unsupported value type (buffer format '%s')", av.format());
        return nullptr;
    }
    if (!valid) {
        PyErr_Format(PyExc_ValueError, "kron: %s", kStructureInvalid);
        return nullptr;
    }
    Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"max_threads", py_max_threads, METH_NOARGS, "Number of threads the parallel kernels use (OpenMP's maximum)."},
    {"scatter_copy_limit", py_scatter_copy_limit, METH_VARARGS,
     "scatter_copy_limit(nbytes) -> previous: the most bytes of private output copies a parallel scatter product uses"},
    {"coo_to_compressed", py_coo_to_compressed, METH_VARARGS,
     "coo_to_compressed(major, minor, values, indptr, indices, data, workspace, sum_duplicates, kind) -> nnz"},
    {"dense_count", py_dense_count, METH_VARARGS, "dense_count(dense, indptr, kind) -> nnz"},
    {"dense_fill", py_dense_fill, METH_VARARGS, "dense_fill(dense, indptr, indices, data, kind)"},
    {"compressed_to_dense", py_compressed_to_dense, METH_VARARGS,
     "compressed_to_dense(indptr, indices, data, out, kind)"},
    {"pool_block", py_pool_block, METH_VARARGS,
     "pool_block(nbytes) -> Block: a writable buffer of nbytes, from the pool of freed large outputs when one fits"},
    {"pool_release", py_pool_release, METH_NOARGS, "pool_release() -> bytes: free the pooled blocks"},
    {"pool_bytes", py_pool_bytes, METH_NOARGS, "pool_bytes() -> bytes held by the pool"},
    {"coo_mm", py_coo_mm, METH_VARARGS,
     "coo_mm(to, from, values, d, out) -> bool: out = A @ d for COO entries (to, from) in any order; False where an index is out of range"},
    {"csr_mm", py_csr_mm, METH_VARARGS,
     "csr_mm(indptr, indices, data, n_minor, d, out, c, alpha, beta, transpose, checked=False): out = alpha op(A) @ d + beta c; "
     "checked: the offsets and indices are known to be valid (skips their checks)"},
    {"spgemm_count", py_spgemm_count, METH_VARARGS,
     "spgemm_count(a_indptr, a_indices, b_indptr, b_indices, n_cols, counts) -> nnz"},
    {"spgemm_fill", py_spgemm_fill, METH_VARARGS,
     "spgemm_fill(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, n_cols, c_indptr, c_indices, c_data)"},
    {"sddmm", py_sddmm, METH_VARARGS, "sddmm(indptr, indices, values, a, bt, out, alpha, beta)"},
    {"merge_count", py_merge_count, METH_VARARGS,
     "merge_count(op, kind, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, n_minor, c_indptr, threads) -> nnz"},
    {"merge_fill", py_merge_fill, METH_VARARGS,
     "merge_fill(op, kind, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, n_minor, c_indptr, c_indices, "
     "c_data, threads)"},
    {"csr_sums", py_csr_sums, METH_VARARGS, "csr_sums(axis, kind, indptr, indices, data, n_minor, out, seen, threads) -> bool"},
    {"expand_compressed", py_expand_compressed, METH_VARARGS,
     "expand_compressed(indptr, plain, nb, n_major, major, minor, threads) -> bool: the compressed indices expanded, the plain ones copied"},
    {"transpose_compressed", py_transpose_compressed, METH_VARARGS,
     "transpose_compressed(indptr, plain, values, nb, n_major, n_minor, out_indptr, out_plain, out_values, threads) -> bool"},
    {"take_plain_count", py_take_plain_count, METH_VARARGS, "take_plain_count(indptr, plain, count, new_ptr, threads)"},
    {"take_plain_fill", py_take_plain_fill, METH_VARARGS,
     "take_plain_fill(indptr, plain, count, first, order, new_ptr, entry, position, sort, threads)"},
    {"gather_slices_count", py_gather_slices_count, METH_VARARGS, "gather_slices_count(indptr, nse, rows, new_ptr)"},
    {"gather_slices_fill", py_gather_slices_fill, METH_VARARGS,
     "gather_slices_fill(indptr, plain, values, rows, new_ptr, out_plain, out_values, threads)"},
    {"band_count", py_band_count, METH_VARARGS, "band_count(indptr, plain, d, below, new_ptr, threads)"},
    {"band_fill", py_band_fill, METH_VARARGS, "band_fill(indptr, plain, values, d, below, new_ptr, out_plain, out_values, threads)"},
    {"compressed_find", py_compressed_find, METH_VARARGS,
     "compressed_find(indptr, plain, major, minor, out, threads): positions of (slice, plain index) queries"},
    {"count_nonzero", py_count_nonzero, METH_VARARGS, "count_nonzero(values, kind, threads) -> int: of floating or complex values"},
    {"join_plain", py_join_plain, METH_VARARGS,
     "join_plain(indptrs, plains, values, offsets, nb, n_major, out_indptr, out_plain, out_values, threads)"},
    {"compressed_canonical", py_compressed_canonical, METH_VARARGS,
     "compressed_canonical(indptr, indices, n_minor) -> bool: whether compressed indices hold invariants 5.1-5.6"},
    {"sorted_offsets", py_sorted_offsets, METH_VARARGS,
     "sorted_offsets(major, minor, n_major, out, threads) -> bool: the compressed offsets of a coalesced COO matrix"},
    {"kron", py_kron, METH_VARARGS,
     "kron(kind, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, b_rows, q, out_row, out_col, out_data, threads)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "xsparse.backends._native",
    "Compiled CPU conversion kernels of xsparse's NumPy backend (see xsparse.backends._cpu).", -1, methods,
    nullptr, nullptr, nullptr, nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) {
    PyObject* m = PyModule_Create(&module_def);
    if (m == nullptr) return nullptr;
#ifdef _OPENMP
    const int openmp = 1;
#else
    const int openmp = 0;
#endif
    if (PyType_Ready(&BlockType) < 0 || PyModule_AddIntConstant(m, "openmp", openmp) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
