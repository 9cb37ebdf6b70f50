"""Exact samplers on random bits (read by :mod:`.bit_reader`): Bernoulli coins, uniform integers,
permutations, the exponential mechanism's categorical draws, and the entry points of
the discrete Laplace and discrete Gaussian noise.

Every draw here is a function of ChaCha20 keystream bits (:mod:`.chacha`) whose law
is exactly the stated one: no output has probability zero on one input and positive
on a neighbouring one (the floating-point failure of Mironov 2012, "On significance
of the least significant bits for differential privacy", CCS). The coins are those of
Canonne, Kamath and Steinke (2020), "The Discrete Gaussian for Differential Privacy",
NeurIPS, Section 5, on integers only:

* Algorithm 1 — Bernoulli(exp(−γ)) for rational γ ∈ [0, 1], from Bernoulli(γ/K) coins;
* Algorithm 2 — the discrete Laplace on ℤ with scale t (here an integer N, s = 1),
  as parts (u, v) with |y| = u + vN (the proposal of :func:`cks_discrete_noise`'s
  Gaussian);
* Bernoulli(num/den) compares a uniform real with num/den bit by bit, generating the
  binary expansion of num/den by long division: two random bits on average, whatever
  the size of den.

The noise itself (:func:`discrete_noise`, :func:`add_discrete_noise`) comes from the
faster table-inversion sampler of :mod:`.grid_noise`, exact by exact table words and
certified float decisions, with an exact fallback. The derivation of both is in
``doc/derivations/exact_sampling.rst``.

Streams. A call fills an array in chunks of ``chunk`` entries; chunk ``c`` reads the
keystream with nonce (c mod 2³², c div 2³², ``domain``), so the output does not
depend on the thread count, and chunks run in parallel (``prange``).

Outputs that would exceed 2⁶² in magnitude are saturated, which matters only through
:func:`add_discrete_noise`: it releases clamp(k + Y, ±2⁶¹), a post-processing of the
exact k + Y (|k| ≤ 2⁶⁰). The probability of reaching it is below exp(−2²⁰).
"""

import numba
import numpy as np

from ._common import threads_are_fork_safe
from .bit_reader import _bit_length, _bits, _new_reader, _uniform_below, _uniform_below_bits
from .grid_noise import fill_noise, max_abs_exceeds

__all__ = [
    "DISCRETE_GAUSSIAN",
    "DISCRETE_LAPLACE",
    "MAX_GRID_VALUE",
    "add_discrete_noise",
    "cks_discrete_noise",
    "discrete_noise",
    "permutation",
    "shuffled",
    "uniform_integers",
]

DISCRETE_LAPLACE = 0
DISCRETE_GAUSSIAN = 1
MAX_GRID_VALUE = 1 << 60  # |k| of a rounded statistic; the caller clips to it
_RELEASE_BOUND = 1 << 61  # the post-processing clamp of k + Y
_SATURATED = 1 << 62  # |Y| recorded for a draw at or beyond 2^62
_MAX_SCALE = 1 << 50  # N: keeps U + V N and every long-division step below 2^63


@numba.njit(cache=True, _nrt=False, inline="always")
def _bernoulli_fraction(io, r, num, den):
    """Bernoulli(num/den) for 0 ≤ num, 0 < den < 2⁶²: a uniform real against num/den.

    The binary digits of num/den come from long division; the first digit where the
    random bits differ decides, so P[True] = num/den exactly.
    """
    if num >= den:
        return True, r
    rem = num
    while rem != 0:
        rem <<= 1
        digit = 0
        if rem >= den:
            digit = 1
            rem -= den
        bit, r = _bits(io, r, 1)
        if bit != digit:
            return bit < digit, r
    return False, r  # num/den's expansion ended: the uniform is at least num/den


@numba.njit(cache=True, _nrt=False, inline="always")
def _bernoulli_reciprocal(io, r, k):
    """Bernoulli(1/k), k ≥ 1."""
    if k == 1:
        return True, r
    v, r = _uniform_below(io, r, k)
    return v == 0, r


@numba.njit(cache=True, _nrt=False, inline="always")
def _bernoulli_exp_fraction(io, r, num, den):
    """Bernoulli(exp(−num/den)) for 0 ≤ num ≤ den (CKS 2020, Algorithm 1)."""
    k = 1
    while True:
        a, r = _bernoulli_fraction(io, r, num, den)
        if not a:
            break
        a, r = _bernoulli_reciprocal(io, r, k)
        if not a:
            break
        k += 1
    return k % 2 == 1, r


@numba.njit(cache=True, _nrt=False, inline="always")
def _bernoulli_exp_minus_one(io, r):
    """Bernoulli(exp(−1)): Algorithm 1 with γ = 1 (Bernoulli(1/1) takes no bits, so the
    coins are Bernoulli(1/k) alone)."""
    return _bernoulli_exp_fraction(io, r, 1, 1)


@numba.njit(cache=True, _nrt=False, inline="always")
def _bernoulli_exp_half_square(io, r, q, rem, n):
    """Bernoulli(exp(−x²/2)) for x = q + rem/n, 0 ≤ rem < n (exact; module docstring)."""
    # exp(−q²/2) = Π_{i=1..q} exp(−1/2) exp(−1)^(i−1), since Σ (2i − 1) = q².
    for i in range(1, q + 1):
        a, r = _bernoulli_exp_fraction(io, r, 1, 2)
        if not a:
            return False, r
        for _ in range(i - 1):
            a, r = _bernoulli_exp_minus_one(io, r)
            if not a:
                return False, r
    for _ in range(q):  # exp(−q rem/n) = exp(−rem/n)^q
        a, r = _bernoulli_exp_fraction(io, r, rem, n)
        if not a:
            return False, r
    # exp(−f²/2), f = rem/n: Algorithm 1 with Bernoulli(f²/(2k)) as four independent coins.
    k = 1
    while True:
        a, r = _bernoulli_fraction(io, r, rem, n)
        if not a:
            break
        a, r = _bernoulli_fraction(io, r, rem, n)
        if not a:
            break
        bit, r = _bits(io, r, 1)
        if bit == 0:
            break
        a, r = _bernoulli_reciprocal(io, r, k)
        if not a:
            break
        k += 1
    return k % 2 == 1, r


@numba.njit(cache=True, _nrt=False, inline="always")
def _discrete_laplace_parts(io, r, n, n_bits):
    """A discrete Laplace draw of scale n (P(y) ∝ exp(−|y|/n)), as (negative, u, v)
    with |y| = u + v n (CKS 2020, Algorithm 2 with s = 1, t = n); n_bits is the bit
    length of n − 1 (n ≥ 2)."""
    while True:
        u, r = _uniform_below_bits(io, r, n, n_bits)
        a, r = _bernoulli_exp_fraction(io, r, u, n)
        if not a:
            continue
        v = 0
        while True:
            a, r = _bernoulli_exp_minus_one(io, r)
            if not a:
                break
            v += 1
        bit, r = _bits(io, r, 1)
        negative = bit == 1
        if negative and u == 0 and v == 0:
            continue  # zero would otherwise be counted twice
        return negative, u, v, r


@numba.njit(cache=True, _nrt=False, inline="always")
def _magnitude(u, v, n):
    """u + v n, saturated at 2⁶² (see the module docstring)."""
    if v >= (_SATURATED - u) // n:
        return _SATURATED
    return u + v * n


@numba.njit(cache=True, _nrt=False, inline="always")
def _cks_draw(io, r, kind, n, n_bits):
    """One draw: discrete Laplace of scale n, or discrete Gaussian with σ = n (n ≥ 2)."""
    while True:
        negative, u, v, r = _discrete_laplace_parts(io, r, n, n_bits)
        if kind == DISCRETE_GAUSSIAN:
            # Accept with probability exp(−(|y| − n)²/(2n²)), x = | |y| − n | / n.
            if v >= 1:
                q, rem = v - 1, u
            elif u == 0:
                q, rem = 1, 0
            else:
                q, rem = 0, n - u
            a, r = _bernoulli_exp_half_square(io, r, q, rem, n)
            if not a:
                continue
        y = _magnitude(u, v, n)
        return (-y if negative else y), r


@numba.njit(cache=True, _nrt=False)
def _cks_fill_range(io, r, values, start, stop, add, kind, n, n_bits):
    # The hot loop runs without reference counting (_nrt=False) and with every helper
    # inlined: numba's refcount updates on the reader's arrays cost more than a draw.
    for i in range(start, stop):
        y, r = _cks_draw(io, r, kind, n, n_bits)
        if add:
            z = values[i] + y  # |values[i]| ≤ 2^60 and |y| ≤ 2^62: no overflow
            values[i] = min(max(z, -_RELEASE_BOUND), _RELEASE_BOUND)
        else:
            values[i] = y


@numba.njit(cache=True)
def _cks_fill_one_chunk(values, add, kind, n, n_bits, key, domain, chunk, c):
    io, r = _new_reader(key, c, domain)
    _cks_fill_range(io, r, values, c * chunk, min(values.size, (c + 1) * chunk), add, kind,
                    n, n_bits)


# Two functions, not one compiled twice: numba's on-disk cache keys an entry by the
# function, its signature and its bytecode, not by ``parallel=``, so two builds of one
# function shared an entry and whichever was cached first was loaded by the other (the
# serial path then ran the threaded build, which killed forked workers: issue 17's
# fork hang).
@numba.njit(cache=True, parallel=True)
def _cks_fill_parallel(values, add, kind, n, key, domain, chunk):
    n_bits = _bit_length(n - 1)
    for c in numba.prange((values.size + chunk - 1) // chunk):
        _cks_fill_one_chunk(values, add, kind, n, n_bits, key, domain, chunk, c)


@numba.njit(cache=True)
def _cks_fill_serial(values, add, kind, n, key, domain, chunk):
    n_bits = _bit_length(n - 1)
    for c in range((values.size + chunk - 1) // chunk):
        _cks_fill_one_chunk(values, add, kind, n, n_bits, key, domain, chunk, c)


def _cks_fill(values, add, kind, n, key, domain, chunk):
    # Threads only pay off beyond one chunk (a parallel launch costs tens of
    # microseconds), and never in a child forked from a process whose numba threads
    # run on OpenMP (_common.threads_are_fork_safe).
    threaded = values.size > chunk and threads_are_fork_safe()
    fill = _cks_fill_parallel if threaded else _cks_fill_serial
    fill(values, add, kind, n, key, domain, chunk)


def _check_common(kind, scale, key, domain, chunk):
    if kind not in (DISCRETE_LAPLACE, DISCRETE_GAUSSIAN):
        raise ValueError(f"kind must be DISCRETE_LAPLACE or DISCRETE_GAUSSIAN, got {kind!r}.")
    if isinstance(scale, (bool, np.bool_)) or int(scale) != scale or not 2 <= scale <= _MAX_SCALE:
        raise ValueError(f"the grid scale must be an integer in [2, 2^50], got {scale!r}.")
    if key.dtype != np.int64 or key.shape != (8,):
        raise ValueError("key must be the 8 key words of a ChaCha20 key (chacha.key_words).")
    if not 0 <= domain < 2**32 or chunk < 1:
        raise ValueError("domain must fit in 32 bits and chunk be positive.")


def discrete_noise(size, kind, scale, key, domain, *, chunk=4096):
    """``size`` i.i.d. integers from the discrete Laplace or discrete Gaussian.

    Parameters
    ----------
    size : int
    kind : {DISCRETE_LAPLACE, DISCRETE_GAUSSIAN}
    scale : int
        N: the discrete Laplace P(y) ∝ exp(−|y|/N), or the discrete Gaussian
        P(y) ∝ exp(−y²/(2N²)), on ℤ.
    key : int64 array of shape (8,)
        ChaCha20 key words.
    domain : int
        A 32-bit stream label; different labels give independent streams.
    chunk : int, default=4096
        Entries per keystream (part of the output's definition: the same key, domain
        and chunk give the same values on any number of threads).

    Returns
    -------
    ndarray of int64, saturated at ±2⁶² (probability below exp(−2²⁰)).

    The draws come from the table-inversion sampler of :mod:`.grid_noise`, whose law
    is exact (exact table words, certified float decisions and an exact fallback).
    """
    _check_common(kind, scale, key, domain, chunk)
    out = np.zeros(int(size), np.int64)
    fill_noise(out, False, kind == DISCRETE_GAUSSIAN, int(scale), key, int(domain),
               int(chunk))
    return out


def cks_discrete_noise(size, kind, scale, key, domain, *, chunk=4096):
    """:func:`discrete_noise`'s law by the Bernoulli factories of Canonne, Kamath and
    Steinke (2020), Algorithms 1–3 (with t = σ = N): the library's previous sampler,
    kept as an independent exact sampler of the same law for the tests (a two-sample
    test against :func:`discrete_noise`) and the benchmarks (its speed is the
    baseline of the faster one). Same arguments and streams."""
    _check_common(kind, scale, key, domain, chunk)
    out = np.zeros(int(size), np.int64)
    _cks_fill(out, False, kind, int(scale), key, int(domain), int(chunk))
    return out


def add_discrete_noise(values, kind, scale, key, domain, *, chunk=4096):
    """Replace the integers ``values`` (|k| ≤ 2⁶⁰) by clamp(k + Y, ±2⁶¹), in place.

    ``Y`` is :func:`discrete_noise` with the same arguments; the clamp is a fixed
    function of the exact sum, so it is post-processing (see the module docstring).
    """
    if values.dtype != np.int64 or values.ndim != 1:
        raise TypeError("values must be a 1-d int64 array.")
    if max_abs_exceeds(values, MAX_GRID_VALUE):  # one pass, no |values| temporary
        raise ValueError("grid values must be at most 2^60 in magnitude.")
    _check_common(kind, scale, key, domain, chunk)
    fill_noise(values, True, kind == DISCRETE_GAUSSIAN, int(scale), key, int(domain),
               int(chunk))
    return values


@numba.njit(cache=True, _nrt=False)
def _uniform_range(io, r, out, start, stop, bound):
    for i in range(start, stop):
        out[i], r = _uniform_below(io, r, bound)


@numba.njit(cache=True)
def _uniform_fill(out, bound, key, domain, chunk):
    for c in range((out.size + chunk - 1) // chunk):
        io, r = _new_reader(key, c, domain)
        _uniform_range(io, r, out, c * chunk, min(out.size, (c + 1) * chunk), bound)


def uniform_integers(bound, size, key, domain, *, chunk=1 << 16):
    """``size`` i.i.d. uniform integers in {0, …, bound − 1} (exact, 1 ≤ bound < 2⁶²)."""
    if not 1 <= bound < 2**62:
        raise ValueError(f"bound must be in [1, 2^62), got {bound}.")
    out = np.empty(int(size), np.int64)
    _uniform_fill(out, int(bound), key, int(domain), int(chunk))
    return out


@numba.njit(cache=True, _nrt=False)
def _shuffle_with(io, r, out):
    # Fisher–Yates: each of n! orders equally likely. Step i draws j = _uniform_below(
    # io, r, i + 1), whose rejection loop reads k = bit length of i bits per try; k is
    # kept here as i decreases (it drops by one when i falls below a power of two)
    # instead of recounted bit by bit at every step, which was about a third of the
    # shuffle's time at n = 10^6. The same bits are read, so the same permutation.
    i = out.size - 1
    if i < 1:
        return
    k = _bit_length(i)
    low = np.int64(1) << (k - 1)  # the smallest i with bit length k
    while i >= 1:
        if i < low:
            k -= 1
            low >>= 1
        j, r = _uniform_below_bits(io, r, i + 1, k)
        out[i], out[j] = out[j], out[i]
        i -= 1


@numba.njit(cache=True)
def _shuffle(out, key, domain):
    io, r = _new_reader(key, 0, domain)
    _shuffle_with(io, r, out)


def permutation(n, key, domain):
    """A uniformly random permutation of ``range(n)`` (Fisher–Yates on exact integers)."""
    out = np.arange(int(n), dtype=np.int64)
    _shuffle(out, key, int(domain))
    return out


def shuffled(items, key, domain):
    """``items[permutation(len(items), key, domain)]`` for an integer array, bit for bit,
    without the index array and the gather: the swaps of Fisher–Yates move the items
    themselves (the swaps depend on positions only, so the item at position i ends
    where index i would). Returns a new int64 array; ``items`` is not modified.
    """
    items = np.asarray(items)
    if items.ndim != 1 or items.dtype.kind not in "iu":
        raise ValueError("items must be a 1-D integer array.")
    out = np.array(items, dtype=np.int64)  # a copy: the shuffle is in place
    _shuffle(out, key, int(domain))
    return out


@numba.njit(cache=True, _nrt=False)
def _coins(io, r, num, den, exp, out):
    for i in range(num.size):
        if not exp:
            out[i], r = _bernoulli_fraction(io, r, num[i], den[i])
            continue
        whole, rem = num[i] // den[i], num[i] % den[i]
        ok = True
        for _ in range(whole):  # exp(−γ) = exp(−1)^⌊γ⌋ exp(−(γ − ⌊γ⌋))
            ok, r = _bernoulli_exp_minus_one(io, r)
            if not ok:
                break
        if ok:
            ok, r = _bernoulli_exp_fraction(io, r, rem, den[i])
        out[i] = ok


@numba.njit(cache=True)
def _bernoulli_fractions(num, den, key, domain):
    io, r = _new_reader(key, 0, domain)
    out = np.empty(num.size, np.bool_)
    _coins(io, r, num, den, False, out)
    return out


@numba.njit(cache=True)
def _bernoulli_exp_fractions(num, den, key, domain):
    io, r = _new_reader(key, 0, domain)
    out = np.empty(num.size, np.bool_)
    _coins(io, r, num, den, True, out)
    return out


def _fractions(num, den):
    num, den = np.asarray(num, np.int64), np.asarray(den, np.int64)
    if num.shape != den.shape or (num < 0).any() or (den <= 0).any() or (den >= 2**62).any():
        raise ValueError("need 0 <= num and 0 < den < 2^62, of one shape.")
    return num.ravel(), den.ravel(), num.shape


def bernoulli_fractions(num, den, key, domain):
    """Independent Bernoulli(num[i]/den[i]) coins (0 ≤ num, 0 < den < 2⁶², exact)."""
    num, den, shape = _fractions(num, den)
    return _bernoulli_fractions(num, den, key, int(domain)).reshape(shape)


def bernoulli_exp_fractions(num, den, key, domain):
    """Independent Bernoulli(exp(−num[i]/den[i])) coins (0 ≤ num, 0 < den < 2⁶², exact)."""
    num, den, shape = _fractions(num, den)
    return _bernoulli_exp_fractions(num, den, key, int(domain)).reshape(shape)


@numba.njit(cache=True, _nrt=False, inline="always")
def _bernoulli_exp_dyadic(io, r, num, frac_bits):
    """Bernoulli(exp(−num/2^frac_bits)) for 0 ≤ num < 2⁶², exactly."""
    den = np.int64(1) << frac_bits
    for _ in range(num >> frac_bits):  # exp(−⌊γ⌋) as ⌊γ⌋ coins
        a, r = _bernoulli_exp_minus_one(io, r)
        if not a:
            return False, r
    return _bernoulli_exp_fraction(io, r, num & (den - 1), den)


@numba.njit(cache=True, _nrt=False)
def _categorical_with(io, r, exponents, frac_bits, out):
    n = exponents.size
    n_bits = _bit_length(n - 1)
    for t in range(out.size):
        while True:  # propose uniformly, accept with probability exp(−e_i/2^b) ≤ 1
            i = 0
            if n > 1:
                i, r = _uniform_below_bits(io, r, n, n_bits)
            a, r = _bernoulli_exp_dyadic(io, r, exponents[i], frac_bits)
            if a:
                out[t] = i
                break


@numba.njit(cache=True)
def _categorical_exp(exponents, frac_bits, out, key, domain):
    io, r = _new_reader(key, 0, domain)
    _categorical_with(io, r, exponents, frac_bits, out)


def categorical_exp(exponents, frac_bits, size, key, domain):
    """``size`` i.i.d. indices i with P[i] ∝ exp(−exponents[i] / 2^frac_bits), exactly.

    Rejection from the uniform proposal; the smallest exponent must be 0 so that the
    expected number of proposals, n / Σ exp(−e_i/2^b), is at most n.

    Parameters
    ----------
    exponents : int64 array
        Non-negative, below 2⁶², with minimum 0.
    frac_bits : int
        b in [0, 61].
    size : int
    key : int64 array of shape (8,)
    domain : int
    """
    exponents = np.ascontiguousarray(exponents, dtype=np.int64)
    if exponents.size == 0 or exponents.min() != 0 or exponents.max() >= 2**62:
        raise ValueError("exponents must be non-empty, in [0, 2^62), with minimum 0.")
    if not 0 <= frac_bits <= 61:
        raise ValueError(f"frac_bits must be in [0, 61], got {frac_bits}.")
    out = np.empty(int(size), np.int64)
    _categorical_exp(exponents, int(frac_bits), out, key, int(domain))
    return out
