"""The bit reader of every exact sampler: uniform random bits from the ChaCha20 keystream.

A reader on stream (chunk, domain) hands out k ≤ 32 bits at a time (:func:`_bits`) and
uniform integers below n by rejection (:func:`_uniform_below`), exact because every
bit is a keystream bit (:mod:`.chacha`, Bernstein 2008, "ChaCha, a variant of Salsa20";
RFC 8439). It sits below both the Bernoulli factories of :mod:`.exact_sampling` and the
table sampler of :mod:`.grid_noise`, which share it.
"""

import numba
import numpy as np

from .chacha import LANES, chacha20_blocks

_WORDS = 16 * LANES

# A bit reader is two parts. ``io = (key, buf, x, s, nonce0, nonce1, nonce2)``: the key,
# the keystream buffer and ChaCha20's scratch arrays, which only a refill touches. And
# ``r = (pool, pool_bits, pos, counter)``: four ints that every helper takes and
# returns, so that in the compiled loops they live in registers (kept in an array, the
# store-load chain through memory cost more than the arithmetic of a draw).


@numba.njit(cache=True)
def _new_reader(key, chunk_index, domain):
    """A bit reader on stream (chunk_index, domain): ``(io, r)`` (see above)."""
    buf = np.empty(_WORDS, np.uint32)
    x, s = np.empty((16, LANES), np.uint32), np.empty((16, LANES), np.uint32)
    io = (key, buf, x, s, chunk_index & 0xFFFFFFFF, (chunk_index >> 32) & 0xFFFFFFFF,
          domain & 0xFFFFFFFF)
    r = (np.int64(0), np.int64(0), np.int64(_WORDS), np.int64(0))  # empty: first read fills
    return io, r


@numba.njit(cache=True, _nrt=False, inline="always")
def _bits(io, r, k):
    """``k`` uniform random bits, 1 ≤ k ≤ 32, as a non-negative int; and the new state."""
    pool, pool_bits, pos, counter = r
    if pool_bits < k:
        if pos == _WORDS:
            if counter + LANES > 0xFFFFFFFF:
                raise RuntimeError("a ChaCha20 stream ran out of blocks.")
            key, buf, x, s, nonce0, nonce1, nonce2 = io
            chacha20_blocks(key, counter, nonce0, nonce1, nonce2, x, s, buf)
            counter += LANES
            pos = 0
        pool = (pool << 32) | np.int64(io[1][pos])
        pos += 1
        pool_bits += 32
    pool_bits -= k
    out = (pool >> pool_bits) & ((np.int64(1) << k) - 1)
    pool &= (np.int64(1) << pool_bits) - 1
    return out, (pool, pool_bits, pos, counter)


@numba.njit(cache=True, _nrt=False, inline="always")
def _bit_length(n):
    k = 0
    while n > 0:
        n >>= 1
        k += 1
    return k


@numba.njit(cache=True, _nrt=False, inline="always")
def _uniform_below(io, r, n):
    """Uniform on {0, …, n − 1}, 1 ≤ n < 2⁶², by rejection (exact)."""
    if n <= 1:
        return 0, r
    return _uniform_below_bits(io, r, n, _bit_length(n - 1))


@numba.njit(cache=True, _nrt=False, inline="always")
def _uniform_below_bits(io, r, n, k):
    """:func:`_uniform_below` with k = bit length of n − 1 given (n ≥ 2)."""
    while True:
        if k <= 32:
            v, r = _bits(io, r, k)
        else:
            hi, r = _bits(io, r, k - 32)
            lo, r = _bits(io, r, 32)
            v = (hi << 32) | lo
        if v < n:
            return v, r
