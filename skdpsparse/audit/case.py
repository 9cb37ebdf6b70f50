"""One audit case: a mechanism, a hard neighbouring pair, the claims it makes, the broken
variants it must refute, and the size at which CI runs it.

A case's mechanism is ``mechanism(data, rng, variant) -> float``: run the mechanism
once on ``data`` under the :class:`~skdpsparse.audit.variants.Variant` ``variant`` (the
shipped code, or one privacy step broken, passed explicitly) with the
``numpy.random.Generator`` ``rng``, and return the attack statistic of the release.
"""

import functools
from dataclasses import dataclass, field
from typing import Callable, Mapping

from .calibration import memoized_calibration
from .statistics import audit
from .variants import VARIANTS

__all__ = [
    "AuditCase", "CURVE_DELTA", "Case", "Entry", "SUBSAMPLED_DELTA", "audit_failures",
    "format_results", "run_case",
]

#: δ of the second audit point of the Gaussian mechanisms. At the requested small δ a
#: broken Gaussian mechanism is only refuted with ~1/δ runs; their guarantee (the exact
#: Gaussian curve of an analytic calibration, ρ-zCDP, or the RDP curve of an
#: accountant) also fixes ε at every other δ, and at this δ a factor 2 in the noise
#: shows with a few hundred runs.
CURVE_DELTA = 0.2

#: δ of the second audit point of the subsampled mechanism (noisy SGD). A record that
#: shows in a fraction q ≈ 1/n of the runs gives tests with TPR − FPR ≤ q, hence no
#: lower bound at δ ≥ q; at this δ its claim (the accountant at δ, same noise) is
#: refuted for the bounding variant with a thousand runs.
SUBSAMPLED_DELTA = 1e-2


@dataclass(frozen=True)
class Case:
    """A mechanism, a hard neighbouring pair and the claims to audit.

    Attributes
    ----------
    name : str
    mechanism : callable
        ``mechanism(data, rng, variant) -> float``, the attack statistic of one release.
    data : tuple
        ``(D, D')``.
    claims : tuple of (delta, epsilon)
        Read from the budget the mechanism itself reports.
    detect : dict
        Broken variant name -> the δ at which it must be refuted (the audit's teeth).
    """

    name: str
    mechanism: Callable
    data: tuple
    claims: tuple
    detect: dict


#: The name the catalogue had before it was a package.
AuditCase = Case


@dataclass(frozen=True)
class Entry:
    """A catalogue entry: how to build a case, and the sizes it is run at.

    Attributes
    ----------
    build : callable
        ``build(**overrides) -> Case``, with the CI defaults (a large ε, where a factor 2
        in the noise shows in a few thousand runs); keywords override them.
    runs : int
        Runs per dataset and variant in CI (``tests/audit``, ``benchmarks/audit.py
        --quick``).
    variants : tuple of str
        Variants run in CI: the correct one and those with a required detection that CI
        can afford.
    supports : tuple of str
        Every variant the case's mechanism implements (all of them run at full size).
    slow : bool
        Marked ``slow`` in the test suite.
    full : dict
        Overrides of the data size for the full-size run of ``benchmarks/audit.py``.
    teeth_in : str
        When CI runs no broken variant of this case: the catalogue entry whose CI audit
        refutes the same broken step of the same code (its required detections run at
        full size only, where the power is there).
    """

    build: Callable
    runs: int
    variants: tuple = ("correct", "noise/2", "bound x10")
    supports: tuple = ("correct", "noise/2", "bound x10")
    slow: bool = False
    full: Mapping = field(default_factory=dict)
    teeth_in: str = ""

    @property
    def pure(self):
        """Whether the case's default claim is pure DP (δ = 0)."""
        return self.build.keywords.get("delta", None) == 0


def _statistic(mechanism, variant, data, rng):
    return mechanism(data, rng, variant)


def run_case(case, *, n_runs, seed=0, variants=("correct", "noise/2", "bound x10")):
    """Audit ``case`` under each variant; returns ``{variant name: [AuditResult, ...]}``.

    The pure calibration functions are cached meanwhile
    (:func:`~skdpsparse.audit.calibration.memoized_calibration`): no output changes.
    """
    out = {}
    with memoized_calibration():
        for name in variants:
            statistic = functools.partial(_statistic, case.mechanism, VARIANTS[name])
            out[name] = audit(statistic, *case.data, claims=case.claims, n_runs=n_runs,
                              seed=seed)
    return out


def audit_failures(case, results, require_teeth=True):
    """What an audit refutes: claims of the correct mechanism that the lower bound
    exceeds, and required detections (``case.detect``) of the broken variants present in
    ``results`` that did not happen. Empty when the audit passes. ``require_teeth``:
    running no broken variant with a required detection is a failure too."""
    out = []
    if require_teeth and not any(v in case.detect for v in results):
        out.append(f"{case.name}: no broken variant with a required detection was run")
    for r in results.get("correct", ()):
        if r.violated:
            out.append(f"{case.name}: eps_lb {r.epsilon_lb:.3f} > claimed "
                       f"{r.claimed_epsilon:.3f} at delta={r.delta:g}")
    for v, rs in results.items():
        for r in rs:
            if v != "correct" and r.delta in case.detect.get(v, ()) and not r.violated:
                out.append(f"{case.name} [{v}] not detected: eps_lb {r.epsilon_lb:.3f} <= "
                           f"claimed {r.claimed_epsilon:.3f} at delta={r.delta:g}")
    return out


def format_results(case, results):
    """One line per audited δ: claimed ε, ε_lb of each variant, runs per dataset."""
    variants = list(results)
    lines = []
    for i, (delta, eps) in enumerate(case.claims):
        lbs = "  ".join(f"{v}={results[v][i].epsilon_lb:6.3f}" for v in variants)
        n = results[variants[0]][i].n_runs
        lines.append(f"{case.name:42s} delta={delta:<7g} claimed={eps:6.3f}  {lbs}  "
                     f"runs={n}x2")
    return "\n".join(lines)
