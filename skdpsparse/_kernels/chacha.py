"""The ChaCha20 block function (Bernstein 2008; IETF RFC 8439, Section 2.3) in numba.

ChaCha20 is the library's only source of random bits for privacy-relevant draws: a
stream cipher whose keystream is a pseudo-random function of (key, block counter,
nonce), so blocks can be computed in any order and in parallel, and the same key and
stream always give the same bits on every machine and thread count. The kernels here
are checked against the test vector of RFC 8439 Section 2.3.2 and against the
``cryptography`` package's ChaCha20 (tests/kernels/test_kernels_chacha.py).

Compiled with ``_nrt=False`` (no reference counting: these functions allocate nothing),
because numba's reference-count updates on every array argument cost more than the
block function itself when it is called from the bit readers of :mod:`.exact_sampling`.

State words are uint32 but numba widens uint32 arithmetic to 64 bits; every addition,
xor and rotation is therefore cast back to ``np.uint32`` as it is made (:func:`_rotl`),
which keeps it modulo 2^32 and lets LLVM keep the lanes 32 bits wide. Blocks are
computed ``LANES`` at a time in a (16, LANES) array with the lane loop innermost, which
LLVM vectorizes: about 2 GB/s of keystream per core here, against 1.0 GB/s with the
former 64-bit lanes and 32-bit masks (same words; ``benchmarks/bench_kernels.py``) and
0.5 GB/s one block at a time.
"""

import numba
import numpy as np

__all__ = ["LANES", "chacha20_blocks", "chacha20_keystream", "key_words"]

LANES = 32  # blocks computed together; a multiple of the SIMD width
_MASK = 0xFFFFFFFF
_CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"
# The column rounds, then the diagonal rounds (RFC 8439 Section 2.3).
_QUARTER_ROUNDS = ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
                   (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14))


def key_words(key):
    """The eight little-endian 32-bit words of a 32-byte key, as an int64 array."""
    key = bytes(key)
    if len(key) != 32:
        raise ValueError(f"a ChaCha20 key has 32 bytes, got {len(key)}.")
    return np.frombuffer(key, dtype="<u4").astype(np.int64)


@numba.njit(cache=True, _nrt=False, inline="always")
def _rotl(v, k):
    """The uint32 ``v`` rotated left by ``k`` bits (0 < k < 32), as uint32."""
    return np.uint32((v << np.uint32(k)) | (v >> np.uint32(32 - k)))


@numba.njit(cache=True, _nrt=False, inline="always")
def _quarter_round(x, a, b, c, d):
    """One ChaCha quarter round on column (a, b, c, d) of every lane of ``x``."""
    for lane in range(LANES):
        xa = np.uint32(x[a, lane] + x[b, lane])
        xd = _rotl(np.uint32(x[d, lane] ^ xa), 16)
        xc = np.uint32(x[c, lane] + xd)
        xb = _rotl(np.uint32(x[b, lane] ^ xc), 12)
        xa = np.uint32(xa + xb)
        xd = _rotl(np.uint32(xd ^ xa), 8)
        xc = np.uint32(xc + xd)
        xb = _rotl(np.uint32(xb ^ xc), 7)
        x[a, lane] = xa
        x[b, lane] = xb
        x[c, lane] = xc
        x[d, lane] = xd


@numba.njit(cache=True, _nrt=False)
def chacha20_blocks(key, counter, nonce0, nonce1, nonce2, x, s, out):
    """Blocks ``counter, counter + 1, ..., counter + LANES - 1`` of one ChaCha20 stream.

    Parameters
    ----------
    key : int64 array of shape (8,)
        The key words (:func:`key_words`).
    counter : int
        The 32-bit block counter of the first lane (RFC 8439 state word 12).
    nonce0, nonce1, nonce2 : int
        The 96-bit nonce as three 32-bit words (state words 13-15).
    x, s : uint32 arrays of shape (16, LANES)
        Scratch space, two distinct arrays: the working state and the input state.
    out : uint32 array of shape (LANES * 16,)
        The keystream words, block after block (block ``i`` at ``out[16 i : 16 i + 16]``).
    """
    for lane in range(LANES):
        s[0, lane] = _CONSTANTS[0]
        s[1, lane] = _CONSTANTS[1]
        s[2, lane] = _CONSTANTS[2]
        s[3, lane] = _CONSTANTS[3]
        for i in range(8):
            s[4 + i, lane] = key[i]
        s[12, lane] = (counter + lane) & _MASK
        s[13, lane] = nonce0 & _MASK
        s[14, lane] = nonce1 & _MASK
        s[15, lane] = nonce2 & _MASK
    for i in range(16):
        for lane in range(LANES):
            x[i, lane] = s[i, lane]
    for _ in range(10):  # 20 rounds: a column round and a diagonal round each
        _quarter_round(x, 0, 4, 8, 12)  # the columns (_QUARTER_ROUNDS, spelled out so
        _quarter_round(x, 1, 5, 9, 13)  # that each call is inlined with constant rows)
        _quarter_round(x, 2, 6, 10, 14)
        _quarter_round(x, 3, 7, 11, 15)
        _quarter_round(x, 0, 5, 10, 15)  # the diagonals
        _quarter_round(x, 1, 6, 11, 12)
        _quarter_round(x, 2, 7, 8, 13)
        _quarter_round(x, 3, 4, 9, 14)
    for lane in range(LANES):
        for i in range(16):
            out[16 * lane + i] = np.uint32(x[i, lane] + s[i, lane])


@numba.njit(cache=True)
def _keystream(key, counter, nonce0, nonce1, nonce2, n_blocks, out):
    buf = np.empty(16 * LANES, np.uint32)
    x, s = np.empty((16, LANES), np.uint32), np.empty((16, LANES), np.uint32)
    for start in range(0, n_blocks, LANES):
        chacha20_blocks(key, counter + start, nonce0, nonce1, nonce2, x, s, buf)
        stop = min(n_blocks - start, LANES) * 16
        out[16 * start: 16 * start + stop] = buf[:stop]


def chacha20_keystream(key, n_blocks, *, counter=0, nonce=b"\x00" * 12):
    """``n_blocks`` blocks of ChaCha20 keystream as bytes (RFC 8439 Section 2.4 layout).

    Parameters
    ----------
    key : bytes of length 32
    n_blocks : int
    counter : int, default=0
        The initial 32-bit block counter.
    nonce : bytes of length 12

    Returns
    -------
    bytes of length 64 * n_blocks

    Examples
    --------
    The test vector of RFC 8439 Section 2.3.2:

    >>> from skdpsparse._kernels.chacha import chacha20_keystream
    >>> nonce = bytes.fromhex("000000090000004a00000000")
    >>> chacha20_keystream(bytes(range(32)), 1, counter=1, nonce=nonce)[:16].hex()
    '10f1e7e4d13b5915500fdd1fa32071c4'
    """
    nonce = bytes(nonce)
    if len(nonce) != 12:
        raise ValueError(f"a ChaCha20 nonce has 12 bytes, got {len(nonce)}.")
    if not (0 <= counter and counter + n_blocks <= 2**32):  # never reuse the stream
        raise ValueError("the 32-bit block counter would wrap around.")
    words = np.frombuffer(nonce, dtype="<u4").astype(np.int64)
    out = np.empty(16 * int(n_blocks), np.uint32)
    _keystream(key_words(key), int(counter), words[0], words[1], words[2], int(n_blocks), out)
    return out.astype("<u4").tobytes()
