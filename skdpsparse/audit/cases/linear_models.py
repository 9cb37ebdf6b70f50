"""Audit cases of the linear models end to end (cyclic DP-SGD, noisy SGD, output
perturbation, the sparse exponential mechanism, the heavy-tailed regressor) and of
the bias-reduced gradient oracle as a mechanism.

Where the estimator's mechanism is a plan and its run (the heavy-tailed regressor, the
sparse exponential mechanism), a broken variant is a replaced plan: the shipped plan
with a bound multiplied by the variant's factor and its noise kept, and the noise
variant through the random source or the plan's temperature; the claim is the shipped
plan's budget. The other estimators take a ``random_state``, not a random source, so
their broken variants are the shipped estimator run from replaced public numbers:
bounds multiplied by the variant's factor, and the privacy parameter re-solved so that
the planned noise is the variant's multiple of the shipped one
(:func:`~..variants.replanned_epsilon`; for cyclic DP-SGD, its ``noise_multiplier``).
Each claim is read from the shipped fit.
"""

import dataclasses
import functools
import math

import numpy as np
from scipy import optimize

from ..case import CURVE_DELTA, SUBSAMPLED_DELTA, Case, Entry
from ..statistics import claimed_epsilons, gaussian_epsilon
from ...utils import as_random_source
from ..variants import replanned_epsilon
from ._pairs import finite, linear_pair

__all__ = [
    "CATALOGUE", "case_bias_reduced_oracle", "case_cyclic_sgd", "case_heavy_tailed_regressor",
    "case_noisy_sgd", "case_noisy_sgd_extreme_row", "case_output_perturbation",
    "case_output_perturbation_smoothed_hinge", "case_sparse_exponential",
]

_GAUSSIAN_DETECT = {"noise/2": (CURVE_DELTA,), "bound x10": (CURVE_DELTA,)}


def _detect(delta):
    if delta == 0:
        return {"noise/2": (0.0,), "bound x10": (0.0,)}
    return _GAUSSIAN_DETECT


def _per_variant(f):
    return functools.lru_cache(maxsize=None)(f)


def _heavy_tailed_regression_plan(plan, variant):
    """The plan :func:`~skdpsparse.mechanisms.heavy_tailed_sco.run_heavy_tailed_regression`
    runs under ``variant``: the shipped ``plan``, or (bound variant) the same plan with
    its truncation τ (the run's and its oracle step's) multiplied by the variant's
    factor and the step's noise scale and sensitivity kept for τ (the noise variant is
    the random source's: the plan asks for the full noise,
    :class:`~..variants.ScaledNoiseSource` draws half)."""
    if variant.bound == 1.0:
        return plan
    step = dataclasses.replace(plan.step, tau=variant.bound * plan.step.tau)
    return dataclasses.replace(plan, truncation=variant.bound * plan.truncation, step=step)


def case_heavy_tailed_regressor(epsilon=8.0, delta=1e-5, n=20, d=3, tau=1.0):
    """:class:`~skdpsparse.linear_model.DPHeavyTailedRegressor`'s mechanism: the plan of
    :func:`~skdpsparse.mechanisms.heavy_tailed_sco.plan_heavy_tailed_regression` (the
    estimator's, for ``mean_oracle="noise_smoothing"``, one step, η = 1, D = 10³)
    run by :func:`~skdpsparse.mechanisms.heavy_tailed_sco.run_heavy_tailed_regression`
    (with its random permutation of the rows). Row 0 is x = 10⁶(1, …, 1) with
    y = ∓10⁶, so its gradient at w = 0, -y(x, 1), saturates ψ_c in every coordinate of
    opposite signs in D and D'; statistic: the sum of the coefficients and the
    intercept. Variants: a replaced plan, truncation at 10τ with the noise planned for
    τ (:func:`_heavy_tailed_regression_plan`); the noise halved through the random
    source. Claims: the plan's ρ-zCDP budget."""
    from ...mechanisms.heavy_tailed_sco import (plan_heavy_tailed_regression,
                                                run_heavy_tailed_regression)

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    X[0] = 1e6
    y0, y1 = y.copy(), y.copy()
    y0[0], y1[0] = -1e6, 1e6
    plan = plan_heavy_tailed_regression(n, d, epsilon=epsilon, delta=delta, radius=1e3,
                                        oracle="noise_smoothing", max_iter=1,
                                        learning_rate=1.0, truncation=tau)

    def mechanism(data, rng, variant):
        coef, intercept, _ = run_heavy_tailed_regression(
            *data, _heavy_tailed_regression_plan(plan, variant), variant.source(rng))
        return coef.sum() + intercept

    return Case("DPHeavyTailedRegressor", mechanism, ((X, y0), (X, y1)),
                tuple(claimed_epsilons(plan.budget, (delta, CURVE_DELTA))), _GAUSSIAN_DETECT)


def case_cyclic_sgd(epsilon=8.0, delta=1e-5, n=20, d=3, epochs=2, loss="squared", R=1.0,
                    penalty=None):
    """:class:`~skdpsparse.linear_model.DPCyclicSGD` end to end (regression ``loss``, no
    penalty or ``penalty``, no intercept, CSR input; statistic: ``coef_[0]``).

    ``penalty="l2"`` (α = 10⁻⁴, the default) audits the scaled release that CSR fits
    with the ℓ2² penalty run (``doc/derivations/lazy_noise.rst``): the same claims, a
    noise on w between 1 and 1/s_min times σ (s_min = 0.99 here) and a decay of
    coordinate 0 by a = 1/(1 + λα) per step, which moves the pair by a factor
    within 10⁻³ of 1.

    Row 0's gradient is clipped to ∓C·e₀ at every step (squared loss: residual ±10⁶,
    C = R; Huber: |ℓ'| = κ, C = κR, clipping never binds). With one batch of all n rows
    (b = n, T = E steps) coordinate 0 of the last iterate is Σ_t (∓λC/n + N(0, σ²)),
    σ = λzC/n: a Gaussian mechanism with μ = 2√E/z, exactly the composition over the
    E uses that the accountant charges (at b = n, Theorem 4.5 of Kong and Ribero (2024),
    "Privacy of the last iterate in cyclically-sampled DP-SGD on nonconvex composite
    losses", gives the same B = E).
    Smaller batches only add noise of steps without the record to the release, which
    no attack on a linear model undoes, while Theorem 4.5 then charges less than E: b = n
    is the hardest pair. Claims: ``privacy_spent_`` at δ and, for the same noise
    multiplier, at CURVE_DELTA (the estimator's own RDP conversion there).

    Variants: the shipped estimator with ``noise_multiplier`` z·(noise factor)·C(R)/C(kR)
    and ``norm_bound`` kR, so that σ = λzC/b is the variant's multiple of the shipped σ
    while rows are bounded at kR and gradients clipped at C(kR).

    CI size: at the defaults (ε = 8, E = 2, z = 1.80) the halved noise is the Gaussian
    pair μ = 4√E/z = 3.14 (measured on the release: 3.26 ± 0.2), whose exact curve
    gives ε = 6.7 at CURVE_DELTA against the claim 2.66. With 1500 runs per dataset the
    audit refutes it in every one of 2000 simulated audits of that pair (0.1 % quantile
    of ε_lb: 2.96); with 1000 runs, in 99.8 % (seed 0 gave 2.77).
    """
    from ...linear_model import DPCyclicSGD
    from ...mechanisms.cyclic_sgd import plan_cyclic_sgd

    params = dict(loss=loss, penalty=penalty, fit_intercept=False, batch_size=n,
                  epochs=epochs)
    data = linear_pair(n, d, R)
    est = DPCyclicSGD(epsilon=epsilon, delta=delta, norm_bound=R, random_state=0,
                      **params).fit(*data[0])
    z = est.noise_multiplier_

    def clip_norm(k):
        return plan_cyclic_sgd(n, d, loss=loss, norm_bound=k * R, fit_intercept=False,
                               batch_size=n, epochs=epochs, delta=delta,
                               noise_multiplier=z).clip_norm

    @_per_variant
    def noise_multiplier_for(variant):
        return z * variant.noise * clip_norm(1.0) / clip_norm(variant.bound)

    def mechanism(data, rng, variant):
        if variant.is_correct:
            est = DPCyclicSGD(epsilon=epsilon, delta=delta, norm_bound=R, random_state=rng,
                              **params)
        else:
            est = DPCyclicSGD(noise_multiplier=noise_multiplier_for(variant), delta=delta,
                              norm_bound=variant.bound * R, random_state=rng, **params)
        return est.fit(*data).coef_[0]

    def epsilon_at(other):
        same_noise = DPCyclicSGD(noise_multiplier=z, delta=other, norm_bound=R,
                                 random_state=0, **params)
        return same_noise.fit(*data[0]).privacy_spent_.epsilon

    claims = claimed_epsilons(est.privacy_spent_, (delta, CURVE_DELTA), epsilon_at=epsilon_at)
    name = loss if penalty is None else f"{loss}, {penalty}"
    return Case(f"DPCyclicSGD ({name}, {est.accounting_['bound']})", mechanism, data,
                tuple(claims), _GAUSSIAN_DETECT)


def _noisy_sgd_claims(est, n, delta, other):
    """``privacy_spent_`` at δ and the same noise's guarantee at ``other`` (the
    accountant the fit used)."""
    from ...mechanisms.noisy_sgd import noisy_sgd_privacy, provable_epsilon

    if est.accounting_ == "provable":
        def epsilon_at(d):
            return provable_epsilon(est.noise_multiplier_, d)
    else:
        def epsilon_at(d):
            return noisy_sgd_privacy(n, est.noise_multiplier_, d).budget.epsilon
    return claimed_epsilons(est.privacy_spent_, (delta, other), epsilon_at=epsilon_at)


def case_noisy_sgd(epsilon=3.0, delta=1e-5, n=4, d=2, R=1.0, noise_calibration="rdp"):
    """:class:`~skdpsparse.linear_model.DPNoisySGDRegressor` end to end (Huber loss κ = 1,
    no intercept, CSR input; η = 1 with a radius of 10⁶ that never binds, the guarantee
    holds for every η and D; statistic: ``coef_[0]``), with the RDP calibration
    (unproven, the paper's) or the default ``"provable"`` one.

    Whenever row 0 is used its gradient is ∓κR·e₀ (residual ±10⁶), so each fresh step
    attains the per-step sensitivity 2L, L = κR. The release averages the iterates at
    the fresh steps: a gradient shows only through the later fresh iterates (the last
    one's never), with the noise of every step in between. Tiny n is the hardest pair:
    with n = 4 the record is the first of the ⌈n/2⌉ = 2 fresh steps with probability
    1/4 and then reaches the output almost undiluted. Claims: ``privacy_spent_`` at δ
    and, for the same noise, the accountant at SUBSAMPLED_DELTA.

    Halving the noise is not expected to be refuted: this release is a mixture of
    Gaussians whose exact privacy profile (numerical integration, n = 4, z = 1.357 of
    ε = 3) is ε = 0.33 at δ = 1e-5 and 0.19 at δ = 1e-2, and 0.69 and 0.48 with the
    noise halved, against the claims 3.0 and 1.6: the accountant charges every fresh
    step and converts an RDP curve, so the claim is sound but far above what any attack
    on the release can show. The teeth are the bounding variant (rows at 10R, ε
    re-solved so that ``noise_std_`` is the shipped one).
    """
    from ...linear_model import DPNoisySGDRegressor

    params = dict(loss="huber", huber_threshold=1.0, fit_intercept=False, radius=1e6,
                  learning_rate=1.0, noise_calibration=noise_calibration, delta=delta)
    data = linear_pair(n, d, R)

    def fit(data, eps, k, random_state):
        return DPNoisySGDRegressor(epsilon=eps, norm_bound=k * R, random_state=random_state,
                                   **params).fit(*data)

    @_per_variant
    def epsilon_for(variant):
        return replanned_epsilon(variant, lambda e, k: fit(data[0], e, k, 0).noise_std_,
                                 epsilon)

    def mechanism(data, rng, variant):
        return fit(data, epsilon_for(variant), variant.bound, rng).coef_[0]

    est = fit(data[0], epsilon, 1.0, 0)
    claims = _noisy_sgd_claims(est, n, delta, SUBSAMPLED_DELTA)
    return Case(f"DPNoisySGDRegressor (huber, {est.accounting_})", mechanism, data,
                tuple(claims), {"bound x10": (SUBSAMPLED_DELTA,)})


def case_noisy_sgd_extreme_row(epsilon=1.0, delta=1e-5, n=4, d=1, R=1.0, loss="squared",
                               extreme=1.7e308):
    """:class:`~skdpsparse.linear_model.DPNoisySGDRegressor` (``loss`` "squared", targets
    at the bound B = 2) or :class:`~skdpsparse.linear_model.DPNoisySGDClassifier`
    (``loss`` "logistic") on the pair of issue 17, item 2: row 0 is −R·e₀ in D and the
    finite extreme +``extreme``·(1, …, 1) in D' (dense input, no intercept, η = 1,
    radius 10, the default provable calibration; statistic: ``coef_[0]``, with a
    non-finite release mapped to an outcome of its own).

    The shipped kernels bound the row before any arithmetic on it, so D' is the row R·u
    (u = (1, …, 1)/√d) and the release is finite. Variant ``"raw margin"``: the same
    run (the fitted ``noise_std_`` and ``learning_rate_``) in the order the kernel had
    before the fix (:func:`~..variants.raw_margin_noisy_sgd`), margin and gradient on
    the raw row and the scale applied afterwards: ℓ'·x overflows (squared loss, |ℓ'| ≥
    1.06 at the target 2) or, for d ≥ 2, ‖x‖ overflows to inf, s = R/inf = 0 and
    ⟨x, θ⟩·0 is NaN once |⟨x, θ⟩| overflows (logistic loss, |ℓ'| ≤ 1); the projection
    (inf·0) or ℓ'(NaN) then puts NaN into θ, and into the release whenever a fresh step
    follows the record's (n = 4: the record is the first of the two fresh steps with
    probability 1/4; n = 20: it is one of fresh steps 2 to 9 of 10 with probability
    2/5). D never gives NaN, so the non-finite outcome alone refutes the claim at δ.
    """
    from ..._kernels.linear_losses import LOSS_CODES, loss_value_and_derivative
    from ...linear_model import DPNoisySGDClassifier, DPNoisySGDRegressor

    rng0 = np.random.default_rng(0)
    X = rng0.uniform(-0.5, 0.5, (n, d)) * R / math.sqrt(d)
    if loss == "logistic":
        y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
        estimator = DPNoisySGDClassifier
        extra = dict(classes=[-1.0, 1.0])
    else:  # the target B = 2: |ℓ'| = |margin − 2| > 1.06 while |θ| < 0.94
        y = np.full(n, 2.0)
        estimator = DPNoisySGDRegressor
        extra = dict(label_bound=2.0)
    params = dict(loss=loss, fit_intercept=False, norm_bound=R, radius=10.0,
                  learning_rate=1.0, epsilon=epsilon, delta=delta, **extra)
    X0, X1 = X.copy(), X.copy()
    X0[0] = -R / math.sqrt(d)
    X1[0] = extreme
    code = LOSS_CODES[loss]

    def derivative(z, target):
        return loss_value_and_derivative(code, z, target, 1.0)[1]

    est = estimator(random_state=0, **params).fit(X0, y)

    def mechanism(X, rng, variant):
        run = variant.replaced("noisy_sgd", None)
        if run is None:
            coef = estimator(random_state=rng, **params).fit(X, y).coef_
        else:
            coef = run(X, y, loss_derivative=derivative, noise_std=est.noise_std_,
                       step_size=est.learning_rate_, radius=10.0, norm_bound=R, rng=rng)
        return finite(np.ravel(coef)[0])

    claims = _noisy_sgd_claims(est, n, delta, SUBSAMPLED_DELTA)
    return Case(f"{estimator.__name__} ({loss}, row ±{extreme:g})", mechanism,
                (X0, X1), tuple(claims), {"raw margin": (delta,)})


def case_output_perturbation(epsilon=8.0, delta=1e-5, n=20, d=3, alpha=100.0, R=1.0):
    """:class:`~skdpsparse.linear_model.DPOutputPerturbationRegressor` end to end (Huber
    loss κ = 1, no intercept, λ = ``alpha``, targets clipped to B = 100, 1-sparse rows
    declared (s = 1), CSR input; Gaussian noise when δ > 0, Laplace when δ = 0;
    statistic: ``coef_[0]``).

    Coordinate 0 of the regularized ERM decouples: θ₀ minimizes ℓ(θ₀R − y₀)/n + λθ₀²/2,
    and with y₀ clipped to ∓B the Huber derivative saturates, so θ₀* = ∓κR/(λn): the
    minimizers are exactly Δ₂ = 2L/(λn) apart (L = κR), the ℓ2 sensitivity the Gaussian
    noise is calibrated to (times 1 + tol, the solver's certified slack). The Laplace
    noise is for Δ₁ = Δ₂·min(1 + (n−1)H/(λn), √p) (H = R², s = 1; 1.0095Δ₂ here), and
    the pair moves one coordinate by Δ₂ (within 2 % of the noise's ℓ1 sensitivity).
    Variants: ``norm_bound`` and ``label_bound`` ×10, ε re-solved for ``noise_scale_``.
    """
    from ...linear_model import DPOutputPerturbationRegressor
    from ...mechanisms.output_perturbation import plan_output_perturbation

    params = dict(loss="huber", huber_threshold=1.0, fit_intercept=False, sparsity=1,
                  alpha=alpha, delta=delta)
    data = linear_pair(n, d, R)

    def fit(data, eps, k, random_state):
        return DPOutputPerturbationRegressor(epsilon=eps, norm_bound=k * R,
                                             label_bound=k * 100.0,
                                             random_state=random_state, **params).fit(*data)

    @_per_variant
    def epsilon_for(variant):
        return replanned_epsilon(variant, lambda e, k: fit(data[0], e, k, 0).noise_scale_,
                                 epsilon)

    def mechanism(data, rng, variant):
        return fit(data, epsilon_for(variant), variant.bound, rng).coef_[0]

    est = fit(data[0], epsilon, 1.0, 0)
    plan = plan_output_perturbation(n, d, 1, loss="huber", epsilon=epsilon, delta=delta,
                                    alpha=alpha, norm_bound=R, sparsity=1,
                                    intercept_scaling=0.0, label_bound=100.0)
    sens = (1.0 + plan.tol) * plan.sensitivity_l2
    claims = claimed_epsilons(est.privacy_spent_, (delta, CURVE_DELTA),
                              gaussian=(est.noise_scale_, sens))
    return Case(f"DPOutputPerturbationRegressor ({plan.noise_kind})", mechanism, data,
                tuple(claims), _detect(delta))


def case_output_perturbation_smoothed_hinge(epsilon=8.0, delta=1e-5, n=2000, a=0.3,
                                            alpha=5e-3, smoothing=2.0, R=1.0):
    """:class:`~skdpsparse.linear_model.DPOutputPerturbationClassifier` with the smoothed
    hinge of width h = ``smoothing`` > 1 (no intercept, λ = ``alpha``, CSR input,
    Gaussian noise; statistic: ``coef_[0, 1]``), on the neighbours of issue 17.

    Rows 1..n-1 are (a, 0) labelled +1; row 0, labelled +1 too, is 10R·(−a, +√(1 − a²))
    in D and 10R·(−a, −√(1 − a²)) in D′ (bounding scales it back to norm R). With
    λ ≪ a²/h the other rows push θ₁ to ≈ 1/a, so row 0's margin is ≈ −1, where
    |ℓ'| ≈ 1: far from the slope 1/h at 0 that the bound ℓ₀ = 1 − h/2 (≤ 0 for h ≥ 2)
    led to. At the CI size the exact minimizers are 0.87·Δ₂ apart in coordinate 1
    (Δ₂ = 2L/(λn), L = R: the claim audited here), which the old constants put at
    1.73× their Δ₂. ``a=0.1, n=100_000, alpha=1e-4`` is the issue's own pair (0.94·Δ₂).
    Variants: ``norm_bound`` ×10, ε re-solved for ``noise_scale_``.
    """
    import scipy.sparse as sp

    from ...linear_model import DPOutputPerturbationClassifier
    from ...mechanisms.output_perturbation import plan_output_perturbation

    params = dict(loss="smoothed_hinge", smoothing=smoothing, alpha=alpha, fit_intercept=False,
                  classes=[-1, 1], delta=delta)
    rows = np.tile([a, 0.0], (n, 1))
    y = np.ones(n)
    pair = []
    for sign in (1.0, -1.0):
        X = rows.copy()
        X[0] = 10.0 * R * np.array([-a, sign * np.sqrt(1.0 - a * a)])
        pair.append((sp.csr_matrix(X), y))

    def fit(data, eps, k, random_state):
        return DPOutputPerturbationClassifier(epsilon=eps, norm_bound=k * R,
                                              random_state=random_state, **params).fit(*data)

    @_per_variant
    def epsilon_for(variant):
        return replanned_epsilon(variant, lambda e, k: fit(pair[0], e, k, 0).noise_scale_,
                                 epsilon)

    def mechanism(data, rng, variant):
        return fit(data, epsilon_for(variant), variant.bound, rng).coef_[0, 1]

    est = fit(pair[0], epsilon, 1.0, 0)
    plan = plan_output_perturbation(n, 2, 1, loss="smoothed_hinge", loss_param=smoothing,
                                    epsilon=epsilon, delta=delta, alpha=alpha,
                                    norm_bound=R, intercept_scaling=0.0)
    sens = (1.0 + plan.tol) * plan.sensitivity_l2
    claims = claimed_epsilons(est.privacy_spent_, (delta, CURVE_DELTA),
                              gaussian=(est.noise_scale_, sens))
    return Case(f"DPOutputPerturbationClassifier (smoothed hinge h={smoothing:g})",
                mechanism, tuple(pair), tuple(claims), _GAUSSIAN_DETECT)


def _sparse_exponential_plan(plan, variant):
    """The plan :func:`~skdpsparse.mechanisms.sparse_exponential.sparse_exponential`
    runs under ``variant``: the shipped ``plan``, or the same plan with the row bound
    R multiplied by the variant's ``bound`` (the score sensitivity Δ_u kept for R) and
    the temperature 2Δ_u/ε multiplied by its ``noise`` (ε/K divided by it)."""
    if variant.is_correct:
        return plan
    return dataclasses.replace(plan, norm_bound=variant.bound * plan.norm_bound,
                               epsilon_each=plan.epsilon_each / variant.noise)


def case_sparse_exponential(epsilon=2.0, delta=0.0, n=20, d=2, radius=0.5, R=1.0):
    """:class:`~skdpsparse.linear_model.DPOutputPerturbationClassifier`'s mechanism with
    ``method="exponential"``: the plan of :func:`~skdpsparse.mechanisms.
    sparse_exponential.plan_sparse_exponential` (logistic loss, no intercept,
    D = ``radius``, net step τ = D, so the net is {0, ±D·e_j}) run by
    :func:`~skdpsparse.mechanisms.sparse_exponential.sparse_exponential` on CSR rows
    with targets ±1; statistic: the released θ₀.

    Row 0 (R·e₀ after bounding) is labelled -1 in D and +1 in D': its loss changes by
    exactly Δ_u = DR at ±D·e₀ (ℓ(−t) − ℓ(t) = t for the logistic loss) and nowhere
    else. Halving the temperature is not expected to be refuted at CI size:
    the exponential mechanism is ε-bounded-range (Durfee and Rogers 2019), its privacy
    loss lies in an interval of width ε (2ε with the temperature halved), so a test
    exceeds ε only on outcomes that are rare under one of D, D'; simulations of this
    three-outcome statistic give lower bounds of about 1.0–1.1ε with 1000 runs. The
    teeth are the bounding variant, a replaced plan (:func:`_sparse_exponential_plan`:
    rows bounded at 10R, the temperature 2Δ_u/ε of the true R, so scores change by
    10Δ_u).
    """
    from ...mechanisms.sparse_exponential import plan_sparse_exponential, sparse_exponential

    data = linear_pair(n, d, R, classification=True)
    plan = plan_sparse_exponential(n, d, loss="logistic", epsilon=epsilon, radius=radius,
                                   tau=radius, norm_bound=R, intercept_scaling=0.0)

    def mechanism(data, rng, variant):
        X, y = data
        theta = sparse_exponential(X, y, _sparse_exponential_plan(plan, variant),
                                   as_random_source(rng))
        return theta[0, 0]

    return Case("sparse exponential mechanism", mechanism, data,
                tuple(claimed_epsilons(plan.budget, (delta,))), {"bound x10": (0.0,)})


# ------------------------------------------------------------- bias-reduced oracle
def _oracle_rows(n, d, L, seed=0):
    """Gradient rows (n, d): rows 1..n-1 one entry ±L/2 on columns 1..d-1; row 0 is
    -10L·e₀ in D and +10L·e₀ in D' (column 0 touched by no other row; bounding must
    scale it to ∓L·e₀)."""
    rng = np.random.default_rng(seed)
    G = np.zeros((n, d))
    G[np.arange(1, n), rng.integers(1, d, n - 1)] = rng.choice([-0.5, 0.5], n - 1) * L
    G0, G1 = G.copy(), G.copy()
    G0[0, 0], G1[0, 0] = -10.0 * L, 10.0 * L
    return G0, G1


def _gradient_rows(G):
    """``gradient_rows(rows, x)`` of the oracle on fixed rows: the dense array's rows,
    or (CSR ``G``) the CSR parts of the rows, as the linear models give them."""
    if isinstance(G, np.ndarray):
        return lambda rows, x: G[rows]

    def rows_of(rows, x):
        sub = G[np.asarray(rows)]
        return (sub.indptr.astype(np.int64), sub.indices.astype(np.int64),
                sub.data.astype(np.float64))
    return rows_of


def _amplified(budget, q):
    """Amplification by subsampling (Balle, Barthe and Gaboardi 2018, Thm 9; replacement
    neighbours), as :func:`~skdpsparse.mechanisms.bias_reduced.step_privacy` uses it: a
    mechanism run on the row with probability q is (ln(1 + q(e^ε − 1)), qδ)-DP."""
    from ...accounting import ApproxDP
    return ApproxDP(math.log1p(q * math.expm1(budget.epsilon)), q * budget.delta)


def case_bias_reduced_oracle(epsilon=5.0, delta=1e-5, n=32, d=2, L=1.0, sparse=False):
    """:class:`~skdpsparse.mechanisms.bias_reduced.BiasReducedOracle` (projection
    mechanism, analytic calibration; Algorithm 5 of Ghazi, Guzmán, Kamath, Kumar and
    Manurangsi (2024), "Differentially private optimization with sparse gradients") at
    budget (4ε, 4δ), so each of its four means at (ε, δ); one
    call at the top level N = M on n = 2^{M+1} rows, where the batch B is the whole
    dataset and O, E a random partition of it. Gradient rows are dense (bounded by
    :func:`~skdpsparse.mechanisms.projection.bounded_mean`) or, ``sparse=True``, CSR
    parts (the oracle's own bounding kernel); see :func:`_oracle_rows` for the pair.

    Claim, from the budgets the four
    :func:`~skdpsparse.mechanisms.projection.projection_mechanism` calls report (each
    ApproxDP(ε, δ)), composed over the means the row enters: G⁺ on B (always), one of
    G⁻_O, G⁻_E (O and E partition B independently of the data: parallel composition),
    and G₀, whose index is the row with probability 1/n (amplification by subsampling,
    as in :func:`~skdpsparse.mechanisms.bias_reduced.step_privacy`). Basic composition
    gives (2ε + ln(1 + (e^ε − 1)/n), 2δ + δ/n). At CURVE_DELTA: the same composition of
    each mean's exact analytic-Gaussian curve (:func:`~..statistics.gaussian_epsilon`
    of its σ and ℓ2 sensitivity 2L/m), with the δ split 2δ_a + δ_b/n = CURVE_DELTA
    that gives the smallest ε.

    Statistic: the log-likelihood ratio of coordinate 0 of the four means as if
    unprojected Gaussians (G⁺: ±L/m; the half holding the row: ±2L/m, the half unknown;
    G₀: ±L with probability 1/n). Variants: the noise halved through the random source
    the oracle spawns its four from; ``norm_bound`` 10L at the ε whose σ is that of L.

    Not the estimators ``DPBiasReducedSGDRegressor`` / ``Classifier`` end to end: before
    the projections the debiasing term G⁺ − ½(G⁻_O + G⁻_E) does not move at all with
    one row (g/m − ½·2g/m = 0), so 𝒢(x) shows the row only through G₀ (the sampled
    index with probability 1/n) and the projections' residue, while the estimator
    charges all three means on B per step plus the whole filter budget ε/2: no audit of
    them can have teeth.
    """
    import scipy.sparse as sp

    from ...mechanisms.bias_reduced import BiasReducedOracle, tgeom_max_level
    from ...mechanisms.projection import mean_noise

    M = tgeom_max_level(n)
    if 1 << (M + 1) != n:
        raise ValueError(f"n must be a power of 2 (the top batch 2^(M+1) = n); got {n}.")
    sigma = {}
    for m in (n, n // 2, 1):
        kind, sigma[m], budget = mean_noise(m, epsilon=epsilon, delta=delta, norm_bound=L,
                                            sparsity=1)
    a_b = L / n / sigma[n]            # half the shift of G⁺ in its noise units
    a_h = 2.0 * L / n / sigma[n // 2]  # of the half that holds the row
    a_i = L / sigma[1]                 # of G₀ when it holds the row
    q = 1.0 / n
    x0 = np.zeros(d)

    def noise_at(eps, k):  # σ_m/(2L/m) is the same for every m
        return mean_noise(n, epsilon=eps, delta=delta, norm_bound=k * L, sparsity=1)[1]

    @_per_variant
    def epsilon_for(variant):
        return replanned_epsilon(variant, noise_at, epsilon, with_noise=False)

    def mechanism(G, rng, variant):
        oracle = BiasReducedOracle(_gradient_rows(G), n, d, epsilon=4 * epsilon_for(variant),
                                   delta=4 * delta, norm_bound=variant.bound * L, sparsity=1,
                                   rng=variant.source(rng))
        g_b, g_o, g_e, g_i = oracle.estimates(x0, M)
        z_b, z_o, z_e = g_b[0] / sigma[n], g_o[0] / sigma[n // 2], g_e[0] / sigma[n // 2]
        z_i = g_i[0] / sigma[1]
        return (2.0 * a_b * z_b
                + np.logaddexp(a_h * z_o, a_h * z_e) - np.logaddexp(-a_h * z_o, -a_h * z_e)
                + math.log1p(q * math.expm1(a_i * z_i - a_i * a_i / 2))
                - math.log1p(q * math.expm1(-a_i * z_i - a_i * a_i / 2)))

    data = _oracle_rows(n, d, L)
    if sparse:
        data = tuple(sp.csr_matrix(G) for G in data)
    # The row enters B, one half, and G₀ with probability 1/n.
    claim = budget + budget + _amplified(budget, q)

    def eps_mean(dlt):
        return gaussian_epsilon(sigma[n], 2.0 * L / n, dlt)

    def composed(u):  # u of CURVE_DELTA to the two means on B, (1 − u) to G₀ (δ_b/n)
        d_b = (1.0 - u) * CURVE_DELTA * n
        g0 = math.log1p(q * math.expm1(eps_mean(d_b)))
        return 2.0 * eps_mean(u * CURVE_DELTA / 2) + g0

    lowest = max(0.5, 1.0 - 0.999 / (CURVE_DELTA * n))  # δ_b < 1
    best = optimize.minimize_scalar(composed, bounds=(lowest, 1.0 - 1e-9), method="bounded",
                                    options={"xatol": 1e-6})
    claims = ((claim.delta, claim.epsilon), (CURVE_DELTA, float(best.fun)))
    detect = {"noise/2": (CURVE_DELTA,)}
    if not sparse:
        detect["bound x10"] = (CURVE_DELTA,)
    fmt = "CSR" if sparse else "dense"
    return Case(f"BiasReducedOracle ({kind}, {fmt}, n={n})", mechanism, data, claims, detect)


_ALL = ("correct", "noise/2", "bound x10")

#: name -> catalogue entry (builder with the CI defaults, CI size, full-size data).
CATALOGUE = {
    "heavy_tailed_regressor": Entry(
        functools.partial(case_heavy_tailed_regressor, epsilon=8.0, delta=1e-5), runs=2000,
        variants=("correct", "noise/2")),
    "cyclic_sgd": Entry(functools.partial(case_cyclic_sgd, epsilon=8.0, delta=1e-5),
                        runs=1500, full=dict(n=200, d=20, epochs=5)),
    # The scaled release of the l2 penalty on CSR (s_min = 0.99 at this size).
    "cyclic_sgd_l2": Entry(functools.partial(case_cyclic_sgd, epsilon=8.0, delta=1e-5,
                                             penalty="l2"),
                           runs=1500, full=dict(n=200, d=20, epochs=5)),
    # The bounding variant at CI size, from audits of 500 subsamples of 3000 runs per
    # dataset (optimistic: the pool's tail is coarse; seed 0 with 1500 runs gave eps_lb
    # 1.75 where the subsamples' 1 % quantile was 1.98). RDP calibration: refuted in
    # 99.6 % with 1000 runs, in all with 2000 (1 % quantile 2.20 against the claim
    # 1.61). The provable calibration's larger noise (sigma 2.99 against 2.71) leaves
    # 80 % with 1000 runs, 96 % with 1500, 99.4 % with 2000, and seed 0 missed it with
    # 1000; its bounding code is the same, so CI audits its claim only and its bounding
    # variant runs at full size.
    "noisy_sgd": Entry(functools.partial(case_noisy_sgd, epsilon=3.0, delta=1e-5),
                       runs=2000, variants=("correct", "bound x10")),
    "noisy_sgd_provable": Entry(
        functools.partial(case_noisy_sgd, epsilon=3.0, delta=1e-5,
                          noise_calibration="provable"),
        runs=1000, variants=("correct",), teeth_in="noisy_sgd"),
    "noisy_sgd_extreme_row": Entry(
        functools.partial(case_noisy_sgd_extreme_row, epsilon=1.0, delta=1e-5),
        runs=600, variants=("correct", "raw margin"), supports=("correct", "raw margin")),
    "noisy_sgd_classifier_extreme_row": Entry(
        functools.partial(case_noisy_sgd_extreme_row, epsilon=1.0, delta=1e-5,
                          loss="logistic", d=2, n=20),
        runs=600, variants=("correct", "raw margin"), supports=("correct", "raw margin")),
    "output_perturbation_gaussian": Entry(
        functools.partial(case_output_perturbation, epsilon=8.0, delta=1e-5), runs=600,
        full=dict(n=200, d=20)),
    "output_perturbation_laplace": Entry(
        functools.partial(case_output_perturbation, epsilon=2.0, delta=0.0), runs=1000,
        variants=("correct", "noise/2"), full=dict(n=200, d=20)),
    # The pair moves coef_[0, 1] by 0.87 Delta_2 against sigma of (1 + tol) Delta_2: the
    # halved noise is the Gaussian pair mu = 2.73 (claim 1.78 at CURVE_DELTA), refuted in
    # 90 % of 2000 simulated audits with 300 runs, 99.95 % with 600 (0.1 % quantile of
    # eps_lb 1.83).
    "output_perturbation_smoothed_hinge": Entry(
        functools.partial(case_output_perturbation_smoothed_hinge, epsilon=8.0, delta=1e-5),
        runs=600, variants=("correct", "noise/2")),
    "sparse_exponential": Entry(
        functools.partial(case_sparse_exponential, epsilon=2.0, delta=0.0), runs=500,
        variants=("correct", "bound x10")),
    "bias_reduced_oracle": Entry(
        functools.partial(case_bias_reduced_oracle, epsilon=5.0, delta=1e-5), runs=3000),
    "bias_reduced_oracle_csr": Entry(
        functools.partial(case_bias_reduced_oracle, epsilon=5.0, delta=1e-5, sparse=True),
        runs=3000, variants=("correct", "noise/2")),
}
