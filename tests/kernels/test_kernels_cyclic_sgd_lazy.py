"""Lazy noise of cyclic DP-SGD on CSR rows: exact sampler of N_Z(0, kN²), the lazy
kernel against the eager one (bitwise, with the same integers), and the lazy run's
distribution against the eager run's."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from skdpsparse._kernels import LOSS_CODES
from skdpsparse._kernels import cyclic_sgd as cyclic_kernels
from skdpsparse._kernels.chacha import key_words
from skdpsparse._kernels.cyclic_sgd import (
    NO_CONSTRAINT,
    csr_cyclic_sgd_steps,
    csr_lazy_cyclic_sgd_steps,
    discrete_gaussian_sums,
    exact_gaussian_sum,
    lazy_final_flush,
    lazy_max_count,
)
from skdpsparse._kernels.exact_sampling import DISCRETE_GAUSSIAN, discrete_noise
from skdpsparse._kernels.grid_noise_exact import KeyBits


def _key(i):
    # Distinct for every i (the runs of the distributional test below must be
    # independent: 256 keys repeated six times made its samples clumped).
    return key_words(int(i).to_bytes(32, "little"))


# ---------------------------------------------------------------- the sampler
def _chi2_pvalue(draws, k, scale):
    """Chi-square goodness of fit of ``draws`` against P(y) ∝ exp(−y²/(2kN²)), cells
    with expected count ≥ 20, the tails pooled."""
    s2 = k * scale * scale
    span = int(8 * math.sqrt(s2)) + 2
    ys = np.arange(-span, span + 1)
    pmf = np.exp(-ys.astype(float) ** 2 / (2 * s2))
    pmf /= pmf.sum()
    expected = pmf * draws.size
    keep = expected >= 20
    observed = np.array([np.sum(draws == v) for v in ys[keep]])
    obs = np.append(observed, draws.size - observed.sum())
    exp = np.append(expected[keep], draws.size - expected[keep].sum())
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("k, scale", [(1, 2), (5, 3), (7, 2), (40, 2), (1000, 2), (3, 41)])
def test_gaussian_sums_have_the_discrete_gaussian_law(k, scale):
    """60 000 draws fit P(y) ∝ exp(−y²/(2kN²)) (chi-square, fails if p < 1e-4), at
    small and large k (proposal scale ⌈√k⌉N: 2 to 64) and one larger N."""
    draws = discrete_gaussian_sums(np.full(60_000, k), scale, _key(k))
    assert _chi2_pvalue(draws, k, scale) > 1e-4


def _cks_reference(k, scale, size, rng, exponent_factor=1.0):
    """A float NumPy version of the algorithm (Canonne, Kamath and Steinke 2020,
    Algorithm 3 with t = ⌈√k⌉N and a discrete Laplace proposal), for the power check
    below: ``exponent_factor`` ≠ 1 is a broken acceptance exp(−factor·g²/(2kt²))."""
    a = math.isqrt(k - 1) + 1
    t = a * scale
    out = np.empty(0, dtype=np.int64)
    while out.size < size:
        m = 2 * size
        mag = rng.geometric(1.0 - math.exp(-1.0 / t), m) - 1  # P(|Y| = y) ∝ exp(−y/t)
        neg = rng.random(m) < 0.5
        keep = ~(neg & (mag == 0))
        g = a * mag - k * scale
        accept = rng.random(m) < np.exp(-exponent_factor * g.astype(float) ** 2
                                        / (2.0 * k * t * t))
        y = np.where(neg, -mag, mag)[keep & accept]
        out = np.concatenate([out, y])
    return out[:size]


@pytest.mark.parametrize("k, scale", [(5, 3), (7, 2)])
def test_the_law_test_catches_broken_samplers(k, scale):
    """The chi-square test above has power: it passes a float reference of the same
    algorithm and rejects (p < 1e-4) an acceptance with exponent g²/(3kt²) instead of
    g²/(2kt²), and the kernel's own draws for k + 1 (a wrong count: a variance off by
    1/k, which 60 000 draws see at these small k; at large k the bitwise kernel test
    below checks that every coordinate receives exactly T steps of noise) or at scale
    N + 1."""
    rng = np.random.default_rng(k)
    assert _chi2_pvalue(_cks_reference(k, scale, 60_000, rng), k, scale) > 1e-4
    assert _chi2_pvalue(_cks_reference(k, scale, 60_000, rng, 2 / 3), k, scale) < 1e-4
    wrong_k = discrete_gaussian_sums(np.full(60_000, k + 1), scale, _key(k))
    assert _chi2_pvalue(wrong_k, k, scale) < 1e-4
    wrong_n = discrete_gaussian_sums(np.full(60_000, k), scale + 1, _key(k))
    assert _chi2_pvalue(wrong_n, k, scale) < 1e-4


@pytest.mark.parametrize("k, scale", [(1, 2), (5, 3), (1000, 2), (196, 2**29 + 1),
                                      (2, 2**49)])
def test_gaussian_sums_kernel_is_the_exact_algorithm(k, scale, monkeypatch):
    """Draw for draw, the kernel equals the algorithm in exact arithmetic
    (``exact_gaussian_sum``, read from each chunk's stream), at the default margin and
    at a margin of 2⁻⁵, where the kernel leaves many draws to that exact algorithm
    (counted: the fallback runs) and resumes after them."""
    counts = np.full(240, k)
    fast = discrete_gaussian_sums(counts, scale, _key(3), 5, chunk=80)
    fallbacks = []

    def counting(bits, kk, n):
        fallbacks.append(kk)
        return exact_gaussian_sum(bits, kk, n)

    monkeypatch.setattr(cyclic_kernels, "exact_gaussian_sum", counting)
    forced = discrete_gaussian_sums(counts, scale, _key(3), 5, chunk=80, margin=2.0**-5)
    exact = [exact_gaussian_sum(bits, k, scale) for c in range(3)
             for bits in [KeyBits(_key(3), c, 5)] for _ in range(80)]
    assert np.array_equal(fast, np.array(exact))
    assert np.array_equal(forced, fast)
    assert len(fallbacks) >= 5


def test_gaussian_sums_are_reproducible_and_validate_their_input():
    a = discrete_gaussian_sums(np.array([1, 3, 9]), 2**30, _key(1))
    assert np.array_equal(a, discrete_gaussian_sums(np.array([1, 3, 9]), 2**30, _key(1)))
    assert not np.array_equal(a, discrete_gaussian_sums(np.array([1, 3, 9]), 2**30, _key(2)))
    with pytest.raises(ValueError, match="counts"):
        discrete_gaussian_sums(np.array([0]), 4, _key(1))
    with pytest.raises(ValueError, match="counts"):
        discrete_gaussian_sums(np.array([lazy_max_count(2**40) + 1]), 2**40, _key(1))
    with pytest.raises(ValueError, match="scale"):
        discrete_gaussian_sums(np.array([1]), 1, _key(1))
    assert lazy_max_count(2**30) >= 2**31 - 2**17  # ⌈√k⌉²·N ≤ 2⁶¹


# --------------------------------------------------- lazy kernel vs eager kernel
def _problem(seed, n=30, d=12, density=0.3):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed,
                  data_rvs=lambda m: rng.uniform(-1, 1, m))
    X.sort_indices()
    y = rng.choice([-1.0, 1.0], n)
    return X, y, rng.permutation(n)


def _lazy(X, y, order, b, steps, lr, spacing, fit_intercept, kmax, draw, code):
    """Both passes of the lazy kernel, blocks of 7 steps, then the final flush; ``draw``
    maps (counts, coords, starts) to the integer sums."""
    n, d = X.shape
    p = d + 1 if fit_intercept else d
    theta = np.zeros(d + 1)
    last = np.zeros(d + 1, dtype=np.int64)
    scratch = np.zeros(d)
    start = step0 = 0
    size = 10_000
    while step0 < steps:
        m = min(7, steps - step0)
        counts = np.empty(size, dtype=np.int64)
        coords, starts = np.empty_like(counts), np.empty_like(counts)
        args = (X.indptr, X.indices, X.data, d, y, theta, order, start, step0, m, code, 1.0,
                1.0, b, lr, fit_intercept, spacing)
        saved = last.copy()
        _, used = csr_lazy_cyclic_sgd_steps(*args, last, scratch, kmax, np.zeros(0),
                                            counts, coords, starts, True)
        sums = draw(counts[:used], coords[:used], starts[:used]).astype(np.float64)
        last[:] = saved
        start, used2 = csr_lazy_cyclic_sgd_steps(*args, last, scratch, kmax, sums,
                                                 counts, coords, starts, False)
        assert used2 == used
        step0 += m
    counts = np.empty(size, dtype=np.int64)
    coords, starts = np.empty_like(counts), np.empty_like(counts)
    saved = last.copy()
    used = lazy_final_flush(theta, last, steps, p, kmax, spacing, np.zeros(0), counts,
                            coords, starts, True)
    sums = draw(counts[:used], coords[:used], starts[:used]).astype(np.float64)
    last[:] = saved
    lazy_final_flush(theta, last, steps, p, kmax, spacing, sums, counts, coords, starts, False)
    return theta


def _eager(X, y, order, b, noise, lr, spacing, fit_intercept, code):
    theta = np.zeros(X.shape[1] + 1)
    csr_cyclic_sgd_steps(X.indptr, X.indices, X.data, X.shape[1], y, theta, order, 0, code,
                         1.0, 1.0, b, lr, noise.astype(np.float64), 0.0, 0.0, NO_CONSTRAINT,
                         0.0, np.zeros(1), np.zeros(1), fit_intercept, spacing)
    return theta


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("kmax", [1, 3, 1 << 40])
@pytest.mark.parametrize("seed", [0, 1])
def test_lazy_kernel_is_bitwise_the_eager_kernel_given_the_interval_sums(seed, kmax,
                                                                        fit_intercept):
    """With the same integers N_{t,j}, the lazy kernel, fed the sums of each
    coordinate's noise over the intervals it asks for, returns exactly the eager
    kernel's θ (both stay on the grid); every coordinate gets all T steps of noise."""
    X, y, order = _problem(seed)
    d = X.shape[1]
    p = d + 1 if fit_intercept else d
    steps, b, lr, spacing = 23, 4, 0.7, 2.0**-12
    noise = np.random.default_rng(seed + 10).integers(-3000, 3000, size=(steps, p))
    code = LOSS_CODES["logistic"]
    seen = np.zeros(p, dtype=np.int64)

    def draw(counts, coords, starts):
        out = np.empty(counts.size, dtype=np.int64)
        for i, (k, j, s0) in enumerate(zip(counts, coords, starts)):
            assert k <= kmax
            out[i] = noise[s0:s0 + k, j].sum()
            seen[j] += k
        return out

    lazy = _lazy(X, y, order, b, steps, lr, spacing, fit_intercept, kmax, draw, code)
    eager = _eager(X, y, order, b, noise, lr, spacing, fit_intercept, code)
    assert np.array_equal(lazy, eager)
    assert np.all(seen == steps)


def test_lazy_kernel_reads_only_the_batch_coordinates():
    """O(nnz) per step: on 2 000 columns and rows with 3 nonzeros, batches of 2, the
    draws of 50 steps number at most 50·(2·3 + 1) before the final flush."""
    rng = np.random.default_rng(0)
    n, d = 40, 2000
    X = sp.random(n, d, density=3 / d, format="csr", random_state=0)
    X.sort_indices()
    y = rng.choice([-1.0, 1.0], n)
    counts = np.empty(10_000, dtype=np.int64)
    coords, starts = np.empty_like(counts), np.empty_like(counts)
    row_max = int(np.diff(X.indptr).max())
    _, used = csr_lazy_cyclic_sgd_steps(
        X.indptr, X.indices, X.data, d, y, np.zeros(d + 1), np.arange(n), 0, 0, 50,
        LOSS_CODES["logistic"], 1.0, 1.0, 2, 0.5, True, 2.0**-10,
        np.zeros(d + 1, dtype=np.int64), np.zeros(d),
        1 << 40, np.zeros(0), counts, coords, starts, True)
    assert used <= 50 * (2 * row_max + 1)


# ------------------------------------------- the lazy run's law vs the eager run's
def _runs(lazy, scale, reps, seed):
    X, y, order = _problem(seed, n=12, d=5, density=0.4)
    d = X.shape[1]
    steps, b, lr, spacing = 9, 3, 0.5, 2.0**-3
    code = LOSS_CODES["logistic"]
    out = np.empty((reps, d + 1))
    for r in range(reps):
        if lazy:
            calls = iter(range(1, 100))

            def draw(counts, coords, starts, r=r):
                # A fresh stream per call (as the mechanism draws a fresh key per call).
                return discrete_gaussian_sums(counts, scale, _key(r), next(calls))
            out[r] = _lazy(X, y, order, b, steps, lr, spacing, True, 1 << 40, draw, code)
        else:
            noise = discrete_noise(steps * (d + 1), DISCRETE_GAUSSIAN, scale, _key(r), 0)
            out[r] = _eager(X, y, order, b, noise.reshape(steps, d + 1), lr, spacing, True,
                            code)
    return out


def test_lazy_run_has_the_eager_runs_distribution():
    """1 500 lazy and 1 500 eager runs (N = 2, 9 steps of 3 rows, 6 coordinates):
    each coordinate's two samples pass a two-sample Kolmogorov-Smirnov test at level
    1e-3 (Bonferroni over the 6), and the same test tells N = 2 from N = 3 (its
    power). With N = 2 a sum of k discrete Gaussians and N_Z(0, 4k) differ by a factor
    within e^{±6·exp(−2π²)} ≈ 1 ± 2e-8: no test of this size can see it."""
    lazy = _runs(True, 2, 1500, 0)
    eager = _runs(False, 2, 1500, 0)
    for j in range(lazy.shape[1]):
        assert stats.ks_2samp(lazy[:, j], eager[:, j]).pvalue > 1e-3 / lazy.shape[1]
    wider = _runs(False, 3, 1500, 0)
    assert min(stats.ks_2samp(wider[:, j], eager[:, j]).pvalue
               for j in range(lazy.shape[1])) < 1e-6
