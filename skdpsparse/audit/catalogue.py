"""The entry point: the catalogue of cases and running it at CI or full size.

``tests/audit`` runs :func:`run` on every entry at CI size; ``benchmarks/audit.py``
runs it at CI size (``--quick``) or at full size.
"""

from .case import audit_failures, run_case
from .cases import CATALOGUE

__all__ = ["CASES", "CATALOGUE", "run"]

#: name -> builder of the case with its CI defaults (``CATALOGUE[name].build``).
CASES = {name: entry.build for name, entry in CATALOGUE.items()}


def run(name, *, quick=True, n_runs=None, seed=0, variants=None, **overrides):
    """Build and audit one catalogue case.

    Parameters
    ----------
    name : str
        A key of :data:`CATALOGUE`.
    quick : bool, default=True
        CI size (the entry's runs and variants); otherwise every variant at ``n_runs``
        with the entry's full-size data.
    n_runs : int, optional
        Runs per dataset and variant (default: the entry's CI runs).
    seed : int, default=0
    variants : tuple of str, optional
        Overrides the variants run.
    **overrides
        Keywords of the case builder (e.g. a smaller ε at full size).

    Returns
    -------
    case : Case
    results : dict
        ``{variant: [AuditResult, ...]}``, one result per claim.
    failures : list of str
        :func:`~skdpsparse.audit.case.audit_failures`; empty when the audit passes.
    """
    entry = CATALOGUE[name]
    if quick:
        case = entry.build(**overrides)
        variants = entry.variants if variants is None else variants
    else:
        case = entry.build(**{**entry.full, **overrides})
        variants = entry.supports if variants is None else variants
    results = run_case(case, n_runs=entry.runs if n_runs is None else n_runs, seed=seed,
                       variants=variants)
    teeth_elsewhere = quick and bool(entry.teeth_in) and variants == entry.variants
    return case, results, audit_failures(case, results, require_teeth=not teeth_elsewhere)
