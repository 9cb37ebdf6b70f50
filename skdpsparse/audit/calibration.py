"""A cache of the pure calibration functions, so that thousands of audit runs are cheap.

This is not a broken variant and changes no output bit: the functions cached take
numbers and return numbers or a frozen plan. It is the one place where the audit
rebinds names in loaded modules (:func:`replaced`), because the estimators call their
calibration through module-level names; with ``functools.lru_cache`` on those functions
where they are defined it would not be needed.
"""

import contextlib
import functools
import importlib
import sys

__all__ = ["memoized_calibration", "replaced"]


@contextlib.contextmanager
def replaced(substitutes, package="skdpsparse"):
    """Temporarily rebind, in every loaded module of ``package``, each module-level name
    bound to a key of ``substitutes`` (a dict original -> replacement).

    Names are found by identity, so ``from .calibrate import gaussian_sigma`` in any
    module is caught. Not thread-safe: for audits and tests only.
    """
    by_id = {id(k): v for k, v in substitutes.items()}
    saved = []
    try:
        for name, module in list(sys.modules.items()):
            if module is None or not (name == package or name.startswith(package + ".")):
                continue
            for attr, value in list(vars(module).items()):
                if id(value) in by_id:
                    saved.append((module, attr, value))
                    setattr(module, attr, by_id[id(value)])
        yield
    finally:
        for module, attr, value in reversed(saved):
            setattr(module, attr, value)


def memoized_calibration():
    """Cache the pure calibration and planning functions (numbers in, numbers or a frozen
    plan out) wherever the package calls them. Outputs are unchanged; thousands of runs
    of a Gaussian or zCDP mechanism, or fits of an estimator whose noise comes from an
    accountant's root find, no longer pay it each time.

    Cached: :mod:`skdpsparse.accounting`'s Gaussian calibrations and zCDP conversions,
    :func:`~skdpsparse.mechanisms.cyclic_sgd.plan_cyclic_sgd`,
    :func:`~skdpsparse.mechanisms.output_perturbation.plan_output_perturbation` and
    :func:`~skdpsparse.mechanisms.noisy_sgd.noisy_sgd_privacy`.
    """
    from ..accounting import budget, calibrate, discrete
    from ..mechanisms import cyclic_sgd, noisy_sgd, output_perturbation

    # The estimators bind these functions by name: load them before rebinding.
    importlib.import_module("skdpsparse.linear_model")
    pure = [calibrate.gaussian_sigma, calibrate.analytic_gaussian_sigma,
            discrete.discrete_gaussian_sigma,
            budget.approx_dp_to_zcdp, budget.zcdp_to_epsilon, cyclic_sgd.plan_cyclic_sgd,
            output_perturbation.plan_output_perturbation, noisy_sgd.noisy_sgd_privacy]
    return replaced({f: functools.lru_cache(maxsize=256)(f) for f in pure})
