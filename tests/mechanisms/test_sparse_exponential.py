"""The sparse exponential mechanism (seed 002 Algorithm 4): the net, the scores, the
sampling law, the score sensitivity and the size limit."""

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from skdpsparse._kernels import LOSS_CODES
from skdpsparse.accounting import PureDP
from skdpsparse.mechanisms.output_perturbation import bound_inputs
from skdpsparse.mechanisms.sparse_exponential import (
    choose_tau,
    decode,
    enumerate_net,
    exponential_mechanism,
    net_scores,
    score_sensitivity,
    sparse_exponential_mechanism,
    sparse_net_size,
)


def _grid(p, tau, radius):
    """Brute force: every point of τℤᵖ in the ball (up to the 1e-9 rounding slack)."""
    m = int(radius / tau) + 1
    pts = [tau * np.array(k, dtype=float) for k in itertools.product(range(-m, m + 1), repeat=p)
           if tau * tau * sum(a * a for a in k) <= radius * radius * (1 + 1e-9)]
    return np.array(pts)


def _losses(z, y, loss):
    if loss == "hinge":
        return np.maximum(0, 1 - y * z)
    if loss == "logistic":
        return np.logaddexp(0, -y * z)
    return 0.5 * (z - y) ** 2  # squared


def _data(n, d, loss, rng):
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.4] = 0.0
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0) if loss != "squared" else rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("p, tau, radius", [(1, 0.3, 1.0), (3, 0.5, 1.0),
                                            (4, 1 / math.sqrt(3), 1.0), (5, 0.5, 1.0),
                                            (2, 0.4, 2.0)])
def test_net_is_the_grid_in_the_ball(p, tau, radius):
    grid = _grid(p, tau, radius)
    assert sparse_net_size(p, tau, radius) == len(grid)
    blocks = enumerate_net(p, tau, radius)
    size = 1 + sum(a.shape[0] * v.shape[0] for a, v in blocks)
    pts = np.array([decode(i, blocks, p) for i in range(size)])
    assert {tuple(np.round(x / tau).astype(int)) for x in pts} == \
        {tuple(np.round(x / tau).astype(int)) for x in grid}
    assert len(pts) == len(grid)  # no duplicates
    assert np.all(np.linalg.norm(pts, axis=1) <= radius * (1 + 1e-9))
    # Every point is ⌊D²/τ²⌋-sparse (Lemma 5.3), and the grid is a τ-net in ℓ∞ of 𝒳
    # that stays inside it: rounding towards zero.
    assert np.count_nonzero(pts, axis=1).max() <= math.floor(radius**2 / tau**2 + 1e-9)
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.normal(size=p)
        x *= radius * rng.random() / np.linalg.norm(x)
        rounded = tau * np.trunc(x / tau)
        assert np.abs(rounded - x).max() < tau
        assert np.any(np.all(np.isclose(pts, rounded), axis=1))


@pytest.mark.parametrize("loss", ["hinge", "logistic", "squared"])
@pytest.mark.parametrize("sparse", [False, True])
def test_scores_match_brute_force(loss, sparse):
    rng = np.random.default_rng(1)
    n, p, tau, radius = 40, 4, 0.5, 1.0
    X, y = _data(n, p, loss, rng)
    blocks = enumerate_net(p, tau, radius)
    scores = net_scores(sp.csr_matrix(X) if sparse else X, y, blocks, LOSS_CODES[loss], 1.0)
    pts = np.array([decode(i, blocks, p) for i in range(scores.size)])
    ref = np.array([_losses(X @ theta, y, loss).sum() for theta in pts])
    np.testing.assert_allclose(scores, ref, rtol=1e-12, atol=1e-12)


def test_output_law_matches_exponential_weights_chi_square():
    """Tiny case: 2 features + intercept, τ = 1/2, D = 1 (33 net points), n = 30.

    20 000 draws; chi-square goodness of fit to P ∝ exp(−ε·score/(2Δ_u)) with scores
    computed by brute force; tolerance: p-value > 1e-3. The same draws reject the law
    without the factor 2 (p < 1e-6), so the test has power against a mis-scaled ε.
    """
    rng = np.random.default_rng(2)
    n, d, eps, tau, radius, c = 30, 2, 0.5, 0.5, 1.0, 1.0
    X, y = _data(n, d, "logistic", rng)
    Xb, yb = bound_inputs(X, y[None], "logistic", norm_bound=1.0, sparsity=d, label_bound=1)
    Xa = np.hstack([Xb, np.full((n, 1), c)])
    pts = _grid(d + 1, tau, radius)
    ref = np.array([_losses(Xa @ theta, yb[0], "logistic").sum() for theta in pts])
    delta_u = score_sensitivity("logistic", 1.0, feature_l2=math.hypot(1, c), radius=radius,
                                label_bound=1.0)
    assert delta_u == pytest.approx(radius * math.hypot(1, c))  # logistic: Δ_u = A

    blocks = enumerate_net(d + 1, tau, radius)
    scores = net_scores(Xa, yb[0], blocks, LOSS_CODES["logistic"], 1.0)
    net_pts = np.array([decode(i, blocks, d + 1) for i in range(scores.size)])
    order = [int(np.flatnonzero(np.all(np.isclose(net_pts, q), axis=1))[0]) for q in pts]
    np.testing.assert_allclose(scores[order], ref, rtol=1e-12)

    draws = exponential_mechanism(scores, delta_u, eps, np.random.default_rng(3), size=20_000)
    counts = np.bincount(draws, minlength=scores.size)[order]

    def expected(weight):
        w = np.exp(-weight * (ref - ref.min()))
        return counts.sum() * w / w.sum()

    e_right = expected(eps / (2 * delta_u))
    assert e_right.min() > 5  # chi-square's rule of thumb holds without pooling
    assert stats.chisquare(counts, e_right).pvalue > 1e-3
    assert stats.chisquare(counts, expected(eps / delta_u)).pvalue < 1e-6


@pytest.mark.parametrize("loss", ["hinge", "logistic", "smoothed_hinge", "squared", "huber"])
def test_score_sensitivity_bounds_and_is_attained(loss):
    rng = np.random.default_rng(4)
    R, c, B, radius, param = 1.0, 1.0, 2.0, 1.5, 0.5
    g2 = math.hypot(R, c)
    delta_u = score_sensitivity(loss, param, feature_l2=g2, radius=radius, label_bound=B)
    code = LOSS_CODES[loss]
    classification = loss in ("hinge", "logistic", "smoothed_hinge")
    from skdpsparse._kernels import loss_value
    worst = 0.0
    for _ in range(2000):
        theta = rng.normal(size=4)
        theta *= radius * rng.random() ** 0.2 / np.linalg.norm(theta)
        vals = []
        for _ in range(2):
            x = rng.normal(size=3)
            x *= R * rng.random() ** 0.2 / np.linalg.norm(x)
            y = rng.choice([-1.0, 1.0]) if classification else rng.uniform(-B, B)
            vals.append(loss_value(code, theta @ np.append(x, c), y, param))
        worst = max(worst, abs(vals[0] - vals[1]))
    assert worst <= delta_u
    # Attained: θ of norm D along x̄ = (x, c) with ‖x‖ = R, the two extreme labels.
    x_bar = np.array([R, 0.0, 0.0, c])
    theta = radius * x_bar / np.linalg.norm(x_bar)
    z = theta @ x_bar
    ys = (-1.0, 1.0) if classification else (-B, B)
    gap = abs(loss_value(code, z, ys[0], param) - loss_value(code, z, ys[1], param))
    if classification:
        assert gap == pytest.approx(delta_u, rel=1e-12)
    else:  # regression: the bound ℓ(A + B) − 0 is attained when z = −B is also allowed
        assert gap <= delta_u and loss_value(code, z + B, 0.0, param) == \
            pytest.approx(delta_u, rel=1e-12)


def test_mechanism_end_to_end_and_budget_split():
    rng = np.random.default_rng(5)
    n, d, eps, radius = 50, 3, 1.0, 1.0
    X, y = _data(n, d, "hinge", rng)
    targets = np.vstack([y, -y])
    theta, budget, info = sparse_exponential_mechanism(
        X, targets, loss="hinge", epsilon=eps, radius=radius, tau=0.5,
        rng=np.random.default_rng(6))
    assert budget == PureDP(eps) and theta.shape == (2, d + 1)
    assert info["net_size"] == sparse_net_size(d + 1, 0.5, radius)
    # Same as two separate draws at ε/2 each from the same random stream.
    rng2 = np.random.default_rng(6)
    for k in range(2):
        single, _, _ = sparse_exponential_mechanism(
            X, targets[k:k + 1], loss="hinge", epsilon=eps / 2, radius=radius, tau=0.5,
            rng=rng2)
        np.testing.assert_array_equal(theta[k], single[0])


def test_excess_risk_within_theorem_5_5_bound():
    """F_S(θ̂) − min_𝒩 F_S ≤ (2Δ_u/(εn))(ln|𝒩| + ln(1/β)) w.p. ≥ 1 − β (exponential
    mechanism; Theorem 5.5's first term), checked on 500 draws with β = 0.05."""
    rng = np.random.default_rng(7)
    n, d, eps, radius, tau, beta = 200, 3, 1.0, 1.0, 0.5, 0.05
    X, y = _data(n, d, "hinge", rng)
    Xb, yb = bound_inputs(X, y[None], "hinge", norm_bound=1.0, sparsity=d, label_bound=1)
    blocks = enumerate_net(d, tau, radius)
    scores = net_scores(Xb, yb[0], blocks, LOSS_CODES["hinge"], 1.0)
    delta_u = score_sensitivity("hinge", 1.0, feature_l2=1.0, radius=radius, label_bound=1)
    draws = exponential_mechanism(scores, delta_u, eps, rng, size=500)
    excess = (scores[draws] - scores.min()) / n
    bound = 2 * delta_u / (eps * n) * (math.log(scores.size) + math.log(1 / beta))
    assert np.mean(excess <= bound) >= 1 - beta
    assert np.mean(excess <= 0.2 * bound) < 0.95  # not vacuous: the noise is visible


def test_refuses_large_nets_and_auto_tau_respects_the_cap():
    with pytest.raises(ValueError, match="exponential in 1/tau"):
        enumerate_net(40, 0.5, 1.0, max_size=10**6)  # (2/3)·40⁴ ≈ 1.5·10⁶ points
    # "auto": the τ = D/√q minimizing (2Δ_u/(εn))(ln|𝒩_τ| + ln(1/β)) + L₁τ among
    # nets of at most max_size points.
    for n, cap in [(1000, 10**4), (10**6, 10**4), (50, 10**5)]:
        tau = choose_tau(n, 20, 1.0, sensitivity=1.0, lipschitz_l1=2.0, radius=1.0,
                         max_size=cap)
        bounds = {}
        for q in range(1, 100):
            size = sparse_net_size(20, 1 / math.sqrt(q), 1.0)
            if size > cap:
                break
            bounds[q] = 2 / n * (math.log(size) + math.log(20)) + 2 / math.sqrt(q)
        assert tau == pytest.approx(1 / math.sqrt(min(bounds, key=bounds.get)))
    with pytest.raises(ValueError, match="bounded domain"):
        sparse_exponential_mechanism(np.zeros((5, 2)), np.ones((1, 5)), loss="hinge",
                                     epsilon=1.0, radius=None, rng=np.random.default_rng(0))
