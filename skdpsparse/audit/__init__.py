"""Empirical privacy auditing: lower bounds on ε from a distinguishing attack, run on
hard neighbouring pairs of every mechanism and estimator of the package, as shipped and
with one privacy step deliberately broken.

Layout (each module imports only those above it; no import cycle):

* :mod:`.statistics` — Clopper–Pearson bounds, the ε lower bound of a threshold attack
  (Kairouz, Oh and Viswanath 2015; Jagielski, Ullman and Oprea 2020; Nasr et al.
  2021), the claims a budget implies at each δ;
* :mod:`.calibration` — a cache of the pure calibration functions (speed only);
* :mod:`.variants` — the broken variants, passed to a case's mechanism as values: a
  random source with scaled noise, replaced public numbers (bounds ×10 with the noise
  of the true bound), replaced callables (the old noisy-SGD step order, float noise);
* :mod:`.case` — :class:`~.case.Case` (mechanism, pair, claims, required detections),
  :class:`~.case.Entry` (builder and CI size), :func:`~.case.run_case`;
* :mod:`.cases` — the catalogue by family: :mod:`~.cases.means`,
  :mod:`~.cases.linear_models`, :mod:`~.cases.selection`, :mod:`~.cases.randomness`;
* :mod:`.catalogue` — :data:`~.catalogue.CATALOGUE`, :data:`~.catalogue.CASES` and
  :func:`~.catalogue.run`, which ``tests/audit`` and ``benchmarks/audit.py`` use.

An audit can refute a claim, never prove one.
"""

from .calibration import memoized_calibration, replaced
from .case import (
    CURVE_DELTA,
    SUBSAMPLED_DELTA,
    AuditCase,
    Case,
    Entry,
    audit_failures,
    format_results,
    run_case,
)
from .catalogue import CASES, CATALOGUE, run
from .cases.randomness import float_laplace_support, floating_point_attack, mironov_distinguisher
from .statistics import (
    AuditResult,
    audit,
    audit_scores,
    claimed_epsilons,
    clopper_pearson,
    epsilon_lower_bound,
    gaussian_epsilon,
    sample_scores,
)
from .variants import (
    VARIANTS,
    ScaledNoiseSource,
    Variant,
    float_noise,
    inflated_bounds,
    scaled_noise,
)

__all__ = [
    "AuditCase", "AuditResult", "CASES", "CATALOGUE", "CURVE_DELTA", "Case", "Entry",
    "SUBSAMPLED_DELTA", "ScaledNoiseSource", "VARIANTS", "Variant", "audit",
    "audit_failures", "audit_scores", "claimed_epsilons", "clopper_pearson",
    "epsilon_lower_bound", "float_laplace_support", "float_noise", "floating_point_attack",
    "format_results", "gaussian_epsilon", "inflated_bounds", "memoized_calibration",
    "mironov_distinguisher", "replaced", "run", "run_case", "sample_scores", "scaled_noise",
]
