"""
=====================================
Privacy–utility curves: private means
=====================================

The error of the two private mean estimators of skdpsparse as the budget ε varies
from 0.25 to 8 (δ = 10⁻⁶), against the non-private sample mean and a dense DP
baseline:

* :class:`~skdpsparse.mean.DPSparseMeanEstimator` on sparse rows (Ghazi et al. 2024,
  Section 3), against the Gaussian mechanism on the same bounded rows
  (``method="gaussian"``: the dense DP baseline, noise on every coordinate).
* :class:`~skdpsparse.mean.DPHeavyTailedMean` on heavy-tailed rows (Kamath, Liu and Zhang 2022,
  Section 4), against a clipped Gaussian mean (rows scaled to norm ≤ C, Gaussian
  noise for the sensitivity 2C/n), the usual dense recipe.

Errors are ℓ2 distances to the *population* mean, which the generators know
exactly, so the non-private sample mean has an error too: the statistical floor.
"""

import os
import sys

import matplotlib.pyplot as plt
import numpy as np

from skdpsparse.accounting import gaussian_sigma
from skdpsparse.datasets import central_moment_bound, make_heavy_tailed, make_sparse_vectors
from skdpsparse.mean import DPHeavyTailedMean, DPSparseMeanEstimator

# SKDPSPARSE_EXAMPLES_SMALL=1 (set by the test suite) runs a tiny version in seconds.
SMALL = os.environ.get("SKDPSPARSE_EXAMPLES_SMALL") == "1"

EPSILONS = [0.5, 4.0] if SMALL else [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
DELTA = 1e-6
SEEDS = range(1 if SMALL else 5)
N_SPARSE, D_SPARSE, S = (1_000, 5_000, 10) if SMALL else (10_000, 100_000, 10)
N_HEAVY, D_HEAVY = (2_000, 10) if SMALL else (100_000, 20)

print(f"delta = {DELTA} for every private estimator; {len(SEEDS)} noise seed(s) per point")

# %%
# Sparse rows
# -----------
# :func:`~skdpsparse.datasets.make_sparse_vectors`: s nonzeros per row, unit norm,
# a few popular columns per field (power law). ``sparsity=s`` and ``norm_bound=1``
# are known by construction (public). ``method="auto"`` picks the mechanism from
# (n, d, s, ε, δ) alone; the pure-DP projection mechanism (δ = 0, Laplace noise) is
# shown too. Seeds are fixed for reproducibility of the figure only.

X, mu = make_sparse_vectors(N_SPARSE, D_SPARSE, S, column_distribution="power_law",
                            power_law_exponent=2.0, random_state=0)
sparse_floor = np.linalg.norm(np.asarray(X.mean(axis=0)).ravel() - mu)
SPARSE_METHODS = {
    'DPSparseMeanEstimator, method="auto"': dict(method="auto", delta=DELTA),
    "DPSparseMeanEstimator, projection, pure DP (δ = 0)": dict(method="projection",
                                                               delta=0.0),
    'Gaussian mechanism (method="gaussian", dense baseline)': dict(method="gaussian",
                                                                   delta=DELTA),
}
sparse_err = {name: np.zeros((len(EPSILONS), len(SEEDS))) for name in SPARSE_METHODS}
print(f"\nsparse rows: n = {N_SPARSE}, d = {D_SPARSE}, s = {S}; "
      f"non-private sample mean error {sparse_floor:.4f}")
for name, kw in SPARSE_METHODS.items():
    for i, eps in enumerate(EPSILONS):
        for j, seed in enumerate(SEEDS):
            est = DPSparseMeanEstimator(epsilon=eps, sparsity=S, norm_bound=1.0,
                                        random_state=seed, **kw).fit(X)
            sparse_err[name][i, j] = np.linalg.norm(est.mean_ - mu)
        print(f"  {name:<56} {str(est.privacy_spent_):>16} ({est.method_}) "
              f"error {sparse_err[name][i].mean():.4f}")

# %%
# Heavy-tailed rows
# -----------------
# :func:`~skdpsparse.datasets.make_heavy_tailed`: Student-t coordinates with 3
# degrees of freedom (only moments below 3 exist), no bound on a row's norm. The
# moment bound M = E|x_j − μ_j|² = 3 is a property of the source, known in
# advance. The heavy-tailed means choose their truncation by Corollary 4.2. The
# clipped Gaussian mean uses C = √(dM), the typical norm of a centred row, also
# fixed in advance.

X, mu = make_heavy_tailed(N_HEAVY, D_HEAVY, distribution="student_t", tail_parameter=3.0,
                          random_state=0)
M = central_moment_bound("student_t", 3.0, 2)
heavy_floor = np.linalg.norm(X.mean(axis=0) - mu)
C = np.sqrt(D_HEAVY * M)
norms = np.linalg.norm(X, axis=1)
clipped_mean = X.T @ np.minimum(1.0, C / np.maximum(norms, 1e-300)) / N_HEAVY
HEAVY_METHODS = ["DPHeavyTailedMean, cwme", "DPHeavyTailedMean, noise_smoothing",
                 "clipped Gaussian mean, C = √(dM) (dense baseline)"]
heavy_err = {name: np.zeros((len(EPSILONS), len(SEEDS))) for name in HEAVY_METHODS}
print(f"\nheavy-tailed rows: n = {N_HEAVY}, d = {D_HEAVY}, Student-t(3), M = {M:g}; "
      f"non-private sample mean error {heavy_floor:.4f}")
for i, eps in enumerate(EPSILONS):
    sigma = gaussian_sigma(2 * C / N_HEAVY, eps, DELTA)
    for j, seed in enumerate(SEEDS):
        for name, method in zip(HEAVY_METHODS, ["cwme", "noise_smoothing"]):
            est = DPHeavyTailedMean(epsilon=eps, delta=DELTA, moment=2, moment_bound=M,
                                    method=method, random_state=seed).fit(X)
            heavy_err[name][i, j] = np.linalg.norm(est.mean_ - mu)
        noisy = clipped_mean + sigma * np.random.default_rng(seed).standard_normal(D_HEAVY)
        heavy_err[HEAVY_METHODS[2]][i, j] = np.linalg.norm(noisy - mu)
    print(f"  eps = {eps:g}: spent {est.privacy_spent_} = {est.approx_dp_spent_}; errors "
          + ", ".join(f"{name.split(', ')[-1]} {heavy_err[name][i].mean():.4f}"
                      for name in HEAVY_METHODS))

# %%
# The figure
# ----------
# Mean ℓ2 error over the noise seeds (bars: standard deviation), log-log axes.

fig, axes = plt.subplots(1, 2, figsize=(12, 5.4))
panels = [(axes[0], sparse_err, sparse_floor,
           f"sparse rows: n = {N_SPARSE}, d = {D_SPARSE}, s = {S}"),
          (axes[1], heavy_err, heavy_floor,
           f"Student-t(3) rows: n = {N_HEAVY}, d = {D_HEAVY}")]
for ax, errs, floor, title in panels:
    for (name, err), marker in zip(errs.items(), "osv"):
        ax.errorbar(EPSILONS, err.mean(axis=1), yerr=err.std(axis=1), fmt=marker + "-",
                    capsize=3, ms=5, label=name)
    ax.axhline(floor, color="k", label="sample mean (not private)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(EPSILONS, [f"{e:g}" for e in EPSILONS])
    ax.minorticks_off()
    ax.set_xlabel("privacy budget ε")
    ax.set_ylabel(r"$\ell_2$ error to the population mean")
    ax.set_title(title)
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14))
fig.suptitle(f"Private means against ε (δ = {DELTA:g} where δ > 0)")
fig.tight_layout()
# Run as a script, the figures are also saved next to where it runs (the gallery
# keeps its own copies).
if "sphinx_gallery" not in sys.modules:
    stem = os.path.splitext(os.path.basename(__file__))[0]
    for num in plt.get_fignums():
        plt.figure(num).savefig(f"{stem}_{num}.png", dpi=120)
plt.show()

# %%
# What to conclude. On sparse rows the sparse mean estimator is better than the
# dense Gaussian mechanism at every ε — by more than an order of magnitude at small
# ε — because its error grows with s·log d instead of d (Ghazi et al. 2024, Table 1);
# even with pure DP (δ = 0) the projection mechanism beats dense (ε, δ) noise. As ε
# grows, its error approaches the sampling error of the non-private mean, which no
# estimator can beat. On heavy-tailed rows the noise-smoothing mean improves
# steadily with ε and passes the fixed-C clipped mean near ε = 4. The clipped mean
# is flat: with d = 20 and n = 10⁵ its noise is negligible at every ε shown, and
# what is left is the bias of clipping, which no budget removes. cwme, whose noise
# carries the number of groups and Corollary 4.2's large τ, is far above both at
# this n: see the error-against-n example for how the three compare as n grows.
