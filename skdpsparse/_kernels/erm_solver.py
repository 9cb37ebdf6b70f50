"""Regularized ERM of linear models, solved to a certified accuracy, and the loss sums
of the sparse exponential mechanism's net.

Solver
------
:func:`solve_regularized_erm` minimizes, over :math:`\\theta = (w, \\theta_b)` in
:math:`\\mathbb R^p` or in the ball :math:`\\{\\|\\theta\\|_2 \\le D\\}`,

.. math:: F(\\theta) = \\frac1n \\sum_i \\ell(\\langle w, x_i\\rangle + c\\,\\theta_b, y_i)
   + \\frac\\lambda2 \\|\\theta\\|_2^2 ,

the intercept being the coefficient of a constant feature of value :math:`c`
(``intercept_scaling``; ``c = 0`` means no intercept and :math:`\\theta = w`). The loss
and gradient come from :func:`~skdpsparse._kernels.linear_losses.csr_loss_gradient`
(or its dense twin): one pass over the stored entries, sparse ``X`` never densified.

* Unconstrained: L-BFGS (SciPy's L-BFGS-B without bounds), stopped by our own test on
  the gradient, not SciPy's. Its line search compares function values, which stalls
  once F changes by less than its rounding (a gradient norm near √(ε_mach·F·H));
  tighter certificates (large n, small ``tol``) are reached by Newton-CG steps
  (Hessian-vector products (1/n)X̄ᵀ(ℓ''∘X̄v) + λv, :func:`loss_curvatures`) safeguarded
  on the gradient norm only, which converge quadratically to the floor of the
  gradient's own rounding.
* Ball: if the unconstrained solution lies inside the ball it is the answer;
  otherwise accelerated projected gradient (Nesterov's constant momentum for
  λ-strongly convex problems, with backtracking on the step and a restart whenever
  F increases; O'Donoghue and Candès 2015).

L-BFGS's own work is level-1 BLAS on p-vectors; threaded BLAS only adds
synchronization there (×15 slower measured on a loaded 2-core machine), so the solver
runs with one BLAS thread (``threadpoolctl``).

Certificate. :math:`\\Phi = F + \\iota_{\\mathcal X}` is λ-strongly convex, so for every
:math:`u \\in \\partial\\Phi(\\hat\\theta)`, :math:`\\lambda\\|\\hat\\theta-\\theta^*\\|_2^2
\\le \\langle u, \\hat\\theta-\\theta^*\\rangle`, i.e.
:math:`\\|\\hat\\theta - \\theta^*\\|_2 \\le \\|u\\|_2/\\lambda`. The solver reports the
smallest such u it can compute (:func:`ball_residual`): :math:`\\nabla F(\\hat\\theta)`
in the interior (and for :math:`\\mathbb R^p`), :math:`\\nabla F + t\\hat\\theta` with
the best :math:`t \\ge 0` on the sphere (the normal cone there is
:math:`\\{t\\hat\\theta\\}`). The caller decides, by ``accept(r_l2, r_l1)``, when the
residual is small enough; the solver stops only then, whatever the iteration count,
or raises. (Floating-point rounding of the last ulps is not accounted for, as
nowhere else in the library.)

Net loss sums
-------------
:func:`csc_net_loss_sums` scores every point of a net of sparse vectors
(:mod:`skdpsparse.mechanisms.sparse_exponential`): for every support and every value
vector on it, :math:`\\sum_i \\ell(\\langle \\theta, x_i\\rangle, y_i)`, touching only the
rows with a nonzero in the support.
"""

import math

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.optimize import minimize

try:  # a dependency of scikit-learn, so normally present
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover
    ThreadpoolController = None

from .linear_losses import (
    HUBER,
    LOGISTIC,
    SMOOTHED_HINGE,
    SQUARED,
    check_loss,
    csr_loss_gradient,
    csr_margins,
    dense_loss_gradient,
    dense_margins,
    loss_value,
)

__all__ = [
    "ball_residual",
    "csc_net_loss_sums",
    "loss_curvatures",
    "make_objective",
    "solve_regularized_erm",
]

# A point whose norm is within this relative distance of the radius counts as being on
# the sphere (the solver puts boundary points there by an exact rescaling).
_ON_SPHERE = 1e-12
_CONTROLLER = []  # the ThreadpoolController, created on first use (it scans libraries)


def _one_blas_thread():
    if ThreadpoolController is None:  # pragma: no cover
        import contextlib
        return contextlib.nullcontext()
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


@njit(cache=True)
def loss_curvatures(margins, y, code, param):
    """Second derivatives ℓ''(zᵢ, yᵢ) in the margin (labels ±1 for classification).

    Squared 1; logistic σ(t)σ(−t) with t = yz; smoothed hinge 1/h for 1 − h < t < 1,
    else 0; Huber 1 for |z − y| ≤ κ, else 0 (one-sided values at the kinks).
    """
    check_loss(code, param)
    out = np.empty(margins.shape[0])
    for i in range(margins.shape[0]):
        z = margins[i]
        yi = np.float64(y[i])
        if code == SQUARED:
            out[i] = 1.0
        elif code == LOGISTIC:
            e = math.exp(-abs(yi * z))
            out[i] = e / ((1.0 + e) * (1.0 + e))
        elif code == SMOOTHED_HINGE:
            t = yi * z
            out[i] = 1.0 / param if 1.0 - param < t < 1.0 else 0.0
        elif code == HUBER:
            out[i] = 1.0 if abs(z - yi) <= param else 0.0
        else:
            raise ValueError("loss_curvatures: no second derivative for this loss")
    return out


def _hessian_product(X, y, code, param, alpha, c, theta):
    """v ↦ ∇²F(θ)v = (1/n) X̄ᵀ(ℓ''∘X̄v) + λv, with X̄ = [X, c·1]."""
    n, d = X.shape
    w = np.ascontiguousarray(theta[:d])
    b = c * theta[d] if c > 0 else 0.0
    if sp.issparse(X):
        z = csr_margins(X.indptr, X.indices, X.data, w, b)
    else:
        z = dense_margins(X, w, b)
    curv = loss_curvatures(z, y, code, param) / n

    def hvp(v):
        u = X @ v[:d]
        if c > 0:
            u = u + c * v[d]
        u = curv * np.asarray(u).ravel()
        out = np.empty_like(v)
        out[:d] = X.T @ u
        if c > 0:
            out[d] = c * u.sum()
        return out + alpha * v

    return hvp


def _conjugate_gradient(hvp, rhs, rtol, max_iter):
    x = np.zeros_like(rhs)
    r = rhs.copy()
    q = r.copy()
    rr = float(r @ r)
    stop = (rtol ** 2) * rr
    for _ in range(max_iter):
        hq = hvp(q)
        step = rr / float(q @ hq)
        x += step * q
        r -= step * hq
        rr_new = float(r @ r)
        if rr_new <= stop:
            break
        q = r + (rr_new / rr) * q
        rr = rr_new
    return x


def _newton_polish(fg, hvp_at, theta, accept, max_iter=30):
    """Newton-CG on ‖∇F‖ alone (no function values: they are below rounding here)."""
    grad = fg(theta)[1]
    for it in range(1, max_iter + 1):
        if accept(*_norms(grad)):
            return theta, grad, it - 1
        step = _conjugate_gradient(hvp_at(theta), -grad, 1e-3, 200)
        g_norm = np.linalg.norm(grad)
        for _ in range(30):  # safeguard: halve until the gradient norm decreases
            cand = theta + step
            g_cand = fg(cand)[1]
            if np.linalg.norm(g_cand) < g_norm:
                break
            step *= 0.5
        else:
            return theta, grad, it
        theta, grad = cand, g_cand
    return theta, grad, max_iter


def make_objective(X, y, code, param, alpha, intercept_scaling):
    """``fg(theta) -> (F(theta), grad F(theta))`` for the objective of the module doc.

    Parameters
    ----------
    X : ndarray or scipy.sparse.csr_matrix of shape (n, d)
    y : ndarray of shape (n,), float64
    code, param : int, float
        Loss code and parameter (:mod:`~skdpsparse._kernels.linear_losses`).
    alpha : float
        λ > 0.
    intercept_scaling : float
        c ≥ 0; 0 for no intercept (then p = d, else p = d + 1).

    Returns
    -------
    callable
    """
    n, d = X.shape
    c = float(intercept_scaling)
    p = d + (c > 0)
    y = np.ascontiguousarray(y, dtype=np.float64)
    check_loss(code, param)
    if sp.issparse(X):
        indptr, indices, data = X.indptr, X.indices, X.data

        def loss_grad(w, b):
            return csr_loss_gradient(indptr, indices, data, y, w, b, code, param)
    else:
        X = np.ascontiguousarray(X)

        def loss_grad(w, b):
            return dense_loss_gradient(X, y, w, b, code, param)

    def fg(theta):
        w = np.ascontiguousarray(theta[:d])
        b = c * theta[d] if c > 0 else 0.0
        loss, grad_w, grad_b = loss_grad(w, b)
        grad = np.empty(p)
        grad[:d] = grad_w
        if c > 0:
            grad[d] = c * grad_b  # chain rule: the margin is <w, x> + c theta_b
        grad += alpha * theta
        return loss + 0.5 * alpha * float(theta @ theta), grad

    return fg


def ball_residual(theta, grad, radius):
    """The least-norm subgradient of F + ι_𝒳 at ``theta`` we use as a certificate.

    Parameters
    ----------
    theta : ndarray of shape (p,)
        A point of 𝒳.
    grad : ndarray of shape (p,)
        ∇F(theta).
    radius : float or None
        D of 𝒳 = {‖θ‖₂ ≤ D}; None for 𝒳 = ℝᵖ.

    Returns
    -------
    u : ndarray of shape (p,)
        ``grad`` inside the ball; ``grad + t·theta`` with t = max(0, −⟨grad, θ⟩/‖θ‖²)
        (the least-norm element of grad + N_𝒳(θ)) on its sphere.
    """
    if radius is None:
        return grad
    sq = float(theta @ theta)
    if sq == 0.0 or math.sqrt(sq) < radius * (1.0 - _ON_SPHERE):
        return grad
    t = max(0.0, -float(grad @ theta) / sq)
    return grad + t * theta


def _norms(u):
    return float(np.linalg.norm(u)), float(np.abs(u).sum())


def _lbfgs(fg, theta0, accept, max_iter):
    """Unconstrained L-BFGS, stopped as soon as ``accept`` holds at an iterate."""
    last = {}

    def fun(theta):
        value, grad = fg(theta)
        last["x"], last["g"] = theta.copy(), grad
        return value, grad

    def callback(intermediate_result):
        x = intermediate_result.x
        if "x" in last and np.array_equal(x, last["x"]) and accept(*_norms(last["g"])):
            raise StopIteration

    # ftol = gtol = 0: SciPy's own tests never stop the run; ours (the callback) does,
    # or the line search gives up at the floating-point floor.
    res = minimize(fun, theta0, jac=True, method="L-BFGS-B", callback=callback,
                   options={"maxiter": max_iter, "ftol": 0.0, "gtol": 0.0, "maxcor": 10})
    theta = np.asarray(res.x, dtype=np.float64)
    if "x" in last and np.array_equal(theta, last["x"]):
        grad = last["g"]
    else:
        grad = fg(theta)[1]
    return theta, grad, int(res.nit)


def _project(v, radius):
    norm = float(np.linalg.norm(v))
    return v * (radius / norm) if norm > radius else v


def _accelerated_projected_gradient(fg, theta0, radius, alpha, smoothness, accept,
                                    max_iter):
    """min F over the ball by Nesterov's method for λ-strongly convex F.

    ``smoothness`` is a proven bound M on the Lipschitz constant of ∇F; the local
    estimate starts at M/64, halves its distance to what the data need by backtracking
    (doubling on a failed sufficient-decrease test) and decays by 0.9 per step.
    """
    x = _project(np.array(theta0, dtype=np.float64), radius)
    fx, gx = fg(x)
    y, fy, gy = x, fx, gx
    step_l = max(smoothness / 64.0, alpha)
    for it in range(1, max_iter + 1):
        while True:
            x_new = _project(y - gy / step_l, radius)
            f_new, g_new = fg(x_new)
            diff = x_new - y
            if f_new <= fy + float(gy @ diff) + 0.5 * step_l * float(diff @ diff) \
                    + 1e-15 * abs(fy) or step_l >= smoothness:
                break
            step_l = min(2.0 * step_l, smoothness)
        if accept(*_norms(ball_residual(x_new, g_new, radius))):
            return x_new, g_new, it
        q = alpha / step_l
        momentum = (1.0 - math.sqrt(q)) / (1.0 + math.sqrt(q))
        if f_new > fx:  # restart: the momentum overshot
            y, fy, gy = x_new, f_new, g_new
        else:
            y = x_new + momentum * (x_new - x)
            fy, gy = fg(y)
        x, fx, gx = x_new, f_new, g_new
        step_l = max(0.9 * step_l, alpha)
    return x, gx, max_iter


def solve_regularized_erm(X, y, *, code, param, alpha, intercept_scaling, radius,
                          smoothness, accept, max_iter=1000, theta0=None):
    """Minimize the regularized ERM objective until ``accept`` certifies the result.

    Parameters
    ----------
    X : ndarray or scipy.sparse.csr_matrix of shape (n, d)
    y : ndarray of shape (n,)
    code, param : int, float
        Loss code and parameter; the loss must be differentiable (not HINGE).
    alpha : float
        λ > 0.
    intercept_scaling : float
        c ≥ 0 (0: no intercept).
    radius : float or None
        D of the feasible ball, or None for ℝᵖ.
    smoothness : float
        A proven bound on the Lipschitz constant of ∇F (the loss's smoothness times the
        squared feature bound, plus λ); used as the largest step of the ball solver.
    accept : callable
        ``accept(r_l2, r_l1) -> bool`` on the ℓ2 and ℓ1 norms of the residual of
        :func:`ball_residual`. Must be data-independent for the result to be private.
    max_iter : int, default=1000
        Iterations of L-BFGS and of the ball solver (restarted up to twice); the
        Newton polish adds at most 30.
    theta0 : ndarray of shape (p,), optional
        Starting point (default 0).

    Returns
    -------
    theta : ndarray of shape (p,)
    info : dict
        ``n_iter``, ``residual_l2``, ``residual_l1`` (of the returned point).

    Raises
    ------
    RuntimeError
        If no iterate passes ``accept`` (a tolerance below what float64 can certify,
        or too small a ``max_iter``).
    """
    if code == 2:  # HINGE: no gradient to certify with
        raise ValueError("solve_regularized_erm needs a differentiable loss.")
    with _one_blas_thread():
        return _solve(X, y, code, param, alpha, intercept_scaling, radius, smoothness,
                      accept, max_iter, theta0)


def _solve(X, y, code, param, alpha, intercept_scaling, radius, smoothness, accept,
           max_iter, theta0):
    fg = make_objective(X, y, code, param, alpha, intercept_scaling)
    if not sp.issparse(X):
        X = np.ascontiguousarray(X)
    y = np.ascontiguousarray(y, dtype=np.float64)

    def hvp_at(theta):
        return _hessian_product(X, y, code, param, alpha, float(intercept_scaling), theta)

    p = X.shape[1] + (intercept_scaling > 0)
    theta = np.zeros(p) if theta0 is None else np.array(theta0, dtype=np.float64)
    theta, grad, n_iter = _lbfgs(fg, theta, accept, max_iter)
    inside = radius is None or np.linalg.norm(theta) <= radius
    if inside and not accept(*_norms(grad)):
        theta, grad, it = _newton_polish(fg, hvp_at, theta, accept)
        n_iter += it
        inside = radius is None or np.linalg.norm(theta) <= radius
    if inside and accept(*_norms(grad)):
        r_l2, r_l1 = _norms(grad)
        return theta, {"n_iter": n_iter, "residual_l2": r_l2, "residual_l1": r_l1}
    if radius is not None and np.linalg.norm(theta) > radius:
        for _ in range(3):
            theta, grad, it = _accelerated_projected_gradient(
                fg, theta, radius, alpha, smoothness, accept, max_iter)
            n_iter += it
            r_l2, r_l1 = _norms(ball_residual(theta, grad, radius))
            if accept(r_l2, r_l1):
                return theta, {"n_iter": n_iter, "residual_l2": r_l2, "residual_l1": r_l1}
    raise RuntimeError(
        "The regularized ERM solver did not reach the certified accuracy the noise is "
        f"calibrated for after {n_iter} iterations; increase max_iter or tol (the "
        "relative slack of the sensitivity)."
    )


@njit(cache=True)
def csc_net_loss_sums(indptr, indices, data, n_rows, supports, values, y, code, param):
    """Σᵢ ℓ(⟨θ, xᵢ⟩, yᵢ) for every θ with support ``supports[a]`` and values ``values[v]``.

    Parameters
    ----------
    indptr, indices, data : CSC parts of X (n_rows × p)
    n_rows : int
    supports : ndarray of shape (n_supports, j), int64
        Column indices of each support (distinct within a row).
    values : ndarray of shape (n_values, j), float64
        Values of θ on the support, in the order of the support's columns.
    y : ndarray of shape (n_rows,)
    code, param : int, float
        Loss code and parameter.

    Returns
    -------
    ndarray of shape (n_supports, n_values), float64
        Entry (a, v): the summed loss of θ with θ[supports[a]] = values[v], 0 elsewhere.
    """
    check_loss(code, param)
    n_sup, j = supports.shape
    n_val = values.shape[0]
    base = 0.0  # Σᵢ ℓ(0, yᵢ): rows outside the support's columns keep margin 0
    zero_loss = np.empty(n_rows)
    for i in range(n_rows):
        zero_loss[i] = loss_value(code, 0.0, y[i], param)
        base += zero_loss[i]
    out = np.empty((n_sup, n_val))
    buf = np.zeros((n_rows, j))
    touched = np.zeros(n_rows, dtype=np.bool_)
    rows = np.empty(n_rows, dtype=np.int64)
    for a in range(n_sup):
        m = 0
        for t in range(j):
            col = supports[a, t]
            for k in range(indptr[col], indptr[col + 1]):
                i = indices[k]
                buf[i, t] = data[k]
                if not touched[i]:
                    touched[i] = True
                    rows[m] = i
                    m += 1
        for v in range(n_val):
            total = base
            for r in range(m):
                i = rows[r]
                z = 0.0
                for t in range(j):
                    z += buf[i, t] * values[v, t]
                total += loss_value(code, z, y[i], param) - zero_loss[i]
            out[a, v] = total
        for r in range(m):
            i = rows[r]
            touched[i] = False
            for t in range(j):
                buf[i, t] = 0.0
    return out
