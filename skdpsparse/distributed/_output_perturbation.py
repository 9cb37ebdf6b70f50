"""Output perturbation past one machine: the in-memory driver over distributed passes.

``DPOutputPerturbationClassifier`` and ``DPOutputPerturbationRegressor`` (Ghazi et al.
(2024), "Differentially Private Optimization with Sparse Gradients", Algorithm 3) fit
a Dask array (dense or scipy.sparse chunks) or dataframe with a Dask ``y``:

1. **prepare** (one task per chunk, persisted on the workers): the chunk checked as
   the in-memory validation checks it, each row's factor into {‖x‖₂ ≤ R, ‖x‖₁ ≤ R√s}
   computed (applied where the passes read the row, as in memory: no bounded copy of
   the chunk) and its targets built (±1 one-vs-rest) or centred at the public centre
   of a declared interval (low, high) and clipped to [−B, B]
   (:func:`~skdpsparse.mechanisms.output_perturbation.bounded_rows`, the in-memory
   function); its entries per column and its shares of the data digests of X and of
   the targets go to the driver;
2. **solve** on the driver:
   :func:`~skdpsparse.mechanisms.output_perturbation.certified_minimizers`, the
   in-memory driver itself, whose every objective or gradient evaluation (and every
   Hessian-vector product of its Newton polish) is one pass: each chunk returns the
   exact int64 sums of its rows' terms
   (:func:`~skdpsparse._solvers.erm.partial_loss_gradient`) as a task result,
   and the driver adds them. The workers see a chunk, the current iterate and the
   grid: no seed, no key, no noise, no estimator;
3. **release** on the driver: the plan's noise, one draw
   (:func:`~skdpsparse.mechanisms.output_perturbation.release`), keyed by the same
   derivation and digests as in memory.

Why the privacy claim is exactly the in-memory one. The sums are integers, so every
chunking, merge order, retried task and number of workers gives the same numbers as
the one in-memory pass; the iterates, the stopping certificate (which already counts
the rounding of each row's terms to the grid,
:class:`~skdpsparse._solvers.erm.FixedPointObjective`) and the minimizer are
the in-memory ones bit for bit, and the noise is calibrated to the same
(1 + tol)·Δ. There is no summation-order error to bound: the only floating-point
error of a pass, the per-row rounding to the grid, is the same in both paths and is
inside the certificate.

Refused (with the reason, before any data is read): ``method="exponential"`` (it
enumerates a net against the whole matrix in memory), ``norm_bound="private"`` and
``label_bound="private"`` (their private quantiles read the rows in memory).
"""

import math
import warnings

import numpy as np

import dask

from .._solvers.erm import partial_hessian_product, partial_loss_gradient
from ..base import _DTYPE_KEY
from ..mechanisms.output_perturbation import (
    CLASSIFICATION_LOSSES, bounded_rows, centred_interval, certified_minimizers,
    plan_output_perturbation, release,
)
from ..utils import validate_params
from ._core import check_chunk, data_digest, fit_random_source_from_digests
from ._dask import chunk_kernel, row_chunks
from ..utils._digest import chunk_digest, final_digest, merge_digests

__all__ = ["DaskRows", "fit_output_perturbation_distributed"]


# ------------------------------------------------------------- worker functions
def _prepare(chunk, y, offset, rows, n_total, n_features, loss, classes, norm_bound,
             sparsity, label_bound, centre):
    """One chunk, on a worker: its bounded rows (the chunk itself with each row's
    bounding factor, applied where the passes read it, and the targets (K, rows),
    centred at the public ``centre`` and clipped), and the chunk's entries per column
    and digest parts of X and of the (uncentred) targets (lines: examples)."""
    chunk = check_chunk(chunk, n_features, offset)
    y = np.asarray(y)
    if y.ndim != 1 or chunk.shape[0] != rows or y.shape[0] != rows:
        raise ValueError(f"the chunk at row {offset} has {chunk.shape[0]} rows and "
                         f"{y.shape[0]} targets; its metadata said {rows}.")
    if loss in CLASSIFICATION_LOSSES:
        positives = classes[1:] if classes.size == 2 else classes
        targets = np.where(y[None, :] == positives[:, None], 1.0, -1.0)
    else:
        if y.dtype.kind not in "biuf":
            raise ValueError(f"y must be numeric; the targets of the chunk at row "
                             f"{offset} have dtype {y.dtype}.")
        targets = np.asarray(y, dtype=np.float64)[None, :]
        if not np.isfinite(targets).all():
            raise ValueError(f"Input y contains NaN or infinity (in the chunk starting "
                             f"at row {offset}).")
    digest_x = chunk_digest(chunk, offset, n_total)
    digest_t = chunk_digest(np.ascontiguousarray(targets.T), offset, n_total)
    if centre != 0.0:
        targets = targets - centre  # the in-memory fit's float operation, row by row
    bounded = bounded_rows(chunk, targets, loss, norm_bound=norm_bound, sparsity=sparsity,
                           label_bound=label_bound)
    return bounded, (np.asarray(bounded.counts, dtype=np.int64), digest_x, digest_t)


def _labels(y):
    return np.unique(np.asarray(y))


def _loss_gradient(rows, problem, w, b, code, param, loss_scale, grad_scale, limit):
    return partial_loss_gradient(rows.X, np.ascontiguousarray(rows.targets[problem]), w, b,
                                 code, param, loss_scale, grad_scale, limit, rows.entry_max,
                                 rows.row_scales)


def _add_loss_gradient(a, b):
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] and b[3]


def _hessian_product(rows, problem, w, b, v_w, v_b, code, param, scale, limit):
    return partial_hessian_product(rows.X, np.ascontiguousarray(rows.targets[problem]), w, b,
                                   v_w, v_b, code, param, scale, limit, rows.entry_max,
                                   rows.row_scales)


def _add_hessian(a, b):
    return a[0] + b[0], a[1] + b[1], a[2] and b[2]


def _tree(parts, add):
    add = dask.delayed(add, pure=True)
    while len(parts) > 1:
        parts = [add(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


class DaskRows:
    """The rows of a distributed fit for
    :class:`~skdpsparse._solvers.erm.FixedPointObjective`: each pass is one
    task per persisted chunk and a tree of integer additions, computed on the current
    scheduler; the driver receives d + 3 integers."""

    def __init__(self, data, n, n_features, counts):
        self.data = data  # persisted Delayed bounded rows (InMemoryRows) per chunk
        self.n, self.n_features = int(n), int(n_features)
        self.counts = counts
        self.problem = 0
        self.passes = 0

    def loss_gradient(self, w, b, code, param, loss_scale, grad_scale, limit):
        self.passes += 1
        task = dask.delayed(_loss_gradient, pure=True)
        parts = [task(c, self.problem, w, b, code, param, loss_scale, grad_scale, limit)
                 for c in self.data]
        (out,) = dask.compute(_tree(parts, _add_loss_gradient))
        return out

    def hessian_product(self, w, b, v_w, v_b, code, param, scale, limit):
        self.passes += 1
        task = dask.delayed(_hessian_product, pure=True)
        parts = [task(c, self.problem, w, b, v_w, v_b, code, param, scale, limit)
                 for c in self.data]
        (out,) = dask.compute(_tree(parts, _add_hessian))
        return out


# ---------------------------------------------------------------------- the fit
def _refuse(estimator, is_regressor):
    name = type(estimator).__name__
    if estimator.method != "output_perturbation":
        raise NotImplementedError(
            f"{name}(method={estimator.method!r}) has no distributed fit: the sparse "
            "exponential mechanism scores every point of a net against the whole matrix "
            "in memory. Use method='output_perturbation'.")
    private = [p for p in ("norm_bound", "label_bound")
               if getattr(estimator, p, None) == "private"]
    if private:
        raise NotImplementedError(
            f"{name}: {private[0]}='private' has no distributed fit yet: its private "
            "quantile reads the rows in memory. Declare the bound.")
    if is_regressor and estimator.label_bound is None:
        warnings.warn(
            "label_bound was not declared: targets are clipped to [-1, 1], which "
            "destroys the fit when they are larger. Declare a bound from public "
            "knowledge (a float B, or an interval (low, high)); label_bound='private' "
            "has no distributed fit yet.",
            UserWarning, stacklevel=4)


def y_row_blocks(y, chunks, n, name):
    """The Delayed blocks of a Dask y aligned with X's row ``chunks`` (rechunked to
    them; n rows, or a clear error)."""
    y = _as_dask_vector(y, name)
    if any(math.isnan(c) for c in y.chunks[0]):
        y = y.compute_chunk_sizes()
    if int(y.shape[0]) != n:
        raise ValueError(f"X has {n} rows and y has {y.shape[0]}: they must match.")
    return list(y.rechunk((tuple(rows for _, _, rows in chunks),)).to_delayed())


def _as_dask_vector(y, name):
    if y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None.")
    if hasattr(y, "to_dask_array"):  # a dask Series
        y = y.to_dask_array(lengths=True)
    if not hasattr(y, "__dask_graph__") or getattr(y, "ndim", None) not in (1, 2):
        raise ValueError(f"{name} fits a Dask X with a Dask y (a 1-D dask array or "
                         f"series aligned with X's rows); got {type(y).__name__}.")
    if y.ndim == 2:
        if y.shape[1] != 1:
            raise ValueError(f"y must be 1-D, got shape {y.shape}.")
        y = y[:, 0]
    return y


def fit_output_perturbation_distributed(estimator, X, y):
    """``DPOutputPerturbation{Classifier,Regressor}.fit`` on a Dask collection (see the
    module doc); returns the fitted estimator."""
    from ..utils._data import declared_classes

    name = type(estimator).__name__
    is_regressor = name == "DPOutputPerturbationRegressor"
    centre = 0.0
    validate_params(estimator, estimator._parameter_constraints)
    _refuse(estimator, is_regressor)
    chunks, (n, d), input_attrs = row_chunks(X)
    y_blocks = y_row_blocks(y, chunks, n, name)
    kernel = chunk_kernel(X)
    if is_regressor:
        loss = estimator.loss
        loss_param = float(estimator.huber_threshold) if loss == "huber" else 1.0
        if isinstance(estimator.label_bound, (tuple, list)):
            centre, label_bound = centred_interval(*estimator.label_bound)
        else:
            label_bound = 1.0 if estimator.label_bound is None else float(
                estimator.label_bound)
        classes, K = None, 1
    else:
        loss = estimator.loss
        loss_param = float(estimator.smoothing) if loss == "smoothed_hinge" else 1.0
        label_bound = 1.0
        # The label set: declared (checked against every label present), or read
        # from y with declared_classes' PrivacyLeakWarning; either way only the
        # distinct labels reach the driver.
        labels = dask.compute(*[dask.delayed(_labels, pure=True)(b) for b in y_blocks])
        present = np.unique(np.concatenate([np.asarray(v) for v in labels]))
        classes = declared_classes(estimator, present)
        K = 1 if classes.size == 2 else int(classes.size)
    norm_bound = float(estimator.norm_bound)
    c = estimator._intercept_scaling(d, norm_bound) if estimator.fit_intercept else 0.0
    delta = 0.0 if estimator.delta is None else float(estimator.delta)
    plan = plan_output_perturbation(
        n, d, K, loss=loss, loss_param=loss_param, epsilon=float(estimator.epsilon),
        delta=delta, alpha=estimator.alpha, objective=estimator.objective,
        radius=estimator.radius, calibration=estimator.calibration,
        tol=estimator.tol, norm_bound=norm_bound, sparsity=estimator.sparsity,
        intercept_scaling=c, label_bound=label_bound)

    prepare = dask.delayed(_prepare, pure=True, nout=2)
    pairs = [prepare(chunk, yb, off, rows, n, d, loss, classes, norm_bound,
                     plan.sparsity, label_bound, centre)
             for (chunk, off, rows), yb in zip(chunks, y_blocks)]
    data, stats = zip(*pairs)
    # Keep the bounded chunks where they are (on the workers with a distributed
    # client) for the passes; the driver receives the counts and digests only.
    data = dask.persist(*data)
    stats = dask.compute(*stats)
    counts = np.sum([s[0] for s in stats], axis=0, dtype=np.int64)
    digest_x, digest_t = stats[0][1], stats[0][2]
    for s in stats[1:]:
        digest_x = merge_digests(digest_x, s[1], n)
        digest_t = merge_digests(digest_t, s[2], n)
    rows = DaskRows(list(data), n, d, counts)
    theta, _ = certified_minimizers(rows, plan, max_iter=estimator.solver_max_iter)

    # The key of the in-memory fit: fit_random_source(random_state, estimator, X,
    # targets), targets of shape (K, n) read by columns (one line per example).
    digests = [data_digest(digest_x, (n, d), kernel),
               final_digest(digest_t, (K, n), ("dense", "float64"), orientation="columns")]
    rng = fit_random_source_from_digests(estimator.random_state, estimator, digests)
    theta_hat, _ = release(theta, plan, rng)
    coef = theta_hat[:, :d]
    intercept = c * theta_hat[:, d] if c > 0 else np.zeros(K)
    if centre != 0.0:
        intercept = intercept + centre  # post-processing by a public constant
    attrs = dict(input_attrs, alpha_=plan.alpha, noise_scale_=plan.noise_scale, tol_=plan.tol,
                 intercept_scaling_=c, norm_bound_=norm_bound)
    attrs[_DTYPE_KEY] = np.dtype(kernel[1])
    if is_regressor:
        attrs.update(label_bound_=label_bound, label_center_=centre, coef_=coef[0],
                     intercept_=float(intercept[0]))
    else:
        attrs.update(classes_=classes, coef_=coef, intercept_=intercept)
    return estimator._store(plan.budget, attrs)
