"""numba's on-disk cache shared by the pytest-xdist workers of one run (tests/conftest.py).

numba's ``IndexDataCacheFile.save`` reads the index, picks the first data file number the
index does not name, and writes the index, then the data, without a lock. Two processes
compiling two signatures of one function at once can both read the same index and pick
``name.1.nbc``; in the order A index, B index, B data, A data, the index names B's
signature beside A's machine code, which a later load would run on B's argument types
(test_kernels_cache.py replays that order). :func:`save_unique` writes the data first, to
a file name never used before (a temporary file renamed into place, as numba does), and
only then the index entry naming it: every entry of any index names a complete file that
holds that entry's code. Two processes saving at once can only drop each other's new
entry, and the dropped kernel is compiled again when it is next needed.
"""

import uuid

from numba.core.caching import IndexDataCacheFile

#: numba's own ``save`` (kept when :func:`install` replaces it).
NUMBA_SAVE = IndexDataCacheFile.save


def save_unique(self, key, data):
    """``IndexDataCacheFile.save`` without reuse of data file names (see the module)."""
    name = f"{self._index_name[:-len('.nbi')]}.{uuid.uuid4().hex}.nbc"
    self._save_data(name, data)
    overloads = self._load_index()
    overloads[key] = name
    self._save_index(overloads)


def install():
    IndexDataCacheFile.save = save_unique


def installed():
    return IndexDataCacheFile.save is save_unique
