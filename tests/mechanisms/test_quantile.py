"""Private quantiles (exponential mechanism over a public grid) and the clipped mean
whose interval they locate: exact counts, the sampling law, the budget and its
events, contribution bounding without rejection."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from skdpsparse.accounting import ZCDP, PureDP, approx_dp_to_zcdp
from skdpsparse.accounting.composition import implied_by
from skdpsparse.mean import DPHeavyTailedMean
from skdpsparse.mechanisms.heavy_tailed_clip import (
    box_clipped_mean,
    private_quantile_clipped_mean,
)
from skdpsparse.mechanisms.quantile import (
    geometric_grid,
    private_quantiles,
    quantile_epsilon,
    quantile_scores,
    rank_counts,
    rank_error,
)
from skdpsparse.utils._random import RandomSource


def test_geometric_grid_is_symmetric_and_scale_free():
    g = geometric_grid(-2, 3, 4)
    assert g.size == 2 * (4 * 5 + 1) + 1
    np.testing.assert_array_equal(g, -g[::-1])
    pos = g[g > 0]
    np.testing.assert_allclose(pos[1:] / pos[:-1], 2 ** 0.25, rtol=1e-14)
    assert pos[0] == 0.25 and pos[-1] == 8.0
    with pytest.raises(ValueError, match="steps_per_octave"):
        geometric_grid(3, 3)


@pytest.mark.parametrize("sparse", [False, True])
def test_rank_counts_match_brute_force(sparse):
    rng = np.random.default_rng(0)
    X = rng.standard_t(2, size=(300, 5)) * (rng.random((300, 5)) < 0.4)
    X[0, 0] = 1e300  # beyond the grid: counted at no grid point, never rejected
    grid = geometric_grid(-3, 3, 2)
    counts = rank_counts(sp.csr_matrix(X) if sparse else X, grid)
    expected = (X[:, :, None] <= grid[None, None, :]).sum(axis=0)
    np.testing.assert_array_equal(counts, expected)
    strict = rank_counts(sp.csr_matrix(X) if sparse else X, grid, strict=True)
    np.testing.assert_array_equal(strict, (X[:, :, None] < grid[None, None, :]).sum(axis=0))
    X[1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        rank_counts(sp.csr_matrix(X) if sparse else X, grid)


def test_draws_follow_the_exponential_mechanism():
    """3000 draws of the median of one column on a 7-point grid against
    P(k) ∝ exp(−ε u_k/2), u_k = dist(4, [#{x < g_k}, #{x <= g_k}]) + |k − k_0| (the
    grid's 0 is k_0 = 2; 0.0 is an atom of the data): chi-square goodness of fit."""
    x = np.array([-3.0, -1.0, 0.0, 0.0, 0.3, 2.0, 5.0, 7.0])[:, None]
    grid = np.array([-4.0, -2.0, 0.0, 1.0, 3.0, 6.0, 8.0])
    eps, draws = 1.0, 3000
    below = np.array([0, 1, 2, 5, 6, 7, 8])
    at_most = np.array([0, 1, 4, 5, 6, 7, 8])
    np.testing.assert_array_equal(rank_counts(x, grid, strict=True)[0], below)
    np.testing.assert_array_equal(rank_counts(x, grid)[0], at_most)
    scores = np.array([4, 3, 0, 1, 2, 3, 4]) + np.abs(np.arange(7) - 2)
    np.testing.assert_array_equal(quantile_scores(below, at_most, 4, grid), scores)
    p = np.exp(-eps * scores / 2)
    p /= p.sum()
    rng = RandomSource(bytes(32))
    out = np.array([private_quantiles(x, [0.5], epsilon_each=eps, rng=rng, grid=grid)[0, 0]
                    for _ in range(draws)])
    observed = np.array([(out == g).sum() for g in grid])
    assert observed.sum() == draws
    assert stats.chisquare(observed, p * draws).pvalue > 1e-3
    # A factor 2 in ε is detected.
    q = np.exp(-2 * eps * scores / 2)
    q /= q.sum()
    assert stats.chisquare(observed, q * draws).pvalue < 1e-6


def test_quantile_epsilon_composes_to_the_share():
    assert quantile_epsilon(10, epsilon=0.5) == 0.05
    eps = quantile_epsilon(10, rho=0.02)
    assert 10 * eps**2 / 8 == pytest.approx(0.02, rel=1e-14)
    with pytest.raises(ValueError):
        quantile_epsilon(10, epsilon=1.0, rho=1.0)
    assert rank_error(100, 1.0, 0.05) == pytest.approx(2 * (math.log(100) + math.log(20)))


def test_private_quantiles_land_near_the_true_quantile():
    rng = np.random.default_rng(1)
    X = rng.lognormal(3, 1, size=(20000, 2))
    q = private_quantiles(X, [0.1, 0.9], epsilon_each=1.0, rng=rng)
    true = np.quantile(X, [0.1, 0.9], axis=0)
    np.testing.assert_allclose(q, true, rtol=0.15)  # grid resolution 9 %, rank error ~30


# ------------------------------------------------------------- the clipped mean
def test_box_clipped_mean_is_exact_for_every_order_and_container():
    rng = np.random.default_rng(2)
    X = rng.standard_t(2, size=(1000, 6)) * (rng.random((1000, 6)) < 0.5)
    lower, upper = np.full(6, -1.5), np.array([1.0, 2, 3, 0.5, 4, -1.5])  # last: width 0
    u, _ = box_clipped_mean(X, lower, upper)
    width = upper - lower
    ref = np.where(width > 0, np.clip((X - lower) / np.where(width > 0, width, 1), 0, 1)
                   .mean(axis=0), 0.0)
    np.testing.assert_allclose(u, ref, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(box_clipped_mean(X[::-1], lower, upper)[0], u)
    np.testing.assert_array_equal(box_clipped_mean(sp.csc_matrix(X), lower, upper)[0], u)


@pytest.mark.parametrize("delta", [1e-6, 0.0])
def test_clipped_mean_release_is_statistic_plus_stated_noise(delta):
    """d = 4000 columns with stated bounds: the residual in unit coordinates against
    N(0, σ²), σ = (√d/n)/√(2ρ), or Laplace(b), b = (d/n)/ε."""
    n, d, eps = 500, 4000, 1.0
    rng = np.random.default_rng(3)
    X = rng.standard_t(3, size=(n, d))
    lower, upper = -2.0, 3.0
    est = DPHeavyTailedMean(epsilon=eps, delta=delta, bounds=(lower, upper),
                            random_state=0).fit(X)
    assert est.method_ == "clipped"
    unit = (est.mean_ - lower) / (upper - lower)
    residual = unit - np.clip((X - lower) / (upper - lower), 0, 1).mean(axis=0)
    if delta:
        rho = approx_dp_to_zcdp(eps, delta)
        scale, dist = math.sqrt(d) / n / math.sqrt(2 * rho), stats.norm
        assert est.privacy_spent_ == ZCDP(rho)
    else:
        scale, dist = d / n / eps, stats.laplace
        assert est.privacy_spent_ == PureDP(eps)
    assert stats.kstest(residual / scale, dist.cdf).pvalue > 1e-3
    assert stats.kstest(residual / (1.2 * scale), dist.cdf).pvalue < 1e-3
    np.testing.assert_allclose(est.noise_scale_, scale * (upper - lower), rtol=1e-12)


def test_huge_rows_are_clipped_not_rejected(shared_noise):
    """A row replaced by ±1e300 moves the release by at most width/n per column
    (same noise)."""
    n, d = 400, 5
    X = np.random.default_rng(4).standard_t(3, size=(n, d))
    kw = dict(bounds=(-2.0, 2.0), epsilon=1.0)
    a = DPHeavyTailedMean(**kw).fit(X).mean_
    Y = X.copy()
    Y[7] = 1e300 * np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    b = DPHeavyTailedMean(**kw).fit(Y).mean_
    assert np.all(np.isfinite(b))
    assert 0 < np.abs(a - b).max() <= 4.0 / n * (1 + 1e-6)


# ------------------------------------------------ quantiles + mean: the composition
@pytest.mark.parametrize("delta, noise", [(1e-6, "gaussian"), (1e-6, "laplace"),
                                          (0.0, "auto")])
def test_private_clip_budget_is_the_composition(delta, noise):
    X = np.random.default_rng(5).lognormal(0, 1.5, size=(20000, 3))
    est, budget, info = private_quantile_clipped_mean(
        X, epsilon=1.0, delta=delta, rng=np.random.default_rng(0), scale_fraction=0.2,
        noise=noise)
    leaves = budget.event.leaves()
    # Five quantiles per column, their tail bins charged as two draws more (the
    # default tails="counted"), and one mean; with a Laplace mean (pure, or mixed:
    # smaller draws) α reaches 1/32 and the two draws of the shared scale replace
    # them (no bins).
    k = 2 if info.get("shared") else 21
    assert bool(info.get("shared")) == (noise != "gaussian")
    assert [k_ for _, k_ in leaves] == [k, 1]
    if noise == "gaussian":
        rho = approx_dp_to_zcdp(1.0, delta)
        assert budget.rho == pytest.approx(rho, rel=1e-14)
        assert leaves[0][0].rho * 15 == pytest.approx(0.2 * rho, rel=1e-12)
        assert info["approx_dp"].epsilon <= 1.0 * (1 + 1e-9)
    elif delta:  # zCDP draws, then a pure release: (ε, δ) by Rényi accounting
        from skdpsparse.accounting import ApproxDP, compose_events

        from skdpsparse.mechanisms.heavy_tailed_clip import mixed_draws_rho

        assert budget == ApproxDP(1.0, delta)
        # The draws' ρ_d leaves the mean (1 − f)ε (f = 0.2, the shared scale: no bins).
        assert leaves[0][0].rho * 2 == pytest.approx(mixed_draws_rho(1.0, delta, 0.2),
                                                     rel=1e-12)
        eps_m = leaves[1][0].epsilon
        assert 0.8 * (1 - 2**-29) <= eps_m <= 0.8 * (1 + 1e-6)
        assert compose_events([budget.event], delta).epsilon <= 1.0
        assert compose_events([budget.event.events[0], type(leaves[1][0])(eps_m * 1.01)],
                              delta).epsilon > 1.0  # ε_m is (nearly) the largest
    else:
        assert isinstance(budget, PureDP)
        assert budget.epsilon == pytest.approx(1.0, rel=1e-14)
        assert leaves[0][0].epsilon * 2 == pytest.approx(0.2, rel=1e-12)
    assert implied_by(budget.event, budget)
    assert np.all(info["lower"] <= info["upper"])
    if delta:
        np.testing.assert_allclose(est, X.mean(axis=0), rtol=0.15)
    else:  # one interval [−C, C] for all columns, C = 2 × a pooled upper quantile
        assert np.all(np.isfinite(est)) and np.ptp(info["upper"]) == 0
        assert np.all(info["lower"] == -info["upper"])
        np.testing.assert_allclose(est, X.mean(axis=0), rtol=0.5)


def test_laplace_is_chosen_for_few_columns():
    """Public numbers only: at (1, 1e-6) with nothing spent before, the Laplace mean
    has less noise for d <= 10 (per-coordinate sd √2·d/ε_m against √d/√(2ρ),
    ρ = 0.0244); after a share f of the mean's budget, ε_m = (1 − f)ε against
    (1 − f)ρ: √2·d/((1 − f)ε) ≤ √d/√(2(1 − f)ρ) ⟺ d ≤ (1 − f)ε²/(4ρ), by hand
    (d ≤ 9 at f = 0.1, d ≤ 8 at f = 0.14). The (ε, δ) fit then composes zCDP draws with
    a pure release by Rényi accounting."""
    from skdpsparse.accounting import ApproxDP
    from skdpsparse.mechanisms.heavy_tailed_clip import laplace_is_better

    assert [d for d in range(1, 30) if laplace_is_better(d, 1.0, 1e-6)] == list(range(1, 11))
    rho = approx_dp_to_zcdp(1.0, 1e-6)
    for f in (0.1, 0.14):
        by_hand = [d for d in range(1, 30) if d <= (1 - f) / (4 * rho)]
        assert [d for d in range(1, 30) if laplace_is_better(d, 1.0, 1e-6, f)] == by_hand
    X = np.random.default_rng(8).standard_t(3, size=(20000, 1))
    est = DPHeavyTailedMean(random_state=0).fit(X)
    assert est.privacy_spent_ == ApproxDP(1.0, 1e-6)
    assert implied_by(est.privacy_spent_.event, ApproxDP(1.0, 1e-6))
    assert type(est.privacy_spent_.event.events[1]).__name__ == "PureDPEvent"
    est = DPHeavyTailedMean(noise="gaussian", random_state=0).fit(X)
    assert isinstance(est.privacy_spent_, ZCDP)


def test_estimator_charges_the_ledger_the_composed_event():
    from skdpsparse.ledger import PrivacyLedger

    X = np.random.default_rng(6).standard_t(3, size=(20000, 2))
    rho = approx_dp_to_zcdp(1.0, 1e-6)
    with PrivacyLedger() as ledger:
        est = DPHeavyTailedMean(epsilon=1.0, noise="gaussian", random_state=0).fit(X)
    assert est.method_ == "private_clip"
    assert ledger.total_zcdp().rho == pytest.approx(rho, rel=1e-12)
    assert ledger.total(1e-6).epsilon <= 1.0 * (1 + 1e-6)
    with PrivacyLedger() as ledger:
        DPHeavyTailedMean(epsilon=1.0, delta=0, random_state=0).fit(X)
    assert ledger.total().epsilon == pytest.approx(1.0, rel=1e-12)


def test_too_few_rows_warn_and_stay_private():
    X = np.random.default_rng(7).standard_t(3, size=(200, 10))
    with pytest.warns(UserWarning, match="too few"):
        est = DPHeavyTailedMean(epsilon=1.0, random_state=0).fit(X)
    assert np.all(np.isfinite(est.mean_))


def _upper_tail_draws(anchored, n_draws=200):
    rng = np.random.default_rng(0)
    x = 18000.0 + 800.0 * rng.random((50_000, 1))  # bounded: the grid cannot resolve its top
    grid = geometric_grid()
    counts = (rank_counts(x, grid, strict=True), rank_counts(x, grid))
    anchors = np.array([[2.0 ** (113 / 8)]]) if anchored else None  # 17 866.9, a release
    src = np.random.default_rng(1)
    return np.array([private_quantiles(x, [0.997], epsilon_each=0.02, rng=src, grid=grid,
                                       counts=counts, anchors=anchors)[0, 0]
                     for _ in range(n_draws)])


def test_tail_quantile_beyond_the_data_stays_near_its_anchor():
    """A bounded column whose top 0.3 % lies between two grid points: every grid point
    above the maximum has the best rank distance, and only the prior separates them.
    With one rank per step from 0 (no anchor) at ε = 0.02 the draws spread over
    octaves above the maximum (a price column got the clipping bound 1.9·10⁶ for a
    maximum of 18 823); anchored at an earlier release below the maximum, each step
    beyond it costs a quarter of a nat and 90 % of the draws are within eight grid
    steps (a factor 2) of the anchor (the geometric law e^(−k/4) puts 86 % within
    eight steps of the maximum, which is one step above the anchor)."""
    good = _upper_tail_draws(True)
    assert np.mean(good <= 2.0 * 18000.0) >= 0.8
    assert np.all(good >= 16000.0)
    broken = _upper_tail_draws(False)
    assert np.mean(broken <= 2.0 * 18000.0) < 0.3


def test_anchored_prior_is_one_sided_beyond_the_anchor():
    grid = geometric_grid(-1, 1, 1)  # [-2, -1, -0.5, 0, 0.5, 1, 2]
    zeros = np.zeros(grid.size)
    k = np.arange(7)
    np.testing.assert_array_equal(quantile_scores(zeros, zeros, 0, grid, 2.0, 1, anchor=4),
                                  2.0 * np.maximum(0, k - 4))
    np.testing.assert_array_equal(quantile_scores(zeros, zeros, 0, grid, 2.0, -1, anchor=4),
                                  2.0 * np.maximum(0, 4 - k))
    np.testing.assert_array_equal(quantile_scores(zeros, zeros, 0, grid, 2.0),
                                  2.0 * np.abs(k - 3))
    with pytest.raises(ValueError, match="direction"):
        quantile_scores(zeros, zeros, 0, grid, 2.0, 0, anchor=4)


def test_shared_scale_scores_move_by_at_most_d():
    """The pooled counts of |x_ij| over all n·d entries: replacing one row (here by
    ±1e300, by 0, or by a copy of another row) moves every count, hence every score,
    by at most d, the sensitivity the draws of the shared scale are calibrated to."""
    rng = np.random.default_rng(11)
    n, d = 300, 6
    X = rng.standard_t(2, size=(n, d))
    grid = geometric_grid(-6, 12, 4)
    A = np.abs(X)
    base = [rank_counts(A, grid, strict=True).sum(0), rank_counts(A, grid).sum(0)]
    for row in (np.full(d, 1e300), np.zeros(d), X[5], -X[9] * 1e6):
        Y = A.copy()
        Y[0] = np.abs(row)
        other = [rank_counts(Y, grid, strict=True).sum(0), rank_counts(Y, grid).sum(0)]
        assert max(np.abs(base[0] - other[0]).max(), np.abs(base[1] - other[1]).max()) <= d
        for q in (0.5, 0.97):
            t = int(np.rint(q * n * d))
            u = quantile_scores(base[0], base[1], t, grid, 1.0)
            v = quantile_scores(other[0], other[1], t, grid, 1.0)
            assert np.abs(u - v).max() <= d


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_shared_scale_when_rows_are_too_few_for_every_column(delta):
    """n = 10⁴ rows of 10 Student-t(3) columns at ε = 1: 50 per-column draws put α
    at its cap, and they were drawn nearly uniformly over the grid (pure DP: ℓ2 errors
    of 2·10⁸ and 1.7·10⁶ on three seeds before the shared scale). Two draws on the
    pooled |x_ij| locate one scale for all columns; the budget is the composition of
    those two draws and the mean."""
    from skdpsparse.datasets import make_heavy_tailed
    from skdpsparse.ledger import PrivacyLedger

    X, mu = make_heavy_tailed(10_000, 10, distribution="student_t", tail_parameter=3.0,
                              random_state=0)
    errors = []
    for seed in range(3):
        with PrivacyLedger() as ledger, pytest.warns(UserWarning, match="shared"):
            est = DPHeavyTailedMean(epsilon=1.0, delta=delta, random_state=seed).fit(X)
        leaves = est.privacy_spent_.event.leaves()
        assert [k for _, k in leaves] == [2, 1]
        if delta == 0:
            assert ledger.total().epsilon == pytest.approx(1.0, rel=1e-12)
        else:
            assert ledger.total(delta).epsilon <= 1.0 * (1 + 1e-6)
        assert np.ptp(est.clip_upper_) == 0 and np.all(est.clip_lower_ == -est.clip_upper_)
        errors.append(np.linalg.norm(est.mean_ - mu))
    # The stated bounds (−10, 10) give about 0.08 here; the oracle interval 0.034.
    assert max(errors) < 0.5
