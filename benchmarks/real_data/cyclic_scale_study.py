"""Does ``DPCyclicSGD``'s auto schedule take too few steps on targets of large scale?
(issue 18, target 3: the one ``DPCyclicSGD`` cell missed, income at ε = 0.5.)
VALIDATION split only; the test split is never read.

The auto schedule (``auto_schedule`` in ``skdpsparse/linear_model/_cyclic_sgd.py``)
takes the most full-batch steps T whose noise on a prediction of the last iterate has
std 0.35 in target units: T = 0.35·n·√(ρ/2)/u. For a target whose spread is S (income
in $1 000: sd 29; ratings: sd 1.05) a noise of 0.35 on a prediction is S times smaller
relative to the residuals than on a target of unit scale. This script fits the
schedule the rule would give with its noise target at 0.35·k, for a few k (the same as
dividing the reach u by k: T and the noise grow k-fold in full batches; at the
200-pass cap the batch shrinks), beside the bench's (5, 256) candidate, and prints the
validation R² (mean over the splits of seeds 0, 1, 2; fits seeded 100 + split).

    python benchmarks/real_data/cyclic_scale_study.py income --epsilons 0.5 1 2
    python benchmarks/real_data/cyclic_scale_study.py movielens gen_onehot --k 0.3 1 1.5 2 3
"""

import argparse
import math
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from real_data.datasets import load_task, split  # noqa: E402
from real_data.linear import score  # noqa: E402


def _task(name):
    if name.startswith("gen"):
        from real_data.tuning_study import generated_tasks

        return next(t for t in generated_tasks() if t.name == name)
    return load_task(name)


def main():
    from skdpsparse.linear_model import DPCyclicSGD
    from skdpsparse.linear_model._cyclic_sgd import auto_schedule

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+")
    parser.add_argument("--epsilons", nargs="*", type=float, default=[0.5, 1.0, 4.0])
    parser.add_argument("--k", nargs="*", type=float, default=[0.3, 1.0, 3.0, 10.0, 30.0])
    parser.add_argument("--splits", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for name in args.tasks:
        task = _task(name)
        for eps in args.epsilons:
            res = {k: [] for k in args.k}
            res["(5, 256)"] = []
            sched = {}
            for s in range(args.splits):
                (Xtr, ytr), (Xva, yva), _ = split(task, s)
                n = Xtr.shape[0]
                # u = λ·C·G = 0.5·√2·√2 = 1 for the squared loss's defaults (checked on
                # a fit's learning_rate_ and clip_norm_; G includes the intercept).
                for k in args.k:
                    E, b = auto_schedule(n, reach=1.0 / k, epsilon=eps, delta=1e-6)
                    sched[k] = f"E={E}, b={b}, T={math.ceil(E * n / b)}"
                    est = DPCyclicSGD("squared", epsilon=eps, epochs=E, batch_size=b,
                                      random_state=100 + s).fit(Xtr, ytr)
                    res[k].append(score("regression", yva, est.predict(Xva)))
                est = DPCyclicSGD("squared", epsilon=eps, epochs=5, batch_size=256,
                                  random_state=100 + s).fit(Xtr, ytr)
                res["(5, 256)"].append(score("regression", yva, est.predict(Xva)))
            cells = [f"k={k:g} ({sched[k]}): {np.mean(v):.4f}" if k in sched
                     else f"{k}: {np.mean(v):.4f}" for k, v in res.items()]
            print(f"{name} eps={eps:g} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
