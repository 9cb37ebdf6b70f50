"""What a fitted model cost: :func:`privacy_spent`, and the check that every step
that learns from the data does so privately.

A pipeline is private only if **every** step that learns from the private rows has a
privacy guarantee. A ``StandardScaler`` in front of a private estimator is fit on the
rows without noise, and its ``mean_`` and ``scale_`` are released with the model: one
outlier moves ``mean_`` by (outlier)/n, which tells neighbouring datasets apart with
certainty whatever the private step reports. So the library certifies a composition
only when each of its steps is

* **private**: an estimator with its own ``epsilon`` parameter that reports a fitted
  ``privacy_spent_`` (the library's estimators, :class:`~skdpsparse.model_selection.
  PrivateParameterSelection`); its cost is counted;
* **stateless**: its fit learns nothing from the rows, so it costs nothing:
  ``Normalizer``, ``Binarizer``, ``FunctionTransformer`` (without an inverse check,
  which evaluates the inverse on the rows during ``fit``), ``HashingVectorizer``,
  ``FeatureHasher``, ``AdditiveChi2Sampler``, a ``OneHotEncoder`` or
  ``OrdinalEncoder`` with declared ``categories`` and no ``min_frequency`` or
  ``max_categories`` (which count the rows), ``FrozenEstimator`` (its state must come
  from public data: the library cannot check where it came from), and the strings
  ``"passthrough"`` / ``"drop"``;
* a **composition** of such steps: ``Pipeline``, ``FeatureUnion``, or a
  ``ColumnTransformer`` whose columns are given by name, index, mask or
  ``make_column_selector`` (a callable could choose columns from the data).

Everything else is refused with a ``ValueError`` that names the step: any other
transformer or estimator (it learns from the data, or the library cannot tell), and
meta-estimators it does not know, e.g. ``GridSearchCV`` (it selects with non-private
scores). A step that is row-wise in ``transform`` but not stateless can be fit on
public data beforehand and wrapped in ``FrozenEstimator``.

The check is by exact type: a subclass of an allowed class may learn in ``fit`` and
is refused. What a ``FunctionTransformer``'s function does is not checked; it must be
row-wise (the i-th output row a function of the i-th input row only).
"""

import functools
import math
from numbers import Integral
from types import SimpleNamespace

import numpy as np

from .accounting import ZCDP, ApproxDP, PureDP, compose_events, event_of

__all__ = ["check_private_steps", "privacy_spent"]

_SKIP = ("passthrough", "drop")
_SEARCHES = ("GridSearchCV", "RandomizedSearchCV", "HalvingGridSearchCV",
             "HalvingRandomSearchCV")
# Set by PrivateParameterSelection on the model it releases: (the selection's total,
# the private step, that step's privacy_spent_ at release).
SELECTION_MARK = "_skdpsparse_selected_by"


@functools.cache
def _sk():
    """The scikit-learn classes the checks know (imported on first use, so that
    ``import skdpsparse`` stays light)."""
    from sklearn.compose import ColumnTransformer, make_column_selector
    from sklearn.feature_extraction import FeatureHasher
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.kernel_approximation import AdditiveChi2Sampler
    from sklearn.pipeline import FeatureUnion, Pipeline
    from sklearn.preprocessing import (
        Binarizer,
        FunctionTransformer,
        Normalizer,
        OneHotEncoder,
        OrdinalEncoder,
    )

    stateless = (Normalizer, Binarizer, HashingVectorizer, FeatureHasher, AdditiveChi2Sampler)
    try:  # scikit-learn >= 1.6
        from sklearn.frozen import FrozenEstimator
        stateless += (FrozenEstimator,)
    except ImportError:  # pragma: no cover - the library requires 1.6
        pass
    return SimpleNamespace(
        ColumnTransformer=ColumnTransformer, make_column_selector=make_column_selector,
        FeatureUnion=FeatureUnion, Pipeline=Pipeline, FunctionTransformer=FunctionTransformer,
        encoders=(OneHotEncoder, OrdinalEncoder), stateless=stateless)


def _is_private(step):
    try:
        return "epsilon" in step.get_params(deep=False)
    except Exception:  # noqa: BLE001 - not an estimator: not private
        return False


def _stateless(step):
    """None if ``step`` learns nothing from the rows, else why it is not stateless."""
    sk, kind = _sk(), type(step)
    if kind in sk.stateless:
        return None
    if kind is sk.FunctionTransformer:
        if step.inverse_func is not None and step.func is not None and step.check_inverse:
            return ("evaluates inverse_func on the rows in fit (check_inverse=True: it "
                    "warns depending on them; pass check_inverse=False)")
        return None
    if kind in sk.encoders:
        if isinstance(step.categories, str):  # "auto": read from the data
            return "reads its categories from the data (categories='auto': declare them)"
        if step.min_frequency is not None or step.max_categories is not None:
            return "counts the rows (min_frequency / max_categories: leave them None)"
        return None
    return "learns from the data"


def _refuse(path, step, why):
    raise ValueError(
        f"step {path!r} ({type(step).__name__}) {why} without a privacy guarantee: "
        "what it computes from the rows would be released unprotected, so the privacy "
        "of the whole cannot be certified. Use a stateless step (Normalizer, "
        "FunctionTransformer, HashingVectorizer, OneHotEncoder with declared "
        "categories, ...), a private estimator, or fit the step on public data and "
        "wrap it in FrozenEstimator.")


def _columns_ok(columns):
    return not callable(columns) or isinstance(columns, _sk().make_column_selector)


def _children(node, fitted):
    """The (name, step) children of a known composition, or None for a leaf."""
    sk = _sk()
    if isinstance(node, sk.Pipeline):
        return list(node.steps)
    if isinstance(node, sk.FeatureUnion):
        return list(node.transformer_list)
    if isinstance(node, sk.ColumnTransformer):
        entries = node.transformers_ if fitted and hasattr(node, "transformers_") else (
            list(node.transformers) + [("remainder", node.remainder, None)])
        out = []
        for name, step, columns in entries:
            if columns is not None and not _columns_ok(columns):
                raise ValueError(
                    f"step {name!r} of a ColumnTransformer selects its columns with a "
                    "callable, which may choose them from the data; give names, indices, "
                    "a mask or make_column_selector.")
            out.append((name, step))
        return out
    return None


def _walk(node, path, fitted, out):
    """Append (path, private step) to ``out``; raise on a non-private learned step."""
    if node is None or (isinstance(node, str) and node in _SKIP):
        return out
    if fitted and _selection_budget(node) is not None:
        out.append((path, node))  # released by a private selection: its total
        return out
    children = _children(node, fitted)
    if children is not None:
        for name, step in children:
            _walk(step, f"{path}__{name}" if path else name, fitted, out)
        return out
    if _is_private(node):
        out.append((path, node))
        return out
    why = _stateless(node)
    if why is not None:
        if type(node).__name__ in _SEARCHES:
            why = "selects with scores computed on the data"
        _refuse(path or type(node).__name__, node, why)
    return out


def check_private_steps(estimator):
    """The private steps of an (unfitted) estimator or composition, by path.

    Raises ``ValueError`` if a step learns from the data without a privacy guarantee
    (module docstring). Nothing is fit.

    Parameters
    ----------
    estimator : estimator, Pipeline, FeatureUnion or ColumnTransformer

    Returns
    -------
    list of (str, estimator)
        Each private step with its path (``"clf"``, ``"union__a"``; ``""`` for
        ``estimator`` itself).
    """
    return _walk(estimator, "", False, [])


def _selection_budget(node):
    mark = getattr(node, SELECTION_MARK, None)
    if mark is None:
        return None
    total, owner, owner_budget = mark
    # A refit of the released model is a new fit: the mark then no longer applies.
    return total if getattr(owner, "privacy_spent_", None) is owner_budget else None


def _budget_of(path, step):
    budget = _selection_budget(step)
    if budget is None:
        budget = getattr(step, "privacy_spent_", None)
    if not isinstance(budget, (PureDP, ApproxDP, ZCDP)):
        raise ValueError(f"private step {path or type(step).__name__!r} "
                         f"({type(step).__name__}) is not fitted: it reports no "
                         "privacy_spent_.")
    return budget


def privacy_spent(estimator, *, delta=None):
    """The privacy guarantee of a fitted estimator or pipeline, all steps composed.

    Every step that learned from the data must be private or stateless (module
    docstring); a composition with any other learned step is refused, because its
    fitted state is released without noise. The private steps' ``privacy_spent_``
    are composed with the tightest rule that applies to their privacy events
    (:func:`~skdpsparse.accounting.compose_events`: Gaussians exactly, discrete
    Gaussians and zCDP in ρ, mixtures by Rényi DP, opaque (ε, δ) budgets by basic
    composition). The composition theorems hold for steps fit one after the other on
    the same rows, each possibly depending on the earlier ones' outputs, as in a
    ``Pipeline`` or ``FeatureUnion``.

    A model released by :class:`~skdpsparse.model_selection.PrivateParameterSelection`
    (``best_estimator_`` or its private step) reports the selection's total, which
    covers the choice among runs, not the run budget its step was fit with.

    Parameters
    ----------
    estimator : fitted estimator, Pipeline, FeatureUnion or ColumnTransformer
    delta : float, optional
        Target δ of the composed total. Without it: one private step's budget is
        returned as it is; several are composed at the sum of their δs when they are
        all ``PureDP`` or ``ApproxDP`` (a ``PureDP`` total when all are pure), and
        ``ZCDP`` steps alone add up in ρ. A mix with a ``ZCDP`` step needs ``delta``.

    Returns
    -------
    PureDP, ApproxDP or ZCDP

    Raises
    ------
    ValueError
        If a step learned from the data without a privacy guarantee, a private step
        is not fitted, there is no private step, or a needed ``delta`` is missing.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import Normalizer, StandardScaler
    >>> from skdpsparse import privacy_spent
    >>> from skdpsparse.linear_model import DPOutputPerturbationRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 3))
    >>> y = X @ np.ones(3) / 4
    >>> pipe = make_pipeline(Normalizer(), DPOutputPerturbationRegressor()).fit(X, y)
    >>> print(privacy_spent(pipe))
    (1, 1e-06)-DP
    >>> leaky = make_pipeline(StandardScaler(), DPOutputPerturbationRegressor()).fit(X, y)
    >>> privacy_spent(leaky)
    Traceback (most recent call last):
    ...
    ValueError: step 'standardscaler' (StandardScaler) learns from the data without a privacy guarantee: ...
    """
    steps = _walk(estimator, "", True, [])
    if not steps:
        raise ValueError(f"{type(estimator).__name__} has no private step: nothing "
                         "whose privacy could be reported.")
    budgets = [_budget_of(path, step) for path, step in steps]
    if delta is None:
        if len(budgets) == 1:
            return budgets[0]
        if all(isinstance(b, ZCDP) for b in budgets):
            return ZCDP(math.fsum(b.rho for b in budgets))
        if any(isinstance(b, ZCDP) for b in budgets):
            raise ValueError("the private steps mix zCDP and (epsilon, delta) budgets: "
                             "pass delta= for the total.")
        if all(isinstance(b, PureDP) or (isinstance(b, ApproxDP) and b.delta == 0)
               for b in budgets):
            return compose_events([event_of(b) for b in budgets])
        delta = math.fsum(b.delta for b in budgets if isinstance(b, ApproxDP))
    if isinstance(delta, (bool, np.bool_)) or not isinstance(delta, (float, Integral)):
        raise TypeError(f"delta must be a float, got {delta!r}")
    return compose_events([event_of(b) for b in budgets], float(delta))
