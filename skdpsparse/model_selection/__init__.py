"""Private model selection: private selection with random stopping (seed 000 Algorithm 5,
Liu and Talwar 2019), the private answer to tuning with ``GridSearchCV``."""

from ._private_selection import PrivateParameterSelection

__all__ = ["PrivateParameterSelection"]
