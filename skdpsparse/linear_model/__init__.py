"""Private linear models."""

from ._bias_reduced_sgd import DPBiasReducedSGDClassifier, DPBiasReducedSGDRegressor
from ._cyclic_sgd import DPCyclicSGD
from ._dp_sgd import DPSGDClassifier, DPSGDRegressor
from ._heavy_tailed import DPHeavyTailedRegressor
from ._noisy_sgd import DPNoisySGDClassifier, DPNoisySGDRegressor
from ._output_perturbation import DPOutputPerturbationClassifier, DPOutputPerturbationRegressor

__all__ = [
    "DPBiasReducedSGDClassifier",
    "DPBiasReducedSGDRegressor",
    "DPCyclicSGD",
    "DPHeavyTailedRegressor",
    "DPNoisySGDClassifier",
    "DPNoisySGDRegressor",
    "DPOutputPerturbationClassifier",
    "DPOutputPerturbationRegressor",
    "DPSGDClassifier",
    "DPSGDRegressor",
]
