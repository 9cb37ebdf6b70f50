"""Small helpers shared by the estimators (validation, randomness)."""

from ._params import InstanceOf, Interval, Options, validate_params
from ._random import check_generator, noise_generator

__all__ = ["InstanceOf", "Interval", "Options", "check_generator", "noise_generator",
           "validate_params"]
