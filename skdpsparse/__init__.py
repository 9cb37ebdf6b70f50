"""skdpsparse: differentially private estimators for sparse and heavy-tailed data.

Every public estimator and tool is importable from the package itself::

    from skdpsparse import DPSparseMeanEstimator, PrivacyLedger

The subpackages (``mean``, ``linear_model``, ``model_selection``, ``datasets``,
``accounting``, ``mechanisms``) stay, and hold the same objects.

Layers (see the architecture page of the documentation): ``accounting`` (the privacy
calculus, no data), ``mechanisms`` (randomizers on vectors), ``_kernels`` (numba loops),
and thin scikit-learn estimators on top.
"""

import importlib
from typing import TYPE_CHECKING

from .exceptions import BudgetExceededError, PrivacyLeakWarning
from ._privacy_spent import privacy_spent
from .ledger import PrivacyLedger

__version__ = "0.1.0.dev0"

# The estimators are loaded on first use (PEP 562), not here: importing them pulls in
# numba and scipy.sparse.linalg, which would make ``import skdpsparse`` (and therefore
# every worker process of a parallel grid search) pay for estimators it never uses.
_LAZY_EXPORTS = {
    "DPSparseMeanEstimator": "mean",
    "DPHeavyTailedMean": "mean",
    "DPBiasReducedSGDClassifier": "linear_model",
    "DPBiasReducedSGDRegressor": "linear_model",
    "DPCyclicSGD": "linear_model",
    "DPHeavyTailedRegressor": "linear_model",
    "DPNoisySGDClassifier": "linear_model",
    "DPNoisySGDRegressor": "linear_model",
    "DPOutputPerturbationClassifier": "linear_model",
    "DPOutputPerturbationRegressor": "linear_model",
    "DPSGDClassifier": "linear_model",
    "DPSGDRegressor": "linear_model",
    "PrivateParameterSelection": "model_selection",
}

__all__ = sorted(
    ["BudgetExceededError", "PrivacyLedger", "PrivacyLeakWarning", "__version__",
     "privacy_spent", *_LAZY_EXPORTS]
)

if TYPE_CHECKING:  # static analysers and IDEs see the names without the lazy hook
    from .linear_model import (  # noqa: F401
        DPBiasReducedSGDClassifier, DPBiasReducedSGDRegressor, DPCyclicSGD,
        DPHeavyTailedRegressor, DPNoisySGDClassifier, DPNoisySGDRegressor,
        DPOutputPerturbationClassifier, DPOutputPerturbationRegressor, DPSGDClassifier,
        DPSGDRegressor,
    )
    from .mean import DPHeavyTailedMean, DPSparseMeanEstimator  # noqa: F401
    from .model_selection import PrivateParameterSelection  # noqa: F401


def __getattr__(name):
    subpackage = _LAZY_EXPORTS.get(name)
    if subpackage is None:
        raise AttributeError(f"module 'skdpsparse' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{subpackage}", __name__), name)
    globals()[name] = value  # resolve once; later lookups never reach this hook
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY_EXPORTS))
