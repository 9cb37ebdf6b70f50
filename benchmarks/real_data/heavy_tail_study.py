"""Where the default heavy-tailed mean's error comes from (issue 19), on SYNTHETIC data
only (never on the real columns of ``means.py``, which are the evaluation).

For every fit of ``private_quantile_clipped_mean`` the error against the sample mean is
split into the clipping bias (the clipped mean of the released interval, computed
non-privately here for the diagnosis) and the noise (the release minus that clipped
mean), beside the interval's width and the number of rows clipped per column.

    python benchmarks/real_data/heavy_tail_study.py [--seeds 3] [--n 10000 100000]
    python benchmarks/real_data/heavy_tail_study.py compare --variant default fitted_only
    python benchmarks/real_data/heavy_tail_study.py decide [--seeds 5 --seed-offset 100]
    python benchmarks/real_data/heavy_tail_study.py floor [--seeds 8]
    python benchmarks/real_data/heavy_tail_study.py stages --sets lookalikes --n 327000

``stages`` shows which stage puts the upper end where: the outer quantile's distance
t_out, the data's maximum and the released upper end over it, the far tail bin's count
and the fitted tail's prediction over the bin's standard deviation, and how the counts
were read (ended, lighter, fitted).

``decide`` (issue 19's sixth round) scores the options for reading an empty far tail
bin on every generated family (the look-alikes at their n; Student-t(3) and Pareto(3)
at d = 10, Lomax(3) and log-normal(1.5) at d = 1, n = 10⁴ and 10⁵; ε = 1, 2, 4, 8) and
prints each family's geometric mean of the expected error over the oracle's, the worst
family and the worst cell: ``fitted_only`` (the fitted tail alone, the rule before),
``default`` (minimax regret over the two readings), ``stretch4`` / ``stretch6`` (the
fitted reading with the stretch capped at 4 or 6 times t_out) and ``regret_stretch6``.

``compare`` scores each variant by its *expected* error (the clipping bias of the
released interval, computed non-privately, and the noise's standard deviation from
the plan, not one noise draw) over the oracle's, so that a few seeds separate the
variants; ``floor`` measures how far even the best *fixed* interval (chosen with the
distribution known, from a reference sample of 2·10⁶ rows, the same for every
sample) is from the bench's oracle, which tunes its interval on the sample it is
scored on: no rule that sees the sample only through private releases can be
expected to do better than that floor.

Seeds: the sets are drawn with ``--seed-offset`` + k (100 by default), not with the
seeds 0…4 of ``means.py``, so that nothing here is tuned on the bench's draws.

Sets: ``make_heavy_tailed`` Student-t(3) and symmetrised Pareto(3) at d = 10, and a
one-sided Lomax(3) (shape 3, scale 1), log-normal(0, 1.5) and log-normal(8, 1) capped
at 2·10⁴ at d = 1, skewed like delays and incomes, the last bounded like prices; and
three integer columns (atoms between grid points): ⌊10·Lomax(2.5)⌋ − 5, a negative
binomial (r = 0.5, p = 0.1: mean 4.5, 40 % zeros) and whole minutes
⌊Gamma(0.4, 40)⌋ − 10. ``--sets shared``: d = 10 and 30 sets on which the plan takes
the shared scale. ``--sets lookalikes``: generated look-alikes of the shapes of the
bench's worst real columns (whole-minute delays with a one-sided tail; bracketed,
top-coded incomes; :func:`lookalike_sets`), described in words and never fitted to
those columns. Timings are not measured.
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
    # Integer columns (atoms at every integer, most between grid points): a minute
    # count with a heavy right tail, and a visit count with many zeros.
    yield "integer lomax(2.5) d=1", np.floor(10.0 * rng.pareto(2.5, size=(n, 1))) - 5.0
    yield "neg. binomial d=1", rng.negative_binomial(0.5, 0.1, size=(n, 1)).astype(float)
    # Whole minutes with a light (gamma) tail beyond a bulk near 0, like delays.
    yield "integer gamma d=1", np.floor(rng.gamma(0.4, 40.0, size=(n, 1))) - 10.0


def shared_sets(n, seed):
    """Sets on which the plan takes the shared scale (d > 1, few rows per column):
    the two ``make_heavy_tailed`` sets of ``sets``, a symmetrised log-normal(0, 1),
    one-sided Lomax(3) columns (an interval [−C, C] around 0 wastes half its width on
    them) and Student-t(5) at d = 30."""
    rng = np.random.default_rng(20_000 + seed)
    yield "student_t d=10", make_heavy_tailed(n, 10, distribution="student_t",
                                              tail_parameter=3.0, random_state=seed)[0]
    yield "pareto d=10", make_heavy_tailed(n, 10, distribution="pareto",
                                           tail_parameter=3.0, random_state=seed)[0]
    yield "lognormal(1) d=10", make_heavy_tailed(n, 10, distribution="lognormal",
                                                 tail_parameter=1.0, random_state=seed)[0]
    yield "lomax(3) d=10", rng.pareto(3.0, size=(n, 10))
    yield "student_t(5) d=30", make_heavy_tailed(n, 30, distribution="student_t",
                                                 tail_parameter=5.0, random_state=seed)[0]


def lookalike_sets(n, seed):
    """Generated look-alikes of the shapes of the bench's worst real columns (issue 19's
    fifth round; shapes described in words, nothing fitted to or chosen from the real
    columns or their cells): whole minutes of delay, a bulk near 0 (Gamma(4, 4) − 20)
    and a one-sided right tail in a share of the rows, Pareto(2.5)·60 capped at 1 400
    ("capped"), log-normal(3, 1) (35 % of rows), or exponential of mean 110 (15 %);
    and yearly incomes, log-normal(10, 1) reported as the midpoint of one of 24
    brackets, the top bracket top-coded at 1.5 times its lower edge, that edge
    150 000 in every year ("one top code", times a deflator 1 + 0.03·year over 20
    years), or rising from 25 000 to 300 000 over 25 years ("yearly top codes": sparse
    atoms spread over the tail). The bench's delay columns have n ≈ 3.3·10⁵, its
    income column n ≈ 3.8·10⁴ (``--n``)."""
    rng = np.random.default_rng(30_000 + seed)

    def delays(tail):
        bulk = rng.gamma(4.0, 4.0, size=n) - 20.0
        return np.floor(bulk + tail)[:, None]

    late = rng.random(n) < 0.25
    yield "delay, Pareto tail capped", np.minimum(
        delays(np.where(late, rng.pareto(2.5, size=n) * 60.0, 0.0)), 1400.0)
    late = rng.random(n) < 0.35
    yield "delay, log-normal tail", delays(np.where(late, rng.lognormal(3.0, 1.0, size=n), 0.0))
    late = rng.random(n) < 0.15
    yield "delay, exponential tail", delays(np.where(late, rng.exponential(110.0, size=n), 0.0))

    def incomes(tops, deflators):
        x = rng.lognormal(10.0, 1.0, size=n)
        year = rng.integers(0, len(tops), size=n)
        out = np.empty(n)
        for y, top in enumerate(tops):
            edges = np.concatenate([[0.0], np.geomspace(1000.0, top, 24), [np.inf]])
            mids = np.concatenate([(edges[:-2] + edges[1:-1]) / 2, [1.5 * edges[-2]]])
            sel = year == y
            out[sel] = mids[np.searchsorted(edges, x[sel], side="right") - 1] * deflators[y]
        return out[:, None]

    yield "income, one top code", incomes(np.full(20, 150_000.0), 1.0 + 0.03 * np.arange(20))
    yield "income, yearly top codes", incomes(np.geomspace(25_000.0, 300_000.0, 25), np.ones(25))


SET_FAMILIES = {"columns": sets, "shared": shared_sets, "lookalikes": lookalike_sets}


def study(X, eps, delta, seed, **kw):
    est, budget, info = C.private_quantile_clipped_mean(
        X, epsilon=eps, delta=delta, rng=np.random.default_rng(seed), **kw)
    lo, hi = info["lower"], info["upper"]
    mean = X.mean(axis=0)
    clipped = np.clip(X, lo, hi).mean(axis=0)
    out_rows = ((X < lo) | (X > hi)).sum(axis=0)
    # The noise's standard deviation per unit of width (discrete Laplace of scale b:
    # about √2·b; discrete Gaussian: σ), so the expected error needs no noise draw.
    sd = info["scale"] * (np.sqrt(2.0) if info["noise"] == "laplace" else 1.0)
    bias = np.linalg.norm(clipped - mean)
    noise_sd = float(np.linalg.norm((hi - lo) * sd))
    return {"total": np.linalg.norm(est - mean), "bias": bias,
            "noise": np.linalg.norm(est - clipped), "noise_sd": noise_sd,
            "expected": float(np.hypot(bias, noise_sd)), "width": float(np.median(hi - lo)),
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
    """(Gaussian, Laplace) noise sd per unit of width with the whole budget; with
    δ = 0 only the Laplace one (ε-DP)."""
    if delta == 0:
        return np.inf, np.sqrt(2) * d / n / eps
    from skdpsparse.accounting import approx_dp_to_zcdp
    rho = approx_dp_to_zcdp(eps, delta)
    eps_lap = C.laplace_epsilon_after([], eps, delta)
    return np.sqrt(d) / n / np.sqrt(2 * rho), np.sqrt(2) * d / n / eps_lap


FLOOR_LEVELS = np.array([0, 1e-7, 3e-7, 1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3,
                         0.01, 0.03, 0.1])


def fixed_interval_floor(name, n, eps, delta, seeds, offset, family=sets):
    """The best fixed interval's mean expected error over the oracle's (see the module
    notes): intervals [r_a, r_b] at the quantiles of a reference sample of the same
    set (2·10⁶ rows, seeds offset + 1000…), a and 1 − b on ``FLOOR_LEVELS``."""
    Xs = [dict(family(n, offset + k))[name] for k in range(seeds)]
    ref = np.sort(np.concatenate([dict(family(400_000, offset + 1000 + k))[name]
                                  for k in range(5)]), axis=0)
    N = ref.shape[0]
    sd = min(full_budget_noise(n, Xs[0].shape[1], eps, delta))
    orc = np.mean([oracle_error(X, *full_budget_noise(*X.shape, eps, delta)) for X in Xs])
    best = np.inf
    for a in FLOOR_LEVELS:
        for b in FLOOR_LEVELS:
            lo, hi = ref[int(a * (N - 1))], ref[int(round((1 - b) * (N - 1)))]
            w2 = float(((hi - lo) ** 2).sum())
            errs = [np.sqrt(float(((np.clip(X, lo, hi).mean(0) - X.mean(0)) ** 2).sum())
                            + sd**2 * w2) for X in Xs]
            best = min(best, float(np.mean(errs)))
    return best / orc


def floor(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--seed-offset", type=int, default=100)
    p.add_argument("--n", type=int, nargs="*", default=[10**4, 10**5])
    p.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0])
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--sets", choices=tuple(SET_FAMILIES), default="columns")
    p.add_argument("--only", default=None, help="substring of the set names to run")
    a = p.parse_args(argv)
    family = SET_FAMILIES[a.sets]
    print("| set | n | ε | best fixed interval / oracle |")
    print("|---|---|---|---|")
    for name, _ in family(10, 0):
        if a.only and a.only not in name:
            continue
        for n in a.n:
            for eps in a.epsilons:
                r = fixed_interval_floor(name, n, eps, a.delta, a.seeds, a.seed_offset,
                                         family)
                print(f"| {name} | {n} | {eps:g} | {r:.2f} |", flush=True)


def compare(argv=None):
    """Mean error / oracle error per set, n, ε, for variants of the constants."""
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--n", type=int, nargs="*", default=[10**4, 10**5])
    p.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 4.0])
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--only", default=None, help="substring of the set names to run")
    p.add_argument("--variant", nargs="*", default=["fitted_only", "default"])
    p.add_argument("--seed-offset", type=int, default=100)
    p.add_argument("--sets", choices=tuple(SET_FAMILIES), default="columns")
    a = p.parse_args(argv)
    family = SET_FAMILIES[a.sets]
    print("| set | n | ε | oracle | " + " | ".join(a.variant) + " |")
    print("|---|---|---|---|" + "---|" * len(a.variant))
    for n in a.n:
        data = {}
        for seed in range(a.seed_offset, a.seed_offset + a.seeds):
            for name, X in family(n, seed):
                data.setdefault(name, []).append(X)
        for name, Xs in data.items():
            if a.only and a.only not in name:
                continue
            for eps in a.epsilons:
                orc = np.mean([oracle_error(X, *full_budget_noise(*X.shape, eps, a.delta))
                               for X in Xs])
                cells = []
                for v in a.variant:
                    errs = _with_variant(v, lambda **kw: [
                        study(X, eps, a.delta, a.seed_offset + seed, **kw)["expected"]
                        for seed, X in enumerate(Xs)])
                    cells.append(f"{np.mean(errs) / orc:.2f} (max {np.max(errs) / orc:.1f})")
                print(f"| {name} | {n} | {eps:g} | {orc:.3g} | " + " | ".join(cells) + " |",
                      flush=True)


def _fitted_only(err, *args):
    """The fitted reading alone (``_end_regret`` replaced by the identity)."""
    return err


VARIANTS = {  # label: (keyword arguments, module constants replaced for the run)
    "default": (dict(), {}),
    "fitted_only": (dict(), {"_end_regret": _fitted_only}),
    "f0.2": (dict(scale_fraction=0.2), {}),
    "f0.3": (dict(scale_fraction=0.3), {}),
    "shared_x2": (dict(), {"SHARED_STRETCH": 2.0}),
    "shared_x1.5": (dict(), {"SHARED_STRETCH": 1.5}),
    "shared_x1": (dict(), {"SHARED_STRETCH": 1.0}),
    "doubt2": (dict(), {"COUNT_DOUBT": 2.0}),
    "doubt1": (dict(), {"COUNT_DOUBT": 1.0}),
    "doubt0.5": (dict(), {"COUNT_DOUBT": 0.5}),
    "doubt0.75": (dict(), {"COUNT_DOUBT": 0.75}),
    "doubt0.25": (dict(), {"COUNT_DOUBT": 0.25}),
    "doubt0": (dict(), {"COUNT_DOUBT": 0.0}),
    "bins_x3": (dict(), {"COUNT_DRAWS": 6}),
    "bins_x6": (dict(), {"COUNT_DRAWS": 12}),
    "stretch4": (dict(), {"MAX_STRETCH": 4.0, "_end_regret": _fitted_only}),
    "stretch6": (dict(), {"MAX_STRETCH": 6.0, "_end_regret": _fitted_only}),
    "regret_stretch6": (dict(), {"MAX_STRETCH": 6.0}),
}


def _with_variant(name, fn):
    kw, consts = VARIANTS[name]
    saved = {k: getattr(C, k) for k in consts}
    for k, val in consts.items():
        setattr(C, k, val)
    try:
        return fn(**kw)
    finally:
        for k, val in saved.items():
            setattr(C, k, val)


def decide_families(n_small, seeds, offset):
    """(family, cell label, samples) of ``decide``: the d = 10 and one-column sets of
    :func:`sets` at n = ``n_small`` and 10·``n_small``, the look-alikes at the bench
    columns' sizes (delays 3.27·10⁵, incomes 3.8·10⁴)."""
    def seeded(make, n, prefixes):  # {set name: [X per seed]} of the sets kept
        data = {}
        for s in range(offset, offset + seeds):
            for name, X in make(n, s):
                if name.startswith(prefixes):
                    data.setdefault(name, []).append(X)
        return data.items()

    for n in (n_small, 10 * n_small):
        for name, Xs in seeded(sets, n, ("student_t", "pareto", "lomax(3)", "lognormal(1.5)")):
            yield name.split()[0], f"{name}, n = {n}", Xs
    for n, which in ((327_000, "delay"), (38_000, "income")):
        for name, Xs in seeded(lookalike_sets, n, which):
            yield "look-alikes", f"{name}, n = {n}", Xs


def decide(argv=None):
    """The options for an empty far bin, minimax over generated families (issue 19's
    sixth round): per family the geometric mean over its cells of the mean expected
    error over the oracle's, then the worst family per option."""
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--seed-offset", type=int, default=100)
    p.add_argument("--n", type=int, default=10**4)
    p.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 2.0, 4.0, 8.0])
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--variant", nargs="*",
                   default=["fitted_only", "default", "stretch4", "stretch6",
                            "regret_stretch6"])
    a = p.parse_args(argv)
    cells = {}
    for fam, label, Xs in decide_families(a.n, a.seeds, a.seed_offset):
        for eps in a.epsilons:
            orc = np.mean([oracle_error(X, *full_budget_noise(*X.shape, eps, a.delta))
                           for X in Xs])
            row = {}
            for v in a.variant:
                errs = _with_variant(v, lambda **kw: [
                    study(X, eps, a.delta, a.seed_offset + k, **kw)["expected"]
                    for k, X in enumerate(Xs)])
                row[v] = float(np.mean(errs) / orc)
            cells[(fam, label, eps)] = row
            print(f"| {label} | {eps:g} | " + " | ".join(f"{row[v]:.2f}" for v in a.variant)
                  + " |", flush=True)
    fams = sorted({k[0] for k in cells})
    print("\n| option | " + " | ".join(fams) + " | worst family | geometric mean | worst cell |")
    print("|---|" + "---|" * (len(fams) + 3))
    for v in a.variant:
        g = {f: float(np.exp(np.mean([np.log(r[v]) for k, r in cells.items() if k[0] == f])))
             for f in fams}
        allg = float(np.exp(np.mean([np.log(r[v]) for r in cells.values()])))
        worst = max(r[v] for r in cells.values())
        print(f"| {v} | " + " | ".join(f"{g[f]:.2f}" for f in fams)
              + f" | {max(g.values()):.2f} | {allg:.2f} | {worst:.2f} |")


def stages(argv=None):
    """Which stage puts the upper end where (issue 19's fifth round): per set, n and ε,
    the median over seeds of the upper tail's outer distance t_out (from the median),
    the data's maximum and the released upper end, both over t_out (the data's
    maximum read non-privately, for the diagnosis only), the far bin's noisy count and
    the count the fitted tail predicts there, both over the bin's standard deviation,
    how the counts were read (``ended``: no rows beyond t_out the noise can tell from 0;
    ``lighter``: the far bin refits the index; ``fitted``: the quantiles' index
    stands), and the expected error over the oracle's."""
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--n", type=int, nargs="*", default=[10**4])
    p.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 2.0, 4.0, 8.0])
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--seed-offset", type=int, default=100)
    p.add_argument("--sets", choices=tuple(SET_FAMILIES), default="lookalikes")
    p.add_argument("--only", default=None, help="substring of the set names to run")
    a = p.parse_args(argv)
    calls = []
    original = C._counted_tail

    def spy(*args, **kw):  # records the upper tail's counts (the first call of a fit)
        calls.append(args[2:8])
        return original(*args, **kw)

    print("| set | n | ε | t_out | max/t_out | upper/t_out | far/sd | predicted/sd | read as "
          "| error/oracle |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    C._counted_tail = spy
    try:
        for n in a.n:
            data = {}
            for seed in range(a.seed_offset, a.seed_offset + a.seeds):
                for name, X in SET_FAMILIES[a.sets](n, seed):
                    data.setdefault(name, []).append(X)
            for name, Xs in data.items():
                if a.only and a.only not in name:
                    continue
                for eps in a.epsilons:
                    rows = []
                    for k, X in enumerate(Xs):
                        calls.clear()
                        _, _, info = C.private_quantile_clipped_mean(
                            X, epsilon=eps, delta=a.delta,
                            rng=np.random.default_rng(a.seed_offset + k))
                        orc = oracle_error(X, *full_budget_noise(*X.shape, eps, a.delta))
                        r = study(X, eps, a.delta, a.seed_offset + k)["expected"] / orc
                        med = np.sort(info["quantiles"], axis=0)[2, 0]
                        if not calls:  # the shared scale: no tail counts
                            rows.append((np.nan,) * 5 + ("shared", r))
                            continue
                        t_in, t_out, near, far, _, sd = (
                            np.asarray(v, dtype=float).ravel()[0] for v in calls[0])
                        total = near + far
                        a_q = np.clip(np.log(C.TAIL_RATIO) / np.log(t_out / t_in)
                                      if t_out > t_in > 0 else C.TAIL_INDEX_MAX,
                                      1.05, C.TAIL_INDEX_MAX)
                        pred = total * C.TAIL_COUNT_RATIO ** -a_q
                        if total <= 2.0 * np.sqrt(2.0) * sd:
                            how = "ended"
                        elif far + C.COUNT_DOUBT * sd < pred:
                            how = "lighter"
                        else:
                            how = "fitted"
                        rows.append((t_out, (X[:, 0].max() - med) / t_out,
                                     (info["upper"][0] - med) / t_out, far / sd, pred / sd,
                                     how, r))
                    num = np.array([row[:5] for row in rows], dtype=float)
                    mid = np.median(num, axis=0)
                    reads = "/".join(sorted({row[5] for row in rows}))
                    err = np.mean([row[6] for row in rows])
                    print(f"| {name} | {n} | {eps:g} | {mid[0]:.4g} | {mid[1]:.2f} | "
                          f"{mid[2]:.2f} | {mid[3]:.1f} | {mid[4]:.1f} | {reads} | {err:.2f} |",
                          flush=True)
    finally:
        C._counted_tail = original


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
        for seed in range(100, 100 + a.seeds):
            for name, X in sets(n, seed):
                for eps in a.epsilons:
                    r = study(X, eps, a.delta, seed)
                    print(f"| {name} | {n} | {eps:g} | {r['total']:.4g} | {r['bias']:.4g} | "
                          f"{r['noise']:.4g} | {r['width']:.4g} | {r['clipped_rows']:.0f} |",
                          flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["compare"]:
        compare(sys.argv[2:])
    elif sys.argv[1:2] == ["floor"]:
        floor(sys.argv[2:])
    elif sys.argv[1:2] == ["decide"]:
        decide(sys.argv[2:])
    elif sys.argv[1:2] == ["stages"]:
        stages(sys.argv[2:])
    else:
        main()
