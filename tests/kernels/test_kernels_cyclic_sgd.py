"""The cyclic DP-SGD step loop against a plain NumPy run of the same steps."""

import numpy as np
import pytest
import scipy.sparse as sp
from kernels_reference import clipped_gradient_sum
from scipy.optimize import brentq

from skdpsparse._kernels import LOSS_CODES
from skdpsparse._kernels.cyclic_sgd import (
    BALL,
    BOX,
    NO_CONSTRAINT,
    dense_permuted_cyclic_sgd_steps,
    csr_cyclic_sgd_steps,
    csr_multiclass_cyclic_sgd_steps,
    dense_cyclic_sgd_steps,
    dense_gather_bounded_rows,
    dense_multiclass_cyclic_sgd_steps,
    dense_sequential_cyclic_sgd_steps,
)
from skdpsparse._kernels._common import l2_norm_nb
from skdpsparse.mechanisms.cyclic_sgd import bound_rows_l2

PARAM = {"smoothed_hinge": 0.5, "huber": 0.7}


def reference_steps(X, y, theta, order, start, code, param, clip, b, lr, noise, alpha,
                    l1_ratio, constraint, radius, lower, upper, fit_intercept):
    """Algorithm 1 of Kong and Ribero (2024), one step at a time, in NumPy (per-example gradients
    materialised and clipped by ``kernels_reference.clipped_gradient_sum``)."""
    theta = theta.copy()
    n, d = X.shape
    p = d + 1 if fit_intercept else d
    for t in range(noise.shape[0]):
        rows = order[(start + np.arange(b)) % n]  # cyclic batch, wrapping at the end
        start = (start + b) % n
        g, g_b = clipped_gradient_sum(X, y, theta[:d], theta[d], code, param, clip, rows,
                                      fit_intercept)
        v = theta.copy()
        v[:d] += noise[t, :d] - lr / b * g
        if fit_intercept:
            v[d] += noise[t, d] - lr / b * g_b
        v[:p] = reference_prox(v[:p], d, lr * alpha, l1_ratio, constraint, radius, lower,
                               upper)
        theta = v
    return theta, start


def reference_prox(v, d, ta, l1_ratio, constraint, radius, lower, upper):
    """prox of t·α(ρ‖w‖₁ + (1−ρ)/2‖w‖²) + ι_K at v = (w, [b]), ta = tα, from the
    optimality conditions: w = soft(v_w, taρ)/(1 + a + μ), b = v_b/(1 + μ), with
    a = ta(1−ρ) and μ ≥ 0 the ball's multiplier (root found by brentq)."""
    a = ta * (1 - l1_ratio)
    soft = np.sign(v[:d]) * np.maximum(np.abs(v[:d]) - ta * l1_ratio, 0.0)
    b = v[d:]  # empty without an intercept

    def sq_norm(mu):
        return np.sum((soft / (1 + a + mu)) ** 2) + np.sum((b / (1 + mu)) ** 2)

    mu = 0.0
    if constraint == BALL and sq_norm(0.0) > radius**2:
        mu = brentq(lambda m: sq_norm(m) - radius**2, 0.0, 1e12, xtol=1e-15, rtol=1e-15)
    out = np.concatenate([soft / (1 + a + mu), b / (1 + mu)])
    return np.clip(out, lower[0], upper[0]) if constraint == BOX else out


def _problem(loss, n=23, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.uniform(0.2, 2.0, (n, 1))
    X[rng.random((n, d)) < 0.4] = 0.0  # some sparsity for the CSR twin
    if loss in ("squared", "huber"):
        y = X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n)
    else:
        y = rng.choice([-1.0, 1.0], n)
    return X, y, rng


CONSTRAINTS = {
    "none": (NO_CONSTRAINT, 0.0, (0.0, 0.0)),
    "ball": (BALL, 0.4, (0.0, 0.0)),
    "box": (BOX, 0.0, (-0.15, 0.2)),
}


@pytest.mark.parametrize("loss", sorted(set(LOSS_CODES) - {"hinge"}))
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("constraint", sorted(CONSTRAINTS))
def test_steps_match_numpy_reference(loss, fit_intercept, constraint):
    X, y, rng = _problem(loss)
    n, d = X.shape
    b, lr, clip, n_steps = 5, 0.7, 0.8, 13  # b does not divide n: batches wrap
    kind, radius, (lo, hi) = CONSTRAINTS[constraint]
    lower, upper = np.array([lo]), np.array([hi])
    alpha, l1_ratio = (0.3, 0.5) if constraint != "box" else (0.0, 0.0)
    p = d + 1 if fit_intercept else d
    noise = 0.05 * rng.standard_normal((n_steps, p))
    order = rng.permutation(n)
    theta0 = np.zeros(d + 1)
    theta0[:p] = np.clip(0.1 * rng.standard_normal(p), lo, hi) if kind == BOX else 0.0
    args = (LOSS_CODES[loss], PARAM.get(loss, 0.0), clip, b, lr)
    tail = (alpha, l1_ratio, kind, radius, lower, upper, fit_intercept)
    expected, exp_start = reference_steps(X, y, theta0, order, 3, *args, noise, *tail)

    theta = theta0.copy()
    start = dense_cyclic_sgd_steps(X, y, theta, order, 3, *args, noise, *tail)
    np.testing.assert_allclose(theta, expected, rtol=0, atol=1e-10)
    assert start == exp_start
    assert not fit_intercept or theta[d] != 0.0

    # The CSR twin, and the same steps cut into two blocks, give the same iterate.
    Xs = sp.csr_matrix(X)
    theta_csr = theta0.copy()
    s = csr_cyclic_sgd_steps(Xs.indptr, Xs.indices, Xs.data, d, y, theta_csr, order, 3,
                             *args, noise[:4], *tail)
    s = csr_cyclic_sgd_steps(Xs.indptr, Xs.indices, Xs.data, d, y, theta_csr, order, s,
                             *args, noise[4:], *tail)
    np.testing.assert_allclose(theta_csr, expected, rtol=0, atol=1e-10)
    assert s == exp_start


def test_constraints_and_penalties_are_applied():
    X, y, rng = _problem("logistic")
    d = X.shape[1]
    noise = rng.standard_normal((40, d + 1))  # large noise: the constraint must bind
    order = np.arange(X.shape[0])
    one = np.ones(1)
    theta = np.zeros(d + 1)
    dense_cyclic_sgd_steps(X, y, theta, order, 0, 1, 0.0, 1.0, 4, 0.5, noise, 0.0, 0.0,
                           BALL, 0.3, one, one, True)
    assert np.linalg.norm(theta) == pytest.approx(0.3, rel=1e-12)
    theta = np.zeros(d + 1)
    dense_cyclic_sgd_steps(X, y, theta, order, 0, 1, 0.0, 1.0, 4, 0.5, noise, 0.0, 0.0,
                           BOX, 0.0, -0.1 * one, 0.2 * one, True)
    assert theta.min() == -0.1 and theta.max() == 0.2
    theta = np.zeros(d + 1)
    dense_cyclic_sgd_steps(X, y, theta, order, 0, 1, 0.0, 1.0, 4, 0.5, 0.3 * noise, 1.0, 1.0,
                           NO_CONSTRAINT, 0.0, one, one, True)
    assert np.sum(theta[:d] == 0.0) >= 2 and theta[d] != 0.0  # ℓ1 on w only


@pytest.mark.parametrize("l1_ratio", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_ball_step_is_the_prox_of_penalty_plus_ball(l1_ratio, fit_intercept):
    """With zero gradients one step maps v = noise to prox_{λh}(v), h = g + ι_ball:
    no feasible perturbation does better on the (convex) prox objective."""
    rng = np.random.default_rng(1)
    d, lr, alpha, r = 5, 0.5, 0.8, 0.7
    p = d + fit_intercept
    X, y, order, one = np.zeros((3, d)), np.zeros(3), np.arange(3), np.ones(1)

    def objective(z, v):
        w = z[:d]
        g = alpha * (l1_ratio * np.abs(w).sum() + 0.5 * (1 - l1_ratio) * w @ w)
        return lr * g + 0.5 * (z - v) @ (z - v)

    for _ in range(20):
        v = rng.standard_normal(p) * 2
        theta = np.zeros(d + 1)
        dense_cyclic_sgd_steps(X, y, theta, order, 0, 0, 0.0, 1.0, 1, lr, v[None, :], alpha,
                               l1_ratio, BALL, r, one, one, fit_intercept)
        x = theta[:p]
        assert np.linalg.norm(x) <= r * (1 + 1e-15)
        best = objective(x, v)
        for _ in range(300):
            z = x + 1e-3 * rng.standard_normal(p)
            z *= min(1.0, r / np.linalg.norm(z))
            assert objective(z, v) >= best - 1e-12


def test_argument_checks():
    X, y, _ = _problem("logistic")
    n, d = X.shape
    one = np.ones(1)
    good = dict(theta=np.zeros(d + 1), order=np.arange(n), start=0, batch_size=4,
                noise=np.zeros((2, d + 1)))

    def run(**kw):
        a = {**good, **kw}
        dense_cyclic_sgd_steps(X, y, a["theta"], a["order"], a["start"], 1, 0.0, 1.0,
                               a["batch_size"], 0.1, a["noise"], 0.0, 0.0, NO_CONSTRAINT,
                               0.0, one, one, True)

    run()
    for bad in (dict(theta=np.zeros(d)), dict(batch_size=n + 1), dict(start=n),
                dict(noise=np.zeros((2, d))), dict(order=np.arange(n - 1))):
        with pytest.raises(ValueError):
            run(**bad)
    with pytest.raises(IndexError):
        run(order=np.full(n, n))


# ------------------------------------------------------------------------ multiclass
def _margin_derivatives(Z, y, loss):
    """∂ loss / ∂ margins, one row per example: softmax(z) − e_y (multinomial) or the
    binary derivatives with targets ±1 (one-vs-rest sum), in plain NumPy."""
    k = Z.shape[1]
    if loss == "multinomial":
        P = np.exp(Z - Z.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        P[np.arange(len(y)), y] -= 1.0
        return P
    S = np.where(np.arange(k)[None, :] == y[:, None], 1.0, -1.0)
    if loss == "smoothed_hinge":  # h = PARAM; ℓ' = −s·clip((1 − sz)/h, 0, 1)
        return -S * np.clip((1.0 - S * Z) / PARAM["smoothed_hinge"], 0.0, 1.0)
    s_ = 1.0 / (1.0 + np.exp(S * Z))  # sigmoid loss ℓ = σ(−sz): ℓ' = −s σ(−sz)(1 − σ(−sz))
    return -S * s_ * (1.0 - s_)


def reference_multiclass_steps(X, y, theta, k, order, start, loss, clip, b, lr, noise, alpha,
                               l1_ratio, constraint, radius, lower, upper, fit_intercept):
    """The K-output steps in NumPy: per-example gradients g x̃ᵀ clipped in Frobenius
    norm, the displacement plus noise, then the prox of the penalty on W plus the ball
    over all of (W, b) or the box on every entry (``reference_prox`` on (W, b) flat)."""
    n, d = X.shape
    theta = theta.reshape(k, d + 1).copy()
    p = d + 1 if fit_intercept else d
    for t in range(noise.shape[0]):
        rows = order[(start + np.arange(b)) % n]
        start = (start + b) % n
        A = np.hstack([X[rows], np.ones((b, 1))]) if fit_intercept else X[rows]
        G = _margin_derivatives(A @ theta[:, :p].T, y[rows], loss)
        norms = np.linalg.norm(G, axis=1) * np.linalg.norm(A, axis=1)
        with np.errstate(divide="ignore"):
            G *= np.minimum(1.0, clip / norms)[:, None]
        V = theta[:, :p] + noise[t].reshape(k, p) - lr / b * (G.T @ A)
        flat = np.concatenate([V[:, :d].ravel(), V[:, d:].ravel()])
        out = reference_prox(flat, k * d, lr * alpha, l1_ratio, constraint, radius, lower,
                             upper)
        theta[:, :d] = out[:k * d].reshape(k, d)
        theta[:, d:p] = out[k * d:].reshape(k, p - d)
    return theta.ravel(), start


@pytest.mark.parametrize("loss", ["multinomial", "smoothed_hinge", "sigmoid"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("constraint", sorted(CONSTRAINTS))
def test_multiclass_steps_match_numpy_reference(loss, fit_intercept, constraint):
    X, _, rng = _problem("logistic")
    n, d = X.shape
    k = 4
    y = rng.integers(0, k, n)
    b, lr, clip, n_steps = 5, 0.7, 0.6, 13
    kind, radius, (lo, hi) = CONSTRAINTS[constraint]
    lower, upper = np.array([lo]), np.array([hi])
    alpha, l1_ratio = (0.3, 0.5) if constraint != "box" else (0.0, 0.0)
    p = d + 1 if fit_intercept else d
    noise = 0.05 * rng.standard_normal((n_steps, k * p))
    order = rng.permutation(n)
    theta0 = np.zeros((k, d + 1))
    if kind == BOX:
        theta0[:, :p] = np.clip(0.1 * rng.standard_normal((k, p)), lo, hi)
    theta0 = theta0.ravel()
    softmax = loss == "multinomial"
    code = LOSS_CODES["logistic" if softmax else loss]
    args = (code, softmax, PARAM.get(loss, 0.0), clip, b, lr)
    tail = (alpha, l1_ratio, kind, radius, lower, upper, fit_intercept)
    expected, exp_start = reference_multiclass_steps(X, y, theta0, k, order, 3, loss, clip,
                                                     b, lr, noise, *tail)
    theta = theta0.copy()
    start = dense_multiclass_cyclic_sgd_steps(X, y, theta, k, order, 3, *args, noise, *tail)
    np.testing.assert_allclose(theta, expected, rtol=0, atol=1e-10)
    assert start == exp_start
    Xs = sp.csr_matrix(X)
    theta_csr = theta0.copy()
    s = csr_multiclass_cyclic_sgd_steps(Xs.indptr, Xs.indices, Xs.data, d, y, theta_csr, k,
                                        order, 3, *args, noise[:4], *tail)
    s = csr_multiclass_cyclic_sgd_steps(Xs.indptr, Xs.indices, Xs.data, d, y, theta_csr, k,
                                        order, s, *args, noise[4:], *tail)
    np.testing.assert_allclose(theta_csr, expected, rtol=0, atol=1e-10)
    assert s == exp_start


def test_multiclass_argument_checks():
    X, _, _ = _problem("logistic")
    n, d = X.shape
    k = 3
    one = np.ones(1)
    good = dict(y=np.arange(n) % k, theta=np.zeros(k * (d + 1)), noise=np.zeros((2, k * (d + 1))))

    def run(**kw):
        a = {**good, **kw}
        dense_multiclass_cyclic_sgd_steps(X, a["y"], a["theta"], k, np.arange(n), 0, 1, True,
                                          0.0, 1.0, 4, 0.1, a["noise"], 0.0, 0.0,
                                          NO_CONSTRAINT, 0.0, one, one, True)

    run()
    for bad in (dict(y=np.arange(n) % (k + 1)), dict(y=-(np.arange(n) % k)),
                dict(theta=np.zeros(k * d)), dict(noise=np.zeros((2, d + 1)))):
        with pytest.raises(ValueError):
            run(**bad)


# ------------------------------------------------------------- dense fast path
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gather_is_the_bounded_permuted_copy_with_its_norms(dtype):
    """Bit for bit what bound_rows_l2(X, R, order) returns, and each row's norm as the
    step kernel computes it, including rows above the bound, a zero row and rows whose
    sum of squares overflows or underflows float64."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 7)) * rng.uniform(0.1, 3.0, (40, 1))
    X[5] = 0.0
    if dtype == np.float64:
        X[7] *= 1e300  # ‖x‖² overflows: the robust norm and overflow bounding
        X[8] *= 1e-300  # ‖x‖² underflows
    X = X.astype(dtype)
    order = rng.permutation(40)
    for R in (1.0, 0.5, 100.0):
        out, norms = dense_gather_bounded_rows(X, order, R, np.empty((40, 7)), np.empty(40))
        expected = bound_rows_l2(X, R, order=order)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(norms, [l2_norm_nb(row) for row in expected])
        assert norms.max() <= R * (1 + 1e-15)
    with pytest.raises(IndexError):
        dense_gather_bounded_rows(X, np.full(40, 40), 1.0, np.empty((40, 7)), np.empty(40))


@pytest.mark.parametrize("loss", sorted(set(LOSS_CODES) - {"hinge"}))
@pytest.mark.parametrize("constraint", sorted(CONSTRAINTS))
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_sequential_steps_are_the_general_steps_in_memory_order(loss, constraint,
                                                                fit_intercept):
    """With order = range(n) and the norms from the gather, the fast kernel computes
    the steps of dense_cyclic_sgd_steps (margins summed in another order: equal to
    rounding; on the noise grid, equal)."""
    X, y, rng = _problem(loss)
    n, d = X.shape
    X, norms = dense_gather_bounded_rows(X, np.arange(n), 1.5, np.empty((n, d)), np.empty(n))
    kind, radius, (lo, hi) = CONSTRAINTS[constraint]
    lower, upper = np.array([lo]), np.array([hi])
    alpha, l1_ratio = (0.3, 0.5) if constraint != "box" else (0.0, 0.0)
    p = d + 1 if fit_intercept else d
    args = (LOSS_CODES[loss], PARAM.get(loss, 0.0), 0.8, 5, 0.7)
    tail = (alpha, l1_ratio, kind, radius, lower, upper, fit_intercept)
    for spacing in (0.0, 2.0 ** -20):
        noise = 0.05 * rng.standard_normal((13, p))
        if spacing:
            noise = np.rint(noise / spacing)
        theta0 = np.zeros(d + 1)
        theta0[:p] = np.clip(0.1 * rng.standard_normal(p), lo, hi) if kind == BOX else 0.0
        ref = theta0.copy()
        s_ref = dense_cyclic_sgd_steps(X, y, ref, np.arange(n), 3, *args, noise, *tail, spacing)
        fast = theta0.copy()
        s = dense_sequential_cyclic_sgd_steps(X, norms, y, fast, 3, *args, noise[:4], *tail,
                                              spacing)
        s = dense_sequential_cyclic_sgd_steps(X, norms, y, fast, s, *args, noise[4:], *tail,
                                              spacing)
        np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-12)
        assert s == s_ref
    with pytest.raises(ValueError):
        dense_sequential_cyclic_sgd_steps(X, norms[:-1], y, fast, 0, *args, noise, *tail)


@pytest.mark.parametrize("softmax", [True, False])
def test_multiclass_margins_beyond_float64_give_finite_steps(softmax):
    """A margin that overflows float64 (huge iterate, bounded row) is the limit of the
    loss derivative (softmax: p uniform over the infinite margins), not NaN."""
    n, d, k = 6, 3, 3
    X = np.full((n, d), 0.5)
    y = np.arange(n) % k
    theta = np.zeros((k, d + 1))
    theta[0, :d] = 1e308  # z_0 = 1.5e308 overflows; z_1 = z_2 = 0
    theta[1, :d] = -1e308
    theta = theta.ravel()
    one = np.ones(1)
    code = LOSS_CODES["logistic" if softmax else "sigmoid"]
    dense_multiclass_cyclic_sgd_steps(X, y, theta, k, np.arange(n), 0, code, softmax, 0.0,
                                      1.0, 3, 0.1, np.zeros((2, k * (d + 1))), 0.0, 0.0,
                                      NO_CONSTRAINT, 0.0, one, one, True)
    assert np.all(np.isfinite(theta))
    assert theta[2 * (d + 1) + d] != 0.0  # class 2 learned from its own rows


@pytest.mark.parametrize("loss", sorted(set(LOSS_CODES) - {"hinge"}))
@pytest.mark.parametrize("constraint", sorted(CONSTRAINTS))
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_permuted_steps_are_the_gathered_steps(loss, constraint, fit_intercept):
    """Bounding each row at its visit gives the steps of the gathered copy (equal to
    rounding; on the noise grid, equal), with rows above the bound, a zero row and
    rows whose sum of squares over- or underflows (the cold path)."""
    X, y, rng = _problem(loss, n=29, d=7)
    X[4] *= 5.0  # well above the bound
    X[6] = 0.0
    X[9] *= 1e160  # ‖x‖² overflows: bounding_scale_nb's overflow path
    X[11] *= 1e-170  # ‖x‖² underflows
    n, d = X.shape
    order = rng.permutation(n)
    R = 1.5
    Xg, norms = dense_gather_bounded_rows(X, order, R, np.empty((n, d)), np.empty(n))
    yk = y[order]
    kind, radius, (lo, hi) = CONSTRAINTS[constraint]
    lower, upper = np.array([lo]), np.array([hi])
    alpha, l1_ratio = (0.3, 0.5) if constraint != "box" else (0.0, 0.0)
    p = d + 1 if fit_intercept else d
    args = (LOSS_CODES[loss], PARAM.get(loss, 0.0), 0.8, 5, 0.7)
    tail = (alpha, l1_ratio, kind, radius, lower, upper, fit_intercept)
    for spacing in (0.0, 2.0 ** -20):
        noise = 0.05 * rng.standard_normal((13, p))
        if spacing:
            noise = np.rint(noise / spacing)
        theta0 = np.zeros(d + 1)
        theta0[:p] = np.clip(0.1 * rng.standard_normal(p), lo, hi) if kind == BOX else 0.0
        ref = theta0.copy()
        s_ref = dense_sequential_cyclic_sgd_steps(Xg, norms, yk, ref, 3, *args, noise, *tail,
                                                  spacing)
        got = theta0.copy()
        s = dense_permuted_cyclic_sgd_steps(X, order, R, yk, got, 3, *args, noise[:4],
                                            *tail, spacing)
        s = dense_permuted_cyclic_sgd_steps(X, order, R, yk, got, s, *args, noise[4:],
                                            *tail, spacing)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
        assert s == s_ref
    with pytest.raises(IndexError):
        dense_permuted_cyclic_sgd_steps(X, np.full(n, n), R, yk, got, 0, *args, noise,
                                        *tail)


def test_permuted_steps_bound_every_contribution():
    """One step from θ = 0 without noise: the update is −λ/b times the clipped sum of
    the bounded rows' gradients, each of norm at most C (rows far above the bound)."""
    rng = np.random.default_rng(5)
    n, d = 8, 5
    X = rng.standard_normal((n, d)) * 1e6
    y = np.ones(n)
    theta = np.zeros(d + 1)
    noise = np.zeros((1, d + 1))
    code = LOSS_CODES["squared"]
    dense_permuted_cyclic_sgd_steps(X, np.arange(n), 1.0, y, theta, 0, code, 0.0, 0.5, n,
                                    1.0, noise, 0.0, 0.0, NO_CONSTRAINT, 0.0, np.zeros(1),
                                    np.zeros(1), True)
    # Each term is clipped to norm C = 0.5 in (w, b); the mean of n of them too.
    assert np.linalg.norm(theta) <= 0.5 * (1 + 1e-12)
    Xb = bound_rows_l2(X, 1.0)
    expected = np.zeros(d + 1)
    for x in Xb:  # squared loss at θ = 0, y = 1: ℓ' = −1, g = −(x, 1), clipped to C
        g = -np.append(x, 1.0)
        expected -= g * min(1.0, 0.5 / np.linalg.norm(g)) / n
    np.testing.assert_allclose(theta, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("n", [1, 3, 43])
def test_gather_groups_of_four_and_the_tail(n):
    """The gather copies four rows per loop and the remaining n mod 4 one by one: every
    row, wherever it falls, is bound_rows_l2's, with its norm; a row that overflows in
    a group takes the one-row path without disturbing the other three."""
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, 9)) * rng.uniform(0.1, 3.0, (n, 1))
    X[n // 2] *= 1e300
    order = rng.permutation(n)
    for R in (1.0, 0.0, 50.0):
        out, norms = dense_gather_bounded_rows(X, order, R, np.empty((n, 9)), np.empty(n))
        expected = bound_rows_l2(X, R, order=order)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(norms, [l2_norm_nb(row) for row in expected])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_permuted_steps_report_a_non_finite_row_wherever_it_is(bad):
    """The one- and two-pass dense path checks finiteness in the pass that reads the
    rows (the estimator no longer reads X once more for it): a NaN or ±inf entry in
    any row, at any position of a batch (groups of four and the tail), gives -1 within
    one pass of ⌈n/b⌉ steps; a finite row whose squares overflow does not."""
    X, y, rng = _problem("logistic", n=29, d=7)
    n, d = X.shape
    order = rng.permutation(n)
    args = (LOSS_CODES["logistic"], 0.0, 0.8)
    tail = (0.0, 0.0, NO_CONSTRAINT, 0.0, np.zeros(1), np.zeros(1), True)
    for batch in (1, 4, 6):
        steps = -(-n // batch)
        for row in range(n):
            Xb = X.copy()
            Xb[row, row % d] = bad
            got = dense_permuted_cyclic_sgd_steps(Xb, order, 1.0, y[order], np.zeros(d + 1),
                                                  0, *args, batch, 0.5,
                                                  np.zeros((steps, d + 1)), *tail)
            assert got == -1
    Xh = X.copy()
    Xh[3] = 1e200  # finite: the cold path, not an error
    theta = np.zeros(d + 1)
    got = dense_permuted_cyclic_sgd_steps(Xh, order, 1.0, y[order], theta, 0, *args, 6, 0.5,
                                          np.zeros((5, d + 1)), *tail)
    assert got == 30 % n and np.all(np.isfinite(theta))
