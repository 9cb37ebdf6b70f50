"""Shared fixtures, and one numba cache per pytest-xdist worker."""

import importlib
import os
import shutil
import tempfile

# Under pytest-xdist (the CI command runs ``-n 2``), each worker compiles into a numba
# cache of its own. numba's on-disk cache is not safe for two processes compiling one
# function at once: IndexDataCacheFile.save reads the index, picks the first free data
# file number and writes index and data without a lock, so two workers compiling two
# signatures of one kernel can both pick ``name.1.nbc`` and leave the index naming one
# signature beside the other's machine code, which a later load runs on the wrong
# types. The controller makes a temporary folder (pytest_configure below, before it
# starts the workers, which inherit its environment) and removes it at the end; each
# worker sets NUMBA_CACHE_DIR to a subfolder before skdpsparse (and numba) is imported
# below, as a dispatcher chooses its cache folder when it is created. The workers'
# subprocesses inherit it, as a serial run's share its cache.
_XDIST_CACHES = "SKDPSPARSE_XDIST_NUMBA_CACHES"
_WORKER_CACHE = None
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_XDIST_CACHES):
    _WORKER_CACHE = os.path.join(os.environ[_XDIST_CACHES], os.environ["PYTEST_XDIST_WORKER"])
    os.environ["NUMBA_CACHE_DIR"] = _WORKER_CACHE

import pytest  # noqa: E402

from skdpsparse._kernels import exact_sampling  # noqa: E402
from skdpsparse.utils import RandomSource  # noqa: E402
from skdpsparse.utils._random import _NOISE_CODES  # noqa: E402

_OWN_CACHES = []  # the controller's temporary folder, removed at the end


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from numba.core import config as numba_config

        if _WORKER_CACHE is None or numba_config.CACHE_DIR != _WORKER_CACHE:
            # numba was imported before this file (by a plugin) or the controller did
            # not run pytest_configure: the workers would share one cache. Refuse.
            raise pytest.UsageError(
                "this xdist worker has no numba cache of its own "
                f"(NUMBA_CACHE_DIR={numba_config.CACHE_DIR!r})")
    elif getattr(config.option, "numprocesses", None):  # the xdist controller
        _OWN_CACHES.append(tempfile.mkdtemp(prefix="skdpsparse-numba-"))
        os.environ[_XDIST_CACHES] = _OWN_CACHES[0]


def pytest_unconfigure(config):
    for path in _OWN_CACHES:  # after every worker has stopped
        shutil.rmtree(path, ignore_errors=True)


# Every module that derives a fit's RandomSource (skdpsparse.utils.fit_random_source).
_FIT_MODULES = (
    "skdpsparse.mean._sparse_mean",
    "skdpsparse.mean._heavy_tailed_mean",
    "skdpsparse.linear_model._bias_reduced_sgd",
    "skdpsparse.linear_model._cyclic_sgd",
    "skdpsparse.linear_model._heavy_tailed",
    "skdpsparse.linear_model._noisy_sgd",
    "skdpsparse.linear_model._output_perturbation",
    "skdpsparse.model_selection._private_selection",
)


@pytest.fixture
def shared_noise(monkeypatch):
    """Every fit in the test draws from RandomSource(fixed key), whatever its data.

    For tests that compare two fits whose inputs differ on purpose (dense against
    sparse, rows above the bound against pre-scaled rows) and must see the same noise:
    the library itself never lets two such fits share noise (the randomness policy:
    keys depend on the data and its container, and every release's draw also hashes the
    statistic it is added to, which this fixture turns off too).
    """
    key = bytes(range(32))
    for name in _FIT_MODULES:
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "fit_random_source", lambda *args: RandomSource(key))

    def add_discrete_noise(self, grid_values, kind, scale):  # keyed by the counter only
        return exact_sampling.add_discrete_noise(grid_values, _NOISE_CODES[kind], scale,
                                                 self._next_key(kind), 0)

    monkeypatch.setattr(RandomSource, "add_discrete_noise", add_discrete_noise)
    return key
