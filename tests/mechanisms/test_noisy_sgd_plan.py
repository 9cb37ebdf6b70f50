"""The plan of noisy projected SGD (issue 22: plan from public numbers, then run).

Scales against a hand computation from the theorem (module docstring of
:mod:`skdpsparse.mechanisms.noisy_sgd`), and the teeth: the noise a run draws is read
back (the grid spacing and the integer scale of every block) and checked against the
plan's budget with L recomputed by hand from the declared bounds; a replaced plan
(half the noise, or rows bounded at 10 R_x with the noise of R_x) fails the check.
"""

import dataclasses
import math

import numpy as np
import pytest

import skdpsparse.mechanisms.noisy_sgd as NS
from skdpsparse.accounting import DiscreteGaussianEvent, zcdp_to_epsilon
from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.mechanisms.noisy_sgd import noisy_sgd, plan_noisy_sgd
from skdpsparse.utils import RandomSource


def _lipschitz_by_hand(loss, R, intercept, D=None, B=None, kappa=1.0):
    g = math.sqrt(R * R + 1) if intercept else R
    if loss == "squared":  # |ℓ'| ≤ ‖θ‖‖(x̃, 1)‖ + |y| ≤ DG + B on W
        return (D * g + B) * g
    return {"logistic": g, "hinge": g, "smoothed_hinge": g, "huber": kappa * g}[loss]


@pytest.mark.parametrize("loss, kw", [
    ("logistic", dict()),
    ("huber", dict(loss_param=0.5, norm_bound=2.0, fit_intercept=False)),
    ("squared", dict(label_bound=3.0, radius=2.0)),
])
@pytest.mark.parametrize("K", [1, 3])
def test_provable_plan_is_the_discrete_gaussian_for_2L_sqrt_K(loss, kw, K):
    n, d, eps, delta = 5000, 7, 2.0, 1e-6
    plan = plan_noisy_sgd(n, d, loss=loss, epsilon=eps, delta=delta, n_runs=K, **kw)
    L = _lipschitz_by_hand(loss, kw.get("norm_bound", 1.0), kw.get("fit_intercept", True),
                           kw.get("radius", 1.0), kw.get("label_bound"),
                           kw.get("loss_param", 1.0))
    assert plan.lipschitz == pytest.approx(L, rel=1e-15)
    sigma = discrete_gaussian_sigma(2 * L * math.sqrt(K), eps, delta)
    assert plan.noise_std == pytest.approx(sigma, rel=1e-12)  # up to the last ulps
    assert plan.noise_multiplier == plan.noise_std / (2 * L)
    # ρ = K(2L)²/(2σ²)-zCDP (Canonne, Kamath and Steinke 2020, Thm 14; Bun and
    # Steinke 2016, Lemma 2.3)
    rho = K * (2 * L) ** 2 / (2 * plan.noise_std**2)
    assert plan.budget.epsilon == pytest.approx(zcdp_to_epsilon(rho, delta), rel=1e-12)
    assert plan.budget.epsilon <= eps and plan.budget.delta == delta
    assert plan.budget.event == DiscreteGaussianEvent(plan.noise_multiplier, count=K)
    p = d + (1 if kw.get("fit_intercept", True) else 0)
    radius = kw.get("radius", 1.0)
    assert plan.step_size == pytest.approx(radius / (math.sqrt(n) * (L + plan.noise_std
                                                                     * math.sqrt(p))))
    assert plan.rows_needed == pytest.approx((1 + plan.noise_std * math.sqrt(p) / L) ** 2)


def test_paper_plan_is_theorem_6_with_remark_1():
    n, d, eps, delta, K = 10**6, 3, 0.05, 1e-6, 2
    plan = plan_noisy_sgd(n, d, loss="hinge", epsilon=eps, delta=delta, n_runs=K,
                          noise_calibration="paper", learning_rate=0.01)
    L = math.sqrt(2.0)
    d3 = delta / K / 3  # Remark 1: δ = δ′ = δ̄/3, per run δ̄/K
    eps_run = eps / K / (8 * math.sqrt(math.log(1 / d3)))
    assert plan.noise_std == pytest.approx(
        8 * L * math.sqrt(math.log(2 / d3)) / (math.sqrt(n) * eps_run), rel=1e-12)
    assert plan.step_size == 0.01 and plan.calibration == "paper"
    assert plan.budget.epsilon <= eps * (1 + 1e-9)
    with pytest.raises(ValueError, match="certified only to"):  # outside its regime
        plan_noisy_sgd(100_000, 1, loss="hinge", epsilon=4.0, delta=delta,
                       noise_calibration="paper")


def test_the_estimators_release_their_plan():
    from skdpsparse.linear_model import DPNoisySGDClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 4)) / 2
    y = np.digitize(X[:, 0], [-0.3, 0.3])
    clf = DPNoisySGDClassifier(epsilon=2.0, classes=[0, 1, 2], random_state=0).fit(X, y)
    plan = plan_noisy_sgd(3000, 4, loss="logistic", epsilon=2.0, delta=1e-6, n_runs=3)
    assert clf.privacy_spent_ == plan.budget
    assert (clf.noise_std_, clf.learning_rate_, clf.lipschitz_) == (
        plan.noise_std, plan.step_size, plan.lipschitz)


# --------------------------------------------------------------------- teeth
class _Recorder:
    """Reads back the noise of a run: the spacing γ and the integer scale N of every
    block drawn through :func:`~skdpsparse.mechanisms.noise.grid_noise` (an observer:
    the draws are the library's)."""

    def __init__(self, monkeypatch):
        self.scales = []
        original = NS.grid_noise

        def grid_noise(shape, rng, kind, scale, *, sensitivity):
            draws, spacing = original(shape, rng, kind, scale, sensitivity=sensitivity)
            source = rng if isinstance(rng, _Source) else None
            self.scales.append((kind, source.last * spacing if source else None))
            return draws, spacing

        monkeypatch.setattr(NS, "grid_noise", grid_noise)


class _Source(RandomSource):
    last = None

    def discrete_noise(self, size, kind, scale):
        self.last = int(scale)
        return super().discrete_noise(size, kind, scale)


def _delivered(plan, scales):
    """Whether every block's noise N·γ gives the plan's budget: ρ = K(2L)²/(2σ²) with
    L recomputed by hand from the plan's declared bounds, at most the ρ of the
    budget's event."""
    L = _lipschitz_by_hand(plan.loss, plan.norm_bound, plan.fit_intercept, plan.radius,
                           plan.label_bound, plan.loss_param)
    claimed = plan.budget.event.zcdp_rho
    return all(kind == "gaussian" and plan.n_runs * (2 * L) ** 2 / (2 * s * s)
               <= claimed * (1 + 1e-9) for kind, s in scales)


@pytest.mark.parametrize("variant", ["correct", "noise/2", "bound x10"])
def test_a_replaced_plan_is_caught_by_the_delivered_noise(variant, monkeypatch):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 3))
    y = np.sign(X[:, 0])[None, :]
    plan = plan_noisy_sgd(400, 3, loss="logistic", epsilon=1.0, delta=1e-6)
    if variant == "noise/2":
        plan = dataclasses.replace(plan, noise_std=plan.noise_std / 2)
    elif variant == "bound x10":  # rows bounded at 10 R_x, the noise still for R_x
        plan = dataclasses.replace(plan, norm_bound=10 * plan.norm_bound)
    recorder = _Recorder(monkeypatch)
    noisy_sgd(X, y, plan, _Source(b"\x02" * 32))
    assert recorder.scales
    assert _delivered(plan, recorder.scales) == (variant == "correct")
