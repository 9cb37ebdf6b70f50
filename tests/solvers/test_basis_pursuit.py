"""Basis pursuit on the SRHT operator: exactness against an LP solver, recovery."""

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from skdpsparse._solvers.basis_pursuit import basis_pursuit
from skdpsparse.mechanisms.sensing import SubsampledHadamardSensing


def lp_basis_pursuit(A, b):
    """min ‖z‖₁ s.t. Az = b as an LP in z = u − v, u, v ≥ 0 (HiGHS)."""
    m, d = A.shape
    res = linprog(np.ones(2 * d), A_eq=np.hstack([A, -A]), b_eq=b, bounds=(0, None),
                  method="highs", options={"primal_feasibility_tolerance": 1e-10,
                                           "dual_feasibility_tolerance": 1e-10})
    assert res.status == 0
    return res.x[:d] - res.x[d:], res.fun


def sparse_signal(d, s, rng):
    z = np.zeros(d)
    z[rng.choice(d, s, replace=False)] = rng.standard_normal(s)
    return z


def check_certificate(op, b, z, info, radius=0.0, tol=1e-6):
    """The returned dual point proves near-optimality by weak duality."""
    nu = info["dual_point"]
    assert np.abs(op.rmatvec(nu)).max() <= 1 + 1e-9
    lower = float(b @ nu) - radius * float(np.linalg.norm(nu))
    assert lower <= np.abs(z).sum() * (1 + tol) + 1e-12
    assert np.abs(z).sum() - lower <= tol * np.abs(z).sum() + 1e-12


@pytest.mark.parametrize("d,s,noise", [(128, 3, 0.0), (256, 5, 0.0), (512, 8, 0.0),
                                       (200, 4, 0.05), (512, 8, 0.05), (300, 8, 0.0)])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_linprog(d, s, noise, seed):
    rng = np.random.default_rng(seed)
    m = d // 4
    op = SubsampledHadamardSensing(d, m, rng)
    A = op.toarray()
    b = A @ sparse_signal(d, s, rng)
    b += noise * np.linalg.norm(b) / math.sqrt(m) * rng.standard_normal(m)
    z_lp, obj_lp = lp_basis_pursuit(A, b)
    z, info = basis_pursuit(op, b, tol=1e-9, max_iter=30_000)
    assert info["converged"], info
    assert info["residual"] <= 1e-9 and info["gap"] <= 1e-9
    # Stated tolerances: objective to 1e-7 relative; feasibility to 1e-9 relative.
    assert np.abs(z).sum() == pytest.approx(obj_lp, rel=1e-7)
    assert np.linalg.norm(A @ z - b) <= 1e-9 * np.linalg.norm(b)
    if noise == 0.0:
        # Noiseless s-sparse data: the optimum is unique (it is the signal), so the
        # solutions agree too, to 1e-6 relative. With noise the optimal vertex need
        # not be unique for a ±1 matrix (measured: 52 optimal columns of rank 50 for
        # one of these seeds), so only the objective is compared.
        assert np.linalg.norm(z - z_lp) <= 1e-6 * np.linalg.norm(z_lp)
    assert info["objective"] == pytest.approx(np.abs(z).sum(), rel=1e-12)
    assert info["nnz"] == np.count_nonzero(z)
    check_certificate(op, b, z, info, tol=1e-8)


@pytest.mark.parametrize("seed", range(4))
def test_exact_recovery_of_sparse_vectors(seed):
    d, s = 1 << 12, 10
    m = int(4 * s * math.log(d))  # 332
    rng = np.random.default_rng(seed)
    op = SubsampledHadamardSensing(d, m, rng)
    z0 = sparse_signal(d, s, rng)
    z, info = basis_pursuit(op, op.matvec(z0), tol=1e-10)
    assert info["converged"]
    assert np.linalg.norm(z - z0) <= 1e-8 * np.linalg.norm(z0)
    assert np.array_equal(np.flatnonzero(z), np.flatnonzero(z0))
    assert info["n_iter"] <= 200


@pytest.mark.parametrize("radius_factor", [0.0, 1.0])
def test_stable_recovery_error_is_proportional_to_noise(radius_factor):
    d, s = 1 << 12, 10
    m = int(4 * s * math.log(d))
    ratios = []
    for seed in range(2):
        rng = np.random.default_rng(100 + seed)
        op = SubsampledHadamardSensing(d, m, rng)
        z0 = sparse_signal(d, s, rng)
        b0 = op.matvec(z0)
        direction = rng.standard_normal(m)
        direction /= np.linalg.norm(direction)
        for level in [1e-3, 1e-2, 1e-1]:
            e = level * np.linalg.norm(b0) * direction
            # With radius 0 the exact solution interpolates the noise and converges
            # slowly; its error settles long before (measured): 600 evaluations.
            z, info = basis_pursuit(op, b0 + e, radius=radius_factor * np.linalg.norm(e),
                                    tol=1e-6, max_iter=600)
            ratios.append(np.linalg.norm(z - z0) / np.linalg.norm(e))
    ratios = np.array(ratios)
    # ‖z − z0‖ ≤ C‖e‖ with a moderate C at every noise level (Candès 2008 for the
    # denoising form; measured for equality-constrained BP, which fits the noise).
    assert ratios.max() <= 3.0
    assert ratios.min() >= 0.05  # and the error really scales with the noise
    assert ratios.max() / ratios.min() <= 10.0


def test_denoising_form_matches_its_certificate_and_is_sparser():
    rng = np.random.default_rng(7)
    d, s, m = 4096, 8, 300
    op = SubsampledHadamardSensing(d, m, rng)
    z0 = sparse_signal(d, s, rng)
    b0 = op.matvec(z0)
    e = 0.05 * np.linalg.norm(b0) / math.sqrt(m) * rng.standard_normal(m)
    eta = float(np.linalg.norm(e))
    z, info = basis_pursuit(op, b0 + e, radius=eta, tol=1e-8, max_iter=5000)
    assert info["converged"]
    assert np.linalg.norm(op.matvec(z) - b0 - e) <= eta * (1 + 1e-6)
    check_certificate(op, b0 + e, z, info, radius=eta, tol=1e-7)
    z_bp, _ = basis_pursuit(op, b0 + e, tol=1e-6, max_iter=5000)
    assert np.count_nonzero(z) < np.count_nonzero(z_bp)
    assert np.linalg.norm(z - z0) < np.linalg.norm(z_bp - z0)


def test_padded_coordinates_are_never_used():
    """d = 300 pads to 512; b is measured from a vector living on padded columns only,
    which A (the first d columns) cannot see: the answer must be the LP over the
    first d columns, of length d."""
    rng = np.random.default_rng(3)
    d, m = 300, 64
    op = SubsampledHadamardSensing(d, m, rng)
    v = np.zeros(op.d_pad)
    v[d:d + 5] = rng.standard_normal(5)
    b = op.matvec_padded(v)
    # A sparse explanation exists on the padded columns (5 nonzeros), but not in A.
    z, info = basis_pursuit(op, b, tol=1e-9, max_iter=30_000)
    assert z.shape == (d,)
    z_lp, obj_lp = lp_basis_pursuit(op.toarray(), b)
    assert info["converged"]
    assert np.abs(z).sum() == pytest.approx(obj_lp, rel=1e-7)
    assert np.linalg.norm(op.matvec(z) - b) <= 1e-8 * np.linalg.norm(b)
    assert np.abs(z).sum() > np.abs(v).sum()


def test_scale_invariance():
    rng = np.random.default_rng(4)
    op = SubsampledHadamardSensing(2048, 200, rng)
    b = op.matvec(sparse_signal(2048, 6, rng)) + 0.01 * rng.standard_normal(200)
    z1, i1 = basis_pursuit(op, b, tol=1e-8, max_iter=1000)
    # Powers of two scale every floating-point operation exactly: same iterates.
    for c in [2.0**-20, 2.0**14]:
        zc, ic = basis_pursuit(op, c * b, tol=1e-8, max_iter=1000)
        assert ic["n_iter"] == i1["n_iter"]
        assert np.array_equal(zc / c, z1)
    # Other scales agree to rounding on a problem that converges.
    b0 = op.matvec(sparse_signal(2048, 6, rng))
    z0, i0 = basis_pursuit(op, b0, tol=1e-10)
    zc, ic = basis_pursuit(op, 3e-7 * b0, tol=1e-10)
    assert i0["converged"] and ic["converged"]
    np.testing.assert_allclose(zc / 3e-7, z0, rtol=1e-8, atol=1e-12)


class _ExplicitOperator:
    """A generic operator: only the minimal protocol (no fused or sparse paths)."""

    def __init__(self, A):
        self.A = A
        self.n_measurements, self.n_features = A.shape

    def matvec(self, z):
        return self.A @ z

    def rmatvec(self, y):
        return self.A.T @ y


def test_generic_operator_protocol_gives_the_same_answer():
    rng = np.random.default_rng(5)
    op = SubsampledHadamardSensing(500, 100, rng)
    b = op.matvec(sparse_signal(500, 7, rng))
    z_fast, i_fast = basis_pursuit(op, b, tol=1e-9, max_iter=5000)
    z_gen, i_gen = basis_pursuit(_ExplicitOperator(op.toarray()), b, tol=1e-9,
                                 max_iter=5000)
    assert i_fast["converged"] and i_gen["converged"]
    np.testing.assert_allclose(z_gen, z_fast, atol=1e-8 * np.abs(z_fast).max())
    # A Gaussian matrix (not a tight frame) works too: the method does not need one.
    A = rng.standard_normal((60, 400)) / math.sqrt(60)
    z0 = sparse_signal(400, 4, rng)
    z, info = basis_pursuit(_ExplicitOperator(A), A @ z0, tol=1e-9, max_iter=5000)
    assert info["converged"] and np.linalg.norm(z - z0) <= 1e-6 * np.linalg.norm(z0)


def test_trivial_inputs():
    op = SubsampledHadamardSensing(100, 10, np.random.default_rng(0))
    z, info = basis_pursuit(op, np.zeros(10))
    assert info["converged"] and not z.any() and z.shape == (100,)
    b = np.random.default_rng(1).standard_normal(10)
    z, info = basis_pursuit(op, b, radius=2 * np.linalg.norm(b))
    assert info["converged"] and not z.any()


def test_budget_callback_and_reproducibility():
    rng = np.random.default_rng(6)
    op = SubsampledHadamardSensing(4096, 256, rng)
    b = op.matvec(sparse_signal(4096, 10, rng)) + 0.05 * rng.standard_normal(256)
    z, info = basis_pursuit(op, b, max_iter=40, tol=1e-12)
    assert not info["converged"] and info["n_iter"] <= 40
    z2, info2 = basis_pursuit(op, b, max_iter=40, tol=1e-12)
    assert np.array_equal(z, z2)
    seen = []

    def stop_at_five(k, zk, inf):
        seen.append((k, inf["n_iter"], np.count_nonzero(zk) == inf["nnz"]))
        return k == 4

    basis_pursuit(op, b, callback=stop_at_five)
    assert [k for k, _, _ in seen] == list(range(5)) and all(ok for _, _, ok in seen)


@pytest.mark.parametrize("kwargs", [dict(radius=-1.0), dict(radius=np.inf),
                                    dict(max_iter=0), dict(max_iter=2.5),
                                    dict(tol=-1.0), dict(step="fast"), dict(step=0.0)])
def test_validation(kwargs):
    op = SubsampledHadamardSensing(64, 8, np.random.default_rng(0))
    with pytest.raises(ValueError):
        basis_pursuit(op, np.ones(8), **kwargs)


def test_rejects_bad_b():
    op = SubsampledHadamardSensing(64, 8, np.random.default_rng(0))
    with pytest.raises(ValueError):
        basis_pursuit(op, np.ones(7))
    with pytest.raises(ValueError):
        basis_pursuit(op, np.array([np.nan] + [1.0] * 7))
