"""Exact column sums of contribution-bounded rows, in fixed point.

Each row is scaled into its bounds (:func:`._common.bounding_scale_nb`), each scaled
entry is rounded to a multiple of 2^-F (``frac_bits`` = F) and the integers are summed
in int64, which is exact: the result does not depend on the order of summation, the
number of threads or the container (dense or any sparse format), and two neighbouring
datasets' sums differ by exactly the difference of their two rounded rows. The caller
picks F so that no sum can overflow (:func:`fixed_point_bits`). This is what makes the
sensitivity of a private mean a statement about the numbers the code computes, not
about real arithmetic (``mechanisms/projection.py``).
"""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from . import sparse_rows
from ._common import bounding_scale_nb
from .sparse_rows import prefetch_nb

__all__ = ["bounded_fixed_sum", "fixed_point_bits", "fixed_sum_to_mean"]


def fixed_point_bits(n_rows, entry_bound):
    """The largest F with n·(B·2^F + 1) < 2^62: int64 sums of n rounded entries of
    magnitude at most B cannot overflow (B = the ℓ2 bound, which bounds every entry)."""
    n = max(int(n_rows), 1)
    room = (2.0**62 / n - 1.0) / float(entry_bound)
    if not room > 0:
        raise ValueError("too many rows for exact int64 sums at this bound.")
    return math.floor(math.log2(room)) - 1  # one bit below, for the rounding of log2


# Entries ahead at which the scatter prefetches its target (measured at n = 10⁶,
# d = 2²⁰, 16 entries per row: 16 to 64 all gain about 15 %; one row is 16 entries).
_PREFETCH_AHEAD = 32


@njit(cache=True, nogil=True)
def _csr_fixed_sum_rows(indptr, indices, data, row_start, row_stop, l2_bound, l1_bound,
                        scale, out):
    """Add rows ``row_start:row_stop`` into ``out``; returns False if a stored entry
    is NaN or infinite (``out`` is then meaningless), True otherwise."""
    stop = np.uint64(indptr[row_stop])
    check = 0.0  # x·0 is 0 for finite x and NaN otherwise: one add per entry, no branch
    for i in range(row_start, row_stop):
        c = bounding_scale_nb(data, indptr[i], indptr[i + 1], l2_bound, l1_bound) * scale
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            # The scatter's read-modify-write misses the cache for d beyond the L2;
            # fetching the target a few entries ahead overlaps the misses.
            ahead = k + np.uint64(_PREFETCH_AHEAD)
            if ahead < stop:
                prefetch_nb(out, np.uint64(indices[ahead]))
            x = np.float64(data[k])
            check += x * 0.0
            out[np.uint64(indices[k])] += np.int64(np.rint(c * x))
    return check == 0.0


@njit(cache=True)
def _dense_fixed_sum(X, l2_bound, l1_bound, scale):
    out = np.zeros(X.shape[1], dtype=np.int64)
    for i in range(X.shape[0]):
        c = bounding_scale_nb(X[i], 0, X.shape[1], l2_bound, l1_bound) * scale
        for j in range(X.shape[1]):
            out[j] += np.int64(np.rint(c * np.float64(X[i, j])))
    return out


@njit(cache=True, nogil=True)
def fixed_sum_to_mean(sums, frac_bits, n_rows):
    """(S·2^-F)/n in float64, element by element: ``np.ldexp(S.astype(float), -F) / n``
    in one pass, bit for bit (S converted with one rounding, the power of two exact
    for |S| ≥ 1 as F ≤ 62, then one rounded division)."""
    out = np.empty(sums.shape[0], dtype=np.float64)
    unit = 2.0 ** -np.float64(frac_bits)
    n = np.float64(n_rows)
    for j in range(sums.shape[0]):
        out[j] = (np.float64(sums[j]) * unit) / n
    return out


def bounded_fixed_sum(X_parts, n_cols, l2_bound, l1_bound, frac_bits, n_threads=None):
    """Column sums of the bounded rows, each entry rounded to 2^-F, as int64.

    Parameters
    ----------
    X_parts : ndarray of shape (n, d), or CSR parts (indptr, indices, data)
    n_cols : int
    l2_bound, l1_bound : float
        Finite bounds; the entries of a scaled row are at most ``l2_bound``.
    frac_bits : int
        F from :func:`fixed_point_bits`.
    n_threads : int, optional
        Threads for CSR input (row ranges; the int64 partial sums add exactly, so the
        result is the same for every thread count). Default:
        :func:`.sparse_rows.free_threads` (the free cores, or
        ``SKDPSPARSE_NUM_THREADS``).

    Returns
    -------
    ndarray of int64
        S with S·2^-F the exact sum of the rounded entries.

    Raises
    ------
    ValueError
        CSR input with a NaN or infinite stored entry (checked in the same pass, so
        a caller may skip its own finiteness pass; dense input is not checked).

    Notes
    -----
    The scale factor and the entry are multiplied in float64 and rounded once to the
    nearest integer multiple of 2^-F (multiplying by 2^F is exact); a rounded entry is
    therefore within 2^-F·½ of the scaled entry, and |rounded| ≤ B·2^F + ½.
    """
    scale = math.ldexp(1.0, int(frac_bits))
    if not isinstance(X_parts, tuple):
        return _dense_fixed_sum(np.asarray(X_parts), float(l2_bound), float(l1_bound), scale)
    indptr, indices, data = X_parts
    n_rows = indptr.shape[0] - 1
    cuts = sparse_rows.row_ranges(
        indptr, sparse_rows.free_threads() if n_threads is None else n_threads)
    n_threads = len(cuts) - 1
    partials = [np.zeros(int(n_cols), dtype=np.int64) for _ in range(n_threads)]
    args = (float(l2_bound), float(l1_bound), scale)
    if n_threads == 1:
        finite = _csr_fixed_sum_rows(indptr, indices, data, 0, n_rows, *args, partials[0])
    else:
        with ThreadPoolExecutor(max_workers=n_threads) as pool:
            futures = [pool.submit(_csr_fixed_sum_rows, indptr, indices, data,
                                   int(cuts[t]), int(cuts[t + 1]), *args, partials[t])
                       for t in range(n_threads)]
            finite = all([future.result() for future in futures])
    if not finite:  # scikit-learn's messages, as when validation checks it
        raise ValueError("Input X contains NaN." if np.isnan(data).any() else
                         f"Input X contains infinity or a value too large for {data.dtype!r}.")
    out = partials[0]
    for part in partials[1:]:
        out += part  # integers: exact, in any order
    return out
