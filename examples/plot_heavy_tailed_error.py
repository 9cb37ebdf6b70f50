"""
===================================================
Private means of heavy-tailed data: error against n
===================================================

When the rows have no norm bound — only a bound on a moment of each coordinate —
the usual recipe (clip every row to a fixed norm C, then add Gaussian noise) is
biased: the clipped mean is not the mean, and the bias does not shrink with n.
:class:`~skdpsparse.mean.DPHeavyTailedMean` implements the two estimators of seed
004 (Kamath, Liu and Zhang, *Improved Rates for DP Stochastic Convex Optimization
with Heavy-Tailed Data*): the coordinate-wise trimmed median of means
(``method="cwme"``, Algorithm 3) and the noise-smoothing mean
(``method="noise_smoothing"``, Algorithm 4). Their truncation level τ grows with n
(Corollary 4.2), so the bias vanishes, and with a bounded k-th moment the ℓ2 error
falls like

.. math::

    \\sqrt{\\frac{d}{n}} + \\left(\\frac{d}{\\sqrt{\\rho}\\, n}\\right)^{(k-1)/k},

which for k = 2 is a slope of −1/2 on a log-log plot.

This example measures the error against n on Student-t and symmetrized Pareto
data (both with 3 degrees of freedom / shape 3, so only moments below 3 are
finite), next to a clipped Gaussian mean.
"""

import os
import sys

import matplotlib.pyplot as plt
import numpy as np

from skdpsparse.accounting import gaussian_sigma
from skdpsparse.datasets import central_moment_bound, make_heavy_tailed
from skdpsparse.mean import DPHeavyTailedMean

# SKDPSPARSE_EXAMPLES_SMALL=1 (set by the test suite) runs a tiny version in seconds.
SMALL = os.environ.get("SKDPSPARSE_EXAMPLES_SMALL") == "1"

EPSILON, DELTA, K = 1.0, 1e-6, 2
D = 10 if SMALL else 50
NS = np.geomspace(1_000, 10_000 if SMALL else 300_000, 3 if SMALL else 6).round().astype(int)
SEEDS = range(1 if SMALL else 3)
CLIP_GRID = np.geomspace(1.0, 100.0, 7 if SMALL else 13)

print(f"privacy: (epsilon, delta) = ({EPSILON}, {DELTA}) for every private estimator; "
      f"d = {D}, moment k = {K}; {len(SEEDS)} seed(s) per point")

# %%
# Estimators
# ----------
# The moment bound M = E|x_j − μ_j|² is the exact variance of the generating law
# (:func:`~skdpsparse.datasets.central_moment_bound`): public knowledge about the
# data source, not an estimate. The heavy-tailed means get ``moment=2`` and
# ``moment_bound=M`` and choose τ by Corollary 4.2 (``truncation="auto"``). They
# run under ρ-zCDP with ρ the largest value whose conversion gives (ε, δ)-DP.
#
# Two clipped Gaussian means are the baseline: rows scaled to ℓ2 norm at most C,
# their mean plus Gaussian noise for the sensitivity 2C/n (analytic Gaussian
# mechanism, the same (ε, δ)). One uses C = √(dM), the typical norm of a centred
# row, fixed in advance; the other uses the C of a grid with the smallest error
# *against the true mean*, a non-private choice that no private analysis could
# make — a generous baseline. Seeds are fixed for reproducibility of the figure only.


# The Gaussian mechanism's σ is proportional to the sensitivity: calibrate it once.
SIGMA_PER_SENSITIVITY = gaussian_sigma(1.0, EPSILON, DELTA)


def clipped_gaussian_mean(X, norms, C, noise):
    """Rows scaled to norm <= C, averaged, plus ``noise`` (standard normal) times σ."""
    scale = np.minimum(1.0, C / np.maximum(norms, 1e-300))
    mean = X.T @ scale / X.shape[0]
    return mean + SIGMA_PER_SENSITIVITY * 2 * C / X.shape[0] * noise


LABELS = {"cwme": "DPHeavyTailedMean, cwme", "noise_smoothing":
          "DPHeavyTailedMean, noise_smoothing", "clip_fixed": "clipped Gaussian, C = √(dM)",
          "clip_best": "clipped Gaussian, best C in hindsight (non-private tuning)",
          "sample": "sample mean (not private)"}


def errors(distribution):
    M = central_moment_bound(distribution, 3.0, K)
    # One sample of the largest size per seed; its first n rows are a sample of size n.
    data = [make_heavy_tailed(int(NS[-1]), D, distribution=distribution,
                              tail_parameter=3.0, random_state=seed) for seed in SEEDS]
    res = {key: [] for key in LABELS}
    for n in NS:
        errs = {key: [] for key in LABELS}
        for seed, (X_all, mu) in zip(SEEDS, data):
            X = X_all[:n]
            for method in ("cwme", "noise_smoothing"):
                est = DPHeavyTailedMean(epsilon=EPSILON, delta=DELTA, moment=K,
                                        moment_bound=M, method=method,
                                        random_state=100 + seed).fit(X)
                errs[method].append(np.linalg.norm(est.mean_ - mu))
                if n == NS[-1] and seed == SEEDS[-1]:
                    print(f"{distribution}, n = {n}, {method}: tau = {est.truncation_:.1f}, "
                          f"noise std per coordinate = {est.noise_scale_:.4f}, "
                          f"spent {est.privacy_spent_} = {est.approx_dp_spent_}")
            # One noise draw for every C, so that the best C really is the best.
            noise = np.random.default_rng(200 + seed).standard_normal(D)
            norms = np.linalg.norm(X, axis=1)
            clip_errors = {C: np.linalg.norm(clipped_gaussian_mean(X, norms, C, noise) - mu)
                           for C in [np.sqrt(D * M), *CLIP_GRID]}
            errs["clip_fixed"].append(clip_errors[np.sqrt(D * M)])
            errs["clip_best"].append(min(clip_errors.values()))
            errs["sample"].append(np.linalg.norm(X.mean(axis=0) - mu))
        for key in LABELS:
            res[key].append(float(np.mean(errs[key])))
    return M, res


results = {dist: errors(dist) for dist in ("student_t", "pareto")}
for dist, (M, res) in results.items():
    print(f"\n{dist}(3), moment bound M = {M:g}: l2 error against n")
    print(f"{'n':>8} " + " ".join(f"{key:>16}" for key in LABELS))
    for i, n in enumerate(NS):
        print(f"{n:>8} " + " ".join(f"{res[key][i]:>16.4f}" for key in LABELS))
    for method in ("cwme", "noise_smoothing"):
        slope = np.polyfit(np.log(NS), np.log(res[method]), 1)[0]
        print(f"  log-log slope of {method}: {slope:.3f} (Corollary 4.2: -0.5)")

# %%
# The figure
# ----------
# One panel per distribution, log-log axes. The grey
# dashed lines have slope −1/2 and pass through the error of cwme and of
# noise_smoothing at the largest n: only their slope is the theory's.

fig, axes = plt.subplots(1, 2, figsize=(11, 5.6), sharey=True)
styles = {"cwme": "o-", "noise_smoothing": "s-", "clip_fixed": "v-", "clip_best": "^-",
          "sample": "k:"}
for ax, (dist, (M, res)) in zip(axes, results.items()):
    for key, label in LABELS.items():
        ax.plot(NS, res[key], styles[key], label=label, ms=5)
    for i, method in enumerate(("cwme", "noise_smoothing")):
        ax.plot(NS, res[method][-1] * (NS / NS[-1]) ** -0.5, "--", color="grey",
                label=r"slope $-1/2$ (Corollary 4.2, $k=2$)" if i == 0 else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of rows n")
    ax.set_title(f"{dist.replace('_', '-')}(3) coordinates, d = {D}, M = {M:g}")
axes[0].set_ylabel(r"$\ell_2$ error $\|\hat\mu - \mu\|_2$ (mean over seeds)")
fig.suptitle(f"Heavy-tailed means, (ε, δ) = ({EPSILON:g}, {DELTA:g})")
fig.tight_layout(rect=(0, 0.1, 1, 1))
fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8)
# Run as a script, the figures are also saved next to where it runs (the gallery
# keeps its own copies).
if "sphinx_gallery" not in sys.modules:
    stem = os.path.splitext(os.path.basename(__file__))[0]
    for num in plt.get_fignums():
        plt.figure(num).savefig(f"{stem}_{num}.png", dpi=120)
plt.show()

# %%
# What to conclude. Both estimators of Kamath, Liu and Zhang (2022) follow the −1/2 slope that
# Corollary 4.2 predicts for k = 2 (the fitted slopes are printed above): their
# error keeps falling as n grows, with no bound on the norm of a row. The clipped
# Gaussian mean with C fixed in advance stops improving: once its noise, of order
# C√d/(εn), is small, what is left is the bias of clipping, which more rows do not
# reduce (the flat end of its curve).
#
# The constants are another matter, and this figure does not hide them. Corollary
# 4.2's τ is chosen for the rate, not for the constant: at n = 3·10⁵ it is about
# 140 (printed above) for coordinates of standard deviation √3. The cwme noise
# also carries the number of groups m (a group mean moves by 3τ·m/n when one row
# changes), so cwme is one to two orders of magnitude above the others at every n
# shown. The noise-smoothing mean has no such factor; on the Pareto data it comes
# within a factor 1.5 of the fixed clipping at n = 3·10⁵ and, extrapolating the two
# slopes, passes it before n = 10⁶ (near 2·10⁶ on the Student-t data). The clipped mean
# tuned in hindsight follows the non-private sample mean: at d = 50 and ε = 1 the
# noise is not what limits it, and its C was picked by looking at the true mean.
# In practice: the heavy-tailed estimators are the ones whose error provably
# vanishes without a norm bound; at moderate n a τ smaller than Corollary 4.2's
# (``truncation=...``, chosen without looking at the data) is worth trying.
