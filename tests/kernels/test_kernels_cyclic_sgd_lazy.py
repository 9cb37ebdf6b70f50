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
from skdpsparse._kernels.linear_losses import csr_clipped_gradient_sum
from skdpsparse._kernels.exact_sampling import DISCRETE_GAUSSIAN, discrete_noise
from skdpsparse._kernels.grid_noise_exact import KeyBits
from skdpsparse.mechanisms import cyclic_sgd as mechanism
from skdpsparse.mechanisms.cyclic_sgd import (
    block_scales,
    bound_rows_l2,
    cyclic_sgd,
    fold_scale,
    l2_decay,
    plan_cyclic_sgd,
)
from skdpsparse.mechanisms.noise import plan_grid_noise


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


def _interval_sums_problem(seed, kmax, fit_intercept):
    """A problem, fixed noise integers N_{t,j} (23 steps) and a ``draw`` that feeds a
    lazy kernel the sums of each coordinate's integers over the intervals it asks for,
    counting in ``seen`` the steps each coordinate received."""
    X, y, order = _problem(seed)
    p = X.shape[1] + 1 if fit_intercept else X.shape[1]
    noise = np.random.default_rng(seed + 10).integers(-3000, 3000, size=(23, p))
    seen = np.zeros(p, dtype=np.int64)

    def draw(counts, coords, starts):
        out = np.empty(counts.size, dtype=np.int64)
        for i, (k, j, s0) in enumerate(zip(counts, coords, starts)):
            assert k <= kmax
            out[i] = noise[s0:s0 + k, j].sum()
            seen[j] += k
        return out

    return X, y, order, noise, seen, draw


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("kmax", [1, 3, 1 << 40])
@pytest.mark.parametrize("seed", [0, 1])
def test_lazy_kernel_is_bitwise_the_eager_kernel_given_the_interval_sums(seed, kmax,
                                                                        fit_intercept):
    """With the same integers N_{t,j}, the lazy kernel, fed the sums of each
    coordinate's noise over the intervals it asks for, returns exactly the eager
    kernel's θ (both stay on the grid); every coordinate gets all T steps of noise."""
    X, y, order, noise, seen, draw = _interval_sums_problem(seed, kmax, fit_intercept)
    steps, b, lr, spacing = 23, 4, 0.7, 2.0**-12
    code = LOSS_CODES["logistic"]

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
def _runs(lazy, scale, reps, seed, *, scaled=False, flush_at_fold=True):
    """``reps`` runs of the lazy kernel (draws of the exact sampler of N_Z(0, k·scale²))
    or of the eager one (the same law per step), plain or of the scaled release
    (``scaled``: a = 0.6, s_min = 0.5; ``flush_at_fold=False`` is a broken driver)."""
    X, y, order = _problem(seed, n=12, d=5, density=0.2 if scaled else 0.4)
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
            if scaled:
                out[r] = _lazy_scaled(X, y, order, b, steps, lr, spacing, True, 1 << 40,
                                      draw, code, _DIST_DECAY, _DIST_FLOOR, flush_at_fold)
            else:
                out[r] = _lazy(X, y, order, b, steps, lr, spacing, True, 1 << 40, draw,
                               code)
        else:
            noise = discrete_noise(steps * (d + 1), DISCRETE_GAUSSIAN, scale, _key(r), 0)
            noise = noise.reshape(steps, d + 1)
            if scaled:
                out[r] = _scaled_reference(X, y, order, b, noise, lr, spacing, True,
                                           _DIST_DECAY, _DIST_FLOOR, code)
            else:
                out[r] = _eager(X, y, order, b, noise, lr, spacing, True, code)
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


# ------------------------------------ the scaled release of the l2 penalty (w = s·u)
def _on_grid(x):
    return np.rint(np.clip(x, -2.0**60, 2.0**60))


def _scaled_reference(X, y, order, b, noise, lr, spacing, fit_intercept, decay, floor,
                      code, clip_norm=1.0):
    """The scaled release of ``doc/derivations/lazy_noise.rst`` written from its
    definition, eagerly, in NumPy: step t reads w = s·u, releases
    Y_t − round(λḡ_t/(γs)) on the coefficients (the intercept unscaled) and adds γ
    times it to u; then s ← a·s, and when s falls below ``floor`` before the last step
    u ← γ·round(s·u/γ), s ← 1. Returns (s·u, b)."""
    n, d = X.shape
    u = np.zeros(d + 1)
    s = 1.0
    step, inv = lr / b, 1.0 / spacing
    pos = 0
    for t in range(noise.shape[0]):
        rows = np.array([order[(pos + k) % n] for k in range(b)], dtype=np.int64)
        pos = (pos + b) % n
        w = s * u[:d]
        g, g0 = csr_clipped_gradient_sum(X.indptr, X.indices, X.data, y, w, u[d], code,
                                         1.0, clip_norm, d, rows, fit_intercept)
        u[:d] += spacing * (noise[t, :d] - _on_grid(step * g * inv / s))
        if fit_intercept:
            u[d] += spacing * (noise[t, d] - _on_grid(step * g0 * inv))
        s = s * decay
        if s < floor and t + 1 < noise.shape[0]:
            u[:d] = _on_grid(u[:d] * s * inv) * spacing
            s = 1.0
    u[:d] *= s
    return u


def _lazy_scaled(X, y, order, b, steps, lr, spacing, fit_intercept, kmax, draw, code,
                 decay, floor, flush_at_fold=True):
    """The lazy kernel in the scaled release, driven as the mechanism drives it
    (blocks of at most 7 steps cut at the block ends of ``block_scales``; at a block's
    end every pending noise, then the fold). ``flush_at_fold=False`` is a broken
    driver that folds without adding the pending noise first."""
    n, d = X.shape
    p = d + 1 if fit_intercept else d
    scales = block_scales(decay, floor, steps)
    length = scales.size - 1
    theta = np.zeros(d + 1)
    last = np.zeros(d + 1, dtype=np.int64)
    scratch = np.zeros(d)
    start = step0 = 0
    size = 10_000

    def flush(step):
        counts = np.empty(size, dtype=np.int64)
        coords, starts = np.empty_like(counts), np.empty_like(counts)
        saved = last.copy()
        used = lazy_final_flush(theta, last, step, p, kmax, spacing, np.zeros(0), counts,
                                coords, starts, True)
        sums = draw(counts[:used], coords[:used], starts[:used]).astype(np.float64)
        last[:] = saved
        lazy_final_flush(theta, last, step, p, kmax, spacing, sums, counts, coords, starts,
                         False)

    while step0 < steps:
        within = step0 % length
        m = min(7, steps - step0, length - within)
        counts = np.empty(size, dtype=np.int64)
        coords, starts = np.empty_like(counts), np.empty_like(counts)
        args = (X.indptr, X.indices, X.data, d, y, theta, order, start, step0, m, code, 1.0,
                1.0, b, lr, fit_intercept, spacing)
        saved = last.copy()
        _, used = csr_lazy_cyclic_sgd_steps(*args, last, scratch, kmax, np.zeros(0),
                                            counts, coords, starts, True, scales[within],
                                            decay)
        sums = draw(counts[:used], coords[:used], starts[:used]).astype(np.float64)
        last[:] = saved
        start, used2 = csr_lazy_cyclic_sgd_steps(*args, last, scratch, kmax, sums, counts,
                                                 coords, starts, False, scales[within],
                                                 decay)
        assert used2 == used
        step0 += m
        if step0 % length == 0 and step0 < steps:
            if flush_at_fold:
                flush(step0)
            fold_scale(theta, d, scales[length], spacing)
    flush(steps)
    theta[:d] *= scales[steps % length if steps % length else length]
    return theta


# a = 0.9 and s_min = 0.75: blocks of 3 steps (1, 0.9, 0.81), folded at 0.729.
_DECAY, _FLOOR = 0.9, 0.75


def test_block_scales_stay_above_the_floor_and_cover_the_run():
    """Every scale a step uses is ≥ the floor; the last entry, folded, is below it;
    a block never has more steps than the run (then no fold)."""
    scales = block_scales(_DECAY, _FLOOR, 23)
    assert scales.tolist() == [1.0, 0.9, 0.9 * 0.9, 0.9 * 0.9 * 0.9]
    assert np.all(scales[:-1] >= _FLOOR) and scales[-1] < _FLOOR
    long = block_scales(1 - 1e-9, 0.5, 10)
    assert long.size == 11 and np.all(long >= 0.5)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("kmax", [1, 3, 1 << 40])
@pytest.mark.parametrize("seed", [0, 1])
def test_scaled_lazy_kernel_is_bitwise_the_scaled_reference_given_the_interval_sums(
        seed, kmax, fit_intercept):
    """The scaled release, lazily (the kernel with s and a, flushes and folds at the
    block ends), fed the sums of each coordinate's integers over the intervals it asks
    for, returns exactly the eager NumPy reference's θ; every coordinate gets all T
    steps of noise. 23 steps in blocks of 3: seven folds."""
    X, y, order, noise, seen, draw = _interval_sums_problem(seed, kmax, fit_intercept)
    d, p = X.shape[1], noise.shape[1]
    steps, b, lr, spacing = 23, 4, 0.7, 2.0**-12
    code = LOSS_CODES["logistic"]

    lazy = _lazy_scaled(X, y, order, b, steps, lr, spacing, fit_intercept, kmax, draw,
                        code, _DECAY, _FLOOR)
    full = np.zeros((steps, d + 1), dtype=np.int64)
    full[:, :p] = noise
    eager = _scaled_reference(X, y, order, b, full, lr, spacing, fit_intercept, _DECAY,
                              _FLOOR, code)
    assert np.array_equal(lazy, eager)
    assert np.all(seen == steps)
    # The reference is not the unscaled run: the scale is there.
    plain = _eager(X, y, order, b, noise, lr, spacing, fit_intercept, code)
    assert not np.array_equal(plain, eager)


def test_scaled_kernel_at_scale_one_is_the_unscaled_kernel():
    """s = a = 1 is the unscaled lazy kernel, bit for bit (the default arguments)."""
    X, y, order = _problem(3)
    noise = np.random.default_rng(4).integers(-3000, 3000, size=(23, X.shape[1] + 1))

    def draw(counts, coords, starts):
        return np.array([noise[s0:s0 + k, j].sum() for k, j, s0 in
                         zip(counts, coords, starts)], dtype=np.int64)

    code = LOSS_CODES["logistic"]
    one = _lazy_scaled(X, y, order, 4, 23, 0.7, 2.0**-12, True, 1 << 40, draw, code, 1.0,
                       0.5)
    plain = _lazy(X, y, order, 4, 23, 0.7, 2.0**-12, True, 1 << 40, draw, code)
    assert np.array_equal(one, plain)


def test_scaled_lazy_kernel_reads_the_batch_coordinates_and_flushes_per_block():
    """O(nnz) per step plus d per block: on 2 000 columns, rows with 3 nonzeros,
    batches of 2 and 50 steps in blocks of 3, the draws number at most
    50·(2·3 + 1) + 17·2 001."""
    rng = np.random.default_rng(0)
    n, d = 40, 2000
    X = sp.random(n, d, density=3 / d, format="csr", random_state=0)
    X.sort_indices()
    y = rng.choice([-1.0, 1.0], n)
    draws = []

    def draw(counts, coords, starts):
        draws.append(counts.size)
        return np.zeros(counts.size, dtype=np.int64)

    _lazy_scaled(X, y, np.arange(n), 2, 50, 0.5, 2.0**-10, True, 1 << 40, draw,
                 LOSS_CODES["logistic"], _DECAY, _FLOOR)
    row_max = int(np.diff(X.indptr).max())
    assert sum(draws) <= 50 * (2 * row_max + 1) + 17 * (d + 1)


# The distributional test: a = 0.6 and s_min = 0.5, blocks of 2 steps folded at 0.36.
_DIST_DECAY, _DIST_FLOOR = 0.6, 0.5


def test_scaled_lazy_run_has_the_scaled_eager_runs_distribution():
    """1 500 lazy and 1 500 eager runs of the scaled release (N = 2, 9 steps of 3 rows
    of 5 columns at density 0.2, blocks of 2 steps, 6 coordinates): per coordinate a
    two-sample Kolmogorov-Smirnov test at level 1e-3/6. Its power: it rejects
    (p < 1e-6 on some coordinate; 2e-15 when written) a lazy driver that folds s into
    u before adding the pending noise (that noise then misses its block's factor
    0.36)."""
    lazy = _runs(True, 2, 1500, 0, scaled=True)
    eager = _runs(False, 2, 1500, 0, scaled=True)
    for j in range(lazy.shape[1]):
        assert stats.ks_2samp(lazy[:, j], eager[:, j]).pvalue > 1e-3 / lazy.shape[1]
    broken = _runs(True, 2, 1500, 0, scaled=True, flush_at_fold=False)
    assert min(stats.ks_2samp(broken[:, j], eager[:, j]).pvalue
               for j in range(lazy.shape[1])) < 1e-6


# ------------------------------ the mechanism's scaled run (mechanisms/cyclic_sgd.py)
def _scaled_plan(floor=0.95, **kw):
    # Logistic, R = 1 with an intercept: λ = 1/M = 2; α = 0.01 gives a = 1/1.02, so
    # blocks of 3 steps (1, 0.980, 0.961) at s_min = 0.95: 30 steps, 9 folds.
    kw = dict(dict(loss="logistic", norm_bound=1.0, fit_intercept=True, batch_size=4,
                   epochs=3, delta=1e-6, noise_multiplier=2.0, penalty="l2", alpha=0.01,
                   scale_floor=floor), **kw)
    return plan_cyclic_sgd(40, 12, **kw)


def test_the_mechanisms_scaled_run_is_the_reference(monkeypatch):
    """``cyclic_sgd`` with a scaled plan (its driver: noise blocks cut at the block
    ends, flushes, folds, the final s) equals the NumPy reference bit for bit when
    every noise integer is 1 (the sampler replaced by one returning each interval's
    length); its block length is that of ``block_scales``."""
    X, y, _ = _problem(5, n=40, d=12)
    plan = _scaled_plan()
    assert plan.scale_floor == 0.95 and block_scales(l2_decay(plan), 0.95, 99).size == 4
    monkeypatch.setattr(mechanism, "discrete_gaussian_sums",
                        lambda counts, scale, key, *a, **k: counts.copy())
    coef, intercept = cyclic_sgd(X, y, plan, np.random.default_rng(0), shuffle=False)
    spacing = plan_grid_noise("gaussian", plan.noise_std, plan.learning_rate
                              * plan.clip_norm / plan.batch_size, 13).spacing
    ref = _scaled_reference(bound_rows_l2(X, 1.0), y, np.arange(40), 4,
                            np.ones((plan.n_steps, 13)), plan.learning_rate, spacing, True,
                            l2_decay(plan), 0.95, LOSS_CODES["logistic"], plan.clip_norm)
    assert np.array_equal(np.append(coef, intercept), ref)


def _recorded_scale(monkeypatch, X, y, plan):
    scales = set()

    def record(counts, scale, key, *a, **k):
        scales.add(scale)
        return np.zeros(counts.size, dtype=np.int64)

    monkeypatch.setattr(mechanism, "discrete_gaussian_sums", record)
    cyclic_sgd(X, y, plan, np.random.default_rng(0))
    (scale,) = scales
    return scale


def _covers(plan, lazy_scale):
    """Whether the integer scale N = lazy_scale − 1 gives every step of the scaled
    release at most the eager plan's ratio 2Δ/σ (Δ = λC/b): neighbours' integer
    vectors differ by at most 2Δ/(γ s_min) + ⌈√p⌉ (the gradient part divided by
    s ≥ s_min, then rounded), in exact rational arithmetic."""
    from fractions import Fraction as F
    p = plan.n_features + 1
    delta = F(plan.learning_rate) * F(plan.clip_norm) / plan.batch_size
    gamma = F(plan_grid_noise("gaussian", plan.noise_std, float(delta), p).spacing)
    worst = 2 * delta / (gamma * F(plan.scale_floor)) + (math.isqrt(p - 1) + 1)
    return worst / (lazy_scale - 1) <= 2 * delta / F(plan.noise_std)


def test_the_scaled_runs_noise_scale_covers_the_sensitivity_over_the_floor(monkeypatch):
    """The scale the scaled run draws with (recorded at the sampler) gives every step
    the eager plan's per-step zCDP for the sensitivity divided by s_min, so the
    plan's budget holds as reported. A broken run whose grid is the eager plan's
    (``_scaled_grid`` not dividing by s_min) is caught: its ratio is 1/0.95 too big."""
    X, y, _ = _problem(5, n=40, d=12)
    plan = _scaled_plan()
    assert _covers(plan, _recorded_scale(monkeypatch, X, y, plan))
    monkeypatch.setattr(mechanism, "_scaled_grid",
                        lambda sigma, sens, p, floor: plan_grid_noise("gaussian", sigma,
                                                                      sens, p))
    assert not _covers(plan, _recorded_scale(monkeypatch, X, y, plan))


def test_the_scaled_plans_budget_is_the_eager_plans():
    """s_min changes the grid scale, never the guarantee: the same budget (and zCDP
    event) and accounting as the plan at scale_floor = 1, but for the field."""
    scaled, eager = _scaled_plan(), _scaled_plan(1.0)
    assert scaled.budget == eager.budget and eager.scale_floor == 1.0
    assert ({k: v for k, v in scaled.accounting.items() if k != "scale_floor"}
            == {k: v for k, v in eager.accounting.items() if k != "scale_floor"})
    calibrated = _scaled_plan(noise_multiplier=None, epsilon=2.0)
    assert calibrated.budget == _scaled_plan(1.0, noise_multiplier=None, epsilon=2.0).budget


def test_a_scaled_plan_runs_dense_rows_as_csr():
    """The plan fixes the law: dense rows under a scaled plan give the CSR run's
    release, bit for bit, from the same generator."""
    X, y, _ = _problem(6, n=40, d=12)
    plan = _scaled_plan()
    dense = cyclic_sgd(X.toarray(), y, plan, np.random.default_rng(1))
    sparse = cyclic_sgd(X, y, plan, np.random.default_rng(1))
    assert np.array_equal(dense[0], sparse[0]) and dense[1] == sparse[1]


@pytest.mark.parametrize("edit", [dict(radius=1.0), dict(box=(-1.0, 1.0)),
                                  dict(l1_ratio=0.5), dict(n_outputs=2)])
def test_a_scaled_plan_edited_after_planning_is_refused(edit):
    """The scaled kernel applies no constraint and no ℓ1 part: a plan given
    ``scale_floor`` < 1 by planning, then edited to hold one (``dataclasses.replace``),
    must not reach it (the run would not be the mechanism its proof covers)."""
    import dataclasses

    plan = _scaled_plan()
    assert mechanism.uses_lazy_noise(plan, True)
    with pytest.raises(ValueError, match="scale_floor < 1"):
        mechanism.uses_lazy_noise(dataclasses.replace(plan, **edit), True)


@pytest.mark.parametrize("row, u", [
    ([1.7e308, -1.7e308], [4.0, 4.0]),             # inf − inf in the plain sum
    ([1e308, 1e308, -1e308], [2.0, 2.0, 2.0]),     # a partial sum overflows
    ([1.7e308, 1.0], [4.0, 0.0]),                  # the margin itself overflows
    ([0.3, -2.0, 7.5], [1.25, -0.5, 3.0]),         # no overflow
])
def test_scaled_margin_is_the_margin_at_w_equal_s_times_u(row, u):
    """The scaled kernel's margin at (u, s) equals linear_losses' margin at the array
    w = s·u bit for bit, the overflow fallback (shared: ``_csr_margin_rescaled`` with
    its factor s) included."""
    from skdpsparse._kernels.cyclic_sgd import _csr_margin_scaled
    from skdpsparse._kernels.linear_losses import _csr_margin

    X = sp.csr_matrix(np.array([row]))
    u = np.array(u)
    for s in (1.0, 0.5, 0.9801):
        got = _csr_margin_scaled(X.indptr, X.indices, X.data, 0, u, s, 0.25)
        want = _csr_margin(X.indptr, X.indices, X.data, 0, s * u, 0.25)
        assert got == want or (np.isnan(got) and np.isnan(want)), (s, got, want)
