"""Shared fixtures, and the numba cache of pytest-xdist workers."""

import importlib
import os
import shutil
import tempfile

# Under pytest-xdist (the CI command runs ``-n 2``) the workers share one numba cache,
# in a temporary folder that the controller makes (pytest_configure below, before it
# starts the workers, which inherit its environment) and removes at the end: each
# kernel is compiled about once per run, not once per worker (compilation is more than
# half of the CPU time of the audits). numba's own saving is not safe for two processes
# compiling one function at once; the package saves its kernels through
# skdpsparse._kernels._cache_safety (its docstring says why), which pytest_configure
# checks is in place for the shared folder. NUMBA_CACHE_DIR is set before skdpsparse
# (and numba) is imported below, as a dispatcher chooses its cache folder when it is
# created; the workers' subprocesses inherit it.
_XDIST_CACHE = "SKDPSPARSE_XDIST_NUMBA_CACHE"
_WORKER_CACHE = None
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_XDIST_CACHE):
    _WORKER_CACHE = os.environ["NUMBA_CACHE_DIR"] = os.environ[_XDIST_CACHE]

import pytest  # noqa: E402

from skdpsparse._kernels import exact_sampling  # noqa: E402
from skdpsparse.utils import RandomSource  # noqa: E402
from skdpsparse.utils._random import _NOISE_CODES  # noqa: E402

_OWN_CACHES = []  # the controller's temporary folder, removed at the end


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from numba.core.caching import IndexDataCacheFile
        from numba.core.registry import CPUDispatcher

        from skdpsparse._kernels import _cache_safety

        kernel = next((f for f in vars(exact_sampling).values()
                       if isinstance(f, CPUDispatcher)), None)  # None: NUMBA_DISABLE_JIT
        where = _cache_safety.kernel_cache_path(kernel) or ""
        safe = (IndexDataCacheFile.save is _cache_safety.scoped_save
                and os.path.normpath(where) in _cache_safety._STATE["ours"])
        if kernel is not None and (_WORKER_CACHE is None or not safe
                                   or not where.startswith(_WORKER_CACHE)):
            # numba was imported before this file (by a plugin) or the controller did
            # not run pytest_configure: the kernels would use the in-tree cache.
            raise pytest.UsageError(
                f"this xdist worker's kernels are cached in {where!r}, not in the run's "
                "shared cache, or their saves do not go through _cache_safety")
    elif getattr(config.option, "numprocesses", None):  # the xdist controller
        _OWN_CACHES.append(tempfile.mkdtemp(prefix="skdpsparse-numba-"))
        os.environ[_XDIST_CACHE] = _OWN_CACHES[0]


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


@pytest.fixture(autouse=True)
def _mpmath_precision_restored():
    """Put mpmath's working precision back after every test: a reference computed at
    400 digits (``mp.mp.dps = 400``) left it so for every later test of its worker, and
    a 0.5 s test then took 148 s."""
    try:
        import mpmath
    except ImportError:
        yield
        return
    dps = mpmath.mp.dps
    yield
    mpmath.mp.dps = dps
