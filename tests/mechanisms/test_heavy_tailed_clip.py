"""The located clipped mean (``mechanisms/heavy_tailed_clip.py``, issue 19): the tail
quantiles drawn on grids shifted by the released median, the floor at the outer
quantile, and the plan's budget against the theorem by hand, with broken variants
(the public grid alone on a column whose tail crosses 0; the shifted grid alone on a
tail piled up above 0; a plan with half the mean's noise) that the checks catch."""

import dataclasses
import math

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse.accounting import approx_dp_to_zcdp
from skdpsparse.datasets import make_heavy_tailed
from skdpsparse.mechanisms import heavy_tailed_clip as C
from skdpsparse.mechanisms.noise import plan_grid_noise
from skdpsparse.mechanisms.quantile import geometric_grid, quantile_epsilon, rank_counts
from skdpsparse.utils import RandomSource


# ------------------------------------------------------------ counts of deviations
@pytest.mark.parametrize("sparse", [False, True])
def test_rank_counts_of_deviations_match_brute_force(sparse):
    rng = np.random.default_rng(0)
    X = rng.standard_t(2, size=(300, 4)) * (rng.random((300, 4)) < 0.4)
    shift = np.array([0.0, 0.7, -1.3, 5.0])
    grid = geometric_grid(-3, 3, 2)
    data = sp.csr_matrix(X) if sparse else X
    for strict in (False, True):
        got = rank_counts(data, grid, strict=strict, shift=shift)
        dev = X - shift
        cmp = np.less if strict else np.less_equal
        np.testing.assert_array_equal(got, cmp(dev[:, :, None], grid).sum(axis=0))
    with pytest.raises(ValueError, match="shift"):
        rank_counts(data, grid, shift=[0.0, np.nan, 0.0, 0.0])


def test_a_replaced_row_moves_every_deviation_count_by_at_most_one():
    """The sensitivity the draws rely on: the shift is a release (the same on both
    datasets), so each row's contribution is a function of the row alone."""
    rng = np.random.default_rng(1)
    X = rng.standard_t(3, size=(200, 3))
    Y = X.copy()
    Y[7] = [1.7e308, -1.7e308, 0.0]
    grid, shift = geometric_grid(), np.array([0.2, -0.1, 3.0])
    for strict in (False, True):
        a = rank_counts(X, grid, strict=strict, shift=shift)
        b = rank_counts(Y, grid, strict=strict, shift=shift)
        assert np.abs(a - b).max() == 1


# ---------------------------------------------------------------- the tail rule
def test_the_floor_keeps_the_clip_at_or_beyond_the_outer_quantile():
    """Hand case: a steep fitted tail (t_out = 2.1, t_in = 2, index ln 4/ln 1.05 ≈ 28)
    and a large noise per unit of width. Without the floor the narrowest candidate,
    C = t_in, wins; with it the interval is [m − t_out, m + t_out] exactly."""
    q = np.array([[-2.1], [-2.0], [0.0], [2.0], [2.1]])
    lo, hi = C.extrapolated_interval(q, 0.01, 1.0)
    assert (lo[0], hi[0]) == (-2.0, 2.0)
    lo, hi = C.extrapolated_interval(q, 0.01, 1.0, floor=True)
    assert (lo[0], hi[0]) == (-2.1, 2.1)


def _clipped_rows(tails, seed=0):
    X = make_heavy_tailed(10_000, 10, distribution="pareto", tail_parameter=3.0,
                          random_state=seed)[0] + 0.5
    est, _, info = C.private_quantile_clipped_mean(
        X, epsilon=4.0, delta=1e-6, rng=np.random.default_rng(seed), tails=tails)
    rows = np.maximum((X < info["lower"]).sum(axis=0), (X > info["upper"]).sum(axis=0))
    return rows.max(), info["level"] * X.shape[0]


@pytest.mark.parametrize("tails", ["union", "deviations"])
def test_tails_crossing_zero_are_located_from_the_median(tails):
    """Symmetrised Pareto(3) columns centred at 0.5 (median > 0, lower tail crossing 0),
    n = 10⁴, d = 10, ε = 4: the outer level is α·n ≈ 280 rows. On the public grid
    alone (``"values"``, the broken variant) the lower quantiles of some column stop
    near 0, among the grid's 160 points between 2^-20 and 1 that ranks cannot tell
    apart, and more than 4αn rows of a column are clipped (measured 1644); with the
    median-shifted grid and the floor every column clips at most αn rows on each side
    (measured 15)."""
    rows, alpha_n = _clipped_rows(tails)
    assert rows <= alpha_n
    rows, alpha_n = _clipped_rows("values")
    assert rows > 4 * alpha_n


def _lower_ends(tails):
    X = np.random.default_rng(10_004).lognormal(0.0, 1.5, size=(50_000, 1))
    return np.array([C.private_quantile_clipped_mean(
        X, epsilon=1.0, delta=1e-6, rng=np.random.default_rng(s), tails=tails)[2]["lower"][0]
        for s in range(6)])


def test_a_tail_piled_up_above_zero_stays_above_zero():
    """Log-normal(0, 1.5), n = 5·10⁴, ε = 1 (one column, ε_q = 0.062): its lowest 9 %
    lie in (0, 0.083], within one step of the shifted grid seen from the median 1, so
    on that grid alone (``"deviations"``, the broken variant) no point resolves q_{4α}
    and the draws wander below 0 (lower ends from −0.3 to −303 in six fits); the union
    keeps the public grid's resolution near 0 and every lower end is in (0, 0.1)."""
    union = _lower_ends("union")
    assert np.all((union > 0) & (union < 0.1)), union
    assert np.mean(_lower_ends("deviations") < 0) >= 0.5


def test_union_counts_move_by_at_most_one_for_a_replaced_row():
    """The union grid depends on the data only through the released median (the same
    on both neighbours), and each row adds one to the counts of the grid points at or
    above it: a replaced row moves every count by at most one."""
    rng = np.random.default_rng(2)
    x = rng.standard_t(3, 500)
    y = x.copy()
    y[3] = 1.7e308
    grid, m = geometric_grid(), 0.125
    U = np.unique(np.concatenate([grid, m + grid]))
    for a, b in zip(C._column_counts(x, U), C._column_counts(y, U)):
        assert np.abs(a - b).max() == 1


# ------------------------------------------------------------------- the plan
def test_the_tail_rule_does_not_change_the_budget():
    default = C.plan_quantile_clipped_mean(20_000, 3, epsilon=1.0, delta=1e-6)
    assert default.tails == "union"
    for t in C.TAILS:
        plan = C.plan_quantile_clipped_mean(20_000, 3, epsilon=1.0, delta=1e-6, tails=t)
        assert plan.tails == t
        assert dataclasses.replace(default, tails=t) == plan
        assert plan.budget == default.budget and plan.budget.event == default.budget.event
    with pytest.raises(ValueError, match="tails"):
        C.plan_quantile_clipped_mean(20_000, 3, epsilon=1.0, delta=1e-6, tails="median")


class _RecordingSource(RandomSource):
    """Records the (kind, integer scale) of every discrete noise draw."""

    def __init__(self):
        super().__init__(b"\x02" * 32)
        self.scales = []

    def add_discrete_noise(self, grid_values, kind, scale):
        self.scales.append((kind, int(scale)))
        return super().add_discrete_noise(grid_values, kind, scale)


def _theorem_holds(plan, source, f=0.2):
    """From the public numbers alone: the draws' ε_q is √(8fρ/(5d)) (each ε_q²/8-zCDP,
    Cesar and Rogers 2021, Lemma 3.2) and the mean's discrete Gaussian (Canonne, Kamath
    and Steinke 2020, Theorem 14) has at least σ = (√d/n)/√(2(1 − f)ρ) in unit
    coordinates, so that the two compose to ρ (Bun and Steinke 2016, Lemma 2.3)."""
    n, d = plan.n_samples, plan.n_features
    rho = approx_dp_to_zcdp(plan.epsilon, plan.delta)
    eps_q = quantile_epsilon(5 * d, rho=f * rho)
    sens = math.sqrt(d) / n
    sigma = sens / math.sqrt(2 * (1 - f) * rho)
    needed = plan_grid_noise("gaussian", sigma, sens, d).grid_scale
    (kind, scale), = source.scales
    return (kind == "gaussian" and scale >= needed
            and plan.quantile_epsilon <= eps_q * (1 + 1e-12)
            and plan.n_draws * plan.quantile_epsilon**2 / 8 + plan.mean_rho
            <= rho * (1 + 1e-12))


def test_the_run_draws_what_the_theorem_needs_and_half_the_noise_is_caught():
    X = np.random.default_rng(3).standard_t(3, size=(20_000, 3))
    plan = C.plan_quantile_clipped_mean(*X.shape, epsilon=1.0, delta=1e-6,
                                        scale_fraction=0.2, noise="gaussian")
    assert not plan.shared
    source = _RecordingSource()
    C.quantile_clipped_mean(X, plan, source)
    assert _theorem_holds(plan, source)
    half = dataclasses.replace(plan, mean_rho=4 * plan.mean_rho)  # σ/2
    source = _RecordingSource()
    C.quantile_clipped_mean(X, half, source)
    assert not _theorem_holds(half, source)


def test_the_estimator_charges_the_plans_event():
    from skdpsparse.mean import DPHeavyTailedMean

    X = np.random.default_rng(4).standard_t(3, size=(20_000, 2))
    est = DPHeavyTailedMean(epsilon=1.0, random_state=0).fit(X)
    plan = C.plan_quantile_clipped_mean(*X.shape, epsilon=1.0, delta=1e-6)
    assert est.privacy_spent_ == plan.budget
    assert est.privacy_spent_.event == plan.budget.event


def test_union_draws_of_sparse_columns_equal_the_dense_ones():
    """The sparse path counts each column's stored values plus its implicit zeros
    (an explicit stored zero included) without densifying: the same counts, hence
    the same seeded draws, as the dense matrix."""
    rng = np.random.default_rng(5)
    X = rng.standard_t(3, size=(4000, 3)) * (rng.random((4000, 3)) < 0.5)
    S = sp.csr_matrix(X)
    S.data[0] = 0.0  # an explicit zero
    D = S.toarray()
    U = np.unique(np.concatenate([geometric_grid(), 0.5 + geometric_grid()]))
    col = S.tocsc()
    stored = col.data[col.indptr[1]:col.indptr[2]]
    for a, b in zip(C._column_counts(stored, U, 4000 - stored.size),
                    C._column_counts(D[:, 1], U)):
        np.testing.assert_array_equal(a, b)
    med = np.array([0.0, 0.125, -0.25])
    args = dict(alpha=0.01, eps_q=0.5, grid=geometric_grid())
    got = C._union_tail_draws(S, med, rng=np.random.default_rng(0), **args)
    want = C._union_tail_draws(D, med, rng=np.random.default_rng(0), **args)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
