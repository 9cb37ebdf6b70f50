"""Gaussian ℓ1-recovery (seed 002 Algorithm 2): sensitivity, branches, accuracy."""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse.accounting import gaussian_sigma_classic
from skdpsparse.accounting.discrete import discrete_gaussian_sigma
from skdpsparse.datasets import make_sparse_vectors
from skdpsparse.mechanisms.l1_recovery import (
    gaussian_l1_recovery, measurement_noise_sigma, n_measurements, uses_compressed_sensing,
)
from skdpsparse.mechanisms.projection import bounded_mean, row_bounds
from skdpsparse.mechanisms.sensing import SubsampledHadamardSensing
from skdpsparse.mechanisms.sparse_mean import predicted_error
from skdpsparse import _kernels


def test_measurements_follow_the_seed():
    n, d, s, eps, delta = 10_000, 10**7, 10, 1.0, 1e-6
    m = n_measurements(n, d, s, eps, delta)
    assert m == int(np.ceil(n * eps * np.sqrt(s * np.log(d / s) / np.log(1 / delta))))
    assert uses_compressed_sensing(d, m)
    assert not uses_compressed_sensing(10**5, m)


def test_noise_scale_classic_is_the_seeds_and_analytic_is_smaller():
    n, L, eps, delta = 1000, 1.5, 0.8, 1e-6
    classic = measurement_noise_sigma(n, epsilon=eps, delta=delta, norm_bound=L,
                                      calibration="classic")
    # Algorithm 2: σ² = 18 L² ln(2.5/δ) / (nε)².
    assert classic**2 == pytest.approx(18 * L**2 * np.log(2.5 / delta) / (n * eps) ** 2,
                                       rel=1e-12)
    analytic = measurement_noise_sigma(n, epsilon=eps, delta=delta, norm_bound=L)
    assert analytic == discrete_gaussian_sigma(3 * L / n, eps, delta) < classic
    assert gaussian_sigma_classic(3 * L / n, eps, delta / 2) == pytest.approx(classic)


def _clipped_sum(op, X, L, s):
    l2, l1 = row_bounds(L, s)
    X = sp.csr_matrix(X)
    scales = _kernels.csr_bounding_scales(X.indptr, X.data, l2, l1)
    total, _ = op.clipped_measurement_sum(X, scales, 1.5 * L)
    return np.asarray(total)


def test_measurement_sensitivity_holds_for_adversarial_neighbours():
    """Replacing one row moves the averaged measurements by ≤ 3L/n for any A."""
    rng = np.random.default_rng(0)
    n, d, s, L = 50, 4096, 4, 1.0
    X, _ = make_sparse_vectors(n, d, s, random_state=1)
    X = X.tolil()
    # A tiny m makes A far from an isometry, so the clipping is what must save us.
    op = SubsampledHadamardSensing(d, 3, rng)
    base = _clipped_sum(op, X, L, s) / n
    worst = 0.0
    for trial in range(200):
        Y = X.copy()
        row = np.zeros(d)
        cols = rng.choice(d, size=s, replace=False)
        row[cols] = rng.normal(size=s) * 10.0 ** rng.uniform(-2, 6)
        Y[trial % n] = row
        worst = max(worst, np.linalg.norm(_clipped_sum(op, Y, L, s) / n - base))
    assert worst <= 3 * L / n * (1 + 1e-12)
    assert worst > 0.5 * L / n  # the test exercises large changes


def test_below_threshold_is_the_plain_gaussian_mechanism():
    X, _ = make_sparse_vectors(500, 300, 4, random_state=0)
    z, budget, info = gaussian_l1_recovery(
        X, epsilon=1.0, delta=1e-6, norm_bound=1.0, sparsity=4,
        rng=np.random.default_rng(3))
    assert info["branch"] == "gaussian"
    noise = z - bounded_mean(X, 1.0, 4)
    sigma = discrete_gaussian_sigma(2.0 / 500, 1.0, 1e-6)
    assert np.std(noise) == pytest.approx(sigma, rel=0.1)


def test_compressed_sensing_branch_accuracy():
    """Error within the Theorem 3.4 bound (explicit constants, hidden ones = 1)."""
    n, d, s, eps, delta = 200, 2**16, 4, 1.0, 1e-6
    m = n_measurements(n, d, s, eps, delta)
    assert uses_compressed_sensing(d, m)
    X, _ = make_sparse_vectors(n, d, s, column_distribution="power_law", random_state=0)
    target = bounded_mean(X, 1.0, s)
    bound = predicted_error("l1_recovery", n, d, s, eps, delta)
    errors = []
    for seed in range(20):
        z, _, info = gaussian_l1_recovery(X, epsilon=eps, delta=delta, norm_bound=1.0,
                                          sparsity=s, rng=np.random.default_rng(seed))
        assert info["branch"] == "compressed_sensing"
        errors.append(np.linalg.norm(z - target))
    assert np.mean(np.array(errors) <= bound) >= 0.95


def test_sensing_operator_comes_from_a_public_stream_apart_from_the_noise(monkeypatch):
    # The operator may be published: it is drawn from a generator whose seed is a
    # one-way function of the fit's key (RandomSource.public_generator), never from the
    # stream the noise is drawn from, so publishing it reveals nothing about the noise.
    import skdpsparse.mechanisms.l1_recovery as module
    from skdpsparse.utils import RandomSource

    built = []

    class Spy(SubsampledHadamardSensing):
        def __init__(self, d, m, rng):
            super().__init__(d, m, rng)
            built.append(self)

    monkeypatch.setattr(module, "SubsampledHadamardSensing", Spy)
    X, _ = make_sparse_vectors(100, 1 << 14, 4, random_state=0)
    key = bytes(range(32))
    z1, _, info = gaussian_l1_recovery(X, epsilon=1.0, delta=1e-6, norm_bound=1.0,
                                       sparsity=4, rng=RandomSource(key), max_iter=5)
    assert info["branch"] == "compressed_sensing"
    op = built[0]
    again = SubsampledHadamardSensing(op.n_features, op.n_measurements,
                                      RandomSource(key).public_generator("sensing operator"))
    np.testing.assert_array_equal(op.signs, again.signs)
    np.testing.assert_array_equal(op.omega, again.omega)


def test_the_float_rounding_of_the_measurement_mean_is_charged(monkeypatch):
    # The noise is planned for the computed mean's sensitivity, not only the exact
    # 3L/n: release_measurements passes measurement_mean_sensitivity (the sum's and the
    # division's rounding, Higham 2002 eq. 4.4) as true_sensitivity. Before, it passed
    # none, and the rounding of an n-term float sum went uncharged.
    from skdpsparse.mechanisms import l1_recovery as l1

    n, m, L = 10**6, 512, 2.0
    u = 2.0**-53
    c = 1.5 * L * (1 + (m + 4) * 2 * u)
    gamma = (n - 1) * u / (1 - (n - 1) * u)
    want = (2 * c / n + 2 * gamma * c + 2 * u * n * c * (1 + gamma) / n) * (1 + 2.0**-40)
    got = l1.measurement_mean_sensitivity(n, m, L)
    assert got == pytest.approx(want, rel=1e-12) and got > 3 * L / n
    seen = {}

    def spy(values, rng, kind, scale, *, sensitivity, true_sensitivity=None, **kw):
        seen.update(sensitivity=sensitivity, true=true_sensitivity)
        return values

    monkeypatch.setattr(l1, "add_noise_inplace", spy)
    op = SubsampledHadamardSensing(64, 16, rng=np.random.default_rng(0))
    l1.release_measurements(np.zeros(16), 1000, op, epsilon=1.0, delta=1e-6,
                            norm_bound=1.0, rng=np.random.default_rng(0))
    assert seen["true"] == l1.measurement_mean_sensitivity(1000, 16, 1.0)
    assert seen["true"] > seen["sensitivity"]
