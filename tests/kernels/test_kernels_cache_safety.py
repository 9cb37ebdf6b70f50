"""A second process must load the compiled kernels from numba's cache."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from numba.core.registry import CPUDispatcher

from skdpsparse._kernels import (
    _cache_safety,
    _common,
    linear_losses,
    projections,
    prox,
    sparse_rows,
)

MODULES = (_common, projections, prox, sparse_rows, linear_losses)

# One kernel of each kind: Python wrappers over `_nb` cores (which call private
# compiled helpers), CSR and dense loops with `inline="always"` helpers, and
# dispatchers with default arguments. Compiling all ~40 kernels in a fresh cache
# would take most of the test budget; `test_every_kernel_is_cached` covers the rest.
SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    import scipy.sparse as sp
    from numba.core.registry import CPUDispatcher

    from skdpsparse import _kernels as K
    from skdpsparse._kernels import _common, linear_losses, projections, prox, sparse_rows

    v = np.array([3.0, -1.0, 0.5])
    X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [0.5, -1.0, 0.0]]))
    parts = (X.indptr, X.indices, X.data)
    y = np.array([1.0, -1.0, 1.0])
    w = np.array([0.1, 0.2, -0.3])
    K.project_l1_ball(v, 1.0)
    K.linf_nearest_in_l2_ball(v, 1.0)
    K.prox_elastic_net(v, 0.5, 1.0, 0.5)
    s = K.csr_bounding_scales(X.indptr, X.data, 1.0, 2.0)
    K.csr_scale_rows(X.indptr, X.data, s)
    K.csr_bounded_column_sum(*parts, 3, 1.0, 2.0)
    K.dense_bounded_column_sum(X.toarray(), 1.0, 2.0)
    K.loss_value(K.LOGISTIC, 0.3, 1.0, 0.0)
    K.csr_clipped_gradient_sum(*parts, y, w, 0.1, K.HINGE, 0.0, 1.0, 3)
    K.dense_loss_gradient(X.toarray(), y, w, 0.1, K.HUBER, 1.0, np.array([0, 2, 2]))

    stats = {}
    for mod in (_common, projections, prox, sparse_rows, linear_losses):
        for name, obj in vars(mod).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == mod.__name__:
                st = obj.stats
                stats[name] = [sum(st.cache_hits.values()), sum(st.cache_misses.values())]
    print(json.dumps(stats))
    """
)

CALLED = {
    "l1_ball_threshold_nb", "soft_threshold_nb", "linf_distance_to_l2_ball_nb",
    "prox_elastic_net_nb", "csr_bounding_scales", "csr_scale_rows_nb",
    "csr_bounded_column_sum", "dense_bounded_column_sum", "loss_value",
    "csr_clipped_gradient_sum", "dense_loss_gradient",
}


def _dispatchers():
    for mod in MODULES:
        for name, obj in vars(mod).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == mod.__name__:
                yield name, obj


def _run(env):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_kernel_is_cached():
    dispatchers = dict(_dispatchers())
    assert len(dispatchers) > 40
    assert CALLED <= set(dispatchers)
    not_cached = [name for name, d in dispatchers.items() if d.stats.cache_path is None]
    assert not not_cached


def test_second_process_loads_kernels_from_cache(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba_cache"))
    env.pop("NUMBA_DISABLE_JIT", None)
    first = _run(env)
    second = _run(env)
    # The cache directory was fresh: the first process compiled (missed) ...
    assert all(first[name][0] == 0 and first[name][1] > 0 for name in CALLED), first
    # ... and the second loaded every kernel it called from the cache and compiled
    # nothing at all (helpers called only from compiled code are inside their
    # callers' cached code).
    assert all(second[name][0] > 0 for name in CALLED), second
    assert all(misses == 0 for hits, misses in second.values()), second


# --------------------------------------------- the cache shared by pytest-xdist workers
def _replay(save, tmp_path):
    """Two processes save two signatures of one function at once, in the order that
    breaks numba's own saving: both read the (empty) index; A writes its index; B
    writes its index and its data; A writes its data. Returns what each key loads."""
    from numba.core.caching import IndexDataCacheFile

    def cache_file():
        return IndexDataCacheFile(str(tmp_path), "kernel-10.py311", (1.0, 100))

    a, b = cache_file(), cache_file()
    stale = a._load_index()  # B read the index before A wrote anything
    b._load_index = lambda: dict(stale)
    a_save_index = a._save_index

    def a_writes_its_index_then_b_saves(overloads):
        a_save_index(overloads)
        save(b, "signature B", "code of B")

    a._save_index = a_writes_its_index_then_b_saves
    save(a, "signature A", "code of A")
    reader = cache_file()
    return {key: reader.load(key) for key in ("signature A", "signature B")}


def test_numba_saving_can_name_one_signature_beside_another_signatures_code(tmp_path):
    """The race _cache_safety exists for, replayed on numba's own save: the index names
    B's signature beside A's code (if this fails, numba's saving changed: check
    _cache_safety.save_unique against the new code before dropping it)."""
    loaded = _replay(_cache_safety.NUMBA_SAVE, tmp_path)
    assert loaded["signature B"] == "code of A"


def test_unique_saving_never_names_another_signatures_code(tmp_path):
    """save_unique in the same order, and with B's save at every step of A's: each
    key loads its own code or nothing (a dropped entry is compiled again)."""
    from numba.core.caching import IndexDataCacheFile

    save_unique = _cache_safety.save_unique
    (tmp_path / "replay").mkdir()
    loaded = _replay(save_unique, tmp_path / "replay")
    assert loaded == {"signature A": None, "signature B": "code of B"}  # A's entry dropped
    for step in ("_save_data", "_load_index", "_save_index"):
        folder = tmp_path / step
        folder.mkdir()
        a = IndexDataCacheFile(str(folder), "kernel-10.py311", (1.0, 100))
        b = IndexDataCacheFile(str(folder), "kernel-10.py311", (1.0, 100))
        original = getattr(a, step)

        def then_b(*args, original=original, b=b):
            result = original(*args)
            save_unique(b, "signature B", "code of B")
            return result

        setattr(a, step, then_b)
        save_unique(a, "signature A", "code of A")
        reader = IndexDataCacheFile(str(folder), "kernel-10.py311", (1.0, 100))
        assert reader.load("signature A") in ("code of A", None), step
        assert reader.load("signature B") in ("code of B", None), step
        assert {reader.load("signature A"), reader.load("signature B")} != {None}, step


def test_the_package_routes_its_own_kernels_saves_through_the_unique_save(tmp_path):
    """Importing skdpsparse makes numba's class-level save the scoped one: the replayed
    race cannot corrupt this package's cache folder (whatever folder numba chose for
    it), and another library's folder is saved exactly as numba saves it."""
    from numba.core.caching import IndexDataCacheFile

    assert IndexDataCacheFile.save is _cache_safety.scoped_save
    ours = _cache_safety.kernel_cache_path(_common.on_grid_nb)
    if ours is None:
        pytest.skip("NUMBA_DISABLE_JIT: nothing is compiled or cached")
    assert os.path.normpath(ours) in _cache_safety._STATE["ours"]
    state = dict(_cache_safety._STATE)
    try:
        _cache_safety.install(str(tmp_path / "ours"))
        (tmp_path / "ours").mkdir()
        (tmp_path / "theirs").mkdir()
        assert _replay(_cache_safety.scoped_save, tmp_path / "ours") == {
            "signature A": None, "signature B": "code of B"}
        assert _replay(_cache_safety.scoped_save, tmp_path / "theirs")["signature B"] == (
            "code of A")  # numba's behaviour, unchanged for other libraries
    finally:
        _cache_safety._STATE.update(state)


def test_the_distributed_packages_compiled_loops_are_covered_too():
    """skdpsparse/distributed holds a compiled loop (user-level unit totals): its folder
    is registered as well, beside _kernels' (the multiset digest's BLAKE2b)."""
    from skdpsparse._kernels import blake2b as _blake2b
    from skdpsparse.distributed import _units

    for module in (_units, _blake2b):
        kernels = [f for f in vars(module).values()
                   if isinstance(f, CPUDispatcher) and f.__module__ == module.__name__
                   and _cache_safety.kernel_cache_path(f) is not None]
        assert kernels, module.__name__
        for kernel in kernels:
            path = os.path.normpath(_cache_safety.kernel_cache_path(kernel))
            assert path in _cache_safety._STATE["ours"], (module.__name__, path)


# ------------------------------------------------- staleness across the kernel files
def test_an_edit_of_another_kernel_file_makes_the_package_caches_stale(tmp_path,
                                                                       monkeypatch):
    """A kernel that inlines a helper of another file must not keep its old code after
    the helper is edited. numba's own stamp (the kernel's file only) keeps it: shown on
    another library's folder. The package's folders are marked with the tree stamp of
    the kernel files, which an edit of any of them changes."""
    from numba.core.caching import IndexDataCacheFile

    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "kernel.py").write_text("def kernel(): return helper()\n")
    (sources / "helper.py").write_text("def helper(): return 1\n")
    state = dict(_cache_safety._STATE)
    own_stamp = (1.0, 100)  # numba's stamp of kernel.py, unchanged by the edit
    try:
        monkeypatch.setattr(_cache_safety, "SOURCE_FOLDERS", (str(sources),))
        _cache_safety._STATE["tree"] = _cache_safety.tree_stamp((str(sources),))
        (tmp_path / "ours").mkdir()
        (tmp_path / "theirs").mkdir()
        _cache_safety.install(str(tmp_path / "ours"))

        def cache_file(folder):
            return IndexDataCacheFile(str(tmp_path / folder), "kernel.f-1.py311", own_stamp)

        for folder in ("ours", "theirs"):
            cache_file(folder).save("signature", "code compiled with helper 1")
            assert cache_file(folder).load("signature") == "code compiled with helper 1"

        # The helper is edited; a new process reads the tree again.
        (sources / "helper.py").write_text("def helper(): return 22\n")
        _cache_safety._STATE["tree"] = _cache_safety.tree_stamp((str(sources),))
        assert cache_file("theirs").load("signature") == "code compiled with helper 1"
        assert cache_file("ours").load("signature") is None
        # ... and what is saved after the edit loads again.
        cache_file("ours").save("signature", "code compiled with helper 22")
        assert cache_file("ours").load("signature") == "code compiled with helper 22"
    finally:
        _cache_safety._STATE.update(state)


def test_the_tree_stamp_names_every_kernel_file():
    """Every .py file of _kernels and distributed is in the stamp read at import."""
    names = {(folder, name) for folder, name, _, _ in _cache_safety._STATE["tree"]}
    for folder in _cache_safety.SOURCE_FOLDERS:
        for name in os.listdir(folder):
            if name.endswith(".py"):
                assert (os.path.basename(folder), name) in names
    assert ("_kernels", "grid_noise.py") in names and ("distributed", "_units.py") in names
