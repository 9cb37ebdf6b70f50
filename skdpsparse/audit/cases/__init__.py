"""The audit catalogue by mechanism family: :mod:`.means` (and the located interval
of the heavy-tailed default, :mod:`.located_interval`), :mod:`.linear_models`,
:mod:`.selection`, and the attacks on the randomness, :mod:`.randomness`."""

from . import linear_models, located_interval, means, randomness, selection

__all__ = ["CATALOGUE", "linear_models", "located_interval", "means", "randomness",
           "selection"]

#: name -> :class:`~skdpsparse.audit.case.Entry`, every family.
CATALOGUE = {**means.CATALOGUE, **located_interval.CATALOGUE, **linear_models.CATALOGUE,
             **selection.CATALOGUE}
