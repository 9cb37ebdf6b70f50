"""Private mean estimators."""

from ._sparse_mean import DPSparseMeanEstimator

__all__ = ["DPSparseMeanEstimator"]
