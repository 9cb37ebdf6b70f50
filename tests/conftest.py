"""Shared fixtures."""

import importlib

import pytest

from skdpsparse._kernels import exact_sampling
from skdpsparse.utils import RandomSource
from skdpsparse.utils._random import _NOISE_CODES

# Every module that derives a fit's RandomSource (skdpsparse.utils.fit_random_source).
_FIT_MODULES = (
    "skdpsparse.mean._sparse_mean",
    "skdpsparse.mean._heavy_tailed_mean",
    "skdpsparse.linear_model._bias_reduced_sgd",
    "skdpsparse.linear_model._cyclic_sgd",
    "skdpsparse.linear_model._heavy_tailed",
    "skdpsparse.linear_model._noisy_sgd",
    "skdpsparse.linear_model._output_perturbation",
    "skdpsparse.model_selection._private_selection",
)


@pytest.fixture
def shared_noise(monkeypatch):
    """Every fit in the test draws from RandomSource(fixed key), whatever its data.

    For tests that compare two fits whose inputs differ on purpose (dense against
    sparse, rows above the bound against pre-scaled rows) and must see the same noise:
    the library itself never lets two such fits share noise (the randomness policy:
    keys depend on the data and its container, and every release's draw also hashes the
    statistic it is added to, which this fixture turns off too).
    """
    key = bytes(range(32))
    for name in _FIT_MODULES:
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "fit_random_source", lambda *args: RandomSource(key))

    def add_discrete_noise(self, grid_values, kind, scale):  # keyed by the counter only
        return exact_sampling.add_discrete_noise(grid_values, _NOISE_CODES[kind], scale,
                                                 self._next_key(kind), 0)

    monkeypatch.setattr(RandomSource, "add_discrete_noise", add_discrete_noise)
    return key
