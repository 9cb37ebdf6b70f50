"""Large-batch ``DPCyclicSGD`` past one machine: one round trip to the workers per step.

Cyclic DP-SGD (Kong and Ribero 2024, "Privacy of the last iterate in cyclically-sampled
DP-SGD on nonconvex composite losses", Algorithm 1) takes T = ⌈E·n/b⌉ steps; step t
reads the batch B_t of the b rows at positions tb, …, tb + b − 1 (mod n) of the pass
order, and releases their clipped gradient sum plus noise. On a Dask collection:

1. **prepare** (one task per chunk, persisted on the workers): the chunk checked as the
   in-memory validation checks it, its rows scaled into ‖x‖₂ ≤ R
   (:func:`~skdpsparse.mechanisms.cyclic_sgd.bound_rows_l2`, the in-memory function),
   its targets built (±1, ``classes_[1]`` positive) or checked finite; the driver
   receives the chunk's digest shares of X and of the targets (for the key) and, for
   a classifier, its distinct labels;
2. **steps**, on the driver: the plan is the in-memory fit's
   (:func:`~skdpsparse.mechanisms.cyclic_sgd.plan_cyclic_sgd`, public numbers; always
   the eager release, ``scale_floor`` = 1, where an in-memory CSR fit with the ℓ2²
   penalty runs the scaled lazy release: the same budget, another law); for
   each step the driver sends θ to the one or two chunks holding B_t, each returns
   the clipped gradient sum of its rows of B_t (the in-memory kernels
   ``dense_clipped_gradient_sum`` / ``csr_clipped_gradient_sum``) as a task result,
   and the driver adds them, draws the step's grid noise from the plan (the same
   calls as in memory, in blocks of steps) and applies the in-memory step
   (``_noisy_prox_step``: the displacement rounded to the grid, the integer noise
   added, the prox). Nothing random is shipped: the workers see a chunk, θ and
   public positions.

**The pass order is the collection's row order** (in-memory ``shuffle=False``); a fit
with ``shuffle=True`` is refused. Why this is private: the plan's guarantee is a
worst case over the position of the differing row in a *fixed* order (composition over
the at most ``max_uses`` steps that read any one row, Mironov 2017, "Rényi
differential privacy", Proposition 1; the in-memory docstring of ``shuffle``: "the
guarantee holds for every order"), so the order may be public and a function of the
row position is enough; the in-memory secret shuffle is for accuracy on sorted data,
not for the guarantee. Keeping it would make every step read every chunk (the b rows
of a batch scattered over all of them) and ship the secret order to the workers
anyway. Shuffle a sorted collection once beforehand (e.g. by a hash of a row id).

**Only large batches** (b ≥ :data:`MIN_BATCH`, decided on the plan's b, a public
number): each step is one round trip to the cluster (milliseconds on a local
scheduler, tens of milliseconds on a cluster), so a fit of small batches would be
dominated by T = E·n/b round trips; the refusal says so before any data is read.

**Same release as in memory** (same seed, same rows in the same order, ``shuffle=False``
in memory): the key is derived from the same digests, the noise is the same draws,
and a batch inside one chunk is summed by the in-memory kernel in the in-memory order,
so when every batch lies inside one chunk (chunk boundaries at multiples of b, n a
multiple of b) the coefficients are equal bit for bit. A batch cut by a chunk
boundary (or by the wrap at the end of a pass) is summed as two partial sums then
added: the same terms in another order. Each term has ℓ2 norm ≤ C, so both float sums
are within (b − 1)·u·Σ_i |g_ij| ≤ (b − 1)·u·b·C of the exact sum in coordinate j
(u = 2^-53; Higham 2002, "Accuracy and stability of numerical algorithms", eq. (4.4)),
and the displacements λ/b times them differ by at most 2(b − 1)·u·λC, which is
2(b − 1)·b·u/z of the noise's σ = λzC/b: below 2.3·10⁻⁸ σ at b = 10⁴ and z ≥ 1. The
noise grid γ is finer still (about 2^-29 σ at those numbers), so a coordinate's
rounding to the grid may move by a few steps γ, each some 10⁻⁹ σ: the fit differs from
the in-memory one by such moves only, propagated through the later steps
(``tests/distributed/test_cyclic_sgd_dask.py`` states and tests the bound). The
guarantee does not depend on the order of the sum: the clipping bounds every term,
whatever the order, and the rounding to the grid is charged in the noise as in memory.

Not distributed (refused, with the reason): more than two classes (the multiclass
kernels), lazy noise (a CSR fit without penalty adds its noise lazily in memory, with
other draws of the same law; here every step adds the dense noise, the eager path of
the same guarantee), and user-level units.
"""


import numpy as np
import scipy.sparse as sp

import dask

from .. import _kernels
from .._kernels.cyclic_sgd import BALL, BOX, NO_CONSTRAINT, _noisy_prox_step
from .._kernels.linear_losses import csr_clipped_gradient_sum, dense_clipped_gradient_sum
from ..mechanisms.cyclic_sgd import _NOISE_BLOCK, bound_rows_l2, plan_cyclic_sgd
from ..mechanisms.noise import grid_noise
from ..utils._digest import chunk_digest, final_digest, merge_digests
from ._core import check_chunk_targets, data_digest, fit_random_source_from_digests

__all__ = ["MIN_BATCH", "batch_segments", "fit_cyclic_sgd_distributed"]

#: The smallest batch a distributed fit takes: each step is one round trip to the
#: workers, so T = E·n/b of them must stay few (a public number).
MIN_BATCH = 10_000


def _prepare(chunk, y, offset, rows, n_total, n_features, classifier, positive,
             norm_bound):
    """One chunk, on a worker: (rows bounded, targets), and the digest shares of the
    chunk and of its targets (a vector: one line per example)."""
    chunk, y = check_chunk_targets(chunk, y, n_features, offset, rows,
                                   numeric=not classifier)
    targets = np.where(y == positive, 1.0, -1.0) if classifier else y
    digest_x = chunk_digest(chunk, offset, n_total)
    digest_y = chunk_digest(targets.reshape(-1, 1), offset, n_total)
    return (bound_rows_l2(chunk, norm_bound), np.ascontiguousarray(targets)), \
        (digest_x, digest_y)


def _gradient_sum(data, local_rows, theta, code, param, clip_norm, fit_intercept):
    """The clipped gradient sum of some rows of one prepared chunk at θ (a worker's
    task; public inputs only): the in-memory kernel on those rows, in their order."""
    Xb, yb = data
    d = Xb.shape[1]
    rows = np.asarray(local_rows, dtype=np.int64)
    w, b = theta[:d], float(theta[d])
    if sp.issparse(Xb):
        return csr_clipped_gradient_sum(Xb.indptr, Xb.indices, Xb.data, yb, w, b, code,
                                        param, clip_norm, d, rows, fit_intercept)
    return dense_clipped_gradient_sum(Xb, yb, w, b, code, param, clip_norm, rows,
                                      fit_intercept)


def batch_segments(start, batch_size, offsets, n):
    """The rows of the batch at pass positions start, …, start + b − 1 (mod n), as
    (chunk index, local rows) pieces in pass order: a public function of positions."""
    out = []
    pos, left = start, batch_size
    ends = list(offsets[1:]) + [n]
    while left:
        c = int(np.searchsorted(offsets, pos, side="right")) - 1
        stop = min(ends[c], pos + left)
        out.append((c, np.arange(pos - offsets[c], stop - offsets[c], dtype=np.int64)))
        left -= stop - pos
        pos = 0 if stop == n else stop
    return out


def _pass_steps(n, b, epochs):
    """Steps of each pass (``mechanisms.cyclic_sgd._pass_steps``): pass e ends at
    step ⌈(e+1)n/b⌉."""
    ends = [-(-(e + 1) * n // b) for e in range(epochs)]
    return [hi - lo for lo, hi in zip([0] + ends[:-1], ends)]


def _refuse(estimator):
    name = type(estimator).__name__
    if estimator.shuffle:
        raise NotImplementedError(
            f"{name}(shuffle=True) has no distributed fit: the distributed fit visits "
            "the rows in the collection's order. The guarantee holds for every fixed "
            "order (it is a worst case over the position of the differing row), so the "
            "secret shuffle is for accuracy, not privacy; keeping it would make every "
            "step read every chunk and ship the order to the workers. Pass "
            "shuffle=False (and shuffle a sorted collection once beforehand, e.g. by a "
            "hash of a row id).")


def fit_cyclic_sgd_distributed(estimator, X, y):
    """``DPCyclicSGD.fit`` on a Dask collection (module doc); the fitted estimator."""
    from ..base import release
    from ..utils import validate_params
    from ..utils._data import declared_classes
    from ..utils._progress import Progress
    from ._dask import row_chunks
    from ._output_perturbation import _labels, y_row_blocks

    name = type(estimator).__name__
    validate_params(estimator, estimator._parameter_constraints)
    _refuse(estimator)
    chunks, (n, d), attrs = row_chunks(X)
    loss_param = estimator._loss_param()
    classifier = estimator._is_classifier()
    epochs, batch_size = estimator._schedule(n)
    if min(int(batch_size), n) < MIN_BATCH:
        raise ValueError(
            f"{name} fits a Dask collection with large batches only: batch_size="
            f"{min(int(batch_size), n)} is below {MIN_BATCH}. Each step is one round trip "
            "to the workers, and this fit would take "
            f"{-(-epochs * n // max(1, min(int(batch_size), n)))} of them. Give "
            f"batch_size >= {MIN_BATCH} (the noise on a step's mean gradient is zC/b: "
            "large batches cost no privacy), or fit in memory.")
    y_blocks = y_row_blocks(y, chunks, n, name)
    positive = None
    if classifier:
        labels = dask.compute(*[dask.delayed(_labels, pure=True)(b) for b in y_blocks])
        present = np.unique(np.concatenate([np.asarray(v) for v in labels]))
        attrs["classes_"] = classes = declared_classes(estimator, present)
        if classes.size != 2:
            raise NotImplementedError(
                f"{name} with {classes.size} classes has no distributed fit yet (the "
                "multiclass step kernels are not split into per-chunk gradient sums); "
                "fit it in memory.")
        positive = classes[1]
    plan = plan_cyclic_sgd(
        n, d, loss=estimator.loss, loss_param=loss_param, n_outputs=1,
        norm_bound=float(estimator.norm_bound), fit_intercept=bool(estimator.fit_intercept),
        batch_size=batch_size, epochs=epochs, delta=float(estimator.delta),
        epsilon=float(estimator.epsilon), noise_multiplier=estimator.noise_multiplier,
        learning_rate=estimator.learning_rate, clip_norm=estimator.clip_norm,
        weak_convexity=estimator.weak_convexity, smoothness=estimator.smoothness,
        penalty=estimator.penalty, alpha=float(estimator.alpha),
        l1_ratio=float(estimator.l1_ratio), radius=estimator.radius,
        box=None if estimator.box is None else tuple(estimator.box))

    data, rng = persist_prepared(
        estimator, X, y_blocks, _prepare, classifier, positive, float(plan.norm_bound))

    progress = Progress(estimator.verbose, name)
    theta = _run_steps(data, [off for _, off, _ in chunks], n, d, plan, rng, progress)
    coef, intercept = theta[:d].copy(), np.array([float(theta[d])])
    attrs.update(
        coef_=coef[None, :] if classifier else coef, intercept_=intercept,
        n_iter_=plan.epochs, n_steps_=plan.n_steps, batch_size_=plan.batch_size,
        learning_rate_=plan.learning_rate, clip_norm_=plan.clip_norm,
        noise_multiplier_=plan.noise_multiplier, privacy_spent_=plan.budget,
        accounting_=plan.accounting)
    return release(estimator, attrs)


def persist_prepared(estimator, X, y_blocks, prepare, *args):
    """Run ``prepare(chunk, y_block, offset, rows, n, d, *args)`` on every chunk (a
    supervised fit's first pass), persist the prepared chunks on the workers and derive
    the fit's key from the digest shares of X and y they return, as in memory
    (``fit_random_source(random_state, estimator, X, y)``). Returns (the persisted
    chunks, the key's random source); driver only."""
    from ._dask import chunk_kernel, row_chunks

    chunks, (n, d), _ = row_chunks(X)
    task = dask.delayed(prepare, pure=True, nout=2)
    pairs = [task(chunk, yb, off, rows, n, d, *args)
             for (chunk, off, rows), yb in zip(chunks, y_blocks)]
    data, stats = zip(*pairs)
    data = dask.persist(*data)  # the prepared chunks stay where they are
    stats = dask.compute(*stats)
    digest_x, digest_y = stats[0]
    for s in stats[1:]:
        digest_x = merge_digests(digest_x, s[0], n)
        digest_y = merge_digests(digest_y, s[1], n)
    digests = [data_digest(digest_x, (n, d), chunk_kernel(X)),
               final_digest(digest_y, (n,), ("vector",), orientation="rows")]
    return data, fit_random_source_from_digests(estimator.random_state, estimator, digests)


def _run_steps(data, offsets, n, d, plan, rng, progress):
    """The T steps of ``mechanisms.cyclic_sgd.cyclic_sgd`` (``shuffle=False``, eager
    noise), each batch's gradient sum computed by the chunks holding it. Driver."""
    theta = np.zeros(d + 1)
    constraint, radius = NO_CONSTRAINT, 0.0
    lower = upper = np.zeros(1)
    p = d + 1 if plan.fit_intercept else d
    if plan.radius is not None:
        constraint, radius = BALL, plan.radius
    elif plan.box is not None:
        constraint = BOX
        lower, upper = np.array([plan.box[0]]), np.array([plan.box[1]])
        theta[:p] = np.clip(theta[:p], lower[0], upper[0])  # x_0 ∈ dom h
    code = _kernels.LOSS_CODES[plan.loss]
    b = plan.batch_size
    step = plan.learning_rate / b
    block = max(1, _NOISE_BLOCK // p)
    rounding_sensitivity = plan.learning_rate * plan.clip_norm / b
    task = dask.delayed(_gradient_sum, pure=True)
    offsets = np.asarray(offsets, dtype=np.int64)
    start = 0
    for epoch, steps in enumerate(_pass_steps(n, b, plan.epochs)):
        for k in range(0, steps, block):
            # The in-memory draws: one block of steps at a time, the same calls.
            noise, spacing = grid_noise((min(block, steps - k), p), rng, "gaussian",
                                        plan.noise_std, sensitivity=rounding_sensitivity)
            for t in range(noise.shape[0]):
                pieces = batch_segments(start, b, offsets, n)
                start = (start + b) % n
                sums = dask.compute(*[
                    task(data[c], rows, theta.copy(), code, plan.loss_param,
                         plan.clip_norm, plan.fit_intercept) for c, rows in pieces])
                coef_sum, intercept_sum = sums[0]
                for more_coef, more_intercept in sums[1:]:
                    coef_sum = coef_sum + more_coef
                    intercept_sum = intercept_sum + more_intercept
                _noisy_prox_step(theta, np.ascontiguousarray(coef_sum, dtype=np.float64),
                                 float(intercept_sum), step, noise[t], plan.fit_intercept,
                                 plan.learning_rate, plan.alpha, plan.l1_ratio, constraint,
                                 radius, lower, upper, spacing)
        progress.report("epoch", epoch + 1, plan.epochs, f"{steps} noisy steps")
    return theta
