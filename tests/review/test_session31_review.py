"""Adversarial review of session 31's privacy changes (written by a reviewer, not the
authors of the reviewed code).

Each test states the property an attacker would break and asserts that it holds; a
broken variant is run beside it where one is cheap, so that the test is seen to fail
when the property fails.

1. The scaled release of the ℓ2² penalty in cyclic DP-SGD on CSR input
   (``skdpsparse/mechanisms/cyclic_sgd.py``, ``doc/derivations/lazy_noise.rst``,
   "The ℓ2² penalty: the scaled release"): its lazy noise is complete (every step's
   noise reaches every coordinate, scaled as the release says, before each fold), and
   everything public about the run (s_min, block length, grid scale, budget) is the
   same on neighbouring datasets and on dense and CSR copies of the same rows.
2. ``DPOutputPerturbationRegressor(label_bound="private" | (low, high))``: the two
   label draws spend at most the label share of ε, the fit reads the targets only
   through (m, B), and nothing the user sees besides the noisy release depends on one
   extreme row.
3. The tail cell score of the heavy-tailed mean (``tail_cell_distance``): Δu = 1 by
   brute force over every neighbouring pair of small datasets on a small grid.
4. Output perturbation reading rows scaled where read (``row_scales``): the sums are
   the bounded copy's bit for bit on special values (−0, subnormals, rows of factor
   exactly 1, rows whose squared norm overflows), and every bounded row lies in the
   ℓ2 ball up to the float allowance.
"""

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse.mechanisms import heavy_tailed_clip as htc

# ----------------------------------------------------------------------------------
# 3. The tail cell score: Δu = 1 by brute force.


def _counts(values, grid):
    # #{x < g} and #{x <= g}, written here from the definition (not the library's).
    v = np.asarray(values, dtype=np.float64)
    below = np.array([(v < g).sum() for g in grid], dtype=np.int64)
    at_most = np.array([(v <= g).sum() for g in grid], dtype=np.int64)
    return below, at_most


def _cell_scores(values, grid, n):
    below, at_most = _counts(values, grid)
    lib_below, lib_at_most = htc._column_counts(np.asarray(values, float), grid)
    np.testing.assert_array_equal(below, lib_below)
    np.testing.assert_array_equal(at_most, lib_at_most)
    out = []
    for upper in (False, True):
        for r in range(n + 1):
            out.append(htc.tail_cell_distance(below, at_most, r, n, upper))
    return np.array(out)


def _broken_cell_scores(values, grid, n):
    # A plausible wrong cell score: both ends' distances added, |lo - r| + |hi - r|,
    # which a row moved into a cell from below moves by 2 (lo and hi both rise).
    below, at_most = _counts(values, grid)
    out = []
    for upper in (False, True):
        lo = np.concatenate([[0], at_most[:-1]]) if upper else below
        hi = at_most if upper else np.concatenate([below[1:], [n]])
        for r in range(n + 1):
            out.append(np.abs(lo - r) + np.abs(hi - r))
    return np.array(out)


def _max_neighbour_change(score, grid, support, n):
    # Every dataset of n values from `support` (as a multiset: order does not move the
    # counts) and every replacement of one of its values by another from `support`.
    table = {}
    for data in itertools.combinations_with_replacement(support, n):
        table[data] = score(data, grid, n)
    worst = 0
    for data, s in table.items():
        for i in range(n):
            for v in support:
                other = tuple(sorted(data[:i] + (v,) + data[i + 1:]))
                worst = max(worst, int(np.max(np.abs(s - table[other]))))
    return worst


def test_tail_cell_score_has_sensitivity_one_on_every_neighbouring_pair():
    # Grid with a repeated-spacing part and an atom exactly on a grid point; support
    # values on grid points, between them, and beyond both ends (top- and
    # bottom-coded data), so every cell boundary case (value on U_k, inside a cell,
    # outside the grid) is hit by the replaced row.
    grid = np.array([-2.0, -0.5, 0.0, 1.0, 3.0])
    support = (-3.0, -2.0, -1.0, 0.0, 0.5, 1.0, 3.0, 7.0)
    for n in (1, 2, 3, 4):
        assert _max_neighbour_change(_cell_scores, grid, support, n) <= 1
    # The audit has power: a score of sensitivity 2 is caught on the same pairs.
    assert _max_neighbour_change(_broken_cell_scores, grid, support, 3) >= 2


# ----------------------------------------------------------------------------------
# 4. Output perturbation reads rows scaled where read: the copy's sums, bit for bit.


def _special_rows(d, rng):
    # Rows an attacker would plant: −0 entries, subnormals, a row of norm exactly R
    # (factor exactly 1), rows just above R, rows whose sum of squares overflows or
    # underflows, an all-zero row, a single huge entry, many equal entries (ℓ1 binds).
    R = 0.75
    tiny = 5e-324
    rows = [
        np.full(d, -0.0),
        np.r_[[R], np.zeros(d - 1)],
        np.r_[[-R, -0.0], np.zeros(d - 2)],
        np.r_[[np.nextafter(R, 1.0)], np.zeros(d - 1)],
        np.full(d, tiny),
        np.r_[[tiny, -tiny, 1e-310, -0.0], np.zeros(d - 4)],
        np.full(d, 1e200),
        np.r_[[1e308, -1e308], np.zeros(d - 2)],
        np.full(d, 1e-200),
        np.full(d, 0.3),
        np.r_[[0.6 * R, 0.8 * R], np.zeros(d - 2)],
        np.zeros(d),
    ]
    noise = rng.standard_normal((40, d)) * rng.choice([0.01, 1.0, 50.0], size=(40, 1))
    noise[rng.random((40, d)) < 0.5] = -0.0
    return np.vstack(rows + [noise]), R


def _exact_norm_sq(row):
    return sum(Fraction(float(v)) ** 2 for v in row)


@pytest.mark.parametrize("sparse", [False, True])
def test_rows_scaled_where_read_give_the_copys_release_on_special_values(sparse):
    from skdpsparse.mechanisms.output_perturbation import (
        bound_inputs,
        output_perturbation,
        plan_output_perturbation,
        regularized_minimizers,
        release,
    )

    rng = np.random.default_rng(31)
    d = 8
    X, R = _special_rows(d, rng)
    n = X.shape[0]
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    data = sp.csr_matrix(X) if sparse else X
    for sparsity in (d, 2):  # ℓ1 ball inactive, then binding
        plan = plan_output_perturbation(n, d, 1, loss="logistic", epsilon=1.0,
                                        delta=1e-6, norm_bound=R, sparsity=sparsity)
        Xb, yb = bound_inputs(data, y[None], "logistic", norm_bound=R,
                              sparsity=sparsity, label_bound=1.0)
        theta, _ = regularized_minimizers(Xb, yb, plan)
        expected, _ = release(theta, plan, np.random.default_rng(7))
        got, _ = output_perturbation(data, y[None], plan, np.random.default_rng(7))
        np.testing.assert_array_equal(got, expected)
        # The bounded copy the release is equal to is inside the ℓ2 ball up to the
        # float allowance of one rounding per entry (exact arithmetic on the floats).
        dense_b = Xb.toarray() if sp.issparse(Xb) else np.asarray(Xb)
        bound_sq = Fraction(R) ** 2 * Fraction(1 + 2.0 ** -48)
        for row in dense_b:
            assert _exact_norm_sq(row) <= bound_sq
            assert np.all(np.isfinite(row))


def test_row_scale_kernel_sums_equal_the_copys_at_several_iterates():
    # The fixed-point sums of InMemoryRows with row_bounds against those of the bounded
    # copy, at iterates with −0, subnormal and large entries: an order or product that
    # differs at one position would show as one differing integer.
    from skdpsparse._solvers.erm import InMemoryRows
    from skdpsparse._kernels.linear_losses import LOSS_CODES
    from skdpsparse.mechanisms.output_perturbation import bound_rows, row_bounds

    rng = np.random.default_rng(32)
    d = 8
    X, R = _special_rows(d, rng)
    n = X.shape[0]
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    iterates = [np.zeros(d), np.full(d, -0.0), np.r_[[5e-324] * d],
                rng.standard_normal(d), 30.0 * rng.standard_normal(d)]
    for data in (X, sp.csr_matrix(X)):
        for sparsity in (d, 2):
            lazy = InMemoryRows(data, y, row_bounds=row_bounds(R, sparsity))
            copy = InMemoryRows(bound_rows(data, R, sparsity), y)
            for loss in ("logistic", "squared"):
                code = LOSS_CODES[loss]
                for w in iterates:
                    for b in (0.0, -0.0, 0.25):
                        a = lazy.loss_gradient(w, b, code, 1.0, 2.0 ** 20, 2.0 ** 20, 2 ** 55)
                        c = copy.loss_gradient(w, b, code, 1.0, 2.0 ** 20, 2.0 ** 20, 2 ** 55)
                        assert a[0] == c[0] and a[2] == c[2] and a[3] == c[3]
                        np.testing.assert_array_equal(a[1], c[1])
                        v = rng.standard_normal(d)
                        h1 = lazy.hessian_product(w, b, v, 0.5, code, 1.0, 2.0 ** 20, 2 ** 55)
                        h2 = copy.hessian_product(w, b, v, 0.5, code, 1.0, 2.0 ** 20, 2 ** 55)
                        np.testing.assert_array_equal(h1[0], h2[0])
                        assert h1[1:] == h2[1:]


# ----------------------------------------------------------------------------------
# 1. Cyclic DP-SGD's scaled release of the ℓ2² penalty (CSR, lazy noise).


def _cyclic_problem(seed=3, n=40, d=12):
    # Sparse rows inside the unit ball; column 0 never read (its noise arrives only
    # through the flushes), column 1 read by one row (long pending intervals).
    rng = np.random.default_rng(seed)
    X = np.where(rng.random((n, d)) < 0.25, rng.uniform(-1, 1, (n, d)), 0.0)
    X[:, 0] = 0.0
    X[:, 1] = 0.0
    X[17, 1] = 0.9
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None] * 1.0001
    y = rng.choice([-1.0, 1.0], n)
    return sp.csr_matrix(X), y


def _reference_w(X, y, plan, spacing, k_units, scales):
    """The scaled release in w-space, written from the derivation (not the kernels),
    without the grid rounding: w ← a·(w − (γ_lr/b)·G + s_t·γ·K) for the coefficients,
    b ← b − (γ_lr/b)·G_b + γ·K for the intercept, every noise integer equal to K;
    G the sum of the gradients der·(x, 1) clipped to C, rows in data order."""
    Xd = X.toarray()
    n, d = Xd.shape
    a = 1.0 / (1.0 + plan.learning_rate * plan.alpha)
    length = scales.size - 1
    w, b0 = np.zeros(d), 0.0
    pos = 0
    for t in range(plan.n_steps):
        s_t = scales[t % length]
        gw, gb = np.zeros(d), 0.0
        for _ in range(plan.batch_size):
            i = pos
            pos = (pos + 1) % n
            z = Xd[i] @ w + b0
            der = -y[i] / (1.0 + math.exp(y[i] * z))
            g = der * np.r_[Xd[i], 1.0]
            norm = np.linalg.norm(g)
            if norm > plan.clip_norm:
                g *= plan.clip_norm / norm
            gw += g[:d]
            gb += g[d]
        step = plan.learning_rate / plan.batch_size
        w = a * (w - step * gw + s_t * spacing * k_units)
        b0 = b0 - step * gb + spacing * k_units
    return w, b0


def _scaled_plan_for(n, d, floor):
    from skdpsparse.mechanisms.cyclic_sgd import plan_cyclic_sgd

    return plan_cyclic_sgd(n, d, loss="logistic", norm_bound=1.0, fit_intercept=True,
                           batch_size=4, epochs=3, delta=1e-6, noise_multiplier=2.0,
                           penalty="l2", alpha=0.01, scale_floor=floor)


def _deterministic_run(monkeypatch, X, y, plan, k_units, broken_flush=False):
    from skdpsparse.mechanisms import cyclic_sgd as mech

    seen = []

    def every_integer_is_k(counts, scale, key, *args, **kw):
        seen.append(int(scale))
        return np.asarray(counts, dtype=np.int64) * k_units

    monkeypatch.setattr(mech, "discrete_gaussian_sums", every_integer_is_k)
    if broken_flush:
        real = mech._flush_all

        def flush_only_at_the_end(theta, last, step, *args):
            if step >= plan.n_steps:
                real(theta, last, step, *args)

        monkeypatch.setattr(mech, "_flush_all", flush_only_at_the_end)
    coef, intercept = mech.cyclic_sgd(X, y, plan, np.random.default_rng(0), shuffle=False)
    monkeypatch.undo()
    return coef, intercept, seen


@pytest.mark.parametrize("floor", [0.9, 0.93])
def test_scaled_release_adds_every_steps_noise_scaled_before_each_fold(monkeypatch, floor):
    # floor 0.9: blocks of 6 steps, the run (30 steps) ends on a block end; 0.93:
    # blocks of 4, the run ends inside one (the final factor is the last block's s).
    # The lazy scaled run with every noise integer replaced by K (so every step adds
    # γK to every u coordinate) must equal the w-space recursion of the derivation:
    # a coordinate whose pending noise missed a fold would carry it past the fold
    # unscaled (or lose it), an error of (1 − s_fold)·γK or more per pending step.
    from skdpsparse.mechanisms import cyclic_sgd as mech

    X, y = _cyclic_problem()
    n, d = X.shape
    plan = _scaled_plan_for(n, d, floor)
    assert plan.scale_floor == floor and mech.uses_lazy_noise(plan, True)
    scales = mech.block_scales(mech.l2_decay(plan), plan.scale_floor, plan.n_steps)
    length = scales.size - 1
    assert 2 <= length < plan.n_steps // 2  # several folds in the run
    assert (plan.n_steps % length == 0) == (floor == 0.9)
    assert np.all(scales[:-1] >= plan.scale_floor)
    grid = mech._scaled_grid(plan.noise_std, plan.learning_rate * plan.clip_norm
                             / plan.batch_size, d + 1, plan.scale_floor)
    spacing = grid.spacing
    k_units = grid.grid_scale + 1
    coef, intercept, seen = _deterministic_run(monkeypatch, X, y, plan, k_units)
    # Calibration: the noise on u has scale at least σ/s_min (the sensitivity of the
    # rounded gradient part divided by s ≥ s_min), at every draw.
    assert set(seen) == {k_units}
    assert (k_units - 1) * spacing >= plan.noise_std / plan.scale_floor * (1 - 1e-12)
    w_ref, b_ref = _reference_w(X, y, plan, spacing, k_units, scales)
    one_step = spacing * k_units
    tol = 1e-4 * one_step
    np.testing.assert_allclose(coef, w_ref, rtol=0, atol=tol)
    assert abs(intercept - b_ref) <= tol
    # The never-read column received every step's noise (through flushes only).
    assert abs(coef[0]) > 0.5 * one_step
    # Power: the same run with the block-end flushes skipped is caught.
    coef_b, _, _ = _deterministic_run(monkeypatch, X, y, plan, k_units, broken_flush=True)
    assert np.max(np.abs(coef_b - w_ref)) > 100 * tol


def test_scaled_release_public_numbers_do_not_depend_on_one_row(monkeypatch):
    # Everything public about a CSR fit with penalty="l2" (s_min, block length, the
    # grid scale handed to the sampler, the accounting and ε spent) is the same on two
    # datasets that differ in one row, however extreme (huge entries, another sparsity
    # pattern, a flipped label); and the dense fit of the same rows reports the same
    # privacy_spent_ (it runs the eager release: scale_floor 1).
    from skdpsparse.linear_model import DPCyclicSGD
    from skdpsparse.mechanisms import cyclic_sgd as mech

    X, y = _cyclic_problem(seed=4, n=60, d=20)
    y = (y > 0).astype(int)
    X2 = X.tolil(copy=True)
    X2[5, :] = 0.0
    X2[5, 0] = 1e30
    X2[5, 19] = -3.0
    X2 = X2.tocsr()
    y2 = y.copy()
    y2[5] = 1 - y2[5]
    real = mech.discrete_gaussian_sums
    scales = []

    def recording(counts, scale, key, *args, **kw):
        scales.append(int(scale))
        return real(counts, scale, key, *args, **kw)

    monkeypatch.setattr(mech, "discrete_gaussian_sums", recording)
    fits = []
    for data, target in ((X, y), (X2, y2)):
        scales.clear()
        est = DPCyclicSGD(alpha=5e-4, batch_size=4, epochs=2, classes=[0, 1],
                          random_state=0).fit(data, target)
        fits.append((est, sorted(set(scales))))
    (a, sa), (b, sb) = fits
    assert a.accounting_["scale_floor"] < 1.0  # the scaled release really ran
    assert sa == sb and len(sa) == 1
    assert repr(a.accounting_) == repr(b.accounting_)
    assert repr(a.privacy_spent_) == repr(b.privacy_spent_)
    monkeypatch.undo()
    dense = DPCyclicSGD(alpha=5e-4, batch_size=4, epochs=2, classes=[0, 1],
                        random_state=0).fit(X.toarray(), y)
    assert dense.accounting_["scale_floor"] == 1.0
    assert repr(dense.privacy_spent_) == repr(a.privacy_spent_)
    same = {k: v for k, v in a.accounting_.items() if k != "scale_floor"}
    assert repr(same) == repr({k: v for k, v in dense.accounting_.items()
                               if k != "scale_floor"})


def test_scaled_plan_on_dense_rows_is_the_csr_run():
    # "Dense rows are run as CSR": a scaled plan given a dense array must run the same
    # (lazy, scaled) release as on the CSR copy, never the eager kernel with the
    # scaled plan's grid or the scaled kernel with the eager grid.
    from skdpsparse.mechanisms import cyclic_sgd as mech

    X, y = _cyclic_problem(seed=6)
    plan = _scaled_plan_for(*X.shape, 0.95)
    for shuffle in (False, True):
        a = mech.cyclic_sgd(X, y, plan, np.random.default_rng(9), shuffle=shuffle)
        b = mech.cyclic_sgd(X.toarray(), y, plan, np.random.default_rng(9), shuffle=shuffle)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1] == b[1]


# ----------------------------------------------------------------------------------
# 2. DPOutputPerturbationRegressor's centred label interval.


def _regression_data(seed=8, n=300, d=5):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)) / math.sqrt(d)
    y = 3.0 + X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("norm_bound", [1.0, "private"])
def test_private_label_interval_spends_at_most_its_share(monkeypatch, norm_bound):
    # The two label draws (median, then the 0.95-quantile of |y − m|) and the norm
    # bound's draw, as they are called, add up to at most bound_fraction·ε; the fit's
    # privacy_spent_ is at most the request.
    from skdpsparse.linear_model import DPOutputPerturbationRegressor
    from skdpsparse.linear_model import _output_perturbation as op
    from skdpsparse.mechanisms import quantile

    spent = []
    real_q, real_b = quantile.private_quantiles, op.private_bound

    def q(X, levels, *, epsilon_each, rng, **kw):
        spent.append(epsilon_each * np.asarray(levels).size * X.shape[1])
        return real_q(X, levels, epsilon_each=epsilon_each, rng=rng, **kw)

    def b(values, epsilon, rng):
        spent.append(epsilon)
        return real_b(values, epsilon, rng)

    monkeypatch.setattr(quantile, "private_quantiles", q)
    monkeypatch.setattr(op, "private_bound", b)
    X, y = _regression_data()
    est = DPOutputPerturbationRegressor(epsilon=2.0, delta=1e-6, label_bound="private",
                                        norm_bound=norm_bound, bound_fraction=0.1,
                                        random_state=0).fit(X, y)
    assert len(spent) == (3 if norm_bound == "private" else 2)
    assert sum(spent) <= 0.1 * 2.0 * (1 + 1e-12)
    eps_spent = est.privacy_spent_.epsilon
    assert eps_spent <= 2.0 * (1 + 1e-12)
    assert est.label_center_ != 0.0  # centred (the data sit near 3)


@pytest.mark.parametrize("label_bound", ["private", (0.0, 6.0)])
def test_label_interval_fit_reads_targets_only_through_m_and_b(monkeypatch, label_bound):
    # With the label draws fixed (as a released (m, B) is, given the draws), datasets
    # differing in one target, made extreme (±1.7e308, finite), give the same public
    # attributes, the same warnings and no exception, and the noise-free minimizer
    # moves by at most the sensitivity the noise is calibrated to (the release is
    # replaced by the identity to read it). Broken variant: a centre read from the
    # data (the mean of y) moves it far more on the same pair.
    from skdpsparse.linear_model import DPOutputPerturbationRegressor
    from skdpsparse.linear_model import _output_perturbation as op
    from skdpsparse.mechanisms import output_perturbation as mech

    seen = []

    def identity_release(theta, plan, rng):
        seen.append((np.array(theta, dtype=np.float64), mech.noise_sensitivity(plan)))
        return np.array(theta, copy=True), np.array(theta, copy=True)

    monkeypatch.setattr(mech, "release", identity_release)
    X, y = _regression_data()

    def fit_all(interval):
        monkeypatch.setattr(op, "label_interval", interval)
        seen.clear()
        fits = []
        for extreme in (None, 1.7e308, -1.7e308):
            yy = y.copy()
            if extreme is not None:
                yy[11] = extreme
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est = DPOutputPerturbationRegressor(
                    epsilon=4.0, delta=1e-6, label_bound=label_bound, alpha=0.5,
                    random_state=0).fit(X, yy)
            fits.append((est, sorted(str(w.message) for w in caught)))
        return fits, list(seen)

    real = op.label_interval
    declared = (lambda y, lb, eps, rng: (3.0, 2.0)) if label_bound == "private" else real
    fits, thetas = fit_all(declared)
    base, base_warn = fits[0]
    public = ("label_bound_", "label_center_", "norm_bound_", "intercept_scaling_",
              "alpha_", "noise_scale_")
    for est, warn in fits[1:]:
        assert warn == base_warn
        for name in public:
            assert getattr(est, name) == getattr(base, name), name
        assert repr(est.privacy_spent_) == repr(base.privacy_spent_)
        assert np.all(np.isfinite(est.coef_)) and np.isfinite(est.intercept_)
    assert len(thetas) == 3
    (t0, sens), *others = thetas
    for t, s in others:
        assert s == sens
        assert np.linalg.norm(t - t0) <= sens
    # Power: the centre read from the data (the mean of the targets) and B kept.

    def centre_from_data(y, lb, eps, rng):
        return float(np.mean(np.clip(y, -1e6, 1e6))), 2.0

    leaky, thetas = fit_all(centre_from_data)
    assert len(thetas) == 3
    (t0, sens), *others = thetas
    assert max(np.linalg.norm(t - t0) for t, _ in others) > 10 * sens


@pytest.mark.parametrize("change", [
    dict(penalty="l1"), dict(penalty="elasticnet"), dict(penalty=None, alpha=0.0),
    dict(radius=5.0), dict(box=(-3.0, 3.0)), dict(n_outputs=3),
    dict(accounting="last_iterate"), dict(noise_multiplier=0.0)])
def test_scaled_release_is_unreachable_outside_its_proof(change):
    # The scaled kernel has no prox but the ℓ2² decay and no projection: every other
    # penalty, a constraint, multiclass, the unproven accounting or no noise must keep
    # the eager release under "auto" and be refused for an explicit s_min < 1.
    from skdpsparse.mechanisms.cyclic_sgd import plan_cyclic_sgd, uses_lazy_noise

    kw = dict(loss="logistic", norm_bound=1.0, fit_intercept=True, batch_size=4,
              epochs=3, delta=1e-6, noise_multiplier=2.0, penalty="l2", alpha=0.01)
    kw.update(change)
    try:
        auto = plan_cyclic_sgd(40, 12, scale_floor="auto", **kw)
    except ValueError:
        auto = None  # the combination itself is refused (e.g. last_iterate + prox)
    if auto is not None:
        assert auto.scale_floor == 1.0
        assert not uses_lazy_noise(auto, False)
    with pytest.raises(ValueError):
        plan_cyclic_sgd(40, 12, scale_floor=0.95, **kw)
    # Control: the unchanged l2 plan does take the scaled release.
    base = dict(kw, **{k: v for k, v in (("penalty", "l2"), ("alpha", 0.01), ("radius", None),
                                         ("box", None), ("n_outputs", 1),
                                         ("accounting", "composition"),
                                         ("noise_multiplier", 2.0))})
    assert plan_cyclic_sgd(40, 12, scale_floor=0.95, **base).scale_floor == 0.95


# ----------------------------------------------------------------------------------
# 4b. Noise smoothing's dense kernel without the clamp in its common test.


def test_noise_smoothing_dense_mean_moves_by_at_most_2_sup_per_replaced_row():
    # The sensitivity the noise uses: each entry's term lies in [−sup, sup], so one
    # replaced row moves each column's mean by at most 2·sup·τ/n. Planted rows sit on
    # the common test's edge (|a|·(1 + 8.5√c) around √2, both sides), at −0, at
    # subnormals and at ±1e308 (|x/τ| far above the removed 1e300 clamp); the dense
    # kernel is also checked against the entry-by-entry CSR kernel (ulps apart).
    from skdpsparse._kernels import heavy_tailed as ht

    rng = np.random.default_rng(41)
    n, d = 64, 6
    for tau, c in ((1.0, 0.0), (0.37, 0.25), (3.0, 1.0), (1e-300, 0.5)):
        edge = math.sqrt(2.0) / (1.0 + ht._INNER_SDS * math.sqrt(c)) * tau
        specials = np.array([-0.0, 5e-324, -5e-324, 1e-310, 1e308, -1e308,
                             np.nextafter(edge, 0), edge, np.nextafter(edge, 10),
                             -np.nextafter(edge, 0), -edge, math.sqrt(2) * tau, 1.0])
        X = rng.standard_t(3, size=(n, d)) * tau
        X[: specials.size, 0] = specials
        X[: specials.size, 1] = -specials
        sup = ht.smoothed_phi_sup(c)
        base = ht.noise_smoothing_mean_dense(X, tau, c)
        A = sp.csr_matrix(X)  # (drops the ±0 entries: their term is 0 either way)
        csr = ht.noise_smoothing_mean_csr(A.indptr, A.indices, A.data, n, d, tau, c)
        np.testing.assert_allclose(base, csr, rtol=1e-12, atol=1e-15 * sup * tau)
        bound = 2.0 * sup * tau / n * (1 + 1e-9) + 1e-15 * sup * tau
        worst = 0.0
        for i in range(n):
            for v in specials:
                Y = X.copy()
                Y[i, :] = v
                moved = np.abs(ht.noise_smoothing_mean_dense(Y, tau, c) - base)
                assert np.all(moved <= bound), (tau, c, i, v, moved.max() / bound)
                worst = max(worst, moved.max() / bound)
        assert worst > 0.9  # the bound is reached (±1e308 swapped for the other sign)


def test_row_factors_reproduce_the_bounded_copy_entry_for_entry():
    # The stats pass computes each row's factor its own way (dense: four rows' norms at
    # once); the claim "the copy's rows, bit for bit" needs fl(cᵢ·xᵢⱼ) to equal the
    # copy's entry for every i, j. Rows of many lengths and magnitudes (norms summed in
    # different orders differ in the last bits first), ℓ1 and ℓ2 balls binding.
    from skdpsparse._solvers.erm import InMemoryRows
    from skdpsparse.mechanisms.output_perturbation import bound_rows, row_bounds

    rng = np.random.default_rng(43)
    n, d = 203, 37  # not multiples of 4 (the four-row blocks and their tail)
    X = rng.standard_normal((n, d)) * np.exp(rng.uniform(-30, 30, (n, 1)))
    X[rng.random((n, d)) < 0.4] = 0.0
    X[:20] = _special_rows(d, rng)[0][:20]
    y = np.ones(n)
    for sparsity in (d, 3):
        for data in (X, sp.csr_matrix(X)):
            scales = InMemoryRows(data, y, row_bounds=row_bounds(0.75, sparsity)).row_scales
            copy = bound_rows(data, 0.75, sparsity)
            copy = copy.toarray() if sp.issparse(copy) else np.asarray(copy)
            dense = data.toarray() if sp.issparse(data) else data
            got = scales[:, None] * dense
            # Bitwise, signs of zeros included (−0·c is −0 in both).
            np.testing.assert_array_equal(got.view(np.int64), copy.view(np.int64))
