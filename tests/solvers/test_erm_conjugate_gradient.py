"""The Newton polish's conjugate gradient (skdpsparse/_solvers/erm.py)."""

import numpy as np

from skdpsparse._solvers.erm import _conjugate_gradient


def test_conjugate_gradient_solves_a_positive_definite_system():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6))
    H = A @ A.T + 0.5 * np.eye(6)
    b = rng.standard_normal(6)
    x = _conjugate_gradient(lambda v: H @ v, b, 1e-12, 100)
    np.testing.assert_allclose(H @ x, b, atol=1e-9)


def test_conjugate_gradient_stops_where_the_curvature_vanishes_in_rounding():
    """q·Hq = 0 (an underflowed Hessian product at a degenerate scale) raised
    ZeroDivisionError out of the fit; it stops with the current iterate instead, and
    the certificate decides what that is worth."""
    b = np.array([1e-200, -2e-200])
    x = _conjugate_gradient(lambda v: np.zeros_like(v), b, 1e-3, 50)
    assert np.array_equal(x, np.zeros(2))
    x = _conjugate_gradient(lambda v: np.full_like(v, np.nan), b, 1e-3, 50)
    assert np.array_equal(x, np.zeros(2))
