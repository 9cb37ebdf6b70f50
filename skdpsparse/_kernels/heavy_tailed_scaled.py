"""The heavy-tailed mean kernels (Kamath, Liu and Zhang 2022) on rows scaled by per-row
factors, in shuffled groups.

Two needs of the heavy-tailed estimators that the plain kernels of
:mod:`skdpsparse._kernels.heavy_tailed` do not meet without copying the data:

* **Per-example gradients of a linear model** are ``g_i = l'(x_i . w + b, y_i) x_i``,
  a row of ``X`` scaled by one number. The kernels here read ``scale[i] * X[i, j]``
  on the fly, so a gradient step of the SCO regressor never forms the ``n x d``
  gradient matrix (nor a CSR copy of it).
* **Shuffled groups.** The median of means assumes exchangeable rows; data sorted by
  time or label would give biased group means. Instead of permuting ``X`` (a full
  copy), row ``i`` goes to group ``groups[i]``, where ``groups`` is a permutation of
  :func:`consecutive_groups`: the group *sizes* are those of the consecutive split,
  which is all the sensitivity and the median (``_median_of_group_means``) use.

Same conventions as the plain kernels (float64 accumulation, implicit CSR zeros
clipped like explicit ones, the clipping interval's float ends rounded inwards so that
its width is at most ``6 tau``); no randomness and no privacy decisions here. A
non-finite *input* (an entry of ``X`` or a factor) makes its column NaN, but a
product ``scale[i] * X[i, j]`` that overflows to ±inf from finite inputs is a huge
value like any other and is clipped (cwme) or saturates (noise smoothing): a
per-example gradient can be that large.
"""

import numpy as np
from numba import njit

from .bit_reader import _bits, _new_reader
from .heavy_tailed import (
    _HUGE,
    _check_c,
    _check_center,
    _check_csr,
    _check_dense,
    _check_positive_tau,
    _check_tau,
    _clip,
    _constants,
    _interval,
    _median_of_group_means,
    _psi,
    effective_n_groups,
    group_bounds,
)

__all__ = [
    "consecutive_groups",
    "random_groups",
    "check_groups",
    "cwme_scaled_dense",
    "cwme_scaled_csr",
    "noise_smoothing_scaled_dense",
    "noise_smoothing_scaled_csr",
]


def consecutive_groups(n_rows, n_groups):
    """Group label of every row in the consecutive split of the plain kernels.

    Returns an int64 array of length ``n_rows`` holding ``g`` for the rows
    ``start_g <= i < start_{g+1}`` (:func:`~skdpsparse._kernels.heavy_tailed.group_bounds`).
    Any permutation of it is a valid ``groups`` argument.
    """
    bounds = group_bounds(n_rows, n_groups)
    return np.repeat(np.arange(bounds.shape[0] - 1, dtype=np.int64), np.diff(bounds))


# ------------------------------------------------------------------ secret labelling
# The shuffled groups' labels: a uniformly random arrangement of the consecutive
# labels, i.e. each of the n!/prod_g s_g! assignments of rows to groups with sizes s_g
# equally likely. Fisher-Yates (Durstenfeld 1964, "Algorithm 235: Random
# permutation", CACM 7(7)) on the labels themselves, each index j uniform on
# {0, ..., i} drawn from one 32-bit ChaCha20 keystream word by Lemire's multiply and
# reject (Lemire 2019, "Fast random integer generation in an interval", ACM TOMACS
# 29(1), Algorithm 5): j = floor(x s / 2^32) for x uniform on [0, 2^32), rejecting the
# 2^32 mod s words whose low part (x s mod 2^32) is below 2^32 mod s, which leaves
# exactly floor(2^32 / s) words for every j (exact; tests/kernels check the map for
# every s on 8-bit words). Against the bit-length rejection of
# exact_sampling.permutation (the same law, other bits) it reads one word per step
# with a branch almost never taken, and the labels are one byte each when m <= 256
# (the swaps stay in cache): 0.55x its time at n = 2e5 and 1e6 (process time, loaded
# 2-core machine).
_WORD_BITS = 32
_LEMIRE_MAX = np.int64(1) << 31  # s x < 2^63 for x < 2^32: int64 products


@njit(cache=True, _nrt=False, inline="always")
def _lemire_accepts(x, s, bits):
    # Lemire's test for a word x uniform on [0, 2^bits) and 1 <= s <= 2^(bits - 1):
    # returns (accepted, floor(x s / 2^bits)). The threshold 2^bits mod s is computed
    # only when the low part is below s (probability s / 2^bits), as in the paper.
    word = np.int64(1) << bits
    prod = x * s
    low = prod & (word - 1)
    if low < s and low < (word - s) % s:
        return False, np.int64(0)
    return True, prod >> bits


@njit(cache=True, _nrt=False)
def _shuffle_labels(io, r, labels, lemire_max):
    # lemire_max is _LEMIRE_MAX (a parameter so that the tests reach the other branch).
    i = labels.shape[0] - 1
    while i >= 1:
        s = np.int64(i) + 1
        if s > lemire_max:  # over 2^31 rows: 62-bit words, plain rejection (exact)
            limit = (np.int64(1) << 62) - (np.int64(1) << 62) % s
            while True:
                hi, r = _bits(io, r, 30)
                lo, r = _bits(io, r, 32)
                j = (hi << 32) | lo
                if j < limit:
                    j %= s
                    break
        else:
            while True:
                x, r = _bits(io, r, _WORD_BITS)
                ok, j = _lemire_accepts(x, s, _WORD_BITS)
                if ok:
                    break
        t = labels[i]
        labels[i] = labels[j]
        labels[j] = t
        i -= 1


@njit(cache=True)
def _random_labels_nb(sizes, key, domain, labels, lemire_max):
    i = 0
    for g in range(sizes.shape[0]):
        for _ in range(sizes[g]):
            labels[i] = g
            i += 1
    io, r = _new_reader(key, 0, domain)
    _shuffle_labels(io, r, labels, lemire_max)
    return labels


def random_groups(n_rows, n_groups, key, domain=0):
    """Secret group labels: a uniformly random arrangement of :func:`consecutive_groups`.

    Every assignment of the rows to the ``m = effective_n_groups`` groups with the
    consecutive split's sizes is equally likely (probability ``prod_g s_g! / n!``): a
    Fisher–Yates shuffle of the labels with exact uniform indices from the ChaCha20
    keystream of ``(key, domain)`` (Lemire's multiply and reject; see the notes
    above). The law is that of ``exact_sampling.shuffled(consecutive_groups(...))``;
    the bits differ.

    Parameters
    ----------
    n_rows, n_groups : int
    key : ndarray of 8 int64
        A ChaCha20 key (:func:`~skdpsparse._kernels.chacha.key_words`), secret.
    domain : int, default=0
        Stream separation for several draws from one key.

    Returns
    -------
    ndarray of shape (n_rows,)
        uint8 labels when ``m <= 256`` (one byte per row), int64 otherwise.
    """
    m = effective_n_groups(n_rows, n_groups)
    labels = np.empty(int(n_rows), dtype=np.uint8 if m <= 256 else np.int64)
    sizes = np.diff(group_bounds(n_rows, m))
    return _random_labels_nb(sizes, np.asarray(key, dtype=np.int64), int(domain), labels,
                             _LEMIRE_MAX)


def _groups_shape(groups, n_rows):
    # The checks of check_groups that do not read the labels.
    groups = np.asarray(groups)
    if groups.shape != (n_rows,) or groups.dtype.kind not in "iu":
        raise ValueError(f"groups must be an integer array of shape ({n_rows},).")
    if groups.dtype == np.uint8:  # random_groups' labels: read as they are
        return np.ascontiguousarray(groups)
    return np.ascontiguousarray(groups, dtype=np.int64)


def check_groups(groups, n_rows, n_groups):
    """Validate ``groups``: int labels with the group sizes of the consecutive split.

    ``None`` gives :func:`consecutive_groups`. Anything else must be a length
    ``n_rows`` integer array whose label counts equal the consecutive sizes (sizes
    ``q + 1`` for the first ``r`` labels and ``q`` for the rest), or the median and
    the sensitivity would be computed for the wrong sizes.
    """
    m = effective_n_groups(n_rows, n_groups)
    if groups is None:
        return consecutive_groups(n_rows, m)
    groups = _groups_shape(groups, n_rows).astype(np.int64, copy=False)
    if groups.min() < 0 or groups.max() >= m:
        raise ValueError(_LABEL_RANGE.format(m=m))
    counts = np.bincount(groups, minlength=m)
    if not np.array_equal(counts, np.diff(group_bounds(n_rows, m))):
        raise ValueError(_GROUP_SIZES)
    return groups


_LABEL_RANGE = "group labels must lie in [0, {m})."
_GROUP_SIZES = ("groups must have the sizes of the consecutive split "
                "(a permutation of consecutive_groups(n_rows, n_groups)).")


def _check_scale(scale, n_rows):
    if scale is None:
        return np.ones(n_rows)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    if scale.shape != (n_rows,):
        raise ValueError(f"scale must have shape ({n_rows},), got {scale.shape}.")
    return scale


# -------------------------------------------------------------------- median of means
@njit(cache=True)
def _group_sums_rows(X, scale, groups, lo, hi, m):
    # sums[g, j] indexed in place: a row view sums[groups[i]] per row costs a
    # reference-count update of the array each time (measured: a third of the pass).
    n, d = X.shape
    sums = np.zeros((m, d))
    for i in range(n):
        g = groups[i]
        row = X[i]
        s = scale[i]
        for j in range(d):
            x = np.float64(row[j])
            # (x - x) * s is 0 for finite x and s, NaN otherwise (see the module notes).
            sums[g, j] += _clip(s * x, lo[j], hi[j]) + (x - x) * s
    return sums


@njit(cache=True)
def _group_sums_rows_unscaled(X, groups, lo, hi, m):
    # _group_sums_rows with every scale 1 (shuffled groups, no scale): s·x = x and
    # (x − x)·1 = x − x exactly, so the same sums without the multiplications. The
    # labels are checked here, in the same pass (check_groups reads them three more
    # times): returns the sums and the rows per label, or counts of -1 at the first
    # label outside [0, m), before it is used as an index.
    n, d = X.shape
    sums = np.zeros((m, d))
    counts = np.zeros(m, dtype=np.int64)
    for i in range(n):
        g = groups[i]
        if g < 0 or g >= m:
            counts[:] = -1
            return sums, counts
        counts[g] += 1
        row = X[i]
        for j in range(d):
            x = np.float64(row[j])
            sums[g, j] += _clip(x, lo[j], hi[j]) + (x - x)
    return sums, counts


@njit(cache=True)
def _group_sums_cols(XT, scale, groups, lo, hi, m):
    # F-contiguous X read column by column; a length-m buffer keeps the scatter local.
    d, n = XT.shape
    sums = np.zeros((m, d))
    buf = np.zeros(m)
    for j in range(d):
        col = XT[j]
        lj = lo[j]
        hj = hi[j]
        buf[:] = 0.0
        for i in range(n):
            x = np.float64(col[i])
            buf[groups[i]] += _clip(scale[i] * x, lj, hj) + (x - x) * scale[i]
        for g in range(m):
            sums[g, j] = buf[g]
    return sums


@njit(cache=True)
def _cwme_scaled_dense_nb(X, scale, groups, tau, m, center, f_order):
    lo, hi = _interval(center, tau)
    if f_order:
        sums = _group_sums_cols(X.T, scale, groups, lo, hi, m)
    else:
        sums = _group_sums_rows(X, scale, groups, lo, hi, m)
    return _median_of_group_means(sums, X.shape[0])


@njit(cache=True)
def _cwme_grouped_dense_nb(X, groups, tau, m, center, sizes):
    """:func:`_cwme_scaled_dense_nb` of a C-ordered X with no scale, the labels checked
    in the pass: returns ``(median, 0)``, or ``(empty, 1)`` for a label outside
    ``[0, m)`` and ``(empty, 2)`` for group sizes other than ``sizes``."""
    lo, hi = _interval(center, tau)
    sums, counts = _group_sums_rows_unscaled(X, groups, lo, hi, m)
    for g in range(m):
        if counts[g] < 0:
            return np.empty(0), 1
        if counts[g] != sizes[g]:
            return np.empty(0), 2
    return _median_of_group_means(sums, X.shape[0]), 0


@njit(cache=True)
def _cwme_scaled_csr_nb(indptr, indices, data, n_rows, n_cols, scale, groups, tau, m,
                        center):
    lo, hi = _interval(center, tau)
    clip0 = np.empty(n_cols)
    any_nonzero = False
    for j in range(n_cols):
        clip0[j] = _clip(0.0, lo[j], hi[j])
        if clip0[j] != 0.0:
            any_nonzero = True
    sums = np.zeros((m, n_cols))
    if any_nonzero:
        counts = np.zeros((m, n_cols), dtype=np.int64)
    else:
        counts = np.zeros((1, 1), dtype=np.int64)
    for i in range(n_rows):
        g = groups[i]
        acc = sums[g]
        s = scale[i]
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            j = indices[k]
            x = np.float64(data[k])
            acc[j] += _clip(s * x, lo[j], hi[j]) + (x - x) * s
            if any_nonzero:
                counts[g, j] += 1
    if any_nonzero:
        q = n_rows // m
        r = n_rows - q * m
        for g in range(m):
            size = q + 1 if g < r else q
            for j in range(n_cols):
                sums[g, j] += (size - counts[g, j]) * clip0[j]
    return _median_of_group_means(sums, n_rows)


def cwme_scaled_dense(X, tau, n_groups, center=None, scale=None, groups=None):
    """Coordinate-wise trimmed median of means of the rows ``scale[i] * X[i]``.

    Equals :func:`~skdpsparse._kernels.heavy_tailed.cwme_dense` of
    ``scale[:, None] * X`` with row ``i`` in group ``groups[i]`` (consecutive groups
    when None), without forming either.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64
    tau : float
        ``>= 0``; entries are clipped into ``[center_j - 3 tau, center_j + 3 tau]``.
    n_groups : int
        ``m >= 1``; ``min(m, n)`` groups are used.
    center : array-like of shape (d,) or float, default=None
    scale : array-like of shape (n,), default=None
        Per-row factors (ones when None).
    groups : array-like of int of shape (n,), default=None
        See :func:`check_groups`.

    Returns
    -------
    ndarray of shape (d,), float64
    """
    X = _check_dense(X)
    n, d = X.shape
    m = effective_n_groups(n, n_groups)
    tau = _check_tau(tau)
    center = _check_center(center, d)
    if not (X.flags.c_contiguous or X.flags.f_contiguous):
        X = np.ascontiguousarray(X)
    f_order = bool(X.flags.f_contiguous and not X.flags.c_contiguous)
    if scale is None and not f_order:
        # The estimator's shuffled groups: the labels are checked in the kernel's pass.
        groups = consecutive_groups(n, m) if groups is None else _groups_shape(groups, n)
        out, status = _cwme_grouped_dense_nb(X, groups, tau, m, center,
                                             np.diff(group_bounds(n, m)))
        if status:
            raise ValueError(_LABEL_RANGE.format(m=m) if status == 1 else _GROUP_SIZES)
        return out
    groups = check_groups(groups, n, m)
    scale = _check_scale(scale, n)
    return _cwme_scaled_dense_nb(X, scale, groups, tau, m, center, f_order)


def cwme_scaled_csr(indptr, indices, data, n_rows, n_cols, tau, n_groups, center=None,
                    scale=None, groups=None):
    """:func:`cwme_scaled_dense` of a canonical CSR matrix given by its parts.

    A scaled implicit zero is still zero and is clipped like one; ``O(m n_cols)``
    memory.
    """
    indptr, indices, data, n_rows, n_cols = _check_csr(indptr, indices, data, n_rows, n_cols)
    m = effective_n_groups(n_rows, n_groups)
    tau = _check_tau(tau)
    center = _check_center(center, n_cols)
    scale = _check_scale(scale, n_rows)
    groups = check_groups(groups, n_rows, m)
    return _cwme_scaled_csr_nb(indptr, indices, data, n_rows, n_cols, scale, groups, tau,
                               m, center)


# --------------------------------------------------------------------- noise smoothing


@njit(cache=True, inline="always")
def _psi_scaled(s_over_tau, x, c, sqrt_c, inv_sqrt_c, sup):
    # psi_c(s x / tau) with an overflowed argument saturating; NaN for non-finite x or s.
    a = _clip(s_over_tau * x, -_HUGE, _HUGE)
    return _psi(a, c, sqrt_c, inv_sqrt_c, sup) + (x - x) * s_over_tau


@njit(cache=True)
def _noise_smoothing_scaled_rows(X, scale, tau, c):
    n, d = X.shape
    sqrt_c, inv_sqrt_c, sup = _constants(c)
    sums = np.zeros(d)
    for i in range(n):
        row = X[i]
        s = scale[i] / tau
        for j in range(d):
            sums[j] += _psi_scaled(s, np.float64(row[j]), c, sqrt_c, inv_sqrt_c, sup)
    for j in range(d):
        sums[j] *= tau / n
    return sums


@njit(cache=True)
def _noise_smoothing_scaled_cols(XT, scale, tau, c):
    d, n = XT.shape
    sqrt_c, inv_sqrt_c, sup = _constants(c)
    sums = np.zeros(d)
    for j in range(d):
        col = XT[j]
        acc = 0.0
        for i in range(n):
            acc += _psi_scaled(scale[i] / tau, np.float64(col[i]), c, sqrt_c, inv_sqrt_c, sup)
        sums[j] = acc * (tau / n)
    return sums


@njit(cache=True)
def _noise_smoothing_scaled_csr_nb(indptr, indices, data, n_rows, n_cols, scale, tau, c):
    sqrt_c, inv_sqrt_c, sup = _constants(c)
    sums = np.zeros(n_cols)
    for i in range(n_rows):
        s = scale[i] / tau
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            sums[indices[k]] += _psi_scaled(s, np.float64(data[k]), c, sqrt_c, inv_sqrt_c,
                                            sup)
    for j in range(n_cols):
        sums[j] *= tau / n_rows
    return sums


def noise_smoothing_scaled_dense(X, tau, c, scale=None):
    """Noise-smoothing column means of the rows ``scale[i] * X[i]``:
    ``(tau/n) sum_i smoothed_phi(scale[i] X[i, j] / tau, c)``.

    Returns
    -------
    ndarray of shape (d,), float64
    """
    X = _check_dense(X)
    if X.shape[0] < 1:
        raise ValueError("need at least one row.")
    tau = _check_positive_tau(tau)
    c = _check_c(c)
    scale = _check_scale(scale, X.shape[0])
    if X.flags.c_contiguous:
        return _noise_smoothing_scaled_rows(X, scale, tau, c)
    if X.flags.f_contiguous:
        return _noise_smoothing_scaled_cols(X.T, scale, tau, c)
    return _noise_smoothing_scaled_rows(np.ascontiguousarray(X), scale, tau, c)


def noise_smoothing_scaled_csr(indptr, indices, data, n_rows, n_cols, tau, c, scale=None):
    """:func:`noise_smoothing_scaled_dense` of a canonical CSR matrix given by its parts
    (implicit zeros contribute 0)."""
    indptr, indices, data, n_rows, n_cols = _check_csr(indptr, indices, data, n_rows, n_cols)
    if n_rows < 1:
        raise ValueError("need at least one row.")
    tau = _check_positive_tau(tau)
    c = _check_c(c)
    scale = _check_scale(scale, n_rows)
    return _noise_smoothing_scaled_csr_nb(indptr, indices, data, n_rows, n_cols, scale,
                                          tau, c)
