"""The cell score of the tail draws of the located interval
(``heavy_tailed_clip.tail_cell_distance``, issue 19's fourth round): the score against
brute force, its sensitivity (a replaced row moves every score by at most 1, the Δ_u
the draws are charged for) with a broken variant of sensitivity 2 that the check
catches, and the failure it removes (a quantile inside an atom between grid points:
the point score's draws wander above a top-coded maximum, the broken variant)."""

import numpy as np
import pytest

from skdpsparse.mechanisms import heavy_tailed_clip as C
from skdpsparse.mechanisms.quantile import geometric_grid, private_quantiles, rank_counts


def _counts(x, grid):
    return C._column_counts(np.asarray(x, dtype=np.float64), grid)


def _brute(x, grid, r, upper):
    """dist(r, ranks of the cell each point closes), from the sorted values."""
    x = np.sort(x)
    out = []
    for k in range(grid.size):
        if upper:  # the cell (g_{k-1}, g_k]
            lo = np.count_nonzero(x <= grid[k - 1]) if k else 0
            hi = np.count_nonzero(x <= grid[k])
        else:  # the cell [g_k, g_{k+1})
            lo = np.count_nonzero(x < grid[k])
            hi = np.count_nonzero(x < grid[k + 1]) if k + 1 < grid.size else x.size
        out.append(max(0, lo - r, r - hi))
    return np.array(out)


def _columns():
    rng = np.random.default_rng(0)
    yield rng.standard_t(3, size=500)
    yield np.minimum(np.floor(rng.pareto(2.0, size=500) * 10), 60.0)  # atoms, a cap
    yield np.full(500, 3.0)  # one atom between grid points


@pytest.mark.parametrize("upper", [False, True])
def test_the_cell_score_matches_brute_force(upper):
    grid = geometric_grid(-4, 8, 4)
    for x in _columns():
        below, at_most = _counts(x, grid)
        for r in (0, 1, 7, 250, 493, 499, 500):
            got = C.tail_cell_distance(below, at_most, r, x.size, upper)
            np.testing.assert_array_equal(got, _brute(x, grid, r, upper))
            # 0 at the quantile rounded outwards to the grid (when it has such a point)
            value = np.sort(x)[max(r, 1) - 1]
            k = (np.searchsorted(grid, value, side="left") if upper
                 else np.searchsorted(grid, value, side="right") - 1)
            if 0 <= k < grid.size:
                assert got[k] == 0


def _point_plus_cell(below, at_most, r, n, upper):
    """Broken variant: the point score plus the cell score (sensitivity 2, so the draws
    at ε_q would be 2ε_q-DP)."""
    point = np.maximum(below - r, 0) + np.maximum(r - at_most, 0)
    return point + C.tail_cell_distance(below, at_most, r, n, upper)


@pytest.mark.parametrize("upper", [False, True])
def test_a_replaced_row_moves_every_cell_score_by_at_most_one(upper):
    """The Δ_u = 1 the plan charges each draw for: replace each of several rows by
    values below, inside and above the data, atoms and ±1e300; the largest move is
    exactly 1, and the broken score (point + cell) moves by 2."""
    grid = np.unique(np.concatenate([geometric_grid(), 0.4 + geometric_grid()]))
    grid = grid[np.isfinite(grid)]
    worst, worst_broken = 0, 0
    for x in _columns():
        n = x.size
        base = _counts(x, grid)
        for i in (0, int(np.argmax(x)), int(np.argmin(x))):
            for new in (-1e300, -3.0, 0.0, 3.0, 60.0, float(np.median(x)), 1e300):
                y = x.copy()
                y[i] = new
                moved = _counts(y, grid)
                for r in (1, 20, 250, 480, 499):
                    a = C.tail_cell_distance(*base, r, n, upper)
                    b = C.tail_cell_distance(*moved, r, n, upper)
                    worst = max(worst, int(np.abs(a - b).max()))
                    a = _point_plus_cell(*base, r, n, upper)
                    b = _point_plus_cell(*moved, r, n, upper)
                    worst_broken = max(worst_broken, int(np.abs(a - b).max()))
    assert worst == 1
    assert worst_broken == 2


def test_a_quantile_inside_a_top_coded_atom_is_drawn_at_the_atom():
    """Log-normal(8, 1) top-coded at 2·10⁴ (2.8 % of the rows at the cap, both upper
    levels inside the atom), n = 10⁵, the plan of ε = 2: with the cell score the upper
    inner and outer draws are the first grid point above the cap in 8 of 8 seeds
    (measured); with the point score (the broken variant, the rule before) no point
    scores 0, every point above the cap scores only the atom's share worse, and the
    inner draw lands above 4·10⁴ in 4 of 8 (measured; up to 7.4·10⁵)."""
    X = np.minimum(np.random.default_rng(10_001).lognormal(8.0, 1.0, size=(100_000, 1)), 2e4)
    plan = C.plan_quantile_clipped_mean(*X.shape, epsilon=2.0, delta=1e-6)
    grid = geometric_grid()
    med = grid[[np.argmin(np.abs(grid - np.median(X)))]]
    grids = C.union_grids(grid, med)
    counts = C.union_column_counts(X, grids)
    above_cap = grids[0][np.searchsorted(grids[0], 2e4)]

    def upper_draws(cells):
        return np.array([[d[1, 0] for d in C.union_tail_draws(
            counts, grids, med, X.shape[0], plan.level, plan.quantile_epsilon,
            np.random.default_rng(s), cells=cells)] for s in range(8)])

    cells = upper_draws(True)
    assert np.all(cells <= above_cap * 1.001)
    assert np.count_nonzero(upper_draws(False)[:, 0] > 4e4) >= 2


def test_the_default_rounds_its_tail_draws_outwards():
    """The located interval draws with the cell score: the same seed gives the same
    releases as union_tail_draws with ``cells=True``."""
    X = np.random.default_rng(3).standard_t(3, size=(20_000, 2))
    for cells in (True,):
        plan = C.plan_quantile_clipped_mean(*X.shape, epsilon=8.0, delta=1e-6)
        assert not plan.shared
        _, _, q = C._located_interval(X, plan, np.random.default_rng(1))
        rng = np.random.default_rng(1)
        grid = plan.grid
        counts = (rank_counts(X, grid, strict=True), rank_counts(X, grid))
        med = private_quantiles(C._Rows(*X.shape), [0.5], epsilon_each=plan.quantile_epsilon,
                                rng=rng, grid=grid, counts=counts)
        grids = C.union_grids(grid, med[0])
        inner, outer = C.union_tail_draws(C.union_column_counts(X, grids), grids, med[0],
                                          X.shape[0], plan.level, plan.quantile_epsilon,
                                          rng, cells=cells)
        np.testing.assert_array_equal(q, np.vstack([outer[:1], inner[:1], med, inner[1:],
                                                    outer[1:]]))
