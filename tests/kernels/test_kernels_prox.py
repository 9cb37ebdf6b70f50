import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernels_reference import FEW, SETTINGS, vectors
from scipy.optimize import minimize_scalar

from skdpsparse._kernels import (
    prox_elastic_net,
    prox_l1,
    prox_l2_squared,
    soft_threshold,
)

steps = st.sampled_from([0.0, 1e-8, 0.5, 1.0, 3.0]) | st.floats(0, 1e3)


def _argmin_1d(f, v):
    # The prox objectives below are separable, strongly convex, and minimised in
    # [-|v|, |v|] (shrinkage); minimise each coordinate to high accuracy.
    a = abs(v) + 1e-12
    return minimize_scalar(f, bounds=(-a, a), method="bounded", options={"xatol": 1e-12}).x


@SETTINGS
@given(vectors(), steps)
def test_soft_threshold_closed_form(v, t):
    x = soft_threshold(v, t)
    assert x.dtype == v.dtype
    v64 = v.astype(np.float64)
    expected = (np.sign(v64) * np.maximum(np.abs(v64) - t, 0.0)).astype(v.dtype)
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(prox_l1(v, t), x)


@SETTINGS
@given(vectors(), steps)
def test_prox_l2_squared_closed_form(v, t):
    x = prox_l2_squared(v, t)
    assert x.dtype == v.dtype
    info = np.finfo(v.dtype)
    np.testing.assert_allclose(x, v.astype(np.float64) / (1 + t), rtol=2 * info.eps,
                               atol=info.smallest_subnormal)


@SETTINGS
@given(vectors(max_magnitude=1e6), steps, st.floats(0, 10), st.floats(0, 1))
def test_prox_elastic_net_optimality(v, t, alpha, l1_ratio):
    # Subgradient optimality of t*alpha*(rho |x| + (1-rho)/2 x^2) + (x - v)^2 / 2:
    # 0 = x - v + t alpha (1-rho) x + t alpha rho s, with s in d|x|.
    x = prox_elastic_net(v, t, alpha, l1_ratio).astype(np.float64)
    v64 = v.astype(np.float64)
    lam1 = t * alpha * l1_ratio
    lam2 = t * alpha * (1 - l1_ratio)
    info = np.finfo(v.dtype)  # (subnormal outputs round in absolute terms)
    tol = 8 * (info.eps * (np.abs(v64) + lam1) + info.smallest_subnormal)
    on = x != 0
    resid = x[on] - v64[on] + lam2 * x[on] + lam1 * np.sign(x[on])
    assert np.all(np.abs(resid) <= tol[on] * (1 + lam2))
    # x = 0 also when v/(1 + lam2) underflows (float32 subnormals: v = 9e-43, lam2 = 1290).
    assert np.all(np.abs(v64[~on]) <= lam1 + tol[~on] * (1 + lam2))
    assert np.all(np.sign(x[on]) == np.sign(v64[on]))


@FEW
@given(vectors(min_size=1, max_size=4, max_magnitude=10.0), st.floats(0.01, 3), st.floats(0, 2),
       st.floats(0, 1))
def test_prox_maps_minimise_their_objectives(v, t, alpha, l1_ratio):
    # Each prox objective is separable and 1-strongly convex: no point, in particular
    # not scipy's numerical minimiser, may do better than the kernel's answer.
    v = v.astype(np.float64)
    objectives = {
        prox_l1: lambda x, vi: t * abs(x) + 0.5 * (x - vi) ** 2,
        prox_l2_squared: lambda x, vi: 0.5 * t * x * x + 0.5 * (x - vi) ** 2,
        prox_elastic_net: lambda x, vi: (
            t * alpha * (l1_ratio * abs(x) + 0.5 * (1 - l1_ratio) * x * x) + 0.5 * (x - vi) ** 2
        ),
    }
    for prox, f in objectives.items():
        x = prox(v, t, alpha, l1_ratio) if prox is prox_elastic_net else prox(v, t)
        for xi, vi in zip(x, v):
            best = _argmin_1d(lambda u: f(u, vi), vi)
            assert f(xi, vi) <= f(best, vi) + 1e-12 * (1 + vi * vi)


def test_elastic_net_special_cases():
    v = np.array([3.0, -0.5, 1.0, 0.0])
    np.testing.assert_allclose(prox_elastic_net(v, 2.0, 0.5, 1.0), prox_l1(v, 1.0))
    np.testing.assert_allclose(prox_elastic_net(v, 2.0, 0.5, 0.0), prox_l2_squared(v, 1.0))
    np.testing.assert_array_equal(prox_elastic_net(v, 0.0, 0.5, 0.3), v)
    np.testing.assert_array_equal(soft_threshold(v, np.inf), 0.0)


def test_prox_out_and_validation():
    v = np.array([3.0, -0.5], dtype=np.float32)
    assert soft_threshold(v, 1.0, out=v) is v
    np.testing.assert_array_equal(v, np.array([2.0, 0.0], dtype=np.float32))
    out = np.empty(2)
    assert prox_elastic_net([1.0, 2.0], 1.0, 1.0, 0.5, out=out) is out
    assert soft_threshold([1, -3], 1).dtype == np.float64  # ints become float64
    with pytest.raises(ValueError, match="t must be"):
        soft_threshold(v, -1.0)
    with pytest.raises(ValueError, match="alpha"):
        prox_elastic_net(v, 1.0, -1.0, 0.5)
    with pytest.raises(ValueError, match="finite"):
        prox_elastic_net(v, np.inf, 0.0, 0.5)
    with pytest.raises(ValueError, match="finite"):
        prox_l2_squared(v, np.inf)
    with pytest.raises(ValueError, match="l1_ratio"):
        prox_elastic_net(v, 1.0, 1.0, 1.5)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros(2)
        ro.flags.writeable = False
        prox_l2_squared(v, 1.0, out=ro)
    with pytest.raises(TypeError):
        prox_l1(v, 1.0, out=[0.0, 0.0])
