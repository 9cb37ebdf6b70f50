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

Staleness. numba marks an index with its *own* source file's modification time and size,
so a kernel whose compiled code inlines a helper of another file (the cyclic steps inline
``grid_noise``'s coins and ``linear_losses``' derivatives) kept its old machine code after
an in-place edit of that helper: a contributor's trap, silent wrong results. The indexes
of this package's folders are therefore marked with numba's stamp *and*
:func:`tree_stamp`, the names, modification times and sizes of every ``.py`` file of
``skdpsparse/_kernels`` and ``skdpsparse/distributed`` (the only places compiled code is
defined), read once when the package is imported, as numba reads its own stamp: an edit
of any of them makes every index of the package stale, and the kernels are compiled
again. An installed wheel's files never change, so its caches are kept.
"""

import os
import uuid

from numba.core.caching import IndexDataCacheFile

#: numba's own ``save``, as this module found it.
NUMBA_SAVE = IndexDataCacheFile.save

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The folders whose files compiled code is defined in (see the module: staleness).
SOURCE_FOLDERS = (os.path.join(_PACKAGE, "_kernels"), os.path.join(_PACKAGE, "distributed"))

_STATE = {"ours": frozenset(), "other": NUMBA_SAVE, "tree": None,
          "load_index": IndexDataCacheFile._load_index,
          "save_index": IndexDataCacheFile._save_index}


def tree_stamp(folders=SOURCE_FOLDERS):
    """(folder, file, mtime_ns, size) of every ``.py`` file of ``folders``, sorted."""
    stamp = []
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                stamp.append((os.path.basename(folder), name, st.st_mtime_ns, st.st_size))
    return tuple(stamp)


def _mark(self):
    """Give an index of this package's folders the tree stamp beside numba's, once."""
    if (not getattr(self, "_skdpsparse_marked", False)
            and os.path.normpath(self._cache_path) in _STATE["ours"]):
        self._source_stamp = (self._source_stamp, _STATE["tree"])
        self._skdpsparse_marked = True


def scoped_load_index(self):
    """numba's ``_load_index``, the tree stamp required in this package's folders."""
    _mark(self)
    return _STATE["load_index"](self)


def scoped_save_index(self, overloads):
    """numba's ``_save_index``, the tree stamp written in this package's folders."""
    _mark(self)
    return _STATE["save_index"](self, overloads)


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
    and mark its indexes with :func:`tree_stamp`, besides the folders installed before.
    Idempotent."""
    if _STATE["tree"] is None:
        _STATE["tree"] = tree_stamp()
    if cache_path is not None:
        _STATE["ours"] = _STATE["ours"] | {os.path.normpath(cache_path)}
    if IndexDataCacheFile.save is not scoped_save:
        _STATE["other"] = IndexDataCacheFile.save
        IndexDataCacheFile.save = scoped_save
    if IndexDataCacheFile._load_index is not scoped_load_index:
        _STATE["load_index"] = IndexDataCacheFile._load_index
        _STATE["save_index"] = IndexDataCacheFile._save_index
        IndexDataCacheFile._load_index = scoped_load_index
        IndexDataCacheFile._save_index = scoped_save_index


def kernel_cache_path(dispatcher):
    """The cache folder numba chose for a compiled function (None if not compiled)."""
    return getattr(getattr(dispatcher, "_cache", None), "_cache_path", None)
