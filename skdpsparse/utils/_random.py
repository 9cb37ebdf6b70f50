"""Randomness policy: every mechanism draws from a ``numpy.random.Generator``."""

import numbers

import numpy as np


def check_generator(random_state):
    """Turn a scikit-learn style ``random_state`` into a ``numpy.random.Generator``.

    Parameters
    ----------
    random_state : None, int, numpy.random.Generator or numpy.random.RandomState
        ``None`` draws fresh entropy from the operating system, so two fits never
        share noise. An int gives reproducible noise: anyone who knows the seed knows
        the noise, so fixed seeds are for tests and reports only. A ``Generator`` is
        used as is; a legacy ``RandomState`` seeds a new ``Generator`` from its stream.

    Returns
    -------
    numpy.random.Generator
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}.")
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1, size=4))
    raise ValueError(
        "random_state must be None, an int, a numpy.random.Generator or a "
        f"numpy.random.RandomState; got {random_state!r}."
    )
