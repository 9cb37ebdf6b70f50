"""Private model selection: private selection with random stopping (Liu and Talwar 2019;
Ghazi et al. 2024 v2, Algorithm 5), the private answer to tuning with ``GridSearchCV``."""

from ._private_selection import PrivateParameterSelection

__all__ = ["PrivateParameterSelection"]
