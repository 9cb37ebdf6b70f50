"""Adversarial review of the fast exact noise sampler (issue 16):
``skdpsparse/_kernels/grid_noise.py`` (the kernel: table inversion with certified
floating-point decisions), ``grid_noise_exact.py`` (the ideal algorithm in exact
arithmetic, its specification and its fallback) and their use by
``exact_sampling.discrete_noise``/``add_discrete_noise``.

Claims attacked, one section each:

1. the law is exactly the discrete Laplace / discrete Gaussian (the decomposition
   |Y| = (HK + L)B + R, the exact primitives enumerated over every bit string to a
   depth, and large chi-square tests of the kernel);
2. the kernel's draws are the ideal algorithm's, draw for draw (adversarial scales,
   the error bounds of ``_exp_neg`` and of the tables at their worst points, and the
   kernel's decisions on bit strings placed at the margin of every threshold);
3. the fallback and the resumption are exact (chunks of one draw, add mode at the
   grid bound, saturation, thread count, a forked process);
4. no side channel through the data (the fallback count and the noise in add mode do
   not depend on the values);
5. termination.

One break was found (section 6, fixed; these tests failed before the fix): the exact algorithm's
interval bounds on exp(−q) negate q under the *caller's* thread-local ``decimal``
context (``-q_lo`` rounds to its precision, 28 digits by default), so the brackets
converge to exp(−q rounded to 28 digits) instead of exp(−q): the "exact" algorithm
decides wrongly for a uniform within ~1e-28 of a threshold, its draws change with the
caller's ``decimal.getcontext()`` (prec = 4 changes most fallback draws), and a caller
that traps ``Inexact`` gets an exception from a fallback (a random event). The fix is
to negate exactly (``q_lo.copy_negate()``), see the tests. Two more, also fixed: the
module's explicit contexts copied ``decimal.DefaultContext``'s traps, and a
fractional ``scale`` was truncated by ``int()`` instead of refused.

Found without a break of exactness, and since fixed: with float tables the fallback
rate was a function of N. Where a table threshold lay within the margin of a shallow
dyadic cell end (N_HALF below: λ within 1e-16 of 1/2), every uniform in the adjacent
cells fell back (40 % of the draws, exact but slow). The tables are now exact 63-bit
words; the tests of section 2 probe every word and the dyadic points next to them,
and catch words one unit off or rounded from floats.

The statistical tests use a fixed key, so they are deterministic; their stated
tolerance is a p-value above 1e-4 on that key.
"""

import decimal
import math
import multiprocessing
from decimal import Context, Decimal
from fractions import Fraction

import numba
import numpy as np
import pytest
from scipy import stats

from skdpsparse._kernels import bit_reader
from skdpsparse._kernels import exact_sampling as es
from skdpsparse._kernels import grid_noise as gn
from skdpsparse._kernels import grid_noise_exact as gx
from skdpsparse._kernels.chacha import key_words

KEY = key_words(bytes(range(32)))
LAPLACE, GAUSSIAN = es.DISCRETE_LAPLACE, es.DISCRETE_GAUSSIAN


def _truth(q, digits=80):
    """exp(−q) for a rational q, to about ``digits`` digits (independent of the module:
    the negation is done on the integers, every operation in an explicit context)."""
    ctx = Context(prec=digits)
    return Fraction(ctx.exp(ctx.divide(Decimal(-q.numerator), Decimal(q.denominator))))


def _tables(n):
    b, log_k, lower, guide, upper = gn.noise_tables(n)
    return int(b), int(log_k), lower, guide, upper


def _mid(bounds, digits=50):
    lo, hi = bounds(digits)
    return (lo + hi) / 2


# --------------------------------------------------------------------------------------
# 1. The law.


class _Need(Exception):
    pass


class _Prefix:
    """A bit source that delivers a fixed prefix and asks for more past its end."""

    def __init__(self, prefix):
        self.prefix, self.offset = prefix, 0

    def take(self, k):
        if self.offset + k > len(self.prefix):
            raise _Need(self.offset + k - len(self.prefix))
        out = int(self.prefix[self.offset:self.offset + k], 2)
        self.offset += k
        return out


def _enumerate(run, depth):
    """The exact law of ``run(bits)`` over uniform bits, to ``depth`` bits: every bit
    string is extended exactly as far as ``run`` reads it. Returns the law (outcome →
    probability) and the mass of the strings cut at the depth."""
    law, lost, stack = {}, Fraction(0), [""]
    while stack:
        prefix = stack.pop()
        bits = _Prefix(prefix)
        try:
            out = run(bits)
        except _Need as need:
            extra = need.args[0]
            if len(prefix) + extra > depth:
                lost += Fraction(1, 1 << len(prefix))
            else:
                stack.extend(prefix + format(v, f"0{extra}b") for v in range(1 << extra))
            continue
        assert bits.offset == len(prefix)  # a leaf reads its whole string
        law[out] = law.get(out, 0) + Fraction(1, 1 << len(prefix))
    return law, lost


@pytest.mark.parametrize("n", [2, 3, 5, 7])
def test_exact_primitives_have_the_laws_of_their_thresholds(n):
    # count_above and below of the ideal algorithm, run on every bit string to 28 bits:
    # P(count = j) must be T_j − T_{j+1} up to the cut mass (a wrong first read, a
    # wrong cell test or a wrong binary search would move a whole cell, 2^-4 or more).
    b, log_k, lower, guide, upper = _tables(n)
    exact_lower, exact_upper = gx._tables(n, b, log_k, upper.size)
    for thresholds, first in [(exact_lower, log_k + 2), (exact_upper, gx.GROUP)]:
        law, lost = _enumerate(lambda bits: gx.count_above(bits, thresholds, first), 28)
        assert lost < 2.0 ** -18
        t = [Fraction(1)] + [_mid(f) for f in thresholds] + [Fraction(0)]
        for j in range(len(thresholds) + 1):
            assert abs(law.get(j, 0) - (t[j] - t[j + 1])) <= lost + Fraction(1, 10**25)
    threshold = gx.truncated_tail(Fraction(1, n), Fraction(2, n) + Fraction(1, 3))
    law, lost = _enumerate(lambda bits: gx.below(bits, threshold), 40)
    assert abs(law.get(True, 0) - _mid(threshold)) <= lost + Fraction(1, 10**25)


@pytest.mark.parametrize("n", [2, 3, 1000, 2047, 2**29 + 12345, 2**50])
def test_decomposition_is_the_discrete_laplace_and_gaussian(n):
    # With the module's own thresholds (50 digits): P(H = h) P(L = l) P(R = r) is
    # (1 − μ) μ^m at m = (hK + l)B + r, μ = e^{−1/N}; with the sign and the rejection of
    # −0, P(y) = (1 − μ)/(1 + μ) μ^|y|; the Gaussian rejection with t = N leaves
    # P(y) ∝ exp(−y²/(2N²)). Checked at the boundaries of every part.
    b, log_k, lower, guide, upper = _tables(n)
    k, big_b = 1 << log_k, 1 << b
    exact_lower, exact_upper = gx._tables(n, b, log_k, upper.size)
    ctx = Context(prec=50)
    mu = _truth(Fraction(1, n), 60)
    lam = _mid(exact_upper[0])
    for h, f in enumerate(exact_upper, 1):
        assert abs(_mid(f) - lam ** h) < Fraction(1, 10**20)
    t = [Fraction(1)] + [_mid(f) for f in exact_lower] + [Fraction(0)]
    mu_b = _truth(Fraction(big_b, n), 60)
    p_r_zero = (1 - mu) / (1 - mu_b)  # P(R = 0); P(R = r) = p_r_zero e^{−r/N}
    for h in [0, 1, upper.size - 1, upper.size, upper.size + 3]:
        for ell in sorted({0, 1, k // 2, k - 1}):
            for r in sorted({0, 1, big_b // 3, big_b - 1}):
                m = (h * k + ell) * big_b + r
                p = (1 - lam) * lam ** h * (t[ell] - t[ell + 1]) * p_r_zero * _truth(
                    Fraction(r, n), 60)
                want = (1 - mu) * _truth(Fraction(m, n), 60)
                assert abs(p / want - 1) < Fraction(1, 10**20)
                laplace = p / 2 / (1 - (1 - mu) / 2)
                assert abs(laplace / ((1 - mu) / (1 + mu) * _truth(Fraction(m, n), 60))
                           - 1) < Fraction(1, 10**20)
                gauss = laplace * _truth(Fraction((m - n) ** 2, 2 * n * n), 60)
                ratio = gauss / _truth(Fraction(m * m, 2 * n * n), 60)
                assert abs(ratio / ((1 - mu) / (1 + mu) * Fraction(ctx.exp(Decimal(-0.5))))
                           - 1) < Fraction(1, 10**20)


def _pmf(kind, n, support):
    y = np.arange(-support, support + 1)
    w = np.exp(-np.abs(y) / n) if kind == LAPLACE else np.exp(-(y / n) ** 2 / 2)
    return y, w / w.sum()


def _chi2_pvalue(observed, probabilities):
    """Chi-square p-value; cells expected below 20 draws are pooled into one."""
    expected = probabilities / probabilities.sum() * observed.sum()
    keep = expected > 20
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("kind", [LAPLACE, GAUSSIAN])
@pytest.mark.parametrize("n", [2, 3, 7])
def test_kernel_law_at_small_scales(kind, n):
    # 10^6 draws against the exact probability mass function (every value with an
    # expected count above 20 a cell of its own): a wrong threshold, a zero counted
    # twice or a wrong Gaussian acceptance would be far beyond this test's resolution.
    draws = es.discrete_noise(10**6, kind, n, KEY, 11)
    y, p = _pmf(kind, n, 40 * n)
    observed = np.bincount(np.clip(draws, -40 * n, 40 * n) + 40 * n, minlength=y.size)
    assert _chi2_pvalue(observed, p) > 1e-4


@pytest.mark.parametrize("n", [2**29 + 12345, 2**50])
def test_kernel_buckets_at_large_scales(n):
    # The discrete Laplace's magnitude split as the kernel builds it: L = the bucket
    # (|Y| div B) mod K must have P(L = l) ∝ exp(−lB/N), and H = |Y| div KB be geometric
    # (independent parts, so the marginals are exact); the Gaussian against the normal
    # law in 1000 equiprobable cells (at σ ≥ 2^29 the discrete and continuous laws
    # differ by far less than the test resolves).
    b, log_k, *_ = _tables(n)
    k, big_b = 1 << log_k, 1 << b
    mags = np.abs(es.discrete_noise(10**6, LAPLACE, n, KEY, 12))
    bucket, h = (mags >> b) & (k - 1), mags >> (b + log_k)
    p = np.exp(-np.arange(k) * big_b / n)
    assert _chi2_pvalue(np.bincount(bucket, minlength=k), p / p.sum()) > 1e-4
    lam = math.exp(-k * big_b / n)
    ph = np.append((1 - lam) * lam ** np.arange(39), lam ** 39)
    assert _chi2_pvalue(np.bincount(np.minimum(h, 39), minlength=40), ph) > 1e-4
    gauss = es.discrete_noise(10**6, GAUSSIAN, n, KEY, 13) / n
    cells = np.searchsorted(stats.norm.ppf(np.arange(1, 1000) / 1000), gauss)
    assert _chi2_pvalue(np.bincount(cells, minlength=1000), np.full(1000, 1e-3)) > 1e-4


# --------------------------------------------------------------------------------------
# 2. The kernel is the ideal algorithm, draw for draw.

ADVERSARIAL_SCALES = [
    2, 3, 4, 6, 1023, 1024, 1025, 2047, 2048, 2049, 3 * 2**20, 2**32 - 1, 2**42 - 1,
    2**42, 2**43 - 1, 2**43, 2**43 + 1, 2**49 + 2**48, 2**50 - 1, 2**50,
]  # K·B/N = 1 (powers of two), just above 1/2 (2^k − 1), b = 32/33 (the 2-read R)


@pytest.mark.parametrize("gaussian", [False, True])
def test_kernel_equals_the_exact_algorithm_at_adversarial_scales(gaussian):
    for n in ADVERSARIAL_SCALES:
        b, log_k, lower, guide, upper = _tables(n)
        assert 0.5 < (1 << (log_k + b)) / n <= 1
        values = np.zeros(24, np.int64)
        assert gn.fill_noise(values, False, gaussian, n, KEY, 21, 8) == 0
        want = []
        for c in range(3):
            want += gx.exact_chunk(8, gaussian, n, b, log_k, upper.size, KEY, c, 21)
        assert values.tolist() == want, n


# Scales whose H thresholds λ^h sit almost on a dyadic cell end: at N_HALF,
# λ = exp(−2^49/N) is within 1e-16 of 1/2 (and λ², λ³ of 1/4, 1/8), so every V in the
# 4-bit cells next to those ends is within the margin and the draw falls back (about
# 40 % of the draws, measured: thousands of times slower, but still exact); N_LEVEL10
# is in the range the grid plans use (2^29 ≤ N < 2^30) with λ^4 within 6e-14 of a
# multiple of 2^-10 (one draw in about 2000 falls back).
N_HALF, N_LEVEL10 = 812165106069600, 879094685


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("n", [N_HALF, N_LEVEL10])
def test_kernel_equals_the_exact_algorithm_at_near_dyadic_thresholds(gaussian, n):
    b, log_k, lower, guide, upper = _tables(n)
    lam = _truth(Fraction(1 << (b + log_k), n), 40)
    assert n != N_HALF or abs(lam - Fraction(1, 2)) < Fraction(1, 10**15)
    values = np.zeros(48, np.int64)
    gn.fill_noise(values, False, gaussian, n, KEY, 22, 16)
    want = []
    for c in range(3):
        want += gx.exact_chunk(16, gaussian, n, b, log_k, upper.size, KEY, c, 22)
    assert values.tolist() == want


def test_exp_neg_error_at_its_worst_points():
    # Every table boundary j/64 and ± 3 ulps around it, the cut-off 36, the largest
    # Taylor remainder (s → 1/64), and the Gaussian argument path 0.5·(d/n)² at large n
    # with d not representable: all within 2^-49 (2^-44 for the composed argument).
    grid = np.arange(0, 36 * 64 + 1) / 64.0
    pts, down, up = [grid, grid + (1 / 64 - 2.0**-40)], grid, grid
    for _ in range(3):
        down, up = np.nextafter(down, 0), np.nextafter(up, 100)
        pts += [down, up]
    z = np.unique(np.concatenate(pts))
    z = z[z >= 0]
    worst = max(abs(Fraction(gn._exp_neg(float(v))) - _truth(Fraction(float(v)), 40))
                for v in z)
    assert worst < Fraction(1, 2**49)
    rng = np.random.default_rng(1)
    for n in [2**50, 2**50 - 1, 2**43 + 1]:
        for d in rng.integers(1, 9 * n, 300):
            x = float(int(d)) / float(n)
            got = gn._exp_neg(0.5 * x * x)
            want = _truth(Fraction(int(d) ** 2, 2 * n * n), 40)
            assert abs(Fraction(got) - want) < Fraction(1, 2**44)


@pytest.mark.parametrize("n", [2**11 - 1, 2**20 - 1, 2**31, 2**33 - 1, 2**47 + 2**46 - 1,
                               N_HALF, N_LEVEL10])
def test_table_words_are_exact_at_adversarial_scales(n):
    # Each word must be ⌊2⁶³ T⌋ for its threshold T, checked against exp(−q) computed
    # here independently of the module (80 digits, the negation on the integers).
    b, log_k, lower, guide, upper = _tables(n)
    k, big_b = 1 << log_k, 1 << b
    lam = _truth(Fraction(k * big_b, n), 80)
    for j, word in enumerate(lower, 1):
        t = (_truth(Fraction(j * big_b, n), 80) - lam) / (1 - lam)
        assert int(word) == math.floor(t * 2**63), (n, j)
    for h, word in enumerate(upper, 1):
        assert int(word) == math.floor(_truth(Fraction(h * k * big_b, n), 80) * 2**63)
    assert np.all(np.diff(lower) < 0) and np.all(np.diff(upper) < 0)


def _reader(v):
    """A kernel bit reader whose next 64 bits are those of the dyadic v ∈ [0, 1): the
    layout of bit_reader._new_reader, built here (a compiled function returning
    arrays to Python can fail to box them when numba's on-disk cache is shared)."""
    buf = np.zeros(bit_reader._WORDS, np.uint32)
    word = int(v * 2**64)
    buf[0], buf[1] = word >> 32, word & 0xFFFFFFFF
    scratch = np.zeros((16, bit_reader._WORDS // 16), np.uint32)
    io = (KEY, buf, scratch, scratch.copy(), 0, 0, 0)
    return io, (np.int64(0), np.int64(0), np.int64(0), np.int64(0))


def _probes(computed, truth):
    """Uniforms just past the margin of the computed threshold, on both sides, at the
    cut-off depth, and just past the certified error of the true one."""
    out = []
    for base, deltas in [(computed, [gn.MARGIN * 1.001, 2.0**-36, 2.0**-33, 2.0**-20]),
                         (float(truth), [2.0**-45, 2.0**-43, 2.0**-41])]:
        for d in deltas:
            for v in (base - d, base + d):
                if 0 <= v < 1:
                    out.append(Fraction(math.floor(v * 2**64), 2**64))
    return out


def _word_probes(words):
    """63-bit uniforms at every word and one unit either side (where the kernel must
    abort, or decide as the specification does), and on both sides of every dyadic
    point of depth ≤ 12 within 2^-20 of a word (where the specification's read depth
    depends on which side of the point the threshold lies: the float kernel's slow
    scales)."""
    out = set()
    for t in (int(w) for w in words):
        out.update(v for v in (t - 1, t, t + 1) if 0 <= v < 2**63)
        for depth in range(1, 13):
            point = round(t / 2 ** (63 - depth)) << (63 - depth)
            if abs(point - t) < 2**43:
                out.update(v for v in (point - 2**40 - 7, point - 1, point,
                                       point + 2**40 + 7) if 0 <= v < 2**63)
    return sorted(out)


def _kernel_count(words, kind, v, log_k):
    """The kernel's count on a reader whose next 64 bits are 2v + 1, and the bits it
    consumed (0 when it aborts, −1)."""
    io, r = _reader(Fraction(2 * v + 1, 2**64))
    if kind == "upper":
        h_max = words.size
        table = np.concatenate([words, np.full(gn._H_PAD - h_max, -1, np.int64),
                                gn._guide(words, gn._H_BITS)])
        got, after = gn._count_h(io, r, table, h_max, gn._MAX_DEPTH)
    else:
        table = np.append(words, np.int64(-1))
        guide = gn._guide(words, log_k + gx.GROUP).astype(np.int16)
        got, after = gn._count_l(io, r, table, words.size, guide, log_k, gn._MAX_DEPTH)
    consumed = int(after[2]) * 32 - int(after[1])
    return int(got), (consumed if got >= 0 else 0)


def _disagreements(n, words_of):
    """Probes where the kernel, run on the words ``words_of(kind, exact words)``, takes
    a decision other than the specification's or consumes other bits than it."""
    b, log_k, lower, guide, upper = _tables(n)
    exact_lower, exact_upper = gx._tables(n, b, log_k, upper.size)
    bad = []
    for kind, words, exact, first in [("lower", lower, exact_lower, log_k + gx.GROUP),
                                      ("upper", upper, exact_upper, gx.H_BITS)]:
        used = words_of(kind, words)
        for v in _word_probes(words):
            got, consumed = _kernel_count(used, kind, v, log_k)
            if got == -1:
                continue  # an abort is always allowed: the fallback decides exactly
            bits = _Prefix(format(2 * v + 1, "064b")[:63])
            try:
                want = (gx.count_above(bits, exact, first), bits.offset)
            except _Need:
                want = None  # the specification reads past 63 bits: the kernel must abort
            if (got, consumed) != want:
                bad.append((kind, v, got, consumed, want))
    return bad


def _float_words(kind, words, n):
    """The broken variant: words rounded from the float kernel's thresholds (error
    ≤ 2^-44), what "64-bit thresholds from floats" would give."""
    b, log_k = _tables(n)[:2]
    rate = float(1 << (log_k + b)) / float(n)
    lam = gn._exp_neg(rate)
    if kind == "upper":
        values = [gn._exp_neg(h * rate) for h in range(1, words.size + 1)]
    else:
        values = [(gn._exp_neg(float(j << b) / float(n)) - lam) / (1.0 - lam)
                  for j in range(1, words.size + 1)]
    return np.array([math.floor(Fraction(x) * 2**63) for x in values], np.int64)


@pytest.mark.parametrize("n", [3, 2047, N_HALF, N_LEVEL10, 2**50 - 1])
def test_kernel_table_decisions_at_every_word_and_nearby_dyadic_point(n):
    # Every probe at a word, one unit from it, or next to a shallow dyadic point near
    # it: the kernel's count and the bits it consumes must be the specification's
    # (read on the same 63 bits), or it must abort. Attack first: words off by one
    # unit, and words rounded from float thresholds (the float kernel's slow-scale
    # trouble), are both caught at the slow scale N_HALF.
    assert _disagreements(n, lambda kind, words: words) == []
    if n == N_HALF:
        assert _disagreements(n, lambda kind, words: words + 1)
        assert _disagreements(n, lambda kind, words: _float_words(kind, words, n))


@pytest.mark.parametrize("n", [3, 2047, N_HALF, N_LEVEL10, 2**50 - 1])
def test_one_look_table_parts_at_the_truncated_words(n):
    # _table_parts decides L on the 55 bits left after H's first byte, against the
    # words' first 55 bits. Probes: H's byte 0xFF (H = 0, decided at 8 bits), then 55
    # bits at, or one unit from, the first 55 bits of L's words (where the truncated
    # comparison cannot decide and the general path must take over), a 1, then zeros.
    # (H, L) and the bits consumed must be the specification's on the same bits.
    b, log_k, lower, guide, upper = _tables(n)
    exact_lower, exact_upper = gx._tables(n, b, log_k, upper.size)
    table_l = np.append(lower, np.int64(-1))
    table_h = np.concatenate([upper, np.full(gn._H_PAD - upper.size, -1, np.int64),
                              gn._guide(upper, gn._H_BITS)])
    guide_l = gn._guide(lower, log_k + gx.GROUP).astype(np.int16)
    words = [int(t) for t in lower]
    for t in words[:: max(1, len(words) // 150)] + words[-3:]:
        for top in (t >> 8) - 1, t >> 8, (t >> 8) + 1:
            if not 0 <= top < 2**55:
                continue
            head = (0xFF << 56) | (top << 1) | 1
            buf = np.zeros(bit_reader._WORDS, np.uint32)
            buf[0], buf[1] = head >> 32, head & 0xFFFFFFFF
            scratch = np.zeros((16, bit_reader._WORDS // 16), np.uint32)
            io = (KEY, buf, scratch, scratch.copy(), 0, 0, 0)
            r = (np.int64(0), np.int64(0), np.int64(0), np.int64(0))
            h, ell, after = gn._table_parts(io, r, table_h, upper.size, table_l, guide_l,
                                            log_k, gn._MAX_DEPTH)
            if h < 0 or ell < 0:
                continue  # aborted: the fallback decides exactly
            bits = _Prefix(format(head, "064b") + "0" * 256)
            want_h = gx.count_above(bits, exact_upper, gx.H_BITS)
            assert want_h < upper.size
            want_l = gx.count_above(bits, exact_lower, log_k + gx.GROUP)
            consumed = int(after[2]) * 32 - int(after[1])
            assert (int(h), int(ell), consumed) == (want_h, want_l, bits.offset), (n, t)


@pytest.mark.parametrize("n", [3, 2047, N_HALF, 2**50 - 1])
def test_kernel_float_decisions_at_the_margin(n):
    # R's acceptance exp(−r/N) is still decided in floating point: any decision the
    # kernel takes on a probe at the margin must be the true one.
    b, log_k, lower, guide, upper = _tables(n)
    for rem in [1, 2, (1 << b) // 3, (1 << b) - 1]:
        if not 1 <= rem < (1 << b):
            continue
        truth = _truth(Fraction(rem, n), 40)
        p = gn._exp_neg(float(rem) / float(n))
        for v in _probes(p, truth):
            got, _ = gn._below(*_reader(v), p, gn.MARGIN)
            assert got == -1 or got == int(v < truth), (n, rem, float(v))


@pytest.mark.parametrize("gaussian", [False, True])
def test_no_slow_scales(gaussian):
    # The float kernel fell back to the exact algorithm on about 40 % of the draws at
    # N_HALF (its λ within 1e-16 of 1/2) and one in 2000 at N_LEVEL10. With exact
    # words only the float comparisons of R and of the Gaussian can fall back (about
    # 1e-10 to 1e-7 of the draws, measured by benchmarks/bench_samplers.py --part 3),
    # so the tolerance, 5 fallbacks in 10^5 draws per scale, is far above the expected
    # count (below 0.01) and far below the old kernel's (4·10^4 at N_HALF).
    rng = np.random.default_rng(7)
    scales = [N_HALF, N_LEVEL10] + [int(x) for x in 2 ** rng.uniform(1, 50, 6)]
    for n in scales:
        n = max(n, 2)
        out = np.zeros(10**5, np.int64)
        assert gn.fill_noise(out, False, gaussian, n, KEY, 71, 4096) <= 5, n


def test_kernel_law_at_the_slow_scale():
    # The discrete Laplace at N_HALF through its parts (as at the large scales above):
    # the bucket L and H = |Y| div KB against their exact laws, 10^6 draws. Stated
    # power: against a law moving 0.5 % of the mass between H = 0 and H = 1 (or between
    # the first and the last bucket), the test at level 1e-4 rejects with probability
    # above 0.99 (non-central chi-square, computed below).
    n = N_HALF
    b, log_k, *_ = _tables(n)
    k, big_b = 1 << log_k, 1 << b
    mags = np.abs(es.discrete_noise(10**6, LAPLACE, n, KEY, 72))
    bucket, h = (mags >> b) & (k - 1), mags >> (b + log_k)
    p = np.exp(-np.arange(k) * big_b / n)
    p /= p.sum()
    assert _chi2_pvalue(np.bincount(bucket, minlength=k), p) > 1e-4
    lam = math.exp(-k * big_b / n)
    ph = np.append((1 - lam) * lam ** np.arange(39), lam ** 39)
    assert _chi2_pvalue(np.bincount(np.minimum(h, 39), minlength=40), ph) > 1e-4
    for probs, other in ((ph, 1), (p, -1)):
        moved = probs.copy()
        moved[0] -= 0.005
        moved[other] += 0.005
        nc = 10**6 * np.sum((moved - probs) ** 2 / probs)
        df = probs.size - 1
        assert stats.ncx2.sf(stats.chi2.isf(1e-4, df), df, nc) > 0.99


# --------------------------------------------------------------------------------------
# 3. The fallback and the resumption.


def _clamped(values, noise):
    return [min(max(int(v) + int(y), -2**61), 2**61) for v, y in zip(values, noise)]


@pytest.mark.parametrize("gaussian", [False, True])
def test_fallback_with_chunks_of_one_and_add_mode_at_the_grid_bound(gaussian):
    # margin 2^-3 and table reads capped at 9 bits send many draws to the exact
    # algorithm (the Gaussian's about one in four, the Laplace's one in twenty: its
    # only comparisons at this scale are the exact tables'); chunks of one draw resume
    # at every draw; add mode on values at ±2^60 checks the clamp ±2^61 of the
    # fallback and of the kernel alike.
    n, size = 2047, 240
    fast = np.zeros(size, np.int64)
    assert gn.fill_noise(fast, False, gaussian, n, KEY, 31, 1) == 0
    slow = np.zeros(size, np.int64)
    assert gn.fill_noise(slow, False, gaussian, n, KEY, 31, 1, margin=2.0**-3,
                         max_depth=9) >= 4
    np.testing.assert_array_equal(fast, slow)
    base = np.resize(np.array([2**60, -2**60, 0, 2**60 - 5], np.int64), size)
    for margin in [gn.MARGIN, 2.0**-3]:
        added = base.copy()
        gn.fill_noise(added, True, gaussian, n, KEY, 31, 1, margin=margin,
                      max_depth=9 if margin > gn.MARGIN else 63)
        assert added.tolist() == _clamped(base, fast)


def test_fallback_saturates_and_clamps_unbounded_exact_draws(monkeypatch):
    # The exact algorithm returns unbounded Python ints; the fallback must saturate them
    # at ±2^62 (plain) and clamp k + Y at ±2^61 (add mode) without overflow. Forced by
    # an exact draw replaced with one of magnitude 2^70 (same bits consumed).
    real = gx.exact_draw

    def huge(*args):
        y, offset = real(*args)
        return (-1 if y < 0 else 1) * 2**70, offset

    monkeypatch.setattr(gx, "exact_draw", huge)
    plain = np.zeros(40, np.int64)
    redone = gn.fill_noise(plain, False, False, 1000, KEY, 3, 8, margin=2.0**-4,
                           max_depth=9)
    assert redone > 0
    assert (np.abs(plain) == 2**62).sum() == redone
    added = np.full(40, 2**60, np.int64)
    gn.fill_noise(added, True, False, 1000, KEY, 3, 8, margin=2.0**-4, max_depth=9)
    hit = np.abs(plain) == 2**62
    assert set(added[hit].tolist()) <= {2**61, -(2**61)}
    assert np.all(np.abs(added) <= 2**61)


#: Long enough for the pool (grid_noise._MIN_THREADED_DRAWS), cut in uneven chunks.
_THREADED_SIZE = 7 * 10_000 + 7


def test_draws_do_not_depend_on_threads_or_fork():
    # The same key gives the same array with one thread, with the pool, and in a forked
    # child (where the threaded build must not run).
    ref = es.discrete_noise(_THREADED_SIZE, GAUSSIAN, 2**40 + 3, KEY, 41, chunk=10_000)
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = es.discrete_noise(_THREADED_SIZE, GAUSSIAN, 2**40 + 3, KEY, 41, chunk=10_000)
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(ref, one)
    assert _THREADED_SIZE > gn._MIN_THREADED_DRAWS  # the reference did use the pool
    if "fork" not in multiprocessing.get_all_start_methods():
        return
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.apply_async(_child_noise).get(timeout=300)
    np.testing.assert_array_equal(ref, child)


def _child_noise():
    return es.discrete_noise(_THREADED_SIZE, GAUSSIAN, 2**40 + 3, KEY, 41, chunk=10_000)


# --------------------------------------------------------------------------------------
# 4. Side channels.


@pytest.mark.parametrize("gaussian", [False, True])
def test_fallback_count_and_noise_do_not_depend_on_the_values(gaussian):
    # Add mode reads the values only to add to them: two very different datasets get the
    # same fallback count (hence the same slow draws, the only timing difference) and
    # the same noise, up to the clamp (post-processing).
    rng = np.random.default_rng(5)
    noise = np.zeros(300, np.int64)
    counts = {gn.fill_noise(noise, False, gaussian, 2**30 + 1, KEY, 51, 64, margin=2.0**-7)}
    for values in [np.zeros(300, np.int64), rng.integers(-2**60, 2**60, 300),
                   np.full(300, -2**60, np.int64)]:
        released = values.copy()
        counts.add(gn.fill_noise(released, True, gaussian, 2**30 + 1, KEY, 51, 64,
                                 margin=2.0**-7))
        assert released.tolist() == _clamped(values, noise)
    assert len(counts) == 1 and counts.pop() > 0


# --------------------------------------------------------------------------------------
# 5. Termination.


def test_exact_comparisons_end_on_bits_that_follow_a_threshold():
    # The worst uniform for a comparison follows the threshold's binary expansion: the
    # exact algorithm must read on (and refine its precision) until they differ, and end
    # there with the right answer — here after about 200 bits. (q = 1000/1024 has a
    # short decimal expansion, so section 6's break does not touch it.)
    q = Fraction(1000, 1024)
    t = _truth(q, 120)
    head = math.floor(t * 2**208)
    for word in [head - 1, head + 1]:  # V's 208-bit cell just below / just above T
        bits = _Prefix(format(word, "0208b"))
        assert gx.below(bits, gx.exp_neg(q)) is (word < head)
        assert bits.offset > 190


# --------------------------------------------------------------------------------------
# 6. The break: the exact algorithm depends on the caller's decimal context.

def test_exact_brackets_contain_exp_minus_q():
    # At every precision the bracket must contain exp(−q); with the bug it converges to
    # exp(−q rounded to 28 digits), 2.4e-29 away for q = 1/3.
    for q in [Fraction(1, 3), Fraction(1000, 2047), Fraction(7, 2**50 - 1)]:
        truth = _truth(q, 120)
        for digits in [30, 60, 120]:
            lo, hi = gx._exp_neg_bounds(q, digits)
            assert lo <= truth <= hi, (q, digits)


def test_exact_comparison_decides_at_the_threshold():
    # V's first 96 bits are those of e^{−1/3}, then bits above it: V > T, so "V < T" is
    # false; the buggy bracket lies 2.3e-29 above T and declares V's cell below it.
    q = Fraction(1, 3)
    t = _truth(q, 120)
    word = (math.floor(t * 2**96) << 8) | 0xFF
    assert Fraction(word, 2**104) > t
    assert gx.below(_Prefix(format(word, "0104b")), gx.exp_neg(q)) is False


def _clear_caches():
    gx._exp_neg_bounds.cache_clear()
    gx._tables.cache_clear()
    gx.threshold_words.cache_clear()
    gn._cached_tables.cache_clear()


def test_draws_do_not_depend_on_the_callers_decimal_context():
    # A caller working at 4 significant digits (a money application, say) changes the
    # fallback's draws: the release is no longer the specified one, and the bounds
    # cached under that context stay wrong for later calls in the process.
    n = 2047
    fast = np.zeros(200, np.int64)
    gn.fill_noise(fast, False, True, n, KEY, 61, 64)
    _clear_caches()
    try:
        with decimal.localcontext(Context(prec=4)):
            slow = np.zeros(200, np.int64)
            gn.fill_noise(slow, False, True, n, KEY, 61, 64, margin=2.0**-5)
    finally:
        _clear_caches()  # do not leave wrong bounds to the other tests
    np.testing.assert_array_equal(fast, slow)


def test_fallback_does_not_raise_under_a_callers_inexact_trap():
    # A caller that traps Inexact gets decimal.Inexact out of add_discrete_noise whenever
    # a draw falls back (a random event, about one draw in 10^7 at the default margin).
    _clear_caches()
    try:
        with decimal.localcontext() as ctx:
            ctx.traps[decimal.Inexact] = True
            gn.fill_noise(np.zeros(100, np.int64), False, True, 2047, KEY, 62, 64,
                          margin=2.0**-5)
    finally:
        _clear_caches()


def test_fallback_does_not_raise_under_a_default_context_trap():
    # The explicit contexts of the exact module copy their traps from
    # decimal.DefaultContext: an application that sets DefaultContext.traps[Inexact]
    # (the documented way to configure new threads) also makes the fallback raise. The
    # fix needs Context(..., traps=[]) besides the exact negation.
    _clear_caches()
    saved = decimal.DefaultContext.traps[decimal.Inexact]
    try:
        decimal.DefaultContext.traps[decimal.Inexact] = True
        gn.fill_noise(np.zeros(100, np.int64), False, True, 2047, KEY, 63, 64,
                      margin=2.0**-5)
    finally:
        decimal.DefaultContext.traps[decimal.Inexact] = saved
        _clear_caches()


@pytest.mark.parametrize("kind", [LAPLACE, GAUSSIAN])
def test_a_fractional_scale_is_refused_not_truncated(kind):
    # discrete_noise(…, scale=2.9) silently draws with N = 2 (int() truncates): 31 %
    # less noise than asked. Not reached by the library's callers (plan_grid_noise's
    # N is an int), but the entry point should refuse it, naming the parameter.
    with pytest.raises((TypeError, ValueError), match="scale"):
        es.discrete_noise(5, kind, 2.9, KEY, 0)
