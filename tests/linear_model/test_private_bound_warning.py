"""private_bound's warning before a bound that may land far above the data
(skdpsparse/linear_model/_base.py): public numbers only."""

import math
import warnings

import numpy as np
import pytest

from skdpsparse.linear_model._base import far_bound_probability, private_bound
from skdpsparse.utils import as_random_source


def _warnings(values, epsilon):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        private_bound(values, epsilon, as_random_source(np.random.default_rng(0)))
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_small_n_eps_warns_the_same_on_every_dataset_of_n_rows():
    """n·ε = 50 (2000 rows at ε = 0.025, the share of a 0.5 budget): the bound can
    land octaves above the data (a repro drew R = 1.4e9 for rows of norm ~1). The text
    depends on n and ε only: identical for two datasets, one with an extreme row."""
    rng = np.random.default_rng(1)
    a = np.abs(rng.standard_normal(2000))
    b = a.copy()
    b[7] = 1e300
    first, second = _warnings(a, 0.025), _warnings(b, 0.025)
    assert len(first) == 1 and "n*epsilon = 50" in first[0]
    assert first == second


def test_large_n_eps_is_silent_and_the_bound_is_the_formula():
    assert _warnings(np.abs(np.random.default_rng(2).standard_normal(20000)), 1.0) == []
    n, eps, points = 2000, 0.025, 481
    r = math.ceil(0.95 * n)
    assert far_bound_probability(n, eps, points) == pytest.approx(
        points * math.exp(-eps * (n - r + 1) / 4))
    # The warning's threshold (1 %) is crossed near n·ε ≈ 860 (the docstring's figure).
    assert far_bound_probability(18000, 0.05, points) < 0.01 < far_bound_probability(
        16000, 0.05, points)
