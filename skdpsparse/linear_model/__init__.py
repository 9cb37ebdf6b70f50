"""Private linear models."""

from ._heavy_tailed import DPHeavyTailedRegressor

__all__ = ["DPHeavyTailedRegressor"]
