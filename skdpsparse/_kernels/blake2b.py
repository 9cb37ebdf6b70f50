"""BLAKE2b in numba, for the multiset digest's one hash per row.

:func:`~skdpsparse.utils._digest.row_multiset_part` hashes every row on its own
(Spark keeps no row order, so rows cannot be hashed in blocks): with ``hashlib`` that
is about ten Python calls per row, 36 µs per row of 16 nonzeros, about 140 times the
bounded sum it accompanies. This module computes the same values in one compiled pass:
BLAKE2b as specified by Saarinen and Aumasson (2015), RFC 7693, "The BLAKE2
Cryptographic Hash and Message Authentication Code (MAC)" (section 3.2, the
compression function F; section 3.3, keyed hashing), with the parameter block's
personalization field of Aumasson, Neves, Wilcox-O'Hearn and Winnerlein (2013),
"BLAKE2: simpler, smaller, fast as MD5" (what ``hashlib.blake2b(person=...)``
sets), checked against ``hashlib.blake2b`` in
``tests/utils/test_digest_multiset.py``.

Only what the row digest needs: 64-byte digests, messages of whole 64-bit words (each
row's message is 16 + 16k bytes), a 64-byte key for the expansion, no salt, sequential
mode. One compiled signature (int64 CSR parts, the values' bits as uint64), so that
two processes compiling at once on a cold cache (two Spark Python workers) can only
write the same code under the same index entry.
"""

import numpy as np
from numba import njit

__all__ = ["initial_state", "row_multiset_limbs"]

_IV = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B,
                0xA54FF53A5F1D36F1, 0x510E527FADE682D1, 0x9B05688C2B3E6C1F,
                0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179], dtype=np.uint64)

_SIGMA = np.array([
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3]], dtype=np.int64)

_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


def initial_state(digest_size, key_size, person):
    """h₀ = IV xor the parameter block (RFC 7693 section 2.5; the personalization in
    words 6 and 7, zero-padded to 16 bytes, as ``hashlib.blake2b(person=...)``)."""
    if len(person) > 16:
        raise ValueError("a BLAKE2b personalization has at most 16 bytes.")
    params = np.zeros(8, dtype=np.uint64)
    # digest length, key length, fanout 1, depth 1 (sequential mode)
    params[0] = digest_size | (key_size << 8) | (1 << 16) | (1 << 24)
    params[6:8] = np.frombuffer(bytes(person).ljust(16, b"\0"), dtype="<u8")
    return _IV ^ params


@njit(inline="always")
def _rotr(x, n):
    return (x >> np.uint64(n)) | (x << np.uint64(64 - n))


@njit(inline="always")
def _g(a, b, c, d, x, y):
    a = a + b + x
    d = _rotr(d ^ a, 32)
    c = c + d
    b = _rotr(b ^ c, 24)
    a = a + b + y
    d = _rotr(d ^ a, 16)
    c = c + d
    b = _rotr(b ^ c, 63)
    return a, b, c, d


@njit(nogil=True)
def _compress(h, m, offset, t, last):
    """F(h, m[offset:offset + 16], t, last) in place on h (RFC 7693 section 3.2);
    t < 2⁶⁴ bytes, so the counter's high word stays 0. The working vector is sixteen
    local scalars (registers), not an array."""
    v0, v1, v2, v3, v4, v5, v6, v7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
    v8, v9, v10, v11 = _IV[0], _IV[1], _IV[2], _IV[3]
    v12 = _IV[4] ^ np.uint64(t)
    v13 = _IV[5]
    v14 = _IV[6] ^ _ALL_ONES if last else _IV[6]
    v15 = _IV[7]
    for r in range(12):
        s = _SIGMA[r]
        v0, v4, v8, v12 = _g(v0, v4, v8, v12, m[offset + s[0]], m[offset + s[1]])
        v1, v5, v9, v13 = _g(v1, v5, v9, v13, m[offset + s[2]], m[offset + s[3]])
        v2, v6, v10, v14 = _g(v2, v6, v10, v14, m[offset + s[4]], m[offset + s[5]])
        v3, v7, v11, v15 = _g(v3, v7, v11, v15, m[offset + s[6]], m[offset + s[7]])
        v0, v5, v10, v15 = _g(v0, v5, v10, v15, m[offset + s[8]], m[offset + s[9]])
        v1, v6, v11, v12 = _g(v1, v6, v11, v12, m[offset + s[10]], m[offset + s[11]])
        v2, v7, v8, v13 = _g(v2, v7, v8, v13, m[offset + s[12]], m[offset + s[13]])
        v3, v4, v9, v14 = _g(v3, v4, v9, v14, m[offset + s[14]], m[offset + s[15]])
    h[0] ^= v0 ^ v8
    h[1] ^= v1 ^ v9
    h[2] ^= v2 ^ v10
    h[3] ^= v3 ^ v11
    h[4] ^= v4 ^ v12
    h[5] ^= v5 ^ v13
    h[6] ^= v6 ^ v14
    h[7] ^= v7 ^ v15


@njit(cache=True, nogil=True)
def row_multiset_limbs(indptr, indices, value_bits, tag, h_rows, h_expand, acc):
    """Adds Σ_rows v(row) to ``acc`` (2048 bits as 32 little-endian uint64 limbs,
    modulo 2²⁰⁴⁸), v as ``_digest._block_value(tag, [k], cols, vals)`` of each row of
    the canonical CSR (``indptr``, ``indices`` as int64, ``value_bits`` the float64
    values' bits): BLAKE2b-512 from ``h_rows`` of the words (tag, k, cols, vals),
    then four BLAKE2b-512 from ``h_expand`` keyed with that digest, of one byte 0..3.
    """
    max_k = 0
    for i in range(indptr.shape[0] - 1):
        max_k = max(max_k, indptr[i + 1] - indptr[i])
    words = 2 + 2 * max_k
    msg = np.zeros(((words + 15) // 16) * 16, dtype=np.uint64)
    key_block = np.zeros(16, dtype=np.uint64)
    one_byte = np.zeros(16, dtype=np.uint64)
    h = np.empty(8, dtype=np.uint64)
    keyed = np.empty(8, dtype=np.uint64)
    out = np.empty(8, dtype=np.uint64)
    for i in range(indptr.shape[0] - 1):
        lo, hi = indptr[i], indptr[i + 1]
        k = hi - lo
        n_words = 2 + 2 * k
        msg[0] = tag
        msg[1] = np.uint64(k)
        for j in range(k):
            msg[2 + j] = np.uint64(indices[lo + j])
            msg[2 + k + j] = value_bits[lo + j]
        n_blocks = (n_words + 15) // 16
        for j in range(n_words, n_blocks * 16):  # zero padding of the last block
            msg[j] = np.uint64(0)
        for j in range(8):
            h[j] = h_rows[j]
        for b in range(n_blocks):
            t = min(128 * (b + 1), 8 * n_words)
            _compress(h, msg, 16 * b, t, b == n_blocks - 1)
        # keyed expansion: the key block (the 64-byte digest, zero-padded) once, then
        # one final block per output byte value
        for j in range(8):
            key_block[j] = h[j]
            keyed[j] = h_expand[j]
        _compress(keyed, key_block, 0, 128, False)
        carry = np.uint64(0)
        for q in range(4):
            for j in range(8):
                out[j] = keyed[j]
            one_byte[0] = np.uint64(q)
            _compress(out, one_byte, 0, 129, True)
            for j in range(8):
                a = acc[8 * q + j]
                x = a + out[j]
                c1 = x < a
                y = x + carry
                c2 = y < x
                acc[8 * q + j] = y
                carry = np.uint64(1) if (c1 or c2) else np.uint64(0)
    return acc
