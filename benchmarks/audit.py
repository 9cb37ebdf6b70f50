"""Privacy audit of every mechanism and estimator at full size.

Runs the catalogue of :mod:`skdpsparse.audit` (hard neighbouring pairs, threshold
attack chosen on half the runs, 95 % Clopper–Pearson lower bound on ε from the other
half; Jagielski et al. 2020, Nasr et al. 2021) on the mechanism as shipped and on two
broken variants — noise scale halved, and contribution bounding at 10× the bound the
noise assumes (and, for the extreme-row pairs of noisy SGD, the pre-issue-17 step
order) — and prints, per mechanism and audited δ: the claimed ε, the audited
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
and ERM estimators also run on larger data (each catalogue entry's ``full`` sizes);
noisy SGD and the sparse exponential mechanism keep their CI data, whose small size is
what makes the pair hard. The CI size of each case (runs, variants) is stored beside
it in the catalogue (``skdpsparse/audit/cases/``).

Usage::

    python benchmarks/audit.py                  # full size, 10000 runs per dataset
    python benchmarks/audit.py --runs 40000 --cases projection_laplace cwme_laplace
    python benchmarks/audit.py --quick          # the CI audits
"""

import argparse
import time

from skdpsparse.audit import CATALOGUE, CURVE_DELTA, SUBSAMPLED_DELTA, floating_point_attack, run

_COLUMNS = ("correct", "noise/2", "bound x10")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10000,
                        help="runs per dataset and variant (full size)")
    parser.add_argument("--epsilon-pure", type=float, default=1.0)
    parser.add_argument("--epsilon-gaussian", type=float, default=4.0)
    parser.add_argument("--quick", action="store_true",
                        help="the CI audits: CI epsilons, runs and variants")
    parser.add_argument("--cases", nargs="*", default=list(CATALOGUE), choices=list(CATALOGUE))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-floating-point", dest="floating_point", action="store_false",
                        help="skip the floating-point (low-bits) attack")
    args = parser.parse_args(argv)

    header = (f"{'mechanism':46s} {'delta':>7s} {'claimed':>8s} {'correct':>8s} "
              f"{'noise/2':>8s} {'bound10':>8s} {'other':>8s} {'runs':>11s}  verdict")
    print(f"95% Clopper-Pearson lower bounds on epsilon; Gaussian mechanisms also at "
          f"delta={CURVE_DELTA:g}, noisy SGD at delta={SUBSAMPLED_DELTA:g}; other: the "
          f"case's own broken variant (raw margin: the pre-issue-17 noisy-SGD step)")
    print(header)
    print("-" * len(header))
    failures = []
    for name in args.cases:
        t0 = time.perf_counter()
        entry = CATALOGUE[name]
        if args.quick:
            case, results, problems = run(name, seed=args.seed)
            n_runs = entry.runs
        else:
            eps = args.epsilon_pure if entry.pure else args.epsilon_gaussian
            case, results, problems = run(name, quick=False, n_runs=args.runs,
                                          seed=args.seed, epsilon=eps)
            n_runs = args.runs
        failures += problems
        others = [v for v in results if v not in _COLUMNS]
        for i, (delta, eps) in enumerate(case.claims):
            lbs = [f"{results[v][i].epsilon_lb:8.3f}" if v in results else f"{'-':>8s}"
                   for v in _COLUMNS]
            lbs.append(" ".join(f"{results[v][i].epsilon_lb:8.3f}" for v in others)
                       or f"{'-':>8s}")
            verdict = "ok" if not results["correct"][i].violated else "CLAIM REFUTED"
            caught = [v for v in results if v != "correct" and results[v][i].violated]
            missed = [v for v in results
                      if delta in case.detect.get(v, ()) and not results[v][i].violated]
            if caught:
                verdict += f"; refutes {', '.join(caught)}"
            if missed:
                verdict += f"; MISSED {', '.join(missed)}"
            print(f"{case.name:46s} {delta:7g} {eps:8.3f} {' '.join(lbs)} "
                  f"{n_runs:>6d} x 2  {verdict}")
        print(f"{'':46s} ({time.perf_counter() - t0:.1f} s)")
    if args.floating_point:
        n_releases = 100 if args.quick else 1000
        print(f"\nfloating-point attack (Mironov 2012) on DPSparseMeanEstimator(laplace), "
              f"{n_releases} releases: share claimed certain, accuracy of those claims")
        exact, broken, problems = floating_point_attack(n_releases)
        print(f"  exact grid noise {exact[0]:6.1%} {exact[1]:6.1%}   "
              f"float noise (broken variant) {broken[0]:6.1%} {broken[1]:6.1%}")
        failures += problems
    print()
    print("PASS" if not failures else "FAIL:\n  " + "\n  ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
