"""Is output perturbation's ``alpha="auto"`` where tuning would put it? (issue 18,
target 3: untuned within 1 point / 0.01 R² of tuned.) VALIDATION split only.

For each task and ε, the validation score of the default + public-knowledge fit
(``alpha="auto"``, the bench's public sparsity and bounds) beside the same fit with λ
set to a multiple of the λ that ``"auto"`` chose (``--relative``, default
0.25 / 0.5 / 2 / 4) or to ``m/n`` (``--absolute``, the bench's tuned grid's form).
The fits' seeds are 100 + k, not the bench's 0–4, and the test split is never read:
nothing here may be used to choose on the test split, and the bench's test scores are
not this script's output.

    python benchmarks/real_data/op_alpha_study.py [--tasks tweets income movielens]
        [--seeds 2] [--relative 0.25 0.5 2 4] [--absolute 0.3 1 3 10 30 100]
"""

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from real_data.datasets import load_task, split  # noqa: E402
from real_data.linear import score  # noqa: E402


def _maker(task, eps, seed):
    from skdpsparse.linear_model import (DPOutputPerturbationClassifier,
                                         DPOutputPerturbationRegressor)

    pub = task.public
    if task.kind == "classification":
        return lambda **kw: DPOutputPerturbationClassifier(
            epsilon=eps, classes=pub["classes"], sparsity=pub["sparsity"],
            norm_bound=1.0, random_state=100 + seed, **kw)
    bound = pub.get("label_interval") or "private"
    return lambda **kw: DPOutputPerturbationRegressor(
        epsilon=eps, sparsity=pub["sparsity"], label_bound=bound,
        random_state=100 + seed, **kw)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=["tweets", "income", "movielens"])
    parser.add_argument("--epsilons", nargs="*", type=float, default=[0.5, 1, 2, 4, 8])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--relative", nargs="*", type=float, default=[0.25, 0.5, 2, 4])
    parser.add_argument("--absolute", nargs="*", type=float, default=[])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for name in args.tasks:
        task = load_task(name)
        for eps in args.epsilons:
            auto, auto_an = [], []
            rel = {m: [] for m in args.relative}
            ab = {m: [] for m in args.absolute}
            for seed in range(args.seeds):
                (Xtr, ytr), (Xva, yva), _ = split(task, seed)
                n = Xtr.shape[0]
                make = _maker(task, eps, seed)
                est = make().fit(Xtr, ytr)
                auto.append(score(task.kind, yva, est.predict(Xva)))
                auto_an.append(est.alpha_ * n)
                for m in args.relative:
                    fit = make(alpha=m * est.alpha_).fit(Xtr, ytr)
                    rel[m].append(score(task.kind, yva, fit.predict(Xva)))
                for m in args.absolute:
                    fit = make(alpha=m / n).fit(Xtr, ytr)
                    ab[m].append(score(task.kind, yva, fit.predict(Xva)))
            cells = [f"auto (alpha*n = {np.mean(auto_an):.3g}) {np.mean(auto):.4f}"]
            cells += [f"x{m:g}: {np.mean(v):.4f}" for m, v in rel.items()]
            cells += [f"n*alpha={m:g}: {np.mean(v):.4f}" for m, v in ab.items()]
            print(f"{name:10s} eps={eps:<4g} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
