"""The steps every private ``fit`` shares: read the data without touching the
estimator, check the fit parameters, and release — charge the ledger, then set every
fitted attribute at once.

A fit the ledger refuses must release nothing (not even ``n_features_in_`` or
``classes_``, which scikit-learn's validation sets while it reads the data): that rule
lives here, in :func:`fit_input` and :func:`release`, rather than in each estimator.
"""

import numpy as np

from .exceptions import InvalidParameterError
from .ledger import charge_budget
from .utils._data import check_fit_input, check_supervised_input

__all__ = ["check_fit_params", "fit_input", "fitted_attribute_names", "release"]

#: The key under which :func:`fit_input` hands the data's dtype to :func:`release`.
_DTYPE_KEY = "_fit_dtype"
#: Released arrays that follow the input's float dtype.
_DTYPE_OUTPUTS = ("coef_", "intercept_", "mean_")


def check_fit_params(estimator, fit_params):
    """Refuse what ``fit`` was given beyond ``X`` and ``y``, naming it and why.

    ``sample_weight`` is refused rather than ignored: a weight multiplies one row's
    contribution, so the sensitivity every noise scale is calibrated to would be
    wrong for weights above 1 (and a weight of 0 silently drops a row, which
    contribution bounding never does). Duplicating rows instead is explicit and
    accounted for: it is a different data set, with the same per-row bound.
    """
    if not fit_params:
        return
    name = type(estimator).__name__
    if "sample_weight" in fit_params:
        raise InvalidParameterError(
            f"{name}.fit does not support sample_weight: a weight scales one row's "
            f"contribution, and the noise is calibrated to the sensitivity of unweighted "
            f"rows (each bounded by the declared norm). Pass rows without weights (or "
            f"repeat a row to count it more, which the privacy unit then covers).")
    raise InvalidParameterError(
        f"{name}.fit got unexpected fit parameters {sorted(fit_params)}; it accepts X "
        f"and y only.")


def _as_dtype(value, dtype):
    if dtype is None or dtype == np.float64:
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(dtype)
    if isinstance(value, (float, np.floating)):
        return dtype.type(value)
    return value


#: What scikit-learn's validation sets on the estimator when it reads the data.
_INPUT_ATTRIBUTES = ("n_features_in_", "feature_names_in_")


def fit_input(estimator, X, y=None, *, supervised=False, **kwargs):
    """:func:`check_fit_input` for ``fit``, leaving the estimator untouched.

    scikit-learn's validation sets ``n_features_in_`` (and ``feature_names_in_`` for
    a DataFrame) while it reads the data; here they are taken off the estimator again
    (its earlier values, if any, restored) and returned, to be set by :func:`release`
    once the budget is charged. ``supervised=True`` gives scikit-learn's "requires y
    to be passed" error for a missing ``y``.

    Returns
    -------
    X or (X, y) : the validated input
    attributes : dict
        ``n_features_in_`` and, when ``X`` has string column names,
        ``feature_names_in_``; and the dtype the data was read in (float32 or
        float64), which :func:`release` gives the released arrays.
    """
    state = vars(estimator)
    saved = {k: state[k] for k in _INPUT_ATTRIBUTES if k in state}
    try:
        if supervised:
            out = check_supervised_input(estimator, X, y, reset=True, **kwargs)
        else:
            out = check_fit_input(estimator, X, y, reset=True, **kwargs)
        attributes = {k: state[k] for k in _INPUT_ATTRIBUTES if k in state}
        X_out = out[0] if isinstance(out, tuple) else out
        attributes[_DTYPE_KEY] = np.dtype(X_out.dtype)
    finally:
        for k in _INPUT_ATTRIBUTES:
            state.pop(k, None)
        state.update(saved)
    return out, attributes


def fitted_attribute_names(estimator):
    """Names of the fitted attributes on ``estimator`` (scikit-learn's convention:
    a trailing underscore, no leading one)."""
    return [k for k in vars(estimator) if k.endswith("_") and not k.startswith("_")]


def release(estimator, attributes):
    """Charge ``attributes["privacy_spent_"]`` to the active ledgers, then set every
    fitted attribute of the fit at once; the one way ``fit`` publishes its results.

    Nothing of the fit is on the estimator before the charge (:func:`fit_input`
    keeps even ``n_features_in_`` off it). A fit the ledger refuses
    (:class:`~skdpsparse.exceptions.BudgetExceededError`, or any error while
    charging) releases nothing and leaves the estimator unfitted: the attributes of
    an earlier fit are removed too, so that no model is left beside parameters it
    was not fitted with. On success, the attributes of an earlier fit that this one
    does not set (``classes_`` of a former classifier, ``tau_`` of the other method)
    are removed before the new ones are set. The released numbers ``coef_``,
    ``intercept_`` and ``mean_`` take the dtype the data was read in (float32 in,
    float32 out, as in scikit-learn); the computation itself runs in float64, and the
    cast is post-processing of the private release.

    Returns
    -------
    estimator
    """
    attributes = dict(attributes)
    dtype = attributes.pop(_DTYPE_KEY, None)
    try:
        charge_budget(estimator, attributes["privacy_spent_"])
    finally:  # refused or released: nothing of an earlier fit stays
        for name in fitted_attribute_names(estimator):
            delattr(estimator, name)
    for name, value in attributes.items():
        setattr(estimator, name, _as_dtype(value, dtype) if name in _DTYPE_OUTPUTS else value)
    return estimator
