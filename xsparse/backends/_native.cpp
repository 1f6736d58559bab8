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
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMinEntries = 1 << 15;

// Slices of up to kRankSortMax entries are sorted by rank (see sort_and_emit), longer ones of up to
// kInsertionSortMax by a stable insertion sort in place, which for them beats std::sort of pairs
// (what SciPy does) by avoiding the pair copies and the sort's set-up.
constexpr int64_t kRankSortMax = 16;
constexpr int64_t kInsertionSortMax = 64;

// The COO scatter prefetches the destination of the entry this far ahead, and the cursor of the
// one twice as far: its writes go to random places, and without prefetching each waits for its
// cache miss in turn (measured: the scatter took about twice as long).
constexpr int64_t kPrefetchDistance = 32;

// ---------------------------------------------------------------------------------------------
// Value types and their arithmetic.

// numpy's bool is one byte holding 0 or 1; reading it through C++ `bool` would be undefined for any
// other byte, so it is kept as a byte with logical semantics.
struct Bool8 {
    uint8_t v;
};

template <class T>
struct ValueOps {
    // `x != 0` is true for NaN (in either part of a complex) and false for -0.0, as in numpy.
    static bool nonzero(const T& x) { return x != T(0); }

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

template <>
struct ValueOps<Bool8> {
    static bool nonzero(const Bool8& x) { return x.v != 0; }
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
        int flags = contiguous ? PyBUF_C_CONTIGUOUS : PyBUF_STRIDES;
        flags |= PyBUF_FORMAT;
        if (writable) flags |= PyBUF_WRITABLE;
        if (PyObject_GetBuffer(obj, &view_, flags) < 0) return false;
        held_ = true;
        if (view_.ndim != ndim) {
            PyErr_Format(PyExc_ValueError, "%s must be %d-dimensional, got %d dimensions", name, ndim,
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

template <class I, class P, class T>
int coo_to_compressed_kernel(Strided1<I> major, Strided1<I> minor, const char* vals, Py_ssize_t vs0,
                             Py_ssize_t vs1, int64_t nnz, int64_t B, P* indptr, int64_t n_major,
                             I* indices, T* data, P* workspace, int n_work, bool sum_duplicates,
                             int64_t* nnz_out) {
    using UI = std::make_unsigned_t<I>;
    const UI n_major_u = static_cast<UI>(n_major);
    const bool b1 = (B == 1);

    auto scatter_range = [&](int64_t k0, int64_t k1, P* cursor) {
        for (int64_t k = k0; k < k1; ++k) {
            if (k + 2 * kPrefetchDistance < k1) __builtin_prefetch(cursor + major[k + 2 * kPrefetchDistance], 1);
            if (k + kPrefetchDistance < k1) {
                const int64_t pf = cursor[major[k + kPrefetchDistance]];
                __builtin_prefetch(indices + pf, 1);
                __builtin_prefetch(data + pf * B, 1);
            }
            const int64_t p = cursor[major[k]]++;
            indices[p] = minor[k];
            if (b1) {
                std::memcpy(data + p, vals + k * vs0, sizeof(T));
            } else {
                load_block(data + p * B, vals + k * vs0, B, vs1);
            }
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

// Whether entry (i, j) -- the block at p, B values with stride s2 -- has a non-zero value.
template <class T>
inline bool block_nonzero(const char* p, int64_t B, Py_ssize_t s2) {
    for (int64_t b = 0; b < B; ++b) {
        T x;
        std::memcpy(&x, p + b * s2, sizeof(T));
        if (ValueOps<T>::nonzero(x)) return true;
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
                count += ValueOps<T>::nonzero(x) ? 1 : 0;
            }
        } else {
            for (int64_t j = 0; j < n1; ++j) count += block_nonzero<T>(row + j * s1, B, s2) ? 1 : 0;
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
                p += ValueOps<T>::nonzero(x) ? 1 : 0;
            }
        } else {
            for (int64_t j = 0; j < n1 && p < end; ++j) {
                const char* blk = row + j * s1;
                if (block_nonzero<T>(blk, B, s2)) {
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
// Compressed -> dense: a scatter-add into a zeroed (strided) output, parallel over major slices.
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
                ValueOps<T>::add_to(acc, x);
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

PyObject* py_max_threads(PyObject*, PyObject*) { return PyLong_FromLong(max_threads()); }

PyMethodDef methods[] = {
    {"max_threads", py_max_threads, METH_NOARGS, "Number of threads the parallel kernels use (OpenMP's maximum)."},
    {"coo_to_compressed", py_coo_to_compressed, METH_VARARGS,
     "coo_to_compressed(major, minor, values, indptr, indices, data, workspace, sum_duplicates, kind) -> nnz"},
    {"dense_count", py_dense_count, METH_VARARGS, "dense_count(dense, indptr, kind) -> nnz"},
    {"dense_fill", py_dense_fill, METH_VARARGS, "dense_fill(dense, indptr, indices, data, kind)"},
    {"compressed_to_dense", py_compressed_to_dense, METH_VARARGS,
     "compressed_to_dense(indptr, indices, data, out, kind)"},
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
    if (PyModule_AddIntConstant(m, "openmp", openmp) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
