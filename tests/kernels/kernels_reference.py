"""Plain NumPy/SciPy references for the numba kernels, and shared test strategies.

Also imported by ``benchmarks/bench_kernels.py`` (the sort-based l1 projection).
"""

import os

import numpy as np
import scipy.sparse as sp
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# Numba compiles on the first example, so no per-example deadline. For a longer
# search, set KERNELS_EXAMPLES (e.g. 5000) in the environment.
_EXAMPLES = int(os.environ.get("KERNELS_EXAMPLES", "150"))
SETTINGS = settings(deadline=None, max_examples=_EXAMPLES)
FEW = settings(deadline=None, max_examples=max(_EXAMPLES // 4, 10))

FLOAT_DTYPES = (np.float32, np.float64)


# ------------------------------------------------------------------- strategies


@st.composite
def vectors(draw, min_size=0, max_size=40, max_magnitude=1e9):
    """1-D float32/float64 arrays: general values, small integers (ties), or both
    scaled by a large or small power of ten."""
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    n = draw(st.integers(min_size, max_size))
    kind = draw(st.sampled_from(["general", "ties", "scaled"]))
    if kind == "general":
        elems = st.floats(
            -max_magnitude, max_magnitude, allow_nan=False, allow_infinity=False,
            width=32 if dtype == np.float32 else 64,
        )
        return draw(hnp.arrays(dtype, n, elements=elems))
    v = draw(hnp.arrays(np.int64, n, elements=st.integers(-3, 3))).astype(dtype)
    if kind == "scaled":
        v = v * dtype(10.0 ** draw(st.sampled_from([-30, -6, 6, 12])))
    return v


@st.composite
def csr_matrices(draw, max_rows=8, max_cols=8):
    """Canonical SciPy CSR matrices (int32 indices) with empty rows, float32 or
    float64 data."""
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    n_rows = draw(st.integers(0, max_rows))
    n_cols = draw(st.integers(1, max_cols))
    dense = draw(
        hnp.arrays(
            np.float64, (n_rows, n_cols),
            elements=st.one_of(
                st.just(0.0),
                st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32),
            ),
        )
    ).astype(dtype)
    return sp.csr_matrix(dense)


# ------------------------------------------------------------------ projections


def norm2(v):
    """l2 norm without under/overflow (np.linalg.norm squares first)."""
    v = np.abs(np.asarray(v, dtype=np.float64))
    m = v.max(initial=0.0)
    return 0.0 if m == 0 else float(m * np.linalg.norm(v / m))


def l1_threshold_sort(v, radius):
    """Sort-based l1-ball threshold (Duchi, Shalev-Shwartz, Singer, Chandra 2008)."""
    u = np.sort(np.abs(np.asarray(v, dtype=np.float64)))[::-1]
    if u.sum() <= radius:
        return 0.0
    if radius == 0:
        return float(u[0])
    css = np.cumsum(u) - radius
    k = np.arange(1, u.size + 1)
    active = np.nonzero(u * k > css)[0]
    rho = active[-1] if active.size else 0  # rounding can hide the first one
    return float(css[rho] / (rho + 1))


def project_l1_sort(v, radius):
    """Sort-based Euclidean projection onto the l1 ball."""
    tau = l1_threshold_sort(v, radius)
    return np.sign(v) * np.maximum(np.abs(v) - tau, 0.0)


def linf_distance_sort(v, radius):
    """Smallest r >= 0 with ||(|v| - r)_+||_2 <= radius, by scanning sorted |v|.

    On the piece where the k largest entries are active,
    g(r) = sum_{i<=k} (u_i - r)^2 is a quadratic solved in closed form.
    """
    u = np.sort(np.abs(np.asarray(v, dtype=np.float64)))[::-1]
    if norm2(u) <= radius:
        return 0.0
    # Work at unit scale so that squares neither overflow nor underflow.
    scale = u[0]
    u = u / scale
    d2 = (radius / scale) ** 2
    for k in range(1, u.size + 1):
        nxt = u[k] if k < u.size else 0.0
        top = u[:k]
        # (k == n: the root is at r ~ 0 and rounding hid it.)
        if np.sum((top - nxt) ** 2) > d2 or k == u.size:
            m = top.mean()
            r = m - np.sqrt(max(d2 - np.sum((top - m) ** 2), 0.0) / k)
            return float(scale * max(r, 0.0))


def linf_distance_bisect(v, radius, iters=100):
    """Same as :func:`linf_distance_sort` by bisection on the decreasing g(r)."""
    u = np.abs(np.asarray(v, dtype=np.float64))
    if norm2(u) <= radius:
        return 0.0
    lo, hi = 0.0, float(u.max())
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if g_linf(u, mid) > radius:
            lo = mid
        else:
            hi = mid
    return hi


def g_linf(v, r):
    """||(|v| - r)_+||_2, the norm of the box point nearest the origin."""
    return norm2(np.maximum(np.abs(np.asarray(v, np.float64)) - r, 0.0))


# ---------------------------------------------------------------------- rows


def row_norms(X, ord):
    A = np.abs(np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64))
    if ord == 1:
        return A.sum(axis=1)
    m = A.max(axis=1, initial=0.0)  # rescale so that squares do not under/overflow
    safe = np.where(m > 0, m, 1.0)
    return m * np.linalg.norm(A / safe[:, None], axis=1)


def bounding_scales(X, l2_bound, l1_bound):
    """min(1, L2/‖x‖₂, L1/‖x‖₁) per row, in units of the row's largest entry m: the
    norms of x/m lie in [1, d], so a row whose norms overflow float64 still gets its
    true factor L/‖x‖ (not 0, which would drop the row)."""
    A = np.abs(np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64))
    m = A.max(axis=1, initial=0.0)
    safe = np.where(m > 0, m, 1.0)
    U = A / safe[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.minimum(1.0, np.minimum((l2_bound / safe) / np.linalg.norm(U, axis=1),
                                       (l1_bound / safe) / U.sum(axis=1)))
    s[m == 0] = 1.0
    return s


# -------------------------------------------------------------------- losses


def loss_and_derivative(code, z, y, param):
    """Closed forms of the losses and their z-derivatives, vectorised, naive
    (no overflow protection: use moderate margins)."""
    z = np.asarray(z, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    t = y * z
    r = z - y
    if code == 0:  # squared
        return 0.5 * r**2, r
    if code == 1:  # logistic
        return np.log(1 + np.exp(-t)), -y / (1 + np.exp(t))
    if code == 2:  # hinge
        return np.maximum(0, 1 - t), np.where(t < 1, -y, 0.0)
    if code == 3:  # smoothed hinge
        h = param
        val = np.where(t >= 1, 0.0, np.where(t > 1 - h, (1 - t) ** 2 / (2 * h), 1 - t - h / 2))
        dt = np.where(t >= 1, 0.0, np.where(t > 1 - h, -(1 - t) / h, -1.0))
        return val, y * dt
    if code == 4:  # huber
        d = param
        val = np.where(np.abs(r) <= d, 0.5 * r**2, d * (np.abs(r) - d / 2))
        return val, np.clip(r, -d, d)
    if code == 5:  # sigmoid
        s = 1 / (1 + np.exp(t))
        return s, -y * s * (1 - s)
    raise ValueError(code)


def clipped_gradient_sum(X, y, w, b, code, param, clip, rows, fit_intercept):
    """Materialise per-example gradients, clip each, sum."""
    A = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)[rows]
    z = A @ w + b
    _, d = loss_and_derivative(code, z, np.asarray(y, np.float64)[rows], param)
    G = d[:, None] * (np.hstack([A, np.ones((A.shape[0], 1))]) if fit_intercept else A)
    norms = np.linalg.norm(G, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(norms > clip, clip / norms, 1.0)
    G = G * c[:, None]
    if fit_intercept:
        return G[:, :-1].sum(axis=0), G[:, -1].sum()
    return G.sum(axis=0), 0.0
