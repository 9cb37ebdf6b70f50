"""The orthonormal fast Walsh–Hadamard transform (FWHT), cache-blocked and threaded.

:math:`H` is the orthonormal Walsh–Hadamard matrix of size :math:`2^p` in Sylvester
order, :math:`H_{jk} = (-1)^{\\langle j, k\\rangle}/\\sqrt{2^p}` with
:math:`\\langle j, k\\rangle = \\operatorname{popcount}(j \\,\\&\\, k)`.
:func:`fwht_inplace` does the low levels block by block inside the L2 cache, then all
high levels in one more sweep over column strips, in parallel over blocks;
:func:`fwht_scatter` and :func:`fwht_signed` fuse the scatter of a sparse vector or a
sign flip into the first pass. Used by the sensing operator of
:mod:`skdpsparse.mechanisms.sensing`.
"""

import math

import numpy as np
from numba import njit, prange

from ._common import use_threads as _parallel

__all__ = ["fwht_inplace", "fwht_scatter", "fwht_signed"]

#: log2 of the FWHT block done entirely in cache (2^15 float64 = 256 KiB).
_LOW_LOG2 = 15
#: Bytes of one column strip of the high-level sweep (must sit in L2 with headroom).
_STRIP_BYTES = 1 << 19


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
