"""Validation of estimator hyperparameters, with errors that name the parameter.

scikit-learn's own constraint classes live in a private module; a DP library must not
break when such a module moves, so the few constraints we need are written here.
"""

import functools
import inspect
import numbers
import warnings

import numpy as np

from ..exceptions import InvalidParameterError


class Interval:
    """A real (or integer) interval constraint; ``None`` bounds are infinite.

    Values must be finite numbers (ε = inf is not a privacy guarantee).
    """

    def __init__(self, kind, left, right, closed="both"):
        if kind not in ("real", "integer"):
            raise ValueError("kind must be 'real' or 'integer'")
        self.kind, self.left, self.right, self.closed = kind, left, right, closed

    def is_satisfied_by(self, value):
        if isinstance(value, (bool, np.bool_)):
            return False
        if self.kind == "integer":
            if not isinstance(value, numbers.Integral):
                return False
        elif not isinstance(value, numbers.Real):
            return False
        if not np.isfinite(value):
            return False
        left_ok = self.left is None or (
            value >= self.left if self.closed in ("both", "left") else value > self.left
        )
        right_ok = self.right is None or (
            value <= self.right if self.closed in ("both", "right") else value < self.right
        )
        return bool(left_ok and right_ok)

    def __str__(self):
        lo = "-inf" if self.left is None else repr(self.left)
        hi = "inf" if self.right is None else repr(self.right)
        lb = "[" if self.closed in ("both", "left") and self.left is not None else "("
        rb = "]" if self.closed in ("both", "right") and self.right is not None else ")"
        what = "an int" if self.kind == "integer" else "a finite float"
        return f"{what} in the range {lb}{lo}, {hi}{rb}"


class Options:
    """One of a fixed set of values (strings, typically)."""

    def __init__(self, *options):
        self.options = options

    def is_satisfied_by(self, value):
        return isinstance(value, str) and value in self.options

    def __str__(self):
        return "one of " + ", ".join(repr(o) for o in self.options)


class InstanceOf:
    """Any instance of the given type(s); used for callables and objects."""

    def __init__(self, *types, description=None):
        self.types = types
        self.description = description or " or ".join(t.__name__ for t in types)

    def is_satisfied_by(self, value):
        return isinstance(value, self.types)

    def __str__(self):
        return f"an instance of {self.description}"


def validate_params(estimator, constraints):
    """Check every hyperparameter of ``estimator`` against ``constraints``.

    ``constraints`` maps a parameter name to a list of allowed constraints; ``None``
    in the list allows the value None. Raises
    :class:`~skdpsparse.exceptions.InvalidParameterError` (both a ``ValueError`` and a
    ``TypeError``) with a message naming the parameter and the estimator.
    """
    params = estimator.get_params(deep=False)
    for name, allowed in constraints.items():
        value = params[name]
        if value is None and None in allowed:
            continue
        if any(c is not None and c.is_satisfied_by(value) for c in allowed):
            continue
        described = [str(c) for c in allowed if c is not None]
        if None in allowed:
            described.append("None")
        raise InvalidParameterError(
            f"The {name!r} parameter of {type(estimator).__name__} must be "
            f"{' or '.join(described)}. Got {value!r} instead."
        )


def keyword_only_since(version, legacy_order):
    """Make the parameters after the first keyword-only, warning for one release.

    The decorated ``__init__`` declares them after ``*``; a call that still passes
    them by position (in ``legacy_order``, the former signature's order) gets them
    by name with a ``FutureWarning`` naming them (scikit-learn's deprecation of
    positional arguments, done here without its private helper). The signature
    that ``get_params`` and ``clone`` read is the new one (``functools.wraps``).

    Parameters
    ----------
    version : str
        The release in which the positional use stops working.
    legacy_order : sequence of str
        The keyword-only names, in the order they used to take by position.
    """
    legacy_order = tuple(legacy_order)

    def decorate(init):
        n_positional = sum(p.kind == p.POSITIONAL_OR_KEYWORD
                           for p in inspect.signature(init).parameters.values())

        @functools.wraps(init)
        def wrapper(*args, **kwargs):
            extra = args[n_positional:]
            if extra:
                names = legacy_order[:len(extra)]
                if len(extra) > len(legacy_order):
                    raise TypeError(f"{init.__qualname__} takes at most "
                                    f"{n_positional + len(legacy_order) - 1} positional "
                                    f"arguments, got {len(args) - 1}.")
                warnings.warn(
                    f"Pass {', '.join(names)} as keyword arguments: from {version} "
                    f"passing them by position will be an error (every estimator of "
                    "skdpsparse takes its parameters after the first by keyword).",
                    FutureWarning, stacklevel=2)
                clash = sorted(set(names) & set(kwargs))
                if clash:
                    raise TypeError(f"{init.__qualname__} got multiple values for "
                                    f"{', '.join(clash)}.")
                kwargs.update(zip(names, extra))
            return init(*args[:n_positional], **kwargs)

        return wrapper

    return decorate
