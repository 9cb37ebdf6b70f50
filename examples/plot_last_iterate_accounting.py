"""
========================================================
DP-SGD noise: last-iterate versus composition accounting
========================================================

DP-SGD is usually accounted as if every iterate were published: the privacy loss of
one record is the composition of the Gaussian steps that touch it. When only the
*last* iterate is released and the loss is smooth, Kong and Ribero (2024,
*Privacy of the last iterate in cyclically-sampled DP-SGD on nonconvex composite
losses*) prove a smaller loss: the noise added after a record's last use keeps
hiding it (privacy amplification by iteration). Its Theorem 4.5 bounds the Rényi
divergence of the last iterate by that of one Gaussian step times

.. math::

    B = 1 + \\frac{K - 1}{S_L(\\lfloor n/b \\rfloor)},
    \\qquad S_L(k) = \\sum_{j<k} L^{-2j},

where K is the number of passes that use the record and L the Lipschitz constant of
one gradient step, against K times one step for composition.

This example plots the noise multiplier z (noise N(0, z²C²) on the sum of the
clipped gradients of a batch) that each accounting needs for a target (ε, δ), with
the functions of :mod:`skdpsparse.accounting` that
:class:`~skdpsparse.linear_model.DPCyclicSGD` uses. No data is involved: these are
numbers about the algorithm only.
"""

import os
import sys

import matplotlib.pyplot as plt
import numpy as np

from skdpsparse.accounting import calibrate_last_iterate_noise
from skdpsparse.datasets import make_sparse_classification
from skdpsparse.linear_model import DPCyclicSGD

# SKDPSPARSE_EXAMPLES_SMALL=1 (set by the test suite) runs a tiny version in seconds.
SMALL = os.environ.get("SKDPSPARSE_EXAMPLES_SMALL") == "1"

DELTA = 1e-5
N, BATCH, CLIP, SMOOTHNESS = 10_000, 256, 1.0, 1.0
EPOCHS, EPSILON, STEP = 20, 1.0, 0.1  # the values held fixed when another one varies
EPSILONS = np.geomspace(0.1, 10, 4 if SMALL else 13)
EPOCH_GRID = [1, 5, 20] if SMALL else [1, 2, 3, 5, 10, 20, 30, 50, 100]
STEP_GRID = np.geomspace(1e-3, 1.0, 3 if SMALL else 10)
RTOL = 1e-4

# %%
# The three accountings
# ---------------------
# Cyclic DP-SGD with n = 10⁴ examples, batches of b = 256, clipping norm C = 1, a
# convex loss whose per-example gradient is M = 1 smooth (m = 0: e.g. the logistic
# loss on rows of norm at most 2), step size λ = 0.1. Replace-one neighbours.
#
# * **composition**: RDP composition of the K Gaussian steps that use the record
#   (Mironov 2017); valid for any loss, the standard accounting.
# * **last iterate, clipping may bind**: Theorem 4.5 with L = 1 + λ·max(m, M),
#   valid whatever the clipping does.
# * **last iterate, clipping never binds**: Theorem 4.5 with the paper's L_λ of
#   eq. (12) (here L = 1 for m = 0); valid only if every per-example gradient norm
#   is at most C for every possible record, which
#   :class:`~skdpsparse.linear_model.DPCyclicSGD` ensures with ``clip_norm="auto"``
#   (C = the largest possible gradient norm).

ACCOUNTINGS = {
    "composition (all uses of a record)": {},
    "last iterate, Thm 4.5, clipping may bind": dict(
        weak_convexity=0.0, smoothness=SMOOTHNESS, clipping_can_bind=True),
    "last iterate, Thm 4.5 + eq. (12), clipping never binds": dict(
        weak_convexity=0.0, smoothness=SMOOTHNESS, clipping_can_bind=False),
}


def noise(epsilon=EPSILON, epochs=EPOCHS, step=STEP, **assumptions):
    return calibrate_last_iterate_noise(
        epsilon, DELTA, n_samples=N, batch_size=BATCH, epochs=epochs, learning_rate=step,
        clip_norm=CLIP, rtol=RTOL, **assumptions)


z_eps = {name: [noise(epsilon=e, **kw) for e in EPSILONS] for name, kw in ACCOUNTINGS.items()}
z_epochs = {name: [noise(epochs=E, **kw) for E in EPOCH_GRID]
            for name, kw in ACCOUNTINGS.items()}
z_step = {name: [noise(step=lr, **kw) for lr in STEP_GRID] for name, kw in ACCOUNTINGS.items()}

print(f"noise multiplier z for (epsilon, delta) = ({EPSILON}, {DELTA}), n = {N}, b = {BATCH}, "
      f"C = {CLIP}, M = {SMOOTHNESS}, m = 0, lambda = {STEP}")
print(f"{'E':>4} {'composition':>12} {'last, safe':>12} {'last, eq12':>12} "
      f"{'comp/safe':>10} {'comp/eq12':>10}")
for i, E in enumerate(EPOCH_GRID):
    comp, safe, eq12 = (z_epochs[name][i] for name in ACCOUNTINGS)
    print(f"{E:>4} {comp:>12.3f} {safe:>12.3f} {eq12:>12.3f} {comp / safe:>10.2f} "
          f"{comp / eq12:>10.2f}")

# %%
# The figure
# ----------
# Left: z against the target ε at E = 20 epochs. Middle: z against the number of
# epochs at ε = 1. Right: z against the step size λ at ε = 1, E = 20. All at
# δ = 10⁻⁵, on log-log axes.

fig, axes = plt.subplots(1, 3, figsize=(13, 4.6))
styles = ["o-", "s-", "^-"]
for (name, style) in zip(ACCOUNTINGS, styles):
    axes[0].plot(EPSILONS, z_eps[name], style, label=name, ms=4)
    axes[1].plot(EPOCH_GRID, z_epochs[name], style, label=name, ms=4)
    axes[2].plot(STEP_GRID, z_step[name], style, label=name, ms=4)
axes[0].set_xlabel("target ε")
axes[0].set_title(f"E = {EPOCHS} epochs, λ = {STEP}")
axes[1].set_xlabel("epochs E")
axes[1].set_title(f"ε = {EPSILON:g}, λ = {STEP}")
axes[2].set_xlabel("step size λ")
axes[2].set_title(f"ε = {EPSILON:g}, E = {EPOCHS} epochs")
for ax in axes:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylabel("noise multiplier z needed")
    ax.grid(True, which="both", alpha=0.3)
fig.suptitle(f"Cyclic DP-SGD: noise for (ε, δ = {DELTA:g}), n = {N}, b = {BATCH}, C = {CLIP:g}")
fig.tight_layout(rect=(0, 0.09, 1, 1))
fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8.5)
# Run as a script, the figures are also saved next to where it runs (the gallery
# keeps its own copies).
if "sphinx_gallery" not in sys.modules:
    stem = os.path.splitext(os.path.basename(__file__))[0]
    for num in plt.get_fignums():
        plt.figure(num).savefig(f"{stem}_{num}.png", dpi=120)
plt.show()

# %%
# What to conclude. Composition charges every use of the record, so its z grows
# roughly like √E (middle panel): 20 epochs need about twice the noise of 5. The
# clipping-safe last-iterate bound grows too — with L = 1 + λM > 1 the
# contraction S_L saturates and B is still linear in K — but with a smaller
# constant: about 2× less noise at E = 20. When clipping provably never binds,
# L = 1, S_L(k) = k = ⌊n/b⌋ and B = 1 + (K − 1)/⌊n/b⌋ stays close to 1 until the
# number of epochs approaches n/b: the noise is nearly that of a *single* pass,
# almost 4× less than composition at E = 20. The right panel shows where the step
# size enters: only through L in the clipping-safe bound, which tends to the
# never-binds bound as λ → 0 and to composition as λ grows towards 1/M. Less
# noise at the same (ε, δ) is directly better utility; nothing is lost, because
# the released model is the same last iterate.
#
# What the estimator does
# -----------------------
# :class:`~skdpsparse.linear_model.DPCyclicSGD` computes every bound that is valid for
# its loss and settings, calibrates z on the smallest, and reports which one won in
# ``accounting_``. With its defaults (logistic loss, rows scaled to norm ≤ 1 plus an
# intercept, so M = G²/4 = 0.5 and λ = 1/M = 2; ``clip_norm="auto"`` makes clipping
# a no-op) eq. (12) applies. A fit on generated data, same n, b, E and (ε, δ):

X, y, _ = make_sparse_classification(N, 100, 5, random_state=0)
clf = DPCyclicSGD(epsilon=EPSILON, delta=DELTA, batch_size=BATCH, epochs=EPOCHS,
                  classes=[0, 1], random_state=0).fit(X, y)
print(f"DPCyclicSGD: privacy spent {clf.privacy_spent_}, z = {clf.noise_multiplier_:.3f}, "
      f"lambda = {clf.learning_rate_:g}, C = {clf.clip_norm_:.3f}, "
      f"winning bound {clf.accounting_['bound']!r}")
for name, eps in clf.accounting_["epsilons"].items():
    print(f"  epsilon at that z by {name:<15}: {eps:.3f}")

# %%
# Its z is the one of the green curve at E = 20: with m = 0, eq. (12) gives L = 1
# whatever λ and M, so the step size and the smoothness do not enter. The same z
# accounted by composition would be reported as ε ≈ 4.3 (the ``composition``
# line above): the last-iterate analysis is what lets the fit claim the target
# ε = 1 with this much less noise.
