"""The plan of the sparse exponential mechanism (issue 22: plan from public numbers,
then run): the score sensitivity, the per-problem ε and the net against a hand
computation (the module docstring's derivation; Ghazi et al. 2024 v1, Algorithm 4),
the wrapper against plan + run, and the teeth: the temperature of every draw is read
back and checked against ε/K over Δ_u recomputed from the declared bounds; a replaced
plan (half the score sensitivity, or rows bounded at 10 R with the Δ_u of R) fails.
"""

import dataclasses
import math

import numpy as np
import pytest

import skdpsparse.mechanisms.sparse_exponential as SE
from skdpsparse.accounting import PureDP
from skdpsparse.mechanisms.sparse_exponential import (
    plan_sparse_exponential,
    sparse_exponential,
    sparse_exponential_mechanism,
)


def _delta_u_by_hand(loss, R, c, D):
    a = D * math.hypot(R, c)  # |⟨θ, x̄⟩| ≤ D·√(R² + c²)
    return {"logistic": a,  # log(1 + e^A) − log(1 + e^−A) = A
            "hinge": (1 + a) - max(0.0, 1 - a)}[loss]


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_plan_by_hand(loss):
    plan = plan_sparse_exponential(300, 4, 3, loss=loss, epsilon=1.5, radius=2.0, tau=2.0,
                                   norm_bound=0.5, intercept_scaling=1.0)
    assert plan.score_sensitivity == pytest.approx(_delta_u_by_hand(loss, 0.5, 1.0, 2.0),
                                                   rel=1e-12)
    assert plan.epsilon_each == 1.5 / 3 and plan.budget == PureDP(1.5)
    assert plan.n_params == 5 and plan.net_size == 2 * 5 + 1  # τ = D: 0 and ±D e_j
    small = plan_sparse_exponential(300, 4, loss=loss, epsilon=1.5, radius=1.0,
                                    tau=1 / math.sqrt(2), intercept_scaling=0.0)
    assert small.net_size == 2 * 4**2 + 1  # the module's table: τ = D/√2


def test_a_net_above_the_cap_is_refused_by_the_plan():
    with pytest.raises(ValueError, match="above max_net_size"):
        plan_sparse_exponential(10, 30, loss="hinge", epsilon=1.0, radius=1.0, tau=0.2)


def test_the_wrapper_is_plan_then_run():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3)) / 2
    y = np.vstack([np.sign(X[:, 0]), -np.sign(X[:, 1])])
    # tau="auto" under a cap of 10^4 points (the default cap of 10^6 took two minutes
    # of scoring here)
    theta, budget, info = sparse_exponential_mechanism(
        X, y, loss="logistic", epsilon=2.0, radius=1.0, rng=np.random.default_rng(1),
        max_net_size=10**4)
    plan = plan_sparse_exponential(100, 3, 2, loss="logistic", epsilon=2.0, radius=1.0,
                                   max_net_size=10**4)
    assert plan.tau == info["tau"] and 10**3 < plan.net_size <= 10**4
    np.testing.assert_array_equal(theta, sparse_exponential(X, y, plan,
                                                            np.random.default_rng(1)))
    assert budget == plan.budget and info["net_size"] == plan.net_size


@pytest.mark.parametrize("variant", ["correct", "sensitivity/2", "bound x10"])
def test_a_replaced_plan_is_caught_by_the_temperature(variant, monkeypatch):
    draws = []
    original = SE.exponential_mechanism

    def exponential_mechanism(scores, sensitivity, epsilon, rng, size=None):
        draws.append((float(sensitivity), float(epsilon)))
        return original(scores, sensitivity, epsilon, rng, size)

    monkeypatch.setattr(SE, "exponential_mechanism", exponential_mechanism)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((80, 2))
    y = np.vstack([np.sign(X[:, 0]), np.sign(X[:, 1])])
    plan = plan_sparse_exponential(80, 2, 2, loss="hinge", epsilon=1.0, radius=1.0)
    if variant == "sensitivity/2":
        plan = dataclasses.replace(plan, score_sensitivity=plan.score_sensitivity / 2)
    elif variant == "bound x10":  # rows bounded at 10 R, Δ_u still that of R
        plan = dataclasses.replace(plan, norm_bound=10 * plan.norm_bound)
    sparse_exponential(X, y, plan, np.random.default_rng(3))
    delta_u = _delta_u_by_hand("hinge", plan.norm_bound, plan.intercept_scaling,
                               plan.radius)
    # each draw is (ε_k·Δ_true/Δ_used)-DP; the K draws compose to their sum
    spent = sum(eps * delta_u / sens for sens, eps in draws)
    assert len(draws) == 2
    assert (spent <= plan.budget.epsilon * (1 + 1e-12)) == (variant == "correct")


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_the_classifier_is_plan_then_run(fit_intercept):
    """DPOutputPerturbationClassifier(method="exponential") is validate -> plan -> run
    -> release: the same key through plan_sparse_exponential + sparse_exponential
    gives its coefficients bit for bit, and its budget is the plan's."""
    from skdpsparse.linear_model import DPOutputPerturbationClassifier
    from skdpsparse.linear_model._base import one_vs_rest_targets
    from skdpsparse.utils import fit_random_source

    rng = np.random.default_rng(4)
    X = rng.standard_normal((60, 2))
    y = rng.integers(0, 3, 60)
    clf = DPOutputPerturbationClassifier(method="exponential", loss="hinge", radius=1.0,
                                         tau=0.5, epsilon=2.0, fit_intercept=fit_intercept,
                                         intercept_scaling=1.0, classes=[0, 1, 2],
                                         random_state=0).fit(X, y)
    targets = one_vs_rest_targets(y, clf.classes_)
    c = 1.0 if fit_intercept else 0.0
    plan = plan_sparse_exponential(60, 2, 3, loss="hinge", epsilon=2.0, radius=1.0,
                                   tau=0.5, intercept_scaling=c)
    theta = sparse_exponential(X, targets, plan, fit_random_source(0, clf, X, targets))
    np.testing.assert_array_equal(clf.coef_, theta[:, :2])
    np.testing.assert_array_equal(clf.intercept_, c * theta[:, 2] if c else np.zeros(3))
    assert clf.privacy_spent_ == plan.budget and clf.tau_ == plan.tau
