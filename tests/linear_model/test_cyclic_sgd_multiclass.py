"""DPCyclicSGD with more than two classes: one joint model (multinomial logistic, or
the other losses summed one-vs-rest), its per-example gradient bound, its noise and
its one ledger charge (issue 21). The derivation is
``doc/derivations/cyclic_multiclass.rst``."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import softmax

from skdpsparse import PrivacyLedger
from skdpsparse.accounting import calibrate_last_iterate_noise
from skdpsparse.linear_model._cyclic_sgd import DPCyclicSGD
from skdpsparse.mechanisms.cyclic_sgd import gradient_bound, loss_curvature, plan_cyclic_sgd
from skdpsparse.mechanisms.noise import grid_noise
from skdpsparse.utils import RandomSource

pytestmark = pytest.mark.filterwarnings("ignore::skdpsparse.exceptions.PrivacyLeakWarning")


def _three_blobs(n, d=5, sep=2.0, noise=0.3, seed=0, k=3):
    """Separable: class c is centred at sep·e_c."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    X = sep * np.eye(k, d)[y] + noise * rng.standard_normal((n, d))
    return X, y


def _softmax_gradient_norms(Z, y):
    P = softmax(Z, axis=1)
    P[np.arange(len(y)), y] -= 1.0
    return np.linalg.norm(P, axis=1)


def test_multinomial_gradient_bound_is_sqrt2_and_attained_in_the_limit():
    """‖softmax(z) − e_y‖₂ < √2 for every margin vector (the sensitivity the noise is
    calibrated to), and √2 is the supremum: no smaller clip norm is safe. (Proof:
    doc/derivations/cyclic_multiclass.rst.)"""
    rng = np.random.default_rng(0)
    for k in (2, 3, 10, 100):
        Z = rng.standard_normal((20000, k)) * rng.choice([0.1, 3.0, 30.0, 300.0], (20000, 1))
        y = rng.integers(0, k, 20000)
        # (≤ √2 up to the float64 rounding of the norm itself: 1 ulp.)
        assert _softmax_gradient_norms(Z, y).max() <= math.sqrt(2.0) * (1 + 2 ** -52)
        # z_y → −∞ and one other margin → +∞: p → e_j, ‖e_j − e_y‖ = √2.
        worst = np.zeros((1, k))
        worst[0, 0], worst[0, 1] = -40.0, 40.0
        assert _softmax_gradient_norms(worst, np.array([0]))[0] == pytest.approx(
            math.sqrt(2.0), rel=1e-15)
    g = math.hypot(2.0, 1.0)
    assert gradient_bound("logistic", 1.0, g, 3) == pytest.approx(math.sqrt(2) * g, rel=1e-15)
    # One-vs-rest sums: √K·sup|ℓ'|·G (every output can be at its bound at once).
    assert gradient_bound("smoothed_hinge", 0.5, g, 4) == pytest.approx(2 * g, rel=1e-15)
    assert gradient_bound("sigmoid", 1.0, g, 9) == pytest.approx(3 * g / 4, rel=1e-15)
    # Curvature: diag(p) − ppᵀ ⪯ I/2 (Popoviciu), block diagonal one-vs-rest.
    assert loss_curvature("logistic", 1.0, g, 3) == (0.0, pytest.approx(g * g / 2))
    assert loss_curvature("smoothed_hinge", 0.5, g, 4) == loss_curvature(
        "smoothed_hinge", 0.5, g)
    with pytest.raises(ValueError, match="classification loss"):
        plan_cyclic_sgd(10, 2, loss="huber", norm_bound=1.0, fit_intercept=True,
                        batch_size=5, epochs=1, delta=1e-6, epsilon=1.0, n_outputs=3)


def test_multinomial_hessian_is_below_half():
    """M = G²/2 for the multinomial loss: the largest eigenvalue of diag(p) − ppᵀ is
    at most 1/2 (checked on random and extreme p)."""
    rng = np.random.default_rng(1)
    worst = 0.0
    for k in (2, 3, 5, 20):
        for scale in (0.1, 1.0, 10.0):
            for _ in range(200):
                p = softmax(scale * rng.standard_normal(k))
                worst = max(worst, np.linalg.eigvalsh(np.diag(p) - np.outer(p, p))[-1])
    assert 0.49 < worst <= 0.5


@pytest.mark.parametrize("loss, factor", [("logistic", math.sqrt(2.0)),
                                          ("smoothed_hinge", math.sqrt(3.0)),
                                          ("sigmoid", math.sqrt(3.0) / 4)])
def test_clip_norm_and_noise_scale_follow_the_stated_sensitivity(loss, factor):
    """C = the multiclass gradient bound (clip "auto"), z calibrated for it by the
    same composition accounting as a binary fit, σ = λzC/b."""
    X, y = _three_blobs(500)
    est = DPCyclicSGD(loss, epsilon=1.0, delta=1e-6, norm_bound=2.0, batch_size=50,
                      epochs=3, classes=[0, 1, 2], random_state=0).fit(X, y)
    g = math.hypot(2.0, 1.0)
    clip = factor * g
    assert est.clip_norm_ == pytest.approx(clip, rel=1e-14)
    assert not est.accounting_["clipping_can_bind"]
    big_m = g * g / 2 if loss == "logistic" else loss_curvature(loss, 1.0, g)[1]
    assert est.accounting_["smoothness"] == pytest.approx(big_m, rel=1e-14)
    z = calibrate_last_iterate_noise(1.0, 1e-6, n_samples=500, batch_size=50, epochs=3,
                                     learning_rate=est.learning_rate_, clip_norm=clip,
                                     clipping_can_bind=False)
    assert est.noise_multiplier_ == pytest.approx(z, rel=1e-9)
    assert est.accounting_["noise_std"] == pytest.approx(
        est.learning_rate_ * z * clip / 50, rel=1e-9)
    assert est.privacy_spent_.epsilon <= 1.0


def test_released_noise_covers_every_output():
    """Zero rows without intercept: no gradient, so coef_ (K × d) is the sum of the T
    noise draws, N(0, T·σ²) in every entry of every class."""
    n, d, b, lr, z, c = 40, 3000, 10, 0.5, 2.0, 1.0
    est = DPCyclicSGD(penalty=None, fit_intercept=False, batch_size=b, learning_rate=lr,
                      noise_multiplier=z, clip_norm=c, epochs=2, classes=[0, 1, 2],
                      random_state=3).fit(np.zeros((n, d)), np.arange(n) % 3)
    assert est.coef_.shape == (3, d) and est.n_steps_ == 8
    scale = math.sqrt(est.n_steps_) * lr * z * c / b
    for row in est.coef_:
        assert np.std(row) / scale == pytest.approx(1.0, abs=0.07)
    assert np.all(est.intercept_ == 0.0)


def _reference_multinomial(X, y, k, *, lr, b, epochs, z, clip, seed):
    """Algorithm 1 on the multinomial logistic model in plain NumPy: Θ (k × (d + 1)),
    per-example gradients (softmax(Θx̃) − e_y) x̃ᵀ clipped in Frobenius norm, the
    displacement released on the noise grid with the noise drawn as the mechanism
    draws it (pass order, then one block of K·p entries per step for each pass)."""
    rng = RandomSource(seed)
    n, d = X.shape
    order = rng.permutation(n)
    sigma = lr * z * clip / b
    theta, pos = np.zeros((k, d + 1)), 0
    ends = [math.ceil((e + 1) * n / b) for e in range(epochs)]
    for steps in np.diff([0] + ends):
        noise, gamma = grid_noise((steps, k * (d + 1)), rng, "gaussian", sigma,
                                  sensitivity=lr * clip / b)
        for t in range(steps):
            rows = order[(pos + np.arange(b)) % n]
            pos = (pos + b) % n
            A = np.hstack([X[rows], np.ones((b, 1))])
            P = softmax(A @ theta.T, axis=1)
            P[np.arange(b), y[rows]] -= 1.0
            norms = np.linalg.norm(P, axis=1) * np.linalg.norm(A, axis=1)
            P *= np.minimum(1.0, clip / norms)[:, None]
            grad = P.T @ A
            theta = theta + gamma * (noise[t].reshape(k, d + 1) - np.rint(lr / b * grad / gamma))
    return theta


def test_fit_matches_a_numpy_run_of_the_multinomial_algorithm(monkeypatch):
    key = bytes(range(32))
    monkeypatch.setattr("skdpsparse.linear_model._cyclic_sgd.fit_random_source",
                        lambda *args: RandomSource(key))
    X, y = _three_blobs(41, d=4)
    X[:4] *= 5.0  # rows above norm_bound: scaled by fit (and here by hand)
    R = 1.5
    Xs = X * np.minimum(1.0, R / np.linalg.norm(X, axis=1))[:, None]
    labels = np.array(["a", "b", "c"])[y]
    est = DPCyclicSGD(penalty=None, norm_bound=R, batch_size=8, epochs=3, learning_rate=0.4,
                      clip_norm=0.9, noise_multiplier=1.3, classes=["c", "a", "b"],
                      random_state=5).fit(X, labels)
    theta = _reference_multinomial(Xs, y, 3, lr=0.4, b=8, epochs=3, z=1.3, clip=0.9,
                                   seed=key)
    assert list(est.classes_) == ["a", "b", "c"]
    np.testing.assert_allclose(est.coef_, theta[:, :-1], rtol=0, atol=1e-10)
    np.testing.assert_allclose(est.intercept_, theta[:, -1], rtol=0, atol=1e-10)


@pytest.mark.parametrize("loss", ["logistic", "smoothed_hinge", "sigmoid"])
def test_accuracy_on_a_separable_three_class_problem_at_epsilon_one(loss):
    X, y = _three_blobs(6000, seed=1)
    Xt, yt = _three_blobs(2000, seed=2)
    est = DPCyclicSGD(loss, epsilon=1.0, norm_bound=3.0, classes=[0, 1, 2],
                      random_state=0).fit(X, y)
    assert est.coef_.shape == (3, 5) and est.intercept_.shape == (3,)
    assert est.decision_function(Xt).shape == (2000, 3)
    assert est.score(Xt, yt) > 0.95
    assert hasattr(est, "predict_proba") == (loss == "logistic")
    if loss == "logistic":
        proba = est.predict_proba(Xt)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(est.classes_[proba.argmax(axis=1)], est.predict(Xt))
        np.testing.assert_allclose(np.exp(est.predict_log_proba(Xt)), proba, rtol=1e-12)


def test_the_ledger_charges_the_stated_total_once():
    X, y = _three_blobs(600)
    with PrivacyLedger() as ledger:
        est = DPCyclicSGD(epsilon=0.7, delta=1e-6, classes=[0, 1, 2],
                          random_state=0).fit(X, y)
    assert len(ledger.entries) == 1
    assert ledger.entries[0][1] == est.privacy_spent_
    assert est.privacy_spent_.epsilon <= 0.7 and est.privacy_spent_.delta == 1e-6
    assert ledger.total(1e-6).epsilon <= 0.7 + 1e-12


def test_sparse_input_gives_the_dense_result(shared_noise):
    X, y = _three_blobs(300, d=20)
    X[np.abs(X) < 0.3] = 0.0
    kw = dict(classes=[0, 1, 2], random_state=2, penalty="elasticnet", alpha=0.01)
    dense = DPCyclicSGD(**kw).fit(X, y)
    for loss in ("logistic", "sigmoid"):
        dense = DPCyclicSGD(loss, **kw).fit(X, y)
        fit = DPCyclicSGD(loss, **kw).fit(sp.csr_matrix(X), y)
        np.testing.assert_allclose(fit.coef_, dense.coef_, rtol=0, atol=1e-10)
        np.testing.assert_allclose(fit.intercept_, dense.intercept_, rtol=0, atol=1e-10)


@pytest.mark.parametrize("params", [dict(radius=0.5), dict(box=(-0.1, 0.2)),
                                    dict(radius=0.5, penalty="elasticnet", alpha=0.5),
                                    dict(radius=0.5, penalty="l2", alpha=1.0,
                                         fit_intercept=False)])
def test_constraints_hold_for_the_whole_matrix(params):
    X, y = _three_blobs(200)
    est = DPCyclicSGD(epsilon=5.0, classes=[0, 1, 2], batch_size=20, epochs=2,
                      random_state=0, **params).fit(X, y)
    theta = np.column_stack([est.coef_, est.intercept_])
    if "radius" in params:
        assert np.linalg.norm(theta) <= params["radius"] * (1 + 1e-12)
        assert est.accounting_["domain_diameter"] == 2 * params["radius"]
    else:
        assert theta.min() >= -0.1 and theta.max() <= 0.2
        # The box is over the K·p parameters: diameter (u − l)√(Kp).
        assert est.accounting_["domain_diameter"] == pytest.approx(0.3 * math.sqrt(18))
    if not params.get("fit_intercept", True):
        assert np.all(est.intercept_ == 0.0)


def test_l1_penalty_zeroes_every_class():
    X, y = _three_blobs(200)
    est = DPCyclicSGD(penalty="l1", alpha=1e3, epsilon=5.0, classes=[0, 1, 2],
                      batch_size=20, epochs=1, random_state=0).fit(X, y)
    assert np.all(est.coef_ == 0.0)


def test_binary_fits_are_unchanged_and_two_classes_stay_one_output():
    """Two declared classes: one output with ±1 targets, as before (same noise, same
    model, coef_ of shape (1, d)); only three or more use the multiclass model."""
    X, y = _three_blobs(300)
    yb = (y == 1).astype(int)
    est = DPCyclicSGD(classes=[0, 1], random_state=0).fit(X, yb)
    assert est.coef_.shape == (1, 5) and est.intercept_.shape == (1,)
    assert est.decision_function(X).shape == (300,)
    assert est.predict_proba(X).shape == (300, 2)
