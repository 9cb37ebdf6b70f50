"""Find the public estimators of the package, as :func:`sklearn.utils.discovery.all_estimators`
does for scikit-learn: the one list that common tests, docs and audits iterate over, so a
new estimator is covered as soon as it is exported."""

import inspect

from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, TransformerMixin

__all__ = ["all_estimators"]

_TYPES = {"classifier": ClassifierMixin, "regressor": RegressorMixin,
          "transformer": TransformerMixin}


def all_estimators(type_filter=None):
    """The public estimators of skdpsparse, sorted by name.

    Parameters
    ----------
    type_filter : {"classifier", "regressor", "transformer"}, list of them, or None
        Keep only estimators of these kinds (by scikit-learn's mixins); ``None`` keeps
        all, meta-estimators included.

    Returns
    -------
    list of (str, type)
        ``(name, class)`` pairs; every class is importable as ``skdpsparse.<name>``.

    Examples
    --------
    >>> from skdpsparse.utils.discovery import all_estimators
    >>> [name for name, _ in all_estimators("transformer")]
    ['DPHeavyTailedMean', 'DPSparseMeanEstimator']
    """
    import skdpsparse  # late: skdpsparse imports utils

    found = []
    for name in skdpsparse.__all__:
        value = getattr(skdpsparse, name)
        if inspect.isclass(value) and issubclass(value, BaseEstimator):
            found.append((name, value))
    if type_filter is None:
        return sorted(found)
    kinds = [type_filter] if isinstance(type_filter, str) else list(type_filter)
    unknown = [k for k in kinds if k not in _TYPES]
    if unknown:
        raise ValueError(f"type_filter must be None or among {sorted(_TYPES)}, got {unknown}.")
    return sorted((n, c) for n, c in found if any(issubclass(c, _TYPES[k]) for k in kinds))
