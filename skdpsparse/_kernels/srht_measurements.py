"""Measurements of the subsampled randomized Hadamard transform (SRHT) without a transform.

The sensing operator of :mod:`skdpsparse.mechanisms.sensing` is

.. math:: A = \\sqrt{d_{pad}/m}\\, P_\\Omega H D \\quad(\\text{first } d \\text{ columns}),

with :math:`H` the orthonormal Walsh–Hadamard matrix of size :math:`d_{pad} = 2^p`
(Sylvester order, :math:`H_{jk} = (-1)^{\\langle j, k\\rangle}/\\sqrt{d_{pad}}` where
:math:`\\langle j, k\\rangle = \\operatorname{popcount}(j \\,\\&\\, k)`), :math:`D` a
diagonal of random signs and :math:`\\Omega` a set of :math:`m` rows. Entry
:math:`(j, k)` of :math:`A` is :math:`D_k (-1)^{\\langle \\omega_j, k\\rangle}/\\sqrt m`.

What lives here, all on plain arrays and without randomness:

* :func:`csr_clipped_measurement_sum` / :func:`dense_clipped_measurement_sum` —
  :math:`\\sum_i \\operatorname{clip}_c(A z_i)` over the rows of a matrix, the
  sensitivity-bounding step of Gaussian ℓ1-recovery.
* :func:`sparse_measure` — :math:`A z` for a sparse :math:`z`.

The transform itself is in :mod:`skdpsparse._kernels.fwht`.

How a row of :math:`A z` is computed without a transform
--------------------------------------------------------
For the nonzeros :math:`(k_t, v_t)_{t<g}` of a row, :math:`(Az)_j = \\sum_t v_t D_{k_t}
(-1)^{\\langle \\omega_j, k_t\\rangle}/\\sqrt m` depends on :math:`\\omega_j` only through
the parity vector :math:`\\pi(\\omega_j) = (\\langle \\omega_j, k_t\\rangle \\bmod 2)_t
\\in \\mathbb{F}_2^g`, and :math:`\\pi` is linear over :math:`\\mathbb{F}_2`. So with
:math:`\\omega` split into three bit fields, :math:`\\pi(\\omega) = T_0[\\omega_{(0)}]
\\oplus T_1[\\omega_{(1)}] \\oplus T_2[\\omega_{(2)}]` for three small lookup tables, and
:math:`(Az)_j = F[\\pi(\\omega_j)]` for a table :math:`F` of the :math:`2^g` signed sums.
Both are built by doubling in :math:`O(2^g + 3 \\cdot 2^{\\lceil p/3\\rceil})` per group of
:math:`g \\le 12` nonzeros, after which each measurement costs three table look-ups, two
XORs and one more look-up, independently of :math:`g` — instead of :math:`g` popcounts.
"""

import math

import numpy as np
from numba import njit, prange

from ._common import use_threads as _parallel

__all__ = [
    "csr_clipped_measurement_sum",
    "dense_clipped_measurement_sum",
    "sparse_measure",
    "field_bits",
    "GROUP_BITS",
]

#: Largest group of nonzeros handled by one value table (2^12 float64 = 32 KiB).
GROUP_BITS = 12
#: Rows per accumulator chunk of the parallel measurement sums. Fixed (not the thread
#: count) so that the floating-point summation order, hence the result, does not
#: depend on the machine.
_ROWS_PER_CHUNK = 256
_MAX_CHUNKS = 16


def field_bits(d_pad):
    """Width of each of the three bit fields :math:`\\omega` is split into.

    ``ceil(log2(d_pad) / 3)``, at least 1; at most 11, so ``d_pad <= 2**33``.
    """
    p = max(int(d_pad) - 1, 1).bit_length()
    c = max(1, -(-p // 3))
    if c > 11:
        raise ValueError(f"d_pad = {d_pad} is above the supported 2**33.")
    return c


@njit(cache=True)
def _group_tables(idx, vals, lo, g, row_scale, signs, m_scale, cbits, T, F, v):
    """Fill the parity tables ``T`` (3 × 2^cbits) and value table ``F`` (2^g) for the
    nonzeros ``idx[lo:lo+g]``, ``vals[lo:lo+g]``."""
    total = 0.0
    for t in range(g):
        k = idx[lo + t]
        vt = float(vals[lo + t]) * row_scale * m_scale * float(signs[k])
        v[t] = vt
        total += vt
    # F[u] = sum_t v_t (-1)^{u_t}, by doubling over the bits of u.
    F[0] = total
    for t in range(g):
        step = 1 << t
        two_v = 2.0 * v[t]
        for u in range(step, 2 * step):
            F[u] = F[u - step] - two_v
    # T[q, a] = parity vector of the field value a placed at field q, against all k_t.
    for q in range(3):
        T[q, 0] = 0
        for bit in range(cbits):
            shift = q * cbits + bit
            row = 0
            for t in range(g):
                row |= ((np.int64(idx[lo + t]) >> shift) & 1) << t
            step = 1 << bit
            for a in range(step, 2 * step):
                T[q, a] = T[q, a - step] ^ row


@njit(cache=True)
def _measure_nonzeros(idx, vals, lo, hi, row_scale, signs, omega, m_scale, cbits,
                      y, T, F, v, accumulate):
    """``y (+)= A z`` for the sparse z with nonzeros ``idx[lo:hi]``, ``vals[lo:hi]``
    (values multiplied by ``row_scale``). Returns ``‖y‖²`` after the update. An empty
    range returns 0.0 and leaves ``y`` untouched when ``accumulate``, else zeroes it."""
    m = omega.shape[0]
    mask = (1 << cbits) - 1
    s1 = cbits
    s2 = 2 * cbits
    T0 = T[0]
    T1 = T[1]
    T2 = T[2]
    first = not accumulate
    ss = 0.0
    p = lo
    while p < hi:
        g = min(GROUP_BITS, hi - p)
        _group_tables(idx, vals, p, g, row_scale, signs, m_scale, cbits, T, F, v)
        last = p + g >= hi
        if first and last:
            # The common case of a row with at most 12 nonzeros: one sweep, which
            # also accumulates the squared norm.
            for j in range(m):
                w = omega[j]
                val = F[T0[w & mask] ^ T1[(w >> s1) & mask] ^ T2[w >> s2]]
                y[j] = val
                ss += val * val
        elif first:
            for j in range(m):
                w = omega[j]
                y[j] = F[T0[w & mask] ^ T1[(w >> s1) & mask] ^ T2[w >> s2]]
        elif last:
            for j in range(m):
                w = omega[j]
                val = y[j] + F[T0[w & mask] ^ T1[(w >> s1) & mask] ^ T2[w >> s2]]
                y[j] = val
                ss += val * val
        else:
            for j in range(m):
                w = omega[j]
                y[j] += F[T0[w & mask] ^ T1[(w >> s1) & mask] ^ T2[w >> s2]]
        first = False
        p += g
    if first and not accumulate:
        for j in range(m):
            y[j] = 0.0
        return 0.0
    return ss


@njit(cache=True)
def _clip_and_add(y, ss, clip, out):
    """``out += y * min(1, clip/‖y‖)`` given ``ss = ‖y‖²``; returns 1 if the scaling
    bound, else 0.

    If ``ss`` overflowed, the norm is recomputed with scaling; a ``y`` that itself
    overflowed contributes nothing (a bounded, data-independent fallback, never a
    NaN in the sum).
    """
    m = y.shape[0]
    nrm = math.sqrt(ss)
    if not nrm < math.inf:
        amax = 0.0
        for j in range(m):
            a = abs(y[j])
            if not a <= amax:
                amax = a
        if not amax < math.inf:
            return 1
        ss = 0.0
        for j in range(m):
            a = y[j] / amax
            ss += a * a
        nrm = amax * math.sqrt(ss)
    if nrm > clip:
        sc = clip / nrm
        for j in range(m):
            out[j] += sc * y[j]
        return 1
    for j in range(m):
        out[j] += y[j]
    return 0


def _n_chunks(n_rows):
    return int(min(_MAX_CHUNKS, max(1, -(-n_rows // _ROWS_PER_CHUNK))))


@njit(cache=True)
def _csr_chunk(indptr, indices, data, row_scales, signs, omega, m_scale, clip, cbits,
               r0, r1, out):
    """Clipped measurements of CSR rows ``r0 .. r1-1`` added into ``out``."""
    m = omega.shape[0]
    y = np.empty(m)
    T = np.zeros((3, 1 << cbits), dtype=np.uint16)
    F = np.empty(1 << GROUP_BITS)
    v = np.empty(GROUP_BITS)
    cnt = 0
    for i in range(r0, r1):
        lo = indptr[i]
        hi = indptr[i + 1]
        sc = float(row_scales[i])
        if hi <= lo or sc == 0.0:
            continue
        ss = _measure_nonzeros(indices, data, lo, hi, sc, signs, omega, m_scale, cbits,
                               y, T, F, v, False)
        cnt += _clip_and_add(y, ss, clip, out)
    return cnt


@njit(cache=True)
def _dense_chunk(X, row_scales, signs, omega, m_scale, clip, cbits, r0, r1, out):
    """Clipped measurements of dense rows ``r0 .. r1-1`` (nonzeros only) into ``out``."""
    d = X.shape[1]
    m = omega.shape[0]
    y = np.empty(m)
    T = np.zeros((3, 1 << cbits), dtype=np.uint16)
    F = np.empty(1 << GROUP_BITS)
    v = np.empty(GROUP_BITS)
    idx = np.empty(d, dtype=np.int64)
    vals = np.empty(d)
    cnt = 0
    for i in range(r0, r1):
        sc = float(row_scales[i])
        if sc == 0.0:
            continue
        nnz = 0
        for k in range(d):
            xk = float(X[i, k])
            if xk != 0.0:
                idx[nnz] = k
                vals[nnz] = xk
                nnz += 1
        if nnz == 0:
            continue
        ss = _measure_nonzeros(idx, vals, 0, nnz, sc, signs, omega, m_scale, cbits,
                               y, T, F, v, False)
        cnt += _clip_and_add(y, ss, clip, out)
    return cnt


@njit(cache=True, parallel=True)
def _csr_sum_par(indptr, indices, data, row_scales, signs, omega, m_scale, clip, cbits,
                 acc, counts):
    n = indptr.shape[0] - 1
    nchunks = acc.shape[0]
    for c in prange(nchunks):
        counts[c] = _csr_chunk(indptr, indices, data, row_scales, signs, omega, m_scale,
                               clip, cbits, (n * c) // nchunks, (n * (c + 1)) // nchunks,
                               acc[c])


@njit(cache=True)
def _csr_sum_ser(indptr, indices, data, row_scales, signs, omega, m_scale, clip, cbits,
                 acc, counts):
    n = indptr.shape[0] - 1
    nchunks = acc.shape[0]
    for c in range(nchunks):
        counts[c] = _csr_chunk(indptr, indices, data, row_scales, signs, omega, m_scale,
                               clip, cbits, (n * c) // nchunks, (n * (c + 1)) // nchunks,
                               acc[c])


@njit(cache=True, parallel=True)
def _dense_sum_par(X, row_scales, signs, omega, m_scale, clip, cbits, acc, counts):
    n = X.shape[0]
    nchunks = acc.shape[0]
    for c in prange(nchunks):
        counts[c] = _dense_chunk(X, row_scales, signs, omega, m_scale, clip, cbits,
                                 (n * c) // nchunks, (n * (c + 1)) // nchunks, acc[c])


@njit(cache=True)
def _dense_sum_ser(X, row_scales, signs, omega, m_scale, clip, cbits, acc, counts):
    n = X.shape[0]
    nchunks = acc.shape[0]
    for c in range(nchunks):
        counts[c] = _dense_chunk(X, row_scales, signs, omega, m_scale, clip, cbits,
                                 (n * c) // nchunks, (n * (c + 1)) // nchunks, acc[c])


@njit(cache=True)
def _sum_rows(acc):
    """Sum of the rows of ``acc`` in row order (fixed order: reproducible)."""
    nchunks, m = acc.shape
    total = np.zeros(m)
    for c in range(nchunks):
        for j in range(m):
            total[j] += acc[c, j]
    return total


def _d_pad_of(signs, omega):
    d_pad = signs.shape[0]
    if d_pad < 1 or d_pad & (d_pad - 1):
        raise ValueError(f"len(signs) must be a power of two (d_pad), got {d_pad}.")
    _check_range(omega, d_pad, "omega")
    return d_pad


def _check_range(a, upper, name):
    # Out-of-range indices would read outside the tables: refuse them up front.
    if len(a) and (int(a.min()) < 0 or int(a.max()) >= upper):
        raise ValueError(f"{name} must lie in [0, {upper}).")


def csr_clipped_measurement_sum(indptr, indices, data, row_scales, signs, omega,
                                m_scale, clip):
    """:math:`\\sum_i \\operatorname{clip}_{c}(A\\, s_i z_i)` over the rows of a CSR matrix.

    Row :math:`i` (entries ``data[indptr[i]:indptr[i+1]]`` at columns
    ``indices[...]``) is first multiplied by ``row_scales[i]`` (the contribution
    bound), its measurement vector :math:`y_i = A (s_i z_i)` is computed entry by entry
    (no transform: :math:`O(m)` per group of up to 12 nonzeros, see the module notes),
    scaled to ℓ2 norm at most ``clip`` and added to the sum. Whatever ``A`` is, one
    row therefore moves the sum by at most ``2 * clip`` in ℓ2 norm.

    Parameters
    ----------
    indptr, indices : ndarray of int32 or int64
        CSR structure; columns must lie in ``[0, len(signs))``. Duplicates add up
        (CSR semantics); order within a row does not matter.
    data : ndarray of float32 or float64
    row_scales : ndarray of shape (n,), float
    signs : ndarray of shape (d_pad,), ±1 (any numeric dtype; int8 is the cheapest)
        The diagonal ``D``; ``d_pad`` a power of two, at most 2**33.
    omega : ndarray of shape (m,), int
        The selected Hadamard rows, each in ``[0, d_pad)``.
    m_scale : float
        Magnitude of every entry of ``A`` (``1/sqrt(m)`` for the SRHT of the module
        notes).
    clip : float
        ℓ2 bound of each row's measurement vector (``inf``: no clipping).

    Returns
    -------
    total : ndarray of shape (m,), float64
    n_clipped : int
        Rows whose measurement norm exceeded ``clip``. Data-dependent: for
        diagnostics only, never to be released.

    Notes
    -----
    Rows are split into at most 16 fixed chunks (a function of ``n`` only) summed
    in parallel into their own accumulators and then added in chunk order, so the
    result is the same for any number of threads.
    """
    d_pad = _d_pad_of(signs, omega)
    _check_range(indices, d_pad, "indices")
    cbits = field_bits(d_pad)
    n = len(indptr) - 1
    m = len(omega)
    acc = np.zeros((_n_chunks(n), m))
    counts = np.zeros(acc.shape[0], dtype=np.int64)
    driver = _csr_sum_par if _parallel(len(data) * m // GROUP_BITS + n * m) else _csr_sum_ser
    driver(indptr, indices, data, np.asarray(row_scales, dtype=np.float64), signs, omega,
           float(m_scale), float(clip), cbits, acc, counts)
    return _sum_rows(acc), int(counts.sum())


def dense_clipped_measurement_sum(X, row_scales, signs, omega, m_scale, clip):
    """:func:`csr_clipped_measurement_sum` for the rows of a dense 2-D array.

    Each row is scanned for its nonzeros, then treated as a sparse row; zeros cost
    one comparison each. ``X`` must have at most ``len(signs)`` columns.
    """
    d_pad = _d_pad_of(signs, omega)
    if X.shape[1] > d_pad:
        raise ValueError(f"X has {X.shape[1]} columns, more than len(signs) = {d_pad}.")
    cbits = field_bits(d_pad)
    n, d = X.shape
    m = len(omega)
    acc = np.zeros((_n_chunks(n), m))
    counts = np.zeros(acc.shape[0], dtype=np.int64)
    driver = _dense_sum_par if _parallel(n * (d + m)) else _dense_sum_ser
    driver(X, np.asarray(row_scales, dtype=np.float64), signs, omega, float(m_scale),
           float(clip), cbits, acc, counts)
    return _sum_rows(acc), int(counts.sum())


@njit(cache=True)
def _sparse_part(idx, vals, signs, omega, m_scale, cbits, nparts, c, out):
    nnz = idx.shape[0]
    ngroups = -(-nnz // GROUP_BITS)
    lo = min(nnz, ((ngroups * c) // nparts) * GROUP_BITS)
    hi = min(nnz, ((ngroups * (c + 1)) // nparts) * GROUP_BITS)
    T = np.zeros((3, 1 << cbits), dtype=np.uint16)
    F = np.empty(1 << GROUP_BITS)
    v = np.empty(GROUP_BITS)
    _measure_nonzeros(idx, vals, lo, hi, 1.0, signs, omega, m_scale, cbits, out, T, F, v,
                      True)


@njit(cache=True, parallel=True)
def _sparse_measure_par(idx, vals, signs, omega, m_scale, cbits, acc):
    nparts = acc.shape[0]
    for c in prange(nparts):
        _sparse_part(idx, vals, signs, omega, m_scale, cbits, nparts, c, acc[c])


@njit(cache=True)
def _sparse_measure_ser(idx, vals, signs, omega, m_scale, cbits, acc):
    nparts = acc.shape[0]
    for c in range(nparts):
        _sparse_part(idx, vals, signs, omega, m_scale, cbits, nparts, c, acc[c])


def sparse_measure(idx, vals, signs, omega, m_scale, out=None):
    """:math:`A z` for a sparse :math:`z` given by its nonzeros (``idx``, ``vals``).

    Costs about ``len(omega) * ceil(len(idx) / 12)`` table look-ups (module notes);
    cheaper than a transform of length ``len(signs)`` while ``len(idx)`` is small.
    Deterministic (the split into parallel parts depends on ``len(idx)`` only).

    Returns
    -------
    out : ndarray of shape (m,), float64
    """
    d_pad = _d_pad_of(signs, omega)
    _check_range(idx, d_pad, "idx")
    cbits = field_bits(d_pad)
    m = omega.shape[0]
    if out is None:
        out = np.empty(m)
    ngroups = -(-len(idx) // GROUP_BITS)
    nparts = int(min(_MAX_CHUNKS, max(1, ngroups // 8)))
    acc = np.zeros((nparts, m))
    par = nparts > 1 and _parallel(ngroups * m)
    (_sparse_measure_par if par else _sparse_measure_ser)(
        idx, vals, signs, omega, float(m_scale), cbits, acc)
    out[:] = _sum_rows(acc)
    return out
