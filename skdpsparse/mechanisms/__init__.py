"""Randomizers on vectors and batches: data in, private numbers out.

One module per family (see ``ARCHITECTURE.md``): ``noise`` (the only place noise is
drawn), ``projection`` (Ghazi et al. 2024 Algorithm 1), ``l1_recovery`` with ``sensing``
(Ghazi et al. 2024 Algorithm 2; its basis pursuit decoder, post-processing, is in
``skdpsparse._solvers``), ``sparse_mean`` (choosing among them from public quantities),
``heavy_tailed`` (Kamath, Liu and Zhang 2022 Algorithms 3 and 4).

Plan, then run. Every mechanism is split in two: ``plan_<mechanism>(public numbers)``
returns a frozen plan (its noise scales, sensitivities, bounds and the privacy event it
will charge; no data enter), and the mechanism runs that plan on the data with a secret
key. This package's ``__all__`` is the index of the plans: each name below is loaded
from its module on first use (``skdpsparse.mechanisms.plan_cwme`` is
``skdpsparse.mechanisms.heavy_tailed.plan_cwme``), so importing one mechanism does not
import the others (nor numba).
"""

import importlib

#: module -> the plans it defines (the builder ``plan_*`` and the frozen plan it returns).
_PLANS = {
    "bias_reduced": ("BiasReducedSGDPlan", "RenyiFilterPlan", "plan_bias_reduced_sgd",
                     "plan_renyi_filter"),
    "cyclic_sgd": ("CyclicSGDPlan", "plan_cyclic_sgd"),
    "dp_sgd": ("DPSGDPlan", "plan_dp_sgd"),
    "heavy_tailed": ("CWMEPlan", "NoiseSmoothingPlan", "plan_cwme", "plan_noise_smoothing"),
    "heavy_tailed_clip": ("ClippedMeanPlan", "QuantileClipPlan", "plan_clipped_mean",
                          "plan_quantile_clipped_mean"),
    "heavy_tailed_mean": ("HeavyTailedMeanPlan", "plan_heavy_tailed_mean"),
    "heavy_tailed_sco": ("HeavyTailedSCOPlan", "plan_heavy_tailed_regression",
                         "plan_heavy_tailed_sco"),
    "l1_recovery": ("L1RecoveryPlan", "plan_l1_recovery"),
    "noise": ("GridNoise", "plan_grid_noise"),
    "noisy_sgd": ("NoisySGDPlan", "plan_noisy_sgd"),
    "output_perturbation": ("OutputPerturbationPlan", "plan_output_perturbation"),
    "private_selection": ("RandomStoppingPlan", "plan_random_stopping"),
    "projection": ("ProjectionPlan", "plan_projection"),
    "sparse_exponential": ("SparseExponentialPlan", "plan_sparse_exponential"),
    "sparse_mean": ("SparseMeanPlan", "plan_sparse_mean", "plan_threshold"),
}
_MODULE_OF = {name: module for module, names in _PLANS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name):
    # PEP 562: a plan is imported from its module when first asked for (no cycle is
    # involved: no mechanism module imports this package's names).
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
