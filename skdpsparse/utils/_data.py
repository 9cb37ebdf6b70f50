"""Input validation shared by the estimators (thin wrappers over scikit-learn's)."""

import numpy as np
from sklearn.utils.validation import validate_data

from ..ledger import charge_budget


def check_fit_input(estimator, X, y=None, *, reset=True, accept_sparse=True, **kwargs):
    """Validate ``X`` (and ``y``) the house way; sparse input becomes canonical CSR.

    NaN or infinite values raise ``ValueError`` (malformed data, not a privacy
    question); float32 is kept, other dtypes become float64.
    """
    common = dict(
        accept_sparse="csr" if accept_sparse else False,
        dtype=[np.float64, np.float32],
        ensure_all_finite=True,
        reset=reset,
    )
    common.update(kwargs)
    if y is None:
        out = validate_data(estimator, X, **common)
        X_out = out
    else:
        out = validate_data(estimator, X, y, **common)
        X_out = out[0]
    if hasattr(X_out, "has_canonical_format") and not X_out.has_canonical_format:
        X_out = as_canonical_csr(X_out)
        out = X_out if y is None else (X_out, out[1])
    return out


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
        ``feature_names_in_``.
    """
    state = vars(estimator)
    saved = {k: state[k] for k in _INPUT_ATTRIBUTES if k in state}
    try:
        if supervised:
            out = check_supervised_input(estimator, X, y, reset=True, **kwargs)
        else:
            out = check_fit_input(estimator, X, y, reset=True, **kwargs)
        attributes = {k: state[k] for k in _INPUT_ATTRIBUTES if k in state}
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
    are removed before the new ones are set.

    Returns
    -------
    estimator
    """
    try:
        charge_budget(estimator, attributes["privacy_spent_"])
    finally:  # refused or released: nothing of an earlier fit stays
        for name in fitted_attribute_names(estimator):
            delattr(estimator, name)
    for name, value in attributes.items():
        setattr(estimator, name, value)
    return estimator


def check_supervised_input(estimator, X, y, *, reset=True, **kwargs):
    """:func:`check_fit_input` for estimators that need ``y`` (a missing ``y`` raises
    scikit-learn's "requires y to be passed" error); returns ``(X, y)``."""
    if y is None:
        validate_data(estimator, X, None, reset=reset)  # raises the standard message
    return check_fit_input(estimator, X, y, reset=reset, **kwargs)


def as_canonical_csr(X):
    """``X`` as CSR without duplicate entries (copying only when needed).

    Duplicate entries would make row norms, and so every contribution bound and
    sensitivity computed from them, wrong.
    """
    import scipy.sparse as sp

    if not (sp.issparse(X) and X.format == "csr"):
        X = sp.csr_matrix(X)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X
