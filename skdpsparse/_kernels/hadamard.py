"""Kernels of the subsampled randomized Hadamard transform (SRHT).

The sensing operator of :mod:`skdpsparse.mechanisms.sensing` is

.. math:: A = \\sqrt{d_{pad}/m}\\, P_\\Omega H D \\quad(\\text{first } d \\text{ columns}),

with :math:`H` the orthonormal Walsh–Hadamard matrix of size :math:`d_{pad} = 2^p`
(Sylvester order, :math:`H_{jk} = (-1)^{\\langle j, k\\rangle}/\\sqrt{d_{pad}}` where
:math:`\\langle j, k\\rangle = \\operatorname{popcount}(j \\,\\&\\, k)`), :math:`D` a
diagonal of random signs and :math:`\\Omega` a set of :math:`m` rows. Entry
:math:`(j, k)` of :math:`A` is :math:`D_k (-1)^{\\langle \\omega_j, k\\rangle}/\\sqrt m`.

What lives here, all on plain arrays and without randomness:

* :func:`fwht_inplace` — the orthonormal fast Walsh–Hadamard transform, cache-blocked
  (the low levels block by block inside the L2 cache, then all high levels in one
  more sweep over column strips), parallel over blocks.
* :func:`csr_clipped_measurement_sum` / :func:`dense_clipped_measurement_sum` —
  :math:`\\sum_i \\operatorname{clip}_c(A z_i)` over the rows of a matrix, the
  sensitivity-bounding step of Gaussian ℓ1-recovery.
* :func:`sparse_measure` — :math:`A z` for a sparse :math:`z` without a transform.
* :func:`prox_l1_pass` — the fused elementwise pass (soft-thresholding of a shifted
  adjoint, with the sums the solver needs) of the basis-pursuit solver in
  :mod:`skdpsparse.mechanisms.basis_pursuit`.

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
import threading

import numba
import numpy as np
from numba import njit, prange

__all__ = [
    "fwht_inplace",
    "fwht_scatter",
    "fwht_signed",
    "csr_clipped_measurement_sum",
    "dense_clipped_measurement_sum",
    "sparse_measure",
    "prox_l1_pass",
    "field_bits",
    "GROUP_BITS",
]

#: log2 of the FWHT block done entirely in cache (2^15 float64 = 256 KiB).
_LOW_LOG2 = 15
#: Bytes of one column strip of the high-level sweep (must sit in L2 with headroom).
_STRIP_BYTES = 1 << 19
#: Largest group of nonzeros handled by one value table (2^12 float64 = 32 KiB).
GROUP_BITS = 12
#: Rows per accumulator chunk of the parallel measurement sums. Fixed (not the thread
#: count) so that the floating-point summation order, hence the result, does not
#: depend on the machine.
_ROWS_PER_CHUNK = 256
_MAX_CHUNKS = 16
#: Below this many elementary steps the serial drivers are used.
_PARALLEL_MIN_WORK = 1 << 20


# --------------------------------------------------------------------------------------
# Fast Walsh–Hadamard transform
# --------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _radix4_butterfly(x0, x1, x2, x3, width):
    """Two WHT butterfly levels on four disjoint views of equal ``width``, in place."""
    for j in range(width):
        a0 = x0[j]
        a1 = x1[j]
        a2 = x2[j]
        a3 = x3[j]
        b0 = a0 + a1
        b1 = a0 - a1
        b2 = a2 + a3
        b3 = a2 - a3
        x0[j] = b0 + b2
        x1[j] = b1 + b3
        x2[j] = b0 - b2
        x3[j] = b1 - b3


@njit(cache=True)
def _fwht_block(x, start, n):
    """Unnormalized WHT of ``x[start:start+n]`` (n a power of two), all levels."""
    h = 1
    if n >= 8:
        for i in range(start, start + n, 8):
            a0 = x[i]
            a1 = x[i + 1]
            a2 = x[i + 2]
            a3 = x[i + 3]
            a4 = x[i + 4]
            a5 = x[i + 5]
            a6 = x[i + 6]
            a7 = x[i + 7]
            b0 = a0 + a1
            b1 = a0 - a1
            b2 = a2 + a3
            b3 = a2 - a3
            b4 = a4 + a5
            b5 = a4 - a5
            b6 = a6 + a7
            b7 = a6 - a7
            c0 = b0 + b2
            c1 = b1 + b3
            c2 = b0 - b2
            c3 = b1 - b3
            c4 = b4 + b6
            c5 = b5 + b7
            c6 = b4 - b6
            c7 = b5 - b7
            x[i] = c0 + c4
            x[i + 1] = c1 + c5
            x[i + 2] = c2 + c6
            x[i + 3] = c3 + c7
            x[i + 4] = c0 - c4
            x[i + 5] = c1 - c5
            x[i + 6] = c2 - c6
            x[i + 7] = c3 - c7
        h = 8
    # Radix-4 levels: two butterfly levels per sweep over the block. Slicing into
    # four views lets LLVM vectorize the inner loop (no aliasing between the views'
    # index ranges needs to be proven from the index arithmetic).
    while 4 * h <= n:
        for i in range(start, start + n, 4 * h):
            x0 = x[i:i + h]
            x1 = x[i + h:i + 2 * h]
            x2 = x[i + 2 * h:i + 3 * h]
            x3 = x[i + 3 * h:i + 4 * h]
            _radix4_butterfly(x0, x1, x2, x3, h)
        h *= 4
    if 2 * h <= n:
        for i in range(start, start + n, 2 * h):
            x0 = x[i:i + h]
            x1 = x[i + h:i + 2 * h]
            for j in range(h):
                a = x0[j]
                b = x1[j]
                x0[j] = a + b
                x1[j] = a - b


@njit(cache=True)
def _fwht_single(x, scale):
    """Whole transform when it fits one block (no parallel launch)."""
    n = x.shape[0]
    _fwht_block(x, 0, n)
    if scale != 1.0:
        for i in range(n):
            x[i] *= scale


@njit(cache=True)
def _low_block(x, b, block, mode, positions, values, z, signs):
    """Load block ``b`` (mode 0: as is; 1: zero, then ``x[positions] = values`` for
    the sorted positions inside the block; 2: ``z * signs``, zero beyond ``len(z)``)
    and run all levels below ``block`` on it, in cache."""
    lo = b * block
    hi = lo + block
    if mode == 1:
        for i in range(lo, hi):
            x[i] = 0.0
        npos = positions.shape[0]
        a = 0
        e = npos
        while a < e:  # first position >= lo
            mid = (a + e) // 2
            if positions[mid] < lo:
                a = mid + 1
            else:
                e = mid
        while a < npos and positions[a] < hi:
            x[positions[a]] = values[a]
            a += 1
    elif mode == 2:
        top = min(hi, z.shape[0])
        for i in range(lo, top):
            x[i] = z[i] * float(signs[i])
        for i in range(max(lo, top), hi):
            x[i] = 0.0
    _fwht_block(x, lo, block)


@njit(cache=True, parallel=True)
def _low_levels_par(x, block, mode, positions, values, z, signs):
    for b in prange(x.shape[0] // block):
        _low_block(x, b, block, mode, positions, values, z, signs)


@njit(cache=True)
def _low_levels_ser(x, block, mode, positions, values, z, signs):
    for b in range(x.shape[0] // block):
        _low_block(x, b, block, mode, positions, values, z, signs)


@njit(cache=True)
def _high_strip(x, block, width, c, scale):
    """Levels ``block .. n/2`` and the normalization on column strip ``c``.

    View ``x`` as R = n/block rows of length ``block``: the remaining levels are a
    WHT of length R down each column. A strip of ``width`` columns (R·width·8 bytes,
    in cache) goes through all of them before the next strip is touched, so all high
    levels cost one more sweep over memory.
    """
    rows = x.shape[0] // block
    c0 = c * width
    h = 1
    while 4 * h <= rows:
        for r in range(0, rows, 4 * h):
            for q in range(r, r + h):
                p0 = q * block + c0
                p1 = p0 + h * block
                p2 = p1 + h * block
                p3 = p2 + h * block
                x0 = x[p0:p0 + width]
                x1 = x[p1:p1 + width]
                x2 = x[p2:p2 + width]
                x3 = x[p3:p3 + width]
                _radix4_butterfly(x0, x1, x2, x3, width)
        h *= 4
    if 2 * h <= rows:
        # Last level fused with the scaling.
        for r in range(0, rows, 2 * h):
            for q in range(r, r + h):
                p0 = q * block + c0
                p1 = p0 + h * block
                x0 = x[p0:p0 + width]
                x1 = x[p1:p1 + width]
                for j in range(width):
                    a = x0[j]
                    b = x1[j]
                    x0[j] = (a + b) * scale
                    x1[j] = (a - b) * scale
    else:
        for r in range(rows):
            p0 = r * block + c0
            x0 = x[p0:p0 + width]
            for j in range(width):
                x0[j] *= scale


@njit(cache=True, parallel=True)
def _high_levels_par(x, block, width, scale):
    for c in prange(block // width):
        _high_strip(x, block, width, c, scale)


@njit(cache=True)
def _high_levels_ser(x, block, width, scale):
    for c in range(block // width):
        _high_strip(x, block, width, c, scale)


def _parallel(work):
    """Use the threaded drivers only for work worth a thread launch (on a busy
    machine a parallel region can wait milliseconds for a descheduled worker), and
    only from the main thread: numba's fallback "workqueue" threading layer aborts
    the process when two Python threads enter parallel regions at once."""
    return (work >= _PARALLEL_MIN_WORK and numba.get_num_threads() > 1
            and threading.current_thread() is threading.main_thread())


_NO_POS = np.empty(0, dtype=np.int64)
_NO_VAL = np.empty(0, dtype=np.float64)
_NO_SIGN = np.empty(0, dtype=np.int8)


def _check_fwht_input(x):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"x must be a numpy array, got {type(x).__name__}.")
    if x.dtype != np.float64 or x.ndim != 1:
        raise ValueError(f"x must be a 1-D float64 array, got {x.dtype} of shape {x.shape}.")
    if not x.flags.c_contiguous or not x.flags.writeable:
        raise ValueError("x must be C-contiguous and writeable (the transform is in place).")
    n = x.shape[0]
    if n < 1 or n & (n - 1):
        raise ValueError(f"the length of x must be a power of two, got {n}.")
    return n


def _fwht_blocked(x, log2_block=_LOW_LOG2, strip_bytes=_STRIP_BYTES, normalize=True,
                  load=None):
    """:func:`fwht_inplace` with explicit blocking (exposed for tests).

    ``load``: None (transform ``x`` in place), ``("scatter", positions, values)`` or
    ``("signed", z, signs)`` — the input vector is built inside the first sweep.
    """
    n = _check_fwht_input(x)
    scale = 1.0 / math.sqrt(n) if normalize else 1.0
    block = min(n, 1 << log2_block)
    if load is None:
        if block == n:
            _fwht_single(x, scale)
            return x
        args = (0, _NO_POS, _NO_VAL, _NO_VAL, _NO_SIGN)
    elif load[0] == "scatter":
        args = (1, load[1], load[2], _NO_VAL, _NO_SIGN)
    elif load[0] == "signed":
        args = (2, _NO_POS, _NO_VAL, load[1], load[2])
    else:
        raise ValueError(f"unknown load {load[0]!r}.")
    par = _parallel(n) and n > block
    (_low_levels_par if par else _low_levels_ser)(x, block, *args)
    if block == n:
        if scale != 1.0:
            x *= scale
        return x
    rows = n // block
    width = min(block, max(8, strip_bytes // (8 * rows)))
    (_high_levels_par if par else _high_levels_ser)(x, block, width, scale)
    return x


def fwht_inplace(x):
    """Orthonormal fast Walsh–Hadamard transform, in place.

    Computes :math:`x \\leftarrow H x` with :math:`H_{jk} = (-1)^{\\operatorname{popcount}
    (j \\& k)} / \\sqrt{n}` (Sylvester order, equal to
    ``scipy.linalg.hadamard(n) / sqrt(n)``). :math:`H` is symmetric and orthogonal, so
    the transform is its own inverse.

    Parameters
    ----------
    x : ndarray of shape (n,), float64, C-contiguous, writeable
        ``n`` a power of two.

    Returns
    -------
    x : ndarray
        The same array, transformed.

    Notes
    -----
    :math:`n \\log_2 n / 2` butterflies in two sweeps over memory: blocks of
    :math:`2^{15}` entries (256 KiB) go through all their levels in cache, then the
    remaining levels run down column strips that fit in L2. Parallel over blocks and
    strips; the result does not depend on the number of threads.
    """
    return _fwht_blocked(x)


def fwht_scatter(x, positions, values):
    """``x <- H e`` where ``e`` is zero except ``e[positions] = values``.

    Same result as ``x[:] = 0; x[positions] = values; fwht_inplace(x)`` with one
    sweep over memory fewer. ``positions`` must be sorted, distinct, in
    ``[0, len(x))``; used for :math:`H P_\\Omega^T y`.
    """
    positions = np.asarray(positions, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if positions.shape != values.shape or positions.ndim != 1:
        raise ValueError("positions and values must be 1-D of the same length.")
    if len(positions) > 1 and not (np.diff(positions) > 0).all():
        raise ValueError("positions must be sorted and distinct.")
    if len(positions) and (positions[0] < 0 or positions[-1] >= len(x)):
        raise ValueError("positions out of range.")
    return _fwht_blocked(x, load=("scatter", positions, values))


def fwht_signed(x, z, signs):
    """``x <- H pad(z * signs[:len(z)])`` (zero beyond ``len(z)``), one sweep fewer
    than building the padded vector first; used for :math:`H D z`."""
    z = np.asarray(z, dtype=np.float64)
    signs = np.asarray(signs, dtype=np.int8)
    if z.ndim != 1 or len(z) > len(x) or len(signs) < len(z):
        raise ValueError("need len(z) <= len(x) and len(signs) >= len(z).")
    return _fwht_blocked(x, load=("signed", z, signs))


# --------------------------------------------------------------------------------------
# Measurements without a transform
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# Basis pursuit: the fused elementwise pass of the dual evaluation
# --------------------------------------------------------------------------------------

@njit(cache=True)
def _prox_part(t, signs, coef, center, step, thr, out, lo, hi, stats_row, idx, vals,
               p):
    """Entries ``lo .. hi-1``; the support is also written to ``idx``/``vals`` from
    position ``p`` on, as far as they have room (pass empty arrays to skip)."""
    cap = min(idx.shape[0], vals.shape[0])
    l1 = 0.0
    x2 = 0.0
    dx2 = 0.0
    ainf = 0.0
    nnz = 0
    for i in range(lo, hi):
        a = coef * float(signs[i]) * t[i]
        aa = abs(a)
        if aa > ainf:
            ainf = aa
        xc = center[i]
        u = xc + step * a
        mag = abs(u) - thr
        xn = math.copysign(mag, u) if mag > 0.0 else 0.0
        out[i] = xn
        if xn != 0.0:
            if p < cap:
                idx[p] = i
                vals[p] = xn
            p += 1
            nnz += 1
            l1 += abs(xn)
            x2 += xn * xn
        dd = xn - xc
        dx2 += dd * dd
    stats_row[0] = l1
    stats_row[1] = x2
    stats_row[2] = dx2
    stats_row[3] = ainf
    stats_row[4] = nnz


@njit(cache=True, parallel=True)
def _prox_par(t, signs, coef, center, step, thr, out, stats):
    d = out.shape[0]
    nparts = stats.shape[0]
    no_idx = np.empty(0, dtype=np.int64)
    no_val = np.empty(0)
    for c in prange(nparts):
        _prox_part(t, signs, coef, center, step, thr, out, (d * c) // nparts,
                   (d * (c + 1)) // nparts, stats[c], no_idx, no_val, 0)


@njit(cache=True)
def _prox_ser(t, signs, coef, center, step, thr, out, stats, idx, vals):
    """Serial: the parts run in order, so the support is collected in the same pass."""
    d = out.shape[0]
    nparts = stats.shape[0]
    p = 0
    for c in range(nparts):
        _prox_part(t, signs, coef, center, step, thr, out, (d * c) // nparts,
                   (d * (c + 1)) // nparts, stats[c], idx, vals, p)
        p += int(stats[c, 4])


@njit(cache=True)
def _collect_part(x, lo, hi, p, idx, vals):
    for i in range(lo, hi):
        if x[i] != 0.0:
            idx[p] = i
            vals[p] = x[i]
            p += 1


@njit(cache=True, parallel=True)
def _collect_par(x, offsets, idx, vals):
    d = x.shape[0]
    nparts = offsets.shape[0] - 1
    for c in prange(nparts):
        _collect_part(x, (d * c) // nparts, (d * (c + 1)) // nparts, offsets[c], idx, vals)


def prox_l1_pass(t, signs, coef, center, step, thr, out, idx=None, vals=None, nparts=16):
    """One fused pass: ``out = soft(center + step * a, thr)`` with ``a = coef * signs * t``.

    ``a`` is :math:`A^T y` handed over in factored form (``t`` the unsigned transform
    of :meth:`~skdpsparse.mechanisms.sensing.SubsampledHadamardSensing.adjoint_transform`);
    only the first ``d = len(out)`` entries of ``t`` and ``signs`` are read.

    Parameters
    ----------
    t : ndarray of shape (>= d,), float64
    signs : ndarray of shape (>= d,), ±1
    coef, step, thr : float
    center : ndarray of shape (d,), float64
    out : ndarray of shape (d,), float64
        Receives the result; must not alias ``center``.
    idx, vals : ndarrays of int64 / float64, or None
        If given and large enough, receive the support of ``out`` (increasing) and
        its values.
    nparts : int
        Fixed split for the parallel partial sums (results do not depend on threads).

    Returns
    -------
    stats : dict
        ``l1`` = ‖out‖₁, ``x2`` = ‖out‖², ``dx2`` = ‖out − center‖²,
        ``a_inf`` = ‖a‖∞ (over the d entries), ``nnz``, ``collected``.
    """
    d = out.shape[0]
    if len(t) < d or len(signs) < d or center.shape != out.shape:
        raise ValueError("t and signs need at least len(out) entries, center len(out).")
    nparts = int(max(1, min(nparts, d)))
    stats = np.zeros((nparts, 5))
    want = idx is not None and vals is not None
    if not want:
        idx = np.empty(0, dtype=np.int64)
        vals = np.empty(0)
    par = _parallel(d)
    if par:
        _prox_par(t, signs, float(coef), center, float(step), float(thr), out, stats)
    else:
        _prox_ser(t, signs, float(coef), center, float(step), float(thr), out, stats,
                  idx, vals)
    counts = stats[:, 4].astype(np.int64)
    nnz = int(counts.sum())
    collected = want and nnz <= min(len(idx), len(vals))
    if collected and par:
        offsets = np.zeros(nparts + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        _collect_par(out, offsets, idx, vals)
    return {
        "l1": float(stats[:, 0].sum()),
        "x2": float(stats[:, 1].sum()),
        "dx2": float(stats[:, 2].sum()),
        "a_inf": float(stats[:, 3].max()),
        "nnz": nnz,
        "collected": collected,
    }
