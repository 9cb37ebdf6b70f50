"""Fast exact discrete Laplace and discrete Gaussian noise: table inversion whose
floating-point decisions are certified, with an exact fallback.

The law of every draw is exactly the discrete Laplace P(y) ∝ exp(−|y|/N) or the
discrete Gaussian P(y) ∝ exp(−y²/(2N²)) on ℤ (2 ≤ N ≤ 2⁵⁰), as with the Bernoulli
factories of Canonne, Kamath and Steinke (2020), "The Discrete Gaussian for
Differential Privacy", NeurIPS, Section 5 (:mod:`.exact_sampling`), but about three
times faster, because each decision reads one 32-bit word and compares it with a
precomputed threshold instead of running a factory bit by bit. The derivation is in
``doc/derivations/exact_sampling.rst`` ("Fast path"); in short:

* The algorithm (the *ideal* one, :mod:`.grid_noise_exact`) is defined on real
  numbers: the magnitude |Y| of a discrete Laplace draw is geometric, so with B = 2^b
  and K = 1024 it splits into three independent parts, |Y| = (H·K + L)·B + R, where
  H is geometric with ratio λ = exp(−KB/N), L in [0, K) has P(L ≥ l) ∝ exp(−lB/N) − λ,
  and R in [0, B) has P(R = r) ∝ exp(−r/N). H and L are found by inversion (a
  uniform V against the thresholds), R by a uniform proposal accepted with
  probability exp(−R/N) ≥ exp(−1/K); the discrete Gaussian is the rejection of
  Canonne, Kamath and Steinke (2020), Algorithm 3 with t = N. Every comparison
  "V < T" reads V's bits 32 at a time, as many words as it takes to decide.
* The kernel here takes the same decisions from the first word, in floating point:
  every threshold is computed with an absolute error below 2⁻⁴⁴ (the error analysis
  is in the derivation; :func:`_exp_neg` evaluates exp(−z) from correctly rounded
  tables and a Taylor polynomial, not from the platform's ``exp``), so a decision
  whose cell lies farther than ``MARGIN = 2⁻⁴⁰`` from the threshold is the ideal
  algorithm's decision on the same bits. Any other case (a threshold within the
  margin of a cell end, a cell narrower than 2⁻³⁶, a magnitude beyond 2⁶²) stops the
  draw, and :func:`fill_noise` makes it with the exact algorithm of
  :mod:`.grid_noise_exact` from the same bits, then resumes the kernel. Measured, that
  is 10⁻¹⁰ to 10⁻⁷ of the draws at most scales; at rare scales where a table
  threshold lies within the margin of a shallow dyadic point (λ within 10⁻¹⁶ of 1/2,
  say) it is up to 40 % of them: still exact, only much slower.

So the output is a function of the key bits alone, identical whatever the margin and
identical to the exact algorithm's (the tests compare them draw for draw, with a
margin large enough to leave most decisions to the fallback), and its law is exact.
The running time depends on the random bits only, never directly on the data; but
like every rejection sampler's (the Bernoulli factories' more so) it is correlated with
the noise drawn, so an adversary who times a fit precisely learns a little about the
noise. The library does not defend against such timing measurements.
"""

import math
from decimal import ROUND_HALF_EVEN, Context, Decimal

import numba
import numpy as np

from ._common import threads_are_fork_safe
from .chacha import LANES, chacha20_blocks
from .exact_sampling import _WORDS, _bits, _new_reader

__all__ = ["BUCKETS", "GROUP", "MARGIN", "fill_noise", "noise_tables"]

BUCKETS = 1024  # K: the inversion table's size (8 KB: stays in the L1 cache)
_LOG_BUCKETS = 10
MARGIN = 2.0 ** -40  # the certified decisions' margin: 16× the largest error bound
GROUP = 4  # V's bits are read 4 at a time, until its cell decides the comparison
_GROUP_CELL = 2.0 ** -GROUP
_H_BITS = 8  # H's first read: its small thresholds crowd the lowest 4-bit cells
_LAST_CELL = 2.0 ** -36  # deeper cells are within 2 margins: the chunk aborts
_NO_GUIDE = np.zeros(0, np.int64)
_H_FLOOR = 2.0 ** -20  # the last threshold of H's table: then H restarts (memoryless)
_SATURATED = 1 << 62
_RELEASE_BOUND = 1 << 61
_Z_MAX = 36.0  # exp(−36) < 2^-51: returned as 0


def _rounded_exponentials(step, count):
    """exp(−i·step) for i < count, each correctly rounded to binary64 (50 exact digits
    from ``decimal``, whose ``exp`` is correctly rounded, then one rounding)."""
    ctx = Context(prec=50, rounding=ROUND_HALF_EVEN, Emin=-999, Emax=999, capitals=1,
                  clamp=0, flags=[], traps=[])  # nothing from the caller's decimal setup
    return np.array([float(ctx.exp(ctx.multiply(Decimal(-i), step))) for i in range(count)])


# exp(−z) = E_WHOLE[i] · E_SIXTY_FOURTH[k] · exp(−s) for z = i + k/64 + s.
_E_WHOLE = _rounded_exponentials(Decimal(1), int(_Z_MAX) + 1)
_E_SIXTY_FOURTH = _rounded_exponentials(Decimal("0.015625"), 64)


@numba.njit(cache=True, _nrt=False, inline="always")
def _exp_neg(z):
    """exp(−z) for z ≥ 0 with absolute error below 2⁻⁴⁹ (derivation: "Fast path").

    z = j/64 + s with j = ⌊64 z⌋: z − j/64 is exact (Sterbenz), the two table factors
    are correctly rounded and exp(−s), 0 ≤ s < 1/64, is its Taylor polynomial of degree
    6 (remainder below s⁷/7! < 2⁻⁵⁴).
    """
    if z >= _Z_MAX:
        return 0.0
    j = int(z * 64.0)
    t = -(z - j * 0.015625)
    p = 1.0 + t * (1.0 + t * (0.5 + t * (1.0 / 6.0 + t * (
        1.0 / 24.0 + t * (1.0 / 120.0 + t * (1.0 / 720.0))))))
    return _E_WHOLE[j >> 6] * _E_SIXTY_FOURTH[j & 63] * p


@numba.njit(cache=True)
def noise_tables(n):
    """The public tables of scale ``n``: (b, k, lower, guide, upper).

    K = 2^k buckets, K = min(1024, 2^⌊log2 n⌋), and B = 2^b with b = ⌊log2(n/K)⌋, so
    that the ratio K·B/n of H's law lies in (1/2, 1] and no threshold is tiny.
    ``lower[j]`` ≈ P(L ≥ j + 1) for j = 0..K−2; ``guide[g]`` the number of j with
    lower[j] > (g + 1)/K (a lower bound on the count for a V whose top k bits are g:
    the search starts there); ``upper[h − 1]`` ≈ λ^h for h = 1..h_max, the last one the
    first below 2⁻²⁰.
    """
    k = 0
    while k < _LOG_BUCKETS and (np.int64(2) << k) <= n:
        k += 1
    buckets = np.int64(1) << k
    b = 0
    q = n >> k
    while q > 1:  # b = ⌊log2(n / K)⌋, so that 1/2 < K·2^b/n ≤ 1
        q >>= 1
        b += 1
    big_b = np.int64(1) << b
    rate = float(buckets * big_b) / float(n)  # K·B/N, exact numerator
    lam = _exp_neg(rate)
    lower = np.empty(buckets - 1)
    for j in range(buckets - 1):
        lower[j] = (_exp_neg(float((j + 1) * big_b) / float(n)) - lam) / (1.0 - lam)
    guide = np.empty(buckets, np.int64)
    j = 0
    for g in range(buckets - 1, -1, -1):  # cells from the top: counts grow downwards
        edge = (g + 1) / buckets
        while j < buckets - 1 and lower[j] > edge:
            j += 1
        guide[g] = j
    h_max = 1
    while _exp_neg(h_max * rate) >= _H_FLOOR:
        h_max += 1
    upper = np.empty(h_max)
    for h in range(1, h_max + 1):
        upper[h - 1] = _exp_neg(h * rate)
    return b, k, lower, guide, upper


@numba.njit(cache=True, _nrt=False, inline="always")
def _inside(t, a, width, margin):
    """Whether a threshold 0 < t < 1 computed as ``t`` (error below the margin) is
    certainly inside the cell (a, a + width). The ends 0 and 1 need no margin: the
    thresholds are never 0 or 1 (a tiny probability computed as 0 is still positive)."""
    return ((a == 0.0 or a + margin < t)
            and (a + width == 1.0 or t < a + width - margin))


@numba.njit(cache=True, _nrt=False, inline="always")
def _below(io, r, p, margin):
    """The event V < p for a fresh uniform V whose bits are read ``GROUP`` at a time
    until its cell lies on one side of p: 1 true, 0 false, −1 undecided (abort)."""
    w, r = _bits(io, r, GROUP)
    return _below_from(io, r, w, p, margin)


@numba.njit(cache=True, _nrt=False, inline="always")
def _below_from(io, r, w, p, margin):
    """:func:`_below` once V's first ``GROUP`` bits ``w`` have been read."""
    width = _GROUP_CELL
    while True:
        a = w * width  # exact: w < 2^MAX_LEVEL
        if a + width <= p - margin:
            return 1, r
        if a >= p + margin:
            return 0, r
        if width <= _LAST_CELL or not _inside(p, a, width, margin):
            return -1, r  # p within the margin of the cell's ends, or too deep
        more, r = _bits(io, r, GROUP)  # p is inside the cell: read on
        w = (w << GROUP) | more
        width *= _GROUP_CELL


@numba.njit(cache=True, _nrt=False, inline="always")
def _count_above(io, r, th, first, guide, log_k, margin):
    """#{j : th[j] > V} for decreasing thresholds ``th`` and a fresh uniform V read
    ``first`` bits, then ``GROUP`` at a time while a threshold lies inside its cell;
    −1 if undecided (abort). ``guide`` (or an empty array) indexes the top ``log_k``
    bits."""
    m = th.size
    w, r = _bits(io, r, first)
    width = 1.0 / (np.int64(1) << first)
    start = 0
    if guide.size:
        start = guide[w >> (first - log_k)]
    while True:
        a = w * width
        c = start
        while c < m and th[c] > a:
            c += 1
        if c < m and th[c] > a - margin:
            return -1, r  # the next threshold below the cell is within the margin
        if c == 0 or th[c - 1] >= a + width + margin:
            return c, r
        if width <= _LAST_CELL or not _inside(th[c - 1], a, width, margin):
            return -1, r
        more, r = _bits(io, r, GROUP)  # a threshold is inside the cell: read on
        w = (w << GROUP) | more
        width *= _GROUP_CELL


@numba.njit(cache=True, _nrt=False, inline="always")
def _geometric_part(io, r, upper, margin):
    """H = #{h : λ^h > V}, restarting (memorylessly) past the table; −1 if undecided."""
    total = 0
    while True:
        h, r = _count_above(io, r, upper, _H_BITS, _NO_GUIDE, 0, margin)
        if h < upper.size:
            return (total + h if h >= 0 else -1), r
        total += h
        if total > 1 << 40:
            return -1, r


@numba.njit(cache=True, _nrt=False, inline="always")
def _remainder_part(io, r, n, b, margin):
    """R in [0, 2^b) with P(R = r) ∝ exp(−r/N): a uniform R accepted with probability
    exp(−R/N) (nothing more read when R = 0); −1 if undecided."""
    while True:
        if b > 32:
            hi, r = _bits(io, r, b - 32)
            low, r = _bits(io, r, 32)
            rem = (hi << 32) | low
        elif b > 0:
            rem, r = _bits(io, r, b)
        else:
            rem = 0
        if rem == 0:
            return 0, r
        # V < exp(−x), x = R/N ≤ 2^-k: the first cell of V decides against the cheap
        # lower bound 1 − x ≤ exp(−x) in 15 cases of 16 (the same decision, on the same
        # bits, as against exp(−x) itself); otherwise the comparison goes on as usual.
        x = float(rem) / float(n)
        w, r = _bits(io, r, GROUP)
        if (w + 1) * _GROUP_CELL <= (1.0 - x) - margin:
            return rem, r
        decision, r = _below_from(io, r, w, _exp_neg(x), margin)
        if decision == 1:
            return rem, r
        if decision == -1:
            return -1, r


@numba.njit(cache=True, _nrt=False, inline="always")
def _draw(io, r, gaussian, n, b, log_k, lower, guide, upper, margin):
    """One draw, or (0, False) when a decision is undecided (the chunk aborts)."""
    big_b = np.int64(1) << b
    while True:
        h, r = _geometric_part(io, r, upper, margin)
        if h < 0:
            return 0, False, r
        bucket, r = _count_above(io, r, lower, log_k + 4, guide, log_k, margin)
        if bucket < 0:
            return 0, False, r
        rem, r = _remainder_part(io, r, n, b, margin)
        if rem < 0:
            return 0, False, r
        sign, r = _bits(io, r, 1)
        if sign == 1 and h == 0 and bucket == 0 and rem == 0:
            continue  # zero would otherwise be counted twice
        j = (h << log_k) + bucket
        if j > (_SATURATED - rem) // big_b:
            return 0, False, r  # |y| ≥ 2^62: the exact fallback works with Python ints
        y = j * big_b + rem
        if gaussian and y != n:
            # Accept with probability exp(−(|y| − N)²/(2N²)) (CKS 2020, Algorithm 3, t = N).
            d = abs(y - n)
            w, r = _bits(io, r, GROUP)
            if d > 9 * n:  # exp(−x²/2) < exp(−40): p = 0 is within 2^-57
                decision, r = _below_from(io, r, w, 0.0, margin)
            else:
                x = float(d) / float(n)
                z = 0.5 * x * x
                # 1 − z ≤ exp(−z) ≤ 1/(1 + z): the first cell often decides against
                # these bounds (the same decision, on the same bits, as against exp(−z)).
                if (w + 1) * _GROUP_CELL <= (1.0 - z) - margin:
                    decision = 1
                elif w * _GROUP_CELL >= 1.0 / (1.0 + z) + margin:
                    decision = 0
                else:
                    decision, r = _below_from(io, r, w, _exp_neg(z), margin)
            if decision == -1:
                return 0, False, r
            if decision == 0:
                continue
        return (-y if sign == 1 else y), True, r


@numba.njit(cache=True)
def _reader_at(key, c, domain, offset):
    """The bit reader of stream (c, domain) positioned after its first ``offset`` bits."""
    io, r = _new_reader(key, c, domain)
    word = offset >> 5
    first_block = (word // _WORDS) * LANES
    chacha20_blocks(key, first_block, io[4], io[5], io[6], io[2], io[3], io[1])
    pos = word % _WORDS
    pool, pool_bits = np.int64(0), np.int64(0)
    within = offset & 31
    if within:
        pool_bits = np.int64(32 - within)
        pool = np.int64(io[1][pos]) & ((np.int64(1) << pool_bits) - 1)
        pos += 1
    return io, (pool, pool_bits, np.int64(pos), np.int64(first_block + LANES))


@numba.njit(cache=True, _nrt=False, inline="always")
def _offset(r):
    """How many bits the reader has delivered (see exact_sampling's reader)."""
    pool, pool_bits, pos, counter = r
    return ((counter - LANES) * 16 + pos) * 32 - pool_bits


@numba.njit(cache=True, _nrt=False)
def _draw_range(io, r, values, start, stop, add, gaussian, n, b, log_k, lower, guide,
                upper, margin, state, c):
    # The hot loop runs without reference counting and with every helper inlined (as
    # in exact_sampling: refcount updates on the arrays cost more than a draw).
    for i in range(start, stop):
        before = r
        y, ok, r = _draw(io, r, gaussian, n, b, log_k, lower, guide, upper, margin)
        if not ok:  # draw i is left to the exact algorithm, from the bits it started at
            state[c, 0] = i
            state[c, 1] = _offset(before)
            return
        if add:  # |values| ≤ 2^60, |y| < 2^62: no overflow; the clamp is post-processing
            values[i] = min(max(values[i] + y, -_RELEASE_BOUND), _RELEASE_BOUND)
        else:
            values[i] = y
    state[c, 0] = -1


@numba.njit(cache=True)
def _fill_chunk(values, add, gaussian, n, b, log_k, lower, guide, upper, key, domain, chunk,
                c, margin, state):
    """Chunk ``c`` from draw ``state[c, 0]`` and bit ``state[c, 1]`` of stream
    (c, domain). Leaves in ``state[c]`` the draw at which it stopped undecided and that
    draw's first bit, or −1."""
    io, r = _reader_at(key, c, domain, state[c, 1])
    stop = min(values.size, (c + 1) * chunk)
    _draw_range(io, r, values, state[c, 0], stop, add, gaussian, n, b, log_k, lower, guide,
                upper, margin, state, c)


# Two functions, not one compiled twice (see exact_sampling: numba's cache does not key
# on ``parallel=``, which once ran the threaded build in forked workers).
@numba.njit(cache=True, parallel=True)
def _fill_parallel(values, add, gaussian, n, b, log_k, lower, guide, upper, key, domain,
                   chunk, margin, state):
    for c in numba.prange(state.shape[0]):
        _fill_chunk(values, add, gaussian, n, b, log_k, lower, guide, upper, key, domain,
                    chunk, c, margin, state)


@numba.njit(cache=True)
def _fill_serial(values, add, gaussian, n, b, log_k, lower, guide, upper, key, domain,
                 chunk, margin, state):
    for c in range(state.shape[0]):
        if state[c, 0] >= 0:
            _fill_chunk(values, add, gaussian, n, b, log_k, lower, guide, upper, key,
                        domain, chunk, c, margin, state)


def fill_noise(values, add, gaussian, n, key, domain, chunk, *, margin=MARGIN):
    """Fill (or add to, clamped at ±2⁶¹) the int64 array ``values`` with exact noise.

    Entry i belongs to chunk c = i // ``chunk``, whose draws read stream
    (c, ``domain``) of ChaCha20 key ``key`` in order. A draw the kernel leaves
    undecided is made by the exact algorithm (:mod:`.grid_noise_exact`) from the same
    bits, and the chunk resumes after it, so the result depends neither on ``margin``
    (tests raise it to exercise the fallback) nor on the thread count.

    Returns
    -------
    int : the number of draws made by the exact algorithm.
    """
    if not MARGIN <= margin < 0.25:
        raise ValueError(f"margin must be in [2^-40, 1/4), got {margin}.")
    n, chunk = int(n), int(chunk)
    b, log_k, lower, guide, upper = noise_tables(n)
    state = np.zeros((math.ceil(values.size / chunk), 2), np.int64)
    state[:, 0] = np.arange(state.shape[0]) * chunk  # each chunk's first draw, at bit 0
    args = (values, bool(add), bool(gaussian), n, int(b), int(log_k), lower, guide, upper,
            key, int(domain), chunk, float(margin), state)
    threaded = values.size > chunk and threads_are_fork_safe()
    (_fill_parallel if threaded else _fill_serial)(*args)
    exact = 0
    while (state[:, 0] >= 0).any():
        from .grid_noise_exact import exact_draw

        for c in np.flatnonzero(state[:, 0] >= 0):
            i, offset = int(state[c, 0]), int(state[c, 1])
            y, state[c, 1] = exact_draw(gaussian, n, int(b), int(log_k), upper.size, key,
                                        int(c), int(domain), offset)
            y = min(max(y, -_SATURATED), _SATURATED)
            values[i] = (min(max(int(values[i]) + y, -_RELEASE_BOUND), _RELEASE_BOUND)
                         if add else y)
            state[c, 0] = i + 1 if i + 1 < min(values.size, (c + 1) * chunk) else -1
            exact += 1
        _fill_serial(*args)
    return exact
