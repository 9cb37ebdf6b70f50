"""The per-block simplex projection of the declared one-hot sparse mean
(``project_blocks_simplex_nb``) against a plain NumPy reference."""

import numpy as np
import pytest

from skdpsparse._kernels.projections import project_blocks_simplex_nb


def _simplex_by_bisection(v, total):
    """Reference: the projection onto {w ≥ 0, Σw = total} is max(v − θ, 0) with θ the
    root of the decreasing g(θ) = Σ max(v − θ, 0) − total (the KKT conditions), found
    by bisection to machine precision: another algorithm than the kernel's sort."""
    lo, hi = float(v.min()) - total, float(v.max())  # g(lo) ≥ 0 ≥ g(hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.maximum(v - mid, 0.0).sum() > total:
            lo = mid
        else:
            hi = mid
    return np.maximum(v - 0.5 * (lo + hi), 0.0)


def _offsets(sizes):
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_each_block_matches_the_bisection_reference(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 60, size=rng.integers(1, 8))
    v = rng.normal(scale=rng.choice([1e-4, 0.1, 3.0]), size=int(sizes.sum()))
    v[rng.random(v.size) < 0.3] = 0.0  # ties, as a thresholded release has
    total = float(rng.choice([1e-3, 0.3, 1 / np.sqrt(7), 5.0]))
    got = project_blocks_simplex_nb(v.copy(), _offsets(sizes), total)
    off = _offsets(sizes)
    for b in range(sizes.size):
        block = slice(off[b], off[b + 1])
        ref = _simplex_by_bisection(v[block], total)
        np.testing.assert_allclose(got[block], ref, rtol=0, atol=1e-12 * (1 + total))
        assert got[block].min() >= 0.0
        assert got[block].sum() == pytest.approx(total, rel=1e-12)


def test_hand_computed_values():
    # Block 1: (0.5, 0.2, -0.1) onto sum 0.5: θ = 0.1, (0.4, 0.1, 0).
    # Block 2: a single entry is set to the total whatever it was.
    # Block 3: (0, 0) onto sum 1: the uniform point (0.5, 0.5) (θ = -0.5).
    v = np.array([0.5, 0.2, -0.1, -3.0, 0.0, 0.0])
    out = project_blocks_simplex_nb(v, np.array([0, 3, 4, 6], dtype=np.int64), 0.5)
    np.testing.assert_allclose(out, [0.4, 0.1, 0.0, 0.5, 0.25, 0.25], atol=1e-15)


def test_never_moves_away_from_a_point_of_the_set():
    """The block means of one-hot rows lie in the product of simplices, so the
    projection of any release is at least as close to them (the estimator's claim
    that a true declaration never increases the error)."""
    rng = np.random.default_rng(7)
    sizes = np.array([3, 40, 1, 17])
    off = _offsets(sizes)
    total = 0.5
    mu = np.concatenate([total * rng.dirichlet(np.full(k, 0.3)) for k in sizes])
    for _ in range(200):
        z = mu + rng.normal(scale=rng.choice([1e-3, 0.05, 1.0]), size=mu.size)
        p = project_blocks_simplex_nb(z.copy(), off, total)
        assert np.linalg.norm(p - mu) <= np.linalg.norm(z - mu) + 1e-12
