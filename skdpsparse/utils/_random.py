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


#: Spawn key that separates the estimators' noise streams from ``default_rng(seed)``.
_NOISE_STREAM_KEY = (0x736B6470,)  # b"skdp"


def noise_generator(random_state):
    """The estimators' noise source: :func:`check_generator`, with int seeds decorrelated.

    An int seed ``k`` gives ``default_rng(SeedSequence(k, spawn_key=...))``, a stream
    independent of ``numpy.random.default_rng(k)``. Without this, an estimator fitted
    with ``random_state=k`` on data drawn from ``default_rng(k)`` (our generators, or a
    user's ``rng.normal(size=d)``) adds noise *equal* to the first draws that made the
    data: with ``make_sparse_classification(..., random_state=0)`` and
    ``random_state=0`` the Gaussian noise is the true coefficient vector, and a
    noise-dominated fit scores near the Bayes accuracy. ``None`` and ``Generator``
    behave as in :func:`check_generator` (a Generator is the caller's to keep apart).

    Parameters
    ----------
    random_state : None, int, numpy.random.Generator or numpy.random.RandomState

    Returns
    -------
    numpy.random.Generator
    """
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        check_generator(random_state)  # the same validation and message
        return np.random.default_rng(
            np.random.SeedSequence(int(random_state), spawn_key=_NOISE_STREAM_KEY))
    return check_generator(random_state)
