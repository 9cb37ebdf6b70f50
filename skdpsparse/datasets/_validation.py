"""Argument checks shared by the dataset generators.

Every error names the offending parameter, so ``pytest.raises(..., match=name)`` and
a user reading a traceback both see at once which argument was wrong. A value of the
wrong type raises ``TypeError``; a value of the right type outside its range raises
``ValueError``.
"""

import numbers

import numpy as np


def check_int(value, name, *, min_value=None, max_value=None):
    """Return ``value`` as a Python int after checking its type and range."""
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}.")
    value = int(value)
    if min_value is not None and value < min_value:
        raise ValueError(f"{name} must be >= {min_value}, got {value}.")
    if max_value is not None and value > max_value:
        raise ValueError(f"{name} must be <= {max_value}, got {value}.")
    return value


def check_real(value, name, *, low=None, high=None, low_inclusive=True, high_inclusive=True):
    """Return ``value`` as a finite Python float in the given interval."""
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}."
        )
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}.")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value}.")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        op = "<=" if high_inclusive else "<"
        raise ValueError(f"{name} must be {op} {high}, got {value}.")
    return value


def check_option(value, name, options):
    """Check that ``value`` is one of the strings in ``options``."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {sorted(options)}, got {value!r}.")
    return value


def check_bool(value, name):
    """Check that ``value`` is a bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r} of type {type(value).__name__}.")
    return bool(value)


def check_vector(value, name, n_features, *, allow_scalar=False):
    """Return ``value`` as a finite float64 vector of shape ``(n_features,)``.

    With ``allow_scalar=True`` a real scalar is broadcast to that shape.
    """
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be array-like of real numbers, got {value!r}.") from exc
    if arr.ndim == 0 and allow_scalar:
        arr = np.full(n_features, float(arr))
    if arr.shape != (n_features,):
        raise ValueError(
            f"{name} must have shape ({n_features},) (n_features,), got shape {arr.shape}."
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite values.")
    return arr.copy()
