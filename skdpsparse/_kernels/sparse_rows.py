"""Row norms, contribution bounding (per-row scaling) and column sums, for CSR parts
``(indptr, indices, data)`` and for dense 2-D arrays.

Contribution bounding scales a row into the set
:math:`\\{x : \\|x\\|_2 \\le L_2,\\ \\|x\\|_1 \\le L_1\\}` by the factor
:math:`\\min(1, L_2/\\|x\\|_2, L_1/\\|x\\|_1)`: rows are scaled, never dropped
(dropping would make the output depend on whether one record is out of bounds).
Scaled rows satisfy the bounds up to floating-point rounding, every finite row
included: a row whose norm overflows float64 (entries near ±1.8e308) gets its true
factor, computed in units of its largest entry (:func:`._common.bounding_scale_nb`),
not L/inf = 0.

CSR parts are those of a ``scipy.sparse.csr_array``/``csr_matrix`` in canonical
form: ``indices`` within ``[0, n_cols)`` (not checked in the loops: out-of-range
column indices are undefined behaviour) and no duplicate entries in a row. Norms are
taken over the stored entries, so a duplicate would understate a row's norm and
break the bound: call ``X.sum_duplicates()`` first unless ``X.has_canonical_format``.
Data may be float32 or float64; norms, scales and sums are float64.

All functions here are ``@njit`` dispatchers callable from Python and compiled code,
except :func:`csr_scale_rows` and :func:`dense_scale_rows`, thin wrappers (for
``out=None``) around the cores with suffix ``_nb``.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._common import bounding_scale_nb, l1_norm_range_nb, l2_norm_range_nb, prepare_out

__all__ = [
    "csr_row_norms",
    "dense_row_norms",
    "csr_bounding_scales",
    "dense_bounding_scales",
    "csr_scaled_column_sum",
    "dense_scaled_column_sum",
    "csr_bounded_column_sum",
    "csr_bounded_column_sum_rows",
    "csr_bounded_column_sum_threaded",
    "dense_bounded_column_sum",
    "csr_scale_rows",
    "dense_scale_rows",
    "csr_scale_rows_nb",
    "dense_scale_rows_nb",
    "free_threads",
    "prefetch_nb",
    "row_ranges",
]


# Rows per block in the fused bounded sums (scales of a block fit in L1).
_BLOCK = 256


@njit(cache=True, inline="always")
def _check_bounds(l2_bound, l1_bound):
    if not (l2_bound >= 0.0 and l1_bound >= 0.0):
        raise ValueError("l2_bound and l1_bound must be >= 0 (inf for no bound).")


@njit(cache=True, inline="always")
def _row_norm(x, start, stop, ord):
    if ord == 2:
        return l2_norm_range_nb(x, start, stop)
    return l1_norm_range_nb(x, start, stop)


# The factor min(1, L2/‖x‖₂, L1/‖x‖₁) of one row, shared with the SGD kernels (rows
# whose norms overflow float64 keep their direction: see _common.bounding_scale_nb).
_bounding_scale = bounding_scale_nb


@njit(cache=True)
def csr_row_norms(indptr, data, ord):
    """l1 or l2 norm of every row of a CSR matrix.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,), int32 or int64
    data : ndarray of shape (nnz,), float32 or float64
    ord : int
        1 or 2.

    Returns
    -------
    ndarray of shape (n_rows,), float64
    """
    if ord != 1 and ord != 2:
        raise ValueError("ord must be 1 or 2.")
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = _row_norm(data, indptr[i], indptr[i + 1], ord)
    return out


@njit(cache=True)
def dense_row_norms(X, ord):
    """l1 or l2 norm of every row of a dense 2-D array.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_cols), float32 or float64
    ord : int
        1 or 2.

    Returns
    -------
    ndarray of shape (n_rows,), float64
    """
    if ord != 1 and ord != 2:
        raise ValueError("ord must be 1 or 2.")
    out = np.empty(X.shape[0], dtype=np.float64)
    for i in range(X.shape[0]):
        out[i] = _row_norm(X[i], 0, X.shape[1], ord)
    return out


@njit(cache=True)
def csr_bounding_scales(indptr, data, l2_bound, l1_bound):
    """Per-row factors :math:`\\min(1, L_2/\\|x_i\\|_2, L_1/\\|x_i\\|_1)`.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,)
    data : ndarray of shape (nnz,), float32 or float64
    l2_bound, l1_bound : float
        Bounds ``>= 0``; ``np.inf`` means no constraint.

    Returns
    -------
    ndarray of shape (n_rows,), float64
        In ``[0, 1]``; 1 for all-zero rows.
    """
    _check_bounds(l2_bound, l1_bound)
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = _bounding_scale(data, indptr[i], indptr[i + 1], l2_bound, l1_bound)
    return out


@njit(cache=True)
def dense_bounding_scales(X, l2_bound, l1_bound):
    """Dense version of :func:`csr_bounding_scales`.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_cols), float32 or float64
    l2_bound, l1_bound : float
        Bounds ``>= 0``; ``np.inf`` means no constraint.

    Returns
    -------
    ndarray of shape (n_rows,), float64
    """
    _check_bounds(l2_bound, l1_bound)
    out = np.empty(X.shape[0], dtype=np.float64)
    for i in range(X.shape[0]):
        out[i] = _bounding_scale(X[i], 0, X.shape[1], l2_bound, l1_bound)
    return out


@njit(cache=True)
def csr_scaled_column_sum(indptr, indices, data, n_cols, scales):
    """Column sums of the CSR matrix with row ``i`` multiplied by ``scales[i]``.

    Parameters
    ----------
    indptr, indices, data : CSR parts
    n_cols : int
        Number of columns.
    scales : ndarray of shape (n_rows,)

    Returns
    -------
    ndarray of shape (n_cols,), float64
    """
    n = indptr.shape[0] - 1
    if scales.shape[0] != n:
        raise ValueError("scales must have one entry per row.")
    out = np.zeros(n_cols, dtype=np.float64)
    for i in range(n):
        c = np.float64(scales[i])
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            out[np.uint64(indices[k])] += c * np.float64(data[k])
    return out


@njit(cache=True)
def dense_scaled_column_sum(X, scales):
    """Column sums of ``X`` with row ``i`` multiplied by ``scales[i]`` (float64).

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_cols)
    scales : ndarray of shape (n_rows,)

    Returns
    -------
    ndarray of shape (n_cols,), float64
    """
    if scales.shape[0] != X.shape[0]:
        raise ValueError("scales must have one entry per row.")
    out = np.zeros(X.shape[1], dtype=np.float64)
    for i in range(X.shape[0]):
        c = np.float64(scales[i])
        for j in range(X.shape[1]):
            out[j] += c * np.float64(X[i, j])
    return out


@njit(cache=True, nogil=True)
def csr_bounded_column_sum_rows(indptr, indices, data, row_start, row_stop,
                                l2_bound, l1_bound, out):
    """Add the contribution-bounded rows ``row_start:row_stop`` into ``out``.

    The core of :func:`csr_bounded_column_sum`; releases the GIL so that disjoint row
    ranges can be summed by several threads into separate ``out`` arrays.
    """
    _check_bounds(l2_bound, l1_bound)
    # Blocks of rows: first the block's scales (branchy norm code), then a tight
    # scatter loop over the block, whose data is still in cache. Interleaving the
    # two per row is slower: the norm code's branches limit how many of the
    # scatter's cache misses the CPU keeps in flight.
    scales = np.empty(_BLOCK, dtype=np.float64)
    for b0 in range(row_start, row_stop, _BLOCK):
        b1 = min(b0 + _BLOCK, row_stop)
        for i in range(b0, b1):
            scales[i - b0] = _bounding_scale(data, indptr[i], indptr[i + 1], l2_bound, l1_bound)
        for i in range(b0, b1):
            c = scales[i - b0]
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                out[np.uint64(indices[k])] += c * np.float64(data[k])
    return out


@njit(cache=True)
def csr_bounded_column_sum(indptr, indices, data, n_cols, l2_bound, l1_bound):
    """Column sums of the contribution-bounded rows, in one pass.

    Equal to ``csr_scaled_column_sum(..., csr_bounding_scales(...))`` but without
    a scales array or scaled data: the norms of a block of rows are taken while its
    data is in cache, then the block is added scaled. This is the sum behind a
    private mean. :func:`csr_bounded_column_sum_threaded` splits it over threads.

    Parameters
    ----------
    indptr, indices, data : CSR parts
    n_cols : int
    l2_bound, l1_bound : float
        Bounds ``>= 0``; ``np.inf`` means no constraint.

    Returns
    -------
    ndarray of shape (n_cols,), float64
    """
    out = np.zeros(n_cols, dtype=np.float64)
    return csr_bounded_column_sum_rows(indptr, indices, data, 0, indptr.shape[0] - 1,
                                       l2_bound, l1_bound, out)


@intrinsic
def prefetch_nb(typingctx, array, index):
    """Hint the CPU to fetch ``array[index]`` into the cache for a write (LLVM's
    ``llvm.prefetch``: write, high locality, data cache); ``index`` must be within
    the array. No effect on any value. For scatters into arrays larger than the L2 cache, whose
    read-modify-writes miss: issued some entries ahead, the miss overlaps the work
    in between."""
    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array_type, _ = signature.args
        ary = context.make_array(array_type)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, array_type, ary, [args[1]],
                                       wraparound=False, boundscheck=False)
        bytes_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        # LLVM names the intrinsic by its pointer type: "p0" with opaque pointers.
        name = "llvm.prefetch.p0" if str(bytes_ptr) == "ptr" else "llvm.prefetch.p0i8"
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [bytes_ptr, i32, i32, i32]), name)
        builder.call(fn, [builder.bitcast(ptr, bytes_ptr), ir.Constant(i32, 1),
                          ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


# Below this many stored entries a second thread costs more than it saves.
_THREADED_MIN_NNZ = 1 << 21

#: The environment variable that sets the threads of the row-parallel kernels.
NUM_THREADS_ENV = "SKDPSPARSE_NUM_THREADS"


def free_threads(limit=4):
    """Threads for a row-parallel kernel whose result does not depend on them.

    ``SKDPSPARSE_NUM_THREADS`` if set (a positive int); else the CPUs this process
    may run on minus those busy right now: the kernel's running-task count of
    ``/proc/loadavg`` (an instantaneous count, unlike the load averages), less the
    calling thread. Capped at ``limit``. Why the busy ones count: with two threads
    always, the sparse mean took 1.66× its quiet-machine time when another process
    held one of two cores (a thread that waits for a core holds up the join).
    """
    env = os.environ.get(NUM_THREADS_ENV)
    if env:
        try:
            value = int(env)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"{NUM_THREADS_ENV} must be a positive integer, got {env!r}.")
        return value
    cpus = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1))
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        running = 1
    return max(1, min(int(limit), cpus - max(0, running - 1)))


def row_ranges(indptr, n_threads=None):
    """Cuts of ``range(n_rows)`` into contiguous ranges balanced by stored entries:
    ``min(4, available CPUs)`` ranges by default, a single one when threads would cost
    more than they save (few entries or rows)."""
    n_rows = indptr.shape[0] - 1
    if n_threads is None:
        n_threads = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                        else (os.cpu_count() or 1))
    nnz = int(indptr[-1]) if n_rows >= 0 else 0
    if n_threads <= 1 or nnz < _THREADED_MIN_NNZ or n_rows < 2 * n_threads:
        n_threads = 1
    cuts = np.searchsorted(indptr, np.linspace(0, nnz, n_threads + 1)).clip(0, max(n_rows, 0))
    cuts[0], cuts[-1] = 0, max(n_rows, 0)
    return cuts


def csr_bounded_column_sum_threaded(indptr, indices, data, n_cols, l2_bound, l1_bound,
                                    n_threads=None):
    """:func:`csr_bounded_column_sum` split over threads by ranges of rows.

    The scatter into the column sums is bound by memory latency, so a second core
    nearly halves it. Each thread sums a contiguous row range (balanced by stored
    entries) into its own array; the partial sums are then added in a fixed order,
    so the result is deterministic for a given ``n_threads``. Thread-safe: it uses
    Python threads over a ``nogil`` kernel, not numba's threading layer.
    """
    cuts = row_ranges(indptr, n_threads)
    n_threads = len(cuts) - 1
    if n_threads == 1:
        return csr_bounded_column_sum(indptr, indices, data, n_cols, l2_bound, l1_bound)
    partials = [np.zeros(n_cols, dtype=np.float64) for _ in range(n_threads)]
    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        futures = [pool.submit(csr_bounded_column_sum_rows, indptr, indices, data,
                               int(cuts[t]), int(cuts[t + 1]), float(l2_bound),
                               float(l1_bound), partials[t])
                   for t in range(n_threads)]
        for future in futures:
            future.result()
    out = partials[0]
    for part in partials[1:]:
        out += part
    return out


@njit(cache=True)
def dense_bounded_column_sum(X, l2_bound, l1_bound):
    """Dense version of :func:`csr_bounded_column_sum`.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_cols)
    l2_bound, l1_bound : float

    Returns
    -------
    ndarray of shape (n_cols,), float64
    """
    _check_bounds(l2_bound, l1_bound)
    out = np.zeros(X.shape[1], dtype=np.float64)
    for i in range(X.shape[0]):
        c = _bounding_scale(X[i], 0, X.shape[1], l2_bound, l1_bound)
        for j in range(X.shape[1]):
            out[j] += c * np.float64(X[i, j])
    return out


@njit(cache=True)
def csr_scale_rows_nb(indptr, data, scales, out):
    """Compiled core of :func:`csr_scale_rows`; writes into ``out`` and returns it."""
    n = indptr.shape[0] - 1
    if scales.shape[0] != n or out.shape[0] != data.shape[0]:
        raise ValueError("scales must have n_rows entries and out nnz entries.")
    for i in range(n):
        c = np.float64(scales[i])
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            out[k] = c * np.float64(data[k])
    return out


@njit(cache=True)
def dense_scale_rows_nb(X, scales, out):
    """Compiled core of :func:`dense_scale_rows`; writes into ``out`` and returns it."""
    if scales.shape[0] != X.shape[0] or out.shape != X.shape:
        raise ValueError("scales must have n_rows entries and out X's shape.")
    for i in range(X.shape[0]):
        c = np.float64(scales[i])
        for j in range(X.shape[1]):
            out[i, j] = c * np.float64(X[i, j])
    return out


def csr_scale_rows(indptr, data, scales, out=None):
    """CSR data with row ``i`` multiplied by ``scales[i]``.

    With ``scales = csr_bounding_scales(...)`` this is contribution bounding; the
    sparsity pattern (``indptr``, ``indices``) is unchanged.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,)
    data : ndarray of shape (nnz,), float32 or float64
    scales : ndarray of shape (n_rows,)
    out : ndarray of shape (nnz,), optional
        Where to write; may be ``data`` itself. Default: new array of ``data``'s
        dtype.

    Returns
    -------
    ndarray of shape (nnz,)
    """
    return csr_scale_rows_nb(indptr, data, scales, prepare_out(out, data))


def dense_scale_rows(X, scales, out=None):
    """``X`` with row ``i`` multiplied by ``scales[i]``.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_cols), float32 or float64
    scales : ndarray of shape (n_rows,)
    out : ndarray of shape (n_rows, n_cols), optional
        Where to write; may be ``X`` itself. Default: new array of ``X``'s dtype.

    Returns
    -------
    ndarray of shape (n_rows, n_cols)
    """
    return dense_scale_rows_nb(X, scales, prepare_out(out, X))
