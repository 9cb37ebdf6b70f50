"""skdpsparse: differentially private estimators for sparse and heavy-tailed data.

Layers (see ``ARCHITECTURE.md``): ``accounting`` (the privacy calculus, no data),
``mechanisms`` (randomizers on vectors), ``_kernels`` (numba loops), and thin
scikit-learn estimators on top.
"""

from .exceptions import BudgetExceededError, PrivacyLeakWarning
from ._privacy_spent import privacy_spent
from .ledger import PrivacyLedger

__version__ = "0.1.0.dev0"

__all__ = ["BudgetExceededError", "PrivacyLedger", "PrivacyLeakWarning", "__version__",
           "privacy_spent"]
