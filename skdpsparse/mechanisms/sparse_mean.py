"""Choosing and running a private sparse-mean method from public quantities only.

``predicted_error`` evaluates the high-probability error bounds of seed 002
(Theorems 3.2, 3.3, 3.4) with the constants their proofs make explicit and the hidden
absolute constants set to 1, at failure probability β. It reads only (n, d, s, ε, δ, L),
never the data, so choosing a method by it costs no privacy.
"""

import numpy as np

from .l1_recovery import (
    gaussian_l1_recovery, measurement_noise_sigma, n_measurements, uses_compressed_sensing,
)
from .projection import bounded_mean, mean_noise, projection_mechanism

METHODS = ("projection", "l1_recovery", "gaussian", "laplace")


def predicted_error(method, n, d, sparsity, epsilon, delta, norm_bound=1.0,
                    beta=0.05, calibration="analytic"):
    """Bound on the ℓ2 error of ``method`` holding with probability ≈ 1 − β.

    * Dense noise (gaussian / laplace; Fact 2.4): Gaussian ‖ξ‖₂ ≤ σ(√d + √(2 ln 1/β));
      Laplace ‖ξ‖₂ ≤ b(√(2d) + ln(1/β)).
    * projection (Lemma 3.1): min(dense, √(2L√s‖ξ‖∞)) with ‖ξ‖∞ ≤ σ√(2 ln(2d/β))
      (Gaussian) or b ln(d/β) (Laplace), and at most 2L after the ℓ2-ball step.
    * l1_recovery (Thm 3.4): the Gaussian bound below d < m ln² m; above,
      σ'(√m + √(2 ln 1/β)) + L√(s ln(d/s)/m), σ' the measurement noise.
    """
    s = min(float(sparsity), d)
    L = float(norm_bound)
    if method == "l1_recovery":
        if delta == 0:
            return np.inf
        m = n_measurements(n, d, s, epsilon, delta)
        if not uses_compressed_sensing(d, m):
            return predicted_error("gaussian", n, d, s, epsilon, delta, L, beta, calibration)
        sigma_m = measurement_noise_sigma(
            n, epsilon=epsilon, delta=delta, norm_bound=L, calibration=calibration)
        approx = L * np.sqrt(s * np.log(max(d / s, np.e)) / m)
        # The norm test caps the output at 2L, so the error is at most 3L.
        return min(sigma_m * (np.sqrt(m) + np.sqrt(2 * np.log(1 / beta))) + approx, 3.0 * L)
    if method == "laplace" or (method == "projection" and delta == 0):
        if method == "laplace" and delta != 0:
            return np.inf
        _, b, _ = mean_noise(n, epsilon=epsilon, delta=0, norm_bound=L, sparsity=s)
        dense = b * (np.sqrt(2 * d) + np.log(1 / beta))
        linf = b * np.log(d / beta)
    elif method in ("gaussian", "projection"):
        if delta == 0:
            return np.inf
        _, sigma, _ = mean_noise(n, epsilon=epsilon, delta=delta, norm_bound=L,
                                 sparsity=s, calibration=calibration)
        dense = sigma * (np.sqrt(d) + np.sqrt(2 * np.log(1 / beta)))
        linf = sigma * np.sqrt(2 * np.log(2 * d / beta))
    else:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    if method in ("gaussian", "laplace"):
        return dense
    return min(dense, np.sqrt(2 * L * np.sqrt(s) * linf), 2 * L)


def choose_method(n, d, sparsity, epsilon, delta, norm_bound=1.0, calibration="analytic"):
    """The method with the smallest :func:`predicted_error` (data-independent)."""
    # The projection is listed first: it never does worse than its dense noise
    # (projection onto a convex set containing the mean), so it wins ties.
    candidates = ("projection", "laplace") if delta == 0 else \
        ("projection", "gaussian", "l1_recovery")
    errors = {m: predicted_error(m, n, d, sparsity, epsilon, delta, norm_bound,
                                 calibration=calibration) for m in candidates}
    return min(errors, key=errors.get)


def private_sparse_mean(X, method, *, epsilon, delta, norm_bound, sparsity, rng,
                        calibration="analytic", recovery="denoising", max_iter=500,
                        tol=1e-4):
    """Run one of :data:`METHODS` on the rows of ``X``; returns (estimate, budget, info)."""
    n = X.shape[0]
    if method == "l1_recovery":
        return gaussian_l1_recovery(
            X, epsilon=epsilon, delta=delta, norm_bound=norm_bound, sparsity=sparsity,
            rng=rng, calibration=calibration, recovery=recovery, max_iter=max_iter,
            tol=tol)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    if method == "laplace" and delta != 0:
        raise ValueError("method='laplace' is the pure-DP baseline: set delta=0.")
    if method == "gaussian" and delta == 0:
        raise ValueError("method='gaussian' needs delta > 0.")
    mean = bounded_mean(X, norm_bound, sparsity)
    z, budget = projection_mechanism(
        mean, n, epsilon=epsilon, delta=delta, norm_bound=norm_bound, sparsity=sparsity,
        rng=rng, calibration=calibration, project=(method == "projection"))
    return z, budget, {"branch": method}
