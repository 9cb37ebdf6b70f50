"""Warnings and errors specific to differential privacy."""

import os
import sys
import warnings


class PrivacyLeakWarning(UserWarning):
    """A choice was made that may weaken or void the privacy guarantee.

    Raised, for instance, when a bound that the guarantee depends on was not given
    and could only be guessed from the data, or when a fixed ``random_state`` makes
    the noise reproducible by anyone who knows the seed.
    """


class BudgetExceededError(RuntimeError):
    """A fit would spend more privacy budget than a ledger allows."""


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
