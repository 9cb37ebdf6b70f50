"""Input validation shared by the estimators (thin wrappers over scikit-learn's).

The fit-time steps that touch the estimator (reading the data without setting
anything, and the release after the charge) are in :mod:`skdpsparse.base`.
"""

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..exceptions import warn_privacy_leak


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


def declared_classes(estimator, y):
    """The label set, and the one check of ``y`` against it, for every classifier.

    ``estimator.classes`` declared: the sorted unique declared labels (at least 2), and
    every label of ``y`` must be one of them. A label that is not is input malformed
    relative to a declared parameter: a ``ValueError`` naming ``classes``, raised
    before anything is computed, charged or released (the policy of the user guide,
    "Validation errors"). Declared labels are accepted whatever their type (0.5
    included: scikit-learn's target-type check does not apply to a declared set),
    and need not all occur in ``y``.

    ``classes=None``: the labels present in ``y`` (scikit-learn's checks of
    classification targets), with a :class:`~skdpsparse.exceptions.PrivacyLeakWarning`
    (which labels occur is data).
    """
    if estimator.classes is None:
        check_classification_targets(y)
        classes = np.unique(y)
        warn_privacy_leak(
            "classes=None: the label set is read from y, which reveals which labels "
            "occur. Declare classes to keep the guarantee of privacy_spent_.")
        if classes.size < 2:
            raise ValueError(f"{type(estimator).__name__} needs samples of at least 2 "
                             f"classes; got 1 class ({classes[0]!r}).")
        return classes
    try:
        classes = np.unique(np.asarray(estimator.classes))
    except TypeError as err:  # labels that cannot be ordered (e.g. mixed str and int)
        raise ValueError(f"classes must be labels of one comparable type, got "
                         f"{estimator.classes!r}.") from err
    if classes.ndim != 1 or classes.size < 2:
        raise ValueError(f"classes must declare at least 2 labels, got {estimator.classes!r}.")
    undeclared = _undeclared_labels(np.asarray(y), classes)
    if undeclared:
        shown = ", ".join(repr(v) for v in undeclared[:3])
        more = f" and {len(undeclared) - 3} more" if len(undeclared) > 3 else ""
        raise ValueError(
            f"y has labels not declared in classes={estimator.classes!r}: {shown}{more}. "
            "Every label must be one of the declared classes (or set classes=None, "
            "which reads the label set from y and reveals it).")
    return classes


def _undeclared_labels(y, classes):
    """The distinct labels of ``y`` that are not in ``classes`` (equality as NumPy
    compares: 1.0 is the label 1, "1" is not)."""
    if y.size == 0:
        return []
    try:
        known = np.isin(y, classes)
    except TypeError:  # incomparable types: compare one by one
        known = np.array([any(v == c for c in classes) for v in y.tolist()])
    bad = y[~known]
    if bad.size == 0:
        return []
    seen = []
    for v in bad.tolist():
        if v not in seen:
            seen.append(v)
    return seen
