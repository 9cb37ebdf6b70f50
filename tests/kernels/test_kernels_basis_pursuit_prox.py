"""The fused prox pass of the basis-pursuit solver against a plain NumPy reference,
on the serial path and on the threaded one (d above the parallel threshold)."""

import numpy as np
import pytest

from skdpsparse._kernels._common import PARALLEL_MIN_WORK
from skdpsparse._kernels.basis_pursuit_prox import prox_l1_pass


def _reference(t, signs, coef, center, step, thr):
    d = center.shape[0]
    a = coef * signs[:d] * t[:d]
    u = center + step * a
    out = np.sign(u) * np.maximum(np.abs(u) - thr, 0.0)
    stats = dict(l1=np.abs(out).sum(), x2=(out ** 2).sum(), dx2=((out - center) ** 2).sum(),
                 a_inf=np.abs(a).max(), nnz=int(np.count_nonzero(out)))
    return out, stats


@pytest.mark.parametrize("d", [1, 37, 4096, PARALLEL_MIN_WORK + 5])
def test_prox_pass_matches_numpy(d):
    rng = np.random.default_rng(d)
    t = rng.standard_normal(d + 3)  # longer than d: only the first d entries are read
    signs = rng.choice(np.array([-1, 1], dtype=np.int8), size=d + 3)
    center = rng.standard_normal(d) * (rng.random(d) < 0.3)
    out = np.empty(d)
    idx, vals = np.empty(d, dtype=np.int64), np.empty(d)
    stats = prox_l1_pass(t, signs, 0.7, center, 0.5, 0.4, out, idx, vals)
    expected, ref = _reference(t, signs, 0.7, center, 0.5, 0.4)
    np.testing.assert_allclose(out, expected, rtol=1e-15, atol=0)
    for key in ("l1", "x2", "dx2", "a_inf"):
        assert stats[key] == pytest.approx(ref[key], rel=1e-12), key
    assert stats["nnz"] == ref["nnz"]
    if stats["collected"]:
        support = np.flatnonzero(expected)
        np.testing.assert_array_equal(idx[:stats["nnz"]], support)
        np.testing.assert_array_equal(vals[:stats["nnz"]], out[support])


def test_prox_pass_refuses_short_inputs():
    with pytest.raises(ValueError, match="len\\(out\\)"):
        prox_l1_pass(np.ones(2), np.ones(3, dtype=np.int8), 1.0, np.zeros(3), 1.0, 0.1,
                     np.empty(3))
