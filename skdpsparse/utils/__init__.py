"""Small helpers shared by the estimators (validation, randomness)."""

from ._params import InstanceOf, Interval, Options, validate_params
from ._random import RandomSource, as_random_source, check_generator, fit_random_source

__all__ = ["InstanceOf", "Interval", "Options", "RandomSource", "as_random_source",
           "check_generator", "fit_random_source", "validate_params"]
