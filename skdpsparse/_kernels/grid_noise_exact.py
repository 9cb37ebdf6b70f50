"""The exact algorithm behind :mod:`.grid_noise`, in exact arithmetic: its
specification, and the fallback for the chunks its fast path cannot decide.

Every comparison of the uniform V (read from the key's bits 32 at a time) with a
threshold T — exp(−q) for a rational q, or (exp(−a) − exp(−c))/(1 − exp(−c)) — is
decided exactly: T is bracketed by intervals of ``decimal`` numbers (whose ``exp`` is
correctly rounded, so one unit in the last place on either side is a rigorous bound)
at increasing precision until it lies clearly below, above or inside the current cell
of V; inside, the next 32 bits of V are read. The thresholds are irrational (q ≠ 0;
Lindemann–Weierstrass), so each comparison ends with probability one. The
algorithm and why its law is exact are in ``doc/derivations/exact_sampling.rst``.

Slow (Python integers and decimals): the kernel leaves it about 10⁻⁷ of the draws
or fewer at every scale (:mod:`.grid_noise`). :func:`threshold_words` gives the
kernel its exact tables, ⌊2⁶³ T⌋ for each threshold of H and L.
"""

from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .chacha import chacha20_keystream

__all__ = ["KeyBits", "draw", "exact_chunk", "exact_draw", "threshold_words"]

GROUP = 4  # the kernel's constants (grid_noise): part of the algorithm's definition
H_BITS = 8


class KeyBits:
    """The bits of ChaCha20 stream (chunk, domain), 32-bit words most significant bit
    first, as the kernels' bit reader delivers them (:mod:`.exact_sampling`), starting
    after the first ``offset`` bits."""

    _BLOCKS = 64

    def __init__(self, key_words, chunk, domain, offset=0):
        self._key = b"".join(int(w).to_bytes(4, "little") for w in key_words)
        self._nonce = ((chunk & 0xFFFFFFFF).to_bytes(4, "little")
                       + ((chunk >> 32) & 0xFFFFFFFF).to_bytes(4, "little")
                       + (domain & 0xFFFFFFFF).to_bytes(4, "little"))
        self._words, self._pos = [], 0
        self._counter = offset // 512  # the next block to generate (16 words each)
        self._pool, self._nbits = 0, 0
        self.offset = offset - offset % 32
        for _ in range(offset % 512 // 32):
            self._word()
        if offset % 32:
            self.take(offset % 32)

    def _word(self):
        if self._pos == len(self._words):
            stream = chacha20_keystream(self._key, self._BLOCKS, counter=self._counter,
                                        nonce=self._nonce)
            self._words = np.frombuffer(stream, dtype="<u4").tolist()
            self._counter += self._BLOCKS
            self._pos = 0
        self._pos += 1
        return self._words[self._pos - 1]

    def take(self, k):
        """The next ``k`` bits as an int (``offset`` counts the bits taken so far)."""
        while self._nbits < k:
            self._pool = (self._pool << 32) | self._word()
            self._nbits += 32
        self._nbits -= k
        self.offset += k
        out = self._pool >> self._nbits
        self._pool &= (1 << self._nbits) - 1
        return out


def _context(digits, rounding):
    """A decimal context of its own: nothing inherited from ``decimal.DefaultContext``
    (an application's traps or exponent limits), no trap, the widest exponent range."""
    return Context(prec=digits, rounding=rounding, Emin=MIN_EMIN, Emax=MAX_EMAX,
                   capitals=1, clamp=0, flags=[], traps=[])


@lru_cache(maxsize=1 << 14)
def _exp_neg_bounds(q, digits):
    """Rationals lo ≤ exp(−q) ≤ hi for a rational q ≥ 0 (``digits`` significant digits)."""
    if q == 0:
        return Fraction(1), Fraction(1)
    floor, ceiling = _context(digits, ROUND_FLOOR), _context(digits, ROUND_CEILING)
    num, den = Decimal(q.numerator), Decimal(q.denominator)
    q_lo, q_hi = floor.divide(num, den), ceiling.divide(num, den)
    # exp is correctly rounded (half-even) in any context: one unit more is a bound.
    # copy_negate is exact; unary minus would round in the caller's decimal context.
    hi = ceiling.exp(q_lo.copy_negate()).next_plus(ceiling)
    lo = floor.exp(q_hi.copy_negate()).next_minus(floor)
    return max(Fraction(lo), Fraction(0)), min(Fraction(hi), Fraction(1))


def exp_neg(q):
    """exp(−q) as an interval function of the precision."""
    return lambda digits: _exp_neg_bounds(q, digits)


def truncated_tail(a, c):
    """(exp(−a) − exp(−c)) / (1 − exp(−c)) for rationals 0 < a < c, as an interval
    function of the precision (P(L ≥ l) with a = lB/N, c = KB/N)."""
    def bounds(digits):
        a_lo, a_hi = _exp_neg_bounds(a, digits)
        c_lo, c_hi = _exp_neg_bounds(c, digits)
        return max(a_lo - c_hi, Fraction(0)) / (1 - c_lo), (a_hi - c_lo) / (1 - c_hi)
    return bounds


def _side(threshold, word, k):
    """Where T lies against V's cell [w/2^k, (w + 1)/2^k): +1 above it (V < T), −1
    below it (V ≥ T), 0 inside it. The thresholds lie strictly between 0 and 1, so
    a cell end at 0 or 1 needs no strict bound (a probability too small for the
    decimal exponent range is bracketed by [0, tiny] and is still inside [0, 2^-k))."""
    low, high = Fraction(word, 1 << k), Fraction(word + 1, 1 << k)
    digits = 30
    while True:
        lo, hi = threshold(digits)
        if lo >= high and high < 1:
            return 1
        if hi <= low and low > 0:
            return -1
        if (lo > low or low == 0) and (hi < high or high == 1):
            return 0
        digits *= 2


def below(bits, threshold):
    """The event V < T for a fresh uniform V, read ``GROUP`` bits at a time until its
    cell lies on one side of T."""
    word, k = bits.take(GROUP), GROUP
    while True:
        side = _side(threshold, word, k)
        if side:
            return side > 0
        word, k = (word << GROUP) | bits.take(GROUP), k + GROUP


def count_above(bits, thresholds, first):
    """#{j : T_j > V} for a fresh uniform V and decreasing thresholds T_1 > T_2 > …,
    read ``first`` bits, then ``GROUP`` at a time while a threshold is inside its cell."""
    word, k = bits.take(first), first
    while True:
        lo, hi = 0, len(thresholds)  # the first threshold not above the cell
        while lo < hi:
            mid = (lo + hi) // 2
            if _side(thresholds[mid], word, k) > 0:
                lo = mid + 1
            else:
                hi = mid
        if lo == len(thresholds) or _side(thresholds[lo], word, k) < 0:
            return lo
        word, k = (word << GROUP) | bits.take(GROUP), k + GROUP


WORD_BITS = 63  # the kernel's tables hold floor(T · 2^63) for each table threshold T
H_FLOOR_BITS = 20  # H's table ends with the first λ^h below 2^-20


def _word_of(bounds):
    """floor(T · 2^63) for a threshold T given by ``bounds(digits)`` → (lo, hi) decimals
    with lo ≤ T ≤ hi: both ends are scaled with directed rounding and floored; when they
    agree the word is exact, else the precision doubles (T is irrational, so T · 2^63
    is not an integer and the loop ends)."""
    digits = 34
    while True:
        lo, hi = bounds(digits)
        ctx_lo = _context(digits + 20, ROUND_FLOOR)
        ctx_hi = _context(digits + 20, ROUND_CEILING)
        low = int(ctx_lo.multiply(lo, 1 << WORD_BITS).to_integral_value(ROUND_FLOOR))
        high = int(ctx_hi.multiply(hi, 1 << WORD_BITS).to_integral_value(ROUND_FLOOR))
        if low == high:
            return low
        digits *= 2


def _exp_neg_decimal(num, den, digits):
    """Decimals lo ≤ exp(−num/den) ≤ hi (integers num ≥ 0, den > 0), as in
    :func:`_exp_neg_bounds` but without converting to fractions (the tables' speed)."""
    floor, ceiling = _context(digits, ROUND_FLOOR), _context(digits, ROUND_CEILING)
    q_lo = floor.divide(Decimal(num), Decimal(den))
    q_hi = ceiling.divide(Decimal(num), Decimal(den))
    hi = ceiling.exp(q_lo.copy_negate()).next_plus(ceiling)
    lo = floor.exp(q_hi.copy_negate()).next_minus(floor)
    return max(lo, Decimal(0)), min(hi, Decimal(1))


def _tail_bounds(n, b, kb, j):
    """Decimal bounds on L's threshold (exp(−jB/n) − λ)/(1 − λ), λ = exp(−kb/n)."""
    def bounds(digits):
        a_lo, a_hi = _exp_neg_decimal(j << b, n, digits)
        c_lo, c_hi = _exp_neg_decimal(kb, n, digits)
        floor, ceiling = _context(digits, ROUND_FLOOR), _context(digits, ROUND_CEILING)
        low = floor.divide(max(floor.subtract(a_lo, c_hi), Decimal(0)),
                           ceiling.subtract(1, c_lo))
        high = ceiling.divide(ceiling.subtract(a_hi, c_lo), floor.subtract(1, c_hi))
        return low, high
    return bounds


@lru_cache(maxsize=64)
def threshold_words(n, b, log_k):
    """The kernel's exact tables for scale n: floor(T · 2^63) for L's thresholds
    T_l = (exp(−lB/n) − λ)/(1 − λ), l = 1 … K − 1, and for H's, λ^h = exp(−hKB/n),
    h = 1 … h_max, h_max the first h with λ^h < 2^-20 (B = 2^b, K = 2^log_k,
    λ = exp(−KB/n)). Tuples of Python ints, from interval arithmetic in ``decimal``
    with directed rounding (derivation: "Exact table words").

    Fast path: exp(−lB/n) and λ^h as powers of one bracketed exponential, each
    product rounded outwards (a rigorous bracket, about K ulps wide at 40 digits);
    a threshold whose two floors differ is bracketed directly, at increasing
    precision (:func:`_word_of`)."""
    kb, digits = 1 << (log_k + b), 40
    floor, ceiling = _context(digits, ROUND_FLOOR), _context(digits, ROUND_CEILING)
    wide_lo, wide_hi = _context(digits + 20, ROUND_FLOOR), _context(digits + 20, ROUND_CEILING)
    scale = Decimal(1 << WORD_BITS)

    def word(lo, hi, exact):
        low = int(wide_lo.multiply(lo, scale).to_integral_value(ROUND_FLOOR))
        high = int(wide_hi.multiply(hi, scale).to_integral_value(ROUND_FLOOR))
        return low if low == high else _word_of(exact)

    step_lo, step_hi = _exp_neg_decimal(1 << b, n, digits)  # exp(−B/n)
    c_lo, c_hi = _exp_neg_decimal(kb, n, digits)  # λ
    den_lo, den_hi = floor.subtract(1, c_hi), ceiling.subtract(1, c_lo)
    lower, a_lo, a_hi = [], Decimal(1), Decimal(1)
    for j in range(1, 1 << log_k):
        a_lo, a_hi = floor.multiply(a_lo, step_lo), ceiling.multiply(a_hi, step_hi)
        low = floor.divide(max(floor.subtract(a_lo, c_hi), Decimal(0)), den_hi)
        high = ceiling.divide(ceiling.subtract(a_hi, c_lo), den_lo)
        lower.append(word(low, high, _tail_bounds(n, b, kb, j)))
    upper, p_lo, p_hi, h = [], Decimal(1), Decimal(1), 1
    while True:
        p_lo, p_hi = floor.multiply(p_lo, c_lo), ceiling.multiply(p_hi, c_hi)
        upper.append(word(p_lo, p_hi,
                          lambda digits, h=h: _exp_neg_decimal(h * kb, n, digits)))
        if upper[-1] < 1 << (WORD_BITS - H_FLOOR_BITS):
            return tuple(lower), tuple(upper)
        h += 1


@lru_cache(maxsize=64)
def _tables(n, b, log_k, h_max):
    rate = Fraction(1 << (log_k + b), n)
    lower = [truncated_tail(Fraction(j << b, n), rate) for j in range(1, 1 << log_k)]
    upper = [exp_neg(h * rate) for h in range(1, h_max + 1)]
    return lower, upper


def draw(bits, gaussian, n, b, log_k, h_max):
    """One exact draw (an unbounded Python int): the discrete Laplace of scale n, or the
    discrete Gaussian with σ = n; b, log_k and h_max are the kernel's public table
    sizes (:func:`skdpsparse._kernels.grid_noise.noise_tables`)."""
    lower, upper = _tables(n, b, log_k, h_max)
    while True:
        h = 0
        while True:  # H: geometric with ratio λ = exp(−K·2^b/n), memoryless past h_max
            step = count_above(bits, upper, H_BITS)
            h += step
            if step < h_max:
                break
        bucket = count_above(bits, lower, log_k + 4)
        while True:  # R: uniform on [0, 2^b), accepted with probability exp(−R/n)
            rem = 0
            if b > 32:
                rem = (bits.take(b - 32) << 32) | bits.take(32)
            elif b > 0:
                rem = bits.take(b)
            if rem == 0 or below(bits, exp_neg(Fraction(rem, n))):
                break
        negative = bits.take(1) == 1
        if negative and h == 0 and bucket == 0 and rem == 0:
            continue
        y = (((h << log_k) + bucket) << b) + rem
        if gaussian and y != n and not below(bits, exp_neg(Fraction((y - n) ** 2,
                                                                    2 * n * n))):
            continue
        return -y if negative else y


def exact_chunk(size, gaussian, n, b, log_k, h_max, key_words, chunk, domain):
    """The ``size`` draws of chunk ``chunk`` (what the kernel writes there)."""
    bits = KeyBits(key_words, chunk, domain)
    return [draw(bits, gaussian, n, b, log_k, h_max) for _ in range(size)]


def exact_draw(gaussian, n, b, log_k, h_max, key_words, chunk, domain, offset):
    """The draw that starts at bit ``offset`` of stream (chunk, domain), and the offset
    after it: the kernel's fallback."""
    bits = KeyBits(key_words, chunk, domain, offset)
    return draw(bits, gaussian, n, b, log_k, h_max), bits.offset
