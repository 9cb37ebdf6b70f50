"""Choosing and running a private sparse-mean method from public quantities only.

``predicted_error`` evaluates the high-probability error bounds of Ghazi, Guzmán,
Kamath, Kumar and Manurangsi (2024 v1), "Differentially private optimization with
sparse gradients" (Theorems 3.2, 3.3, 3.4), with the constants their proofs make
explicit and the hidden absolute constants set to 1, at failure probability β, and the
soft-thresholding risk bound below. It reads only (n, d, s, ε, δ, L), never the data,
so choosing a method by it costs no privacy.

Thresholding (``"threshold"``)
------------------------------
The dense release z = μ + ξ (the same noise as ``"gaussian"`` / ``"laplace"``) is
hard-thresholded coordinate-wise at the noise level, z_j ↦ z_j·1{|z_j| > λ}, then
projected onto the ℓ1 ball of radius L√s and the ℓ2 ball of radius L, all
post-processing of z (no privacy cost). λ = σ√(2 ln d) for Gaussian noise (Donoho
and Johnstone 1994, "Ideal spatial adaptation by wavelet shrinkage", the universal
threshold: all d pure-noise coordinates are killed with probability → 1) and
λ = b ln d for Laplace noise (P(|ξ_j| > b ln d) = 1/d). Their oracle
inequality for soft thresholding (Theorem 1 there), E‖θ̂ − μ‖₂² ≤ (2 ln d + 1)(σ² +
Σ_j min(μ_j², σ²)), with Σ_j min(μ_j², σ²) ≤ σ‖μ‖₁ ≤ σL√s for the mean of rows in
the bounded domain, gives √((2 ln d + 1)(σ² + min(σL√s, dσ²))) whatever the data:
σ·√(ln d) times a sparsity term instead of the dense σ√d. Hard thresholding obeys
the same bound up to a constant (same paper, Section 4). Hard thresholding was
kept because it does not shrink the large coordinates: on generated sparse rows
(``make_sparse_vectors``, power-law and uniform columns, n = 10⁴–10⁵,
d = 10⁴–2¹⁸, s = 10–20) it was never worse than the zero vector by more than 1 %
and beat the projection by up to 25 %, where soft thresholding at the same λ only
matched the projection. The output has
few nonzeros, hence the ``output="sparse"`` option of the estimator.

Declared one-hot blocks (``one_hot_blocks``)
--------------------------------------------
With declared categories every row has one nonzero in each field's block of columns.
:func:`plan_sparse_mean` then plans the release for rows clipped to be nonnegative
(contribution bounding): two nonnegative rows of norm ≤ L differ by at most √2·L,
since ‖x − x'‖² = ‖x‖² + ‖x'‖² − 2⟨x, x'⟩ and ⟨x, x'⟩ ≥ 0, so the Gaussian noise is
for √2·L/n instead of 2L/n (Laplace unchanged: the ℓ1 change is still up to 2L√s).
:func:`post_process` finally projects onto the product of the blocks' simplices
(:func:`one_hot_block_total` gives their sum), which contains the mean of declared
rows and lies inside both balls (k·t ≤ L√s, √k·t ≤ L). A false declaration keeps the
guarantee (the clipping is enforced) and costs only accuracy.

``"auto"`` (:func:`choose_method`) takes threshold when μ̄ = L√s / min(d, n·s) is
below the noise's standard deviation, else the projection; with δ > 0, ℓ1-recovery
instead of the projection when its bound (above) is smaller. μ̄ is the
per-coordinate signal of the mean if its public ℓ1 mass L√s were spread evenly over
the largest support n rows of s nonzeros can have (public numbers only). On such a
mean, thresholding kills the coordinates (each costs μ̄²) and the projection keeps
them with their noise (each costs about σ²), hence the rule. A former rule compared
a worst-case bound of thresholding, √(4λ′L√s), with the dense release's; its
constant 4 was loose and it chose the projection on hashed text where thresholding
was 2× better. The new rule was checked on generated rows only
(``make_sparse_vectors``, power-law and uniform columns, n ∈ {2·10³, 2·10⁴}, d ∈
{2¹², 2¹⁶}, s ∈ {5, 40}, ε ∈ {0.5, 2}, 3 seeds each): thresholding won in every cell
with μ̄/λ ≤ 0.16 (λ = σ√(2 ln d)) but two near-ties (error ratios 1.00 and 1.07), the
projection in every cell with μ̄/λ ≥ 0.44, and the rule's cut, μ̄ = σ, is at
μ̄/λ = 1/√(2 ln d) ≈ 0.21–0.25 there: no constant was fitted. With four
hashed-text-like cells (d = 2¹⁸, s = 185) it picks the winner in 35 of 36 cells,
the former rule in 17 of the first 32 (``benchmarks/bench_sparse_mean.py --part
5``). On the real rows of
``benchmarks/real_data/means.py`` (a test, not a fit) it picks thresholding on
hashed text (μ̄/σ ≤ 0.2) and the projection on the one-hot tasks (μ̄/σ ≥ 1.3 at
ε ≥ 1).
"""

from dataclasses import dataclass

import numpy as np

from .l1_recovery import (
    L1RecoveryPlan, l1_recovery, measurement_noise_sigma, n_measurements, plan_l1_recovery,
    uses_compressed_sensing,
)
from .._kernels.projections import project_blocks_simplex_nb, project_l1_then_l2_nb
from .projection import bounded_mean, mean_noise, plan_projection, release_bounded_mean

METHODS = ("threshold", "projection", "l1_recovery", "gaussian", "laplace")


def predicted_error(method, n, d, sparsity, epsilon, delta, norm_bound=1.0,
                    beta=0.05, calibration="analytic"):
    """Bound on the ℓ2 error of ``method`` holding with probability ≈ 1 − β.

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.

    * Dense noise (gaussian / laplace; Fact 2.4): Gaussian ‖ξ‖₂ ≤ σ(√d + √(2 ln 1/β));
      Laplace ‖ξ‖₂ ≤ b(√(2d) + ln(1/β)).
    * projection (Lemma 3.1): min(dense, √(2L√s‖ξ‖∞)) with ‖ξ‖∞ ≤ σ√(2 ln(2d/β))
      (Gaussian) or b ln(d/β) (Laplace), and at most 2L after the ℓ2-ball step.
    * l1_recovery (Thm 3.4): the Gaussian bound below d < m ln² m; above,
      σ'(√m + √(2 ln 1/β)) + L√(s ln(d/s)/m), σ' the measurement noise.
    """
    s = min(float(sparsity), d)
    L = float(norm_bound)
    if method == "threshold":
        # On the event ‖ξ‖∞ ≤ λ' (λ' the Fact 2.4 bound below, ≥ the threshold λ): a
        # killed coordinate has |μ_j| ≤ λ + λ' ≤ 2λ' and errs by |μ_j|; a kept one errs
        # by |ξ_j| ≤ λ' and has |μ_j| > λ − λ'... bounded crudely by the same
        # Σ_j min(|μ_j|, 2λ')·2λ' ≤ 4λ'‖μ‖₁ ≤ 4λ'L√s: the projection's form
        # (Lemma 3.1) with 4λ' for 2‖ξ‖∞. A heuristic bound, used only to choose.
        if delta == 0:
            _, b, _ = mean_noise(n, epsilon=epsilon, delta=0, norm_bound=L, sparsity=s)
            linf = b * np.log(d / beta)
        else:
            _, sigma, _ = mean_noise(n, epsilon=epsilon, delta=delta, norm_bound=L,
                                     sparsity=s, calibration=calibration)
            linf = sigma * np.sqrt(2 * np.log(2 * d / beta))
        return min(np.sqrt(4 * L * np.sqrt(s) * linf), 2 * L)
    if method == "l1_recovery":
        if delta == 0:
            return np.inf
        m = n_measurements(n, d, s, epsilon, delta)
        if not uses_compressed_sensing(d, m):
            return predicted_error("gaussian", n, d, s, epsilon, delta, L, beta, calibration)
        sigma_m = measurement_noise_sigma(
            n, epsilon=epsilon, delta=delta, norm_bound=L, calibration=calibration)
        approx = L * np.sqrt(s * np.log(max(d / s, np.e)) / m)
        # The norm test caps the output at 2L, so the error is at most 3L.
        return min(sigma_m * (np.sqrt(m) + np.sqrt(2 * np.log(1 / beta))) + approx, 3.0 * L)
    if method == "laplace" or (method == "projection" and delta == 0):
        if method == "laplace" and delta != 0:
            return np.inf
        _, b, _ = mean_noise(n, epsilon=epsilon, delta=0, norm_bound=L, sparsity=s)
        dense = b * (np.sqrt(2 * d) + np.log(1 / beta))
        linf = b * np.log(d / beta)
    elif method in ("gaussian", "projection"):
        if delta == 0:
            return np.inf
        _, sigma, _ = mean_noise(n, epsilon=epsilon, delta=delta, norm_bound=L,
                                 sparsity=s, calibration=calibration)
        dense = sigma * (np.sqrt(d) + np.sqrt(2 * np.log(1 / beta)))
        linf = sigma * np.sqrt(2 * np.log(2 * d / beta))
    else:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    if method in ("gaussian", "laplace"):
        return dense
    return min(dense, np.sqrt(2 * L * np.sqrt(s) * linf), 2 * L)


def spread_signal(n, d, sparsity, norm_bound=1.0):
    """μ̄ = L√s / min(d, n·s): the per-coordinate signal of the mean if its public ℓ1
    mass L√s were spread over the largest support n rows of s nonzeros can have.

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.
    """
    s = min(float(sparsity), d)
    return float(norm_bound) * np.sqrt(s) / min(float(d), float(n) * s)


def choose_method(n, d, sparsity, epsilon, delta, norm_bound=1.0, calibration="analytic"):
    """The method to run for (n, d, s, ε, δ, L), data-independent (module notes).

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover. Choosing a
    method by it costs no privacy.

    Thresholding when the spread signal μ̄ (:func:`spread_signal`) is below the noise's
    standard deviation (σ, or b√2 for Laplace noise), else the projection, or
    ℓ1-recovery instead if its bound is smaller than the projection's (δ > 0). Why:
    on a coordinate of signal μ, killing it costs μ², keeping it costs the noise
    variance; a mean whose mass is spread thinner than the noise loses less by
    thresholding than by keeping d noisy coordinates the projection lets through.
    """
    kind, scale, _ = mean_noise(n, epsilon=epsilon, delta=delta, norm_bound=norm_bound,
                                sparsity=min(float(sparsity), d), calibration=calibration)
    noise_sd = scale * np.sqrt(2.0) if kind == "laplace" else scale
    best = ("threshold" if spread_signal(n, d, sparsity, norm_bound) < noise_sd
            else "projection")
    if best == "projection" and delta > 0:
        # Both bounds are of one kind (Lemma 3.1 and Theorem 3.4); thresholding's is a
        # loose heuristic, and ℓ1-recovery never beat thresholding where measured.
        err = predicted_error("projection", n, d, sparsity, epsilon, delta, norm_bound,
                              calibration=calibration)
        if predicted_error("l1_recovery", n, d, sparsity, epsilon, delta, norm_bound,
                           calibration=calibration) < err:
            best = "l1_recovery"
    return best


def _project_nonnegative(z, l1_bound, l2_bound):
    """Project ``z`` in place onto {v ≥ 0, Σ_j v_j ≤ l1_bound}, then onto the ℓ2 ball
    of radius ``l2_bound`` (post-processing).

    **Privacy guarantee.** None needed: applied to a private release and public
    bounds it is post-processing, which keeps the release's guarantee for the same
    neighbouring datasets (Dwork and Roth 2014, Proposition 2.1). Assumptions: the
    bounds are public. Not covered: applied to a statistic of the data without noise,
    its output is not private.

    For rows declared nonnegative (one-hot, counts, tf-idf), the bounded mean lies in
    both sets, and a projection onto a closed convex set containing the mean never
    moves an estimate away from it (‖P(z) − μ‖₂ ≤ ‖z − μ‖₂), so neither step can
    increase the error. The first set is the nonnegative part of the ℓ1 ball of the
    projection mechanism: on top of it, the projection sets every coordinate the noise
    pushed below 0 to 0. The capped simplex projection: max(z, 0) if its sum is at
    most the bound, else max(z − θ, 0) with θ > 0 such that the sum equals the bound
    (sort and cumulative sums, O(d log d); Duchi, Shalev-Shwartz, Singer and Chandra
    2008, "Efficient projections onto the ℓ1-ball for learning in high dimensions",
    Figure 1).
    """
    w = np.maximum(z, 0.0)
    total = float(w.sum())
    if total > l1_bound:
        u = np.sort(w)[::-1]
        css = np.cumsum(u) - l1_bound
        k = np.arange(1, u.size + 1)
        rho = int(np.nonzero(u - css / k > 0)[0][-1])
        theta = css[rho] / (rho + 1)
        w = np.maximum(w - theta, 0.0)
    norm = float(np.sqrt(np.dot(w, w)))
    if norm > l2_bound:
        w *= l2_bound / norm
    z[...] = w
    return z


def one_hot_block_total(n_blocks, norm_bound, sparsity, block_value=1.0):
    """The sum of each block of the bounded mean of declared one-hot rows: min(v,
    L/√k, L√s/k) for k blocks and a row value v (public numbers only).

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.

    A declared row has one entry v in each of its k blocks: ‖x‖₂ = v√k, ‖x‖₁ = vk.
    Contribution bounding scales it by min(1, L/(v√k), L√s/(vk)), so each of its
    blocks sums to min(v, L/√k, L√s/k), and so does each block of the mean of such
    rows. v = 1 is :class:`~sklearn.preprocessing.OneHotEncoder`'s output; after a
    row ``Normalizer`` it is 1/√k, and both give L/√k when L ≤ 1.
    """
    k = float(n_blocks)
    L = float(norm_bound)
    return min(float(block_value), L / np.sqrt(k), L * np.sqrt(float(sparsity)) / k)


@dataclass(frozen=True)
class SparseMeanPlan:
    """The plan of one private sparse mean (public numbers only), built by
    :func:`plan_sparse_mean` (or :func:`plan_threshold`) and run by
    :func:`sparse_mean`.

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` is the guarantee of :func:`sparse_mean` run with it: that of
    ``release`` (:class:`~skdpsparse.mechanisms.projection.ProjectionPlan` or
    :class:`~skdpsparse.mechanisms.l1_recovery.L1RecoveryPlan`), for one row replaced
    (n and d public). Everything else in the plan (the threshold, the nonnegative and
    block projections) is post-processing of that release with public numbers.

    Attributes
    ----------
    method : str
        One of :data:`METHODS`.
    release : ProjectionPlan or L1RecoveryPlan
        The private release (noise scale, sensitivity, budget, bounds).
    threshold : float or None
        λ of ``"threshold"`` (:func:`noise_threshold`).
    nonnegative : bool
        Project onto {v ≥ 0, Σv ≤ L√s} and the ℓ2 ball (post-processing).
    block_offsets : tuple of int or None
        The declared one-hot blocks: block b is columns offsets[b]:offsets[b + 1].
    block_total : float or None
        The sum of every block of the bounded mean (:func:`one_hot_block_total`).
    """

    method: str
    release: object
    threshold: float | None = None
    nonnegative: bool = False
    block_offsets: tuple | None = None
    block_total: float | None = None

    @property
    def budget(self):
        """The guarantee of the release (PureDP or ApproxDP, with its event)."""
        return self.release.budget

    @property
    def method_run(self):
        """What actually runs: ``"gaussian"`` for ℓ1-recovery below its threshold."""
        if isinstance(self.release, L1RecoveryPlan) and self.release.branch == "gaussian":
            return "gaussian"
        return self.method


def _block_offsets(one_hot_blocks, n_features):
    """Offsets of the declared block sizes, checked against d (a clear error naming
    the parameter)."""
    sizes = np.asarray(one_hot_blocks)
    if sizes.ndim != 1 or sizes.size == 0:
        raise ValueError("one_hot_blocks must be a non-empty 1-D list of block sizes, "
                         f"got an array of shape {sizes.shape}.")
    if not (np.issubdtype(sizes.dtype, np.integer)
            or (np.issubdtype(sizes.dtype, np.floating) and np.all(sizes == np.round(sizes)))):
        raise ValueError(f"one_hot_blocks must hold integers, got {one_hot_blocks!r}.")
    sizes = sizes.astype(np.int64)
    if sizes.min() < 1:
        raise ValueError(f"one_hot_blocks must be positive sizes, got {sizes.min()}.")
    if int(sizes.sum()) != int(n_features):
        raise ValueError(f"one_hot_blocks sums to {int(sizes.sum())} columns, but X has "
                         f"{int(n_features)} features: declare one size per encoded "
                         "field (e.g. [len(c) for c in encoder.categories_]).")
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(sizes)]))


def plan_sparse_mean(n_samples, n_features, *, method, epsilon, delta, norm_bound,
                     sparsity, calibration="analytic", recovery="denoising", max_iter=500,
                     tol=1e-4, nonnegative=False, one_hot_blocks=None, block_value=1.0):
    """The plan of one of :data:`METHODS` from public numbers (no data enters).

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`SparseMeanPlan`): ε-DP for δ = 0, (ε, δ)-DP
    for δ > 0, one row replaced. Assumptions: every argument chosen without the data;
    the declarations (``nonnegative``, ``one_hot_blocks``) may be false without any
    privacy cost (they clip the rows or post-process the release).

    ``one_hot_blocks`` (with ``"threshold"`` or ``"projection"``): every row is
    clipped to be nonnegative before the bounds (contribution bounding), which lowers
    the Gaussian release's ℓ2 sensitivity from 2L/n to √2·L/n
    (:data:`~skdpsparse.mechanisms.projection.L2_CHANGE`; the Laplace release's ℓ1
    sensitivity stays 2L√s/n), and the release is finally projected onto the product
    of the blocks' simplices {v_b ≥ 0, Σ v_b = t} (t from
    :func:`one_hot_block_total`). Ignored by the dense baselines and ℓ1-recovery.

    Examples
    --------
    Two declared fields of 3 and 2 categories: the noise is for √2·L/n, and each
    block of the release sums to L/√2.

    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from skdpsparse.mechanisms.sparse_mean import plan_sparse_mean, sparse_mean
    >>> plan = plan_sparse_mean(400, 5, method="projection", epsilon=1.0, delta=1e-6,
    ...                         norm_bound=1.0, sparsity=2, one_hot_blocks=[3, 2])
    >>> bool(np.isclose(plan.release.sensitivity, np.sqrt(2) / 400))
    True
    >>> X = sp.csr_matrix(np.tile([1.0, 0, 0, 0, 1.0], (400, 1)))
    >>> z, info = sparse_mean(X, plan, np.random.default_rng(0))
    >>> bool(np.isclose(z[:3].sum(), 1 / np.sqrt(2))), bool(z.min() >= 0)
    (True, True)
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}.")
    if method == "laplace" and delta != 0:
        raise ValueError("method='laplace' is the pure-DP baseline: set delta=0.")
    if method == "gaussian" and delta == 0:
        raise ValueError("method='gaussian' needs delta > 0.")
    n, d = int(n_samples), int(n_features)
    if method == "l1_recovery":
        return SparseMeanPlan("l1_recovery", plan_l1_recovery(
            n, d, epsilon=epsilon, delta=delta, norm_bound=norm_bound, sparsity=sparsity,
            calibration=calibration, recovery=recovery, max_iter=max_iter, tol=tol))
    post = method in ("threshold", "projection")
    offsets = _block_offsets(one_hot_blocks, d) if one_hot_blocks is not None else None
    declared = post and offsets is not None
    release = plan_projection(n, d, epsilon=epsilon, delta=delta, norm_bound=norm_bound,
                              sparsity=sparsity, calibration=calibration,
                              project=method == "projection", nonnegative_rows=declared)
    threshold = None
    if method == "threshold":
        threshold = noise_threshold(n, d, epsilon=epsilon, delta=delta,
                                    norm_bound=norm_bound, sparsity=sparsity,
                                    calibration=calibration, nonnegative_rows=declared)
    return SparseMeanPlan(
        method, release, threshold, nonnegative=bool(nonnegative) and post,
        block_offsets=offsets if declared else None,
        block_total=(one_hot_block_total(len(offsets) - 1, norm_bound, sparsity, block_value)
                     if declared else None))


def plan_threshold(n_samples, n_features, *, epsilon, delta, norm_bound, sparsity,
                   calibration="analytic", nonnegative=False, one_hot_blocks=None,
                   block_value=1.0):
    """:func:`plan_sparse_mean` with ``method="threshold"``: the dense release, then
    hard thresholding at λ (module notes).

    **Privacy guarantee.** That of the dense release it plans (ε-DP for δ = 0,
    (ε, δ)-DP for δ > 0, one row replaced); λ is public. Assumptions: the arguments
    chosen without the data.
    """
    return plan_sparse_mean(n_samples, n_features, method="threshold", epsilon=epsilon,
                            delta=delta, norm_bound=norm_bound, sparsity=sparsity,
                            calibration=calibration, nonnegative=nonnegative,
                            one_hot_blocks=one_hot_blocks, block_value=block_value)


def sparse_mean(X, plan, rng):
    """Run a :class:`SparseMeanPlan` on the rows of ``X``; returns (estimate, info).

    **Privacy guarantee.** ``plan.budget`` for one row of ``X`` replaced (n and d
    public), for a plan from :func:`plan_sparse_mean`: the release of ``plan.release``,
    then post-processing with public numbers only. Assumptions: a secret random
    source. Not covered: add/remove neighbours; user-level privacy; timing side
    channels (the solver's iterations read only the noisy release).
    """
    release = plan.release
    if isinstance(release, L1RecoveryPlan):
        return l1_recovery(X, release, rng)
    if X.shape != (release.n_samples, release.n_features):
        raise ValueError(f"X has shape {X.shape}, but the plan is for "
                         f"({release.n_samples}, {release.n_features}).")
    mean = bounded_mean(X, release.norm_bound, release.sparsity, release.nonnegative_rows)
    z = release_bounded_mean(mean, release, rng)
    return post_process(z, plan), _info(plan)


def post_process(z, plan):
    """The plan's post-processing of the release ``z`` (in place): the threshold, the
    ℓ1/ℓ2 projection after it, then the declared nonnegative or one-hot projection.

    **Privacy guarantee.** None needed: public numbers applied to a private release,
    post-processing (Dwork and Roth 2014, Proposition 2.1), so the release keeps its
    guarantee for the same neighbouring datasets. Not covered: applied to a
    statistic without noise, its output is not private.
    """
    release = plan.release
    if plan.threshold is not None:
        z[np.abs(z) <= plan.threshold] = 0.0
        project_l1_then_l2_nb(z, release.l1_bound, release.l2_bound)
    if plan.block_offsets is not None:
        # The product of simplices {v_b ≥ 0, Σ v_b = t} holds the bounded mean of
        # declared rows and lies inside the nonnegative ℓ1 ball and the ℓ2 ball
        # (kt ≤ L√s and √k·t ≤ L), so it replaces both projections.
        project_blocks_simplex_nb(z, np.asarray(plan.block_offsets, dtype=np.int64),
                                  plan.block_total)
    elif plan.nonnegative:
        _project_nonnegative(z, release.l1_bound, release.l2_bound)
    return z


def _info(plan):
    if plan.threshold is not None:
        return {"branch": plan.method, "threshold": plan.threshold}
    return {"branch": plan.method}


def private_sparse_mean(X, method, *, epsilon, delta, norm_bound, sparsity, rng,
                        calibration="analytic", recovery="denoising", max_iter=500,
                        tol=1e-4, nonnegative=False):
    """Run one of :data:`METHODS` on the rows of ``X``; returns (estimate, budget, info):
    :func:`plan_sparse_mean`, then :func:`sparse_mean`.

    **Privacy guarantee.** Protected: one row of ``X`` (neighbouring datasets differ
    by replacing one row; n public). The guarantee of the method run: threshold,
    projection, gaussian and laplace are
    :func:`~skdpsparse.mechanisms.projection.projection_mechanism` (ε-DP for δ = 0,
    (ε, δ)-DP for δ > 0) followed by post-processing (the threshold is public);
    l1_recovery is :func:`~skdpsparse.mechanisms.l1_recovery.gaussian_l1_recovery`,
    (ε, δ)-DP. Assumptions: L, s and the method chosen without the data; a secret
    random source. Not covered: add/remove neighbours; user-level privacy; timing
    side channels (the solver's iterations read only the noisy release).

    ``nonnegative=True`` (rows declared nonnegative) adds the projection onto
    {v ≥ 0, Σ_j v_j ≤ L√s} and the ℓ2 ball after the projection or the thresholding
    (post-processing; ignored by the dense baselines and ℓ1-recovery).
    """
    plan = plan_sparse_mean(X.shape[0], X.shape[1], method=method, epsilon=epsilon,
                            delta=delta, norm_bound=norm_bound, sparsity=sparsity,
                            calibration=calibration, recovery=recovery, max_iter=max_iter,
                            tol=tol, nonnegative=nonnegative)
    z, info = sparse_mean(X, plan, rng)
    return z, plan.budget, info


def noise_threshold(n, d, *, epsilon, delta, norm_bound, sparsity, calibration="analytic",
                    nonnegative_rows=False):
    """λ of the thresholding (module notes): σ√(2 ln d) for the Gaussian noise of
    the dense release, b·ln d for its Laplace noise; public numbers only.

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.
    """
    kind, scale, _ = mean_noise(n, epsilon=epsilon, delta=delta, norm_bound=norm_bound,
                                sparsity=sparsity, calibration=calibration,
                                nonnegative_rows=nonnegative_rows)
    if kind == "laplace":
        return scale * np.log(max(d, 2))
    return scale * np.sqrt(2.0 * np.log(max(d, 2)))
