"""numba's on-disk cache of this package's kernels, safe when processes compile at once.

numba's ``IndexDataCacheFile.save`` reads the index, picks the first data file number the
index does not name, and writes the index, then the data, without a lock. Two processes
compiling two signatures of one kernel at once (the workers of ``GridSearchCV(n_jobs=2)``,
of joblib or of a Dask cluster, on a cache still cold after an install) can both read the
same index and pick ``name.1.nbc``; in the order A index, B index, B data, A data, the
index names B's signature beside A's machine code, which a later load runs on B's argument
types: wrong results or a crash, silently.

:func:`save_unique` writes the data first, to a file name never used before (a temporary
file renamed into place, as numba does), and only then the index entry naming it: every
entry of any index names a complete file that holds that entry's code. Two processes
saving at once can only drop each other's new entry, and the dropped kernel is compiled
again when it is next needed. The price is a data file per save instead of a reused
number (a save of an existing key, after a stale index, leaves the old file behind).

:func:`install` routes the saves of this package's kernels (the cache folder numba chose
for a source directory is shared by every file in it: ``skdpsparse/_kernels`` registers
its folder, and ``skdpsparse/distributed``, whose unit-total loops sit beside the code
that ships them, registers its own) through :func:`save_unique`, and every other cache
file through the save it found, so other libraries' caches behave as numba made them.
``tests/kernels/test_kernels_cache_safety.py`` replays the race on both.
"""

import os
import uuid

from numba.core.caching import IndexDataCacheFile

#: numba's own ``save``, as this module found it.
NUMBA_SAVE = IndexDataCacheFile.save

_STATE = {"ours": frozenset(), "other": NUMBA_SAVE}


def save_unique(self, key, data):
    """``IndexDataCacheFile.save`` without reuse of data file names (see the module)."""
    name = f"{self._index_name[:-len('.nbi')]}.{uuid.uuid4().hex}.nbc"
    self._save_data(name, data)
    overloads = self._load_index()
    overloads[key] = name
    self._save_index(overloads)


def scoped_save(self, key, data):
    """:func:`save_unique` for this package's cache folder, the previous save elsewhere."""
    if os.path.normpath(self._cache_path) in _STATE["ours"]:
        return save_unique(self, key, data)
    return _STATE["other"](self, key, data)


def install(cache_path):
    """Route saves into ``cache_path`` (a cache folder of this package's compiled code;
    None under ``NUMBA_DISABLE_JIT``, which adds nothing) through :func:`save_unique`,
    besides the folders installed before. Idempotent."""
    if cache_path is not None:
        _STATE["ours"] = _STATE["ours"] | {os.path.normpath(cache_path)}
    if IndexDataCacheFile.save is not scoped_save:
        _STATE["other"] = IndexDataCacheFile.save
        IndexDataCacheFile.save = scoped_save


def kernel_cache_path(dispatcher):
    """The cache folder numba chose for a compiled function (None if not compiled)."""
    return getattr(getattr(dispatcher, "_cache", None), "_cache_path", None)
