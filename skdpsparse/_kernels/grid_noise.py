"""Fast exact discrete Laplace and discrete Gaussian noise: table inversion with exact
63-bit table words and certified floating-point decisions, with an exact fallback.

The law of every draw is exactly the discrete Laplace P(y) ∝ exp(−|y|/N) or the
discrete Gaussian P(y) ∝ exp(−y²/(2N²)) on ℤ (2 ≤ N ≤ 2⁵⁰), as with the Bernoulli
factories of Canonne, Kamath and Steinke (2020), "The Discrete Gaussian for
Differential Privacy", NeurIPS, Section 5 (:mod:`.exact_sampling`), but several times
faster, because each decision compares a few random bits with a precomputed threshold
instead of running a factory bit by bit. The derivation is in
``doc/derivations/exact_sampling.rst`` ("Fast noise"); in short:

* The algorithm (the *ideal* one, :mod:`.grid_noise_exact`) is defined on real
  numbers: the magnitude |Y| of a discrete Laplace draw is geometric, so with B = 2^b
  and K = 1024 it splits into three independent parts, |Y| = (H·K + L)·B + R, where
  H is geometric with ratio λ = exp(−KB/N), L in [0, K) has P(L ≥ l) ∝ exp(−lB/N) − λ,
  and R in [0, B) has P(R = r) ∝ exp(−r/N). H and L are found by inversion (a
  uniform V against the thresholds), R by a uniform proposal accepted with
  probability exp(−R/N) ≥ exp(−1/K); the discrete Gaussian is the rejection of
  Canonne, Kamath and Steinke (2020), Algorithm 3 with t = N. Every comparison
  "V < T" reads V's bits a group at a time, until V's cell no longer contains T.
* The kernel takes the same decisions on the same bits. The per-scale thresholds of
  H and L are held exactly, as the words ⌊2⁶³ T⌋ computed once per scale in interval
  arithmetic (:func:`.grid_noise_exact.threshold_words`): V's first 63 bits v decide
  V < T exactly unless v equals the word, and the bits the ideal algorithm reads
  follow from v ⊕ word (:func:`_read_depth`). The per-draw thresholds exp(−R/N) and
  exp(−(|y| − N)²/(2N²)) are computed in floating point with an absolute error below
  2⁻⁴⁴ (:func:`_exp_neg` evaluates exp(−z) from correctly rounded tables and a Taylor
  polynomial, not from the platform's ``exp``), so a decision whose cell lies farther
  than ``MARGIN = 2⁻⁴⁰`` from the threshold is the ideal algorithm's. Any other case
  (v equal to a word, a table read past 63 bits, a float threshold within the margin
  of a cell end, a cell narrower than 2⁻³⁶, a magnitude beyond 2⁶²) stops the draw,
  and :func:`fill_noise` makes it with the exact algorithm from the same bits, then
  resumes the kernel. Measured: about 10⁻⁷ of the draws or fewer at every scale
  (``benchmarks/bench_samplers.py --part 3`` sweeps 200 random scales). The float
  tables of an earlier kernel fell back on up to 40 % of the draws at rare scales,
  where a threshold lies next to a shallow dyadic point (λ within 10⁻¹⁶ of 1/2).

So the output is a function of the key bits alone, identical whatever the margin and
identical to the exact algorithm's (the tests compare them draw for draw, with a
margin and a read cap that leave many decisions to the fallback), and its law is
exact. The running time depends on the random bits only, never directly on the data;
but like every rejection sampler's (the Bernoulli factories' more so) it is correlated
with the noise drawn, so an adversary who times a fit precisely learns a little about
the noise. The library does not defend against such timing measurements.
"""

import math
from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import lru_cache

import numba
import numpy as np

from ._common import on_grid_nb, threads_are_fork_safe
from .chacha import LANES, chacha20_blocks
from .bit_reader import _WORDS, _bits, _new_reader
from .grid_noise_exact import threshold_words
from .sparse_rows import free_threads

__all__ = ["BUCKETS", "GROUP", "MARGIN", "fill_noise", "from_grid", "grid_factor",
           "max_abs_exceeds", "noise_tables", "to_grid"]

BUCKETS = 1024  # K: the inversion table's size (8 KB: stays in the L1 cache)
_LOG_BUCKETS = 10
MARGIN = 2.0 ** -40  # the certified decisions' margin: 16× the largest error bound
GROUP = 4  # V's bits are read 4 at a time, until its cell decides the comparison
_GROUP_CELL = 2.0 ** -GROUP
_H_BITS = 8  # H's first read: its small thresholds crowd the lowest 4-bit cells
_LAST_CELL = 2.0 ** -36  # deeper cells are within 2 margins: the chunk aborts
_H_PAD = 32  # H's table, padded: h_max ≤ 28 since λ^h < 2^-20 once h·KB/N > 20 ln 2
_MAX_DEPTH = 63  # a table comparison reads at most the 63 bits it compared
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


def _table_sizes(n):
    """(b, k): K = 2^k = min(1024, 2^⌊log2 n⌋) buckets and B = 2^b, b = ⌊log2(n/K)⌋,
    so that the ratio K·B/n of H's law lies in (1/2, 1] and no threshold is tiny."""
    k = min(_LOG_BUCKETS, n.bit_length() - 1)
    return (n >> k).bit_length() - 1, k


def _guide(words, depth):
    """For each cell g of depth ``depth``, #{j : words[j] ≥ (g + 1)·2^(63 − depth)} (the
    words decreasing): the count of thresholds above any V in the cell."""
    edges = np.arange(1, (1 << depth) + 1, dtype=np.uint64) << np.uint64(63 - depth)
    ascending = words[::-1].astype(np.uint64)
    return ascending.size - np.searchsorted(ascending, edges, side="left")


@lru_cache(maxsize=64)
def _cached_tables(n):
    """(b, k, lower, guide, upper) of :func:`noise_tables`, and the kernel's layout:
    L's words with one −1 after them (never above a 63-bit V: the count needs no bounds
    test); H's words padded with −1 to ``_H_PAD`` entries, then H's guide at depth 8."""
    b, k = _table_sizes(n)
    lower, upper = (np.array(words, np.int64) for words in threshold_words(n, b, k))
    guide = _guide(lower, k + GROUP).astype(np.int16)  # 16K entries: 32 KB, the L1 cache
    if upper.size > _H_PAD:
        raise AssertionError(f"H's table of scale {n} has more than {_H_PAD} words")
    kernel_lower = np.append(lower, np.int64(-1))
    kernel_upper = np.concatenate([upper, np.full(_H_PAD - upper.size, -1, np.int64),
                                   _guide(upper, _H_BITS)])
    for array in (lower, guide, upper, kernel_lower, kernel_upper):
        array.flags.writeable = False
    return (b, k, lower, guide, upper), (kernel_lower, kernel_upper)


def noise_tables(n):
    """The public tables of scale ``n``: (b, k, lower, guide, upper).

    K = 2^k buckets, K = min(1024, 2^⌊log2 n⌋), and B = 2^b with b = ⌊log2(n/K)⌋, so
    that the ratio K·B/n of H's law lies in (1/2, 1] and no threshold is tiny.
    ``lower[j]`` = ⌊2⁶³ P(L ≥ j + 1)⌋ for j = 0..K−2 and ``upper[h − 1]`` = ⌊2⁶³ λ^h⌋
    for h = 1..h_max, the last one the first λ^h below 2⁻²⁰: exact words
    (:func:`.grid_noise_exact.threshold_words`). ``guide[g]`` is the number of j with
    lower[j] ≥ (g + 1)·2^(59−k), g < 2^(k+4): the count of L's thresholds above every
    V whose first k + 4 bits (L's first read) are g, where the kernel's search starts.
    Read-only arrays, computed once per scale (about 15 ms).
    """
    return _cached_tables(int(n))[0]


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
def _below_exp_neg_from(io, r, w, z, margin):
    """:func:`_below_from` against exp(−z), z ≥ 0. Since 1 − z ≤ exp(−z) ≤ 1 − z + z²/2,
    the first cell often decides against these bounds without the exponential: the
    same decision, on the same bits, as against exp(−z)."""
    if (w + 1) * _GROUP_CELL <= (1.0 - z) - margin:
        return 1, r
    if z <= 1.0 and w * _GROUP_CELL >= 1.0 - z * (1.0 - 0.5 * z) + margin:
        return 0, r
    return _below_from(io, r, w, _exp_neg(z), margin)


@numba.njit(cache=True, _nrt=False)
def _refill(io, counter):
    """The next ``LANES`` keystream blocks into the reader's buffer (as ``_bits``)."""
    if counter + LANES > 0xFFFFFFFF:
        raise RuntimeError("a ChaCha20 stream ran out of blocks.")
    key, buf, x, s, nonce0, nonce1, nonce2 = io
    chacha20_blocks(key, counter, nonce0, nonce1, nonce2, x, s, buf)
    return counter + LANES


@numba.njit(cache=True, _nrt=False, inline="always")
def _peek(io, r):
    """V's next 63 bits, not consumed: (v, nxt, r), where r now holds at least 32 bits
    in its pool and ``nxt`` is the next keystream word. Moving a word into the pool or
    refilling the buffer early moves no bit (``_offset`` is unchanged). Away from the
    buffer's end the pool is topped up with selects, not a branch (whether it needs a
    word is a coin flip that a branch predictor loses half the time)."""
    pool, pool_bits, pos, counter = r
    if pos < _WORDS - 1:
        w0, w1 = np.int64(io[1][pos]), np.int64(io[1][pos + 1])
        low = pool_bits < 32
        pool = ((pool << 32) | w0) if low else pool
        nxt = w1 if low else w0
        pos += np.int64(low)
        pool_bits += np.int64(low) << 5
    else:
        if pool_bits < 32:
            if pos == _WORDS:
                counter = _refill(io, counter)
                pos = 0
            pool = (pool << 32) | np.int64(io[1][pos])
            pos += 1
            pool_bits += 32
        if pos == _WORDS:
            counter = _refill(io, counter)
            pos = 0
        nxt = np.int64(io[1][pos])
    v = (pool << (63 - pool_bits)) | (nxt >> (pool_bits - 31))
    return v, nxt, (pool, pool_bits, pos, counter)


@numba.njit(cache=True, _nrt=False, inline="always")
def _skip(r, nxt, d):
    """Consume the first ``d`` ≤ 63 of the bits :func:`_peek` showed (branch-free)."""
    pool, pool_bits, pos, counter = r
    spill = d > pool_bits  # the pool's bits are used up: the rest comes from nxt
    left = pool_bits - d + (np.int64(spill) << 5)
    pool = (nxt if spill else pool) & ((np.int64(1) << left) - 1)
    return (pool, left, pos + np.int64(spill), counter)


@numba.njit(cache=True, _nrt=False)
def _read_depth(io, r, v, nxt, words, c, m, first, max_depth):
    """Consume the bits the ideal algorithm reads to find that c thresholds of the
    decreasing exact words[0..m) lie above V: ``first``, then ``GROUP`` at a time while
    a threshold lies inside V's cell; −1 (and nothing consumed) if V's 63 bits equal a
    neighbouring word or the reads would go past ``max_depth`` bits.

    With v = V's first 63 bits and t = ⌊2⁶³ T⌋: v < t ⟹ V < T and v > t ⟹ V > T; and T
    lies inside V's cell of depth d iff (v ⊕ t) < 2^(63−d) (their first d bits agree).
    Only the two thresholds adjacent to V can share its cell (derivation: "Exact
    table words")."""
    big = np.int64(1) << 62
    x = min((words[c - 1] ^ v) if c > 0 else big, (words[c] ^ v) if c < m else big)
    if x == 0:
        return -1, r
    d = first
    while x < (np.int64(1) << (63 - d)):  # a threshold inside V's cell: read on
        d += GROUP
        if d > max_depth:
            return -1, r
    return c, _skip(r, nxt, d)


@numba.njit(cache=True, _nrt=False)
def _count_h(io, r, upper, m, max_depth):
    """#{h : λ^h > V} over H's table ``upper``: its exact words padded with −1 to
    ``_H_PAD`` entries, then its guide (for each 8-bit cell, the number of words at or
    above the cell's top). The guide of V's top 8 bits counts the thresholds above V's
    cell; a threshold inside it (about one V in twenty) takes one more step each."""
    v, nxt, r = _peek(io, r)
    c = upper[_H_PAD + (v >> (63 - _H_BITS))]
    while upper[c] > v:
        c += 1
    return _read_depth(io, r, v, nxt, upper, c, m, _H_BITS, max_depth)


@numba.njit(cache=True, _nrt=False)
def _count_l(io, r, lower, m, guide, log_k, max_depth):
    """#{l ≥ 1 : P(L ≥ l) > V} over L's table (exact words, one −1 appended): the guide
    of V's first k + 4 bits counts the thresholds above V's cell; one inside it (about
    one V in ten) takes one more step."""
    v, nxt, r = _peek(io, r)
    c = np.int64(guide[v >> (63 - GROUP - log_k)])
    while lower[c] > v:
        c += 1
    return _read_depth(io, r, v, nxt, lower, c, m, log_k + GROUP, max_depth)


@numba.njit(cache=True, _nrt=False)
def _geometric_part(io, r, upper, m, max_depth):
    """H = #{h : λ^h > V}, restarting (memorylessly) past the table; −1 if undecided."""
    total = 0
    while True:
        h, r = _count_h(io, r, upper, m, max_depth)
        if h < m:
            return (total + h if h >= 0 else -1), r
        total += h
        if total > 1 << 40:
            return -1, r


@numba.njit(cache=True, _nrt=False, inline="always")
def _table_parts(io, r, upper, m, lower, guide, log_k, max_depth):
    """(H, L) as :func:`_geometric_part` then :func:`_count_l` would find them, and the
    same bits consumed, from one look at the stream when it suffices: H's count and read
    depth d on the 63 bits v, then L's on the 63 − d bits after them, with the words'
    first 63 − d bits (which decide as the full words do unless a neighbouring word
    agrees with them all). Otherwise, and when H reaches its table's end, the two
    general functions take over from the same position; (−1, −1) if undecided."""
    v, nxt, r = _peek(io, r)
    c = upper[_H_PAD + (v >> (63 - _H_BITS))]
    while upper[c] > v:
        c += 1
    big = np.int64(1) << 62
    x = min((upper[c - 1] ^ v) if c > 0 else big, (upper[c] ^ v) if c < m else big)
    d = _H_BITS
    while 0 < x and d <= 63 and x < (np.int64(1) << (63 - d)):  # x = 0: see below
        d += GROUP
    first = log_k + GROUP
    known = 63 - d
    if x != 0 and c < m and d <= max_depth and known >= first + GROUP:
        v2 = (v << d) & ((np.int64(1) << 63) - 1)  # the next 63 − d bits, zero-padded
        c2 = np.int64(guide[v2 >> (63 - first)])
        while lower[c2] > v2:
            c2 += 1
        x2 = min((lower[c2 - 1] ^ v2) if c2 > 0 else big,
                 (lower[c2] ^ v2) if c2 < (np.int64(1) << log_k) - 1 else big)
        if x2 >= (np.int64(1) << d):  # a neighbour differs from V within the known bits
            d2 = first
            while x2 < (np.int64(1) << (63 - d2)):
                d2 += GROUP
            if d2 <= known and d2 <= max_depth:
                return c, c2, _skip(r, nxt, d + d2)
    h, r = _geometric_part(io, r, upper, m, max_depth)
    if h < 0:
        return -1, -1, r
    bucket, r = _count_l(io, r, lower, (np.int64(1) << log_k) - 1, guide, log_k, max_depth)
    return h, bucket, r


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
def _draw(io, r, gaussian, n, inv_n, b, log_k, lower, guide, upper, h_max, margin,
          max_depth):
    """One draw, or (0, False) when a decision is undecided (the chunk aborts)."""
    big_b = np.int64(1) << b
    while True:
        h, bucket, r = _table_parts(io, r, upper, h_max, lower, guide, log_k, max_depth)
        if h < 0 or bucket < 0:
            return 0, False, r
        # R, the first cell of its acceptance, the sign and the first cell of the
        # Gaussian's acceptance are read from one look at the next 63 bits (at most
        # b + 4 + 1 + 4 ≤ 49 of them), in the ideal algorithm's order.
        v, nxt, r = _peek(io, r)
        used = b
        rem = v >> (63 - b)  # b = 0: v < 2^63, so rem = 0
        if rem != 0:
            # V < exp(−x), x = R/N: R > 0 needs b ≥ 1, hence K = 1024 and x < 2^-10, so
            # a first cell w ≤ 14 lies below 15/16 < 1 − x − margin ≤ exp(−x): accepted,
            # the ideal algorithm's decision on the same 4 bits. Otherwise (1 in 16) the
            # comparison goes on as usual, and a rejection redraws R.
            w = (v >> (59 - b)) & 15
            used += GROUP
            if w == 15:
                r = _skip(r, nxt, used)
                decision, r = _below_from(io, r, w, _exp_neg(float(rem) / float(n)), margin)
                if decision == 0:
                    rem, r = _remainder_part(io, r, n, b, margin)
                if decision == -1 or rem < 0:
                    return 0, False, r
                v, nxt, r = _peek(io, r)
                used = 0
        sign = (v >> (62 - used)) & 1
        used += 1
        if (h | bucket | rem) == 0 and sign == 1:
            r = _skip(r, nxt, used)
            continue  # zero would otherwise be counted twice
        j = (h << log_k) + bucket
        if j > (_SATURATED - rem) // big_b:
            return 0, False, r  # |y| ≥ 2^62: the exact fallback works with Python ints
        y = j * big_b + rem
        if gaussian and y != n:
            # Accept with probability exp(−(|y| − N)²/(2N²)) (CKS 2020, Algorithm 3, t = N).
            d = abs(y - n)
            w = (v >> (59 - used)) & 15
            r = _skip(r, nxt, used + GROUP)
            if d > 9 * n:  # exp(−x²/2) < exp(−40): p = 0 is within 2^-57
                decision, r = _below_from(io, r, w, 0.0, margin)
            else:
                x = float(d) * inv_n
                decision, r = _below_exp_neg_from(io, r, w, 0.5 * x * x, margin)
            if decision == -1:
                return 0, False, r
            if decision == 0:
                continue
        else:
            r = _skip(r, nxt, used)
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
                upper, h_max, margin, max_depth, state, c):
    # The hot loop runs without reference counting and with its hot helpers inlined
    # (as in exact_sampling: refcount updates on the arrays cost more than a draw).
    # The cold ones (H or L past the one-look path, a buffer refill) are plain calls:
    # inlining them too cost 45 s of compilation against 29 s for about 2 % of run
    # time (quiet 2-core machine, 2^20 draws on one thread). _remainder_part stays
    # inlined: the lazy sums of cyclic_sgd call it on every draw (10 % slower out of line).
    inv_n = 1.0 / float(n)
    for i in range(start, stop):
        before = r
        y, ok, r = _draw(io, r, gaussian, n, inv_n, b, log_k, lower, guide, upper, h_max,
                         margin, max_depth)
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
def _fill_chunk(values, add, gaussian, n, b, log_k, lower, guide, upper, h_max, key, domain, chunk,
                c, margin, max_depth, state):
    """Chunk ``c`` from draw ``state[c, 0]`` and bit ``state[c, 1]`` of stream
    (c, domain). Leaves in ``state[c]`` the draw at which it stopped undecided and that
    draw's first bit, or −1."""
    io, r = _reader_at(key, c, domain, state[c, 1])
    stop = min(values.size, (c + 1) * chunk)
    _draw_range(io, r, values, state[c, 0], stop, add, gaussian, n, b, log_k, lower, guide,
                upper, h_max, margin, max_depth, state, c)


# Two functions, not one compiled twice (see exact_sampling: numba's cache does not key
# on ``parallel=``, which once ran the threaded build in forked workers).
@numba.njit(cache=True, parallel=True)
def _fill_parallel(values, add, gaussian, n, b, log_k, lower, guide, upper, h_max, key, domain,
                   chunk, margin, max_depth, state):
    for c in numba.prange(state.shape[0]):
        _fill_chunk(values, add, gaussian, n, b, log_k, lower, guide, upper, h_max, key, domain,
                    chunk, c, margin, max_depth, state)


@numba.njit(cache=True)
def _fill_serial(values, add, gaussian, n, b, log_k, lower, guide, upper, h_max, key, domain,
                 chunk, margin, max_depth, state):
    for c in range(state.shape[0]):
        if state[c, 0] >= 0:
            _fill_chunk(values, add, gaussian, n, b, log_k, lower, guide, upper, h_max, key,
                        domain, chunk, c, margin, max_depth, state)


#: Fewer draws than this are filled on one thread.
_MIN_THREADED_DRAWS = 1 << 16


def fill_noise(values, add, gaussian, n, key, domain, chunk, *, margin=MARGIN,
               max_depth=_MAX_DEPTH):
    """Fill (or add to, clamped at ±2⁶¹) the int64 array ``values`` with exact noise.

    Entry i belongs to chunk c = i // ``chunk``, whose draws read stream
    (c, ``domain``) of ChaCha20 key ``key`` in order. A draw the kernel leaves
    undecided is made by the exact algorithm (:mod:`.grid_noise_exact`) from the same
    bits, and the chunk resumes after it, so the result depends neither on ``margin``
    nor on ``max_depth`` (tests raise the one and lower the other to exercise the
    fallback) nor on the thread count.

    Returns
    -------
    int : the number of draws made by the exact algorithm.
    """
    if not MARGIN <= margin < 0.25:
        raise ValueError(f"margin must be in [2^-40, 1/4), got {margin}.")
    if not 1 <= max_depth <= _MAX_DEPTH:
        raise ValueError(f"max_depth must be in [1, 63], got {max_depth}.")
    n, chunk = int(n), int(chunk)
    b, log_k, lower, guide, upper = noise_tables(n)
    h_max = upper.size
    lower, upper = _cached_tables(n)[1]
    state = np.zeros((math.ceil(values.size / chunk), 2), np.int64)
    state[:, 0] = np.arange(state.shape[0]) * chunk  # each chunk's first draw, at bit 0
    args = (values, bool(add), bool(gaussian), n, int(b), int(log_k), lower, guide, upper,
            h_max, key, int(domain), chunk, float(margin), int(max_depth), state)
    # Threads only pay for long fills: waking the pool cost 5.6 ms against a 39 ms
    # output-perturbation fit of 4097 draws on a busy machine. And only on free cores:
    # the chunks are shared out statically, so a thread that waits for a busy core
    # holds up the join (a 2^20 fill took 2.6x its CPU time in wall time with 2
    # threads while another process held a core). The count is that of
    # :func:`.sparse_rows.free_threads` (``SKDPSPARSE_NUM_THREADS`` if set, else the
    # idle CPUs), at most numba's current setting. The draws do not depend on it
    # (each chunk reads its own stream).
    threads = 1
    if values.size > max(chunk, _MIN_THREADED_DRAWS) and threads_are_fork_safe():
        threads = min(free_threads(), numba.get_num_threads(), state.shape[0])
    if threads > 1:
        previous = numba.get_num_threads()
        numba.set_num_threads(threads)  # this thread's launches only
        try:
            _fill_parallel(*args)
        finally:
            numba.set_num_threads(previous)
    else:
        _fill_serial(*args)
    exact = 0
    while (state[:, 0] >= 0).any():
        from .grid_noise_exact import exact_draw

        for c in np.flatnonzero(state[:, 0] >= 0):
            i, offset = int(state[c, 0]), int(state[c, 1])
            y, state[c, 1] = exact_draw(gaussian, n, int(b), int(log_k), h_max, key,
                                        int(c), int(domain), offset)
            y = min(max(y, -_SATURATED), _SATURATED)
            values[i] = (min(max(int(values[i]) + y, -_RELEASE_BOUND), _RELEASE_BOUND)
                         if add else y)
            state[c, 0] = i + 1 if i + 1 < min(values.size, (c + 1) * chunk) else -1
            exact += 1
        _fill_serial(*args)
    return exact


# ----------------------------------------------------- to and from the noise grid
# The release of mechanisms/noise.py is γ·(round(clip(v/γ, ±2⁶⁰)) + Y), γ = 2^e. In
# NumPy that was five passes over the statistic and three temporaries (ldexp, clip,
# rint, astype; then astype and ldexp back), about a sixth of a bias-reduced step at
# d = 10⁶. Here each direction is one compiled pass. Multiplying by the double 2^−e is
# ``ldexp(v, −e)`` exactly, bit for bit, whenever 2^−e is a normal double: both are the
# correctly rounded value of the same real v·2^−e (overflow to ±inf and gradual
# underflow included), so the grid values are those of the NumPy expression.


def grid_factor(exponent):
    """2^``exponent`` as a double when it is a normal one (|exponent| ≤ 1022), else
    None (the caller then uses ``numpy.ldexp``)."""
    exponent = int(exponent)
    return math.ldexp(1.0, exponent) if -1022 <= exponent <= 1022 else None


@numba.njit(cache=True, nogil=True, _nrt=False)
def to_grid(values, factor, out):
    """out[i] = round(clip(values[i]·factor, ±2⁶⁰)) as int64, rounding half to even (as
    ``numpy.rint``), for ``factor`` = 2^−e from :func:`grid_factor`. Returns False
    (``out`` then partly written) if a value is NaN or infinite."""
    for i in range(values.size):
        v = values[i]
        if not math.isfinite(v):
            return False
        out[i] = np.int64(on_grid_nb(v * factor))
    return True


@numba.njit(cache=True, nogil=True, _nrt=False)
def from_grid(grid, factor, out):
    """out[i] = float(grid[i])·factor (the int64 rounded to the nearest double, as
    ``astype(float64)``), for ``factor`` = 2^e from :func:`grid_factor`."""
    for i in range(grid.size):
        out[i] = np.float64(grid[i]) * factor


@numba.njit(cache=True, nogil=True, _nrt=False)
def max_abs_exceeds(values, bound):
    """Whether some |values[i]| > ``bound`` (int64; −2⁶³ counts, unlike ``np.abs``)."""
    for i in range(values.size):
        v = values[i]
        if v > bound or v < -bound:
            return True
    return False
