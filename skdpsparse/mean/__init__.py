"""Private mean estimators."""

from ._heavy_tailed_mean import DPHeavyTailedMean
from ._sparse_mean import DPSparseMeanEstimator

__all__ = ["DPHeavyTailedMean", "DPSparseMeanEstimator"]
