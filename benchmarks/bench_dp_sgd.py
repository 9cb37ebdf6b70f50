"""Benchmark of DPCyclicSGD (cyclic DP-SGD, Kong and Ribero 2024). Not a test.

1. Noise multiplier z for (ε, δ) = (1, 1e-5) by last-iterate accounting vs composition,
   over E ∈ {1, 5, 20} and m ∈ {0, 0.1, 1}: the table of
   ``bench_last_iterate_table.py`` (imported, not copied).
2. Epoch time, logistic loss, dense n = 10⁵, d = 100, b = 256, same epochs, in one run:
   DPCyclicSGD (whole fit, and the mechanism alone: bounded copy and noisy steps)
   against scikit-learn's non-private SGDClassifier and a plain NumPy DP-SGD, timed in
   the same rounds; ratios paired per round (issue 24's targets: the fit at most 0.67×
   the NumPy DP-SGD and 0.5× SGDClassifier). ``--opacus`` adds Opacus (torch CPU) in a
   virtual environment of its own; needs network access the first time, and is
   skipped with a message when anything fails.
3. Test accuracy vs ε on ``load_sparse_digits(binary=True)`` (CSR, d = 29 760) and
   ``make_sparse_classification`` (CSR, n = 5·10⁴, d = 1000, 10 nonzeros per row),
   next to non-private logistic regression.

4. Multiclass test accuracy vs ε: the joint model (one run) against one-vs-rest as K
   binary fits at ε/K each, the same total budget.

5. DPSGDClassifier/Regressor's accounting (batches sampled without replacement,
   replace-one, discrete Gaussian): the noise multiplier z = σ/(2C) at the same
   (ε, δ, T) by Wang, Balle and Kasiviswanathan's Theorem 9 alone (the bound used
   before), with their Theorem 27 (continuous Gaussian only), and by the ternary
   bound the library uses now; next to the σ/C of a Poisson-sampled continuous
   Gaussian with add/remove neighbours (the DP-SGD recipe's accounting) and the
   variance ratio (2z/(σ/C))². Pure computation, no timing.

6. The same accountants on real tasks of ``bench_real_data.py`` (tweets, income; test
   split, one seed by default): DPSGDClassifier / DPSGDRegressor with defaults, fitted
   with Theorem 9 alone (patched in for the run) and with the ternary bound, paired in
   the same process and seed: batch size, z and the test score. Minutes per fit on
   tweets (2^18 features).

7. The defaults of DPSGDClassifier/Regressor studied on SYNTHETIC sparse data (never a
   real test split): hashed-text-like rows (Zipf-distributed hashed tokens, counts,
   ℓ2-normalised) and one-hot-like rows (7 Zipf-distributed categoricals), logistic
   and linear models, ε ∈ {0.5, 1, 2, 4}: the score of the "auto" schedule against
   the same fit with one of batch size ×¼ or ×4, epochs 10 or 40, learning rate ×½
   or ×2, clip ×½ (the others at "auto"), on a fresh sample of the same synthetic
   distribution. Minutes; ``--study-seeds``.

Run:  python benchmarks/bench_dp_sgd.py                 (all parts, a few minutes)
      python benchmarks/bench_dp_sgd.py --part 5
      python benchmarks/bench_dp_sgd.py --part 6 --tasks tweets income --real-eps 1 4
      python benchmarks/bench_dp_sgd.py --part 2 --epochs 10 --opacus
      python benchmarks/bench_dp_sgd.py --part 7 --study-seeds 2
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.model_selection import train_test_split

from skdpsparse.datasets import load_sparse_digits, make_sparse_classification
from skdpsparse.exceptions import PrivacyLeakWarning
from skdpsparse.linear_model._cyclic_sgd import DPCyclicSGD
from skdpsparse._kernels.cyclic_sgd import (
    NO_CONSTRAINT,
    dense_cyclic_sgd_steps,
    dense_gather_bounded_rows,
    dense_sequential_cyclic_sgd_steps,
)
from skdpsparse.mechanisms.cyclic_sgd import bound_rows_l2, cyclic_sgd, plan_cyclic_sgd
from skdpsparse.mechanisms.noise import grid_noise
from skdpsparse.utils import fit_random_source

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_last_iterate_table import table  # noqa: E402

EPS, DELTA = 1.0, 1e-5
warnings.simplefilter("ignore", PrivacyLeakWarning)  # classes are declared below


# ---------------------------------------------------------------------------- part 2
def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / math.sqrt(d)  # rows of norm ≈ 1
    y = (X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n) > 0).astype(np.int64)
    return X, y


def numpy_dp_sgd(X, y01, *, epochs, batch_size, learning_rate, clip_norm, noise_std, rng):
    """Plain NumPy cyclic DP-SGD (logistic, intercept, no penalty): the baseline the
    compiled loop must beat. Vectorized per batch with BLAS."""
    n, d = X.shape
    y = np.where(y01 == 1, 1.0, -1.0)
    aug_norms = np.sqrt(np.einsum("ij,ij->i", X, X) + 1.0)
    order = rng.permutation(n)
    theta, pos = np.zeros(d + 1), 0
    step = learning_rate / batch_size
    for _ in range(math.ceil(epochs * n / batch_size)):
        rows = order[(pos + np.arange(batch_size)) % n]
        pos = (pos + batch_size) % n
        A = X[rows]
        der = -y[rows] / (1.0 + np.exp(y[rows] * (A @ theta[:d] + theta[d])))
        der *= np.minimum(1.0, clip_norm / np.maximum(np.abs(der) * aug_norms[rows], 1e-300))
        theta[:d] -= step * (A.T @ der)
        theta[d] -= step * der.sum()
        theta += noise_std * rng.standard_normal(d + 1)
    return theta


def _steps_general(X, targets, perm, plan, noise, spacing):
    """bound_rows_l2's permuted copy, then dense_cyclic_sgd_steps (norms recomputed
    at every visit): the dense path before issue 24."""
    n, d = X.shape
    Xb, one = bound_rows_l2(X, plan.norm_bound, order=perm), np.zeros(1)
    theta = np.zeros(d + 1)
    dense_cyclic_sgd_steps(Xb, targets[perm], theta, np.arange(n), 0, 1, 1.0, plan.clip_norm,
                           plan.batch_size, plan.learning_rate, noise, plan.alpha, 0.0,
                           NO_CONSTRAINT, 0.0, one, one, True, spacing)
    return theta


def _steps_sequential(X, targets, perm, plan, noise, spacing):
    """The same steps as the mechanism runs them now: one-pass copy with the row
    norms, then dense_sequential_cyclic_sgd_steps."""
    n, d = X.shape
    Xb, norms = dense_gather_bounded_rows(X, perm, plan.norm_bound, np.empty((n, d)),
                                          np.empty(n))
    theta, one = np.zeros(d + 1), np.zeros(1)
    dense_sequential_cyclic_sgd_steps(Xb, norms, targets[perm], theta, 0, 1, 1.0,
                                      plan.clip_norm, plan.batch_size, plan.learning_rate,
                                      noise, plan.alpha, 0.0, NO_CONSTRAINT, 0.0, one, one,
                                      True, spacing)
    return theta


OPACUS_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np, torch
    from opacus import PrivacyEngine
    n, d, b, epochs, z, clip, lr = json.loads(sys.argv[1])
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.standard_normal((n, d)) / d ** 0.5, dtype=torch.float32)
    y = (X @ torch.tensor(rng.standard_normal(d), dtype=torch.float32) > 0).float()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=b)
    model = torch.nn.Linear(d, 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    model, opt, loader = PrivacyEngine().make_private(
        module=model, optimizer=opt, data_loader=loader, noise_multiplier=z,
        max_grad_norm=clip, poisson_sampling=False)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    start = time.perf_counter()
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss_fn(model(xb).squeeze(1), yb).backward()
            opt.step()
    print(json.dumps({"seconds": time.perf_counter() - start}))
""")


def opacus_epoch_time(n, d, b, epochs, z, clip, lr, venv):
    """Seconds per epoch of Opacus DP-SGD in ``venv`` (created with torch CPU and
    opacus on first use); None, with the reason printed, if anything fails."""
    python = os.path.join(venv, "bin", "python")
    try:
        if not os.path.exists(python):
            print(f"    creating {venv} (torch CPU + opacus; needs network) ...")
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            # The CPU build by its local version tag (the configured package index carries
            # it), never a CUDA build; few retries so that an offline run fails in seconds.
            pip = [python, "-m", "pip", "install", "-q", "--retries", "1", "--timeout", "20"]
            try:
                subprocess.run(pip + ["torch==2.13.0+cpu"], check=True, timeout=1800)
                subprocess.run(pip + ["opacus"], check=True, timeout=600)
            except (OSError, subprocess.SubprocessError):
                shutil.rmtree(venv, ignore_errors=True)  # retry from scratch next time
                raise
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
            fh.write(OPACUS_SCRIPT)
        try:
            out = subprocess.run([python, fh.name, json.dumps([n, d, b, epochs, z, clip, lr])],
                                 capture_output=True, text=True, check=True, timeout=3600)
        finally:
            os.unlink(fh.name)
        return json.loads(out.stdout.strip().splitlines()[-1])["seconds"] / epochs
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, KeyError) as exc:
        detail = getattr(exc, "stderr", None) or exc
        print(f"    Opacus comparison skipped: {str(detail).strip()[-300:]}")
        return None


def speed(epochs, reps, opacus, venv, n=100_000, d=100, b=256):
    X, y = _data(n, d)
    # random_state=None, as a private fit runs: a seed derives the noise key from a
    # digest of the data, which is timed separately below.
    est = DPCyclicSGD(epsilon=EPS, delta=DELTA, batch_size=b, epochs=epochs, classes=[0, 1])
    est.fit(X[:2000], y[:2000])  # warm-up: numba compile / cache load, not timed
    plan = plan_cyclic_sgd(n, d, loss="logistic", norm_bound=1.0, fit_intercept=True,
                           batch_size=b, epochs=epochs, delta=DELTA, epsilon=EPS,
                           penalty="l2", alpha=1e-4)
    targets = np.where(y == 1, 1.0, -1.0)
    sgd = SGDClassifier(loss="log_loss", max_iter=epochs, tol=None, random_state=0)
    noise, spacing = grid_noise((plan.n_steps, d + 1), None, "gaussian", plan.noise_std,
                                sensitivity=plan.learning_rate * plan.clip_norm / b)
    times = {"fit": [], "loop": [], "sgd": [], "numpy": [], "general": [], "sequential": []}
    for rep in range(reps):
        # The dense path's two versions on the same noise (issue 24): the bounded,
        # permuted copy then the general kernel, against the one-pass copy with the
        # row norms then the sequential kernel that the mechanism now runs.
        perm = np.random.default_rng(rep).permutation(n)
        t0 = time.perf_counter()
        _steps_general(X, targets, perm, plan, noise, spacing)
        times["general"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _steps_sequential(X, targets, perm, plan, noise, spacing)
        times["sequential"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        est.fit(X, y)
        times["fit"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        cyclic_sgd(X, targets, plan, np.random.default_rng(rep))
        times["loop"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning: fixed epochs on purpose
            sgd.fit(X, y)
        times["sgd"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        numpy_dp_sgd(X, y, epochs=epochs, batch_size=b, learning_rate=plan.learning_rate,
                     clip_norm=plan.clip_norm, noise_std=plan.noise_std,
                     rng=np.random.default_rng(rep))
        times["numpy"].append(time.perf_counter() - t0)
    per = {k: float(np.median(v)) / epochs for k, v in times.items()}

    def ratio(a, b):
        # Paired per round (both timed in the same round): min / median / max.
        r = np.array(times[a]) / np.array(times[b])
        return f"{r.min():.2f} / {np.median(r):.2f} / {r.max():.2f}"

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n[2] seconds per epoch, logistic, dense n={n}, d={d}, b={b}, {epochs} epochs "
          f"(median of {reps}); z={est.noise_multiplier_:.3f} for ({EPS:g}, {DELTA:g}) by "
          f"{est.accounting_['bound']}; load average {load:.1f} on {os.cpu_count()} CPUs "
          "(only the ratios, paired per round, are comparable between runs)")
    print(f"    DPCyclicSGD.fit (validation, calibration, bounding, loop): {per['fit']:.4f}")
    print(f"    noisy-step loop alone (mechanisms.cyclic_sgd):            {per['loop']:.4f}")
    print(f"    sklearn SGDClassifier(log_loss), non-private, b=1:        {per['sgd']:.4f}")
    print(f"    plain NumPy DP-SGD, same steps:                           {per['numpy']:.4f}")
    print(f"    ratios min / median / max: fit/NumPy {ratio('fit', 'numpy')} (target <= 0.67), "
          f"fit/SGDClassifier {ratio('fit', 'sgd')} (target <= 0.5), "
          f"loop/NumPy {ratio('loop', 'numpy')}")
    print(f"    dense path, copy + steps on the same noise: general kernel "
          f"{per['general']:.4f}, sequential kernel {per['sequential']:.4f}; "
          f"sequential/general {ratio('sequential', 'general')}, "
          f"sequential/NumPy {ratio('sequential', 'numpy')}")
    t0 = time.perf_counter()
    fit_random_source(0, est, X, y)
    digest = time.perf_counter() - t0
    print(f"    (with random_state=0 a fit also digests the data for its noise key: "
          f"{digest:.4f} s once, {digest / (per['numpy'] * epochs):.2f}x the NumPy run)")
    print(f"    accuracy on the training rows: DPCyclicSGD {est.score(X, y):.3f}, "
          f"SGDClassifier {sgd.score(X, y):.3f}")
    if opacus:
        sec = opacus_epoch_time(n, d, b, epochs, est.noise_multiplier_, est.clip_norm_,
                                est.learning_rate_, venv)
        if sec is not None:
            print(f"    Opacus (torch CPU, 1 thread), same steps:                 {sec:.4f}"
                  f"  ratio Opacus/loop {sec / per['loop']:.1f}")


# ---------------------------------------------------------------------------- part 3
def _models():
    """(label, factory(eps, seed)) of the private classifiers compared in part 3."""
    from skdpsparse.linear_model import DPNoisySGDClassifier

    models = [
        ("DPCyclicSGD defaults (auto schedule)",
         lambda e, s: DPCyclicSGD(epsilon=e, delta=DELTA, classes=[0, 1], random_state=s)),
        ("DPCyclicSGD b=2048, E=20, alpha=1e-3",
         lambda e, s: DPCyclicSGD(epsilon=e, delta=DELTA, classes=[0, 1], batch_size=2048,
                                  epochs=20, alpha=1e-3, random_state=s)),
        ("DPNoisySGDClassifier (Arora et al. 2020, rdp)",
         lambda e, s: DPNoisySGDClassifier(epsilon=e, delta=DELTA, noise_calibration="rdp",
                                           classes=[0, 1], random_state=s)),
    ]
    try:
        from skdpsparse.linear_model import DPOutputPerturbationClassifier
    except ImportError:  # not built yet
        return models
    models.append(("DPOutputPerturbationClassifier",
                   lambda e, s: DPOutputPerturbationClassifier(epsilon=e, delta=DELTA,
                                                               random_state=s)))
    return models


def accuracy(epsilons, seeds):
    X, y = load_sparse_digits(return_X_y=True, binary=True)
    Xs, ys, _ = make_sparse_classification(50_000, 1000, 10, random_state=0)
    for name, (X, y) in [("load_sparse_digits(binary=True)", (X, y)),
                         ("make_sparse_classification(5e4, 1000, 10)", (Xs, ys))]:
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0,
                                              stratify=y)
        base = LogisticRegression(max_iter=2000).fit(Xtr, ytr).score(Xte, yte)
        print(f"\n[3] test accuracy, {name}: n_train={Xtr.shape[0]}, d={X.shape[1]}, "
              f"delta={DELTA:g}, mean of {seeds} seeds; non-private LogisticRegression "
              f"{base:.3f}")
        print(f"    {'model':<40}" + "".join(f"{'eps=' + format(e, 'g'):>9}" for e in epsilons))
        for label, factory in _models():
            row = []
            for eps in epsilons:
                scores = []
                for seed in range(seeds):
                    try:
                        scores.append(factory(eps, seed).fit(Xtr, ytr).score(Xte, yte))
                    except ValueError:  # e.g. a budget the paper's noise cannot certify
                        scores.append(np.nan)
                row.append(np.mean(scores))
            print(f"    {label:<40}" + "".join(f"{a:>9.3f}" for a in row))


# ---------------------------------------------------------------------------- part 4
def multiclass(epsilons, seeds, n_classes=(3, 5, 10)):
    """Test accuracy of the joint multiclass model (one run, multinomial logistic,
    gradient bound √2·G) against one-vs-rest as K separate binary fits at ε/K each
    (basic composition, what the docstring advised before), same (ε, δ) in total."""
    from sklearn.datasets import make_classification
    from sklearn.multiclass import OneVsRestClassifier

    for k in n_classes:
        X, y = make_classification(30_000, 20, n_informative=10, n_classes=k,
                                   n_clusters_per_class=1, class_sep=2.0, random_state=0)
        X /= np.percentile(np.linalg.norm(X, axis=1), 95)  # rows of norm ≲ 1 (public scaling)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0,
                                              stratify=y)
        print(f"\n[4] test accuracy, make_classification(3e4, 20, {k} classes), "
              f"delta={DELTA:g}, mean of {seeds} seeds")
        print(f"    {'model':<44}" + "".join(f"{'eps=' + format(e, 'g'):>9}" for e in epsilons))
        rows = {"joint (multinomial, one run)": [], f"one-vs-rest, {k} fits at eps/{k}": []}
        for eps in epsilons:
            joint, ovr = [], []
            for seed in range(seeds):
                joint.append(DPCyclicSGD(epsilon=eps, delta=DELTA, classes=list(range(k)),
                                         random_state=seed).fit(Xtr, ytr).score(Xte, yte))
                base = DPCyclicSGD(epsilon=eps / k, delta=DELTA / k, classes=[0, 1],
                                   random_state=seed)
                ovr.append(OneVsRestClassifier(base).fit(Xtr, ytr).score(Xte, yte))
            rows["joint (multinomial, one run)"].append(np.mean(joint))
            rows[f"one-vs-rest, {k} fits at eps/{k}"].append(np.mean(ovr))
        for label, row in rows.items():
            print(f"    {label:<44}" + "".join(f"{a:>9.3f}" for a in row))


# ---------------------------------------------------------------------------- part 5
def accounting_table(settings=((12_456, 2000, 125), (100_000, 2000, 1000),
                               (20_000, 1000, 400)), epsilons=(0.5, 1.0, 2.0, 4.0, 8.0),
                     delta=1e-6):
    """Noise multipliers of the sampled-without-replacement accountants (part 5)."""
    from skdpsparse.accounting import (
        calibrate_noise_multiplier,
        poisson_subsampled_gaussian_rdp,
        subsampled_without_replacement_discrete_gaussian_rdp,
        subsampled_without_replacement_gaussian_rdp,
    )

    print(f"\n[5] DP-SGD accounting: z = sigma/(2C) at the same (eps, T), delta={delta:g}")
    print(f"    {'n':>7} {'b':>5} {'T':>5} {'eps':>5} {'Thm 9':>8} {'Thm 27':>8} "
          f"{'ternary':>8} {'recipe s/C':>11} {'var ratio':>10} {'before':>8}")
    for n, b, steps in settings:
        for eps in epsilons:
            def z_of(curve):
                return calibrate_noise_multiplier(lambda z: steps * curve(z), eps, delta,
                                                  rtol=1e-4)
            thm9 = z_of(lambda z: subsampled_without_replacement_gaussian_rdp(
                b, n, z, moments_bound=False))
            thm27 = z_of(lambda z: subsampled_without_replacement_gaussian_rdp(b, n, z))
            ternary = z_of(lambda z: subsampled_without_replacement_discrete_gaussian_rdp(
                b, n, z))
            recipe = z_of(lambda z: poisson_subsampled_gaussian_rdp(b / n, z))
            print(f"    {n:>7} {b:>5} {steps:>5} {eps:>5g} {thm9:>8.3f} {thm27:>8.3f} "
                  f"{ternary:>8.3f} {recipe:>11.3f} {(2 * ternary / recipe) ** 2:>10.2f} "
                  f"{(2 * thm9 / recipe) ** 2:>8.1f}")


# ---------------------------------------------------------------------------- part 6
def real_tasks(tasks, epsilons, seeds):
    """DPSGD defaults on real tasks, accounted by Theorem 9 alone vs the ternary bound
    (part 6): the only difference is the one-step curve used by the accountant."""
    from contextlib import contextmanager

    from skdpsparse.accounting import subsampled_without_replacement_gaussian_rdp
    from skdpsparse.linear_model import DPSGDClassifier, DPSGDRegressor
    from skdpsparse.mechanisms import dp_sgd as dp_sgd_module

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from real_data.datasets import load_task, split
    from real_data.linear import score

    @contextmanager
    def theorem9():
        ternary = dp_sgd_module.dp_sgd_rdp

        def old(batch_size, n_samples, noise_multiplier, n_steps, orders=None):
            kwargs = {} if orders is None else {"orders": orders}
            return int(n_steps) * subsampled_without_replacement_gaussian_rdp(
                int(batch_size), int(n_samples), float(noise_multiplier),
                moments_bound=False, **kwargs)

        dp_sgd_module.dp_sgd_rdp = old
        try:
            yield
        finally:
            dp_sgd_module.dp_sgd_rdp = ternary

    for name in tasks:
        task = load_task(name)
        print(f"\n[6] {name}: n={task.n_samples}, d={task.n_features}, DPSGD defaults, "
              f"delta=1e-6, test split, seeds {list(range(seeds))}")
        print(f"    {'eps':>5} {'accountant':<10} {'batch':>6} {'steps':>6} {'z':>8} "
              f"{'score':>8} {'fit s':>7}")
        for seed in range(seeds):
            (Xtr, ytr), _, (Xte, yte) = split(task, seed)
            for eps in epsilons:
                for label in ("Thm 9", "ternary"):
                    if task.kind == "classification":
                        est = DPSGDClassifier(epsilon=eps, classes=np.unique(task.y).tolist(),
                                              random_state=seed)
                    else:
                        est = DPSGDRegressor(epsilon=eps, random_state=seed)
                    start = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)
                        if label == "Thm 9":
                            with theorem9():
                                est.fit(Xtr, ytr)
                        else:
                            est.fit(Xtr, ytr)
                    took = time.perf_counter() - start
                    value = score(task.kind, yte, est.predict(Xte))
                    print(f"    {eps:>5g} {label:<10} {est.batch_size_:>6} {est.n_steps_:>6} "
                          f"{est.noise_multiplier_:>8.3f} {value:>8.4f} {took:>7.1f}",
                          flush=True)


# ---------------------------------------------------------------------------- part 7
def _zipf_probs(k, rng, a=1.1, shift=5.0):
    p = 1.0 / (np.arange(k) + shift) ** a
    return rng.permutation(p / p.sum())


def synthetic_hashed(n, seed, d=1 << 15, mean_tokens=30, kind="logistic", world=0):
    """Text-like CSR rows: 1 + Poisson(30) tokens per row drawn from a Zipf law over d
    hashed columns, counts, rows ℓ2-normalised; a logistic (or linear) model whose
    weights live on every column (rare ones included). ``world`` fixes the
    distribution (weights, column law); ``seed`` the sample."""
    import scipy.sparse as sp

    wr = np.random.default_rng(10_000 + world)
    probs = _zipf_probs(d, wr)
    w = wr.standard_normal(d) * 2.0
    rng = np.random.default_rng(seed)
    lengths = 1 + rng.poisson(mean_tokens, n)
    cols = rng.choice(d, size=lengths.sum(), p=probs)
    rows = np.repeat(np.arange(n), lengths)
    X = sp.csr_matrix((np.ones(cols.size), (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1.0 / norms) @ X
    margin = X @ w
    if kind == "logistic":
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-2.0 * margin))).astype(np.int64)
    else:
        y = 3.0 + margin + 0.5 * rng.standard_normal(n)
    return sp.csr_matrix(X), y


def synthetic_onehot(n, seed, cards=(10, 30, 100, 300, 1000, 2000, 800), kind="logistic",
                     world=0):
    """One-hot-like CSR rows: 7 categoricals, each Zipf-distributed over its categories,
    one column per category, entries 1/√7 (ℓ2 norm 1); category effects N(0, 1)."""
    import scipy.sparse as sp

    wr = np.random.default_rng(20_000 + world)
    laws = [_zipf_probs(c, wr) for c in cards]
    effects = [wr.standard_normal(c) for c in cards]
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(cards)[:-1]])
    picks = [rng.choice(c, size=n, p=p) for c, p in zip(cards, laws)]
    cols = np.stack([o + pk for o, pk in zip(offsets, picks)], axis=1).ravel()
    rows = np.repeat(np.arange(n), len(cards))
    X = sp.csr_matrix((np.full(cols.size, 1.0 / math.sqrt(len(cards))), (rows, cols)),
                      shape=(n, int(sum(cards))))
    signal = sum(e[pk] for e, pk in zip(effects, picks)) / math.sqrt(len(cards))
    if kind == "logistic":
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-1.5 * signal))).astype(np.int64)
    else:
        y = 3.0 + signal + 0.5 * rng.standard_normal(n)
    return X, y


def synthetic_ratings(n, seed, n_users=670, n_items=9000, kind="linear", world=0):
    """MovieLens-like CSR rows: one-hot user and item (two entries 1/√2 per row, ℓ2 norm
    1), both Zipf-popular; the rating is 3.75 + user effect (sd 0.4) + item effect (sd
    0.5) + noise (sd 0.85, a reflected Gamma(3): skewness −1.15), rounded to half stars
    and clipped into [0.5, 5]: a target that fills its public range and is skewed to the
    left (mean 3.7, median 4, sd 1.0), as star ratings are."""
    import scipy.sparse as sp

    wr = np.random.default_rng(30_000 + world)
    pu, pi = _zipf_probs(n_users, wr, a=0.8), _zipf_probs(n_items, wr, a=1.0)
    eu, ei = 0.4 * wr.standard_normal(n_users), 0.5 * wr.standard_normal(n_items)
    rng = np.random.default_rng(seed)
    u, i = rng.choice(n_users, size=n, p=pu), rng.choice(n_items, size=n, p=pi)
    cols = np.stack([u, n_users + i], axis=1).ravel()
    X = sp.csr_matrix((np.full(2 * n, math.sqrt(0.5)), (np.repeat(np.arange(n), 2), cols)),
                      shape=(n, n_users + n_items))
    skewed = -(rng.gamma(3.0, 1.0, n) - 3.0) / math.sqrt(3.0)
    latent = 3.75 + eu[u] + ei[i] + 0.85 * skewed
    return X, np.clip(np.round(2.0 * latent) / 2.0, 0.5, 5.0)


STUDY_DATA = {
    "hashed-logistic n=2e4": (synthetic_hashed, 20_000, "logistic"),
    "onehot-logistic n=1e5": (synthetic_onehot, 100_000, "logistic"),
    "onehot-linear n=5e4": (synthetic_onehot, 50_000, "linear"),
    "hashed-linear n=2e4": (synthetic_hashed, 20_000, "linear"),
    # The public shape of the tweets task of bench_real_data.py (12 456 training rows,
    # 2^18 hashed columns): synthetic rows of that shape, not the tweets.
    "hashed-logistic n=12456 d=2^18": (
        lambda n, seed, kind="logistic": synthetic_hashed(n, seed, d=1 << 18, kind=kind),
        12_456, "logistic"),
    # The public shape of the movielens task (60 002 training rows, 671 users, 9 066
    # movies; ratings in [0.5, 5], label_bound=5 public): synthetic, not the ratings.
    "ratings-linear n=6e4": (synthetic_ratings, 60_000, "linear"),
}
STUDY_VARIANTS = ("auto", "batch/4", "batch*4", "epochs=10", "epochs=40", "lr/2", "lr*2",
                  "clip/2")


def defaults_study(epsilons, seeds, datasets=None, variants=STUDY_VARIANTS):
    """Part 7: each variant changes one hyperparameter of the fitted "auto" schedule."""
    from sklearn.metrics import accuracy_score, r2_score

    from skdpsparse.linear_model import DPSGDClassifier, DPSGDRegressor

    results = {}
    for name in (datasets or STUDY_DATA):
        make, n, kind = STUDY_DATA[name]
        Xte, yte = make(20_000, 999, kind=kind)
        print(f"\n[7] {name}: d={Xte.shape[1]}, delta=1e-6, fresh synthetic test sample; "
              f"mean over seeds {list(range(seeds))}", flush=True)
        print("    " + f"{'eps':>5} " + " ".join(f"{v:>10}" for v in variants)
              + "   (auto: batch, steps)")
        for eps in epsilons:
            cells = {v: [] for v in variants}
            sched = None
            for seed in range(seeds):
                X, y = make(n, seed, kind=kind)
                for v in variants:
                    if kind == "logistic":
                        est = DPSGDClassifier(epsilon=eps, classes=[0, 1], random_state=seed)
                    else:
                        # The synthetic targets are within ±10 by construction (public
                        # for the study; the real-data benchmark uses "private").
                        est = DPSGDRegressor(epsilon=eps, label_bound=10.0, random_state=seed)
                    if v != "auto":
                        auto = auto_fits[(name, eps, seed)]
                        key, _, factor = v.partition("*") if "*" in v else v.partition("/")
                        if key.startswith("epochs="):
                            est.set_params(epochs=float(key.split("=")[1]))
                        else:
                            f = float(factor) if "*" in v else 1.0 / float(factor)
                            attr = {"batch": "batch_size_", "lr": "learning_rate_",
                                    "clip": "clip_norm_"}[key]
                            value = getattr(auto, attr) * f
                            param = {"batch": "batch_size", "lr": "learning_rate",
                                     "clip": "clip_norm"}[key]
                            est.set_params(**{param: (int(max(16, min(n, round(value))))
                                                      if key == "batch" else value)})
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)
                        est.fit(X, y)
                    if v == "auto":
                        auto_fits[(name, eps, seed)] = est
                        sched = (est.batch_size_, est.n_steps_)
                    pred = est.predict(Xte)
                    cells[v].append(accuracy_score(yte, pred) if kind == "logistic"
                                    else r2_score(yte, pred))
            results[(name, eps)] = {v: float(np.mean(c)) for v, c in cells.items()}
            row = " ".join(f"{np.mean(cells[v]):>10.4f}" for v in variants)
            print(f"    {eps:>5g} {row}   {sched}", flush=True)
    return results


auto_fits = {}


def schedule_grid(epsilons, seeds, datasets, batches, clips, epochs=20.0, label_bound=None):
    """Part 8: the score of explicit schedules (batch b at a fixed number of passes, so
    T = ⌈E·n/b⌉; clip C = f·G) against "auto", on SYNTHETIC data, with each schedule's
    T, z and noise walk (``noise_walk``, public numbers): the rules of
    ``DPSGDClassifier``/``DPSGDRegressor`` are read off this table."""
    from sklearn.metrics import accuracy_score, r2_score

    from skdpsparse.linear_model import DPSGDClassifier, DPSGDRegressor
    from skdpsparse.mechanisms.dp_sgd import noise_walk

    results = {}
    for name in datasets:
        make, n, kind = STUDY_DATA[name]
        Xte, yte = make(20_000, 999, kind=kind)
        print(f"\n[8] {name}: d={Xte.shape[1]}, E={epochs:g}, delta=1e-6, fresh synthetic "
              f"test sample; mean over seeds {list(range(seeds))}", flush=True)
        print(f"    {'eps':>5} {'batch':>6} {'clip f':>7} {'steps':>6} {'z':>7} "
              f"{'walk':>7} {'score':>8} {'fit s':>6}")
        for eps in epsilons:
            for b in batches:
                for f in clips:
                    vals, walk, plan, took = [], None, None, 0.0
                    for seed in range(seeds):
                        X, y = make(n, seed, kind=kind)
                        kw = {} if b == "auto" else dict(batch_size=int(b), epochs=epochs)
                        if kind == "logistic":
                            est = DPSGDClassifier(epsilon=eps, classes=[0, 1],
                                                  random_state=seed, **kw)
                        else:
                            est = DPSGDRegressor(epsilon=eps, label_bound=label_bound
                                                 or "private", random_state=seed, **kw)
                        if f != "auto":
                            g = math.sqrt(2.0)  # norm_bound 1 with the intercept
                            est.set_params(clip_norm=float(f) * g)
                        t0 = time.perf_counter()
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", UserWarning)
                            est.fit(X, y)
                        took += time.perf_counter() - t0
                        pred = est.predict(Xte)
                        vals.append(accuracy_score(yte, pred) if kind == "logistic"
                                    else r2_score(yte, pred))
                        walk = noise_walk(est.learning_rate_,
                                          est.accounting_["noise_std"], est.batch_size_,
                                          est.n_steps_)
                        plan = (est.batch_size_, est.n_steps_, est.noise_multiplier_,
                                est.clip_norm_ / math.sqrt(2.0))
                    results[(name, eps, b, f)] = float(np.mean(vals))
                    print(f"    {eps:>5g} {plan[0]:>6} {plan[3]:>7.3f} {plan[1]:>6} "
                          f"{plan[2]:>7.3f} {walk:>7.4f} {np.mean(vals):>8.4f} "
                          f"{took / seeds:>6.1f}", flush=True)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", type=int, choices=[1, 2, 3, 4, 5, 6, 7, 8])
    parser.add_argument("--grid-batches", nargs="*", default=["auto", "512", "2048"])
    parser.add_argument("--grid-clips", nargs="*", default=["auto", "0.25", "0.5", "1"])
    parser.add_argument("--grid-epochs", type=float, default=20.0)
    parser.add_argument("--grid-label-bound", type=float, default=None)
    parser.add_argument("--study-seeds", type=int, default=2)
    parser.add_argument("--study-data", nargs="*", default=None, choices=list(STUDY_DATA))
    parser.add_argument("--study-eps", nargs="*", type=float, default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--study-variants", nargs="*", default=list(STUDY_VARIANTS),
                        help="auto, batch/K, batch*K, epochs=E, lr/K, lr*K, clip/K, clip*K")
    parser.add_argument("--tasks", nargs="*", default=["tweets", "income"])
    parser.add_argument("--real-eps", nargs="*", type=float, default=[1.0, 4.0])
    parser.add_argument("--real-seeds", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--opacus", action="store_true")
    parser.add_argument("--opacus-venv",
                        default=os.path.join(tempfile.gettempdir(), "skdpsparse-opacus-venv"))
    args = parser.parse_args()
    start = time.perf_counter()
    if args.part in (None, 1):
        print("[1] noise multiplier for (1, 1e-5): last-iterate accounting vs composition")
        table(0.1)
    if args.part in (None, 2):
        speed(args.epochs, args.reps, args.opacus, args.opacus_venv)
    if args.part in (None, 3):
        accuracy([0.5, 1.0, 2.0, 4.0, 8.0], args.seeds)
    if args.part in (None, 4):
        multiclass([0.25, 0.5, 1.0, 2.0], args.seeds)
    if args.part in (None, 5):
        accounting_table()
    if args.part == 6:  # minutes per fit: only when asked for
        real_tasks(args.tasks, args.real_eps, args.real_seeds)
    if args.part == 7:  # minutes: only when asked for
        defaults_study(args.study_eps, args.study_seeds, args.study_data,
                       tuple(args.study_variants))
    if args.part == 8:  # minutes: only when asked for
        schedule_grid(args.study_eps, args.study_seeds, args.study_data or list(STUDY_DATA),
                      args.grid_batches, args.grid_clips, args.grid_epochs,
                      args.grid_label_bound)
    print(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
