"""Warnings and errors specific to differential privacy."""


class PrivacyLeakWarning(UserWarning):
    """A choice was made that may weaken or void the privacy guarantee.

    Raised, for instance, when a bound that the guarantee depends on was not given
    and could only be guessed from the data, or when a fixed ``random_state`` makes
    the noise reproducible by anyone who knows the seed.
    """


class BudgetExceededError(RuntimeError):
    """A fit would spend more privacy budget than a ledger allows."""
