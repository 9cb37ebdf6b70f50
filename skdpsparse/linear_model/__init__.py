"""Private linear models."""

from ._cyclic_sgd import DPCyclicSGD
from ._heavy_tailed import DPHeavyTailedRegressor
from ._noisy_sgd import DPNoisySGDClassifier, DPNoisySGDRegressor

__all__ = [
    "DPCyclicSGD",
    "DPHeavyTailedRegressor",
    "DPNoisySGDClassifier",
    "DPNoisySGDRegressor",
]
