"""Private linear models."""

from ._cyclic_sgd import DPCyclicSGD
from ._heavy_tailed import DPHeavyTailedRegressor
from ._noisy_sgd import DPNoisySGDClassifier, DPNoisySGDRegressor
from ._output_perturbation import DPOutputPerturbationClassifier, DPOutputPerturbationRegressor

__all__ = [
    "DPCyclicSGD",
    "DPHeavyTailedRegressor",
    "DPNoisySGDClassifier",
    "DPNoisySGDRegressor",
    "DPOutputPerturbationClassifier",
    "DPOutputPerturbationRegressor",
]
