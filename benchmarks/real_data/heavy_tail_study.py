"""Where the default heavy-tailed mean's error comes from (issue 19), on SYNTHETIC data
only (never on the real columns of ``means.py``, which are the evaluation).

For every fit of ``private_quantile_clipped_mean`` the error against the sample mean is
split into the clipping bias (the clipped mean of the released interval, computed
non-privately here for the diagnosis) and the noise (the release minus that clipped
mean), beside the interval's width and the number of rows clipped per column.

    python benchmarks/real_data/heavy_tail_study.py [--seeds 3] [--n 10000 100000]

Sets: ``make_heavy_tailed`` Student-t(3) and symmetrised Pareto(3) at d = 10, and a
one-sided Lomax(3) (shape 3, scale 1), log-normal(0, 1.5) and log-normal(8, 1) capped
at 2·10⁴ at d = 1, skewed like delays and incomes, the last bounded like prices. Timings are not measured.
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from skdpsparse.datasets import make_heavy_tailed  # noqa: E402
from skdpsparse.mechanisms import heavy_tailed_clip as C  # noqa: E402


def sets(n, seed):
    rng = np.random.default_rng(10_000 + seed)
    yield "student_t d=10", make_heavy_tailed(n, 10, distribution="student_t",
                                              tail_parameter=3.0, random_state=seed)[0]
    yield "pareto d=10", make_heavy_tailed(n, 10, distribution="pareto",
                                           tail_parameter=3.0, random_state=seed)[0]
    yield "lomax(3) d=1", rng.pareto(3.0, size=(n, 1))
    yield "lognormal(1.5) d=1", rng.lognormal(0.0, 1.5, size=(n, 1))
    yield "capped lognormal(8, 1) d=1", np.minimum(rng.lognormal(8.0, 1.0, size=(n, 1)), 2e4)


def study(X, eps, delta, seed, **kw):
    est, budget, info = C.private_quantile_clipped_mean(
        X, epsilon=eps, delta=delta, rng=np.random.default_rng(seed), **kw)
    lo, hi = info["lower"], info["upper"]
    mean = X.mean(axis=0)
    clipped = np.clip(X, lo, hi).mean(axis=0)
    out_rows = ((X < lo) | (X > hi)).sum(axis=0)
    return {"total": np.linalg.norm(est - mean), "bias": np.linalg.norm(clipped - mean),
            "noise": np.linalg.norm(est - clipped), "width": float(np.median(hi - lo)),
            "clipped_rows": float(np.median(out_rows)), "scale": info["scale"]}


ORACLE_LEVELS = np.array([0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1])


def oracle_error(X, noise_sd, noise_sd_laplace):
    """The smallest expected error (against the sample mean) of a clipped mean whose
    interval is [q_a, q_b] (empirical quantiles, the grid of ``means.py``'s oracle) and
    whose noise has ``noise_sd`` per unit of width (Gaussian) or ``noise_sd_laplace``
    (Laplace), whichever is smaller: ORACLE, not private, no draw."""
    n, d = X.shape
    S = np.sort(X, axis=0)
    mean = X.mean(axis=0)
    best = np.inf
    for a in ORACLE_LEVELS:
        for b in ORACLE_LEVELS:
            lo, hi = S[int(a * (n - 1))], S[int(round((1 - b) * (n - 1)))]
            bias2 = float(((np.clip(X, lo, hi).mean(axis=0) - mean) ** 2).sum())
            w2 = float(((hi - lo) ** 2).sum())
            best = min(best, bias2 + min(noise_sd, noise_sd_laplace) ** 2 * w2)
    return float(np.sqrt(best))


def full_budget_noise(n, d, eps, delta):
    from skdpsparse.accounting import approx_dp_to_zcdp
    rho = approx_dp_to_zcdp(eps, delta)
    eps_lap = C.laplace_epsilon_after([], eps, delta)
    return np.sqrt(d) / n / np.sqrt(2 * rho), np.sqrt(2) * d / n / eps_lap


def compare(argv=None):
    """Mean error / oracle error per set, n, ε, for variants of the constants."""
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--n", type=int, nargs="*", default=[10**4, 10**5])
    p.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0])
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--only", default=None, help="substring of the set names to run")
    p.add_argument("--variant", nargs="*", default=["values", "deviations"])
    a = p.parse_args(argv)
    for n in a.n:
        data = {}
        for seed in range(a.seeds):
            for name, X in sets(n, seed):
                data.setdefault(name, []).append(X)
        for name, Xs in data.items():
            if a.only and not name.endswith(a.only):
                continue
            for eps in a.epsilons:
                orc = np.mean([oracle_error(X, *full_budget_noise(*X.shape, eps, a.delta))
                               for X in Xs])
                cells = []
                for v in a.variant:
                    kw, consts = VARIANTS[v]
                    saved = {k: getattr(C, k) for k in consts}
                    for k, val in consts.items():
                        setattr(C, k, val)
                    try:
                        errs = [study(X, eps, a.delta, seed, **kw)["total"]
                                for seed, X in enumerate(Xs)]
                    finally:
                        for k, val in saved.items():
                            setattr(C, k, val)
                    cells.append(f"{np.mean(errs) / orc:.2f} (max {np.max(errs) / orc:.1f})")
                print(f"| {name} | {n} | {eps:g} | {orc:.3g} | " + " | ".join(cells) + " |",
                      flush=True)


VARIANTS = {  # label: (keyword arguments, module constants replaced for the run)
    "values": (dict(tails="values"), {}),
    "deviations": (dict(tails="deviations"), {}),
    "union": (dict(tails="union"), {}),
    "deviations_f0.2": (dict(tails="deviations", scale_fraction=0.2), {}),
}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--n", type=int, nargs="*", default=[10**4, 10**5])
    p.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0])
    p.add_argument("--delta", type=float, default=1e-6)
    a = p.parse_args(argv)
    print("| set | n | ε | total | bias | noise | width | rows clipped |")
    print("|---|---|---|---|---|---|---|---|")
    for n in a.n:
        for seed in range(a.seeds):
            for name, X in sets(n, seed):
                for eps in a.epsilons:
                    r = study(X, eps, a.delta, seed)
                    print(f"| {name} | {n} | {eps:g} | {r['total']:.4g} | {r['bias']:.4g} | "
                          f"{r['noise']:.4g} | {r['width']:.4g} | {r['clipped_rows']:.0f} |",
                          flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["compare"]:
        compare(sys.argv[2:])
    else:
        main()
