"""Regularized ERM of linear models, solved to a certified accuracy.

The compiled passes it calls (:func:`~skdpsparse._kernels.erm_passes.loss_curvatures`,
the per-column counts and the largest entry) are in :mod:`skdpsparse._kernels.erm_passes`.

Solver
------
:func:`solve_regularized_erm` minimizes, over :math:`\\theta = (w, \\theta_b)` in
:math:`\\mathbb R^p` or in the ball :math:`\\{\\|\\theta\\|_2 \\le D\\}`,

.. math:: F(\\theta) = \\frac1n \\sum_i \\ell(\\langle w, x_i\\rangle + c\\,\\theta_b, y_i)
   + \\frac\\lambda2 \\|\\theta\\|_2^2 ,

the intercept being the coefficient of a constant feature of value :math:`c`
(``intercept_scaling``; ``c = 0`` means no intercept and :math:`\\theta = w`). The loss
and gradient come from :class:`FixedPointObjective`: one pass over the stored
entries (sparse ``X`` never densified) whose per-row terms are rounded to a
power-of-two grid and summed as int64
(:func:`~skdpsparse._kernels.linear_losses.csr_fixed_loss_gradient` or its dense
twin). Integer sums do not depend on the order of the rows, so a cluster that sums
chunks of rows on several workers (:mod:`skdpsparse.distributed`) gets the same
numbers as one pass in memory, bit for bit, and runs this same solver
(:func:`solve_certified`) on them: the iterates, the certificate and the released
minimizer are the in-memory ones.

* Unconstrained: L-BFGS (SciPy's L-BFGS-B without bounds), stopped by our own test on
  the gradient, not SciPy's. Its line search compares function values, which stalls
  once F changes by less than its rounding (a gradient norm near √(ε_mach·F·H));
  so L-BFGS stops at the first evaluated point that carries the certificate (a
  line-search trial as well as an iterate) or after a few evaluations in a row
  that do not lower F beyond its rounding (``_FLOOR_PATIENCE``), and
  tighter certificates (large n, small ``tol``) are reached by Newton-CG steps
  (Hessian-vector products (1/n)X̄ᵀ(ℓ''∘X̄v) + λv,
  :func:`~skdpsparse._kernels.erm_passes.loss_curvatures`) safeguarded on the
  gradient norm only, which converge quadratically to the floor of the
  gradient's own rounding.
* Ball: if the unconstrained solution lies inside the ball it is the answer;
  otherwise accelerated projected gradient (Nesterov's constant momentum for
  λ-strongly convex problems, with backtracking on the step and a restart whenever
  F increases; O'Donoghue and Candès 2015).
* Fallback: whether those adaptive solvers certify depends on the data, so when they
  stop without a certificate (or fail in floating point) and the caller gave a
  public step count, :func:`projected_descent` runs from 0 for exactly that many
  steps; its distance to the minimizer is bounded by analysis
  (:func:`descent_floor`, :func:`descent_iterations`), not by a test that could fail.

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
:math:`\\{t\\hat\\theta\\}`). The gradient the solver sees is the exact one up to the
rounding of the per-row terms and of a few float64 steps, bounded by :class:`FixedPointObjective`
(e₂, e₁); ``accept`` is asked about ‖u‖ + e, an upper bound on the residual of the
true gradient (whose least-norm subgradient it dominates), so the certificate covers
the rounding of the sums. The caller decides, by ``accept(r_l2, r_l1)``, when the
residual is small enough; the adaptive solvers stop only then, whatever the iteration
count, and otherwise hand over to the fallback (or raise, without one). (The rounding
inside one row's margin and loss, the same operations in every path, is not accounted
for, as nowhere else in the library.)
"""

import math
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize

try:  # a dependency of scikit-learn, so normally present
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover
    ThreadpoolController = None

from .._kernels.erm_passes import (
    column_counts,
    corner_extremes,
    csr_bounding_stats,
    csr_bounding_stats_zero_sums,
    dense_bounding_stats,
    loss_curvatures,
    max_abs_entry,
    scaled_gradient,
)
from .._kernels.linear_losses import (
    HUBER,
    LOGISTIC,
    SMOOTHED_HINGE,
    SQUARED,
    check_loss,
    csr_fixed_hessian_product,
    csr_fixed_loss_gradient,
    csr_loss_gradient,
    csr_margins,
    dense_fixed_hessian_product,
    dense_fixed_loss_gradient,
    dense_loss_gradient,
    dense_margins,
)

__all__ = [
    "FixedPointObjective",
    "InMemoryRows",
    "ball_residual",
    "descent_floor",
    "descent_iterations",
    "make_objective",
    "projected_descent",
    "solve_certified",
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
        curvature = float(q @ hq)
        if not curvature > 0.0:
            # H is λ-positive definite: q·Hq ≤ 0 (or NaN) is rounding at a degenerate
            # scale (underflow), where no further step is meaningful. Stop with the
            # current x; the caller's safeguard and certificate decide what it is worth
            # (a ZeroDivisionError here escaped the fit).
            break
        step = rr / curvature
        x += step * q
        r -= step * hq
        rr_new = float(r @ r)
        if rr_new <= stop:
            break
        q = r + (rr_new / rr) * q
        rr = rr_new
    return x


def _newton_polish(fge, hvp_at, theta, accept, max_iter=30):
    """Newton-CG on ‖∇F‖ alone (no function values: they are below rounding here)."""
    _, grad, err = fge(theta)
    for it in range(1, max_iter + 1):
        if accept(*_certified(grad, err)):
            return theta, grad, err, it - 1
        step = _conjugate_gradient(hvp_at(theta), -grad, 1e-3, 200)
        g_norm = np.linalg.norm(grad)
        for _ in range(30):  # safeguard: halve until the gradient norm decreases
            cand = theta + step
            _, g_cand, e_cand = fge(cand)
            if np.linalg.norm(g_cand) < g_norm:
                break
            step *= 0.5
        else:
            return theta, grad, err, it
        theta, grad, err = cand, g_cand, e_cand
    return theta, grad, err, max_iter


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


# ------------------------------------------------------ the exact objective oracle
def partial_loss_gradient(X, y, w, b, code, param, loss_scale, grad_scale, limit,
                          entry_max=-1.0, row_scales=None):
    """The exact sums of :class:`FixedPointObjective` over the rows of ``X`` (one
    chunk, or the whole in-memory matrix): (loss, grad_w, grad_b, ok), ints.

    A distributed fit runs this on each chunk as a task and adds the results; the
    in-memory fit runs it once on the whole matrix; integer addition makes both the
    same numbers. It sees the chunk, the iterate and the grid: no seed, no noise.
    ``entry_max``: max |x_ij| of the chunk if known (:func:`max_abs_entry`), which
    saves the kernel finding each row's maximum; the sums are the same either way.
    ``row_scales``: the rows' bounding factors cᵢ, when ``X`` holds the unbounded
    rows: the sums are then those of the rows fl(cᵢ·xᵢ), bit for bit the sums of the
    bounded copy (:mod:`~skdpsparse._kernels.linear_losses`).
    """
    if sp.issparse(X):
        loss, grad, grad_b, ok = csr_fixed_loss_gradient(
            X.indptr, X.indices, X.data, y, w, b, code, param, loss_scale, grad_scale,
            limit, entry_max, row_scales)
    else:
        loss, grad, grad_b, ok = dense_fixed_loss_gradient(
            X, y, w, b, code, param, loss_scale, grad_scale, limit, entry_max, row_scales)
    return int(loss), grad, int(grad_b), bool(ok)


def partial_hessian_product(X, y, w, b, v_w, v_b, code, param, scale, limit,
                            entry_max=-1.0, row_scales=None):
    """The exact sums of a Hessian-vector product over the rows of ``X``:
    (h_w, h_b, ok)."""
    if sp.issparse(X):
        h, h_b, ok = csr_fixed_hessian_product(X.indptr, X.indices, X.data, y, w, b, v_w,
                                               v_b, code, param, scale, limit, entry_max,
                                               row_scales)
    else:
        h, h_b, ok = dense_fixed_hessian_product(X, y, w, b, v_w, v_b, code, param, scale,
                                                 limit, entry_max, row_scales)
    return h, int(h_b), bool(ok)


class InMemoryRows:
    """The rows of an in-memory fit for :class:`FixedPointObjective`: one chunk.

    Parameters
    ----------
    X : ndarray or scipy.sparse.csr_matrix of shape (n, d)
        Contribution-bounded rows; or, with ``row_bounds``, the rows before bounding
        (finite; a CSR matrix in canonical form).
    y : ndarray of shape (n,) or (K, n)
        Targets, one row per problem; ``problem`` selects the one in use.
    row_bounds : (float, float), optional
        (L2, L1): bound each row into {‖x‖₂ ≤ L2, ‖x‖₁ ≤ L1} by its factor
        min(1, L2/‖xᵢ‖₂, L1/‖xᵢ‖₁), applied where the kernels read the row instead
        of in a copy of X (no extra memory per entry). The rows the sums see are
        fl(cᵢ·xᵢⱼ), the entries ``mechanisms.output_perturbation.bound_rows`` would
        store, so every sum, iterate and certificate is the one of that copy.
    """

    def __init__(self, X, y, *, row_bounds=None):
        self.X = X if sp.issparse(X) else np.ascontiguousarray(X)
        self.targets = np.atleast_2d(np.asarray(y, dtype=np.float64))
        self.problem = 0
        self.n, self.n_features = X.shape
        if row_bounds is None:
            self.row_scales = None
            self.counts = column_counts(self.X)
            # Read once here, so that no evaluation looks for each row's largest entry.
            self.entry_max = max_abs_entry(self.X)
            return
        l2_bound, l1_bound = (float(v) for v in row_bounds)
        data = self.X.data if sp.issparse(self.X) else None
        if data is not None and data.dtype == np.float64 and data.flags.c_contiguous:
            # Deferred: the first evaluation at w = 0 takes the statistics in its own
            # pass over the rows (csr_bounding_stats_zero_sums), else the first read
            # of them does (_stats).
            self._pending = (l2_bound, l1_bound)
            return
        if sp.issparse(self.X):
            stats = csr_bounding_stats(self.X.indptr, self.X.indices, self.X.data,
                                       self.n_features, l2_bound, l1_bound)
        else:
            stats = dense_bounding_stats(self.X, l2_bound, l1_bound)
        self._set_stats(stats)

    _pending = None

    def _set_stats(self, stats):
        self._pending = None
        self.row_scales, self.counts, entry_max = stats[:3]
        self.entry_max = float(entry_max)

    def __getattr__(self, name):
        # row_scales, counts and entry_max of deferred statistics, on first read.
        if name in ("row_scales", "counts", "entry_max") and self._pending is not None:
            X, (l2_bound, l1_bound) = self.X, self._pending
            self._set_stats(csr_bounding_stats(X.indptr, X.indices, X.data,
                                               self.n_features, l2_bound, l1_bound))
            return getattr(self, name)
        raise AttributeError(name)

    @property
    def y(self):
        return np.ascontiguousarray(self.targets[self.problem])

    def loss_gradient(self, w, b, code, param, loss_scale, grad_scale, limit):
        if self._pending is not None and not np.any(w):
            X, (l2_bound, l1_bound) = self.X, self._pending
            out = csr_bounding_stats_zero_sums(
                X.indptr, X.indices, X.data, X.data.view(np.int64), self.n_features,
                l2_bound, l1_bound, self.y, float(b), code, param, loss_scale,
                grad_scale, limit)
            self._set_stats(out)
            loss, grad, grad_b, ok, done = out[3:]
            if done:
                return int(loss), grad, int(grad_b), bool(ok)
        return partial_loss_gradient(self.X, self.y, w, b, code, param, loss_scale,
                                     grad_scale, limit, self.entry_max, self.row_scales)

    def hessian_product(self, w, b, v_w, v_b, code, param, scale, limit):
        return partial_hessian_product(self.X, self.y, w, b, v_w, v_b, code, param,
                                       scale, limit, self.entry_max, self.row_scales)


_RANGE_BITS = 61  # every sum of n terms stays below 2^61 (int64 holds 2^63)
_FLOAT_SLACK = 2.0 ** -50  # the float64 steps after the exact sums (module doc)


def _grid_bits(n, term_bound):
    """F with n·term_bound·2^F ≤ 2^61, or None if no grid fits (a bound beyond
    float64's reach)."""
    total = float(n) * float(term_bound)
    if not math.isfinite(total) or total > 2.0 ** 900:
        return None
    if total <= 2.0 ** -900:
        return 960
    return min(960, _RANGE_BITS - math.frexp(total)[1])


def _term_grids(n, code, param, theta_norm, feature_l2, row_bound, label_bound):
    """(F_loss, F_grad, Λ_ρ): the grid bits of the loss and gradient terms at a θ of
    norm ``theta_norm``, and the bound Λ_ρ on |ℓ'| there (|ℓ| and |ℓ'| at the corners
    z = ±ρ, y = ±B, :class:`FixedPointObjective`, in one compiled call). Public
    numbers and ‖θ‖ only; the F are None where no grid fits."""
    rho = theta_norm * feature_l2 * (1.0 + 1e-9)
    loss_max, der_max = corner_extremes(code, param, rho, label_bound)
    return (_grid_bits(n, loss_max), _grid_bits(n, der_max * max(1.0, row_bound)),
            float(der_max))


class FixedPointObjective:
    """F(θ) = (1/n)Σᵢ ℓ(⟨θ, x̄ᵢ⟩, yᵢ) + (λ/2)‖θ‖², its gradient and Hessian-vector
    products, from exact integer sums of per-row terms (the oracle of
    :func:`solve_certified`).

    Every evaluation rounds each row's terms (ℓᵢ, ℓ'ᵢxᵢⱼ, ℓ'ᵢ; for a Hessian-vector
    product ℓ''ᵢ⟨v, x̄ᵢ⟩xᵢⱼ) to a grid 2^-F and adds them as int64. F is the largest
    with n·T·2^F ≤ 2^61, T a bound on every term at this θ, computed from public
    numbers and θ alone: |zᵢ| ≤ ρ := ‖θ‖₂·√(R² + c²) (Cauchy-Schwarz, rows scaled to
    ‖x‖₂ ≤ R), |yᵢ| ≤ B, |xᵢⱼ| ≤ R, so |ℓ'ᵢxᵢⱼ| ≤ max(1, R)·max |ℓ'(±ρ, ±B)| (each loss
    here is monotone in |z − y| or in −yz, so its extremes are at the corners) and
    likewise for ℓ and ℓ''. A term beyond its bound (rounding at the last ulp) makes
    the kernel refuse the grid and the evaluation retries on a coarser one, so the
    sums never wrap. The sums are therefore **the same integers for every chunking,
    merge order and number of workers** (the rows ``rows`` hands over: one in-memory
    matrix, or the chunks of a cluster, :mod:`skdpsparse.distributed`), and so are
    the iterates, the certificate and the released minimizer.

    Error of the gradient, which the certificate adds to the residual: each term is
    off by at most 2^(-F-1), so coordinate j of the mean gradient by at most
    kⱼ·2^(-F-1)/n (kⱼ the entries of column j), the intercept's by c·2^(-F-1); the
    steps after the sums (int64 to float64, division by n, the factor c, adding λθ)
    are correctly rounded float64 operations, at most 2^-50 of |g̃ⱼ| + λ|θⱼ| together.
    Hence ‖g̃ − ∇F(θ)‖₂ ≤ 2^(-F-1)·√(Σkⱼ² + (cn)²)/n + 2^-50(‖g̃‖₂ + λ‖θ‖₂) and the
    same with Σkⱼ + cn and ℓ1 norms. What is not counted: the rounding inside one
    row's margin and loss (the same operations in the same order in every path; as
    everywhere in the library the last ulps of a per-row float computation are not
    accounted for).

    Parameters
    ----------
    rows : object
        ``n``, ``n_features``, ``counts`` (kⱼ, int64 of shape (d,)) and the methods
        ``loss_gradient(w, b, code, param, loss_scale, grad_scale, limit)`` and
        ``hessian_product(w, b, v_w, v_b, code, param, scale, limit)`` returning the
        summed :func:`partial_loss_gradient` / :func:`partial_hessian_product` of all
        rows. :class:`InMemoryRows` for one matrix.
    code, param : int, float
    alpha : float
        λ > 0.
    intercept_scaling : float
        c ≥ 0.
    row_bound : float
        R ≥ every row's ℓ2 norm.
    label_bound : float
        B ≥ every |yᵢ| (1 for ±1 labels).
    """

    def __init__(self, rows, *, code, param, alpha, intercept_scaling, row_bound,
                 label_bound):
        check_loss(code, param)
        self.rows = rows
        self.code, self.param = int(code), float(param)
        self.alpha = float(alpha)
        self.c = float(intercept_scaling)
        self.n, self.d = int(rows.n), int(rows.n_features)
        self.p = self.d + (self.c > 0)
        # A relative slack on the bounds: rows scaled to norm R can exceed it by ulps.
        self.row_bound = float(row_bound) * (1.0 + 1e-9)
        self.label_bound = float(label_bound) * (1.0 + 1e-9)
        self.feature_l2 = math.hypot(self.row_bound, self.c)
        self._count_norms = None  # from rows.counts, after the first evaluation
        self._limit = 2.0 ** 62 / self.n
        self.n_evaluations = 0

    def _column_count_norms(self):
        """√(Σkⱼ² + (cn)²)/n and (Σkⱼ + cn)/n, read once (after the first evaluation,
        which may be the pass that counts the kⱼ: :class:`InMemoryRows`)."""
        if self._count_norms is None:
            counts = np.asarray(self.rows.counts, dtype=np.float64)
            cn = self.c * self.n
            self._count_norms = (math.sqrt(float(counts @ counts) + cn * cn) / self.n,
                                 (float(counts.sum()) + cn) / self.n)
        return self._count_norms

    def _split(self, theta):
        w = np.ascontiguousarray(theta[:self.d], dtype=np.float64)
        b = self.c * float(theta[self.d]) if self.c > 0 else 0.0
        return w, b

    def fge(self, theta):
        """(F(θ), g̃, (e₂, e₁)): the objective, its computed gradient and bounds on
        ‖g̃ − ∇F(θ)‖₂ and ‖g̃ − ∇F(θ)‖₁."""
        self.n_evaluations += 1
        theta = np.asarray(theta, dtype=np.float64)
        f_loss, f_grad, _ = _term_grids(self.n, self.code, self.param,
                                        float(np.linalg.norm(theta)), self.feature_l2,
                                        self.row_bound, self.label_bound)
        w, b = self._split(theta)
        for _ in range(8):
            if f_loss is None or f_grad is None:
                break
            loss, g_w, g_b, ok = self.rows.loss_gradient(
                w, b, self.code, self.param, math.ldexp(1.0, f_loss),
                math.ldexp(1.0, f_grad), self._limit)
            if ok:
                break
            f_loss, f_grad = f_loss - 8, f_grad - 8
        else:
            ok = False
        if f_loss is None or f_grad is None or not ok:
            nan = np.full(self.p, np.nan)
            return math.inf, nan, (math.inf, math.inf)
        # ldexp(g, -F)/n (+ c * that for the intercept) + λθ, entry by entry.
        grad = scaled_gradient(g_w, np.int64(g_b), f_grad, float(self.n), self.c,
                               self.alpha, theta)
        value = math.ldexp(float(loss), -f_loss) / self.n \
            + 0.5 * self.alpha * float(theta @ theta)
        half = math.ldexp(1.0, -f_grad - 1)
        reg = self.alpha * theta
        count_l2, count_l1 = self._column_count_norms()
        e2 = half * count_l2 + _FLOAT_SLACK * (
            float(np.linalg.norm(grad)) + float(np.linalg.norm(reg)))
        e1 = half * count_l1 + _FLOAT_SLACK * (
            float(np.abs(grad).sum()) + float(np.abs(reg).sum()))
        return value, grad, (e2, e1)

    def fg(self, theta):
        """(F(θ), g̃) without the error bounds."""
        value, grad, _ = self.fge(theta)
        return value, grad

    def hvp_at(self, theta):
        """v ↦ ∇²F(θ)v from exact sums (used to choose Newton steps only: its
        rounding moves a step, never the certificate)."""
        theta = np.asarray(theta, dtype=np.float64)
        w, b = self._split(theta)
        curv_max = (1.0 / self.param if self.code == SMOOTHED_HINGE
                    else _CURVATURE_BOUND[self.code])

        def hvp(v):
            v = np.asarray(v, dtype=np.float64)
            v_w = np.ascontiguousarray(v[:self.d])
            v_b = self.c * float(v[self.d]) if self.c > 0 else 0.0
            bound = curv_max * self.feature_l2 * float(np.linalg.norm(v)) * (1.0 + 1e-9)
            bits = _grid_bits(self.n, bound * max(1.0, self.row_bound))
            out = self.alpha * v
            for _ in range(8):
                if bits is None:
                    return out
                h, h_b, ok = self.rows.hessian_product(w, b, v_w, v_b, self.code,
                                                       self.param, math.ldexp(1.0, bits),
                                                       self._limit)
                if ok:
                    break
                bits -= 8
            else:
                return out
            out[:self.d] += np.ldexp(h.astype(np.float64), -bits) / self.n
            if self.c > 0:
                out[self.d] += self.c * (math.ldexp(float(h_b), -bits) / self.n)
            return out

        return hvp


#: Unit roundoff of float64.
_UNIT = 2.0 ** -53


def descent_floor(n, n_features, *, code, param, alpha, smoothness, intercept_scaling,
                  row_bound, label_bound, reach, radius=None):
    """The distance to the minimizer that rounding alone leaves to
    :func:`projected_descent`, from public numbers: (e/M + δ)/(1 − q).

    **Privacy guarantee.** None needed: public numbers in, one public number out (no
    data enters it). What it guarantees, for every dataset of n rows bounded by
    ``row_bound`` (and |y| ≤ ``label_bound``): every iterate xₖ of
    :func:`projected_descent` over the rows' :class:`FixedPointObjective` whose norm
    is at most ``reach`` satisfies ‖xₖ₊₁ − θ*‖ ≤ q‖xₖ − θ*‖ + e/M + δ, hence
    ‖xₖ − θ*‖ ≤ qᵏ‖x₀ − θ*‖ + floor. The terms:

    * q = √((M − λ)/(M + λ)) (rounded up): the step x ↦ P(x − ∇F(x)/M) is a
      q-contraction for every λ-strongly convex F with M-Lipschitz gradient (Nesterov
      2004, "Introductory Lectures on Convex Optimization", Theorem 2.1.12 with
      t = 1/M; no second derivative needed), P being non-expansive and θ* its fixed
      point (the optimality condition over the ball).
    * e: the error of the computed gradient, the bound :class:`FixedPointObjective`
      reports with each column's count kⱼ replaced by its public maximum n
      (√(Σkⱼ² + c²n²)/n ≤ √(d + c²)), at the coarsest grid any ‖θ‖ ≤ ``reach`` uses
      (the grid is monotone in ‖θ‖), plus the float slack 2⁻⁵⁰(‖g̃‖ + λ‖θ‖) with
      ‖g̃‖ ≤ Λ·G₂ + λ·reach + e. The kernels accept that grid at the first try: a
      term exceeds its bound T only by the rounding of the row bounding (relative
      2⁻²¹ at most), and they refuse a term only beyond 2T (``limit``).
    * δ: the rounding of the update x − g̃/M (2.01u(‖x‖ + ‖g̃‖/M) in ℓ2, u = 2⁻⁵³)
      and, on a ball of radius D, of the rescaling v·D/‖v‖ ((p + 8)·u·D).

    Returns
    -------
    floor : float
        ``inf`` when no grid fits (a bound beyond float64's reach) or q rounds to 1.
    """
    # The bounds FixedPointObjective uses (the same slack on R and B).
    R = float(row_bound) * (1.0 + 1e-9)
    B = float(label_bound) * (1.0 + 1e-9)
    c = float(intercept_scaling)
    feature_l2 = math.hypot(R, c)
    p = int(n_features) + (c > 0)
    lam, M, reach = float(alpha), float(smoothness), float(reach)
    f_loss, f_grad, der_max = _term_grids(int(n), int(code), float(param), reach,
                                          feature_l2, R, B)
    q = _contraction(lam, M)
    if f_loss is None or f_grad is None or not q < 1.0 or not math.isfinite(der_max):
        return math.inf
    sums = math.ldexp(1.0, -f_grad - 1) * math.sqrt(n_features + c * c)
    grad_bound = (der_max * feature_l2 * ROW_SLACK + lam * reach + sums) * (1.0 + 1e-6)
    e = sums + _FLOAT_SLACK * (grad_bound + lam * reach)
    step = 2.01 * _UNIT * (reach + grad_bound / M)
    if radius is not None:
        step += (p + 8) * _UNIT * float(radius)
    return (e / M + step) / (1.0 - q)


def _contraction(alpha, smoothness):
    """q = √((M − λ)/(M + λ)), rounded up: the contraction factor of one projected
    gradient step of size 1/M (:func:`descent_floor`)."""
    return math.sqrt(max(smoothness - alpha, 0.0) / (smoothness + alpha)) * (1.0 + 8 * _UNIT)


#: How far a bounded row's norm may exceed R in floating point (the relative slack
#: of row bounding, ``mechanisms.output_perturbation.ROW_NORM_SLACK``, rounded up).
ROW_SLACK = 1.0 + 2.0 ** -21


def descent_iterations(start_distance, floor, target, *, alpha, smoothness):
    """k with qᵏ·``start_distance`` + ``floor`` ≤ ``target`` (q as in
    :func:`descent_floor`), at least 1: the public iteration count after which
    :func:`projected_descent` is certified within ``target`` of the minimizer.

    **Privacy guarantee.** None needed: public numbers only. Needs
    ``floor < target``; raises ``ValueError`` otherwise.
    """
    lam, M = float(alpha), float(smoothness)
    if not floor < target:
        raise ValueError(f"The descent's rounding floor {floor:.3g} is not below the "
                         f"target distance {target:.3g}.")
    q = _contraction(lam, M)
    room = target - floor
    if start_distance <= room or q == 0.0:
        return 1
    # log rounding: one more step than the real solution, and a relative 1e-12 margin.
    k = math.log(start_distance / room) / -math.log(q) * (1.0 + 1e-12)
    return max(1, int(math.ceil(k)) + 1)


def projected_descent(fge, n_params, *, radius, smoothness, iterations):
    """x₀ = 0, xₖ₊₁ = P(xₖ − g̃(xₖ)/M) for a public number of steps: the solver's
    fallback, certified by analysis (:func:`descent_floor`), not by a residual.

    **Privacy guarantee.** None by itself (the result is not private). What it
    guarantees: after ``iterations`` = :func:`descent_iterations` steps the result is
    within the target distance of the exact minimizer, whatever the data, with no
    data-dependent test that could fail; its number of passes is public.

    Returns
    -------
    theta : ndarray of shape (n_params,)
    """
    theta = np.zeros(int(n_params))
    M = float(smoothness)
    for _ in range(int(iterations)):
        _, grad, _ = fge(theta)
        theta = theta - grad / M
        if radius is not None:
            theta = _project(theta, float(radius))
    return theta


#: sup ℓ'' per loss (the smoothed hinge's is 1/h).
_CURVATURE_BOUND = {SQUARED: 1.0, HUBER: 1.0, LOGISTIC: 0.25}


def _certified(grad, err):
    """Norms of a residual plus the bounds on its error: upper bounds on the norms of
    the true residual, which the certificate needs."""
    r_l2, r_l1 = _norms(grad)
    return r_l2 + err[0], r_l1 + err[1]


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


#: L-BFGS at the rounding floor of F: this many evaluations in a row that lower the
#: best F by no more than ``_FLOOR_ULPS`` units of its last place end the run (the
#: line search then only tries steps whose values differ by rounding; at n = 10⁷ it
#: spent 110 of a fit's 138 evaluations there). Newton-CG, which reads gradients
#: only, takes over.
_FLOOR_PATIENCE = 4
_FLOOR_ULPS = 8.0


class _LbfgsDone(Exception):
    """Raised inside L-BFGS's objective: a certified point, or F at its floor."""


def _lbfgs(fge, theta0, accept, max_iter, first=None):
    """Unconstrained L-BFGS, stopped as soon as ``accept`` holds at an evaluated
    point (an iterate or a line-search trial: the certificate is a property of the
    point, not of how it was reached), or once F no longer decreases beyond its
    rounding. Returns the evaluated point with the smallest certified residual.
    ``first``: fge(theta0) already evaluated (SciPy asks for it first)."""
    best = {"r": math.inf}
    floor = {"f": math.inf, "stalled": 0}
    iterations = [0]
    pending = [] if first is None else [(np.array(theta0, dtype=np.float64), first)]

    def fun(theta):
        if pending and np.array_equal(theta, pending[0][0]):
            value, grad, err = pending.pop()[1]
        else:
            pending.clear()
            value, grad, err = fge(theta)
        r_l2, r_l1 = _certified(grad, err)
        if r_l2 < best["r"] or "x" not in best:  # the first point even if r is NaN
            best.update(r=r_l2, x=np.array(theta, dtype=np.float64), g=grad, e=err)
        if accept(r_l2, r_l1):
            best.update(r=-1.0, x=np.array(theta, dtype=np.float64), g=grad, e=err)
            raise _LbfgsDone
        # A decrease of F by more than a few units of its last place is progress a
        # line search can see; fewer, _FLOOR_PATIENCE times in a row, is the floor.
        if value < floor["f"] - _FLOOR_ULPS * math.ulp(max(abs(value), 1.0)):
            floor.update(f=value, stalled=0)
        else:
            floor["f"] = min(floor["f"], value)
            floor["stalled"] += 1
            if floor["stalled"] >= _FLOOR_PATIENCE:
                raise _LbfgsDone
        return value, grad

    def callback(intermediate_result):
        iterations[0] += 1

    # ftol = gtol = 0: SciPy's own tests never stop the run; ours (in fun) do, or the
    # line search gives up at the floating-point floor.
    try:
        minimize(fun, theta0, jac=True, method="L-BFGS-B", callback=callback,
                 options={"maxiter": max_iter, "ftol": 0.0, "gtol": 0.0, "maxcor": 10})
    except _LbfgsDone:
        pass
    return best["x"], best["g"], best["e"], iterations[0]


def _project(v, radius):
    norm = float(np.linalg.norm(v))
    return v * (radius / norm) if norm > radius else v


def _accelerated_projected_gradient(fge, theta0, radius, alpha, smoothness, accept,
                                    max_iter):
    """min F over the ball by Nesterov's method for λ-strongly convex F.

    ``smoothness`` is a proven bound M on the Lipschitz constant of ∇F; the local
    estimate starts at M/64, halves its distance to what the data need by backtracking
    (doubling on a failed sufficient-decrease test) and decays by 0.9 per step.
    """
    x = _project(np.array(theta0, dtype=np.float64), radius)
    fx, gx, ex = fge(x)
    y, fy, gy = x, fx, gx
    step_l = max(smoothness / 64.0, alpha)
    for it in range(1, max_iter + 1):
        while True:
            x_new = _project(y - gy / step_l, radius)
            f_new, g_new, e_new = fge(x_new)
            diff = x_new - y
            if f_new <= fy + float(gy @ diff) + 0.5 * step_l * float(diff @ diff) \
                    + 1e-15 * abs(fy) or step_l >= smoothness:
                break
            step_l = min(2.0 * step_l, smoothness)
        if accept(*_certified(ball_residual(x_new, g_new, radius), e_new)):
            return x_new, g_new, e_new, it
        q = alpha / step_l
        momentum = (1.0 - math.sqrt(q)) / (1.0 + math.sqrt(q))
        if f_new > fx:  # restart: the momentum overshot
            y, fy, gy = x_new, f_new, g_new
        else:
            y = x_new + momentum * (x_new - x)
            fy, gy, _ = fge(y)
        x, fx, gx, ex = x_new, f_new, g_new, e_new
        step_l = max(0.9 * step_l, alpha)
    return x, gx, ex, max_iter


def solve_regularized_erm(X, y, *, code, param, alpha, intercept_scaling, radius,
                          smoothness, accept, max_iter=1000, theta0=None, row_bound=None,
                          label_bound=None):
    """Minimize the regularized ERM objective until ``accept`` certifies the result.

    :func:`solve_certified` on the :class:`FixedPointObjective` of the in-memory rows
    (:class:`InMemoryRows`): the driver a distributed fit runs too, with its rows on a
    cluster.

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
        ``accept(r_l2, r_l1) -> bool`` on upper bounds of the ℓ2 and ℓ1 norms of the
        residual of :func:`ball_residual` (the computed residual's norms plus the
        bounds on its error, :class:`FixedPointObjective`). Must be data-independent
        for the result to be private.
    max_iter : int, default=1000
        Iterations of L-BFGS and of the ball solver (restarted up to twice); the
        Newton polish adds at most 30.
    theta0 : ndarray of shape (p,), optional
        Starting point (default 0).
    row_bound, label_bound : float, optional
        R ≥ every row's ℓ2 norm and B ≥ every |yᵢ| (they size the grid of the exact
        sums); default: read from the data.

    Returns
    -------
    theta : ndarray of shape (p,)
    info : dict
        ``n_iter``, ``residual_l2``, ``residual_l1`` (bounds on the residual of the
        returned point).

    Raises
    ------
    RuntimeError
        If no iterate passes ``accept`` (a tolerance below what float64 can certify,
        or too small a ``max_iter``).
    """
    if code == 2:  # HINGE: no gradient to certify with
        raise ValueError("solve_regularized_erm needs a differentiable loss.")
    rows = InMemoryRows(X, y)
    if row_bound is None:
        row_bound = _max_row_norm(rows.X)
    if label_bound is None:
        label_bound = float(np.max(np.abs(rows.targets), initial=0.0))
    objective = FixedPointObjective(rows, code=code, param=param, alpha=alpha,
                                    intercept_scaling=intercept_scaling,
                                    row_bound=row_bound, label_bound=label_bound)
    return solve_certified(objective, radius=radius, smoothness=smoothness,
                           accept=accept, max_iter=max_iter, theta0=theta0)


def _max_row_norm(X):
    if sp.issparse(X):
        return float(np.sqrt(np.max(np.asarray(X.multiply(X).sum(axis=1)), initial=0.0)))
    return float(np.max(np.linalg.norm(X, axis=1), initial=0.0))


def solve_certified(objective, *, radius, smoothness, accept, max_iter=1000,
                    theta0=None, fallback_iterations=None):
    """The certified solver over an objective oracle (in memory or distributed).

    Parameters
    ----------
    objective : FixedPointObjective
        ``fge(θ) -> (F, g̃, (e₂, e₁))``, ``hvp_at(θ)``, ``p`` and ``alpha``.
    radius, smoothness, accept, max_iter, theta0
        As in :func:`solve_regularized_erm`.
    fallback_iterations : int, optional
        If given, a public iteration count of :func:`projected_descent` certified by
        analysis (:func:`descent_iterations`) to land as close to the minimizer as
        ``accept`` asks: when the adaptive solvers end without a certificate (or
        fail in floating point), that descent runs instead of raising, so whether a
        fit completes never depends on the data. Without it, such a solve raises
        ``RuntimeError``.

    Returns
    -------
    theta, info
        As in :func:`solve_regularized_erm`; ``info["certified_by"]`` is
        ``"residual"`` or ``"analysis"`` (the fallback, whose residuals are NaN).
    """
    if fallback_iterations is not None and not (
            isinstance(fallback_iterations, (int, np.integer)) and fallback_iterations >= 1):
        # 0 steps would release the start, 0, as if certified.
        raise ValueError(f"fallback_iterations must be None or an int >= 1 (from "
                         f"descent_iterations), got {fallback_iterations!r}.")
    # Warnings and floating-point errors inside the adaptive solvers depend on the
    # data: none may reach the caller (the fallback decides instead).
    with _one_blas_thread(), np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _solve(objective, radius, smoothness, accept, max_iter, theta0)
        except _ADAPTIVE_FAILURES:
            if fallback_iterations is None:
                raise
        theta = projected_descent(objective.fge, objective.p, radius=radius,
                                  smoothness=smoothness, iterations=fallback_iterations)
        return theta, {"n_iter": int(fallback_iterations), "residual_l2": math.nan,
                       "residual_l1": math.nan, "certified_by": "analysis"}


class _NotCertified(RuntimeError):
    pass


#: What ends the adaptive solvers without a certificate: their own give-up, and the
#: arithmetic or SciPy errors a degenerate scale can cause.
_ADAPTIVE_FAILURES = (_NotCertified, ArithmeticError, ValueError, np.linalg.LinAlgError)


def _solve(objective, radius, smoothness, accept, max_iter, theta0):
    fge, hvp_at, alpha = objective.fge, objective.hvp_at, objective.alpha
    theta = np.zeros(objective.p) if theta0 is None else np.array(theta0, dtype=np.float64)
    value, grad, err = fge(theta)
    if (radius is None or np.linalg.norm(theta) <= radius) and \
            accept(*_certified(grad, err)):
        # The start is certified (a degenerate scale where λ dominates): L-BFGS's
        # first step, of unit length, would only leave it.
        r_l2, r_l1 = _certified(grad, err)
        return theta, {"n_iter": 0, "residual_l2": r_l2, "residual_l1": r_l1,
                       "certified_by": "residual"}
    theta, grad, err, n_iter = _lbfgs(fge, theta, accept, max_iter,
                                      first=(value, grad.copy(), err))
    inside = radius is None or np.linalg.norm(theta) <= radius
    if inside and not accept(*_certified(grad, err)):
        theta, grad, err, it = _newton_polish(fge, hvp_at, theta, accept)
        n_iter += it
        inside = radius is None or np.linalg.norm(theta) <= radius
    if inside and accept(*_certified(grad, err)):
        r_l2, r_l1 = _certified(grad, err)
        return theta, {"n_iter": n_iter, "residual_l2": r_l2, "residual_l1": r_l1,
                       "certified_by": "residual"}
    if radius is not None and np.linalg.norm(theta) > radius:
        for _ in range(3):
            theta, grad, err, it = _accelerated_projected_gradient(
                fge, theta, radius, alpha, smoothness, accept, max_iter)
            n_iter += it
            r_l2, r_l1 = _certified(ball_residual(theta, grad, radius), err)
            if accept(r_l2, r_l1):
                return theta, {"n_iter": n_iter, "residual_l2": r_l2, "residual_l1": r_l1,
                               "certified_by": "residual"}
    raise _NotCertified(
        "The regularized ERM solver did not reach the certified accuracy the noise is "
        f"calibrated for after {n_iter} iterations; increase max_iter or tol (the "
        "relative slack of the sensitivity)."
    )
