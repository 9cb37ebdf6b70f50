"""``DPHeavyTailedRegressor`` past one machine: one round trip to the workers per step.

The regressor (Kamath, Liu and Zhang 2022, "Improved rates for differentially private
stochastic convex optimization with heavy-tailed data", Algorithms 1 and 2) takes T
projected gradient steps; step t's gradient is a private heavy-tailed mean (cwme or
the noise-smoothing mean, ``skdpsparse.mechanisms.heavy_tailed``) of the per-example
gradients ℓ'(⟨w, x_i⟩, y_i)·x_i of the step's rows: all n rows (convex setting) or
the t-th disjoint batch of n // T rows (strongly convex). On a Dask collection:

1. **prepare** (one task per chunk, persisted on the workers): the chunk checked as
   the in-memory validation checks it, the targets checked finite, the digest shares
   of X and y returned (for the key); then the in-memory fit's row maps: entries
   and targets capped at ±``ENTRY_CAP``, the intercept's column of ones appended;
2. **steps**, on the driver: the plan is the in-memory one
   (``plan_heavy_tailed_regression``, public numbers); for each step the driver sends
   w to the chunks holding the step's rows, each returns, for the step's rows it
   holds, the derivatives' scaled rows summed per group of the consecutive split of
   the step's rows (cwme: :func:`._heavy_tailed_groups.group_sums`) or its share of
   the noise-smoothing mean, as task results; the driver merges them, takes the
   median (cwme), draws the step's noise (``heavy_tailed.release_statistic``, the
   in-memory draw step), and applies the in-memory update, projection and average.

**The rows are taken in the collection's order.** The in-memory fit first permutes
the rows with the fit's key; its guarantee holds for every fixed order (the module
notes of ``mechanisms.heavy_tailed_sco``: the permutation makes the groups and the
batches exchangeable, for accuracy on sorted data), so a public order is covered.
Shipping the permutation would put n labels drawn from the fit's random source in the
task graph; order a sorted collection once beforehand, by something other than the
values (e.g. a hash of a row id). The same seed therefore draws other noise than the
in-memory fit (which spends its first draw on the permutation); the mechanism-level
run on the unpermuted rows (``run_heavy_tailed_sco``) is reproduced: bit for bit when
every group (cwme) lies in one chunk, or with one chunk per step (noise smoothing),
else up to float re-association of the group sums (``_heavy_tailed_groups``).
"""

import numpy as np
import scipy.sparse as sp

from ._core import check_chunk_targets

__all__ = ["fit_heavy_tailed_regressor_distributed"]


def _prepare(chunk, y, offset, rows, n_total, n_features, fit_intercept):
    """One chunk, on a worker: the in-memory run's rows (capped, with the intercept's
    column) and targets (capped), and the digest shares of the chunk and its targets."""
    from ..mechanisms.heavy_tailed_sco import ENTRY_CAP
    from ..utils._digest import chunk_digest

    chunk, y = check_chunk_targets(chunk, y, n_features, offset, rows)
    digests = (chunk_digest(chunk, offset, n_total),
               chunk_digest(y.reshape(-1, 1), offset, n_total))
    X = chunk
    if X.dtype == np.float64:  # (float32 cannot exceed the cap)
        if sp.issparse(X):
            X = X.copy()
            np.clip(X.data, -ENTRY_CAP, ENTRY_CAP, out=X.data)
        else:
            X = np.clip(X, -ENTRY_CAP, ENTRY_CAP)
    if fit_intercept:
        ones = np.ones((X.shape[0], 1), dtype=X.dtype)
        X = sp.hstack([X, ones], format="csr") if sp.issparse(X) else np.hstack([X, ones])
    return (X, np.clip(y, -ENTRY_CAP, ENTRY_CAP)), digests


def _step_part(data, start, stop, position, w, plan_args):
    """A worker's task for one step (public inputs only): the rows start..stop − 1 of
    a prepared chunk, at positions ``position``, … of the step's rows, give their
    per-example derivatives at w (the in-memory calls) and then their cwme group
    sums or noise-smoothing share."""
    from .._kernels.linear_losses import per_example_derivatives
    from ..mechanisms.heavy_tailed import noise_smoothing_mean
    from ..mechanisms.heavy_tailed_sco import _FLOAT_MAX, _margins
    from ._heavy_tailed_groups import group_sums

    X, y = data
    Xt, yt = X[start:stop], y[start:stop]
    oracle, loss_code, loss_param, a, b, c = plan_args
    der = per_example_derivatives(_margins(Xt, w), yt, loss_code, loss_param)
    np.clip(der, -_FLOAT_MAX, _FLOAT_MAX, out=der)  # as in memory (run_heavy_tailed_sco)
    if oracle == "cwme":  # a: the split's bounds, (b, c): the clipping interval
        return group_sums(Xt, a, b, c, position, scale=der)
    value = noise_smoothing_mean(Xt, tau=a, smoothing_variance=b, scale=der)
    return value if Xt.shape[0] == c else value * (Xt.shape[0] / c)  # c: step rows


def _pieces(first, count, offsets, sizes):
    """(chunk, local start, local stop, position in the step) of the rows
    first..first + count − 1: a public function of positions."""
    out = []
    for k, (off, rows) in enumerate(zip(offsets, sizes)):
        a, b = max(first, off), min(first + count, off + rows)
        if a < b:
            out.append((k, a - off, b - off, a - first))
    return out


def fit_heavy_tailed_regressor_distributed(estimator, X, y):
    """``DPHeavyTailedRegressor.fit`` on a Dask collection (module doc); the fitted
    estimator."""
    import dask

    from .._kernels.heavy_tailed import group_bounds
    from .._kernels.projections import project_l2_ball
    from ..base import release
    from ..mechanisms.heavy_tailed import median_of_group_means, release_statistic
    from ..mechanisms.heavy_tailed_sco import plan_heavy_tailed_regression
    from ..utils import validate_params
    from ..utils._progress import Progress
    from ._cyclic_sgd import persist_prepared
    from ._dask import row_chunks
    from ._heavy_tailed import merge_sums
    from ._heavy_tailed_groups import _clip_interval, cwme_group_sums
    from ._output_perturbation import y_row_blocks

    name = type(estimator).__name__
    validate_params(estimator, estimator._parameter_constraints)
    huber_threshold, radius = estimator._huber_threshold(), estimator._radius()
    if estimator.mean_oracle == "noise_smoothing" and estimator.moment < 2:
        raise ValueError("mean_oracle='noise_smoothing' needs a bound on a moment of "
                         f"order k >= 2, got moment={estimator.moment!r}.")
    chunks, (n, d), attrs = row_chunks(X)
    y_blocks = y_row_blocks(y, chunks, n, name)
    plan = plan_heavy_tailed_regression(
        n, d, epsilon=estimator.epsilon, delta=estimator.delta, radius=radius,
        loss=estimator.loss, huber_threshold=huber_threshold,
        oracle=estimator.mean_oracle, alpha=estimator.alpha,
        fit_intercept=estimator.fit_intercept, max_iter=estimator.max_iter,
        learning_rate=estimator.learning_rate, truncation=estimator.truncation,
        moment=estimator.moment, moment_bound=estimator.moment_bound,
        gradient_bound=estimator.gradient_bound, smoothness=estimator.smoothness,
        failure_prob=estimator.failure_prob,
        smoothing_variance=estimator.smoothing_variance)

    data, rng = persist_prepared(estimator, X, y_blocks, _prepare, bool(plan.fit_intercept))

    offsets = [off for _, off, _ in chunks]
    sizes = [rows for _, _, rows in chunks]
    T, batch, step = plan.n_iter, plan.batch_size, plan.step
    rows_per_step = n if plan.setting == "convex" else batch
    if plan.oracle == "cwme":
        bounds = group_bounds(rows_per_step, step.groups_used)
        lo, hi = _clip_interval(step)
        plan_args = ("cwme", plan.loss_code, plan.loss_param, bounds, lo, hi)
    else:
        plan_args = ("noise_smoothing", plan.loss_code, plan.loss_param, step.tau,
                     step.smoothing_variance, rows_per_step)
    task = dask.delayed(_step_part, pure=True)
    progress = Progress(estimator.verbose, name)
    every = max(1, T // 10)
    p = plan.n_features
    w, w_sum = np.zeros(p), np.zeros(p)
    for t in range(T):
        first = 0 if plan.setting == "convex" else t * batch
        parts = dask.compute(*[task(data[k], a, b, pos, w.copy(), plan_args)
                               for k, a, b, pos in _pieces(first, rows_per_step,
                                                           offsets, sizes)])
        merged = parts[0]
        for more in parts[1:]:  # in row order
            merged = merge_sums(merged, more)
        if plan.oracle == "cwme":
            merged = median_of_group_means(cwme_group_sums(merged, bounds, lo, hi),
                                           rows_per_step)
        grad = release_statistic(merged, step, rng)  # the step's one draw, here
        if plan.alpha:
            grad += plan.alpha * plan.penalized * w
        w = w - plan.learning_rate * grad
        project_l2_ball(w, plan.radius, w)
        w_sum += w
        progress.report("step", t + 1, T, level=1 if (t + 1) % every == 0 else 2,
                        seconds=False)
    out = w_sum / T if plan.setting == "convex" else w
    coef = out[:d].copy()
    intercept = float(out[d]) if plan.fit_intercept else 0.0
    budget = plan.budget
    attrs.update(coef_=coef, intercept_=intercept, n_iter_=T,
                 learning_rate_=plan.learning_rate, truncation_=plan.truncation,
                 setting_=plan.setting, noise_scale_=float(step.noise_scale),
                 privacy_spent_=budget,
                 approx_dp_spent_=budget.to_approx_dp(float(estimator.delta)))
    return release(estimator, attrs)
