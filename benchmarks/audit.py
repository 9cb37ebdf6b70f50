"""Privacy audit of every mechanism and estimator at full size.

Runs the catalogue of :mod:`skdpsparse.audit` (hard neighbouring pairs, threshold
attack chosen on half the runs, 95 % Clopper–Pearson lower bound on ε from the other
half; Jagielski et al. 2020, Nasr et al. 2021) on the mechanism as shipped and on two
broken variants — noise scale halved, and contribution bounding at 10× the bound the
noise assumes — and prints, per mechanism and audited δ: the claimed ε, the audited
lower bounds, and the runs used. ``tests/audit`` runs the same audits at CI size
(``--quick`` reproduces them). Last, Mironov's floating-point attack on single
releases of the pure-DP sparse mean, against the exact samplers and against the float
noise of :func:`skdpsparse.audit.float_noise` (a broken variant it must break).

Full size uses more runs and smaller claimed ε than CI: ε = 1 for the pure-DP
mechanisms and ε = 4 (δ = 1e-5) for the Gaussian ones, which are also audited at the
δ = 0.2 point of the curve their guarantee implies (the exact Gaussian curve of an
analytic calibration, the ρ-zCDP conversion, or the estimator's own RDP conversion),
where a factor 2 in the noise shows; noisy SGD, whose record is used in a fraction
≈ 1/n of the runs, at δ = 0.01 of its accountant. Every variant is run at full size,
including those no audit is expected to refute (the halved noise of noisy SGD and of
the sparse exponential mechanism: see their cases), for the record. The iterative
and ERM estimators also run on larger data (:data:`FULL_SIZE`); noisy SGD and the
sparse exponential mechanism keep their CI data, whose small size is what makes the
pair hard.

Usage::

    python benchmarks/audit.py                  # full size, 10000 runs per dataset
    python benchmarks/audit.py --runs 40000 --cases projection_laplace cwme_laplace
    python benchmarks/audit.py --quick          # the CI audits
"""

import argparse
import time

from skdpsparse.audit import (
    CASES,
    CURVE_DELTA,
    SUBSAMPLED_DELTA,
    VARIANTS,
    audit_failures,
    run_case,
)

#: The CI sizes of tests/audit: runs per dataset and variants run.
CI_RUNS = {
    "l1_recovery": (600, ("correct", "bound x10")),
    "sparse_mean_estimator": (1000, tuple(VARIANTS)),
    "heavy_tailed_mean_laplace": (1000, tuple(VARIANTS)),
    "heavy_tailed_regressor": (2000, ("correct", "noise/2")),
    "cyclic_sgd": (1000, tuple(VARIANTS)),
    "noisy_sgd": (1000, ("correct", "bound x10")),
    "output_perturbation_gaussian": (600, tuple(VARIANTS)),
    "output_perturbation_laplace": (1000, ("correct", "noise/2")),
    "sparse_exponential": (500, ("correct", "bound x10")),
}

#: Data sizes of the full-size run, where they differ from the CI defaults.
FULL_SIZE = {
    "cyclic_sgd": dict(n=200, d=20, epochs=5),
    "output_perturbation_gaussian": dict(n=200, d=20),
    "output_perturbation_laplace": dict(n=200, d=20),
}


def _is_pure(name):
    return CASES[name].keywords["delta"] == 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10000,
                        help="runs per dataset and variant (full size)")
    parser.add_argument("--epsilon-pure", type=float, default=1.0)
    parser.add_argument("--epsilon-gaussian", type=float, default=4.0)
    parser.add_argument("--quick", action="store_true",
                        help="the CI audits: CI epsilons and runs")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-floating-point", dest="floating_point", action="store_false",
                        help="skip the floating-point (low-bits) attack")
    args = parser.parse_args(argv)

    header = (f"{'mechanism':42s} {'delta':>7s} {'claimed':>8s} {'correct':>8s} "
              f"{'noise/2':>8s} {'bound10':>8s} {'runs':>11s}  verdict")
    print(f"95% Clopper-Pearson lower bounds on epsilon; Gaussian mechanisms also at "
          f"delta={CURVE_DELTA:g}, noisy SGD at delta={SUBSAMPLED_DELTA:g}")
    print(header)
    print("-" * len(header))
    failures = []
    for name in args.cases:
        t0 = time.perf_counter()
        if args.quick:
            case = CASES[name]()
            n_runs, variants = CI_RUNS.get(name, (2000, tuple(VARIANTS)))
        else:
            eps = args.epsilon_pure if _is_pure(name) else args.epsilon_gaussian
            case = CASES[name](epsilon=eps, **FULL_SIZE.get(name, {}))
            n_runs, variants = args.runs, tuple(VARIANTS)
        results = run_case(case, n_runs=n_runs, seed=args.seed, variants=variants)
        problems = audit_failures(case, results)
        failures += problems
        for i, (delta, eps) in enumerate(case.claims):
            lbs = [f"{results[v][i].epsilon_lb:8.3f}" if v in results else f"{'-':>8s}"
                   for v in VARIANTS]
            verdict = "ok" if not results["correct"][i].violated else "CLAIM REFUTED"
            caught = [v for v in results if v != "correct" and results[v][i].violated]
            missed = [v for v in results
                      if delta in case.detect.get(v, ()) and not results[v][i].violated]
            if caught:
                verdict += f"; refutes {', '.join(caught)}"
            if missed:
                verdict += f"; MISSED {', '.join(missed)}"
            print(f"{case.name:42s} {delta:7g} {eps:8.3f} {' '.join(lbs)} "
                  f"{n_runs:>6d} x 2  {verdict}")
        print(f"{'':42s} ({time.perf_counter() - t0:.1f} s)")
    if args.floating_point:
        failures += floating_point_attack(100 if args.quick else 1000)
    print()
    print("PASS" if not failures else "FAIL:\n  " + "\n  ".join(failures))
    return 1 if failures else 0


def floating_point_attack(n_releases):
    """Mironov's attack on the low bits of one release of the pure-DP sparse mean:
    the share of releases that identify the neighbouring dataset with certainty, for
    the library's exact grid noise and for the float noise it used to draw."""
    import numpy as np
    from sklearn.base import clone

    from skdpsparse.audit import float_noise, mironov_distinguisher
    from skdpsparse.mean import DPSparseMeanEstimator
    from skdpsparse.mechanisms.projection import bounded_mean

    rng = np.random.default_rng(1)
    d, n = 40, 50
    X0 = rng.uniform(-1, 1, (n, d)) / np.sqrt(d)
    X1 = X0.copy()
    X1[0] = -X1[0]
    est = DPSparseMeanEstimator(method="laplace", delta=0.0, epsilon=1.0, norm_bound=1.0,
                                sparsity=d)
    means = [bounded_mean(X, 1.0, d) for X in (X0, X1)]
    scale = 2.0 * np.sqrt(d) / n

    def rate():
        claims = right = 0
        for t in range(n_releases):
            guess = mironov_distinguisher(clone(est).fit((X0, X1)[t % 2]).mean_, *means,
                                          scale)
            claims += guess is not None
            right += guess == t % 2
        return claims / n_releases, right / max(claims, 1)

    # The attack models the float sampler's support; on a grid release its "certain"
    # answers are guesses, so their accuracy is what shows that it fails there.
    print(f"\nfloating-point attack (Mironov 2012) on DPSparseMeanEstimator(laplace), "
          f"{n_releases} releases: share claimed certain, accuracy of those claims")
    exact = rate()
    with float_noise():
        broken = rate()
    print(f"  exact grid noise {exact[0]:6.1%} {exact[1]:6.1%}   "
          f"float noise (broken variant) {broken[0]:6.1%} {broken[1]:6.1%}")
    problems = []
    if exact[0] > 0 and exact[1] > 0.7:
        problems.append(f"floating-point attack: {exact[1]:.1%} accurate on exact releases")
    if broken[0] < 0.5 or broken[1] < 1.0:
        problems.append(f"floating-point attack missed the float variant {broken}")
    return problems


if __name__ == "__main__":
    raise SystemExit(main())
