"""Audit cases of the mean mechanisms and estimators: the projection mechanism, the
sparse-mean baselines, ℓ1 recovery, the heavy-tailed means (trimmed median of means,
noise smoothing) and the estimators :class:`~skdpsparse.mean.DPSparseMeanEstimator`
and :class:`~skdpsparse.mean.DPHeavyTailedMean` end to end.

Mechanism-level cases take the halved noise as a :class:`~..variants.ScaledNoiseSource`
passed as ``rng`` and the inflated bounds as replaced public numbers (bound ×10, the
privacy parameter re-solved for the shipped noise), or, for the heavy-tailed means, as
a replaced plan (the shipped plan with τ ×10, its noise kept); estimator-level cases take both as
replaced parameters (:func:`~..variants.replanned_epsilon`).

The CWME interval rounding of issue 17 (item 4) is not a catalogue case: no pair can
show it in a release (:data:`CWME_ROUNDING_HIDDEN`); ``tests/audit`` tests the
rounding of the statistic directly.
"""

import dataclasses
import functools

import numpy as np

from ..case import CURVE_DELTA, Case, Entry
from ..statistics import claimed_epsilons
from ..variants import replanned_epsilon
from ._pairs import dense_pair, sparse_pair

__all__ = [
    "CATALOGUE", "CWME_ROUNDING_HIDDEN", "case_cwme", "case_heavy_tailed_mean",
    "case_l1_recovery", "case_noise_smoothing", "case_projection", "case_sparse_mean",
    "case_sparse_mean_estimator",
]

# Where each broken variant must be refuted: pure DP at δ = 0; Gaussian mechanisms at
# CURVE_DELTA (at δ = 1e-5 an ε above ~log(runs/4) is out of reach of any attack).
_PURE_DETECT = {"noise/2": (0.0,), "bound x10": (0.0,)}
_GAUSSIAN_DETECT = {"noise/2": (CURVE_DELTA,), "bound x10": (CURVE_DELTA,)}


def _detect(delta):
    return _PURE_DETECT if delta == 0 else _GAUSSIAN_DETECT


def _per_variant(f):
    """Cache a function of the variant (a re-solved ε is computed once per variant)."""
    return functools.lru_cache(maxsize=None)(f)


def case_projection(epsilon=2.0, delta=0.0, n=50, d=8, L=1.0):
    """:func:`~skdpsparse.mechanisms.projection.projection_mechanism` on
    :func:`~skdpsparse.mechanisms.projection.bounded_mean` (s = 1): Laplace when δ = 0,
    analytic Gaussian otherwise; the statistic is the released coordinate of the unique
    column. Bound variant: the mean of rows bounded at 10L, released with the noise
    and projection planned for L."""
    from ...mechanisms import projection as P

    kw = dict(epsilon=epsilon, delta=delta, norm_bound=L, sparsity=1)

    def mechanism(X, rng, variant):
        mean = P.bounded_mean(X, variant.bound * L, 1)
        return P.projection_mechanism(mean, n, rng=variant.source(rng), **kw)[0][0]

    kind, scale, budget = P.mean_noise(n, **kw)
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA), gaussian=(scale, 2 * L / n))
    return Case(f"projection_mechanism ({kind})", mechanism, sparse_pair(n, d, L),
                tuple(claims), _detect(delta))


def case_sparse_mean(method, epsilon=2.0, delta=0.0, n=50, d=8, L=1.0):
    """:func:`~skdpsparse.mechanisms.sparse_mean.private_sparse_mean` with ``method``;
    the statistic is the released coordinate of the unique column. Bound variant:
    ``norm_bound`` 10L at the ε whose noise is that of L."""
    from ...mechanisms import projection as P
    from ...mechanisms import sparse_mean as S

    def noise_at(eps, k):
        return P.mean_noise(n, epsilon=eps, delta=delta, norm_bound=k * L, sparsity=1)[1]

    @_per_variant
    def epsilon_for(variant):
        return replanned_epsilon(variant, noise_at, epsilon, with_noise=False)

    def mechanism(X, rng, variant):
        return S.private_sparse_mean(X, method, epsilon=epsilon_for(variant), delta=delta,
                                     norm_bound=variant.bound * L, sparsity=1,
                                     rng=variant.source(rng))[0][0]

    _, scale, budget = P.mean_noise(n, epsilon=epsilon, delta=delta, norm_bound=L,
                                    sparsity=1)
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA), gaussian=(scale, 2 * L / n))
    return Case(f"private_sparse_mean({method!r})", mechanism, sparse_pair(n, d, L),
                tuple(claims), _detect(delta))


def case_l1_recovery(epsilon=8.0, delta=1e-5, n=10, d=64, m=8, L=1.0, max_iter=10):
    """:func:`~skdpsparse.mechanisms.l1_recovery.gaussian_l1_recovery`, compressed-sensing
    branch (d ≥ m ln² m); the statistic is the recovered coordinate of the unique column.

    Its noise is calibrated for the measurement sensitivity 3L/n (the 1.5L clip of
    each measurement vector), which 1-sparse rows cannot reach (‖Ae_j‖ = 1 for the
    Hadamard operator): halving its noise is not expected to be refuted. Bound variant:
    ``norm_bound`` 10L (rows and measurement clip) at the ε whose σ is that of L.
    """
    from ...mechanisms import l1_recovery as R

    kw = dict(sparsity=1, n_measurements_=m, max_iter=max_iter)

    def noise_at(eps, k):
        return R.measurement_noise_sigma(n, epsilon=eps, delta=delta, norm_bound=k * L)

    @_per_variant
    def epsilon_for(variant):
        return replanned_epsilon(variant, noise_at, epsilon, with_noise=False)

    def mechanism(X, rng, variant):
        return R.gaussian_l1_recovery(X, epsilon=epsilon_for(variant), delta=delta,
                                      norm_bound=variant.bound * L, rng=variant.source(rng),
                                      **kw)[0][0]

    X0, X1 = sparse_pair(n, d, L)
    _, budget, info = R.gaussian_l1_recovery(X0, epsilon=epsilon, delta=delta, norm_bound=L,
                                             rng=np.random.default_rng(0), **kw)
    if info["branch"] != "compressed_sensing":
        raise ValueError("parameters do not reach the compressed-sensing branch.")
    sens = 2 * R.MEASUREMENT_CLIP * L / n
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA), gaussian=(info["sigma"], sens))
    return Case("gaussian_l1_recovery", mechanism, (X0, X1), tuple(claims),
                {"bound x10": (CURVE_DELTA,)})


def _cwme_rows(n_groups, group, d, seed=0):
    """Consecutive groups of ``group`` rows (centre 0, τ = 1): the lower groups far
    below -3τ, the upper ones far above +3τ, the middle one(s) near 0, so the median is
    the middle group's mean (odd m) or the average of the two middle ones (even m)."""
    rng = np.random.default_rng(seed)
    lo = n_groups // 2 - (1 if n_groups % 2 == 0 else 0)
    parts = []
    for g in range(n_groups):
        centre = -6.0 if g < lo else (6.0 if g > n_groups // 2 else 0.0)
        parts.append(centre + rng.uniform(-0.5, 0.5, (group, d)))
    # Row 0 must sit in a middle group: put the first middle group first.
    parts.insert(0, parts.pop(lo))
    return np.vstack(parts)


def _heavy_tailed_plans(plan, variant):
    """The plan a heavy-tailed mean mechanism runs under ``variant``: the shipped
    ``plan``, or (bound variant) the same plan with τ multiplied by the variant's factor
    and the noise scale and sensitivity kept for τ: clipping at 10τ, noise planned for
    τ. The halved noise comes from the variant's random source instead (the shipped
    plan asks for the full noise, :class:`~..variants.ScaledNoiseSource` draws half)."""
    if variant.bound == 1.0:
        return plan
    return dataclasses.replace(plan, tau=variant.bound * plan.tau)


def case_cwme(epsilon=2.0, delta=0.0, n_groups=3, group=10, d=1, tau=1.0):
    """:func:`~skdpsparse.mechanisms.heavy_tailed.cwme` run with the plan of
    :func:`~skdpsparse.mechanisms.heavy_tailed.plan_cwme`, on consecutive groups whose
    median is the group of row 0, which goes from -100τ to +100τ in every coordinate:
    the sensitivity 6τ/n_min (odd m) or 3τ/n_min (even m) is attained. Laplace (d = 1:
    Δ₁ = Δ∞) when δ = 0, Gaussian under zCDP otherwise; statistic: the sum of the
    coordinates (the difference direction). Bound variant: a replaced plan, clipping
    at 10τ with the noise planned for τ."""
    from ...mechanisms import heavy_tailed as H

    X0, X1 = dense_pair(_cwme_rows(n_groups, group, d), 100.0 * tau)
    plan = H.plan_cwme(*X0.shape, tau=tau, n_groups=n_groups, epsilon=epsilon, delta=delta)

    def mechanism(X, rng, variant):
        return H.cwme(X, _heavy_tailed_plans(plan, variant), variant.source(rng)).sum()

    claims = claimed_epsilons(plan.budget, (delta, CURVE_DELTA))
    noise = "laplace" if delta == 0 else "gaussian, zCDP"
    return Case(f"private_cwme ({noise}, m={n_groups})", mechanism, (X0, X1),
                tuple(claims), _detect(delta))


def case_noise_smoothing(epsilon=8.0, delta=1e-5, n=20, d=3, tau=1.0, extreme=None):
    """:func:`~skdpsparse.mechanisms.heavy_tailed.nsme` run with the plan of
    :func:`~skdpsparse.mechanisms.heavy_tailed.plan_noise_smoothing`; row 0 goes from
    -10⁶τ to +10⁶τ in every coordinate (ψ_c saturates: change 2S_cτ/n per
    coordinate), or from -``extreme`` to +``extreme``; statistic: the sum of the
    coordinates. Bound variant: a replaced plan, soft truncation at 10τ with the noise
    planned for τ.

    ``extreme=1.7e308`` with τ < 1 is the pair of issue 17: x/τ overflowed to ±inf,
    which the kernel marked as non-finite input, and the mechanism refused finite data.
    """
    from ...mechanisms import heavy_tailed as H

    rows = np.random.default_rng(0).standard_normal((n, d))
    X0, X1 = dense_pair(rows, 1e6 * tau if extreme is None else extreme)
    plan = H.plan_noise_smoothing(*X0.shape, tau=tau, epsilon=epsilon, delta=delta)

    def mechanism(X, rng, variant):
        return H.nsme(X, _heavy_tailed_plans(plan, variant), variant.source(rng)).sum()

    name = "private_noise_smoothing_mean" + ("" if extreme is None else f" (±{extreme:g})")
    return Case(name, mechanism, (X0, X1),
                tuple(claimed_epsilons(plan.budget, (delta, CURVE_DELTA))), _GAUSSIAN_DETECT)


def case_sparse_mean_estimator(epsilon=2.0, delta=0.0, n=50, d=8, L=1.0):
    """:class:`~skdpsparse.mean.DPSparseMeanEstimator` end to end on CSR input
    (projection method, s = 1); statistic: ``mean_`` on the unique column. Variants:
    the estimator's own parameters replaced (``norm_bound`` 10L; ε re-solved so that
    its planned noise is the shipped one, or half of it)."""
    from ...mean import DPSparseMeanEstimator
    from ...mechanisms.projection import mean_noise

    params = dict(delta=delta, sparsity=1, method="projection")

    def noise_at(eps, k):
        return mean_noise(n, epsilon=eps, delta=delta, norm_bound=k * L, sparsity=1)[1]

    @_per_variant
    def epsilon_for(variant):
        return replanned_epsilon(variant, noise_at, epsilon)

    def mechanism(X, rng, variant):
        est = DPSparseMeanEstimator(epsilon=epsilon_for(variant), norm_bound=variant.bound * L,
                                    random_state=rng, **params)
        return est.fit(X).mean_[0]

    X0, X1 = sparse_pair(n, d, L)
    scale = noise_at(epsilon, 1.0)
    budget = DPSparseMeanEstimator(epsilon=epsilon, norm_bound=L, random_state=0,
                                   **params).fit(X0).privacy_spent_
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA), gaussian=(scale, 2 * L / n))
    return Case("DPSparseMeanEstimator", mechanism, (X0, X1), tuple(claims), _detect(delta))


def case_heavy_tailed_mean(epsilon=8.0, delta=1e-5, n=40, d=3, tau=1.0):
    """:class:`~skdpsparse.mean.DPHeavyTailedMean` (cwme, 2 groups, rows shuffled into
    groups at random as shipped). With two equal groups the median is the mean of all
    clipped rows whatever the permutation, so row 0 going from -100τ to +100τ moves
    every coordinate by the full 3τ/n_min; statistic: the sum of ``mean_``. Variants:
    ``truncation`` 10τ and ε re-solved for its ``noise_scale_``."""
    from ...mean import DPHeavyTailedMean

    params = dict(delta=delta, n_groups=2, method="cwme", shuffle=True)
    rows = np.random.default_rng(0).uniform(-2 * tau, 2 * tau, (n, d))
    X0, X1 = dense_pair(rows, 100.0 * tau)

    def fit(X, eps, k, random_state):
        return DPHeavyTailedMean(epsilon=eps, truncation=k * tau, random_state=random_state,
                                 **params).fit(X)

    def noise_at(eps, k):
        return fit(X0, eps, k, 0).noise_scale_

    @_per_variant
    def epsilon_for(variant):
        return replanned_epsilon(variant, noise_at, epsilon)

    def mechanism(X, rng, variant):
        return fit(X, epsilon_for(variant), variant.bound, rng).mean_.sum()

    budget = fit(X0, epsilon, 1.0, 0).privacy_spent_
    claims = claimed_epsilons(budget, (delta, CURVE_DELTA))
    noise = "laplace" if delta == 0 else "gaussian, zCDP"
    return Case(f"DPHeavyTailedMean (cwme, {noise})", mechanism, (X0, X1), tuple(claims),
                _detect(delta))


#: Why the CWME interval rounding of issue 17 (item 4) cannot show in a release, so that
#: ``tests/audit`` tests the rounding of the statistic directly instead.
CWME_ROUNDING_HIDDEN = """\
Rounding c ± 3τ outwards widens the clipping interval by at most 2·ulp(|c| + 3τ) ≤
2^-51·(|c| + 3τ), so the statistic moves by at most that much beyond its sensitivity.
The release is round(clip(v/γ, ±2^60))·γ plus integer noise of scale N ≥ 2^29 on the
grid γ ≤ b·2^-29 (b the noise scale; skdpsparse.mechanisms.noise): a statistic beyond
2^60·γ ≤ 2^31·b is clamped, and two clamped neighbours release the same distribution.
Where the release does depend on the statistic, |c| ≲ 2^31·b, so the excess is at most
2^-51·2^31·b = 2^-20·b (plus 2^-51·3τ, negligible): a privacy-loss excess of at most
about 2^-20 in ε (Laplace: shift/b), which no audit can separate from zero (it needs on
the order of 2^40 runs). The reviewer's pair (c = 1e16, τ = 0.4) is clamped at every
budget where its statistic could be released."""


#: CI sizes of the projection and sparse-mean cases: their pairs attain the sensitivity,
#: so the halved noise is a shift of 2ε = 4 Laplace scales (claim ε = 2) or μ = 3.14
#: Gaussian scales (claim 1.78 at CURVE_DELTA), and the bound variant separates the pair
#: outright. With 1000 runs per dataset the audit refutes the halved noise in every one
#: of 2000 simulated audits of those pairs (0.1 % quantiles of ε_lb: 2.17 and 2.66).
_MEAN_RUNS = 1000

#: name -> catalogue entry (builder with the CI defaults, CI size, full-size data).
CATALOGUE = {
    "projection_laplace": Entry(functools.partial(case_projection, epsilon=2.0, delta=0.0),
                                runs=_MEAN_RUNS),
    "projection_gaussian": Entry(functools.partial(case_projection, epsilon=8.0,
                                                   delta=1e-5), runs=_MEAN_RUNS),
    "sparse_mean_laplace": Entry(functools.partial(case_sparse_mean, "laplace", epsilon=2.0,
                                                   delta=0.0), runs=_MEAN_RUNS),
    "sparse_mean_gaussian": Entry(functools.partial(case_sparse_mean, "gaussian",
                                                    epsilon=8.0, delta=1e-5), runs=_MEAN_RUNS),
    # The bound variant all but separates the pair (seed 0 with 600 runs: no false
    # positive, 1 % false negatives): with 300 runs, even 5 errors of each kind on the
    # 150 counted give eps_lb 2.25 > 1.78 (Clopper-Pearson upper ends at delta 0.2), and
    # 0 and 2 errors give 3.43.
    "l1_recovery": Entry(functools.partial(case_l1_recovery, epsilon=8.0, delta=1e-5),
                         runs=300, variants=("correct", "bound x10")),
    "cwme_laplace": Entry(functools.partial(case_cwme, epsilon=2.0, delta=0.0, n_groups=3,
                                            d=1), runs=2000),
    "cwme_gaussian": Entry(functools.partial(case_cwme, epsilon=8.0, delta=1e-5, n_groups=4,
                                             d=3), runs=2000),
    "noise_smoothing": Entry(functools.partial(case_noise_smoothing, epsilon=8.0,
                                               delta=1e-5), runs=2000),
    "noise_smoothing_extreme": Entry(functools.partial(case_noise_smoothing, epsilon=8.0,
                                                       delta=1e-5, tau=0.5,
                                                       extreme=1.7e308), runs=2000),
    "sparse_mean_estimator": Entry(functools.partial(case_sparse_mean_estimator, epsilon=2.0,
                                                     delta=0.0), runs=1000),
    "heavy_tailed_mean_laplace": Entry(functools.partial(case_heavy_tailed_mean, epsilon=2.0,
                                                         delta=0.0, d=1), runs=1000),
    "heavy_tailed_mean_gaussian": Entry(functools.partial(case_heavy_tailed_mean,
                                                          epsilon=8.0, delta=1e-5),
                                        runs=2000),
}
