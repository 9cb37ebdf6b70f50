"""The audit catalogue by mechanism family: :mod:`.means`, :mod:`.linear_models`,
:mod:`.selection`, and the attacks on the randomness, :mod:`.randomness`."""

from . import linear_models, means, randomness, selection

__all__ = ["CATALOGUE", "linear_models", "means", "randomness", "selection"]

#: name -> :class:`~skdpsparse.audit.case.Entry`, every family.
CATALOGUE = {**means.CATALOGUE, **linear_models.CATALOGUE, **selection.CATALOGUE}
