import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernels_reference import (
    FEW,
    SETTINGS,
    g_linf,
    norm2,
    l1_threshold_sort,
    linf_distance_bisect,
    linf_distance_sort,
    project_l1_sort,
    vectors,
)
from scipy.optimize import minimize

from skdpsparse._kernels.projections import project_l1_then_l2_nb

from skdpsparse._kernels import (
    l1_ball_threshold,
    linf_distance_to_l2_ball,
    linf_nearest_in_l2_ball,
    project_box,
    project_l1_ball,
    project_l2_ball,
)

fractions = st.sampled_from([0.0, 1e-6, 0.1, 0.5, 0.9, 0.999, 1.0, 1.5]) | st.floats(0, 1.2)


def _tol(v):
    # Rounding scale of float64 sums over v (the kernels accumulate in float64).
    return 1e-12 * (np.abs(v.astype(np.float64)).sum() + 1e-300) + 1e-300


# ------------------------------------------------------------------------ l1 ball


@SETTINGS
@given(vectors(), fractions)
def test_l1_threshold_matches_sort_reference(v, frac):
    radius = frac * float(np.abs(v.astype(np.float64)).sum())
    tau = l1_ball_threshold(v, radius)
    assert tau >= 0.0
    assert tau == pytest.approx(l1_threshold_sort(v, radius), rel=1e-10, abs=_tol(v))


@SETTINGS
@given(vectors(min_size=1), fractions)
def test_project_l1_ball_kkt(v, frac):
    v64 = v.astype(np.float64)
    l1 = np.abs(v64).sum()
    radius = frac * l1
    x = project_l1_ball(v, radius)
    assert x.dtype == v.dtype and x.shape == v.shape
    # Rounding: the float64 sum behind tau errs by up to n * eps * ||v||_1, and the
    # output is rounded to v's dtype (and may underflow).
    info = np.finfo(v.dtype)
    tol = 4 * v.size * (info.eps * l1 + info.smallest_subnormal)
    tau = l1_ball_threshold(v, radius)
    if tau == 0.0:
        np.testing.assert_array_equal(x, v)
    if l1 <= radius:
        # Feasible (up to the summation order of ||v||_1, which may differ).
        assert tau <= tol
        return
    x64 = x.astype(np.float64)
    # Primal feasibility and active constraint: ||x||_1 = r.
    assert abs(np.abs(x64).sum() - radius) <= tol
    # Stationarity: v - x = tau * sign(x) on the support, |v| <= tau off it.
    on = x64 != 0
    assert np.all(np.sign(x64[on]) == np.sign(v64[on]))
    np.testing.assert_allclose(np.abs(v64[on] - x64[on]), tau, atol=tol)
    assert np.all(np.abs(v64[~on]) <= tau + tol)
    np.testing.assert_allclose(x64, project_l1_sort(v64, radius), atol=tol)


@SETTINGS
@given(vectors(), fractions, st.sampled_from([0.0, 0.3, 1.0, 10.0]))
def test_l1_then_l2_projection_matches_numpy_reference(v, frac, l2_radius):
    """The projection mechanism's fused post-processing: the ℓ1 projection (sort
    reference), then scaling onto the ℓ2 ball, in place."""
    v64 = v.astype(np.float64)
    l1_radius = frac * np.abs(v64).sum()
    ref = project_l1_sort(v64, l1_radius)
    # The norm without underflow (np.linalg.norm of 5e-167 entries is 0; the kernel's
    # norm rescales, as it must to project onto a ball of radius 0).
    peak = np.abs(ref).max(initial=0.0)
    norm = peak * np.linalg.norm(ref / peak) if peak > 0 else 0.0
    if norm > l2_radius:
        ref = ref * (l2_radius / norm)
    out = v64.copy()
    assert project_l1_then_l2_nb(out, l1_radius, l2_radius) is out
    np.testing.assert_allclose(out, ref, atol=_tol(v64) + 1e-12 * l2_radius)


@pytest.mark.parametrize("order", ["random", "ascending", "descending"])
@pytest.mark.parametrize("frac", [1e-5, 0.01, 0.5, 0.99])
def test_l1_threshold_large_inputs(order, frac):
    # Long inputs exercise Condat's set-aside list; sorted orders are its hard cases.
    rng = np.random.default_rng(0)
    v = rng.standard_normal(100_000) * np.exp(rng.standard_normal(100_000))
    if order != "random":
        v = np.sort(np.abs(v))
        v = v if order == "ascending" else v[::-1].copy()
    radius = frac * np.abs(v).sum()
    assert l1_ball_threshold(v, radius) == pytest.approx(
        l1_threshold_sort(v, radius), rel=1e-10
    )


def test_l1_edge_cases():
    assert l1_ball_threshold(np.empty(0), 1.0) == 0.0
    assert project_l1_ball(np.empty(0), 0.0).shape == (0,)
    assert l1_ball_threshold(np.array([-3.0]), 1.0) == 2.0
    assert l1_ball_threshold(np.array([-3.0]), 3.0) == 0.0
    assert l1_ball_threshold(np.array([1.0, -4.0, 2.0]), 0.0) == 4.0
    np.testing.assert_array_equal(project_l1_ball([1.0, -4.0, 2.0], 0.0), 0.0)
    assert l1_ball_threshold(np.array([1.0, 2.0]), np.inf) == 0.0
    # Ties: all entries equal.
    assert l1_ball_threshold(np.full(5, 2.0), 5.0) == pytest.approx(1.0)
    np.testing.assert_allclose(project_l1_ball(np.array([2, -2, 2, -2]), 2.0),
                               [0.5, -0.5, 0.5, -0.5])


def test_project_l1_ball_in_place_and_validation():
    v = np.array([3.0, -1.0, 0.5])
    out = project_l1_ball(v, 2.0, out=v)
    assert out is v
    np.testing.assert_allclose(v, [2.0, 0.0, 0.0])
    v32 = np.array([3.0, -1.0], dtype=np.float32)
    out64 = np.empty(2)
    assert project_l1_ball(v32, 1.0, out=out64) is out64
    np.testing.assert_allclose(out64, [1.0, 0.0])
    with pytest.raises(ValueError, match="radius"):
        l1_ball_threshold(v, -1.0)
    with pytest.raises(ValueError, match="radius"):
        project_l1_ball(v, np.nan)
    with pytest.raises(ValueError, match="1-D"):
        project_l1_ball(np.ones((2, 2)), 1.0)
    with pytest.raises(ValueError, match="shape"):
        project_l1_ball(v, 1.0, out=np.empty(2))


# ------------------------------------------------------------------ l2 ball, box


@SETTINGS
@given(vectors(), st.floats(0, 2))
def test_project_l2_ball(v, frac):
    v64 = v.astype(np.float64)
    norm = norm2(v64)
    radius = frac * norm
    x = project_l2_ball(v, radius)
    assert x.dtype == v.dtype
    eps = np.finfo(v.dtype).eps
    if norm < radius * (1 - 1e-12):
        np.testing.assert_array_equal(x, v)
    expected = v64 * min(1.0, radius / norm) if norm > 0 else v64
    # (Subnormal outputs carry absolute, not relative, rounding errors.)
    atol = 4 * eps * radius + 4 * np.finfo(v.dtype).smallest_subnormal
    np.testing.assert_allclose(x, expected, rtol=4 * eps, atol=atol)
    assert norm2(x) <= radius * (1 + 8 * eps) + v.size * atol


def test_project_l2_ball_extreme_magnitudes():
    # The sum of squares over/underflows; the norm must not.
    for scale in (1e200, 1e-200):
        v = np.array([3.0, 4.0]) * scale
        np.testing.assert_allclose(project_l2_ball(v, 2.5 * scale), [1.5 * scale, 2.0 * scale],
                                   rtol=1e-15)
    np.testing.assert_array_equal(project_l2_ball([1e-200, 0.0], 0.0), [0.0, 0.0])
    with pytest.raises(ValueError):
        project_l2_ball([1.0], -1.0)


@SETTINGS
@given(vectors(), st.floats(-10, 10), st.floats(0, 10))
def test_project_box(v, lower, width):
    upper = lower + width
    expected = np.clip(v, lower, upper).astype(v.dtype)
    np.testing.assert_array_equal(project_box(v, lower, upper), expected)


def test_project_box_array_bounds_and_validation():
    v = np.array([-5.0, 0.5, 5.0])
    lo = np.array([-1.0, 1.0, -np.inf])
    hi = np.array([1.0, 2.0, 4.0])
    np.testing.assert_array_equal(project_box(v, lo, hi), [-1.0, 1.0, 4.0])
    np.testing.assert_array_equal(project_box(v, -np.inf, np.inf), v)
    with pytest.raises(ValueError, match="lower"):
        project_box(v, 1.0, 0.0)
    with pytest.raises(ValueError, match="shape"):
        project_box(v, np.zeros(2), 1.0)
    with pytest.raises(ValueError, match="NaN"):
        project_box(v, np.nan, 1.0)


# ------------------------------------------- l-infinity nearest point of an l2 ball


@SETTINGS
@given(vectors(), fractions)
def test_linf_distance_matches_sort_reference(v, frac):
    radius = frac * norm2(v)
    r = linf_distance_to_l2_ball(v, radius)
    assert r == pytest.approx(linf_distance_sort(v, radius), rel=1e-9, abs=_tol(v))


@SETTINGS
@given(vectors(min_size=1), fractions)
def test_linf_nearest_is_optimal(v, frac):
    v64 = v.astype(np.float64)
    radius = frac * norm2(v64)
    r = linf_distance_to_l2_ball(v, radius)
    x = linf_nearest_in_l2_ball(v, radius)
    assert x.dtype == v.dtype
    vmax = np.abs(v64).max()
    info = np.finfo(v.dtype)
    # Output rounding: relative for normal numbers, absolute for subnormal ones.
    tol = 4 * (info.eps * vmax + info.smallest_subnormal)
    if r == 0.0:
        assert norm2(v64) <= radius * (1 + 1e-12) + v.size * tol
        np.testing.assert_array_equal(x, v)
        return
    x64 = x.astype(np.float64)
    # Feasible, at l-infinity distance r from v ...
    assert norm2(x64) <= radius + 2 * v.size * tol
    assert np.abs(x64 - v64).max() == pytest.approx(r, abs=tol)
    # ... and r is minimal: for any smaller r' the box of half-width r' around v
    # misses the ball, because its point nearest the origin, sign(v)(|v| - r')_+,
    # lies outside. (The step 1e-6 * max|v| dominates rounding in g.)
    assert g_linf(v64, r) <= radius * (1 + 1e-9) + 1e-12 * vmax
    r_smaller = r - 1e-6 * vmax
    if 0 <= r_smaller < r:  # (not representable among subnormals)
        assert g_linf(v64, r_smaller) > radius


@pytest.mark.parametrize("seed", range(12))
def test_linf_nearest_matches_scipy_optimize(seed):
    # min t  s.t.  |x_i - v_i| <= t,  ||x||^2 <= D^2, over (x, t), by SLSQP.
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    v = rng.standard_normal(n) * 3
    radius = float(rng.uniform(0, np.linalg.norm(v)))
    cons = [
        {"type": "ineq", "fun": lambda p: p[-1] - (p[:-1] - v)},
        {"type": "ineq", "fun": lambda p: p[-1] + (p[:-1] - v)},
        {"type": "ineq", "fun": lambda p: radius**2 - p[:-1] @ p[:-1]},
    ]
    p0 = np.append(np.zeros(n), np.abs(v).max())
    res = minimize(lambda p: p[-1], p0, constraints=cons, method="SLSQP",
                   options={"ftol": 1e-12, "maxiter": 500})
    assert res.success
    r = linf_distance_to_l2_ball(v, radius)
    assert r == pytest.approx(res.fun, abs=1e-6)
    x = linf_nearest_in_l2_ball(v, radius)
    assert np.abs(x - v).max() == pytest.approx(res.fun, abs=1e-6)


@pytest.mark.parametrize("n", [1_000, 50_000])
@pytest.mark.parametrize("frac", [1e-4, 0.1, 0.5, 0.999])
def test_linf_distance_large_inputs(n, frac):
    rng = np.random.default_rng(1)
    v = rng.standard_normal(n)
    v[: n // 10] = v[0]  # a block of ties
    radius = frac * np.linalg.norm(v)
    assert linf_distance_to_l2_ball(v, radius) == pytest.approx(
        linf_distance_bisect(v, radius), rel=1e-9
    )


def test_linf_edge_cases():
    assert linf_distance_to_l2_ball(np.empty(0), 0.0) == 0.0
    assert linf_nearest_in_l2_ball(np.empty(0), 1.0).shape == (0,)
    np.testing.assert_array_equal(linf_nearest_in_l2_ball(np.zeros(3), 0.0), 0.0)
    assert linf_distance_to_l2_ball(np.array([3.0, -4.0]), 0.0) == 4.0
    np.testing.assert_array_equal(linf_nearest_in_l2_ball([3.0, -4.0], 0.0), [0.0, 0.0])
    # Symmetric ties: (2, 2) to radius sqrt(2) moves each coordinate by 1.
    assert linf_distance_to_l2_ball(np.array([2.0, -2.0]), np.sqrt(2)) == pytest.approx(1.0)
    np.testing.assert_allclose(linf_nearest_in_l2_ball([2.0, -2.0], np.sqrt(2)), [1.0, -1.0])
    # Large and tiny magnitudes.
    for s in (1e150, 1e-150):
        assert linf_distance_to_l2_ball(np.array([3.0, -4.0]) * s, 0.0) == 4.0 * s
        r = linf_distance_to_l2_ball(np.array([2.0, 2.0]) * s, np.sqrt(2) * s)
        assert r == pytest.approx(s)
    # Subnormal inputs.
    v = np.array([5e-324, -1e-320, 3e-321])
    for radius in (0.0, 1e-322, 5e-321):
        assert linf_distance_to_l2_ball(v, radius) == pytest.approx(
            linf_distance_bisect(v, radius), abs=2e-323
        )
    with pytest.raises(ValueError, match="radius"):
        linf_nearest_in_l2_ball([1.0], -0.5)


@FEW
@given(vectors(min_size=1, max_size=6, max_magnitude=100.0))
def test_linf_distance_is_monotone_in_radius(v):
    # r*(D) is non-increasing in D and reaches 0 at D = ||v||.
    norm = norm2(v)
    rs = [linf_distance_to_l2_ball(v, f * norm) for f in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert all(a >= b - 1e-12 * (norm + 1e-300) for a, b in zip(rs, rs[1:]))
    assert rs[-1] <= 1e-12 * norm  # (the norms may differ in the last ulp)
