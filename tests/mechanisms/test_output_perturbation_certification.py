"""Whether an output-perturbation fit completes never depends on its data.

skdpsparse/mechanisms/output_perturbation.py (``certification_tol``) decides from
public numbers the slack tol the solver's fallback can certify; skdpsparse/_solvers/erm.py
(``descent_floor``, ``descent_iterations``, ``projected_descent``, ``solve_certified``'s
fallback) runs that fallback, projected gradient descent for a public number of steps
certified by analysis, whenever the adaptive solvers end without a certificate.
"""

import math
import warnings

import numpy as np
import pytest

from skdpsparse._solvers import erm
from skdpsparse._solvers.erm import (InMemoryRows, descent_floor, projected_descent,
                                     solve_certified)
from skdpsparse.linear_model import DPOutputPerturbationClassifier
from skdpsparse.mechanisms.output_perturbation import (certified_objective,
                                                       plan_output_perturbation)

#: Between the two datasets' edges (5.5718e11 and 5.5779e11, found by bisection on the
#: old code): below its edge a dataset certified, above it the solve raised.
ATTACK_NORM_BOUND = 5.575e11


def _neighbours(n=500, d=5):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1)[:, None]
    y = rng.integers(0, 2, n)
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = 0.0, 1 - y2[0]
    return (X, y), (X2, y2)


def _outcome(X, y, **params):
    clf = DPOutputPerturbationClassifier(epsilon=0.5, norm_bound=ATTACK_NORM_BOUND,
                                         random_state=0, **params)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            clf.fit(X, y)
        except (RuntimeError, ValueError) as exc:
            return type(exc).__name__, str(exc), None
    return "fitted", clf.tol_, [str(w.message) for w in caught]


def test_attack_one_row_decided_whether_the_fit_raised():
    """The attack: with the default intercept scaling (R/√d here) the certificate's
    floor, the rounding of the exact sums, sat at the threshold, and it depends on
    the column counts and the iterates: S certified and S' (row 0 zeroed, its label
    flipped) raised RuntimeError, deterministically: that one bit distinguishes the
    neighbours with certainty. Now the outcome, and every warning, is the same for
    both: tol='auto' resolves to a slack the fallback certifies (public numbers),
    and a float below it is refused with the same message before the data is read."""
    (X, y), (X2, y2) = _neighbours()
    first, second = _outcome(X, y), _outcome(X2, y2)
    assert first[0] == second[0] == "fitted"
    assert first[1:] == second[1:] and first[1] > 1e-2
    first, second = _outcome(X, y, tol=1e-2), _outcome(X2, y2, tol=1e-2)
    assert first == second and first[0] == "ValueError" and "tol >= " in first[1]


def _problem(loss="logistic", delta=1e-6, radius=None, n=300, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    if loss == "logistic":
        y = np.where(X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n) > 0,
                     1.0, -1.0)
    else:
        y = np.clip(X @ rng.standard_normal(d) * 2 + 0.5, -3, 3)
    plan = plan_output_perturbation(n, d, 1, loss=loss, epsilon=4.0, delta=delta,
                                    label_bound=3.0, radius=radius)
    objective = certified_objective(InMemoryRows(X, y), plan)
    target = 0.5 * plan.tol * (plan.sensitivity_l2 if delta > 0
                               else plan.sensitivity_l1 / math.sqrt(plan.n_params))
    return plan, objective, target


def _exact(plan, objective, slack):
    """θ* to within ``slack`` (a certified residual far below the plan's)."""
    theta, info = solve_certified(
        objective, radius=plan.radius, smoothness=plan.constants.smoothness + plan.alpha,
        accept=lambda r2, r1: r2 / plan.alpha <= slack)
    assert info["certified_by"] == "residual"
    return theta


@pytest.mark.parametrize("loss, delta, radius", [
    ("logistic", 1e-6, None), ("logistic", 0.0, None), ("squared", 1e-6, 0.5)])
def test_the_fallback_lands_within_the_target_by_analysis(loss, delta, radius):
    """When the adaptive solvers certify nothing (an ``accept`` that never holds),
    solve_certified runs the fallback instead of raising; after the plan's public
    step count it is within the target distance tol·Δ/2 (ℓ2; Δ₁/√p for Laplace) of
    θ*, and every step obeys the contraction the count is derived from:
    ‖xₖ₊₁ − θ*‖ ≤ q‖xₖ − θ*‖ + (1 − q)·floor."""
    plan, objective, target = _problem(loss, delta, radius)
    M = plan.constants.smoothness + plan.alpha
    theta, info = solve_certified(objective, radius=radius, smoothness=M,
                                  accept=lambda r2, r1: False,
                                  fallback_iterations=plan.fallback_iterations)
    assert info["certified_by"] == "analysis"
    assert info["n_iter"] == plan.fallback_iterations and math.isnan(info["residual_l2"])
    slack = 1e-6 * target
    exact = _exact(plan, objective, slack)
    assert np.linalg.norm(theta - exact) <= target - slack
    floor = descent_floor(
        plan.n, plan.n_features, code=plan.code, param=plan.loss_param, alpha=plan.alpha,
        smoothness=M, intercept_scaling=plan.intercept_scaling, row_bound=plan.norm_bound,
        label_bound=plan.label_bound if loss == "squared" else 1.0,
        reach=2 * plan.constants.coef_bound + target, radius=radius)
    assert 0 < floor <= target / 4
    q = math.sqrt((M - plan.alpha) / (M + plan.alpha))
    previous = np.linalg.norm(exact)
    for k in range(1, 40):
        step = np.linalg.norm(projected_descent(objective.fge, objective.p, radius=radius,
                                                smoothness=M, iterations=k) - exact)
        assert step <= q * previous + (1 - q) * floor + 2 * slack
        previous = step


def test_the_step_count_is_not_vacuous():
    """The public count is what the contraction needs, not a blanket cap: at half of
    it the worst-case bound qᵏρ + floor is above the target (so a fallback running
    fewer steps would be caught by the analysis), and it grows like (M/λ)·log."""
    plan, objective, target = _problem()
    M = plan.constants.smoothness + plan.alpha
    q = math.sqrt((M - plan.alpha) / (M + plan.alpha))
    k = plan.fallback_iterations
    rho = plan.constants.coef_bound
    assert q ** k * rho < target < q ** (k // 2) * rho
    assert k <= 2 + math.log(rho / (0.75 * target)) / -math.log(q)


def test_adaptive_failures_end_in_the_fallback_not_in_an_exception(monkeypatch):
    """An arithmetic error (as a degenerate scale caused: ZeroDivisionError in the
    conjugate gradient) or the solvers' own give-up ends in the fallback; without a
    fallback count, the old RuntimeError."""
    plan, objective, target = _problem()
    M = plan.constants.smoothness + plan.alpha

    def broken(*args):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(erm, "_solve", broken)
    theta, info = solve_certified(objective, radius=None, smoothness=M,
                                  accept=plan.accept,
                                  fallback_iterations=plan.fallback_iterations)
    assert info["certified_by"] == "analysis"
    monkeypatch.undo()
    exact = _exact(plan, objective, 1e-6 * target)
    assert np.linalg.norm(theta - exact) <= target
    with pytest.raises(RuntimeError, match="did not reach the certified accuracy"):
        solve_certified(objective, radius=None, smoothness=M, accept=lambda r2, r1: False,
                        max_iter=5)


def test_tol_auto_from_public_numbers():
    """tol='auto' is 10⁻² wherever the fallback certifies it and grows with n²√d
    beyond (n = 10⁷, d = 2¹⁸: no data is read to decide); an explicit 10⁻² there is
    refused naming the smallest slack that works, which the plan then accepts."""
    small = plan_output_perturbation(10**5, 2**18, 1, loss="logistic", epsilon=1.0,
                                     delta=1e-6)
    assert small.tol == 1e-2 and small.fallback_iterations > 0
    big = plan_output_perturbation(10**7, 2**18, 1, loss="logistic", epsilon=1.0,
                                   delta=1e-6)
    assert 1e-2 < big.tol < 0.1
    with pytest.raises(ValueError, match=r"tol=0\.01 is below") as refused:
        plan_output_perturbation(10**7, 2**18, 1, loss="logistic", epsilon=1.0,
                                 delta=1e-6, tol=1e-2)
    smallest = float(str(refused.value).split("tol >= ")[1].split(" ")[0])
    assert smallest <= big.tol
    plan_output_perturbation(10**7, 2**18, 1, loss="logistic", epsilon=1.0, delta=1e-6,
                             tol=1.01 * smallest)
    with pytest.warns(UserWarning, match="tol is 0.9"):
        plan_output_perturbation(2000, 20, 1, loss="logistic", epsilon=0.5, delta=1e-6,
                                 norm_bound=1e12, intercept_scaling=4.5e11)


def _rows_of_norm(norm, n=2000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X *= norm / np.linalg.norm(X, axis=1)[:, None]
    return X, rng.integers(0, 2, n)


def test_after_a_private_bound_a_float_tol_is_a_minimum_not_a_refusal():
    """With norm_bound='private' the plan reads the released R: a refusal of tol=1e-2
    at R ≈ 2³⁶ (where the fallback needs about 0.05) would be a bit about R shown
    while nothing is charged. The float is raised to what R needs instead, and the
    fit is charged with the bound's share."""
    from skdpsparse.ledger import PrivacyLedger

    X, y = _rows_of_norm(2.0 ** 36)
    with PrivacyLedger() as ledger, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = DPOutputPerturbationClassifier(epsilon=1.0, norm_bound="private",
                                             classes=[0, 1], tol=1e-2, random_state=1)
        clf.fit(X, y)
        assert len(ledger.history()) == 1
    assert clf.tol_ > 1e-2 and clf.norm_bound_ > 2.0 ** 30


def test_warnings_that_depend_on_a_private_bound_wait_for_the_charge():
    """Under a ledger that refuses the charge, two datasets whose private bounds land
    at 2³⁸ and 2⁴⁰ show the same warnings (those of the public numbers only): the
    tol and intercept-pull warnings, which read R, follow the release, and a refused
    fit has none. When the charge succeeds, they are shown."""
    from skdpsparse.exceptions import BudgetExceededError
    from skdpsparse.ledger import ApproxDP, PrivacyLedger

    shown = []
    for norm in (2.0 ** 38, 2.0 ** 40):
        X, y = _rows_of_norm(norm)
        with PrivacyLedger(limit=ApproxDP(0.5, 1e-5)), \
                warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(BudgetExceededError):
                DPOutputPerturbationClassifier(
                    epsilon=1.0, classes=[0, 1], norm_bound="private",
                    random_state=1).fit(X, y)
        shown.append(sorted(str(w.message) for w in caught))
    assert shown[0] == shown[1]
    assert not any("tol is" in m for m in shown[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DPOutputPerturbationClassifier(epsilon=1.0, classes=[0, 1], norm_bound="private",
                                       random_state=1).fit(*_rows_of_norm(2.0 ** 40))
    assert any("tol is" in str(w.message) for w in caught)
