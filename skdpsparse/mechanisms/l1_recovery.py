"""Gaussian ℓ1-recovery for sparse means (Ghazi et al. 2024 v1, Section 3.1, Algorithm 2).

Release noisy compressed measurements of the mean, b = (1/n) Σ_i A z_i + ξ, and return
the basis-pursuit solution min ‖z‖₁ s.t. Az = b (or its denoising variant, see
``recovery``), zeroed if its norm exceeds 2L.

Two departures from the seed, both in the direction of a stronger guarantee:

* **Sensing operator.** A dense Gaussian A (m × d) cannot be stored at d = 10⁷. We use
  a subsampled randomized Hadamard transform (see :mod:`.sensing`), whose restricted
  isometry property is a published result for bounded orthonormal systems (Rudelson
  and Vershynin 2008; Haviv and Regev 2017).
* **Privacy without the RIP event.** The seed's proof bounds ‖A(z_i − z_i')‖₂ ≤ 3L by
  the RIP of A on 2s-sparse vectors, which fails with a probability charged to δ
  (δ/2, with constants not made explicit). We instead scale each example's measurement
  vector A z_i to ℓ2 norm ≤ c·L (c = 1.5, the seed's RIP constant) before averaging.
  Replacing one example then moves the averaged measurements by at most 2cL/n = 3L/n in
  ℓ2 **for every A**, so the Gaussian mechanism's guarantee needs no failure event.
  When A is a restricted isometry the scaling never binds on s-sparse rows, so accuracy
  is unchanged. ``calibration="classic"`` keeps the seed's exact noise,
  σ² = 18L² ln(2.5/δ)/(nε)² (the classic formula for sensitivity 3L/n at δ/2);
  ``"analytic"`` uses the discrete Gaussian's tight zCDP calibration at the full δ.

The ℓ1 solver is inexact; that is post-processing of b and costs no privacy (the seed
notes this too). Below d < m ln² m the algorithm is the plain Gaussian mechanism, as the
seed says.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import _kernels
from .._solvers.basis_pursuit import basis_pursuit
from ..accounting import ApproxDP, DiscreteGaussianEvent, with_event
from ..accounting.discrete import discrete_gaussian_sigma
from ..utils._data import as_canonical_csr
from ..utils._random import as_random_source
from .noise import add_noise_inplace
from .projection import (
    ProjectionPlan, plan_projection, projection, row_bounds,
)
from .sensing import SubsampledHadamardSensing

# The distributed fit's steps (sensing_operator, clipped_measurement_total,
# release_measurements) are internal: gaussian_l1_recovery is the mechanism.
__all__ = ["MEASUREMENT_CLIP", "L1RecoveryPlan", "gaussian_l1_recovery", "l1_recovery",
           "measurement_noise_sigma", "n_measurements", "plan_l1_recovery",
           "uses_compressed_sensing"]

#: The seed's RIP constant: ‖Av‖ ≤ (3/2)‖v‖ on sparse v (proof of Theorem 3.4).
MEASUREMENT_CLIP = 1.5


def n_measurements(n, d, sparsity, epsilon, delta):
    """m of Ghazi et al. 2024 v1 Algorithm 2: m ≈ nε√(s ln(d/s) / ln(1/δ)), constant 1,
    in [1, d].

    **Privacy guarantee.** None needed: public numbers only (n, d, s, ε, δ; n is
    public under the replace-one neighbours of :func:`gaussian_l1_recovery`), no data
    enters it. m does not enter the sensitivity 3L/n of the measurements, so any m is
    safe; it only sets accuracy.
    """
    s = float(sparsity)
    ratio = max(d / s, np.e)
    m = n * epsilon * np.sqrt(s * np.log(ratio) / np.log(1.0 / delta))
    return int(min(max(np.ceil(m), 1), d))


def uses_compressed_sensing(d, m):
    """Algorithm 2 takes the compressed-sensing branch iff d ≥ m ln² m.

    **Privacy guarantee.** None needed: public numbers only (d and m), no data enters
    it, so which branch :func:`gaussian_l1_recovery` takes reveals nothing about the
    rows.
    """
    return d >= m * np.log(max(m, 1)) ** 2


def measurement_noise_sigma(n, *, epsilon, delta, norm_bound, calibration="analytic"):
    """σ for the averaged clipped measurements (ℓ2 sensitivity 2·1.5·L/n = 3L/n).

    **Privacy guarantee.** None needed: public numbers only (n, ε, δ, L), no data
    enters it. What it guarantees to its caller: the discrete Gaussian of this σ on
    measurements of ℓ2 sensitivity 3L/n (replace-one neighbours, each measurement
    vector scaled to norm ≤ 1.5L, for every A: :ref:`derivation_sensitivities`,
    "Gaussian ℓ1-recovery: clipped measurements") is (ε, δ)-DP. ``"analytic"``: the
    smallest σ whose ρ = Δ²/(2σ²)-zCDP (Canonne, Kamath and Steinke (2020), "The
    discrete Gaussian for differential privacy", Theorem 14) converts to (ε, δ) by the
    tight conversion of :func:`~skdpsparse.accounting.discrete.discrete_gaussian_sigma`.
    ``"classic"``: the paper's σ² = 18L² ln(2.5/δ)/(nε)², the classic formula (Dwork
    and Roth 2014, "The Algorithmic Foundations of Differential Privacy", Theorem A.1)
    at δ/2, raised to the analytic σ where it is too small for the discrete Gaussian.
    Not covered: a sensitivity other than 3L/n (measurements not scaled to 1.5L).
    """
    sensitivity = 2.0 * MEASUREMENT_CLIP * norm_bound / n
    # "classic" is the seed's σ² = 18L² ln(2.5/δ)/(nε)², i.e. sensitivity 3L/n at δ/2
    # (the seed charges the other δ/2 to the RIP event, which clipping makes moot).
    return discrete_gaussian_sigma(
        sensitivity, epsilon, delta / 2.0 if calibration == "classic" else delta, calibration)


@dataclass(frozen=True)
class L1RecoveryPlan:
    """The plan of Gaussian ℓ1-recovery (public numbers only), built by
    :func:`plan_l1_recovery` and run by :func:`l1_recovery`.

    **Privacy guarantee.** A plan is public (no field depends on the data).
    ``budget`` is the guarantee of :func:`l1_recovery` run with it, one row replaced
    (n, d, m public): (ε, δ)-DP. Compressed-sensing branch: discrete Gaussian noise of
    σ (``noise_scale``) on measurements of ℓ2 sensitivity 3L/n
    (:func:`measurement_noise_sigma`; the computed sum's bound in
    ``true_sensitivity``, :func:`measurement_mean_sensitivity`). Below the branch's
    threshold, ``dense`` is the dense Gaussian release's :class:`ProjectionPlan` and
    its budget is this plan's. A plan with a smaller ``noise_scale`` is not covered
    by its ``budget``.

    Attributes
    ----------
    n_samples, n_features : int
    norm_bound, sparsity : float
    n_measurements : int
        m.
    branch : {"compressed_sensing", "gaussian"}
        Which branch runs (d ≥ m ln² m, public numbers).
    noise_scale : float or None
        σ of the measurement noise (compressed-sensing branch).
    sensitivity, true_sensitivity : float or None
        3L/n and the computed sum's bound (compressed-sensing branch).
    radius : float or None
        The basis-pursuit-denoising radius σ√m (0 for ``recovery="exact"``).
    recovery : {"denoising", "exact"}
    max_iter : int
    tol : float
    calibration : {"analytic", "classic"}
    dense : ProjectionPlan or None
        The plan of the Gaussian branch.
    budget : ApproxDP
    """

    n_samples: int
    n_features: int
    norm_bound: float
    sparsity: float
    n_measurements: int
    branch: str
    noise_scale: float | None
    sensitivity: float | None
    true_sensitivity: float | None
    radius: float | None
    recovery: str
    max_iter: int
    tol: float
    calibration: str
    dense: ProjectionPlan | None
    budget: object


def plan_l1_recovery(n_samples, n_features, *, epsilon, delta, norm_bound, sparsity,
                     n_measurements_=None, calibration="analytic", recovery="denoising",
                     max_iter=500, tol=1e-4):
    """The branch, noise and guarantee of Ghazi et al. (2024 v1) Algorithm 2 from
    public numbers (see :func:`gaussian_l1_recovery` for the parameters).

    **Privacy guarantee.** Public numbers in, a public plan out; what the plan
    guarantees is its ``budget`` (:class:`L1RecoveryPlan`), (ε, δ)-DP for one row
    replaced. Assumptions: its arguments chosen without the data.

    Returns
    -------
    L1RecoveryPlan

    Examples
    --------
    Below d ≥ m ln² m the plan is the dense Gaussian release's:

    >>> from skdpsparse.mechanisms.l1_recovery import plan_l1_recovery
    >>> plan = plan_l1_recovery(2000, 500, epsilon=1.0, delta=1e-6, norm_bound=1.0,
    ...                         sparsity=5)
    >>> plan.branch, plan.budget is plan.dense.budget
    ('gaussian', True)
    >>> plan = plan_l1_recovery(500, 2**20, epsilon=1.0, delta=1e-6, norm_bound=1.0,
    ...                         sparsity=2)
    >>> plan.branch, plan.sensitivity == 3.0 / 500
    ('compressed_sensing', True)
    """
    if not delta > 0:
        raise ValueError("Gaussian l1-recovery needs delta > 0.")
    if recovery not in ("denoising", "exact"):
        raise ValueError(f"recovery must be 'denoising' or 'exact', got {recovery!r}.")
    n, d = int(n_samples), int(n_features)
    m = n_measurements(n, d, sparsity, epsilon, delta) if n_measurements_ is None \
        else int(n_measurements_)
    common = dict(n_samples=n, n_features=d, norm_bound=float(norm_bound),
                  sparsity=float(sparsity), n_measurements=m, recovery=recovery,
                  max_iter=int(max_iter), tol=float(tol), calibration=calibration)
    if not uses_compressed_sensing(d, m):
        dense = plan_projection(n, d, epsilon=epsilon, delta=delta, norm_bound=norm_bound,
                                sparsity=sparsity, calibration=calibration, project=False)
        return L1RecoveryPlan(branch="gaussian", noise_scale=None, sensitivity=None,
                              true_sensitivity=None, radius=None, dense=dense,
                              budget=dense.budget, **common)
    sigma = measurement_noise_sigma(n, epsilon=epsilon, delta=delta, norm_bound=norm_bound,
                                    calibration=calibration)
    sensitivity = 2.0 * MEASUREMENT_CLIP * norm_bound / n
    event = DiscreteGaussianEvent(sigma / sensitivity)
    return L1RecoveryPlan(
        branch="compressed_sensing", noise_scale=sigma, sensitivity=sensitivity,
        true_sensitivity=measurement_mean_sensitivity(n, m, norm_bound),
        radius=sigma * np.sqrt(m) if recovery == "denoising" else 0.0, dense=None,
        budget=with_event(ApproxDP(epsilon, delta), event), **common)


def l1_recovery(X, plan, rng):
    """Run an :class:`L1RecoveryPlan` on the rows of ``X``; returns (estimate, info) as
    :func:`gaussian_l1_recovery` does (without the budget: ``plan.budget``).

    **Privacy guarantee.** ``plan.budget`` for one row of ``X`` replaced, for a plan
    from :func:`plan_l1_recovery` (that of :func:`gaussian_l1_recovery`). Not covered:
    add/remove neighbours; user-level privacy; timing side channels (the solver's
    iterations read only the noisy measurements).
    """
    if X.shape != (plan.n_samples, plan.n_features):
        raise ValueError(f"X has shape {X.shape}, but the plan is for "
                         f"({plan.n_samples}, {plan.n_features}).")
    if plan.branch == "gaussian":
        z = projection(X, plan.dense, rng)
        return z, {"branch": "gaussian", "n_measurements": plan.n_measurements}
    rng = as_random_source(rng)
    operator = sensing_operator(plan.n_features, plan.n_measurements, rng)
    total = clipped_measurement_total(X, operator, norm_bound=plan.norm_bound,
                                      sparsity=plan.sparsity)
    return _recover(total, operator, plan, rng)


def gaussian_l1_recovery(X, *, epsilon, delta, norm_bound, sparsity, rng,
                         n_measurements_=None, calibration="analytic",
                         recovery="denoising", max_iter=500, tol=1e-4):
    """Ghazi et al. (2024 v1) Algorithm 2 on the rows of ``X`` (dense or sparse), (ε, δ)-DP.

    **Privacy guarantee.** Protected: one row of ``X`` under replacement neighbours
    (n, d, m and the parameters are public). (ε, δ)-DP: each row is scaled into
    {‖x‖₂ ≤ L, ‖x‖₁ ≤ L√s} and its measurement vector A·x scaled to ℓ2 norm ≤ 1.5L,
    so replacing a row moves the averaged measurements by at most 3L/n for *every*
    draw of A (no restricted-isometry event is charged to δ, unlike Ghazi,
    Guzmán, Kamath, Kumar and Manurangsi (2024), "Differentially Private Optimization
    with Sparse Gradients", Theorem 3.4's proof); the Gaussian mechanism for that
    sensitivity (discrete Gaussian, Canonne, Kamath and Steinke (2020), "The discrete
    Gaussian for differential privacy", Theorem 14 and Corollary 13) gives the
    guarantee, and basis pursuit and the norm test are post-processing. A is drawn
    from a public stream derived one-way from the key (publishing it reveals nothing
    about the noise). Below d ≥ m ln² m the Gaussian mechanism on the bounded mean
    (same neighbours, sensitivity 2L/n). Not covered: the data-dependent count of
    scaled measurement vectors (never returned) and the float rounding of the sum of
    measurements (not accounted for, as elsewhere in the library).

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
        Rows are scaled into {‖x‖₂ ≤ L, ‖x‖₁ ≤ L√s} (contribution bounding).
    epsilon, delta : float
        ``delta`` must be positive.
    norm_bound, sparsity : float
        L and s.
    rng : RandomSource, numpy.random.Generator or None
        Draws the sensing operator (data-independent) and the noise.
    n_measurements_ : int or None
        m; ``None`` uses the seed's choice (:func:`n_measurements`).
    calibration : {"analytic", "classic"}
    recovery : {"denoising", "exact"}
        ``"exact"`` is the seed's basis pursuit, min ‖z‖₁ s.t. Az = b. On noisy b it
        fits the noise with ~m nonzeros and converges slowly. ``"denoising"`` (default)
        solves min ‖z‖₁ s.t. ‖Az − b‖₂ ≤ σ√m (basis pursuit denoising, Candès, Romberg
        and Tao 2006), σ√m being the typical noise norm. σ is computed from public
        parameters only, so either choice is post-processing of b and costs no privacy.
    max_iter, tol : solver controls (post-processing only).

    Returns
    -------
    estimate : ndarray of shape (d,)
    budget : ApproxDP
    info : dict
        ``branch`` ("gaussian" or "compressed_sensing"), ``n_measurements``, and for the
        compressed-sensing branch the solver report (a function of the noisy b only).
        How many measurement vectors the 1.5L scaling touched is data-dependent and
        deliberately not returned.
    """
    plan = plan_l1_recovery(X.shape[0], X.shape[1], epsilon=epsilon, delta=delta,
                            norm_bound=norm_bound, sparsity=sparsity,
                            n_measurements_=n_measurements_, calibration=calibration,
                            recovery=recovery, max_iter=max_iter, tol=tol)
    z, info = l1_recovery(X, plan, rng)
    return z, plan.budget, info


def sensing_operator(d, m, rng):
    """The fit's sensing operator A (m × d), drawn from ``rng``'s public stream.

    The operator may be published, and a distributed fit ships it to the workers:
    its randomness comes from :meth:`~skdpsparse.utils.RandomSource.public_generator`,
    whose seed is a keyed one-way function of the fit's key under another
    personalisation than the noise draws', so seeing A reveals nothing about the
    noise (and drawing it does not advance the noise's counter).
    """
    return SubsampledHadamardSensing(d, m, as_random_source(rng).public_generator(
        "sensing operator"))


def clipped_measurement_total(X, operator, *, norm_bound, sparsity):
    """Σᵢ clip(A(sᵢxᵢ)) over the rows of ``X``: rows scaled into {‖x‖₂ ≤ L,
    ‖x‖₁ ≤ L√s} (sᵢ), each measurement vector scaled to ℓ2 norm ≤ 1.5L. The part of
    one chunk of rows in a distributed fit (a float64 sum: chunks add their totals)."""
    l2_bound, l1_bound = row_bounds(norm_bound, sparsity)
    if sp.issparse(X):
        X = as_canonical_csr(X)
        scales = _kernels.csr_bounding_scales(X.indptr, X.data, l2_bound, l1_bound)
    else:
        X = np.asarray(X)
        scales = _kernels.dense_bounding_scales(X, l2_bound, l1_bound)
    total, _ = operator.clipped_measurement_sum(X, scales, MEASUREMENT_CLIP * norm_bound)
    return np.asarray(total, dtype=np.float64)


def measurement_mean_sensitivity(n, m, norm_bound):
    """The ℓ2 sensitivity of the measurement mean *as computed* (floating point), for
    n rows and m measurements: the noise is planned for it
    (``true_sensitivity`` of :func:`~skdpsparse.mechanisms.noise.add_noise_inplace`).

    **Privacy guarantee.** None needed: public numbers only. The bound it returns is
    what makes :func:`release_measurements`'s guarantee hold for the floats the code
    computes. With C = 1.5L and u = 2⁻⁵³:

    * each clipped term has ‖tᵢ‖₂ ≤ C(1 + (m + 4)·2u) (its norm, the ratio and the
      products each round once; the factor 2 is slack);
    * the float sum of the n terms, in any order or chunking, is within
      γₙ₋₁·Σᵢ‖tᵢ‖₂ of the exact sum in ℓ2, γₖ = ku/(1 − ku) (Higham 2002, "Accuracy and
      Stability of Numerical Algorithms", 2nd ed., eq. 4.4, coordinate by coordinate,
      then the triangle inequality);
    * the division by n rounds each coordinate once: at most u·‖total‖/n.

    Two neighbouring datasets' exact sums differ by one term's change, at most
    2C(1 + (m + 4)·2u); each computed mean adds its own rounding, so the computed
    means differ by at most the value returned (with a further relative 2⁻⁴⁰ of slack).
    The rounding grows like n²u relative to the claimed 2C/n: 5·10⁻⁵ at n = 10⁶ (the
    exact fixed-point sums of the sparse mean would remove it).
    """
    u = 2.0 ** -53
    n, m = int(n), int(m)
    c = MEASUREMENT_CLIP * float(norm_bound) * (1.0 + (m + 4) * 2.0 * u)
    gamma = (n - 1) * u / (1.0 - (n - 1) * u)
    total = n * c * (1.0 + gamma)  # a bound on the computed total's norm
    true = 2.0 * c / n + 2.0 * gamma * c + 2.0 * u * total / n
    return true * (1.0 + 2.0 ** -40)


def release_measurements(total, n, operator, *, epsilon, delta, norm_bound, rng,
                         calibration="analytic", recovery="denoising", max_iter=500,
                         tol=1e-4):
    """The compressed-sensing branch's release from the summed measurements (one
    noise draw, then basis pursuit: post-processing); returns (z, budget, info) as
    :func:`gaussian_l1_recovery` does.

    **Privacy guarantee.** That of :func:`gaussian_l1_recovery`, *provided*
    ``total`` is Σᵢ clip(A sᵢxᵢ) over the n rows (:func:`clipped_measurement_total`,
    in one pass or summed over chunks) for the ``operator`` drawn by
    :func:`sensing_operator` from the fit's key: one row moves it by at most 3L in ℓ2,
    and the floating-point rounding of that sum and of the mean is charged to the noise
    (:func:`measurement_mean_sensitivity`). Not covered: any other ``total``.
    """
    plan = plan_l1_recovery(n, operator.n_features, epsilon=epsilon, delta=delta,
                            norm_bound=norm_bound, sparsity=1.0,
                            n_measurements_=operator.n_measurements,
                            calibration=calibration, recovery=recovery, max_iter=max_iter,
                            tol=tol)
    if plan.branch != "compressed_sensing":  # a caller's m above the branch's threshold
        plan = _as_compressed_sensing(plan, epsilon, delta)
    z, info = _recover(total, operator, plan, rng)
    return z, plan.budget, info


def _as_compressed_sensing(plan, epsilon, delta):
    """The compressed-sensing plan for a given m, whatever the branch rule says (the
    distributed fit has already chosen the branch)."""
    from dataclasses import replace

    sigma = measurement_noise_sigma(plan.n_samples, epsilon=epsilon, delta=delta,
                                    norm_bound=plan.norm_bound, calibration=plan.calibration)
    sensitivity = 2.0 * MEASUREMENT_CLIP * plan.norm_bound / plan.n_samples
    return replace(plan, branch="compressed_sensing", noise_scale=sigma,
                   sensitivity=sensitivity,
                   true_sensitivity=measurement_mean_sensitivity(
                       plan.n_samples, plan.n_measurements, plan.norm_bound),
                   radius=sigma * np.sqrt(plan.n_measurements)
                   if plan.recovery == "denoising" else 0.0, dense=None,
                   budget=with_event(ApproxDP(epsilon, delta),
                                     DiscreteGaussianEvent(sigma / sensitivity)))


def _recover(total, operator, plan, rng):
    """One noise draw on the measurement mean, then basis pursuit and the norm test
    (post-processing); returns (z, info)."""
    m, d, n = plan.n_measurements, plan.n_features, plan.n_samples
    b = np.asarray(total, dtype=np.float64) / n
    add_noise_inplace(b, rng, "gaussian", plan.noise_scale, sensitivity=plan.sensitivity,
                      true_sensitivity=plan.true_sensitivity)
    z, report = basis_pursuit(operator, b, radius=plan.radius, max_iter=plan.max_iter,
                              tol=plan.tol)
    z = np.asarray(z, dtype=np.float64)
    if np.linalg.norm(z) > 2.0 * plan.norm_bound:  # the seed's norm test (post-processing)
        z = np.zeros(d)
    info = {"branch": "compressed_sensing", "n_measurements": m,
            "solver": {k: v for k, v in report.items() if k != "dual_point"},
            "sigma": plan.noise_scale}
    return z, info
