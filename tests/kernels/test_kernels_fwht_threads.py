"""The FWHT gives the same result from concurrent Python threads (serial path there)."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from skdpsparse._kernels import fwht
from skdpsparse._kernels._common import use_threads


def test_fwht_from_worker_threads_matches_main_thread():
    rng = np.random.default_rng(0)
    base = rng.standard_normal(2**20)  # large enough for the parallel path on main
    expected = fwht.fwht_inplace(base.copy())
    copies = [base.copy() for _ in range(4)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(fwht.fwht_inplace, copies))
    for r in results:
        np.testing.assert_allclose(r, expected, rtol=1e-12, atol=1e-12)
    # Worker threads never take the parallel drivers.
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(use_threads, 10**12).result() is False
