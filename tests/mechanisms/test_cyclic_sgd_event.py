"""DPCyclicSGD's budget carries a zCDP event when its bound is linear in the order
(issue 17, item D): every last-iterate bound is a Gaussian RDP curve ε(α) = αρ, so
the ledger can compose such fits in ρ instead of by basic composition."""

import numpy as np
import pytest

from skdpsparse import PrivacyLedger
from skdpsparse.accounting import ZCDPEvent, compose_events, last_iterate_rdp_bounds
from skdpsparse.linear_model import DPCyclicSGD
from skdpsparse.mechanisms.cyclic_sgd import plan_cyclic_sgd


_DEFAULTS = dict(loss="logistic", norm_bound=1.0, fit_intercept=True, batch_size=64,
                 epochs=3, delta=1e-6, epsilon=1.0)


@pytest.mark.parametrize("kwargs", [
    dict(),  # the smallest valid bound of the defaults
    dict(radius=1.0),  # bounded domain: thm4.4 may apply
    dict(loss="squared", clip_norm=1.0),  # composition only
    dict(epochs=1, batch_size=2000),
])
def test_the_budget_carries_the_rho_of_the_chosen_bound(kwargs):
    plan = plan_cyclic_sgd(2000, 5, **{**_DEFAULTS, **kwargs})
    best = plan.accounting["bound"]
    params = dict(n_samples=2000, batch_size=plan.batch_size,
                  noise_multiplier=plan.noise_multiplier, learning_rate=plan.learning_rate,
                  clip_norm=plan.clip_norm, epochs=plan.epochs,
                  weak_convexity=plan.weak_convexity, smoothness=plan.smoothness,
                  clipping_can_bind=plan.clipping_can_bind,
                  domain_diameter=plan.domain_diameter)
    curve = last_iterate_rdp_bounds(**params)[best]
    rho = curve.epsilons / curve.orders
    assert np.ptp(rho) <= 1e-12 * rho.max()  # linear in α
    event = plan.budget.event
    assert isinstance(event, ZCDPEvent) and event.rho == pytest.approx(rho.max(), rel=1e-12)
    assert compose_events([event], 1e-6).epsilon <= plan.budget.epsilon * (1 + 1e-9)


def test_ledger_composes_cyclic_fits_in_rho():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3)) / 2
    y = (X[:, 0] > 0).astype(int)
    with PrivacyLedger() as ledger:
        for seed in range(3):
            DPCyclicSGD(classes=[0, 1], epochs=1, random_state=seed).fit(X, y)
    budgets = [b for _, b in ledger.entries]
    assert all(isinstance(b.event, ZCDPEvent) for b in budgets)
    assert ledger.total().epsilon < 0.8 * sum(b.epsilon for b in budgets)
