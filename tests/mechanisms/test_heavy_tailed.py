"""Private heavy-tailed means (seed 004): sensitivities on adversarial neighbours (and
that they are attained), the law of the released noise, budgets, input handling, and
accuracy on Student-t data against the explicit bounds of Theorem 4.1 / Corollary 4.2.
"""

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import special, stats

from skdpsparse._kernels.heavy_tailed_scaled import consecutive_groups
from skdpsparse.accounting import ZCDP, PureDP, approx_dp_to_zcdp
from skdpsparse.datasets import central_moment_bound, make_heavy_tailed
from skdpsparse.mechanisms.heavy_tailed import (
    cwme_sensitivity,
    n_groups_for,
    noise_smoothing_mean,
    noise_smoothing_sensitivity,
    private_cwme,
    private_cwme_zcdp,
    private_noise_smoothing_mean,
    private_noise_smoothing_mean_zcdp,
    trimmed_median_of_means,
    truncation_for,
)

HUGE = 1e9


# ------------------------------------------------------------------- sensitivities
def expected_cwme_linf(n, tau, m):
    """6τ/floor(n/m) for odd m, 3τ/floor(n/m) for even m (m = groups used)."""
    m = min(m, n)
    return (6.0 if m % 2 else 3.0) * tau / (n // m)


def adversarial_rows(X, i, tau, center):
    """Candidate values for row i: the original, far outside the interval on either
    side (and mixed), the interval's end points, zeros, a copy of another row."""
    d = X.shape[1]
    c = np.zeros(d) if center is None else center
    signs = np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    return [X[i].copy(), np.full(d, HUGE), np.full(d, -HUGE), HUGE * signs, -HUGE * signs,
            c + 3 * tau, c - 3 * tau, np.zeros(d), X[(i + 1) % X.shape[0]].copy(),
            X[i] + 2.5 * tau * signs]


def max_neighbour_change(statistic, X, tau, center):
    """Largest (ℓ∞, ℓ1, ℓ2) change of ``statistic`` over every pair of datasets that
    differ in one row, exhaustively over the row and the candidate replacements."""
    worst = np.zeros(3)
    for i in range(X.shape[0]):
        outs = []
        for row in adversarial_rows(X, i, tau, center):
            Y = X.copy()
            Y[i] = row
            outs.append(statistic(Y))
        for u, v in itertools.combinations(outs, 2):
            diff = u - v
            worst = np.maximum(worst, [np.abs(diff).max(), np.abs(diff).sum(),
                                       np.linalg.norm(diff)])
    return worst


@pytest.mark.parametrize("n, d", [(20, 3), (37, 5), (60, 6)])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 7, 8, 100])
@pytest.mark.parametrize("centered", [False, True])
def test_cwme_sensitivity_holds_on_adversarial_neighbours(n, d, m, centered):
    rng = np.random.default_rng(n * 100 + m)
    tau = 0.7
    X = rng.standard_t(2.0, size=(n, d))
    center = rng.normal(size=d) if centered else None
    sens = cwme_sensitivity(n, d, tau, m)
    linf = expected_cwme_linf(n, tau, m)
    assert sens.linf == pytest.approx(linf, rel=1e-15)
    assert sens.l1 == pytest.approx(d * linf, rel=1e-15)
    assert sens.l2 == pytest.approx(math.sqrt(d) * linf, rel=1e-15)

    worst = max_neighbour_change(
        lambda Y: trimmed_median_of_means(Y, tau=tau, n_groups=m, center=center),
        X, tau, center)
    slack = 1 + 1e-9
    assert worst[0] <= sens.linf * slack
    assert worst[1] <= sens.l1 * slack
    assert worst[2] <= sens.l2 * slack
    if min(m, n) == 1:  # the clipped mean: -HUGE -> +HUGE moves it by 6τ/n everywhere
        np.testing.assert_allclose(worst, sens, rtol=1e-9)


@pytest.mark.parametrize("n, d, m", [(20, 3, 3), (37, 4, 4), (41, 3, 7)])
def test_cwme_sensitivity_holds_with_scaled_rows_and_shuffled_groups(n, d, m):
    """The gradient-oracle form (rows scale_i·x_i, groups a random permutation of
    the consecutive split) has the same sensitivity: the proof only uses the group
    sizes and that every clipped value lies in an interval of length 6τ."""
    rng = np.random.default_rng(n + m)
    tau = 0.7
    X = rng.standard_t(2.0, size=(n, d))
    scale = rng.standard_t(2.0, size=n) + 0.1  # nonzero: any row value is reachable
    groups = rng.permutation(consecutive_groups(n, m))
    sens = cwme_sensitivity(n, d, tau, m)
    worst = max_neighbour_change(
        lambda Y: trimmed_median_of_means(Y, tau=tau, n_groups=m, scale=scale,
                                          groups=groups),
        X, tau, None)
    assert np.all(worst <= np.asarray(sens) * (1 + 1e-9))
    nsens = noise_smoothing_sensitivity(n, d, tau, 0.5)
    worst = max_neighbour_change(
        lambda Y: noise_smoothing_mean(Y, tau=tau, smoothing_variance=0.5, scale=scale),
        X, tau, None)
    assert np.all(worst <= np.asarray(nsens) * (1 + 1e-9))


@pytest.mark.parametrize("sparse", [False, True])
def test_cwme_shuffle_draws_random_groups_then_the_noise(sparse):
    """cwme(shuffle=True) is, draw for draw, a fresh secret of the source keying
    random_groups (every assignment with the consecutive sizes equally likely:
    tests/kernels/test_kernels_heavy_tailed_shuffle.py), then the statistic on those
    groups plus the plan's noise; dense and CSR (uint8 labels read in place, int64
    after check_groups) give the same labels."""
    from skdpsparse._kernels.chacha import key_words
    from skdpsparse._kernels.heavy_tailed_scaled import random_groups
    from skdpsparse.mechanisms.heavy_tailed import cwme, plan_cwme
    from skdpsparse.utils._random import RandomSource

    n, d, m, tau = 500, 6, 9, 0.8
    X = np.random.default_rng(5).standard_t(2.0, size=(n, d))
    X = sp.csr_matrix(X) if sparse else X
    plan = plan_cwme(n, d, tau=tau, n_groups=m, epsilon=1.0, delta=1e-6)
    got = cwme(X, plan, RandomSource(b"k" * 32), shuffle=True)
    rs = RandomSource(b"k" * 32)
    groups = random_groups(n, m, key_words(rs.secret_int(256).to_bytes(32, "little")))
    np.testing.assert_array_equal(got, cwme(X, plan, rs, groups=groups))
    assert not np.array_equal(got, cwme(X, plan, RandomSource(b"k" * 32)))
    with pytest.raises(ValueError, match="not both"):
        cwme(X, plan, RandomSource(b"k" * 32), groups=groups, shuffle=True)


def attaining_dataset(n, d, m, tau, center):
    """Data whose median of means moves by exactly Δ∞ in every coordinate when row
    ``n - 1`` (in the last, smallest group) goes from -HUGE to +HUGE: the other groups
    sit at -A, (0 for even m) and +A around the centre, with A > 3τ/n_min, so the last
    group's mean is the median (odd m) or straddles the middle pair (even m)."""
    bounds = np.array_split(np.arange(n), m)
    n_min = min(len(b) for b in bounds)
    assert len(bounds[-1]) == n_min
    A = 2.0 * tau  # inside the interval, and > 3τ/n_min once n_min >= 2
    levels = ([-A] * ((m - 1) // 2) + ([0.0] if m % 2 == 0 else []) + [A] * ((m - 1) // 2))
    X = np.tile(center, (n, 1))
    for rows, level in zip(bounds[:-1], levels):
        X[rows] += level
    return X


@pytest.mark.parametrize("n, m", [(20, 1), (20, 3), (23, 3), (37, 4), (41, 5), (60, 6),
                                  (60, 7), (61, 8)])
def test_cwme_sensitivity_is_attained(n, m):
    d, tau = 4, 0.7
    center = np.array([0.0, 1.0, -2.0, 5.0])
    X = attaining_dataset(n, d, m, tau, center)
    lo, hi = X.copy(), X.copy()
    lo[-1] = -HUGE
    hi[-1] = HUGE
    diff = (trimmed_median_of_means(hi, tau=tau, n_groups=m, center=center)
            - trimmed_median_of_means(lo, tau=tau, n_groups=m, center=center))
    sens = cwme_sensitivity(n, d, tau, m)
    np.testing.assert_allclose(diff, sens.linf, rtol=1e-9)
    assert np.linalg.norm(diff) == pytest.approx(sens.l2, rel=1e-9)
    assert np.abs(diff).sum() == pytest.approx(sens.l1, rel=1e-9)


def test_cwme_sensitivity_against_the_seed():
    # m = 4 log(2d/β) groups dividing n: Δ₂ is 24τ√d log(2d/β)/n for odd m, half the
    # seed's 48τ√d log(2d/β)/n (Theorem 4.1), and a quarter of it for even m.
    d, tau = 9, 10.0
    for m in (21, 22):
        n = 1000 * m
        beta = 2 * d / math.exp(m / 4)  # so that 4 log(2d/β) = m exactly
        seed_l2 = 48 * tau * math.sqrt(d) * math.log(2 * d / beta) / n
        ratio = cwme_sensitivity(n, d, tau, m).l2 / seed_l2
        assert ratio == pytest.approx(0.5 if m % 2 else 0.25, rel=1e-12)


@pytest.mark.parametrize("c", [1e-4, 0.3, 1.0, 3.0])
@pytest.mark.parametrize("n, d", [(20, 3), (45, 6)])
def test_noise_smoothing_sensitivity_holds_and_is_attained(c, n, d):
    rng = np.random.default_rng(7)
    tau = 1.3
    X = rng.standard_t(2.0, size=(n, d)) * 3
    sens = noise_smoothing_sensitivity(n, d, tau, c)
    s_c = 2 * math.sqrt(2) / 3 * (2 * special.ndtr(1 / math.sqrt(c)) - 1)
    assert sens.linf == pytest.approx(2 * s_c * tau / n, rel=1e-12)
    assert sens.l2 <= 4 * math.sqrt(2) / 3 * tau * math.sqrt(d) / n
    worst = max_neighbour_change(
        lambda Y: noise_smoothing_mean(Y, tau=tau, smoothing_variance=c), X, tau, None)
    slack = 1 + 1e-9
    assert worst[0] <= sens.linf * slack
    assert worst[1] <= sens.l1 * slack
    assert worst[2] <= sens.l2 * slack
    # -HUGE -> +HUGE in every coordinate approaches sup - inf = 2 S_c.
    np.testing.assert_allclose(worst, sens, rtol=1e-6)


def test_noise_smoothing_seed_noise_is_too_small_for_small_c():
    # The seed adds N(0, τ²d/(ρn²)): Δ₂ = √2·τ√d/n. Sufficient iff 2 S_c <= √2.
    n, d, tau = 100, 4, 1.0
    seed_l2 = math.sqrt(2) * tau * math.sqrt(d) / n
    assert noise_smoothing_sensitivity(n, d, tau, 1.0).l2 < seed_l2
    assert noise_smoothing_sensitivity(n, d, tau, 0.7).l2 > seed_l2
    assert noise_smoothing_sensitivity(n, d, tau, 1e-6).l2 == pytest.approx(
        4 * math.sqrt(2) / 3 * tau * math.sqrt(d) / n, rel=1e-12)


# ------------------------------------------------------------------------ the noise
def _ks(noise, dist):
    return stats.kstest(noise, dist.cdf).pvalue


def test_cwme_gaussian_noise_has_the_stated_scale():
    rng = np.random.default_rng(11)
    n, d, tau, m = 300, 4000, 2.0, 7
    X = rng.standard_t(3.0, size=(n, d))
    eps, delta = 0.8, 1e-6
    est, budget, info = private_cwme(X, tau=tau, n_groups=m, epsilon=eps, delta=delta,
                                     rng=np.random.default_rng(0))
    rho = approx_dp_to_zcdp(eps, delta)
    sigma = 6 * tau * math.sqrt(d) / (n // m) / math.sqrt(2 * rho)  # m odd
    assert budget == ZCDP(rho)
    assert info["scale"] == pytest.approx(sigma, rel=1e-12)
    assert info["approx_dp"].epsilon <= eps and info["approx_dp"].delta == delta
    noise = est - trimmed_median_of_means(X, tau=tau, n_groups=m)
    assert _ks(noise, stats.norm(0, sigma)) > 1e-3
    assert _ks(noise, stats.norm(0, 1.5 * sigma)) < 1e-3
    assert _ks(noise, stats.norm(0, sigma / 1.5)) < 1e-3


def test_cwme_laplace_noise_has_the_stated_scale():
    rng = np.random.default_rng(12)
    n, d, tau, m = 300, 4000, 2.0, 6
    X = rng.standard_t(3.0, size=(n, d))
    est, budget, info = private_cwme(X, tau=tau, n_groups=m, epsilon=2.0, delta=0.0,
                                     rng=np.random.default_rng(1))
    b = d * 3 * tau / (n // m) / 2.0  # m even: Δ₁ = 3τd/n_min
    assert budget == PureDP(2.0) and info["noise"] == "laplace"
    assert info["scale"] == pytest.approx(b, rel=1e-12)
    noise = est - trimmed_median_of_means(X, tau=tau, n_groups=m)
    assert _ks(noise, stats.laplace(0, b)) > 1e-3
    assert _ks(noise, stats.laplace(0, 1.5 * b)) < 1e-3
    assert _ks(noise, stats.norm(0, math.sqrt(2) * b)) < 1e-3  # same variance, not Laplace


def test_cwme_zcdp_variant():
    rng = np.random.default_rng(13)
    n, d, tau, m, rho = 200, 3000, 1.0, 5, 0.05
    X = rng.standard_t(3.0, size=(n, d))
    est, budget, info = private_cwme_zcdp(X, tau=tau, n_groups=m, rho=rho,
                                          rng=np.random.default_rng(2))
    sigma = 6 * tau * math.sqrt(d) / 40 / math.sqrt(2 * rho)
    assert budget == ZCDP(rho) and info["scale"] == pytest.approx(sigma, rel=1e-12)
    noise = est - trimmed_median_of_means(X, tau=tau, n_groups=m)
    assert _ks(noise, stats.norm(0, sigma)) > 1e-3
    assert _ks(noise, stats.norm(0, 1.5 * sigma)) < 1e-3


@pytest.mark.parametrize("c", [0.05, 1.0])
def test_noise_smoothing_noise_has_the_stated_scale(c):
    rng = np.random.default_rng(14)
    n, d, tau = 150, 3000, 3.0
    X = rng.standard_t(3.0, size=(n, d))
    est, budget, info = private_noise_smoothing_mean(
        X, tau=tau, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(3),
        smoothing_variance=c)
    rho = approx_dp_to_zcdp(1.0, 1e-5)
    s_c = 2 * math.sqrt(2) / 3 * math.erf(1 / math.sqrt(2 * c))
    sigma = 2 * s_c * tau * math.sqrt(d) / n / math.sqrt(2 * rho)
    assert budget == ZCDP(rho) and info["scale"] == pytest.approx(sigma, rel=1e-12)
    noise = est - noise_smoothing_mean(X, tau=tau, smoothing_variance=c)
    assert _ks(noise, stats.norm(0, sigma)) > 1e-3
    assert _ks(noise, stats.norm(0, 1.5 * sigma)) < 1e-3
    est2, budget2, _ = private_noise_smoothing_mean_zcdp(
        X, tau=tau, rho=rho, rng=np.random.default_rng(3), smoothing_variance=c)
    np.testing.assert_array_equal(est2, est)
    assert budget2 == budget


# ------------------------------------------------------------- inputs and parameters
def test_sparse_input_gives_the_same_release():
    rng = np.random.default_rng(5)
    X = rng.standard_t(3.0, size=(50, 8))
    X[np.abs(X) < 0.8] = 0
    center = np.linspace(-1, 1, 8)
    for A in (sp.csr_matrix(X), sp.csc_matrix(X), sp.csr_array(X)):
        a, _, _ = private_cwme(A, tau=1.0, n_groups=3, epsilon=1.0, delta=1e-6,
                               rng=np.random.default_rng(0), center=center)
        b, _, _ = private_cwme(X, tau=1.0, n_groups=3, epsilon=1.0, delta=1e-6,
                               rng=np.random.default_rng(0), center=center)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        a, _, _ = private_noise_smoothing_mean_zcdp(A, tau=1.0, rho=0.1,
                                                    rng=np.random.default_rng(0))
        b, _, _ = private_noise_smoothing_mean_zcdp(X, tau=1.0, rho=0.1,
                                                    rng=np.random.default_rng(0))
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # Duplicate entries are summed before clipping (clip(5) + clip(5) != clip(10)).
    D = sp.csr_matrix((np.array([5.0, 5.0]), np.array([0, 0]), np.array([0, 2, 2])),
                      shape=(2, 1))
    assert trimmed_median_of_means(D, tau=3.0, n_groups=1)[0] == pytest.approx(4.5)


def test_float32_and_layouts():
    rng = np.random.default_rng(6)
    X = rng.standard_t(3.0, size=(40, 5))
    ref = trimmed_median_of_means(X.astype(np.float32).astype(np.float64), tau=1.0,
                                  n_groups=4)
    for Y in (X.astype(np.float32), np.asfortranarray(X.astype(np.float32))):
        np.testing.assert_allclose(trimmed_median_of_means(Y, tau=1.0, n_groups=4), ref,
                                   rtol=1e-13, atol=1e-15)


def test_invalid_inputs():
    X = np.ones((10, 2))
    rng = np.random.default_rng(0)
    for bad in (np.nan, np.inf, -np.inf):
        Y = X.copy()
        Y[3, 1] = bad
        with pytest.raises(ValueError, match="NaN or infinite"):
            private_cwme(Y, tau=1.0, n_groups=3, epsilon=1.0, delta=0, rng=rng)
        with pytest.raises(ValueError, match="NaN or infinite"):
            private_noise_smoothing_mean_zcdp(Y, tau=1.0, rho=1.0, rng=rng)
        with pytest.raises(ValueError, match="NaN or infinite"):
            private_cwme_zcdp(sp.csr_matrix(Y), tau=1.0, n_groups=3, rho=1.0, rng=rng)
    with pytest.raises(TypeError):
        private_cwme(X, tau=1.0, n_groups=3, epsilon=1.0, delta=0, rng=0)
    with pytest.raises(ValueError):
        private_noise_smoothing_mean(X, tau=1.0, epsilon=1.0, delta=0.0, rng=rng)
    for kwargs in (dict(tau=0.0), dict(tau=np.inf), dict(epsilon=0.0), dict(delta=1.0),
                   dict(epsilon=-1.0)):
        args = dict(tau=1.0, n_groups=3, epsilon=1.0, delta=1e-6, rng=rng) | kwargs
        with pytest.raises(ValueError):
            private_cwme(X, **args)
    with pytest.raises(ValueError):
        private_cwme(np.ones((0, 3)), tau=1.0, n_groups=3, epsilon=1.0, delta=0, rng=rng)


def test_n_groups_for():
    assert n_groups_for(10, 0.1) == math.ceil(4 * math.log(200))  # = 22
    assert n_groups_for(10, 0.1, even=True) == 22
    assert n_groups_for(1, 0.5) == math.ceil(4 * math.log(4)) == 6
    assert n_groups_for(1, 0.5, even=True) == 6
    assert n_groups_for(1000, 0.01) == 49 and n_groups_for(1000, 0.01, even=True) == 50
    assert n_groups_for(10, 0.1, n_samples=5) == 5
    with pytest.raises(ValueError):
        n_groups_for(10, 0.0)
    # More groups than rows: every row is its own group (an empty group has no mean).
    X = np.arange(5.0)[:, None]
    assert trimmed_median_of_means(X, tau=10.0, n_groups=50)[0] == 2.0
    assert cwme_sensitivity(5, 1, 1.0, 50).linf == 6.0


def test_truncation_for():
    n, d, rho, eps = 10**5, 10, 0.02, 1.0
    for k in (1.5, 2.0, 4.0):
        base = (math.sqrt(rho) * n / math.sqrt(d)) ** (1 / k)
        assert truncation_for("cdpcwme", n, d, k, rho=rho) == pytest.approx(base)
        assert truncation_for("cdpcwme", n, d, k, rho=rho, moment_bound=3.0) == \
            pytest.approx(base * 3.0 ** (1 / k))
        assert truncation_for("dpcwme", n, d, k, epsilon=eps) == pytest.approx(
            (eps * n / d) ** (1 / k))
    nsme = (math.sqrt(rho) * n / math.sqrt(d)) ** 0.5
    assert truncation_for("cdpnsme", n, d, 2, rho=rho) == pytest.approx(nsme)
    # A bound on the 4th moment gives E x² <= M^(1/2): τ scales by M^(1/4).
    assert truncation_for("cdpnsme", n, d, 4, rho=rho, moment_bound=16.0) == \
        pytest.approx(2 * nsme)
    for bad in (dict(method="cdpnsme", moment=1.5, rho=rho), dict(method="dpcwme", moment=2),
                dict(method="cdpcwme", moment=2), dict(method="cdpcwme", moment=1.0, rho=rho),
                dict(method="other", moment=2, rho=rho)):
        with pytest.raises(ValueError):
            truncation_for(bad.pop("method"), n, d, bad.pop("moment"), **bad)


# ------------------------------------------------------------------------- accuracy
def test_cwme_accuracy_on_student_t_within_theorem_4_1():
    """n = 1e5, d = 10, ε = 1, δ = 1e-6, k = 2 on Student-t(3) (variance 3), τ and m
    from Corollary 4.2 / Algorithm 3 with β = 0.1, 50 seeded runs.

    Asserted (explicit constants):
    * non-private part: ‖μ̂ - μ‖ <= √d (10√(m/n) + 3 (14/τ)^{k-1}) (Theorem 4.1 proof);
    * private: ‖μ̃ - μ‖ <= that + 2σ(√d + √log(1/β)) (ibid.), in every run;
    * the noise is what we state: mean ‖μ̃ - μ‖² = dσ² + mean ‖μ̂ - μ‖² within 25%;
    * in Corollary 4.2's units, R = √(d/n) + √d (√d/(√ρ n))^{(k-1)/k}: the error is
      within C·R with C = 2·(w m/(√2 τ)) M^{1/k} (the noise's own constant, doubled;
      w/τ = 3 for even m), and at least a fifth of it on average.
    Observed: mean error ≈ 3.5, i.e. ≈ 64 R (R ≈ 0.055) and ≈ 220x the non-private
    plain mean's ≈ 0.016; it is all noise (σ ≈ 1.15 per coordinate: τ ≈ 122, clip
    width 6τ ≈ 730, m = 22), the non-private median of means is at ≈ 0.021. With these
    constants the Corollary's τ is far from the practical optimum (τ ≈ 2 does ~0.1).
    """
    n, d, eps, delta, k, beta = 10**5, 10, 1.0, 1e-6, 2.0, 0.1
    M = central_moment_bound("student_t", 3.0, k)
    rho = approx_dp_to_zcdp(eps, delta)
    tau = truncation_for("cdpcwme", n, d, k, rho=rho, moment_bound=M)
    m = n_groups_for(d, beta, n)
    assert m == 22
    nonpriv_bound = math.sqrt(d) * (10 * math.sqrt(m / n) + 3 * (14 / tau) ** (k - 1))
    rate = math.sqrt(d / n) + math.sqrt(d) * (math.sqrt(d) / (math.sqrt(rho) * n)) ** (
        (k - 1) / k)
    C = 2 * (3 * m / math.sqrt(2)) * M ** (1 / k)
    errs, nonpriv, plain = [], [], []
    sigma = None
    for seed in range(50):
        X, mu = make_heavy_tailed(n, d, distribution="student_t", tail_parameter=3.0,
                                  random_state=seed)
        est, budget, info = private_cwme(X, tau=tau, n_groups=m, epsilon=eps, delta=delta,
                                         rng=np.random.default_rng(1000 + seed))
        sigma = info["scale"]
        errs.append(np.linalg.norm(est - mu))
        nonpriv.append(np.linalg.norm(trimmed_median_of_means(X, tau=tau, n_groups=m) - mu))
        plain.append(np.linalg.norm(X.mean(axis=0) - mu))
    errs, nonpriv = np.array(errs), np.array(nonpriv)
    assert np.all(nonpriv <= nonpriv_bound)
    assert np.all(errs <= nonpriv + 2 * sigma * (math.sqrt(d) + math.sqrt(math.log(1 / beta))))
    mse, predicted = np.mean(errs**2), d * sigma**2 + np.mean(nonpriv**2)
    assert 0.75 * predicted <= mse <= 1.25 * predicted
    assert np.all(errs <= C * rate)
    assert np.mean(errs) >= C * rate / 5


def test_noise_smoothing_accuracy_on_student_t():
    # Same setting, τ from the k = 2 balance with M = E x_j² = 3 + μ_j² <= 4. Asserted:
    # the noise level (mean squared error = dσ² + non-private part, ±25%) and a loose
    # sanity bound on the non-private part (statistical error plus a bias of order
    # √d M₂/τ; the constants 10 and 1 are ours, not a theorem's). Observed: error
    # ≈ 0.086 (σ ≈ 0.026), non-private ≈ 0.016.
    n, d, eps, delta = 10**5, 10, 1.0, 1e-6
    rho = approx_dp_to_zcdp(eps, delta)
    tau = truncation_for("cdpnsme", n, d, 2, rho=rho, moment_bound=4.0)
    errs, nonpriv = [], []
    sigma = None
    for seed in range(20):
        X, mu = make_heavy_tailed(n, d, distribution="student_t", tail_parameter=3.0,
                                  random_state=seed)
        est, _, info = private_noise_smoothing_mean(X, tau=tau, epsilon=eps, delta=delta,
                                                    rng=np.random.default_rng(seed))
        sigma = info["scale"]
        errs.append(np.linalg.norm(est - mu))
        nonpriv.append(np.linalg.norm(noise_smoothing_mean(X, tau=tau) - mu))
    errs, nonpriv = np.array(errs), np.array(nonpriv)
    assert np.all(nonpriv <= math.sqrt(d) * (10 / math.sqrt(n) * math.sqrt(3) + 4.0 / tau))
    mse, predicted = np.mean(errs**2), d * sigma**2 + np.mean(nonpriv**2)
    assert 0.75 * predicted <= mse <= 1.25 * predicted


# ------------------------------------- the clipping interval in floating point (issue 17)
@pytest.mark.parametrize("center, tau", [
    (1e16, 0.4),           # the case: c ± 1.2 rounded to c ± 2 (width 4 > 2.4)
    (-1e16, 0.4), (3e15 + 0.5, 0.1), (123456789.125, 1e-9), (1e300, 1e284),
    (1.7e308, 1e307),      # c + 3τ overflows
    (-1.7e308, 2e307), (0.0, 1.0 / 3.0), (1.0, 0.1),
])
@pytest.mark.parametrize("path", ["dense", "fortran", "csr", "scaled_dense", "scaled_csr",
                                  "groups"])
def test_cwme_clipping_interval_is_at_most_6_tau_wide_in_floating_point(center, tau, path):
    """Every clipped value must lie in an interval of width at most 6τ (what the
    sensitivity 6τ/n_min assumes). With |c| ≫ τ the float ends c ± 3τ round outwards
    (c = 1e16, τ = 0.4: c − 2 and c + 2, so one row moved the statistic by 4.0 against
    the claimed 2.4). Here n = m = 3 groups of one row (n_min = 1, Δ∞ = 6τ), rows 1
    and 2 clipped to the two ends, so row 0, going from −1.7e308 to +1.7e308, takes the
    median from one end to the other; the exact difference of the two statistics
    (taken in rationals) must be at most Δ∞ as computed by cwme_sensitivity."""
    from fractions import Fraction

    X0 = np.array([[-1.7e308, center], [-1.7e308, center], [1.7e308, center]])
    X1 = X0.copy()
    X1[0, 0] = 1.7e308
    kw = dict(tau=tau, n_groups=3, center=center)
    if path.startswith("scaled"):
        kw["scale"] = np.ones(3)
    if path == "groups":
        kw["groups"] = np.array([2, 0, 1])

    def stat(X):
        if path == "fortran":
            X = np.asfortranarray(X)
        elif path.endswith("csr"):
            X = sp.csr_matrix(X)
        return trimmed_median_of_means(X, **kw)

    s0, s1 = stat(X0), stat(X1)
    linf = cwme_sensitivity(3, 2, tau, 3).linf
    assert Fraction(float(s1[0])) - Fraction(float(s0[0])) <= Fraction(linf)
    assert s1[1] == s0[1]
    # The interval is no narrower than needed either: it holds the centre.
    assert s0[0] <= center <= s1[0]
