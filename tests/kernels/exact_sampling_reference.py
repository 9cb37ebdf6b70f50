"""An independent bit source for checking the exact samplers.

The kernels read ChaCha20 through the library's own numba implementation
(:mod:`skdpsparse._kernels.chacha`); here the same keystream comes from the
``cryptography`` package, and the exact algorithm of
:mod:`skdpsparse._kernels.grid_noise_exact` (exact arithmetic throughout) turns it
into draws. The kernels must give the same draws bit for bit.
"""

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from skdpsparse._kernels.grid_noise import noise_tables
from skdpsparse._kernels.grid_noise_exact import draw

SATURATED = 1 << 62


class Bits:
    """Bits of the ChaCha20 keystream with nonce (chunk, chunk >> 32, domain)."""

    def __init__(self, key, chunk, domain):
        nonce = ((0).to_bytes(4, "little") + (chunk & 0xFFFFFFFF).to_bytes(4, "little")
                 + ((chunk >> 32) & 0xFFFFFFFF).to_bytes(4, "little")
                 + domain.to_bytes(4, "little"))
        self._enc = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()
        self._pool, self._nbits = 0, 0

    def take(self, k):
        while self._nbits < k:  # 32-bit little-endian words, most significant bit first
            word = int.from_bytes(self._enc.update(bytes(4)), "little")
            self._pool = (self._pool << 32) | word
            self._nbits += 32
        self._nbits -= k
        out = self._pool >> self._nbits
        self._pool &= (1 << self._nbits) - 1
        return out


def discrete_noise(size, gaussian, n, key, domain, chunk):
    """What ``exact_sampling.discrete_noise`` must return, from independent bits."""
    b, log_k, _, _, upper = noise_tables(n)
    out = []
    for c in range((size + chunk - 1) // chunk):
        bits = Bits(key, c, domain)
        for _ in range(min(chunk, size - c * chunk)):
            y = draw(bits, gaussian, n, int(b), int(log_k), upper.size)
            out.append(max(-SATURATED, min(SATURATED, y)))
    return out
