"""A plain-Python reference of skdpsparse._kernels.exact_sampling.

The same algorithms (Canonne, Kamath and Steinke 2020, Algorithms 1-3, with the
changes stated in the kernel module) on Python ints, reading bits from an independent
ChaCha20 (the ``cryptography`` package), in the same order as the kernels. The
kernels must give the same draws bit for bit.
"""

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

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


def uniform_below(bits, n):
    if n <= 1:
        return 0
    k = (n - 1).bit_length()
    while True:
        v = bits.take(k) if k <= 32 else (bits.take(k - 32) << 32) | bits.take(32)
        if v < n:
            return v


def bernoulli_fraction(bits, num, den):
    if num >= den:
        return True
    rem = num
    while rem:
        rem <<= 1
        digit = int(rem >= den)
        rem -= digit * den
        bit = bits.take(1)
        if bit != digit:
            return bit < digit
    return False


def bernoulli_exp_fraction(bits, num, den):
    k = 1
    while bernoulli_fraction(bits, num, den) and (k == 1 or uniform_below(bits, k) == 0):
        k += 1
    return k % 2 == 1


def bernoulli_exp_minus_one(bits):
    k = 1
    while k == 1 or uniform_below(bits, k) == 0:
        k += 1
    return k % 2 == 1


def bernoulli_exp_half_square(bits, q, r, n):
    for i in range(1, q + 1):
        if not bernoulli_exp_fraction(bits, 1, 2):
            return False
        for _ in range(i - 1):
            if not bernoulli_exp_minus_one(bits):
                return False
    for _ in range(q):
        if not bernoulli_exp_fraction(bits, r, n):
            return False
    k = 1
    while (bernoulli_fraction(bits, r, n) and bernoulli_fraction(bits, r, n)
           and bits.take(1) == 1 and (k == 1 or uniform_below(bits, k) == 0)):
        k += 1
    return k % 2 == 1


def draw(bits, gaussian, n):
    while True:
        u = uniform_below(bits, n)
        if not bernoulli_exp_fraction(bits, u, n):
            continue
        v = 0
        while bernoulli_exp_minus_one(bits):
            v += 1
        negative = bits.take(1) == 1
        if negative and u == 0 and v == 0:
            continue
        if gaussian:
            q, r = (v - 1, u) if v >= 1 else ((1, 0) if u == 0 else (0, n - u))
            if not bernoulli_exp_half_square(bits, q, r, n):
                continue
        y = min(u + v * n, SATURATED)
        return -y if negative else y


def discrete_noise(size, gaussian, n, key, domain, chunk):
    out = []
    for c in range((size + chunk - 1) // chunk):
        bits = Bits(key, c, domain)
        out += [draw(bits, gaussian, n) for _ in range(min(chunk, size - c * chunk))]
    return out
