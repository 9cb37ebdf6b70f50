"""The projection mechanism for sparse means (Ghazi et al. 2024 v1, Section 3, Algorithm 1).

A private mean of n vectors that are s-sparse with ℓ2 norm ≤ L: add Laplace (pure DP)
or Gaussian (approximate DP) noise to the empirical mean, then project onto the ℓ1 ball
K = B₁(0, L√s), a convex relaxation of the convex hull of s-sparse vectors (Remark 2.1).
The projection is post-processing, so privacy is that of the noisy mean; it never
increases the ℓ2 error (K is convex and contains the mean of bounded rows), and it
reduces it from ~σ√d to ~(L√s·σ√log d)^{1/2} (Lemma 3.1). A second projection onto
the ℓ2 ball of radius L (also post-processing) caps the error at 2L, the constant
regime of Table 1.

The same functions are the gradient oracle of the bias-reduced SGD (Ghazi et al. 2024 v1,
Algorithm 5): a private mean of per-example gradients is a private mean of vectors.
"""

import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._kernels.fixed_point import bounded_fixed_sum, fixed_point_bits, fixed_sum_to_mean
from .._kernels.projections import project_l1_then_l2_nb
from ..accounting import ApproxDP, DiscreteGaussianEvent, DiscreteLaplaceEvent, PureDP, with_event
from ..accounting.discrete import discrete_gaussian_sigma
from ..utils._data import as_canonical_csr
from .noise import add_noise_inplace

#: The ℓ2 sensitivity of one row's change, in units of L/n: 2 for any rows (triangle
#: inequality), √2 for rows clipped to be nonnegative (‖x − x'‖₂² = ‖x‖₂² + ‖x'‖₂² −
#: 2⟨x, x'⟩ ≤ 2L² since ⟨x, x'⟩ ≥ 0 when both are nonnegative).
L2_CHANGE = {False: 2.0, True: math.sqrt(2.0)}


def row_bounds(norm_bound, sparsity):
    """The contribution bounds (ℓ2 bound L, ℓ1 bound L·√s) every row is scaled into.

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.

    The domain {‖x‖₂ ≤ L, ‖x‖₁ ≤ L√s} contains the s-sparse vectors of norm ≤ L
    (‖x‖₁ ≤ √s‖x‖₂ for s-sparse x) and is the relaxation of Ghazi et al. 2024 v1 Remark 2.1.
    """
    return float(norm_bound), float(norm_bound) * np.sqrt(float(sparsity))


def bounded_mean(X, norm_bound, sparsity, nonnegative_rows=False):
    """Mean of the rows of ``X`` after scaling each into the contribution bounds.

    **Privacy guarantee.** None by itself: a deterministic statistic of the data
    with no noise, so releasing its output is not private. What it provides is the
    sensitivity under replacement of one row (neighbouring datasets differ in one
    row, n public) that the private release adding noise to it relies on; 2L/n in ℓ2
    and 2L√s/n in ℓ1 (Ghazi et al. 2024 v1, proofs of Theorems 3.2 and 3.3),
    whatever the input, since every row is scaled into the bounds. Not covered:
    everything, unless noise is added (:func:`projection_mechanism`).

    Rows with ‖x‖₂ > L or ‖x‖₁ > L√s are scaled down (never dropped): this is what
    makes the sensitivities below hold for every input. Sparse ``X`` stays sparse.
    ``nonnegative_rows=True`` first sets every negative entry to 0 (contribution
    bounding for rows declared nonnegative: the rows are changed, never refused),
    which lowers the ℓ2 sensitivity to √2·L/n (:data:`L2_CHANGE`); the ℓ1 one stays.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
    norm_bound : float
        L, the ℓ2 bound of a row.
    sparsity : float
        s; the ℓ1 bound of a row is L·√s.
    nonnegative_rows : bool, default=False
        Clip negative entries to 0 first.

    Returns
    -------
    mean : ndarray of shape (d,), float64
    """
    l2_bound, l1_bound = row_bounds(norm_bound, sparsity)
    n, d = X.shape
    frac_bits = mean_fixed_point_bits(n, norm_bound)
    if sp.issparse(X):
        X = as_canonical_csr(X)
        data = _clip_negative(X.data) if nonnegative_rows else X.data
        sums = bounded_fixed_sum((X.indptr, X.indices, data), d, l2_bound, l1_bound,
                                 frac_bits)
    else:
        X = np.asarray(X)
        sums = bounded_fixed_sum(_clip_negative(X) if nonnegative_rows else X, d,
                                 l2_bound, l1_bound, frac_bits)
    # The exact sum, then two roundings (to float64, and the division by n), in one pass.
    return fixed_sum_to_mean(sums, frac_bits, n)


def _clip_negative(values):
    """max(values, 0) in a new array, after refusing NaN and infinity (the clipping
    would hide −inf from the exact sum's check). The same work for every input: no
    branch on whether a negative entry exists (its timing would tell)."""
    from sklearn.utils import assert_all_finite

    assert_all_finite(values, input_name="X")
    return np.maximum(values, 0.0)


def mean_fixed_point_bits(n, norm_bound):
    """F of the exact sums behind :func:`bounded_mean` (no int64 overflow).

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover.
    """
    return fixed_point_bits(n, float(norm_bound)) if norm_bound > 0 else 0


def bounded_mean_sensitivity(n, n_cols, *, norm_bound, sparsity, kind,
                             nonnegative_rows=False):
    """(claimed, computed) sensitivity of :func:`bounded_mean` for noise ``kind``.

    **Privacy guarantee.** None needed: a function of public numbers only (it reads
    no data), so it can be called freely; neighbouring datasets do not enter.
    Assumptions: its arguments are public. Not covered: nothing to cover. The
    sensitivities it returns are proved in its description (the claimed one from
    Ghazi et al. 2024 v1, the computed one our derivation of the float rounding).

    Claimed: 2L/n (ℓ2, Gaussian) or 2L√s/n (ℓ1, Laplace), the paper's; √2·L/n in ℓ2
    with ``nonnegative_rows`` (:data:`L2_CHANGE`: the scaled and rounded rows stay
    nonnegative, so the same argument bounds them). Computed: what
    the floats :func:`bounded_mean` returns can move, charged by the noise plan
    (:func:`~skdpsparse.mechanisms.noise.plan_grid_noise`): a scaled row is within the
    bounds up to a relative 2⁻³⁰ (the float norm and scaling; rows of up to 2²⁰
    entries), each of the two changed rows' entries is rounded to 2⁻ᶠ (one quantum per
    coordinate in all), the sum is exact, and its conversion to float and division by n
    are two roundings of a value at most L(1 + 2⁻³⁰): at most 5·2⁻⁵³·L per coordinate
    for the two datasets. Over the m = ``n_cols`` coordinates that can differ this adds
    √m (ℓ2) or m (ℓ1) times that per-coordinate slack.
    """
    l2_bound, l1_bound = row_bounds(norm_bound, sparsity)
    claimed = (2.0 * l1_bound if kind == "laplace"
               else L2_CHANGE[bool(nonnegative_rows)] * l2_bound) / n
    per_coord = (math.ldexp(1.0, -mean_fixed_point_bits(n, norm_bound)) / n
                 + 5.0 * 2.0**-53 * l2_bound * (1.0 + 2.0**-30))
    spread = n_cols if kind == "laplace" else math.isqrt(n_cols - 1) + 1
    computed = claimed * (1.0 + 2.0**-30) + per_coord * spread
    return claimed, computed * (1.0 + 2.0**-50)  # float rounding of this sum, upwards


@functools.lru_cache(maxsize=4096)  # numbers in, numbers out; bias-reduced SGD calls it per step
def mean_noise(n, *, epsilon, delta, norm_bound, sparsity, calibration="analytic",
               nonnegative_rows=False):
    """Noise distribution and budget for a mean of n bounded rows.

    Replacement neighbours change one row z_i into z_i'; both lie in the bounded
    domain, so the mean moves by (z_i − z_i')/n with
    ``‖·‖₁ ≤ 2L√s/n`` (Ghazi et al. 2024 v1, proof of Thm 3.2) and ``‖·‖₂ ≤ 2L/n``
    (proof of Thm 3.3); ``‖·‖₂ ≤ √2·L/n`` when the rows are clipped to be nonnegative
    (``nonnegative_rows``, :data:`L2_CHANGE`).

    Returns
    -------
    kind : {"laplace", "gaussian"}
    scale : float
        Laplace scale b = Δ₁/ε (Fact 2.3(a)) when ``delta == 0``; otherwise the
        discrete Gaussian's σ for Δ₂
        (:func:`~skdpsparse.accounting.discrete.discrete_gaussian_sigma`: the tight
        zCDP conversion, or with ``calibration="classic"`` the paper's
        Δ₂√(2 ln(1.25/δ))/ε where that suffices).
    budget : PureDP or ApproxDP
    """
    l2_bound, l1_bound = row_bounds(norm_bound, sparsity)
    if delta == 0:
        # The event lets a ledger compose what ran (b/Δ₁ = 1/ε), not only the ε.
        return ("laplace", 2.0 * l1_bound / (n * epsilon),
                with_event(PureDP(epsilon), DiscreteLaplaceEvent(1.0 / epsilon)))
    l2_change = L2_CHANGE[bool(nonnegative_rows)] * l2_bound / n
    sigma = discrete_gaussian_sigma(l2_change, epsilon, delta, calibration)
    event = DiscreteGaussianEvent(sigma / l2_change)
    return "gaussian", sigma, with_event(ApproxDP(epsilon, delta), event)


@dataclass(frozen=True)
class ProjectionPlan:
    """The plan of one projection mechanism (or its dense baseline): public numbers
    only, built by :func:`plan_projection` and run by :func:`projection`.

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` is the guarantee of :func:`projection` (or
    :func:`release_bounded_mean` on the :func:`bounded_mean` of the rows) run with it,
    for one row of the n replaced (n and d public): ε-DP with discrete Laplace noise of
    scale b = Δ₁/ε, Δ₁ = 2L√s/n (Ghazi et al. 2024 v1, Theorem 3.2), or (ε, δ)-DP with
    discrete Gaussian noise of σ for Δ₂ = 2L/n (√2·L/n with ``nonnegative_rows``;
    Canonne, Kamath and Steinke 2020, Theorem 14, and Ghazi et al. 2024 v1, Theorem
    3.3). The noise is drawn for ``true_sensitivity``, the computed statistic's bound
    (:func:`bounded_mean_sensitivity`). A plan with a smaller ``noise_scale`` or a
    larger ``norm_bound`` than :func:`plan_projection` gives is not covered by its
    ``budget``.

    Attributes
    ----------
    n_samples, n_features : int
    norm_bound : float
        L, the ℓ2 bound of a row.
    sparsity : float
        s; the ℓ1 bound is ``l1_bound`` = L√s.
    l2_bound, l1_bound : float
        The contribution bounds (:func:`row_bounds`).
    nonnegative_rows : bool
        Negative entries are clipped to 0 before the bounds (Δ₂ = √2·L/n).
    kind : {"laplace", "gaussian"}
    noise_scale : float
        b (Laplace) or σ (Gaussian) per coordinate.
    sensitivity : float
        The claimed sensitivity, Δ₁ (Laplace) or Δ₂ (Gaussian).
    true_sensitivity : float
        The sensitivity of the floats computed, charged by the noise.
    budget : PureDP or ApproxDP
        With the event a ledger composes.
    calibration : {"analytic", "classic"}
    project : bool
        False: the dense baseline (no projection).
    """

    n_samples: int
    n_features: int
    norm_bound: float
    sparsity: float
    l2_bound: float
    l1_bound: float
    nonnegative_rows: bool
    kind: str
    noise_scale: float
    sensitivity: float
    true_sensitivity: float
    budget: object
    calibration: str
    project: bool


def plan_projection(n_samples, n_features, *, epsilon, delta, norm_bound, sparsity,
                    calibration="analytic", project=True, nonnegative_rows=False):
    """The noise and guarantee of Ghazi et al. (2024 v1) Algorithm 1 (or, with
    ``project=False``, its dense Laplace / Gaussian baseline), from public numbers.

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`ProjectionPlan`): ε-DP for δ = 0, (ε, δ)-DP
    for δ > 0, one row replaced. Assumptions: L, s and the flags chosen without the
    data.

    Returns
    -------
    ProjectionPlan

    Examples
    --------
    Laplace noise of scale 2L√s/(nε) = 2·1·3/(1000·0.5) for δ = 0:

    >>> import numpy as np
    >>> from skdpsparse.mechanisms.projection import plan_projection, projection
    >>> plan = plan_projection(1000, 50, epsilon=0.5, delta=0, norm_bound=1.0, sparsity=9)
    >>> plan.kind, round(plan.noise_scale, 6), str(plan.budget)
    ('laplace', 0.012, '0.5-DP')
    >>> X = np.eye(1000, 50)
    >>> projection(X, plan, np.random.default_rng(0)).shape
    (50,)
    """
    kind, scale, budget = mean_noise(
        n_samples, epsilon=epsilon, delta=delta, norm_bound=norm_bound,
        sparsity=sparsity, calibration=calibration, nonnegative_rows=bool(nonnegative_rows))
    l2_bound, l1_bound = row_bounds(norm_bound, sparsity)
    claimed, computed = bounded_mean_sensitivity(
        n_samples, n_features, norm_bound=norm_bound, sparsity=sparsity, kind=kind,
        nonnegative_rows=bool(nonnegative_rows))
    return ProjectionPlan(int(n_samples), int(n_features), float(norm_bound),
                          float(sparsity), l2_bound, l1_bound, bool(nonnegative_rows), kind,
                          float(scale), claimed, computed, budget, calibration, bool(project))


def release_bounded_mean(mean, plan, rng):
    """The release of :class:`ProjectionPlan` from the bounded mean of the rows: the
    planned noise, then (``plan.project``) the projections; returns the estimate.

    **Privacy guarantee.** ``plan.budget`` for one row replaced, *provided* ``mean``
    is the :func:`bounded_mean` of the n rows with the plan's bounds (and
    ``nonnegative_rows``); the projections are post-processing. Not covered: any other
    ``mean``; add/remove neighbours; user-level privacy; timing side channels.
    """
    z = np.array(mean, dtype=np.float64, copy=True)
    if z.shape != (plan.n_features,):
        raise ValueError(f"mean has shape {z.shape}, but the plan is for "
                         f"({plan.n_features},).")
    add_noise_inplace(z, rng, plan.kind, plan.noise_scale, sensitivity=plan.sensitivity,
                      true_sensitivity=plan.true_sensitivity)
    if plan.project:
        # Onto K (the ℓ1 ball of radius L√s), then onto the ℓ2 ball of radius L, which
        # also contains the bounded mean: a projection onto a convex set containing the
        # mean never increases the error, and this one caps it at 2L (the "1 ∧" of
        # Table 1). Scaling keeps z in K. One compiled call that releases the GIL.
        project_l1_then_l2_nb(z, plan.l1_bound, plan.l2_bound)
    return z


def projection(X, plan, rng):
    """Run a :class:`ProjectionPlan` on the rows of ``X``: :func:`bounded_mean`, then
    :func:`release_bounded_mean`.

    **Privacy guarantee.** ``plan.budget`` for one row of ``X`` replaced (n and d
    public), for a plan from :func:`plan_projection`. Assumptions: a secret random
    source. Not covered: add/remove neighbours; user-level privacy; timing side
    channels.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (plan.n_samples, plan.n_features)
    plan : ProjectionPlan
    rng : RandomSource, numpy.random.Generator or None

    Returns
    -------
    ndarray of shape (d,), float64
    """
    if X.shape != (plan.n_samples, plan.n_features):
        raise ValueError(f"X has shape {X.shape}, but the plan is for "
                         f"({plan.n_samples}, {plan.n_features}).")
    mean = bounded_mean(X, plan.norm_bound, plan.sparsity, plan.nonnegative_rows)
    return release_bounded_mean(mean, plan, rng)


def projection_mechanism(mean, n, *, epsilon, delta, norm_bound, sparsity, rng,
                         calibration="analytic", project=True):
    """Ghazi et al. (2024 v1) Algorithm 1 on the mean of n rows already scaled into the
    bounds: :func:`plan_projection`, then :func:`release_bounded_mean`.

    **Privacy guarantee.** Protected: one row (neighbouring datasets differ by
    replacing one row; n public), given that ``mean`` is the :func:`bounded_mean` of
    the rows. δ = 0: discrete Laplace noise for Δ₁ = 2L√s/n, ε-DP (Ghazi et al. 2024
    v1, Theorem 3.2); δ > 0: discrete Gaussian noise for Δ₂ = 2L/n with σ from the
    tight zCDP conversion (Canonne, Kamath and Steinke 2020, Theorem 14), (ε, δ)-DP
    (their Theorem 3.3 with that σ); the projections are post-processing.
    Assumptions: L and s chosen without the data; a secret random source. Not
    covered: a ``mean`` that is not the bounded mean of the rows; add/remove
    neighbours; user-level privacy; timing side channels.

    Parameters
    ----------
    mean : ndarray of shape (d,)
        The empirical mean of bounded rows (see :func:`bounded_mean`).
    n : int
        Number of rows (public under replacement neighbours).
    epsilon, delta : float
        ``delta == 0`` gives ε-DP with Laplace noise (Thm 3.2); otherwise (ε, δ)-DP
        with Gaussian noise (Thm 3.3).
    norm_bound, sparsity : float
        L and s of the row domain.
    rng : RandomSource, numpy.random.Generator or None
        The fit's source of noise (:func:`skdpsparse.utils.as_random_source`).
    calibration : {"analytic", "classic"}
    project : bool
        False gives the dense Laplace / Gaussian baselines (same noise, no projection).

    Returns
    -------
    estimate : ndarray of shape (d,)
    budget : PureDP or ApproxDP
    """
    plan = plan_projection(n, np.shape(mean)[0], epsilon=epsilon, delta=delta,
                           norm_bound=norm_bound, sparsity=sparsity,
                           calibration=calibration, project=project)
    return release_bounded_mean(mean, plan, rng), plan.budget
