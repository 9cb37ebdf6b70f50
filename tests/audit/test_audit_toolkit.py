"""The auditing toolkit itself: Clopper–Pearson bounds, the ε lower bound, the held-out
threshold, the claims read from budgets, the broken variants (passed as values, never
patched in), the calibration cache, and the package's import graph."""

import ast
import math
import pathlib
import sys

import numpy as np
import pytest
from scipy import stats

from skdpsparse import audit as A
from skdpsparse.accounting import ZCDP, ApproxDP, PureDP, gaussian_delta
from skdpsparse.audit.variants import (
    CORRECT, HALF_NOISE, RAW_MARGIN, WIDE_BOUNDS, ScaledNoiseSource, matching_epsilon,
    replanned_epsilon)
from skdpsparse.linear_model import _cyclic_sgd
from skdpsparse.mechanisms import cyclic_sgd as cs
from skdpsparse.mechanisms import projection


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (17, 500), (0, 1)])
def test_clopper_pearson_matches_scipy_exact_interval(k, n):
    lo, hi = A.clopper_pearson(k, n, 0.95)
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    assert lo == pytest.approx(ci.low, abs=1e-12)
    assert hi == pytest.approx(ci.high, abs=1e-12)
    # Closed forms at the edges: upper end for k = 0 is 1 - (α/2)^(1/n).
    if k == 0:
        assert hi == pytest.approx(1 - 0.025 ** (1 / n))


def test_epsilon_lower_bound_formula():
    fp, fn, n = 2, 40, 1000
    fpr = A.clopper_pearson(fp, n)[1]
    fnr = A.clopper_pearson(fn, n)[1]
    delta = 1e-3
    expected = max(math.log((1 - delta - fpr) / fnr), math.log((1 - delta - fnr) / fpr))
    assert A.epsilon_lower_bound(fp, n, fn, n, delta) == pytest.approx(expected)
    # Vectorised, never negative, decreasing in δ, zero for a useless test.
    eps = A.epsilon_lower_bound(np.array([2, 500]), n, np.array([40, 500]), n)
    assert eps.shape == (2,) and eps[1] == 0.0
    assert A.epsilon_lower_bound(fp, n, fn, n, 0.1) < A.epsilon_lower_bound(fp, n, fn, n)


def test_perfect_separation_is_bounded_by_the_number_of_runs():
    # No error at all in n runs: ε_lb = log((1 - ub(0, n)) / ub(0, n)), about log(n/3.7).
    n = 1000
    ub = 1 - 0.025 ** (1 / n)
    assert A.epsilon_lower_bound(0, n, 0, n) == pytest.approx(math.log((1 - ub) / ub))


def test_threshold_is_chosen_on_the_first_half_only():
    # First halves perfectly separated, second halves identical in law: a bound that
    # reused the selection runs would be large; the held-out one is ~0.
    rng = np.random.default_rng(0)
    s0 = np.concatenate([np.zeros(500), rng.standard_normal(500)])
    s1 = np.concatenate([np.ones(500), rng.standard_normal(500)])
    res = A.audit_scores(s0, s1, claimed_epsilon=1.0)
    assert res.threshold == 0.0 and res.greater
    assert res.epsilon_lb < 0.3 and not res.violated


@pytest.mark.parametrize("eps", [1.0, 3.0])
def test_laplace_scores_give_a_sound_and_informative_bound(eps):
    rng = np.random.default_rng(1)
    s0 = rng.laplace(0.0, 1.0, 4000)
    s1 = rng.laplace(eps, 1.0, 4000)
    res = A.audit_scores(s0, s1, claimed_epsilon=eps)
    assert 0.6 * eps < res.epsilon_lb <= eps
    # Both directions are searched: mirrored scores give the same bound.
    assert A.audit_scores(-s0, -s1).epsilon_lb == pytest.approx(res.epsilon_lb)


def test_claims_read_from_budgets():
    assert A.claimed_epsilons(PureDP(2.0), (0.0, 0.2)) == [(0.0, 2.0)]
    rho = 0.5
    claims = A.claimed_epsilons(ZCDP(rho), (1e-5, 0.2))
    assert [d for d, _ in claims] == [1e-5, 0.2]
    assert claims[0][1] == pytest.approx(ZCDP(rho).to_approx_dp(1e-5).epsilon)
    assert claims[1][1] < claims[0][1]
    # Analytic Gaussian: the budget's own point, and the exact curve elsewhere.
    sigma, sens = 0.7, 1.0
    claims = A.claimed_epsilons(ApproxDP(3.0, 1e-5), (1e-5, 0.2), gaussian=(sigma, sens))
    assert claims[0] == (1e-5, 3.0)
    assert gaussian_delta(sigma, sens, claims[1][1]) == pytest.approx(0.2, rel=1e-6)
    # An accountant's own statement at another δ (same noise), e.g. an RDP conversion.
    assert A.claimed_epsilons(ApproxDP(3.0, 1e-5), (1e-5, 0.01),
                              epsilon_at=lambda d: 7.0 * d) == [(1e-5, 3.0), (0.01, 0.07)]


def _release(rng, X=np.eye(4), norm_bound=1.0, epsilon=2.0):
    return projection.projection_mechanism(
        projection.bounded_mean(X, norm_bound, 1), 4, epsilon=epsilon, delta=1e-5,
        norm_bound=1.0, sparsity=1, rng=rng, project=False)[0]


def test_scaled_noise_source_halves_the_noise_and_nothing_else():
    """The same key through the full and the halved source: the integer noise is drawn
    from N/2 instead of N; over many releases the deviations' spread halves, and the
    statistic (the mean of the identity rows, 1/4) is untouched."""
    X = np.eye(4)
    full, half = [], []
    for seed in range(300):
        full.append(_release(np.random.default_rng(seed)) - 0.25)
        half.append(_release(HALF_NOISE.source(np.random.default_rng(seed))) - 0.25)
    ratio = np.std(half) / np.std(full)
    assert 0.45 < ratio < 0.55
    assert CORRECT.source(np.random.default_rng(0)).__class__ is not ScaledNoiseSource
    # Children spawned from a scaled source are scaled too (the bias-reduced oracle
    # spawns one source per mean).
    children = ScaledNoiseSource(bytes(32), 0.5).spawn(3)
    assert all(isinstance(c, ScaledNoiseSource) and c.factor == 0.5 for c in children)
    np.testing.assert_array_equal(_release(np.random.default_rng(1), X), _release(
        np.random.default_rng(1), X))


def test_scaled_noise_source_draws_half_the_integer_scale():
    plain = A.Variant("x").source(np.random.default_rng(0))
    half = HALF_NOISE.source(np.random.default_rng(0))
    assert half._scaled(1_000_001) == 500_000 and half._scaled(1) == 1
    a = plain.discrete_noise(20_000, "gaussian", 1000)
    b = half.discrete_noise(20_000, "gaussian", 1000)
    assert np.std(b) / np.std(a) == pytest.approx(0.5, rel=0.03)


def test_replanned_epsilon_keeps_the_noise_with_wider_bounds():
    def noise_at(eps, k):  # Laplace: b = 2kL/(nε)
        return 2.0 * k / (50 * eps)

    assert replanned_epsilon(CORRECT, noise_at, 2.0) == 2.0
    assert replanned_epsilon(WIDE_BOUNDS, noise_at, 2.0) == pytest.approx(20.0, rel=1e-9)
    assert replanned_epsilon(HALF_NOISE, noise_at, 2.0) == pytest.approx(4.0, rel=1e-9)
    assert replanned_epsilon(HALF_NOISE, noise_at, 2.0, with_noise=False) == 2.0
    assert WIDE_BOUNDS.pure_epsilon(2.0) == 20.0 and HALF_NOISE.rho(0.5) == 2.0
    # A Gaussian calibration (not linear in 1/ε): solved, not scaled.
    sigma = projection.mean_noise(50, epsilon=3.0, delta=1e-5, norm_bound=1.0, sparsity=1)[1]

    def gaussian(eps, k):
        return projection.mean_noise(50, epsilon=eps, delta=1e-5, norm_bound=k,
                                     sparsity=1)[1]

    eps = matching_epsilon(lambda e: gaussian(e, 10.0), sigma, 3.0)
    assert gaussian(eps, 10.0) == pytest.approx(sigma, rel=1e-9) and eps > 10 * 3.0


def test_raw_margin_variant_puts_nan_in_the_release():
    """The noisy-SGD step in the pre-issue-17 order: on the extreme row 1.7e308 the
    margin or ℓ'·x overflows and NaN reaches the release when a fresh step follows;
    on ordinary rows it is the ordinary algorithm (finite)."""
    run = RAW_MARGIN.replaced("noisy_sgd", None)
    X = np.array([[0.3], [1.7e308], [-0.2], [0.1]])
    kw = dict(loss_derivative=lambda z, y: z - y, noise_std=0.5, step_size=1.0, radius=10.0,
              norm_bound=1.0)
    # Target 2: |ℓ'| = |margin − 2| > 1.06 overflows ℓ'·x; NaN is released when the
    # extreme row is the first of the two fresh steps (probability 1/4).
    outs = [run(X, np.full(4, 2.0), rng=np.random.default_rng(s), **kw)[0]
            for s in range(200)]
    assert 0.15 < np.mean(np.isnan(outs)) < 0.35
    ordinary = [run(X[[0, 2, 3, 0]], np.full(4, 2.0), rng=np.random.default_rng(s), **kw)[0]
                for s in range(50)]
    assert np.all(np.isfinite(ordinary))
    assert CORRECT.replaced("noisy_sgd", None) is None


def test_variants_rebind_nothing():
    """Running a case under every broken variant leaves every module-level name of the
    package bound as before (the variants are values passed to the mechanism)."""
    def snapshot():
        return {(name, attr): id(value) for name, module in list(sys.modules.items())
                if module is not None and name.startswith("skdpsparse")
                for attr, value in list(vars(module).items())}

    case = A.CATALOGUE["sparse_mean_estimator"].build()
    before = snapshot()
    seen = []

    def spy(data, rng, variant):
        seen.append(snapshot() == before)
        return case.mechanism(data, rng, variant)

    spied = A.Case(case.name, spy, case.data, case.claims, case.detect)
    for variant in ("correct", "noise/2", "bound x10"):
        A.audit(lambda data, rng: spied.mechanism(data, rng, A.VARIANTS[variant]),
                *case.data, claims=case.claims, n_runs=2)
    assert all(seen) and len(seen) == 12


def test_calibration_cache_leaves_linear_models_bit_identical():
    from skdpsparse.linear_model import (
        DPCyclicSGD,
        DPNoisySGDRegressor,
        DPOutputPerturbationRegressor,
    )

    X = np.random.default_rng(0).uniform(-1, 1, (30, 3))
    y = X @ np.array([1.0, -1.0, 0.5])
    estimators = [
        DPCyclicSGD("squared", epsilon=2.0, delta=1e-5, batch_size=10, random_state=3),
        DPNoisySGDRegressor(epsilon=2.0, delta=1e-5, noise_calibration="rdp", random_state=3),
        DPOutputPerturbationRegressor(epsilon=2.0, delta=1e-5, random_state=3),
    ]
    plain = [est.fit(X, y).coef_.copy() for est in estimators]
    original = cs.plan_cyclic_sgd
    with A.memoized_calibration():
        assert _cyclic_sgd.plan_cyclic_sgd is not original
        for _ in range(2):  # the second round hits the cache
            for est, coef in zip(estimators, plain):
                np.testing.assert_array_equal(est.fit(X, y).coef_, coef)
    assert _cyclic_sgd.plan_cyclic_sgd is original


def _imported_modules(path, package):
    """Absolute names a source file imports (every import, also inside functions);
    ``package`` is the package that relative imports start from."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            # ``from . import means`` imports the submodule means.
            out.update([target, *(f"{target}.{alias.name}" for alias in node.names)])
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def audit_import_graph():
    """``{module: audit modules it imports}`` for every module of skdpsparse.audit."""
    root = pathlib.Path(A.__file__).parent
    files = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            name = ".".join(parts[:-1])
            files[name] = (path, name)
        else:
            name = ".".join(parts)
            files[name] = (path, ".".join(parts[:-1]))
    return {name: {m for m in _imported_modules(path, package) if m in files and m != name}
            for name, (path, package) in files.items()}


def test_audit_package_has_no_import_cycle():
    graph = audit_import_graph()
    assert "skdpsparse.audit.statistics" in graph and len(graph) >= 10
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    # The layers: statistics imports no other audit module; the variants not the cases.
    assert graph["skdpsparse.audit.statistics"] == set()
    assert not any(m.startswith("skdpsparse.audit.case") for m in
                   graph["skdpsparse.audit.variants"])
