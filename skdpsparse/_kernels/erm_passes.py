"""Compiled passes of the certified ERM solver (:mod:`skdpsparse._solvers.erm`) and the
loss sums of the sparse exponential mechanism's net.

Solver passes
-------------
:func:`loss_curvatures` gives the second derivatives ℓ'' of the losses at given margins
(the Hessian-vector products of the solver's Newton-CG steps); :func:`column_counts`
and :func:`max_abs_entry` give the stored entries per column and the largest entry of
a chunk of rows, which size the fixed-point grid of the exact sums.
:func:`csr_bounding_stats` and :func:`dense_bounding_stats` give, in one pass over
unbounded rows, the contribution-bounding factors and those two numbers of the rows
the factors bound, so that an in-memory fit reads the bounded rows without a copy
(the ``row_scales`` of the fixed-point kernels in
:mod:`~skdpsparse._kernels.linear_losses`).

Net loss sums
-------------
:func:`csc_net_loss_sums` scores every point of a net of sparse vectors
(:mod:`skdpsparse.mechanisms.sparse_exponential`): for every support and every value
vector on it, :math:`\\sum_i \\ell(\\langle \\theta, x_i\\rangle, y_i)`, touching only the
rows with a nonzero in the support.
"""

import math

import numpy as np
import scipy.sparse as sp
from numba import njit

from ._common import (
    bounding_scale_from_sums_nb,
    bounding_scale_nb,
)
from .linear_losses import (
    _MAGIC,
    _MAGIC_RANGE,
    HUBER,
    LOGISTIC,
    SMOOTHED_HINGE,
    SQUARED,
    _csr_scatter_checked,
    _grid_rounded,
    check_loss,
    fixed_loss_terms,
    loss_derivative,
    loss_value,
)

__all__ = ["column_counts", "csc_net_loss_sums", "csr_bounding_stats", "dense_bounding_stats",
           "loss_curvatures", "max_abs_entry", "corner_extremes", "scaled_gradient"]


@njit(cache=True)
def loss_curvatures(margins, y, code, param):
    """Second derivatives ℓ''(zᵢ, yᵢ) in the margin (labels ±1 for classification).

    Squared 1; logistic σ(t)σ(−t) with t = yz; smoothed hinge 1/h for 1 − h < t < 1,
    else 0; Huber 1 for |z − y| ≤ κ, else 0 (one-sided values at the kinks).
    """
    check_loss(code, param)
    out = np.empty(margins.shape[0])
    for i in range(margins.shape[0]):
        z = margins[i]
        yi = np.float64(y[i])
        if code == SQUARED:
            out[i] = 1.0
        elif code == LOGISTIC:
            e = math.exp(-abs(yi * z))
            out[i] = e / ((1.0 + e) * (1.0 + e))
        elif code == SMOOTHED_HINGE:
            t = yi * z
            out[i] = 1.0 / param if 1.0 - param < t < 1.0 else 0.0
        elif code == HUBER:
            out[i] = 1.0 if abs(z - yi) <= param else 0.0
        else:
            raise ValueError("loss_curvatures: no second derivative for this loss")
    return out


@njit(cache=True)
def corner_extremes(code, param, margin, label_bound):
    """(max |ℓ(z, y)|, max |ℓ'(z, y)|) over the corners z ∈ {−margin, margin},
    y ∈ {−B, B}, in the order (−m, −B), (−m, B), (m, −B), (m, B), each maximum
    taken as Python's ``max`` takes it (the first value, replaced by any later one
    greater than it), so the floats are those of the solver's Python loop over the
    corners, NaN included, in one call instead of eight."""
    loss_max = 0.0
    der_max = 0.0
    first = True
    for z in (-margin, margin):
        for y in (-label_bound, label_bound):
            v = abs(np.float64(loss_value(code, z, y, param)))
            g = abs(np.float64(loss_derivative(code, z, y, param)))
            if first:
                loss_max, der_max, first = v, g, False
            else:
                if v > loss_max:
                    loss_max = v
                if g > der_max:
                    der_max = g
    return loss_max, der_max


@njit(cache=True)
def scaled_gradient(g_w, g_b, bits, n, c, alpha, theta):
    """The gradient of the fixed-point sums: g̃ⱼ = fl(fl(ldexp(g_wⱼ, −F)/n) + fl(λθⱼ))
    and, when c > 0, g̃_b = fl(fl(c·fl(ldexp(g_b, −F)/n)) + fl(λθ_b)): entry by entry
    the float operations of the NumPy expression it replaces (int64 to float64
    correctly rounded, ldexp, a division, a product and a sum, each correctly
    rounded, no fused multiply-add), without its five temporaries."""
    d = g_w.shape[0]
    p = theta.shape[0]
    grad = np.empty(p)
    step = math.ldexp(1.0, -bits)
    if 0.0 < step < math.inf:
        # x·2^-F with 2^-F a float is the correctly rounded x·2^-F, as ldexp's result
        # (subnormal results included): one product instead of a call per entry.
        for j in range(d):
            grad[j] = (np.float64(g_w[j]) * step) / n + alpha * theta[j]
    else:
        for j in range(d):
            grad[j] = math.ldexp(np.float64(g_w[j]), -bits) / n + alpha * theta[j]
    if c > 0:
        grad[d] = c * (math.ldexp(np.float64(g_b), -bits) / n) + alpha * theta[d]
    return grad


@njit(cache=True)
def _index_counts(indices, d):
    out = np.zeros(d, dtype=np.int64)
    for k in range(indices.shape[0]):
        j = indices[k]
        if j < 0 or j >= d:
            raise ValueError("a CSR column index is out of range")
        out[j] += 1
    return out


def column_counts(X):
    """Entries per column that a pass reads: stored entries of a CSR matrix, nonzeros
    of a dense array (int64 of shape (d,))."""
    if sp.issparse(X):
        # np.bincount first converts int32 indices to intp: 3× the time of this loop.
        return _index_counts(X.indices, X.shape[1])
    X = np.asarray(X)
    if X.ndim == 2 and X.flags.c_contiguous:
        return _dense_nonzero_counts(X)
    return np.count_nonzero(X, axis=0).astype(np.int64)


@njit(cache=True)
def _max_abs_nb(values):
    m = 0.0
    for k in range(values.shape[0]):
        a = abs(np.float64(values[k]))
        if a > m or a != a:  # NaN propagates (a later entry never replaces it)
            m = a
    return m


def max_abs_entry(X):
    """max |x_ij| over the stored entries of a CSR matrix or a dense array (0.0 if
    empty; NaN if any entry is NaN), without a temporary copy."""
    if sp.issparse(X):
        return float(_max_abs_nb(X.data))
    X = np.asarray(X)
    flat = X.reshape(-1) if X.flags.c_contiguous else np.ravel(X, order="K")
    return float(_max_abs_nb(flat))


#: Clears the sign bit of a float64's pattern: |x| as int64 bits.
_ABS_BITS = np.int64(0x7FFFFFFFFFFFFFFF)


def csr_bounding_stats(indptr, indices, data, n_cols, l2_bound, l1_bound):
    """Bounding factors of the rows of a CSR matrix and two numbers of the bounded rows.

    Returns ``(scales, counts, entry_max)``: ``scales[i]`` =
    min(1, L2/‖xᵢ‖₂, L1/‖xᵢ‖₁) (``sparse_rows.csr_bounding_scales``, the same
    floats); ``counts`` the stored entries per column (:func:`column_counts`); and
    ``entry_max`` = max |fl(cᵢ·xᵢⱼ)| over the stored entries, i.e.
    :func:`max_abs_entry` of the matrix scaled by ``csr_scale_rows`` (NaN if an entry
    is NaN). One pass over the values, one over the column indices; no scaled copy.

    Each row's largest |xᵢⱼ| is taken in the norms' loop as the largest bit pattern
    (as in :func:`dense_bounding_stats`: for floats ≥ 0 the order of the patterns is
    the order of the values, a NaN lies above +inf), and the row's largest bounded
    entry is fl(cᵢ·maxⱼ|xᵢⱼ|): rounding is monotone, so for cᵢ ≥ 0 it equals
    maxⱼ fl(cᵢ·|xᵢⱼ|) (a NaN or cᵢ·∞ stays a NaN both ways). Measured 0.74× the
    entry-by-entry maximum with its NaN test (n = 2·10⁴, 32 nonzeros per row).
    Values of another dtype (float32) take that entry-by-entry pass
    (:func:`_csr_bounding_stats_entrywise`): the same results.
    """
    if isinstance(data, np.ndarray) and data.dtype == np.float64 and data.ndim == 1 \
            and data.flags.c_contiguous:
        return _csr_bounding_stats_bits(indptr, indices, data, data.view(np.int64),
                                        n_cols, l2_bound, l1_bound)
    return _csr_bounding_stats_entrywise(indptr, indices, data, n_cols, l2_bound,
                                         l1_bound)


@njit(cache=True, inline="always")
def _row_scale_and_top(values, bits, start, stop, l2_bound, l1_bound, both):
    """Row [start, stop)'s bounding factor c (:func:`bounding_scale_nb`'s, bit for
    bit) and the int64 bits of its largest |entry|, in one loop when both bounds are
    finite: bounding_scale_nb's loop (the same sums in the same order) and its end."""
    top = np.int64(0)  # the bits of +0.0
    if both:
        sumsq = 0.0
        l1 = 0.0
        for k in range(start, stop):
            a = values[k]
            sumsq += a * a
            l1 += abs(a)
            top = max(top, bits[k] & _ABS_BITS)
        c = bounding_scale_from_sums_nb(values, start, stop, sumsq, l1, l2_bound, l1_bound)
    else:
        c = bounding_scale_nb(values, start, stop, l2_bound, l1_bound)
        for k in range(start, stop):
            top = max(top, bits[k] & _ABS_BITS)
    return c, top


@njit(cache=True)
def _csr_bounding_stats_bits(indptr, indices, values, bits, n_cols, l2_bound, l1_bound):
    """:func:`csr_bounding_stats` of float64 ``values`` (``bits`` their int64 view)."""
    if not (l2_bound >= 0.0 and l1_bound >= 0.0):
        raise ValueError("l2_bound and l1_bound must be >= 0 (inf for no bound).")
    n = indptr.shape[0] - 1
    scales = np.empty(n, dtype=np.float64)
    counts = np.zeros(n_cols, dtype=np.int64)
    both = l2_bound < math.inf and l1_bound < math.inf
    cell = np.zeros(1, dtype=np.int64)
    cell_value = cell.view(np.float64)
    m = 0.0
    for i in range(n):
        start, stop = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
        c, top = _row_scale_and_top(values, bits, start, stop, l2_bound, l1_bound, both)
        scales[i] = c
        cell[0] = top
        a = abs(c * cell_value[0])
        if a > m or a != a:  # NaN propagates, as in _max_abs_nb
            m = a
    for k in range(np.uint64(indptr[0]), np.uint64(indptr[n])):
        j = indices[k]
        if j < 0 or j >= n_cols:
            raise ValueError("a CSR column index is out of range")
        counts[j] += 1
    return scales, counts, m


@njit(cache=True)
def csr_bounding_stats_zero_sums(indptr, indices, values, bits, n_cols, l2_bound,
                                 l1_bound, y, b, code, param, loss_scale, grad_scale,
                                 limit):
    """:func:`csr_bounding_stats` and, in the same pass, the fixed-point sums of
    ``linear_losses.csr_fixed_loss_gradient`` at w = 0 with these factors (the first
    evaluation of a fit): each row is read once for both, while it is in cache.

    At w = 0 every margin is b exactly when the row's scaled entries are finite and b
    is not −0 (``linear_losses._margins_are_b``); each row's terms are those of
    ``_losses_fixed`` (:func:`~.linear_losses.fixed_loss_terms`) and its scatter is
    bounded by its own largest scaled entry, which gives the integers of any other
    valid bound (the kernel's own argument). ``values`` float64, ``bits`` their int64
    view.

    Returns
    -------
    scales, counts, entry_max
        As :func:`csr_bounding_stats`.
    loss, grad, grad_b, ok
        As ``csr_fixed_loss_gradient`` (``ok`` False: a term beyond ``limit``).
    done : bool
        False when the sums were not computed (b = −0, or a row with a non-finite
        scaled entry): the caller evaluates with the kernel.
    """
    if not (l2_bound >= 0.0 and l1_bound >= 0.0):
        raise ValueError("l2_bound and l1_bound must be >= 0 (inf for no bound).")
    check_loss(code, param)
    n = indptr.shape[0] - 1
    scales = np.empty(n, dtype=np.float64)
    counts = np.zeros(n_cols, dtype=np.int64)
    grad = np.zeros(n_cols, dtype=np.int64)
    both = l2_bound < math.inf and l1_bound < math.inf
    cell = np.zeros(1, dtype=np.int64)
    cell_value = cell.view(np.float64)
    m = 0.0
    loss = np.int64(0)
    grad_b = np.int64(0)
    ok = True
    done = not (b == 0.0 and math.copysign(1.0, b) < 0.0)
    # The column indices are checked (and counted) before any is used as an address.
    for k in range(np.uint64(indptr[0]), np.uint64(indptr[n])):
        j = indices[k]
        if j < 0 or j >= n_cols:
            raise ValueError("a CSR column index is out of range")
        counts[j] += 1
    for i in range(n):
        start, stop = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
        c, top = _row_scale_and_top(values, bits, start, stop, l2_bound, l1_bound, both)
        scales[i] = c
        cell[0] = top
        a = abs(c * cell_value[0])
        if a > m or a != a:
            m = a
        if not a < math.inf:  # a non-finite scaled entry: the margin is not b
            done = False
        if not (done and ok):
            continue
        val, der = fixed_loss_terms(code, b, y[i], param)
        q, ok = _grid_rounded(val, loss_scale, limit)
        if not ok:
            continue
        loss += q
        q, ok = _grid_rounded(der, grad_scale, limit)
        if not ok:
            continue
        grad_b += q
        if der == 0.0:
            continue
        bound = abs(der * a) * grad_scale
        if bound < _MAGIC_RANGE and bound <= limit:
            ds = der * grad_scale
            if c == 1.0:
                for k in range(start, stop):
                    grad[np.uint64(indices[k])] += np.int64((ds * values[k] + _MAGIC) - _MAGIC)
            else:
                for k in range(start, stop):
                    grad[np.uint64(indices[k])] += np.int64(
                        (ds * (c * values[k]) + _MAGIC) - _MAGIC)
        elif not _csr_scatter_checked(indptr, indices, values, i, c, der, grad_scale,
                                      limit, grad):
            ok = False
    return scales, counts, m, loss, grad, grad_b, ok, done


@njit(cache=True)
def _csr_bounding_stats_entrywise(indptr, indices, data, n_cols, l2_bound, l1_bound):
    """:func:`csr_bounding_stats` for any float dtype: the maximum taken entry by entry,
    max |fl(cᵢ·xᵢⱼ)| with its NaN test."""
    if not (l2_bound >= 0.0 and l1_bound >= 0.0):
        raise ValueError("l2_bound and l1_bound must be >= 0 (inf for no bound).")
    n = indptr.shape[0] - 1
    scales = np.empty(n, dtype=np.float64)
    counts = np.zeros(n_cols, dtype=np.int64)
    m = 0.0
    for i in range(n):
        c = bounding_scale_nb(data, indptr[i], indptr[i + 1], l2_bound, l1_bound)
        scales[i] = c
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            j = indices[k]
            if j < 0 or j >= n_cols:
                raise ValueError("a CSR column index is out of range")
            counts[j] += 1
            a = abs(c * np.float64(data[k]))
            if a > m or a != a:  # NaN propagates, as in _max_abs_nb
                m = a
    return scales, counts, m


@njit(cache=True, inline="always")
def _finish_scale(X, i, sumsq, l1, l2_bound, l1_bound):
    """The end of ``_common.bounding_scale_nb`` (both bounds finite) for row i, from
    its sum of squares and ℓ1 norm summed in the same order."""
    x = X[i]
    return bounding_scale_from_sums_nb(x, 0, x.shape[0], sumsq, l1, l2_bound, l1_bound)


@njit(cache=True, inline="always")
def _dense_row_stats(X, i, c, counts, buf, top):
    """Add row i scaled by c to the nonzero counts; return the largest of ``top`` and
    the bits of its |entries|.

    The maximum is taken over the entries' bit patterns as int64: for floats ≥ 0 the
    order of the patterns is the order of the values, and a NaN (sign cleared by abs)
    lies above +inf, so the maximum is the largest |entry|, or a NaN if there is one,
    as ``_max_abs_nb``'s; an integer maximum vectorizes where a NaN-aware float
    comparison does not (measured 2× the pass)."""
    for j in range(X.shape[1]):
        a = abs(c * np.float64(X[i, j]))
        buf[j] = a
        counts[j] += a != 0.0
    bits = buf.view(np.int64)
    for j in range(bits.shape[0]):
        top = max(top, bits[j])
    return top


@njit(cache=True, inline="always")
def _bits_to_float(top):
    out = np.empty(1, dtype=np.int64)
    out[0] = top
    return out.view(np.float64)[0]


@njit(cache=True)
def dense_bounding_stats(X, l2_bound, l1_bound):
    """:func:`csr_bounding_stats` for a C-contiguous dense array: ``(scales, counts,
    entry_max)``, with ``counts`` the nonzeros per column of the *scaled* rows
    (fl(cᵢ·xᵢⱼ) ≠ 0), as :func:`column_counts` of the bounded copy.

    The norms of four rows are summed at once (four independent left-to-right sums,
    each row's the same floats as ``sparse_rows.dense_bounding_scales`` takes), so
    the additions' latency overlaps; the counts and the maximum are taken while the
    four rows are in cache.
    """
    if not (l2_bound >= 0.0 and l1_bound >= 0.0):
        raise ValueError("l2_bound and l1_bound must be >= 0 (inf for no bound).")
    n, d = X.shape
    scales = np.empty(n, dtype=np.float64)
    counts = np.zeros(d, dtype=np.int64)
    buf = np.empty(d, dtype=np.float64)
    top = np.int64(0)  # the bits of +0.0
    if not (l2_bound < math.inf and l1_bound < math.inf):
        for i in range(n):
            scales[i] = bounding_scale_nb(X[i], 0, d, l2_bound, l1_bound)
            top = _dense_row_stats(X, i, scales[i], counts, buf, top)
        return scales, counts, _bits_to_float(top)
    n4 = n - n % 4
    for i in range(0, n4, 4):
        q0 = 0.0
        q1 = 0.0
        q2 = 0.0
        q3 = 0.0
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        for j in range(d):
            x0 = np.float64(X[i, j])
            x1 = np.float64(X[i + 1, j])
            x2 = np.float64(X[i + 2, j])
            x3 = np.float64(X[i + 3, j])
            q0 += x0 * x0
            q1 += x1 * x1
            q2 += x2 * x2
            q3 += x3 * x3
            a0 += abs(x0)
            a1 += abs(x1)
            a2 += abs(x2)
            a3 += abs(x3)
        scales[i] = _finish_scale(X, i, q0, a0, l2_bound, l1_bound)
        scales[i + 1] = _finish_scale(X, i + 1, q1, a1, l2_bound, l1_bound)
        scales[i + 2] = _finish_scale(X, i + 2, q2, a2, l2_bound, l1_bound)
        scales[i + 3] = _finish_scale(X, i + 3, q3, a3, l2_bound, l1_bound)
        for r in range(i, i + 4):
            top = _dense_row_stats(X, r, scales[r], counts, buf, top)
    for i in range(n4, n):
        scales[i] = bounding_scale_nb(X[i], 0, d, l2_bound, l1_bound)
        top = _dense_row_stats(X, i, scales[i], counts, buf, top)
    return scales, counts, _bits_to_float(top)


@njit(cache=True)
def _dense_nonzero_counts(X):
    # np.count_nonzero(X, axis=0) reduces along the strided axis: 3× this row-wise loop.
    out = np.zeros(X.shape[1], dtype=np.int64)
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            out[j] += X[i, j] != 0
    return out


@njit(cache=True)
def csc_net_loss_sums(indptr, indices, data, n_rows, supports, values, y, code, param):
    """Σᵢ ℓ(⟨θ, xᵢ⟩, yᵢ) for every θ with support ``supports[a]`` and values ``values[v]``.

    Parameters
    ----------
    indptr, indices, data : CSC parts of X (n_rows × p)
    n_rows : int
    supports : ndarray of shape (n_supports, j), int64
        Column indices of each support (distinct within a row).
    values : ndarray of shape (n_values, j), float64
        Values of θ on the support, in the order of the support's columns.
    y : ndarray of shape (n_rows,)
    code, param : int, float
        Loss code and parameter.

    Returns
    -------
    ndarray of shape (n_supports, n_values), float64
        Entry (a, v): the summed loss of θ with θ[supports[a]] = values[v], 0 elsewhere.
    """
    check_loss(code, param)
    n_sup, j = supports.shape
    n_val = values.shape[0]
    base = 0.0  # Σᵢ ℓ(0, yᵢ): rows outside the support's columns keep margin 0
    zero_loss = np.empty(n_rows)
    for i in range(n_rows):
        zero_loss[i] = loss_value(code, 0.0, y[i], param)
        base += zero_loss[i]
    out = np.empty((n_sup, n_val))
    buf = np.zeros((n_rows, j))
    touched = np.zeros(n_rows, dtype=np.bool_)
    rows = np.empty(n_rows, dtype=np.int64)
    for a in range(n_sup):
        m = 0
        for t in range(j):
            col = supports[a, t]
            for k in range(indptr[col], indptr[col + 1]):
                i = indices[k]
                buf[i, t] = data[k]
                if not touched[i]:
                    touched[i] = True
                    rows[m] = i
                    m += 1
        for v in range(n_val):
            total = base
            for r in range(m):
                i = rows[r]
                z = 0.0
                for t in range(j):
                    z += buf[i, t] * values[v, t]
                total += loss_value(code, z, y[i], param) - zero_loss[i]
            out[a, v] = total
        for r in range(m):
            i = rows[r]
            touched[i] = False
            for t in range(j):
                buf[i, t] = 0.0
    return out
