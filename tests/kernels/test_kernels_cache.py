"""A second process must load the compiled kernels from numba's cache."""

import json
import os
import subprocess
import sys
import textwrap

from numba.core.registry import CPUDispatcher

from skdpsparse._kernels import _common, linear_losses, projections, prox, sparse_rows

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
