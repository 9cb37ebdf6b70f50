"""Warnings and errors specific to differential privacy."""

import os
import sys
import warnings


class PrivacyLeakWarning(UserWarning):
    """``fit`` read from the data something the guarantee assumes is fixed in advance.

    Raised today in one situation: a classifier with ``classes=None`` takes its label
    set from ``y``, which reveals which labels occur, outside ``privacy_spent_``. The
    estimators never guess a norm bound, a truncation level or a centre from the data,
    so there is no other case to warn about.

    A fixed ``random_state`` does not raise it. A seed is a deliberate choice for tests
    and reports, and a warning on every seeded fit would fire in every test and every
    scikit-learn check, drowning the warning that matters. With a seed, each fit's
    noise key is a keyed hash of (seed, parameters, data)
    (:func:`skdpsparse.utils.fit_random_source`), so fits with other data or
    parameters (clones in ``GridSearchCV``, folds of ``cross_validate``) never share
    noise; but whoever knows the seed can recompute the noise of a fit, and the
    guarantee then holds only against those who do not. Releases should use
    ``random_state=None`` (fresh operating-system entropy for every fit); the user
    guide's "Randomness" section says so, and the estimators' ``random_state``
    parameter documents it.
    """


class BudgetExceededError(RuntimeError):
    """A fit would spend more privacy budget than a ledger allows."""


class InvalidParameterError(ValueError, TypeError):
    """A parameter (of an estimator, a budget or a mechanism) has a wrong type or value.

    One error type for every bad parameter, whatever layer checks it, and both a
    ``ValueError`` and a ``TypeError`` (scikit-learn's convention), so that
    ``epsilon="a"`` on an estimator and ``PureDP("a")`` fail the same way and code
    written for either built-in error keeps working. The message names the parameter.
    """


def warn_privacy_leak(message):
    """Issue a :class:`PrivacyLeakWarning` attributed to the user's code.

    The warning points at the first stack frame outside this package (the line that
    called ``fit``, or scikit-learn's meta-estimator that did), however many of our
    helpers lie in between; a fixed ``stacklevel`` breaks whenever one is added.
    """
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, PrivacyLeakWarning, stacklevel=level)
