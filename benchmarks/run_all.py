"""Every performance target of the package at a quick size, in one table. Not a test.

Each case times our code and a baseline *in the same run*, interleaved round by round
(ours, baseline, ours, ...), and reports the ratio ours/baseline as min / median / max
over the rounds, next to the target ratio. Only ratios are comparable between runs: the
machine may be loaded, and the absolute times are printed for orientation only. The
baselines that call BLAS are timed twice, with one BLAS thread and with the default
(threadpoolctl), and labelled; the threadpoolctl information is printed first.

The results are saved as JSON (``--out``, default ``benchmarks/results/<commit>.json``)
with the commit, so a regression shows as a changed ratio between two files.

Run:  python benchmarks/run_all.py [--rounds 5] [--only sparse_mean,samplers] [--out F]
      [--cpu-time]

Cases (issue targets in brackets):
  sparse_mean          DPSparseMeanEstimator.fit vs X.sum(axis=0)/n + one normal(d) draw
                       [≤ 1.0]; the bandwidth floor (one pass over X's arrays) printed
  sparse_mean_busy     the same while a spinning process (started and ended by this
                       script) holds one core: the fit's threads come from the free
                       cores [≤ 1.0]
  noise_smoothing      DPHeavyTailedMean(noise_smoothing).fit vs X.mean(axis=0) [≤ 2.0]
  cwme_shuffle         DPHeavyTailedMean(cwme, shuffle).fit vs X.mean(axis=0) [≤ 1.2]
  cwme_no_shuffle      the same without the shuffle [reported]
  cwme_labels          the shuffle's secret group labels (random_groups) vs the exact
                       shuffle of int64 labels it replaced [reported]
  cyclic_dense_numpy   DPCyclicSGD one epoch, dense vs vectorised NumPy DP-SGD of the
                       same steps [≤ 0.67]
  cyclic_dense_sgd     the same epoch vs scikit-learn's SGDClassifier, one epoch [≤ 0.5]
  cyclic_csr_sgd       DPCyclicSGD one epoch on CSR vs SGDClassifier [≤ 2.0] (default
                       l2 penalty: a dense noise vector per step)
  cyclic_csr_lazy_sgd  the same with penalty=None: lazy noise [≤ 2.0]
  cyclic_lazy_passes   its step passes alone (draws replaced by zeros) vs SGDClassifier
                       [reported: the floor without noise]
  cyclic_lazy_draws    exact N_Z(0, kN'^2) draws (2^16 of the epoch's k, one thread) vs
                       as many table draws N_Z(0, N'^2) [reported]
  cyclic_dense_steps   the dense step kernel that bounds rows at their visit (fresh
                       permutation, noise pre-drawn) vs the NumPy DP-SGD [≤ 0.67]
  outpert_eval         one objective + gradient as the certified solver evaluates it
                       (exact int64 sums and their error bounds) vs SciPy's X @ w,
                       X.T @ r and a NumPy loss [≤ 1.0]
  outpert_fit          DPOutputPerturbationClassifier.fit vs LogisticRegression(lbfgs) at
                       the same objective and gradient tolerance, CSR [≤ 1.0]
  outpert_fit_dense    the same on a dense array, d = 256 [≤ 1.0]
  bias_reduced_step    DPBiasReducedSGDClassifier, 4 steps at d = 10⁶ (n = 2·10⁴, 16 nonzeros,
                       fit overheads included) vs 4 floors: one noise draw at the
                       oracle's noise-to-sensitivity ratio plus one ℓ1 projection [≤ 3.0;
                       Algorithm 5 makes four such means per step, so ≥ 4 serially]
  samplers_gauss       exact discrete Gaussian draws vs numpy standard_normal [≤ 3.0]
  samplers_laplace     exact discrete Laplace draws vs numpy laplace [reported]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_info, threadpool_limits

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Case:
    name: str
    ours: object  # () -> None
    baseline: object  # () -> None
    baseline_name: str
    target: float  # ratio ours/baseline to reach (None: reported only)
    uses_blas: bool = False
    busy: bool = False  # time it while a spinning process holds one core


_CLOCK = [time.perf_counter]  # --cpu-time: time.process_time


def _timed(fn):
    start = _CLOCK[0]()
    fn()
    return _CLOCK[0]() - start


def run_case(case, rounds, blas_threads):
    """Interleaved rounds after one warm-up call of each; returns a result row."""
    limits = threadpool_limits(limits=blas_threads) if blas_threads else None
    # A busy core for the "one core busy" rows: a child that spins until killed (by
    # its own pid, below); both ours and the baseline run beside it.
    spinner = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
               if case.busy else None)
    try:
        case.ours()
        case.baseline()
        ours, base = [], []
        for _ in range(rounds):
            ours.append(_timed(case.ours))
            base.append(_timed(case.baseline))
    finally:
        if limits is not None:
            limits.restore_original_limits()
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    ratios = np.array(ours) / np.array(base)
    return {"case": case.name, "baseline": case.baseline_name,
            "blas": "1 thread" if blas_threads == 1 else "default",
            "ours_s": float(np.median(ours)), "baseline_s": float(np.median(base)),
            "ratio_min": float(ratios.min()), "ratio_median": float(np.median(ratios)),
            "ratio_max": float(ratios.max()), "target": case.target,
            "met": None if case.target is None else bool(np.median(ratios) <= case.target)}


# ------------------------------------------------------------------------ the cases
def _sparse_rows(n, d, s, seed=0):
    from skdpsparse.datasets import make_sparse_vectors

    return make_sparse_vectors(n, d, s, random_state=seed)[0]


def sparse_mean_cases(quick):
    from skdpsparse import DPSparseMeanEstimator

    n, d, s = (200_000 if quick else 10**6), 2**20, 16
    X = _sparse_rows(n, d, s)
    est = DPSparseMeanEstimator(epsilon=1.0, delta=1e-6, sparsity=s, norm_bound=1.0)
    gen = np.random.default_rng()
    floor = min(_timed(lambda: (X.data.sum(), X.indices.sum())) for _ in range(3))
    print(f"  sparse_mean: CSR n={n}, d=2^20, {s} nonzeros/row; bandwidth floor (one pass "
          f"over data and indices) {floor * 1e3:.1f} ms")

    def baseline():
        return np.asarray(X.sum(axis=0)).ravel() / n + gen.standard_normal(d)

    return [Case("sparse_mean", lambda: est.fit(X), baseline,
                 "X.sum(axis=0)/n + normal(d)", 1.0),
            Case("sparse_mean_busy", lambda: est.fit(X), baseline,
                 "the same, one core busy", 1.0, busy=True)]


def heavy_tailed_cases(quick):
    from skdpsparse import DPHeavyTailedMean

    n, d = (200_000 if quick else 10**6), 100
    X = np.random.default_rng(0).standard_t(3.0, size=(n, d))
    smooth = DPHeavyTailedMean(method="noise_smoothing", epsilon=1.0, delta=1e-6,
                               moment_bound=3.0)
    cwme = DPHeavyTailedMean(method="cwme", epsilon=1.0, delta=1e-6, moment_bound=3.0,
                             shuffle=True)
    # Reported beside it: the same fit with consecutive groups, so that the table
    # shows what the secret shuffle (its random bits and the scattered group sums)
    # adds to the clipped pass itself.
    cwme_plain = DPHeavyTailedMean(method="cwme", epsilon=1.0, delta=1e-6, moment_bound=3.0,
                                   shuffle=False)
    # And the secret labels alone (Fisher-Yates on one-byte labels, Lemire's indices)
    # against the exact permutation of int64 labels the fit drew before.
    from skdpsparse._kernels.chacha import key_words
    from skdpsparse._kernels.exact_sampling import shuffled
    from skdpsparse._kernels.heavy_tailed_scaled import consecutive_groups, random_groups

    m = cwme.fit(X).n_groups_
    key = key_words(os.urandom(32))
    return [Case("noise_smoothing", lambda: smooth.fit(X), lambda: X.mean(axis=0),
                 "X.mean(axis=0)", 2.0),
            Case("cwme_shuffle", lambda: cwme.fit(X), lambda: X.mean(axis=0),
                 "X.mean(axis=0)", 1.2),
            Case("cwme_no_shuffle", lambda: cwme_plain.fit(X), lambda: X.mean(axis=0),
                 "X.mean(axis=0)", None),
            Case("cwme_labels", lambda: random_groups(n, m, key),
                 lambda: shuffled(consecutive_groups(n, m), key, 0),
                 "exact shuffle of int64 labels", None)]


def _numpy_dp_sgd_epoch(X, y, batch_size, lr, clip, sigma, rng):
    """Vectorised cyclic DP-SGD, logistic loss with intercept, one epoch: per batch one
    BLAS product for the margins, per-example clipping, one for the gradient sum."""
    n, d = X.shape
    w, b = np.zeros(d), 0.0
    ys = np.where(y == 1, 1.0, -1.0)
    for start in range(0, n, batch_size):
        Xb, yb = X[start:start + batch_size], ys[start:start + batch_size]
        r = -yb / (1.0 + np.exp(yb * (Xb @ w + b)))  # dℓ/dmargin
        norms = np.sqrt(np.einsum("ij,ij->i", Xb, Xb) + 1.0) * np.abs(r)
        scale = r * np.minimum(1.0, clip / np.maximum(norms, 1e-300))
        g = Xb.T @ scale + rng.normal(0.0, sigma * clip, d)
        gb = scale.sum() + rng.normal(0.0, sigma * clip)
        w -= lr * g / len(yb)
        b -= lr * gb / len(yb)
    return w, b


def cyclic_cases(quick):
    from sklearn.linear_model import SGDClassifier

    from skdpsparse import DPCyclicSGD
    from skdpsparse.datasets import make_sparse_classification

    n, d, b = 100_000, 100, 256
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d)) / math.sqrt(d)
    y = (X @ rng.standard_normal(d) > 0).astype(np.int64)
    ours = DPCyclicSGD(epsilon=1.0, delta=1e-6, epochs=1, batch_size=b, classes=[0, 1])
    sgd = SGDClassifier(loss="log_loss", max_iter=1, tol=None, learning_rate="constant",
                        eta0=0.1, shuffle=False)
    noise_rng = np.random.default_rng(1)
    cases = [Case("cyclic_dense_numpy", lambda: ours.fit(X, y),
                  lambda: _numpy_dp_sgd_epoch(X, y, b, 0.1, 1.0, 1.0, noise_rng),
                  "NumPy DP-SGD, same steps", 0.67, uses_blas=True),
             Case("cyclic_dense_sgd", lambda: ours.fit(X, y), lambda: sgd.fit(X, y),
                  "SGDClassifier, 1 epoch", 0.5)]
    Xs, ys, _ = make_sparse_classification(n if not quick else 50_000, 2**18, 32,
                                           random_state=0)
    ours_csr = DPCyclicSGD(epsilon=1.0, delta=1e-6, epochs=1, batch_size=b, classes=[0, 1])
    cases.append(Case("cyclic_csr_sgd", lambda: ours_csr.fit(Xs, ys), lambda: sgd.fit(Xs, ys),
                      "SGDClassifier, 1 epoch", 2.0))
    # Without a penalty the CSR steps add their noise lazily (O(nnz) per step, one
    # exact draw of N_Z(0, kN²) per interval between reads of a coordinate); with the
    # default l2 penalty every step draws a dense vector of d + 1 (the row above).
    ours_lazy = DPCyclicSGD(epsilon=1.0, delta=1e-6, epochs=1, batch_size=b, classes=[0, 1],
                            penalty=None)
    cases.append(Case("cyclic_csr_lazy_sgd", lambda: ours_lazy.fit(Xs, ys),
                      lambda: sgd.fit(Xs, ys), "SGDClassifier, 1 epoch", 2.0))
    cases += _lazy_parts_cases(ours_lazy, Xs, ys, sgd)
    # The dense step kernel that bounds rows at their visit (no bounded copy), with a
    # fresh permutation per call and its noise pre-drawn: the estimator's one- and
    # two-pass dense epochs without validation, plan, permutation and noise draw.
    from skdpsparse._kernels.cyclic_sgd import dense_permuted_cyclic_sgd_steps
    from skdpsparse._kernels.linear_losses import LOSS_CODES

    steps = -(-n // b)
    noise = noise_rng.normal(0.0, 0.01, (steps, d + 1))
    ysign = np.where(y == 1, 1.0, -1.0)
    perm_rng = np.random.default_rng(2)
    zero = np.zeros(1)

    def steps_only():
        perm = perm_rng.permutation(n)
        dense_permuted_cyclic_sgd_steps(X, perm, 1.0, ysign[perm], np.zeros(d + 1), 0,
                                        LOSS_CODES["logistic"], 1.0, 1.0, b, 0.1, noise, 0.0,
                                        0.0, 0, 0.0, zero, zero, True)

    cases.append(Case("cyclic_dense_steps", steps_only,
                      lambda: _numpy_dp_sgd_epoch(X, y, b, 0.1, 1.0, 1.0, noise_rng),
                      "NumPy DP-SGD, same steps", 0.67, uses_blas=True))
    return cases


def _lazy_parts_cases(est, X, y, sgd):
    """The lazy CSR epoch's two parts, each against the same baselines: its step
    passes alone (counting and applying, the draws replaced by zeros: the floor
    without noise), and its draws alone (the interval counts of that epoch, one exact
    N_Z(0, kN'^2) draw each) against as many table draws of N_Z(0, N'^2) (the eager
    noise's sampler), both on one thread (2^16 draws per call)."""
    from skdpsparse._kernels import LOSS_CODES
    from skdpsparse._kernels.chacha import key_words
    from skdpsparse._kernels.cyclic_sgd import (
        csr_lazy_cyclic_sgd_steps,
        discrete_gaussian_sums,
        lazy_max_count,
    )
    from skdpsparse._kernels.exact_sampling import DISCRETE_GAUSSIAN, discrete_noise
    from skdpsparse.mechanisms.cyclic_sgd import bound_rows_l2, plan_cyclic_sgd
    from skdpsparse.mechanisms.noise import plan_grid_noise

    n, d = X.shape
    plan = plan_cyclic_sgd(n, d, loss="logistic", norm_bound=est.norm_bound,
                           fit_intercept=True, batch_size=est.batch_size, epochs=1,
                           delta=est.delta, epsilon=est.epsilon)
    grid = plan_grid_noise("gaussian", plan.noise_std,
                           plan.learning_rate * plan.clip_norm / plan.batch_size, d + 1)
    scale = grid.grid_scale + 1
    perm = np.random.default_rng(3).permutation(n)
    Xb = bound_rows_l2(X, plan.norm_bound, order=perm)
    yb = np.where(np.asarray(y)[perm] == 1, 1.0, -1.0)
    row_nnz = int(np.diff(Xb.indptr).max())
    counts = np.empty(plan.n_steps * (plan.batch_size * row_nnz + 1), dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)

    def passes():
        theta, last, scratch = np.zeros(d + 1), np.zeros(d + 1, np.int64), np.zeros(d)
        args = (Xb.indptr, Xb.indices, Xb.data, d, yb, theta, np.arange(n), 0, 0,
                plan.n_steps, LOSS_CODES["logistic"], 1.0, plan.clip_norm,
                plan.batch_size, plan.learning_rate, True, grid.spacing)
        _, used = csr_lazy_cyclic_sgd_steps(*args, last, scratch, lazy_max_count(scale),
                                            np.zeros(0), counts, none, none, True)
        last[:] = 0
        csr_lazy_cyclic_sgd_steps(*args, last, scratch, lazy_max_count(scale),
                                  np.zeros(used), counts, none, none, False)
        return used

    used = passes()
    ks = np.random.default_rng(4).choice(counts[:used], 1 << 16)  # the epoch's mix of k
    key = key_words(os.urandom(32))
    print(f"  cyclic_csr_lazy: {used} draws in the epoch's steps (+{d + 1} at the end), "
          f"grid scale N' = {scale}, interval counts k in [{ks.min()}, {ks.max()}]")
    return [Case("cyclic_lazy_passes", passes, lambda: sgd.fit(X, y),
                 "SGDClassifier, 1 epoch", None),
            Case("cyclic_lazy_draws", lambda: discrete_gaussian_sums(ks, scale, key),
                 lambda: discrete_noise(ks.size, DISCRETE_GAUSSIAN, scale, key, 0),
                 "table draws N_Z(0, N'^2)", None)]


def output_perturbation_cases(quick):
    from sklearn.linear_model import LogisticRegression

    from skdpsparse import DPOutputPerturbationClassifier
    from skdpsparse._solvers.erm import InMemoryRows
    from skdpsparse.datasets import make_sparse_classification
    from skdpsparse.mechanisms.output_perturbation import (
        bound_inputs,
        certified_objective,
        plan_output_perturbation,
    )
    from skdpsparse.mechanisms.projection import row_bounds

    n, d, s = (20_000 if quick else 100_000), 4096, 32
    X, y, _ = make_sparse_classification(n, d, s, random_state=0)
    X = sp.csr_matrix(X, dtype=np.float64)
    est = DPOutputPerturbationClassifier(epsilon=1.0, sparsity=s, classes=[0, 1])
    est.fit(X, y)
    lam = est.alpha_
    c = est.intercept_scaling_
    plan = plan_output_perturbation(n, d, 1, loss="logistic", epsilon=1.0, delta=1e-6,
                                    alpha=lam, sparsity=s, intercept_scaling=c)
    # One evaluation of what the solver calls: the exact-sum objective (loss, gradient
    # and its error bounds, with the Python around the kernel), at a point near the
    # solution's scale, on the rows as the fit reads them (each scaled by its bounding
    # factor where it is read, no bounded copy).
    _, yb = bound_inputs(X, (2.0 * y - 1)[None], "logistic", norm_bound=1.0,
                         sparsity=s, label_bound=1.0)
    objective = certified_objective(
        InMemoryRows(X, yb, row_bounds=row_bounds(plan.norm_bound, plan.sparsity)), plan)
    theta = np.random.default_rng(0).standard_normal(d + 1) * 0.01
    ys = yb[0]

    def scipy_eval():
        m = X @ theta[:d] + c * theta[d]
        loss = np.logaddexp(0.0, -ys * m).mean()
        r = -ys / (1.0 + np.exp(ys * m))
        return loss, X.T @ r / n

    # The same objective and stopping test: our solver stops at ‖∇F‖₂ ≤ tol·λΔ₂/2
    # (Δ₂ the plan's ℓ2 sensitivity); the intercept is the coefficient of a constant
    # feature c for scikit-learn too.
    Xa = sp.hstack([X, np.full((n, 1), c)]).tocsr()
    sk = LogisticRegression(C=1.0 / (n * lam), fit_intercept=False,
                            tol=0.5 * plan.tol * lam * plan.sensitivity_l2, max_iter=10_000)
    # Dense: the same rows as an array, d = 256 (a dense n x 4096 would be 0.7 GB at
    # n = 1e5).
    Xd, yd, _ = make_sparse_classification(n, 256, s, random_state=1)
    Xd = Xd.toarray()
    est_d = DPOutputPerturbationClassifier(epsilon=1.0, sparsity=s, classes=[0, 1])
    est_d.fit(Xd, yd)
    plan_d = plan_output_perturbation(n, 256, 1, loss="logistic", epsilon=1.0, delta=1e-6,
                                      alpha=est_d.alpha_, sparsity=s,
                                      intercept_scaling=est_d.intercept_scaling_)
    Xda = np.hstack([Xd, np.full((n, 1), est_d.intercept_scaling_)])
    sk_d = LogisticRegression(C=1.0 / (n * est_d.alpha_), fit_intercept=False,
                              tol=0.5 * plan_d.tol * est_d.alpha_ * plan_d.sensitivity_l2,
                              max_iter=10_000)
    return [Case("outpert_eval", lambda: objective.fge(theta), scipy_eval,
                 "SciPy X@w, X.T@r + NumPy loss", 1.0, uses_blas=True),
            Case("outpert_fit", lambda: est.fit(X, y), lambda: sk.fit(Xa, y),
                 "LogisticRegression(lbfgs)", 1.0, uses_blas=True),
            Case("outpert_fit_dense", lambda: est_d.fit(Xd, yd), lambda: sk_d.fit(Xda, yd),
                 "LogisticRegression(lbfgs)", 1.0, uses_blas=True)]


def bias_reduced_cases(quick):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_bias_reduced_sgd import S, generated

    from skdpsparse import _kernels
    from skdpsparse.linear_model._bias_reduced_sgd import DPBiasReducedSGDClassifier
    from skdpsparse.mechanisms.noise import add_noise_inplace
    from skdpsparse.mechanisms.projection import plan_projection

    n, d, steps = 20_000, 10**6, 4
    X, y, _, _, s = generated(n, d)
    est = DPBiasReducedSGDClassifier(sparsity=s, max_iter=steps, classes=[0, 1])
    # The floor of bench_bias_reduced_sgd.floor_time, `steps` times.
    plan = plan_projection(2, d + 1, epsilon=0.25, delta=1e-6 / 4,
                           norm_bound=math.sqrt(2), sparsity=S + 1)
    z = np.zeros(d + 1)
    gen = np.random.default_rng()

    def floors():
        for _ in range(steps):
            z[:] = 0.0
            add_noise_inplace(z, gen, plan.kind, plan.noise_scale,
                              sensitivity=plan.sensitivity,
                              true_sensitivity=plan.true_sensitivity)
            _kernels.project_l1_ball(z, math.sqrt(2) * math.sqrt(S + 1), out=z)

    def fit():
        est.fit(X, y)
        assert est.n_iter_ == steps, est.n_iter_

    return [Case("bias_reduced_step", fit, floors, "noise draw + l1 projection", 3.0)]


def sampler_cases(quick):
    from skdpsparse._kernels import exact_sampling as es
    from skdpsparse._kernels.chacha import key_words

    count = 10**6 if quick else 10**7
    key = key_words(os.urandom(32))
    scale = 2**29 + 12345  # the grid scale of a typical release (b/γ ≥ 2^29)
    gen = np.random.default_rng()
    return [Case("samplers_gauss",
                 lambda: es.discrete_noise(count, es.DISCRETE_GAUSSIAN, scale, key, 0),
                 lambda: gen.standard_normal(count), "numpy standard_normal", 3.0),
            Case("samplers_laplace",
                 lambda: es.discrete_noise(count, es.DISCRETE_LAPLACE, scale, key, 0),
                 lambda: gen.laplace(0.0, 1.0, count), "numpy laplace", None)]


GROUPS = {"sparse_mean": sparse_mean_cases, "heavy_tailed": heavy_tailed_cases,
          "cyclic": cyclic_cases, "output_perturbation": output_perturbation_cases,
          "bias_reduced": bias_reduced_cases, "samplers": sampler_cases}


def _commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--full", action="store_true", help="the issue's sizes, not quick")
    parser.add_argument("--only", default="", help="comma-separated groups: "
                        + ",".join(GROUPS))
    parser.add_argument("--out", default=None)
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with the process's CPU time instead of the wall clock "
                        "(steadier on a loaded machine for single-threaded code; a "
                        "threaded call counts every thread's time, spinning included)")
    args = parser.parse_args(argv)
    if args.cpu_time:
        _CLOCK[0] = time.process_time
    warnings.simplefilter("ignore")  # leak warnings of undeclared classes etc.: not timed
    commit = _commit()
    print(f"commit {commit}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M')}, "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}, clock "
          f"{'process CPU time' if args.cpu_time else 'wall'}")
    for pool in threadpool_info():
        print(f"  threadpool: {pool.get('internal_api')} {pool.get('version')} "
              f"num_threads={pool.get('num_threads')} ({pool.get('filepath', '')})")
    groups = [g for g in args.only.split(",") if g] or list(GROUPS)
    rows = []
    for group in groups:
        for case in GROUPS[group](quick=not args.full):
            for blas in ((1, None) if case.uses_blas else (None,)):
                rows.append(run_case(case, args.rounds, blas))
                r = rows[-1]
                mark = "" if r["met"] is None else ("  met" if r["met"] else "  MISSED")
                target = "-" if r["target"] is None else f"{r['target']:.2f}"
                print(f"{r['case']:<20} {r['ours_s']:9.4f} s  {r['baseline']:<32} "
                      f"({r['blas']:>8}) {r['baseline_s']:9.4f} s  ratio "
                      f"{r['ratio_min']:.2f}/{r['ratio_median']:.2f}/{r['ratio_max']:.2f}"
                      f"  target {target}{mark}", flush=True)
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"{commit}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"commit": commit, "cpus": os.cpu_count(),
                               "date": time.strftime("%Y-%m-%d %H:%M"),
                               "clock": "process_time" if args.cpu_time else "perf_counter",
                               "load_average": os.getloadavg(),
                               "quick": not args.full, "rounds": args.rounds,
                               "threadpools": threadpool_info(), "rows": rows}, indent=1))
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
