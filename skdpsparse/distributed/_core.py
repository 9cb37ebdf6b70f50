"""The engine-free core of a decomposable fit: ``partial``, ``merge``, ``release``.

A private mean of contribution-bounded rows is release(Σ_chunks partial(chunk)):

* :func:`partial_bounded_sum` reads one chunk of rows and returns its
  :class:`BoundedSumPart`: the column sums of the rows scaled into the bounds
  {‖x‖₂ ≤ L, ‖x‖₁ ≤ L√s}, each entry rounded to 2^-F, as **exact int64**
  (:func:`skdpsparse._kernels.fixed_point.bounded_fixed_sum`, the in-memory
  kernel), its row count, and its share of the data digest. It rejects NaN and
  infinite values as the in-memory fit does. It sees only the chunk and a
  :class:`BoundedSumPlan` of public numbers: no seed, no key, no estimator.
* :func:`merge_parts` adds two parts: integer sums, so the total is the same for
  every chunking, merge order, retry and number of workers, bit for bit.
* :func:`release_sparse_mean` runs on the driver: the one noise draw through
  :func:`skdpsparse.mechanisms.projection.projection_mechanism` (hence
  :func:`skdpsparse.mechanisms.noise.add_noise_inplace`), with the plan and
  sensitivity of the in-memory fit, then the post-processing of the chosen method.

:func:`fit_sparse_mean_in_memory` is release(partial(X)) on an in-memory array: the
path the in-memory estimator can switch to, so that both run this code.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._kernels.fixed_point import bounded_fixed_sum
from .._kernels.projections import project_l1_then_l2_nb
from ..mechanisms.projection import mean_fixed_point_bits, projection_mechanism, row_bounds
from ..mechanisms.sparse_mean import choose_method, noise_threshold
from ..utils._random import _digest_array
from ..utils._random import fit_random_source_from_digests as _fit_key
from ..utils._digest import DigestPart, chunk_digest, final_digest, merge_digests

__all__ = ["BoundedSumPart", "BoundedSumPlan", "check_chunk", "fit_random_source_from_digests",
           "merge_parts", "partial_bounded_sum", "release_sparse_mean",
           "sparse_mean_plan"]


# ---------------------------------------------------------------- the plan and a part
@dataclass(frozen=True)
class BoundedSumPlan:
    """What a worker needs to sum bounded rows: public numbers only.

    Attributes
    ----------
    n_rows : int
        n of the whole matrix (public under replacement neighbours); fixes F.
    n_features : int
    l2_bound, l1_bound : float
        L and L√s.
    frac_bits : int
        F: entries are rounded to 2^-F; n·(L·2^F + 1) < 2^62, so no int64 sum of the
        whole matrix can overflow
        (:func:`skdpsparse.mechanisms.projection.mean_fixed_point_bits`).
    """

    n_rows: int
    n_features: int
    l2_bound: float
    l1_bound: float
    frac_bits: int


@dataclass
class BoundedSumPart:
    """The bounded statistic of some rows: exact sums, a row count, a digest part
    (None when not computed)."""

    sums: np.ndarray  # int64, shape (n_features,)
    n_rows: int
    digest: DigestPart


def check_chunk_targets(chunk, y, n_features, row_offset, rows, numeric=True):
    """A chunk (:func:`check_chunk`) and its targets, checked: as many as the metadata
    said, and (``numeric``) numeric and finite, returned as float64; else a clear
    error naming the chunk's first row."""
    chunk = check_chunk(chunk, n_features, row_offset)
    y = np.asarray(y)
    if y.ndim != 1 or chunk.shape[0] != rows or y.shape[0] != rows:
        raise ValueError(f"the chunk at row {row_offset} has {chunk.shape[0]} rows and "
                         f"{y.shape[0]} targets; its metadata said {rows}.")
    if not numeric:
        return chunk, y
    if y.dtype.kind not in "biuf":
        raise ValueError(f"y must be numeric; the targets of the chunk at row "
                         f"{row_offset} have dtype {y.dtype}.")
    y = np.asarray(y, dtype=np.float64)
    if not np.isfinite(y).all():
        raise ValueError(f"Input y contains NaN or infinity (in the chunk starting at "
                         f"row {row_offset}).")
    return chunk, y


def check_chunk(chunk, n_features, row_offset=0):
    """One chunk as the in-memory validation would leave it, or a clear error.

    Dense stays dense and sparse becomes canonical CSR; float32 is kept and every
    other numeric dtype becomes float64 (scikit-learn's ``dtype=[float64, float32]``).
    NaN or infinite values raise ``ValueError`` with scikit-learn's wording, naming
    the chunk's first row: malformed data, not a privacy question (a finite row out
    of bounds is scaled, never rejected).
    """
    if hasattr(chunk, "to_numpy") and hasattr(chunk, "dtypes"):  # a pandas partition
        chunk = chunk.to_numpy(dtype=np.float32 if all(
            str(t) == "float32" for t in chunk.dtypes) else np.float64)
    if sp.issparse(chunk):
        dtype = chunk.dtype if chunk.dtype in (np.float32, np.float64) else np.float64
        chunk = sp.csr_matrix(chunk, dtype=dtype)
        if not chunk.has_canonical_format:
            chunk = chunk.copy()
            chunk.sum_duplicates()
        values = chunk.data
    else:
        chunk = np.asarray(chunk)
        if chunk.dtype.kind not in "biuf":
            raise ValueError(f"X must be numeric; a chunk at row {row_offset} has dtype "
                             f"{chunk.dtype}.")
        if chunk.dtype not in (np.float32, np.float64):
            chunk = chunk.astype(np.float64)
        if chunk.ndim != 2:
            raise ValueError(f"X must be 2-D; a chunk at row {row_offset} has "
                             f"{chunk.ndim} dimension(s).")
        values = chunk
    if chunk.shape[1] != n_features:
        raise ValueError(f"a chunk at row {row_offset} has {chunk.shape[1]} columns, "
                         f"expected {n_features}.")
    if not np.isfinite(values).all():
        what = "NaN" if np.isnan(values).any() else \
            f"infinity or a value too large for dtype({values.dtype.name!r})"
        raise ValueError(f"Input X contains {what} (in the chunk starting at row "
                         f"{row_offset}).")
    return chunk


def partial_bounded_sum(chunk, plan, row_offset, expected_rows=None, digest=True):
    """The :class:`BoundedSumPart` of one chunk (runs on a worker; pure function).

    Parameters
    ----------
    chunk : ndarray, scipy.sparse matrix or pandas DataFrame of shape (rows, d)
    plan : BoundedSumPlan
    row_offset : int
        Index of the chunk's first row in the whole matrix (for the digest).
    expected_rows : int, optional
        The row count the driver was told; a chunk of another size is refused, since
        n (hence F and the noise scale) was computed from the declared sizes.
    """
    chunk = check_chunk(chunk, plan.n_features, row_offset)
    rows = chunk.shape[0]
    if expected_rows is not None and rows != expected_rows:
        raise ValueError(f"the chunk at row {row_offset} has {rows} rows, its metadata "
                         f"said {expected_rows}: n would be wrong.")
    if sp.issparse(chunk):
        sums = bounded_fixed_sum((chunk.indptr, chunk.indices, chunk.data),
                                 plan.n_features, plan.l2_bound, plan.l1_bound,
                                 plan.frac_bits)
    else:
        sums = bounded_fixed_sum(chunk, plan.n_features, plan.l2_bound, plan.l1_bound,
                                 plan.frac_bits)
    return BoundedSumPart(np.asarray(sums, dtype=np.int64), rows,
                          chunk_digest(chunk, row_offset, plan.n_rows) if digest else None)


def merge_parts(a, b, n_rows_total):
    """The part of the rows of two disjoint parts (exact integer addition)."""
    digest = None if a.digest is None or b.digest is None else \
        merge_digests(a.digest, b.digest, n_rows_total)
    return BoundedSumPart(a.sums + b.sums, a.n_rows + b.n_rows, digest)


def merge_all(parts, n_rows_total):
    """Merge a list of parts pairwise (any order gives the same result)."""
    parts = list(parts)
    if not parts:
        raise ValueError("X has no rows.")
    while len(parts) > 1:
        parts = [merge_parts(parts[i], parts[i + 1], n_rows_total)
                 if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


# ----------------------------------------------------------------- key of the fit
def data_digest(part, shape, kernel):
    """The final digest of a data matrix of ``shape`` read by rows from its merged
    part, as the in-memory key digests it: a dense matrix of one column is digested
    there as the vector of its n entries (``skdpsparse.utils._random._digest_array``),
    so it is here (the chunks' lines are the same; only the final tag differs), and
    the same seed gives the same key for it too."""
    n, d = shape
    if d == 1 and kernel[0] == "dense":
        return final_digest(part, (n,), ("vector",), orientation="rows")
    return final_digest(part, shape, kernel, orientation="rows")


def fit_random_source_from_digests(random_state, estimator, digests):
    """:func:`skdpsparse.utils.fit_random_source` with the data digests given.

    The same derivation (BLAKE2b keyed by H(seed material), over the estimator's class,
    its parameters except ``random_state``, and one digest per data array), with the
    digests merged from the chunks (:mod:`skdpsparse.utils._digest`, the same
    function of the data as in memory). Runs on the driver only.
    """
    return _fit_key(random_state, estimator, digests, stacklevel=4)


def key_needs_data(estimator):
    """Whether the fit's key is derived from a digest of the data: False only for an
    estimator that declares every draw keyed by its statistic
    (``_noise_keyed_by_statistic``); a chunk pass may then skip the digest."""
    return not getattr(estimator, "_noise_keyed_by_statistic", False)


# ------------------------------------------------------------------ the sparse mean
def resolve_sparse_mean(estimator, n, d):
    """(method, s, δ) of a DPSparseMeanEstimator for n rows and d columns, with the
    in-memory fit's checks (public numbers only)."""
    s = d if estimator.sparsity is None else min(int(estimator.sparsity), d)
    delta = 0.0 if estimator.delta is None else float(estimator.delta)
    method = estimator.method
    if method == "auto":
        method = choose_method(n, d, s, estimator.epsilon, delta, estimator.norm_bound,
                               calibration=estimator.calibration)
    if delta == 0 and method in ("gaussian", "l1_recovery"):
        raise ValueError(f"method={method!r} needs delta > 0; got delta={estimator.delta!r}.")
    if delta > 0 and method == "laplace":
        raise ValueError("method='laplace' is the pure-DP baseline: it needs "
                         f"delta=0, got delta={estimator.delta!r}.")
    return method, s, delta


def sparse_mean_plan(n, d, norm_bound, sparsity):
    """The :class:`BoundedSumPlan` of the in-memory ``bounded_mean`` for n × d."""
    l2_bound, l1_bound = row_bounds(norm_bound, sparsity)
    return BoundedSumPlan(int(n), int(d), l2_bound, l1_bound,
                          int(mean_fixed_point_bits(int(n), float(norm_bound))))


def release_sparse_mean(part, plan, method, *, epsilon, delta, norm_bound, sparsity,
                        rng, calibration="analytic"):
    """The private mean from the merged part: one noise draw (driver only).

    The same steps as ``skdpsparse.mechanisms.sparse_mean.private_sparse_mean`` after
    its ``bounded_mean``: the mean is the exact sum rounded to float64 and divided by n
    (``bounded_mean``'s two roundings), then ``projection_mechanism`` draws the noise
    for the sensitivity ``bounded_mean_sensitivity`` states, then the method's
    post-processing. Returns (estimate, budget, info).
    """
    if part.n_rows != plan.n_rows:
        raise ValueError(f"the chunks held {part.n_rows} rows, not the n={plan.n_rows} "
                         "the noise was planned for.")
    if method == "l1_recovery":
        raise NotImplementedError(
            "method='l1_recovery' is not distributed yet: its statistic is a sum of "
            "clipped measurements A·x_i, which needs the sensing operator on the workers. "
            "Use method='threshold' (or fit in memory).")
    n = plan.n_rows
    mean = np.ldexp(part.sums.astype(np.float64), -plan.frac_bits) / n
    z, budget = projection_mechanism(
        mean, n, epsilon=epsilon, delta=delta, norm_bound=norm_bound, sparsity=sparsity,
        rng=rng, calibration=calibration, project=(method == "projection"))
    if method == "threshold":
        lam = noise_threshold(n, plan.n_features, epsilon=epsilon, delta=delta,
                              norm_bound=norm_bound, sparsity=sparsity,
                              calibration=calibration)
        z[np.abs(z) <= lam] = 0.0
        project_l1_then_l2_nb(z, plan.l1_bound, float(norm_bound))
        return z, budget, {"branch": method, "threshold": lam}
    return z, budget, {"branch": method}


def sparse_mean_attributes(estimator, part, plan, shape, input_attrs, digests=None,
                           kernel=("dense", "float64"), method=None):
    """The fitted attributes of a DPSparseMeanEstimator from the merged part (driver).

    Derives the fit's key, draws the noise once and returns the attributes for
    :func:`skdpsparse.base.release`. ``shape`` is (n, d) with n the number of privacy
    units (rows, or users for a user-level fit). The key takes the data digests (by
    default the merged part's, with the ``kernel`` tag of the data as the in-memory
    fit validates it), computed only if the key is derived from the data (see
    :func:`key_needs_data`).
    """
    n, d = shape
    resolved, s, delta = resolve_sparse_mean(estimator, n, d)
    method = resolved if method is None else method
    if digests is None:
        def digests():  # called only by a key derived from the data
            if part.digest is None:
                raise RuntimeError("this fit's key needs the data digest, and the "
                                   "chunks computed none (partial_bounded_sum with "
                                   "digest=False).")
            return [data_digest(part.digest, shape, kernel)]
    rng = fit_random_source_from_digests(estimator.random_state, estimator, digests)
    mean, budget, _ = release_sparse_mean(
        part, plan, method, epsilon=float(estimator.epsilon), delta=delta,
        norm_bound=float(estimator.norm_bound), sparsity=s, rng=rng,
        calibration=estimator.calibration)
    if estimator.output == "sparse":
        mean = sp.csr_array(mean.reshape(1, -1))
    return dict(input_attrs, mean_=mean, method_=method, sparsity_=s,
                privacy_spent_=budget)


def fit_sparse_mean_in_memory(estimator, X):
    """DPSparseMeanEstimator.fit as release(partial(X)) on an in-memory ``X``.

    **Privacy guarantee.** The estimator's: one row under replacement neighbours,
    (ε, δ)- or ε-DP through the projection, Gaussian or Laplace mechanism on the
    bounded mean (Ghazi, Guzmán, Kamath, Kumar and Manurangsi (2024), "Differentially
    Private Optimization with Sparse Gradients", Theorems 3.1 and 3.4's Gaussian
    branch; discrete noise of Canonne, Kamath and Steinke (2020), "The discrete
    Gaussian for differential privacy", Theorem 14) for the sensitivity of rows
    scaled into {‖x‖₂ ≤ L, ‖x‖₁ ≤ L√s} and summed exactly in fixed point. Not covered:
    ℓ1-recovery (refused here), and the noise when ``random_state`` is fixed.

    The path the in-memory estimator can call so that it runs the same code as the
    distributed fit (same statistic, same key, same release). Returns the estimator.
    """
    from ..utils import validate_params
    from ..base import fit_input, release

    validate_params(estimator, estimator._parameter_constraints)
    X, input_attrs = fit_input(estimator, X)
    n, d = X.shape
    method, s, _ = resolve_sparse_mean(estimator, n, d)
    if method == "l1_recovery":
        raise NotImplementedError("method='l1_recovery' has no partial/merge form yet; "
                                  "DPSparseMeanEstimator.fit runs it in memory.")
    plan = sparse_mean_plan(n, d, float(estimator.norm_bound), s)
    part = partial_bounded_sum(X, plan, 0, digest=False)
    return release(estimator, sparse_mean_attributes(estimator, part, plan, (n, d),
                                                     input_attrs,
                                                     digests=lambda: [_digest_array(X)]))
