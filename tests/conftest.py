"""Shared fixtures."""

import importlib

import pytest

from skdpsparse.utils import RandomSource

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
    the library itself never lets two such fits share noise (the randomness policy).
    """
    key = bytes(range(32))
    for name in _FIT_MODULES:
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "fit_random_source", lambda *args: RandomSource(key))
    return key
