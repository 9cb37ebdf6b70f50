"""Output perturbation (Ghazi et al. 2024, Algorithm 3): sensitivities, certified solver, noise,
ℓ∞ projection, λ choice and excess risk."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import optimize, stats
from sklearn.linear_model import LogisticRegression, Ridge

from skdpsparse._kernels import LOSS_CODES, per_example_derivatives
from skdpsparse._kernels.erm_passes import loss_curvatures
from skdpsparse._solvers.erm import _hessian_product, make_objective
from skdpsparse.accounting import ApproxDP, PureDP
from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.datasets import make_sparse_classification, make_sparse_regression
from skdpsparse.mechanisms.output_perturbation import (
    ROW_NORM_SLACK,
    bound_inputs,
    choose_alpha,
    loss_constants,
    output_perturbation,
    plan_output_perturbation,
    regularized_minimizers,
    release,
)

LOSS_PARAM = {"logistic": 1.0, "smoothed_hinge": 0.5, "squared": 1.0, "huber": 0.5}


def _solve(X, y, plan, **bounds):
    Xb, yb = bound_inputs(X, np.atleast_2d(y), plan.loss, norm_bound=plan.norm_bound,
                          sparsity=plan.sparsity, label_bound=plan.label_bound)
    theta, info = regularized_minimizers(Xb, yb, plan, max_iter=5000)
    return theta[0], info


def _plan(n, d, loss, **kw):
    kw.setdefault("epsilon", 1.0)
    kw.setdefault("delta", 1e-6)
    kw.setdefault("alpha", "theorem")  # these tests were written for Theorem 5.1's λ
    return plan_output_perturbation(n, d, 1, loss=loss, loss_param=LOSS_PARAM[loss], **kw)


# ----------------------------------------------------------------- numpy references
def _ref_objective(X, y, loss, param, alpha, c):
    """F(θ) and its gradient in plain NumPy (dense X), for scipy.optimize."""
    Xa = np.hstack([X, np.full((X.shape[0], 1), c)]) if c > 0 else X

    def fg(theta):
        z = Xa @ theta
        if loss == "logistic":
            t = y * z
            val, der = np.logaddexp(0, -t), -y * stats.logistic.cdf(-t)
        elif loss == "squared":
            r = z - y
            val, der = 0.5 * r * r, r
        elif loss == "huber":
            r = z - y
            val = np.where(abs(r) <= param, 0.5 * r * r, param * (abs(r) - 0.5 * param))
            der = np.clip(r, -param, param)
        else:  # smoothed hinge
            u = 1 - y * z
            val = np.where(u <= 0, 0, np.where(u < param, u * u / (2 * param), u - param / 2))
            der = -y * np.clip(u / param, 0, 1)
        return (val.mean() + 0.5 * alpha * theta @ theta,
                Xa.T @ der / len(y) + alpha * theta)
    return fg, Xa.shape[1]


# ------------------------------------------------------------------------- solver
@pytest.mark.parametrize("loss", ["logistic", "smoothed_hinge", "squared", "huber"])
def test_curvatures_and_hessian_products_match_finite_differences(loss):
    rng = np.random.default_rng(0)
    code, param = LOSS_CODES[loss], LOSS_PARAM[loss]
    z = rng.normal(scale=2.0, size=2000)
    y = np.where(rng.random(2000) < 0.5, -1.0, 1.0) * (1 if loss != "squared" else 0.7)
    h = 1e-6
    fd = (per_example_derivatives(z + h, y, code, param)
          - per_example_derivatives(z - h, y, code, param)) / (2 * h)
    curv = loss_curvatures(z, y, code, param)
    # Away from the kinks (smoothed hinge, Huber) the central difference is exact-ish.
    t = y * z if loss in ("logistic", "smoothed_hinge") else z - y
    kinks = {"smoothed_hinge": [1 - param, 1.0], "huber": [-param, param]}.get(loss, [])
    far = np.all([np.abs(t - k) > 1e-4 for k in kinks], axis=0) if kinks else np.ones_like(z, bool)
    np.testing.assert_allclose(curv[far], fd[far], atol=1e-6)
    X, yy, _ = make_sparse_regression(300, 20, 4, random_state=0)
    yy = np.sign(yy) + (yy == 0) if loss in ("logistic", "smoothed_hinge") else yy
    fg = make_objective(X, yy, code, param, 0.01, 1.0)
    theta, v = rng.normal(size=21), rng.normal(size=21)
    hv = _hessian_product(X, yy, code, param, 0.01, 1.0, theta)(v)
    fd = (fg(theta + h * v)[1] - fg(theta - h * v)[1]) / (2 * h)
    np.testing.assert_allclose(hv, fd, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("loss", ["logistic", "smoothed_hinge", "squared", "huber"])
@pytest.mark.parametrize("sparse", [False, True])
def test_solver_matches_scipy_and_its_certificate(loss, sparse):
    n, d, alpha = 400, 30, 1e-3
    X, y, _ = (make_sparse_classification if loss in ("logistic", "smoothed_hinge")
               else make_sparse_regression)(n, d, 5, random_state=1)
    y = 2.0 * y - 1 if loss in ("logistic", "smoothed_hinge") else y
    plan = _plan(n, d, loss, alpha=alpha, tol=1e-3)
    Xb, yb = bound_inputs(X, y[None], loss, norm_bound=1.0, sparsity=d, label_bound=1.0)
    theta, info = regularized_minimizers(Xb if sparse else Xb.toarray(), yb, plan)
    fg, p = _ref_objective(Xb.toarray(), yb[0], loss, LOSS_PARAM[loss], alpha, 1.0)
    ref = optimize.minimize(fg, np.zeros(p), jac=True, method="L-BFGS-B",
                            options={"gtol": 1e-13, "ftol": 0, "maxiter": 10**5})
    ref_cert = np.linalg.norm(fg(ref.x)[1]) / alpha
    dist = np.linalg.norm(theta[0] - ref.x)
    # ‖θ̂ − θ*‖ ≤ ‖∇F(θ̂)‖/λ, and the reference is itself within ref_cert of θ*.
    assert dist <= info["residual_l2"][0] / alpha + ref_cert
    assert info["residual_l2"][0] / alpha <= 0.5 * plan.tol * plan.sensitivity_l2
    assert np.linalg.norm(fg(theta[0])[1]) == pytest.approx(info["residual_l2"][0], rel=1e-6)


def test_solver_matches_sklearn_ridge_and_logistic_regression():
    n, d, alpha = 500, 40, 1e-2
    X, y, _ = make_sparse_regression(n, d, 6, random_state=2)
    # The solver's accuracy is relative to the sensitivity (here Δ₂ ≈ 44): a small tol.
    plan = _plan(n, d, "squared", alpha=alpha, intercept_scaling=0.0, label_bound=10.0,
                 tol=1e-9)
    theta, info = _solve(X, y, plan)
    assert info["residual_l2"][0] / alpha < 1e-7
    Xb, _ = bound_inputs(X, y[None], "squared", norm_bound=1, sparsity=d, label_bound=10)
    # Ridge minimizes ‖y − Xw‖² + a‖w‖², i.e. n·(ours) with a = nλ.
    ridge = Ridge(alpha=n * alpha, fit_intercept=False, solver="cholesky").fit(Xb, y)
    np.testing.assert_allclose(theta, ridge.coef_, atol=1e-6)

    X, y, _ = make_sparse_classification(n, d, 6, random_state=3)
    plan = _plan(n, d, "logistic", alpha=alpha, tol=1e-6)  # with intercept: regularized
    theta, info = _solve(X, 2.0 * y - 1, plan)
    assert info["residual_l2"][0] / alpha < 1e-7
    Xb, _ = bound_inputs(X, y[None] * 2.0 - 1, "logistic", norm_bound=1, sparsity=d,
                         label_bound=1)
    Xa = sp.hstack([Xb, np.ones((n, 1))]).tocsr()  # intercept as a feature of value c = 1
    lr = LogisticRegression(C=1 / (n * alpha), fit_intercept=False, tol=1e-10,
                            max_iter=10_000).fit(Xa, y)
    np.testing.assert_allclose(theta, lr.coef_[0], atol=1e-5)


def test_ball_constrained_solver_matches_slsqp():
    n, d, alpha, radius = 300, 20, 1e-4, 1.5
    X, y, _ = make_sparse_classification(n, d, 4, random_state=4)
    y = 2.0 * y - 1
    plan = _plan(n, d, "logistic", alpha=alpha, radius=radius, tol=1e-3)
    theta, info = _solve(X, y, plan)
    assert np.linalg.norm(theta) <= radius * (1 + 1e-12)
    Xb, yb = bound_inputs(X, y[None], "logistic", norm_bound=1, sparsity=d, label_bound=1)
    fg, p = _ref_objective(Xb.toarray(), yb[0], "logistic", 1.0, alpha, 1.0)
    ref = optimize.minimize(fg, np.zeros(p), jac=True, method="SLSQP",
                            constraints=[{"type": "ineq", "fun": lambda v: radius**2 - v @ v,
                                          "jac": lambda v: -2 * v}],
                            options={"ftol": 1e-15, "maxiter": 1000})
    assert np.linalg.norm(ref.x) > 0.99 * radius  # the constraint is active
    assert np.linalg.norm(theta - ref.x) <= info["residual_l2"][0] / alpha + 1e-4
    assert fg(theta)[0] <= ref.fun + 1e-9


# --------------------------------------------------------------------- sensitivity
def _neighbours(loss, n, d, rng):
    """A dataset and a neighbour with row 0 replaced adversarially (norm bound hit,
    label flipped or at the opposite clip, support moved)."""
    classification = loss in ("logistic", "smoothed_hinge")
    make = make_sparse_classification if classification else make_sparse_regression
    X, y, _ = make(n, d, 4, random_state=int(rng.integers(1 << 31)))
    X = sp.lil_matrix(X * 3.0)  # norms above the bound: contribution bounding is active
    y = 2.0 * y - 1 if classification else 3.0 * y
    X2, y2 = X.copy(), y.copy()
    X[0] = 0
    X2[0] = 0
    cols = rng.choice(d, 4, replace=False)
    X[0, cols] = 5 * rng.choice([-1, 1], 4)
    X2[0, rng.choice(d, 4, replace=False)] = 5 * rng.choice([-1, 1], 4)
    y[0], y2[0] = (1.0, -1.0) if classification else (10.0, -10.0)
    return X.tocsr(), y, X2.tocsr(), y2


@pytest.mark.parametrize("loss", ["logistic", "smoothed_hinge", "squared", "huber"])
def test_neighbouring_solutions_within_stated_sensitivity(loss):
    rng = np.random.default_rng(5)
    n = 60
    worst_2 = worst_1 = 0.0
    theorem_branch = 0
    for trial in range(8):
        # d = 400: Δ₁ is the Theorem 5.1 term; d = 25: it is √p·Δ₂.
        d, alpha = [(400, 1.0), (400, 0.1), (25, 0.1), (25, 0.01)][trial % 4]
        X, y, X2, y2 = _neighbours(loss, n, d, rng)
        plan = _plan(n, d, loss, alpha=alpha, sparsity=4, delta=0.0)  # ℓ1 plan
        theorem_branch += plan.sensitivity_l1 < math.sqrt(d + 1) * plan.sensitivity_l2
        theta, _ = _solve(X, y, plan)
        theta2, _ = _solve(X2, y2, plan)
        diff = theta - theta2
        assert np.linalg.norm(diff) <= (1 + plan.tol) * plan.sensitivity_l2
        assert np.abs(diff).sum() <= (1 + plan.tol) * plan.sensitivity_l1
        worst_2 = max(worst_2, np.linalg.norm(diff) / plan.sensitivity_l2)
        worst_1 = max(worst_1, np.abs(diff).sum() / plan.sensitivity_l1)
    assert theorem_branch >= 2
    assert worst_2 > 0.02 and worst_1 > 0.005  # the pairs do move the solution


def test_l2_sensitivity_is_nearly_attained_and_the_seed_constant_is_loose():
    """A row alone on its feature, its target flipped from +B to −B: the solution moves
    by 2RB/(R² + nλ), ≈ 0.9·(2L/λn) here — so 2L/(λn) is tight up to the
    Lipschitz slack, and the seed's 4L/(λn) is twice what is needed."""
    rng = np.random.default_rng(6)
    n, d, s, alpha, radius = 200, 40, 4, 0.5, 0.1
    X = np.zeros((n, d))
    for i in range(1, n):
        X[i, 4 + rng.choice(d - 4, s, replace=False)] = rng.normal(size=s)
    X[0, :s] = 0.5  # ‖x‖₂ = 1, ‖x‖₁ = 2 = √s
    y = rng.uniform(-1, 1, n)
    y2 = y.copy()
    y[0], y2[0] = 1.0, -1.0
    plan = _plan(n, d, "squared", alpha=alpha, radius=radius, sparsity=s,
                 intercept_scaling=0.0, tol=1e-3)
    diff = _solve(X, y, plan)[0] - _solve(X, y2, plan)[0]
    ratio = np.linalg.norm(diff) / plan.sensitivity_l2
    assert 0.85 < ratio <= 1 + plan.tol
    # ℓ1: the leading term 2L₁/(λn) of Δ₁ is nearly attained as well.
    lead = 2 * plan.constants.lipschitz_l1 / (alpha * n)
    assert 0.85 < np.abs(diff).sum() / lead <= 1.0
    assert np.abs(diff).sum() <= plan.sensitivity_l1


def _reference_logistic_derivative_bound(g2, alpha, radius):
    """Λ = σ(ρG₂) with ρ the largest r ≤ min(D, √(2 log 2/λ)) such that
    r ≤ σ(rG₂)G₂/λ (r ↦ σ(rG₂)G₂/λ − r is concave on r ≥ 0 and positive at 0: the
    set is an interval, its end a root), found by Brent's method, not by iteration."""
    rho0 = math.sqrt(2 * math.log(2) / alpha)
    rho0 = rho0 if radius is None else min(rho0, radius)

    def f(r):
        return g2 / alpha / (1 + math.exp(-r * g2)) - r

    rho = rho0 if f(rho0) >= 0 else optimize.brentq(f, 0.0, rho0, xtol=1e-15)
    return 1 / (1 + math.exp(-rho * g2))


@pytest.mark.parametrize("alpha, radius, expected", [
    (1e-3, None, 1.0), (1e-3, 1.0, 0.8044), (1.0, None, 0.8409), (10.0, None, 0.5263),
    (100.0, 1.0, 0.5025)])
def test_logistic_derivative_bound_follows_the_minimizer_norm(alpha, radius, expected):
    """Λ = σ(ρG₂): from ≈ 1 for small λ down to the slope 1/2 at 0 for large λ (G₂ = √2:
    unit rows with an intercept)."""
    k = loss_constants("logistic", loss_param=1.0, norm_bound=1.0, sparsity=32,
                       intercept_scaling=1.0, label_bound=1.0, alpha=alpha, radius=radius)
    ref = _reference_logistic_derivative_bound(math.hypot(ROW_NORM_SLACK, 1.0), alpha, radius)
    assert k.derivative == pytest.approx(ref, rel=1e-9)
    assert k.derivative == pytest.approx(expected, abs=1e-4)


def test_logistic_l2_sensitivity_is_nearly_attained_at_large_alpha():
    """A row alone on its feature with its label flipped, λ large: the solutions move
    by ≈ 2·σ(0)·R/(λn) = R/(λn), and Δ₂ = 2σ(ρG₂)R/(λn) is within 3 % of it, where the
    global bound |ℓ'| ≤ 1 would be twice as large. Both signs of the margin occur."""
    rng = np.random.default_rng(11)
    n, d, alpha = 100, 30, 20.0
    X = np.zeros((n, d))
    for i in range(1, n):
        X[i, 1 + rng.choice(d - 1, 3, replace=False)] = rng.normal(size=3) / 2
    X[0, 0] = 1.0
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    y2 = y.copy()
    y[0], y2[0] = 1.0, -1.0
    plan = _plan(n, d, "logistic", alpha=alpha, sparsity=3, intercept_scaling=0.0,
                 tol=1e-4)
    assert plan.constants.derivative < 0.51
    diff = _solve(X, y, plan)[0] - _solve(X, y2, plan)[0]
    ratio = np.linalg.norm(diff) / plan.sensitivity_l2
    assert 0.97 < ratio <= 1 + plan.tol


def test_sensitivity_formulas():
    n, d, s, alpha = 1000, 50, 9, 0.05
    R, c = 2.0, 1.0
    k = loss_constants("logistic", loss_param=1.0, norm_bound=R, sparsity=s,
                       intercept_scaling=c, label_bound=1.0, alpha=alpha, radius=None)
    g2, g1 = math.hypot(R * ROW_NORM_SLACK, c), 3 * R * ROW_NORM_SLACK + c
    lam_ = _reference_logistic_derivative_bound(g2, alpha, None)
    assert (k.lipschitz, k.lipschitz_l1, k.smoothness) == pytest.approx(
        (lam_ * g2, lam_ * g1, g2**2 / 4), rel=1e-9)
    plan = _plan(n, d, "logistic", alpha=alpha, norm_bound=R, sparsity=s, delta=0.0)
    assert plan.sensitivity_l2 == pytest.approx(2 * lam_ * g2 / (alpha * n))
    d1 = 2 * lam_ * g1 / (alpha * n) * (1 + (n - 1) * g2**2 / 4 / (alpha * n))
    assert plan.sensitivity_l1 == pytest.approx(min(d1, math.sqrt(d + 1) * plan.sensitivity_l2))
    # Squared loss: Lipschitz on the ball of radius min(D, B/√λ) holding the minimizers.
    k = loss_constants("squared", loss_param=1.0, norm_bound=1.0, sparsity=4,
                       intercept_scaling=0.0, label_bound=2.0, alpha=0.01, radius=None)
    assert k.coef_bound == pytest.approx(2.0 / 0.1) and k.derivative == pytest.approx(22.0)


# ---------------------------------------------------------------- noise and release
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_released_noise_has_the_stated_law(delta):
    n, d, s = 3000, 4000, 8
    X, y, _ = make_sparse_classification(n, d, s, random_state=7)
    targets = (2.0 * y - 1)[None]
    plan = _plan(n, d, "logistic", sparsity=s, delta=delta)
    theta = _solve(X, targets, plan)[0]
    released, _ = output_perturbation(X, targets, plan, np.random.default_rng(8))
    noise = released[0] - theta
    # Scales recomputed from the formulas, not read from the plan.
    lam, g2, g1, p = plan.alpha, math.sqrt(2), math.sqrt(s) + 1, d + 1
    lip = _reference_logistic_derivative_bound(g2, lam, None)  # Λ: L = ΛG₂, L₁ = ΛG₁
    d2 = 2 * lip * g2 / (lam * n)
    if delta:
        assert plan.budget == ApproxDP(1.0, delta)
        law = stats.norm(scale=discrete_gaussian_sigma((1 + plan.tol) * d2, 1.0, delta))
        other = stats.laplace(scale=law.std() / math.sqrt(2))
    else:
        assert plan.budget == PureDP(1.0)
        d1 = min(2 * lip * g1 / (lam * n) * (1 + (n - 1) * g2**2 / 4 / (lam * n)),
                 math.sqrt(p) * d2)
        law = stats.laplace(scale=(1 + plan.tol) * d1)
        other = stats.norm(scale=law.std())
    assert stats.kstest(noise, law.cdf).pvalue > 1e-3
    assert stats.kstest(noise, other.cdf).pvalue < 1e-4
    # The scale itself, to ±6 % (≥ 3.8 standard errors with 4001 coordinates): the
    # maximum-likelihood scale, std for Gaussian and mean |ξ| for Laplace noise.
    scale_hat = noise.std() if delta else np.abs(noise).mean()
    assert abs(scale_hat / (law.std() if delta else law.std() / math.sqrt(2)) - 1) < 0.06


def test_linf_projection_lies_in_ball_and_attains_min_distance():
    rng = np.random.default_rng(9)
    n, d, radius = 500, 300, 2.0
    X, y, _ = make_sparse_classification(n, d, 5, random_state=10)
    plan = _plan(n, d, "logistic", radius=radius, sparsity=5)
    theta = _solve(X, 2.0 * y - 1, plan)[0]
    for _ in range(5):
        hat, noisy = release(theta[None], plan, rng)
        hat, noisy = hat[0], noisy[0]
        assert np.linalg.norm(hat) <= radius * (1 + 1e-12)
        dist = np.abs(hat - noisy).max()
        # Reference: r* solves ‖(|θ̃| − r)₊‖₂ = D (the box [θ̃ ± r] meets the ball iff
        # its point nearest 0 does); bisection, then no point of the ball is closer.
        r_star = optimize.brentq(
            lambda r: np.linalg.norm(np.maximum(np.abs(noisy) - r, 0)) - radius,
            0, np.abs(noisy).max(), xtol=1e-14)
        assert dist == pytest.approx(r_star, rel=1e-9)
        nearest_of_smaller_box = np.maximum(np.abs(noisy) - r_star * (1 - 1e-6), 0)
        assert np.linalg.norm(nearest_of_smaller_box) > radius
        # The minimizer returned is the soft-thresholding of θ̃ at r*: small noisy
        # coordinates become exact zeros.
        np.testing.assert_allclose(
            hat, np.sign(noisy) * np.maximum(np.abs(noisy) - r_star, 0), atol=1e-12)
        assert np.count_nonzero(hat) < hat.size


# ----------------------------------------------------------------- choice of λ
def test_alpha_auto_follows_theorems():
    n, d, s, eps, delta, D = 10_000, 1000, 16, 1.0, 1e-6, 3.0
    p, beta = d + 1, 0.05
    k = loss_constants("logistic", loss_param=1.0, norm_bound=1.0, sparsity=s,
                       intercept_scaling=1.0, label_bound=1.0, alpha=1.0, radius=D)
    s_eff = (k.feature_l1 / k.feature_l2) ** 2

    def at(lam):
        return k

    # Theorem 5.1, δ > 0: λ = (L/D)[s log(1/δ) log(d/β)]^{1/4}/√(εn).
    lam = choose_alpha("erm", n, p, eps, delta, constants_at=at, radius=D)
    expected = k.lipschitz / D * (s_eff * math.log(1 / delta) * math.log(p / beta)) ** 0.25 \
        / math.sqrt(eps * n)
    assert lam == pytest.approx(expected, rel=1e-9)
    # Theorem 5.1 / 5.6, δ = 0: λ = (L²H s log(d/β)/(D²εn))^{1/3}.
    lam = choose_alpha("erm", n, p, eps, 0.0, constants_at=at, radius=D)
    expected = (k.lipschitz**2 * k.smoothness * s_eff * math.log(p / beta)
                / (D * D * eps * n)) ** (1 / 3)
    assert lam == pytest.approx(expected, rel=1e-9)
    # Theorem 5.6, δ > 0.
    lam = choose_alpha("population", n, p, eps, delta, constants_at=at, radius=D)
    expected = k.lipschitz / D * math.sqrt(
        math.log(n) * math.log(1 / beta) / n
        + math.sqrt(s_eff * math.log(1 / delta) * math.log(p / beta)) / (eps * n))
    assert lam == pytest.approx(expected, rel=1e-9)
    # ℝᵖ: D is the a-priori bound √(2ℓ₀/λ) at the chosen λ (a fixed point).
    plan = _plan(n, d, "squared", sparsity=s, label_bound=2.0)
    lam = plan.alpha
    D_lam = math.sqrt(2 * plan.constants.zero_loss / lam)
    expected = plan.constants.lipschitz / D_lam * (
        s_eff * math.log(1 / delta) * math.log(p / beta)) ** 0.25 / math.sqrt(eps * n)
    assert lam == pytest.approx(expected, rel=1e-8)


def test_errors():
    with pytest.raises(ValueError, match="unconstrained domain"):
        _plan(100, 10, "logistic", delta=0.0, radius=1.0)
    with pytest.raises(ValueError, match="differentiable loss"):
        plan_output_perturbation(100, 10, 1, loss="hinge", epsilon=1.0, delta=1e-6)
    plan = _plan(100, 10, "logistic")
    X = np.random.default_rng(0).normal(size=(100, 10))
    with pytest.raises(ValueError, match="-1 or \\+1"):
        output_perturbation(X, np.zeros((1, 100)), plan, np.random.default_rng(0))
    # A certificate below float64's reach is refused by the plan, from public numbers
    # (it used to fail in the solver, on some data and not on other).
    with pytest.raises(ValueError, match=r"tol=1e-30 is below .* use tol >= "):
        _plan(100, 10, "logistic", tol=1e-30)


# ------------------------------------------------------------- excess empirical risk
@pytest.mark.parametrize("delta, radius", [(0.0, None), (1e-6, 2.0)])
def test_excess_risk_within_theorem_5_1_bound(delta, radius):
    """Theorem 5.1 with its proof's constants, in ≥ 95 % of 200 seeded releases.

    With x* the ERM minimizer over 𝒳 and D = ‖x*‖ (ℝᵖ) or the radius (ball), λ is the
    theorem's and, with probability ≥ 1 − β (β = 0.05),

        F_S(θ̂) − F_S(x*) ≤ L₁·2(‖ξ‖∞ + cert) + λD²/2 =: bound,

    ‖ξ‖∞ ≤ σ√(2 ln(2p/β)) (Gaussian) or b·ln(p/β) (Laplace), cert the solver's certified
    distance. The bound is within a stated constant of the theorem's rate:
    LD(s log(1/δ) log(p/β))^{1/4}/√(εn) times ≤ 10 (the proof gives ≈ 8.5 with the
    classic Gaussian), or L^{2/3}H^{1/3}D^{4/3}(s log(p/β)/(εn))^{1/3} times ≤ 5 (≈ 4.5).
    """
    n, d, s, eps, beta = 3000, 100, 8, 1.0, 0.05
    p = d + 1
    X, y, _ = make_sparse_classification(n, d, s, separation=2.0, random_state=11)
    Xb, yb = bound_inputs(X, (2.0 * y - 1)[None], "logistic", norm_bound=1, sparsity=s,
                          label_bound=1)
    fg0, _ = _ref_objective(Xb.toarray(), yb[0], "logistic", 1.0, 0.0, 1.0)
    if radius is None:
        star = optimize.minimize(fg0, np.zeros(p), jac=True, method="L-BFGS-B",
                                 options={"gtol": 1e-10, "maxiter": 10**5})
        D = np.linalg.norm(star.x)
    else:
        star = optimize.minimize(
            fg0, np.zeros(p), jac=True, method="SLSQP", options={"ftol": 1e-14},
            constraints=[{"type": "ineq", "fun": lambda v: radius**2 - v @ v,
                          "jac": lambda v: -2 * v}])
        D = radius
    k = loss_constants("logistic", loss_param=1.0, norm_bound=1.0, sparsity=s,
                       intercept_scaling=1.0, label_bound=1.0, alpha=1.0, radius=None)
    alpha = choose_alpha("erm", n, p, eps, delta, constants_at=lambda lam: k, radius=D)
    plan = _plan(n, d, "logistic", sparsity=s, delta=delta, alpha=alpha, radius=radius)
    theta, info = regularized_minimizers(Xb, yb, plan)
    if delta:
        q = plan.noise_scale * math.sqrt(2 * math.log(2 * p / beta))
    else:
        q = plan.noise_scale * math.log(p / beta)
    cert = info["residual_l2"][0] / plan.alpha
    bound = k.lipschitz_l1 * 2 * (q + cert) + 0.5 * plan.alpha * D * D
    s_eff = (k.feature_l1 / k.feature_l2) ** 2
    if delta:
        rate = k.lipschitz * D * (s_eff * math.log(1 / delta) * math.log(p / beta)) ** 0.25 \
            / math.sqrt(eps * n)
        assert bound <= 10 * rate
    else:
        rate = (k.lipschitz ** 2 * k.smoothness * D ** 4 * s_eff * math.log(p / beta)
                / (eps * n)) ** (1 / 3)
        assert bound <= 5 * rate
    rng = np.random.default_rng(12)
    excess = np.array([fg0(release(theta, plan, rng)[0][0])[0] - star.fun
                       for _ in range(200)])
    assert np.mean(excess <= bound) >= 0.95


# ------------------------------------------- ℓ(0) from the loss itself (issue 17, item 1)
def _closed_form_zero_loss(loss, param, label_bound):
    """max over the labels of ℓ(0, y), by hand: t = y·0 = 0 for classification, r = −y
    with |y| ≤ B for regression (both regression losses grow with |r|)."""
    if loss == "logistic":
        return math.log(2.0)
    if loss == "smoothed_hinge":  # t = 0 lies in the quadratic branch iff 1 − h < 0
        return 1.0 / (2.0 * param) if param > 1 else 1.0 - param / 2.0
    if loss == "squared" or label_bound <= param:
        return label_bound ** 2 / 2.0
    return param * (label_bound - param / 2.0)  # Huber beyond its threshold


@pytest.mark.parametrize("loss, param", [
    ("logistic", 1.0), *[("smoothed_hinge", h) for h in (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 10.0)],
    ("squared", 1.0), ("huber", 0.5), ("huber", 3.0)])
@pytest.mark.parametrize("label_bound", [0.7, 2.0])
def test_zero_loss_is_the_loss_at_zero(loss, param, label_bound):
    """ℓ₀ ≥ ℓ(0, y) is what bounds ‖θ*‖ (F^λ(θ*) ≤ F^λ(0) ≤ ℓ₀): it must be the loss
    at 0 itself, for every loss and parameter (the old table's 1 − h/2 for the smoothed
    hinge is below ℓ(0) = 1/(2h) when h > 1, and ≤ 0 from h = 2 on). Every derived
    constant must hold on the ball it claims: Λ ≥ |ℓ'(z, y)| for |z| ≤ ρG₂."""
    k = loss_constants(loss, loss_param=param, norm_bound=1.0, sparsity=2,
                       intercept_scaling=0.5, label_bound=label_bound, alpha=1e-3,
                       radius=None)
    assert k.zero_loss == pytest.approx(_closed_form_zero_loss(loss, param, label_bound),
                                        rel=1e-15)
    assert k.zero_loss > 0 and k.coef_bound > 0
    labels = ([-1.0, 1.0] if loss in ("logistic", "smoothed_hinge")
              else np.linspace(-label_bound, label_bound, 9))
    margins = np.linspace(-1.0, 1.0, 201) * k.coef_bound * k.feature_l2
    for y in labels:
        der = per_example_derivatives(margins, np.full(margins.size, y), LOSS_CODES[loss],
                                      param)
        assert np.max(np.abs(der)) <= k.derivative * (1 + 1e-12)


def _exact_two_row_minimizer(a, b, n, alpha, h):
    """argmin of [(n−1)ℓ(⟨θ, a⟩) + ℓ(⟨θ, b⟩)]/n + (λ/2)‖θ‖² for the smoothed hinge with
    label +1, to high precision, with a certified distance to the exact minimizer.

    BFGS, then Newton steps on the piecewise-quadratic objective (ℓ'' = 1/h on the
    quadratic branch, 0 elsewhere), which end at the exact minimizer up to rounding once
    the branches are right. Certificate: λ-strong convexity gives ‖θ − θ*‖ ≤ ‖∇F(θ)‖/λ.
    """
    code = LOSS_CODES["smoothed_hinge"]
    rows = np.array([a, b])
    weights = np.array([(n - 1) / n, 1 / n])
    ones = np.ones(2)

    def grad(theta):
        der = per_example_derivatives(rows @ theta, ones, code, h)
        return rows.T @ (weights * der) + alpha * theta

    def value(theta):
        t = rows @ theta
        val = np.where(t >= 1, 0.0, np.where(t > 1 - h, (1 - t) ** 2 / (2 * h), 1 - t - h / 2))
        return weights @ val + 0.5 * alpha * theta @ theta

    theta = optimize.minimize(value, np.zeros(rows.shape[1]), jac=grad, method="BFGS",
                              options=dict(gtol=1e-12, maxiter=10_000)).x
    for _ in range(20):
        t = rows @ theta
        curv = np.where((t < 1) & (t > 1 - h), 1.0 / h, 0.0)
        hess = rows.T @ (rows * (weights * curv)[:, None]) + alpha * np.eye(rows.shape[1])
        theta = theta - np.linalg.solve(hess, grad(theta))
    return theta, np.linalg.norm(grad(theta)) / alpha


@pytest.mark.parametrize("h, attained", [(0.5, 0.9), (1.5, 0.9), (2.0, 0.9), (3.0, 0.6)])
def test_smoothed_hinge_neighbours_of_issue_17_within_sensitivity(h, attained):
    """The counterexample of issue 17: n = 10⁵, λ = 1e-4, every row (0.1, 0) labelled
    +1, and row 0 replaced by (−0.1, +0.995) in S and (−0.1, −0.995) in S′. The exact
    minimizers (solved here to about 1e-12, certificate included) must be at most
    Δ₂ = 2L/(λn) apart; with ℓ₀ = 1 − h/2 they were 1.88·Δ₂ apart at h = 2 (and h = 3
    raised a math domain error). For h ≤ 2 the pair is nearly the worst case (ratio
    > 0.9), so Δ₂ is also not loose there. (No
    intercept: a constant feature lets the model absorb most of the change.)"""
    n, alpha = 100_000, 1e-4
    plan = plan_output_perturbation(n, 2, 1, loss="smoothed_hinge", loss_param=h,
                                    epsilon=1.0, delta=1e-6, alpha=alpha,
                                    intercept_scaling=0.0)
    a = np.array([0.1, 0.0])
    theta0, cert0 = _exact_two_row_minimizer(a, np.array([-0.1, 0.995]), n, alpha, h)
    theta1, cert1 = _exact_two_row_minimizer(a, np.array([-0.1, -0.995]), n, alpha, h)
    assert cert0 < 1e-9 and cert1 < 1e-9
    distance = np.linalg.norm(theta0 - theta1)
    assert distance + cert0 + cert1 <= plan.sensitivity_l2
    assert distance > attained * plan.sensitivity_l2
    # ‖θ*‖ ≤ ρ, the bound every constant is evaluated on.
    assert max(np.linalg.norm(theta0), np.linalg.norm(theta1)) <= plan.constants.coef_bound


@pytest.mark.parametrize("h", [0.5, 1.0, 2.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_alpha_auto_for_every_smoothing(h, delta):
    """λ = "auto" uses D = √(2ℓ₀/λ): it raised ZeroDivisionError at h = 2 (ℓ₀ = 0) and a
    math domain error for h > 2 (ℓ₀ < 0). It is now the fixed point of the theorem's
    formula for every h."""
    n, d = 10_000, 50
    plan = plan_output_perturbation(n, d, 1, loss="smoothed_hinge", loss_param=h,
                                    epsilon=1.0, delta=delta, alpha="theorem", sparsity=5)
    assert 0 < plan.alpha < math.inf and plan.constants.zero_loss > 0
    at_alpha = choose_alpha("erm", n, d + 1, 1.0, delta, radius=None,
                            constants_at=lambda lam: loss_constants(
                                "smoothed_hinge", loss_param=h, norm_bound=1.0, sparsity=5,
                                intercept_scaling=1.0, label_bound=1.0, alpha=lam,
                                radius=None))
    assert plan.alpha == pytest.approx(at_alpha, rel=1e-9)


# ------------------------------------------------------- alpha="auto" (issue 18)
@pytest.mark.parametrize("loss, bound, margin", [("logistic", 1.0, 1.0),
                                                 ("squared", 3.0, 1.5)])
def test_auto_alpha_puts_the_margin_noise_at_a_tenth_of_its_scale(loss, bound, margin):
    """σ·G₂ = 0.1·m at the chosen λ (m = 1 for a logit, B/2 for a target), checked
    against the plan's own noise scale (an independent recomputation)."""
    n, d = 20_000, 300
    plan = plan_output_perturbation(n, d, 1, loss=loss, loss_param=LOSS_PARAM[loss],
                                    epsilon=1.0, delta=1e-6, alpha="auto", sparsity=5,
                                    label_bound=bound, intercept_scaling=0.5)
    assert plan.alpha > 1.0 / n
    assert plan.noise_scale * plan.constants.feature_l2 == pytest.approx(0.1 * margin,
                                                                         rel=1e-6)


def test_auto_alpha_falls_with_epsilon_to_the_non_private_floor():
    n, d = 5_000, 100
    alphas = [plan_output_perturbation(n, d, 1, loss="logistic", epsilon=e, delta=1e-6,
                                       alpha="auto", intercept_scaling=0.1).alpha
              for e in (0.5, 1.0, 2.0, 4.0, 8.0, 1e6)]
    assert all(a > b for a, b in zip(alphas[:4], alphas[1:5]))
    # Roughly 1/ε while the floor is not reached (Λ(λ) changes a little with λ).
    assert alphas[0] / alphas[1] == pytest.approx(2.0, rel=0.25)
    assert alphas[-1] == 1.0 / n


def test_theorem_alpha_is_choose_alpha_and_unknown_strings_are_refused():
    n, d = 10_000, 50
    plan = plan_output_perturbation(n, d, 1, loss="logistic", epsilon=1.0, delta=1e-6,
                                    alpha="theorem", sparsity=5)
    ref = choose_alpha("erm", n, d + 1, 1.0, 1e-6, radius=None,
                       constants_at=lambda lam: loss_constants(
                           "logistic", loss_param=1.0, norm_bound=1.0, sparsity=5,
                           intercept_scaling=1.0, label_bound=1.0, alpha=lam, radius=None))
    assert plan.alpha == pytest.approx(ref, rel=1e-9)
    with pytest.raises(ValueError, match="alpha"):
        plan_output_perturbation(n, d, 1, loss="logistic", epsilon=1.0, delta=1e-6,
                                 alpha="theory")


# ------------------------------------------------ the exact sums and their certificate
@pytest.mark.parametrize("range_bits", [61, 24])
@pytest.mark.parametrize("loss", ["logistic", "huber"])
def test_the_certificate_error_bound_covers_the_rounding_of_the_sums(monkeypatch, loss,
                                                                     range_bits):
    """‖g̃ − ∇F‖ ≤ (e₂, e₁) at random points, with the reference gradient summed
    exactly (math.fsum of each coordinate's float terms). At range_bits = 24 the grid
    is coarse (2^-F large): the bound must still hold, and dropping its grid term
    (the broken variant) must fail."""
    from skdpsparse._solvers import erm as erm_solver
    from skdpsparse._solvers.erm import FixedPointObjective, InMemoryRows

    monkeypatch.setattr(erm_solver, "_RANGE_BITS", range_bits)
    X, y, _ = make_sparse_classification(3000, 60, 5, random_state=4)
    targets = np.where(y == 1, 1.0, -1.0) if loss == "logistic" else \
        np.asarray(X @ np.linspace(-1, 1, 60)).ravel()
    Xb, yb = bound_inputs(X, targets[None, :], loss, norm_bound=1.0, sparsity=5,
                          label_bound=2.0)
    rows = InMemoryRows(Xb, yb)
    code = LOSS_CODES[loss]
    obj = FixedPointObjective(rows, code=code, param=0.5, alpha=0.01,
                              intercept_scaling=0.4, row_bound=1.0, label_bound=2.0)
    rng = np.random.default_rng(0)
    broken = []
    for scale in (0.1, 1.0, 5.0):
        theta = rng.standard_normal(61) * scale
        _, g, (e2, e1) = obj.fge(theta)
        z = Xb @ theta[:60] + 0.4 * theta[60]
        der = per_example_derivatives(z, yb[0], code, 0.5)
        exact = np.empty(61)
        Xc = Xb.tocsc()
        for j in range(60):
            lo, hi = Xc.indptr[j], Xc.indptr[j + 1]
            exact[j] = math.fsum(der[Xc.indices[lo:hi]] * Xc.data[lo:hi]) / 3000
        exact[60] = 0.4 * math.fsum(der) / 3000
        exact += 0.01 * theta
        diff = g - exact
        assert np.linalg.norm(diff) <= e2 and np.abs(diff).sum() <= e1
        float_part = 2.0 ** -50 * (np.linalg.norm(g) + 0.01 * np.linalg.norm(theta))
        broken.append(np.linalg.norm(diff) > float_part)
    if range_bits == 24:
        assert any(broken)  # without the grid term the bound would not hold


@pytest.mark.parametrize("sparse", [False, True])
def test_the_fit_bounds_rows_where_it_reads_them_with_the_release_of_the_copy(sparse):
    # output_perturbation reads each row scaled by its bounding factor instead of a
    # bounded copy: same sums, so the same minimizers and, with the same seed, the same
    # release as bound_inputs + regularized_minimizers + release, bit for bit (rows
    # far outside the bounds included, float32 input too).
    rng = np.random.default_rng(5)
    n, d = 600, 30
    X = rng.standard_normal((n, d)) * rng.choice([0.05, 1.0, 20.0], size=(n, 1))
    X[rng.random((n, d)) < 0.6] = 0.0
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    for data in (X, X.astype(np.float32)):
        data = sp.csr_matrix(data) if sparse else data
        plan = plan_output_perturbation(n, d, 2, loss="logistic", epsilon=1.0, delta=1e-6,
                                        norm_bound=0.7, sparsity=4)
        targets = np.vstack([y, -y])
        Xb, yb = bound_inputs(data, targets, "logistic", norm_bound=0.7, sparsity=4,
                              label_bound=1.0)
        theta, _ = regularized_minimizers(Xb, yb, plan)
        expected, _ = release(theta, plan, np.random.default_rng(11))
        got, _ = output_perturbation(data, targets, plan, np.random.default_rng(11))
        np.testing.assert_array_equal(got, expected)


def test_the_dense_fit_makes_no_copy_of_the_rows():
    # The bounded copy of X was the fit's largest allocation (8 bytes per entry); the
    # rows are now scaled where they are read. tracemalloc sees NumPy's allocations.
    import tracemalloc

    rng = np.random.default_rng(6)
    n, d = 4000, 300
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    plan = _plan(n, d, "logistic", norm_bound=1.0, sparsity=d)
    output_perturbation(X, y[None], plan, np.random.default_rng(0))  # compile, warm
    tracemalloc.start()
    try:
        output_perturbation(X, y[None], plan, np.random.default_rng(0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < X.nbytes / 4, (peak, X.nbytes)


def test_the_constants_allow_for_rows_bounded_in_floating_point():
    """A row scaled into the ball in floating point can exceed R by a few ulps (the
    computed norm rounds down): the constants are those of R·ROW_NORM_SLACK, so the
    sensitivity covers it; the exact-R constants (the broken variant) are smaller."""
    from skdpsparse.mechanisms.output_perturbation import ROW_NORM_SLACK, loss_constants

    kw = dict(loss="logistic", loss_param=1.0, sparsity=4.0, intercept_scaling=0.0,
              label_bound=1.0, alpha=0.1, radius=None)
    shipped = loss_constants(norm_bound=1.0, **kw)
    exact_r = loss_constants(norm_bound=1.0 / ROW_NORM_SLACK, **kw)  # constants at R
    # A row of 2^20 entries whose norm, computed in float64, says exactly R = 1.
    rng = np.random.default_rng(0)
    row = rng.standard_normal(1 << 20)
    row *= 1.0 / np.sqrt(np.dot(row, row))
    excess = math.fsum(v * v for v in row) ** 0.5 - 1.0  # its norm, nearly exact
    assert excess < 2.0 ** -30
    assert excess > 0.0  # this seed's row: its exact norm is above R
    assert exact_r.feature_l2 == pytest.approx(1.0, rel=1e-15)  # the broken bound: R
    assert exact_r.feature_l2 < 1.0 + excess <= shipped.feature_l2
    assert shipped.feature_l2 == ROW_NORM_SLACK
    assert shipped.lipschitz >= exact_r.lipschitz
