"""Where the certified solver's L-BFGS phase stops (skdpsparse/_solvers/erm.py):
at the first evaluated point that carries the certificate, trial points of the line
search included, and at the rounding floor of F, where Newton-CG takes over."""

import math
import zlib

import numpy as np

from skdpsparse._solvers import erm


class _Quadratic:
    """F(θ) = ½θᵀHθ − bᵀθ, optionally with an error in [0, ``f_step``) that depends
    on the point (as the rounding of a sum over 10⁷ rows does: a floor the line
    search cannot see below, where it finds spurious decreases and goes on), exact
    gradients, and a log of every evaluation's gradient norm."""

    def __init__(self, p=8, f_step=0.0, seed=0):
        rng = np.random.default_rng(seed)
        A = rng.standard_normal((p, p))
        self.H = A @ A.T / p + 0.05 * np.eye(p)
        self.b = rng.standard_normal(p)
        self.p, self.alpha, self.f_step = p, 0.05, f_step
        self.norms, self.hvps = [], 0

    def fge(self, theta):
        grad = self.H @ theta - self.b
        value = 0.5 * theta @ self.H @ theta - self.b @ theta
        if self.f_step:
            value += self.f_step * zlib.crc32(theta.tobytes()) / 2**32
        self.norms.append(float(np.linalg.norm(grad)))
        return value, grad, (0.0, 0.0)

    def hvp_at(self, theta):
        def hvp(v):
            self.hvps += 1
            return self.H @ v
        return hvp


def test_lbfgs_stops_at_the_first_certified_evaluation():
    problem = _Quadratic()
    target = 1e-3 * np.linalg.norm(problem.b)
    theta, grad, _, _ = erm._lbfgs(problem.fge, np.zeros(problem.p),
                                   lambda r2, r1: r2 <= target, 1000)
    first = next(i for i, g in enumerate(problem.norms) if g <= target)
    assert len(problem.norms) == first + 1  # no evaluation after the certified one
    assert np.linalg.norm(grad) <= target
    np.testing.assert_allclose(problem.H @ theta - problem.b, grad)


def test_an_uncertified_run_returns_its_smallest_residual():
    # Stopped by max_iter short of the certificate, L-BFGS hands Newton-CG the
    # evaluated point whose residual is the smallest (L-BFGS's gradient norm is not
    # monotone: the last iterate is often not that point).
    problem = _Quadratic(seed=3)
    theta, grad, _, _ = erm._lbfgs(problem.fge, np.zeros(problem.p),
                                   lambda r2, r1: False, 3)
    assert np.linalg.norm(grad) == min(problem.norms)
    np.testing.assert_allclose(problem.H @ theta - problem.b, grad)
    assert problem.norms[-1] > min(problem.norms)  # the last evaluation was not it


def test_at_the_floor_of_f_lbfgs_hands_over_to_newton_and_certifies():
    # F known to 1e-9: below a gradient norm of about 1e-5 the line search only sees
    # rounding. L-BFGS stops after _FLOOR_PATIENCE evaluations without a decrease
    # beyond it (28-31 evaluations on seeds 0-2, where the former run, stopped only
    # by the line search's give-up, made 56-79 to reach the same gradient norm) and
    # Newton-CG (gradients only) certifies a residual of 1e-12.
    problem = _Quadratic(f_step=1e-9, seed=1)
    target = 1e-12
    accept = lambda r2, r1: r2 <= target  # noqa: E731
    theta, _, _, _ = erm._lbfgs(problem.fge, np.zeros(problem.p), accept, 1000)
    stopped_at = len(problem.norms)
    assert np.linalg.norm(problem.H @ theta - problem.b) > target  # not certified...
    assert stopped_at <= 40  # ...and stopped, not left to the line search's give-up
    theta, info = erm._solve(problem, None, float(np.linalg.norm(problem.H, 2)), accept,
                             1000, None)
    assert info["certified_by"] == "residual"
    assert np.linalg.norm(problem.H @ theta - problem.b) <= target
    assert problem.hvps > 0  # Newton-CG finished the run


def test_the_floor_rule_does_not_cut_short_a_run_that_still_makes_progress():
    # From far away (F ≈ 10², first steps that overshoot and are backtracked from), a
    # certificate above the floor of F is reached by L-BFGS itself; one below it
    # (F's float64 rounding, about 1e-14 here) by the Newton-CG hand-over.
    for target, by_lbfgs in ((1e-6, True), (1e-11, False)):
        problem = _Quadratic(seed=2)
        accept = lambda r2, r1, t=target: r2 <= t  # noqa: E731
        _, grad, _, _ = erm._lbfgs(problem.fge, 10.0 * np.ones(problem.p), accept, 1000)
        assert (np.linalg.norm(grad) <= target) == by_lbfgs
        theta, info = erm._solve(problem, None, float(np.linalg.norm(problem.H, 2)),
                                 accept, 1000, 10.0 * np.ones(problem.p))
        assert info["certified_by"] == "residual"
        assert np.linalg.norm(problem.H @ theta - problem.b) <= target
