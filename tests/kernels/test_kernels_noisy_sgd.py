"""Kernels of noisy projected SGD (Arora et al. 2020, Algorithm 1) against a plain NumPy loop."""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse._kernels.linear_losses import (
    HINGE,
    HUBER,
    LOGISTIC,
    SMOOTHED_HINGE,
    SQUARED,
    loss_derivative,
)
from skdpsparse._kernels.noisy_sgd import csr_noisy_sgd_block, dense_noisy_sgd_block

PARAM = {SMOOTHED_HINGE: 0.7, HUBER: 0.4}


def reference_run(X, y, rows, noise, eta, radius, norm_bound, code, param, fit_intercept,
                  spacing=0.0):
    """Arora et al. 2020 Algorithm 1 step by step on dense float64 data; with ``spacing``
    γ > 0 the gradient is rounded to the grid γℤ and ``noise`` is in grid units."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    dim = d + int(fit_intercept)
    theta, fresh_sum = np.zeros(dim), np.zeros(dim)
    seen = set()
    target = (n + 1) // 2
    for t, i in enumerate(rows):
        step = noise[t].copy()
        if i not in seen:
            fresh_sum += theta
            x = X[i] * min(1.0, norm_bound / max(np.linalg.norm(X[i]), 1e-300))
            xbar = np.append(x, 1.0) if fit_intercept else x
            grad = loss_derivative(code, theta @ xbar, y[i], param) * xbar
            step += np.rint(grad / spacing) if spacing else grad
            seen.add(i)
        if spacing:
            step = spacing * step
        theta = theta - eta * step
        norm = np.linalg.norm(theta)
        if norm > radius:
            theta *= radius / norm
        if len(seen) >= target:
            return theta, fresh_sum, t + 1, len(seen)
    return theta, fresh_sum, len(rows), len(seen)


def _run_blocks(X, y, rows, noise, eta, radius, norm_bound, code, param, fit_intercept,
                cuts, spacing=0.0):
    """The kernel over ``rows`` split at ``cuts`` (the state carries across blocks)."""
    n, d = X.shape
    dim = d + int(fit_intercept)
    theta, fresh_sum = np.zeros(dim), np.zeros(dim)
    seen = np.zeros(n, dtype=bool)
    n_seen, total = 0, 0
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        args = (y, theta, fresh_sum, seen, n_seen, (n + 1) // 2, rows[lo:hi], noise[lo:hi],
                eta, radius, norm_bound, code, param, fit_intercept, spacing)
        if sp.issparse(X):
            used, n_seen = csr_noisy_sgd_block(X.indptr, X.indices, X.data, d, *args)
        else:
            used, n_seen = dense_noisy_sgd_block(X, *args)
        total += used
        if n_seen == (n + 1) // 2:
            break
        assert used == hi - lo
    return theta, fresh_sum, total, n_seen, seen


@pytest.mark.parametrize("code", [LOGISTIC, HINGE, SMOOTHED_HINGE, HUBER, SQUARED])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_kernel_matches_numpy_reference(code, fmt, dtype, fit_intercept):
    rng = np.random.default_rng(code * 7 + (fmt == "csr") + 3 * fit_intercept)
    n, d = 37, 9
    Xd = rng.standard_normal((n, d)) * rng.choice([0.3, 3.0], size=(n, 1))  # some outside
    Xd[rng.random((n, d)) < 0.5] = 0.0
    Xd[3] = 0.0  # an all-zero row
    Xd = Xd.astype(dtype)
    classification = code in (LOGISTIC, HINGE, SMOOTHED_HINGE)
    y = rng.choice([-1.0, 1.0], n) if classification else rng.uniform(-2, 2, n)
    steps = 400
    rows = rng.integers(0, n, steps)
    noise = rng.standard_normal((steps, d + int(fit_intercept))) * 0.5
    eta, radius, norm_bound, param = 0.3, 1.7, 1.1, PARAM.get(code, 1.0)
    ref = reference_run(Xd, y, rows, noise, eta, radius, norm_bound, code, param,
                        fit_intercept)
    X = sp.csr_matrix(Xd) if fmt == "csr" else Xd
    cuts = np.unique(np.r_[0, rng.integers(1, steps, 5), steps])  # several blocks
    theta, fresh_sum, n_steps, n_seen, seen = _run_blocks(
        X, y, rows, noise, eta, radius, norm_bound, code, param, fit_intercept, cuts)
    np.testing.assert_allclose(theta, ref[0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(fresh_sum, ref[1], rtol=0, atol=1e-10)
    assert (n_steps, n_seen) == ref[2:]
    assert n_seen == (n + 1) // 2 == seen.sum()
    assert np.linalg.norm(theta) <= radius * (1 + 1e-12)


def test_stopping_rule_on_many_seeds():
    """The run stops at the first step at which ⌈n/2⌉ distinct indices have been drawn."""
    for seed in range(300):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, 80))
        X = rng.standard_normal((n, 3))
        y = rng.choice([-1.0, 1.0], n)
        rows = rng.integers(0, n, 40 * n + 50)
        noise = rng.standard_normal((rows.size, 4))
        theta, fresh_sum = np.zeros(4), np.zeros(4)
        seen = np.zeros(n, dtype=bool)
        used, n_seen = dense_noisy_sgd_block(X, y, theta, fresh_sum, seen, 0, (n + 1) // 2,
                                             rows, noise, 0.1, 1.0, 1.0, LOGISTIC, 1.0, True)
        distinct = np.array([len(set(rows[: t + 1].tolist())) for t in range(used)])
        assert n_seen == (n + 1) // 2 == distinct[-1] == seen.sum()
        assert used == 1 or distinct[-2] == n_seen - 1  # not one step later
        assert set(np.flatnonzero(seen).tolist()) == set(rows[:used].tolist())


@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_rows_outside_the_bound_are_scaled_not_dropped(fmt):
    rng = np.random.default_rng(5)
    n, d = 30, 6
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)  # unit rows
    big = X * rng.uniform(2.0, 50.0, size=(n, 1))  # same directions, norms above 1
    y = rng.choice([-1.0, 1.0], n)
    rows = rng.integers(0, n, 500)
    noise = rng.standard_normal((500, d + 1))
    runs = []
    for data in (X, big):
        data = sp.csr_matrix(data) if fmt == "csr" else data
        runs.append(_run_blocks(data, y, rows, noise, 0.2, 2.0, 1.0, LOGISTIC, 1.0, True,
                                np.array([0, 500])))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=0, atol=1e-12)
    # ... and a row that is used does move the iterate (it is not rejected):
    zero_noise = np.zeros_like(noise)
    out = _run_blocks(big if fmt == "dense" else sp.csr_matrix(big), y, rows, zero_noise,
                      0.2, 2.0, 1.0, LOGISTIC, 1.0, True, np.array([0, 500]))
    assert np.linalg.norm(out[0]) > 0


def test_kernel_checks_its_arguments():
    X = np.zeros((4, 2))
    y = np.ones(4)
    ok = dict(theta=np.zeros(3), fresh_sum=np.zeros(3), seen=np.zeros(4, dtype=bool))

    def call(rows=np.array([0, 1]), noise=np.zeros((2, 3)), n_seen=0, target=2, **kw):
        a = {**ok, **kw}
        return dense_noisy_sgd_block(X, y, a["theta"], a["fresh_sum"], a["seen"], n_seen,
                                     target, rows, noise, 0.1, 1.0, 1.0, LOGISTIC, 1.0, True)

    assert call() == (2, 2)
    with pytest.raises(IndexError):
        call(rows=np.array([0, 4]))
    with pytest.raises(ValueError):
        call(noise=np.zeros((2, 2)))
    with pytest.raises(ValueError):
        call(theta=np.zeros(2))
    with pytest.raises(ValueError):
        call(n_seen=2, target=2)


@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_grid_release_matches_numpy_reference(fmt):
    # noise_spacing γ > 0: each fresh gradient is rounded to γℤ and the integer noise
    # added (mechanisms/noise.py); the reference does the same in NumPy.
    rng = np.random.default_rng(11)
    n, d = 41, 6
    Xd = rng.standard_normal((n, d))
    Xd[rng.random((n, d)) < 0.4] = 0.0
    y = rng.choice([-1.0, 1.0], n)
    rows = rng.integers(0, n, 300)
    spacing = 2.0**-12
    noise = np.rint(rng.standard_normal((300, d + 1)) * 300.0)  # integers, grid units
    X = sp.csr_matrix(Xd) if fmt == "csr" else Xd
    got = _run_blocks(X, y, rows, noise, 0.3, 2.0, 1.0, LOGISTIC, 0.0, True,
                      [0, 100, 300], spacing)
    want = reference_run(Xd, y, rows, noise, 0.3, 2.0, 1.0, LOGISTIC, 0.0, True, spacing)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-12)
    assert got[2:4] == want[2:4]


@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("code", [LOGISTIC, SQUARED, HUBER])
@pytest.mark.parametrize("spacing", [0.0, 2.0**-20])
def test_extreme_row_is_bounded_before_any_arithmetic(fmt, code, spacing):
    """Issue 17: a finite row of entries ±1.7e308 used to be multiplied into the margin
    raw and scaled afterwards: ⟨x, θ⟩ overflowed (inf, or inf − inf = NaN), its norm
    overflowed too (so s = R/‖x‖ = 0), and inf·0 = NaN reached θ. Bounded first, the
    row is R·x/‖x‖ and the run equals the run on that bounded row."""
    rng = np.random.default_rng(3)
    n, d = 6, 2
    X = rng.standard_normal((n, d))
    y = rng.choice([-1.0, 1.0], n)
    rows = np.array([1, 0, 2, 0, 3, 4, 5])  # θ ≠ 0 when row 0 is used
    noise = np.rint(rng.standard_normal((rows.size, d)) * 50) if spacing else \
        rng.standard_normal((rows.size, d))
    for extreme in ([1.7e308, 1.7e308], [1.7e308, -1.7e308], [-1e308, 1e308]):
        big = X.copy()
        big[0] = extreme
        bounded = X.copy()
        u = np.array(extreme) / 1.7e308
        bounded[0] = 1.0 * u / np.linalg.norm(u)  # R = 1
        runs = []
        for data in (big, bounded):
            data = sp.csr_matrix(data) if fmt == "csr" else data
            # θ starts at (2, 2)·sign: products x_j·θ_j overflow on their own.
            theta = 2.0 * np.sign(np.array(extreme))
            seen = np.zeros(n, dtype=bool)
            args = (y, theta, np.zeros(d), seen, 0, n, rows, noise, 0.3, 3.0, 1.0, code,
                    PARAM.get(code, 1.0), False, spacing)
            if fmt == "csr":
                csr_noisy_sgd_block(data.indptr, data.indices, data.data, d, *args)
            else:
                dense_noisy_sgd_block(data, *args)
            runs.append(theta)
        assert np.all(np.isfinite(runs[0])), (extreme, runs[0])
        np.testing.assert_allclose(runs[0], runs[1], rtol=0, atol=1e-12)
