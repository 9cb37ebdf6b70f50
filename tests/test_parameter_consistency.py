"""One name for one thing across the public estimators, with one default and one place
in the signature where the meaning is the same (issue 21).

Read from the signatures of every estimator :func:`~skdpsparse.utils.discovery.
all_estimators` lists, so an estimator added later is checked too. Where an estimator
deviates today, the deviation is listed below with its reason; the tests assert that
the deviations are *exactly* those listed (not an xfail list): a new deviation fails,
and so does a listed one that was fixed (remove it from the list).
"""

import inspect

import pytest

from skdpsparse.utils.discovery import all_estimators

#: The shared parameters and their one default.
SHARED_DEFAULTS = {
    "epsilon": 1.0,
    "delta": 1e-6,
    "norm_bound": 1.0,         # R: rows scaled into ‖x‖₂ ≤ R
    "sparsity": None,          # s: None means s = n_features
    "fit_intercept": True,
    "label_bound": None,       # B: None means B = 1 with a warning before fitting
    "bound_fraction": 0.1,     # the share of ε spent on bounds set to "private"
    "huber_threshold": 1.0,
    "smoothing": 1.0,          # width of the smoothed hinge
    "classes": None,           # None reads the labels from y, with a PrivacyLeakWarning
    "calibration": "analytic",
    "failure_prob": 0.1,
    "moment": 2,
    "moment_bound": 1.0,
    "smoothing_variance": 1.0,
    "learning_rate": "auto",
    "truncation": "auto",
    "batch_size": "auto",
    "epochs": "auto",
    "clip_norm": "auto",
    "noise_multiplier": None,  # None: calibrated to (ε, δ)
    "shuffle": True,
    "verbose": 0,
    "random_state": None,
}

#: (estimator, parameter) -> why its default differs. Exactly today's deviations.
KNOWN_DEVIATIONS = {
    ("DPSGDRegressor", "label_bound"):
        "'private' (a private quantile at bound_fraction of ε); the others default to "
        "None (B = 1, warned)",
    ("DPSGDRegressor", "bound_fraction"): "0.05 against 0.1",
    ("DPNoisySGDClassifier", "learning_rate"):
        "'paper' (the step size of Arora et al. 2020), a different rule from 'auto'",
    ("DPNoisySGDRegressor", "learning_rate"): "as for the classifier",
}

#: Parameters that mean the same thing under one name but whose default is the
#: algorithm's own (its theorem needs a value, or None means something else there):
#: recorded here so that a reader sees the differences in one place.
ALGORITHM_SPECIFIC = {
    "radius": "the ℓ2 ball of the parameters: None (ℝᵖ) for output perturbation and "
              "cyclic SGD; 10 for bias-reduced SGD (its step size needs it); 1 for "
              "noisy SGD (its theorem); None = 10 with a warning for the heavy-tailed "
              "regressor (its theorems need a ball)",
    "alpha": "the regularization weight of each objective: 'auto' (output "
             "perturbation), 1e-4 (cyclic SGD, scikit-learn's SGD), 0 (DP-SGD, "
             "heavy-tailed regressor)",
    "max_iter": "steps: a cap (None) for bias-reduced SGD, T ('auto') for the "
                "heavy-tailed regressor",
    "solver_max_iter": "iterations of two different solvers (1000 for the ERM of "
                       "output perturbation, 500 for basis pursuit)",
    "intercept_scaling": "c: 'auto' (R/√s, regularized like a coefficient) for "
                         "output perturbation, 1.0 for bias-reduced SGD (unregularized, "
                         "in a ball of radius D: c bounds the intercept by c·D)",
    "smoothness": "the loss's smoothness: None (from the loss) for cyclic SGD, the "
                  "assumed constant L = 1 of the heavy-tailed regressor's theorems",
    "loss": "each estimator's own default loss",
    "method": "each estimator's own mechanisms",
}

#: Former names, which may only survive as deprecated parameters (default
#: "deprecated", warning FutureWarning when set), and the name they became.
FORMER_NAMES = {
    "huber_delta": "huber_threshold",
    "loss_param": "huber_threshold",
}

#: Estimators whose parameters are not keyword-only after the primary ones, today.
POSITIONAL_DEVIATIONS = {}

#: The primary parameters that may come by position (scikit-learn's convention).
PRIMARY = {"loss", "estimator", "param_grid"}

#: Estimators that do not put ``verbose`` right before ``random_state``, today.
ORDER_DEVIATIONS = {
}


def _signatures():
    return {name: inspect.signature(cls).parameters for name, cls in all_estimators()}


def test_the_estimators_are_read():
    names = set(_signatures())
    assert {"DPOutputPerturbationRegressor", "DPBiasReducedSGDClassifier",
            "DPHeavyTailedRegressor", "DPSparseMeanEstimator"} <= names


def test_shared_parameters_have_one_default():
    found = {}
    for name, params in _signatures().items():
        for p, param in params.items():
            if p in SHARED_DEFAULTS and not _same(param.default, SHARED_DEFAULTS[p]):
                found[(name, p)] = param.default
    assert set(found) == set(KNOWN_DEVIATIONS), (
        f"new deviations: {sorted(set(found) - set(KNOWN_DEVIATIONS))} "
        f"(defaults {[found[k] for k in sorted(set(found) - set(KNOWN_DEVIATIONS))]}); "
        f"fixed, remove from KNOWN_DEVIATIONS: "
        f"{sorted(set(KNOWN_DEVIATIONS) - set(found))}")


def _same(a, b):
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float))
        and not isinstance(a, bool) and not isinstance(b, bool) and a == b)


def test_every_parameter_shared_by_two_families_is_accounted_for():
    """A name that estimators of two modules use (a classifier and its regressor share
    their module) is either one thing with one default (SHARED_DEFAULTS) or listed
    with the reason its default is the algorithm's (ALGORITHM_SPECIFIC)."""
    users = {}
    for name, cls in all_estimators():
        for p in inspect.signature(cls).parameters:
            users.setdefault(p, set()).add(cls.__module__)
    shared = {p for p, modules in users.items() if len(modules) > 1}
    unaccounted = shared - set(SHARED_DEFAULTS) - set(ALGORITHM_SPECIFIC) - PRIMARY
    assert not unaccounted, {p: sorted(users[p]) for p in unaccounted}


def test_former_names_survive_only_as_deprecated_parameters():
    for name, params in _signatures().items():
        for former, current in FORMER_NAMES.items():
            if former in params:
                assert params[former].default == "deprecated", (name, former)
                assert current in params, (name, former, current)


@pytest.mark.parametrize("name", sorted(_signatures()))
def test_parameters_after_the_primary_ones_are_keyword_only(name):
    params = _signatures()[name]
    positional = [p for p, param in params.items()
                  if param.kind == param.POSITIONAL_OR_KEYWORD and p not in PRIMARY]
    assert bool(positional) == (name in POSITIONAL_DEVIATIONS), (name, positional)


def test_epsilon_delta_first_and_verbose_random_state_last():
    """After the primary parameters come epsilon and delta; verbose and random_state
    close the signature (only deprecated names may follow)."""
    found = set()
    for name, params in _signatures().items():
        names = [p for p in params if p not in PRIMARY]
        live = [p for p in names if params[p].default != "deprecated"]
        if live[:2] != ["epsilon", "delta"]:
            found.add((name, "epsilon"))
        if "verbose" in live and live[-2:] != ["verbose", "random_state"]:
            found.add((name, "verbose"))
        elif live[-1] != "random_state":
            found.add((name, "random_state"))
    assert found == set(ORDER_DEVIATIONS), (
        f"new: {sorted(found - set(ORDER_DEVIATIONS))}; fixed: "
        f"{sorted(set(ORDER_DEVIATIONS) - found)}")


class _Deviating:
    """An estimator written against every rule above (for the audit below)."""

    def __init__(self, loss="squared", epsilon=2.0, *, delta=1e-6, huber_delta=1.0,
                 random_state=None, verbose=0, label_bound=1.0, mechanism="exact"):
        pass


@pytest.mark.parametrize("check", [
    test_shared_parameters_have_one_default,
    test_every_parameter_shared_by_two_families_is_accounted_for,
    test_former_names_survive_only_as_deprecated_parameters,
    lambda: test_parameters_after_the_primary_ones_are_keyword_only("_Deviating"),
    test_epsilon_delta_first_and_verbose_random_state_last,
], ids=["defaults", "shared_names", "former_names", "keyword_only", "order"])
def test_each_rule_catches_a_deviating_estimator(monkeypatch, check):
    """Audit: with an estimator that breaks the rules added to all_estimators(), every
    test above fails: defaults (epsilon=2.0, label_bound=1.0), a name another module
    uses for its own thing (``mechanism``, unaccounted), a former name not deprecated
    (huber_delta), a positional epsilon, the order (random_state before verbose)."""
    import sys

    module = sys.modules[__name__]
    listed = all_estimators()
    monkeypatch.setattr(_Deviating, "__module__", "elsewhere")
    monkeypatch.setattr(module, "all_estimators", lambda: [*listed, ("_Deviating", _Deviating)])
    with pytest.raises(AssertionError):
        check()


@pytest.mark.parametrize("name", ["DPSparseMeanEstimator", "DPHeavyTailedMean"])
def test_the_means_former_positional_calls_still_work_with_a_warning(name):
    import skdpsparse

    cls = getattr(skdpsparse, name)
    with pytest.warns(FutureWarning, match="epsilon, delta as keyword arguments"):
        est = cls(0.5, 1e-7)
    assert (est.epsilon, est.delta) == (0.5, 1e-7)
    with pytest.raises(TypeError, match="multiple values for epsilon"):
        with pytest.warns(FutureWarning):
            cls(0.5, epsilon=1.0)
