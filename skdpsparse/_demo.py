"""The demo behind ``python -m skdpsparse``; each estimator adds one section."""

import time

import numpy as np


def _section(title):
    print()
    print(title)
    print("-" * len(title))


def demo_sparse_mean():
    """DPSparseMeanEstimator on generated embedding-like data (Ghazi et al. 2024 v1, Section 3)."""
    from .datasets import make_sparse_vectors
    from .mean import DPSparseMeanEstimator

    n, d, s = 20_000, 2**17, 16
    X, _ = make_sparse_vectors(n, d, s, column_distribution="power_law", random_state=0)
    target = np.asarray(X.mean(axis=0)).ravel()  # rows already have unit norm
    _section(f"DPSparseMeanEstimator: n={n}, d={d}, s={s} nonzeros per row (CSR)")
    print(f"{'method':<22} {'privacy spent':<16} {'l2 error':>9} {'nonzeros':>9}")
    print(f"{'zero vector':<22} {'none':<16} {np.linalg.norm(target):>9.4f} {0:>9}")
    for method, delta in [("auto", 1e-6), ("threshold", 1e-6), ("gaussian", 1e-6),
                          ("projection", 1e-6), ("auto", 0.0), ("laplace", 0.0),
                          ("projection", 0.0)]:
        est = DPSparseMeanEstimator(epsilon=1.0, delta=delta, sparsity=s, method=method,
                                    random_state=0).fit(X)
        err = np.linalg.norm(est.mean_ - target)
        label = method if method != "auto" else f"auto -> {est.method_}"
        print(f"{label:<22} {str(est.privacy_spent_):<16} {err:>9.4f} "
              f"{np.count_nonzero(est.mean_):>9}")


def demo_heavy_tailed_mean():
    """DPHeavyTailedMean on Student-t(3) data: the default needs nothing stated."""
    from .datasets import central_moment_bound, make_heavy_tailed
    from .mean import DPHeavyTailedMean

    n, d = 100_000, 20
    X, mu = make_heavy_tailed(n, d, distribution="student_t", tail_parameter=3.0,
                              random_state=0)
    M = central_moment_bound("student_t", 3.0, 2)
    _section(f"DPHeavyTailedMean: n={n}, d={d}, Student-t(3) coordinates (no norm bound)")
    print(f"{'estimator':<40} {'privacy spent':<28} {'l2 error':>9}")
    print(f"{'non-private sample mean':<40} {'none':<28} "
          f"{np.linalg.norm(X.mean(axis=0) - mu):>9.4f}")
    for label, kw in [("default: nothing stated", {}),
                      ("default, pure DP", dict(delta=0)),
                      ("bounds=(-10, 10) stated", dict(bounds=(-10.0, 10.0))),
                      ("cwme, tau of Cor. 4.2 (M = 3)", dict(method="cwme", moment_bound=M)),
                      ("noise_smoothing, tau of Cor. 4.2", dict(method="noise_smoothing",
                                                                moment_bound=M))]:
        est = DPHeavyTailedMean(epsilon=1.0, random_state=0, **kw).fit(X)
        spent = f"{est.privacy_spent_} = {est.approx_dp_spent_}"
        if est.privacy_spent_ == est.approx_dp_spent_:
            spent = str(est.privacy_spent_)
        print(f"{label:<40} {spent:<28} {np.linalg.norm(est.mean_ - mu):>9.4f}")


def demo_heavy_tailed_regression():
    """DPHeavyTailedRegressor on a linear model with heavy-tailed features and noise."""
    from .linear_model import DPHeavyTailedRegressor

    n, d = 50_000, 10
    rng = np.random.default_rng(0)
    X = rng.standard_t(5, size=(n, d)) * np.sqrt(3 / 5)
    w = np.linspace(-1, 1, d) / np.sqrt(d) * 1.5
    y = X @ w + 0.5 + rng.standard_t(3, size=n)
    zero_risk = 0.5 * (w @ w + 0.25)
    _section(f"DPHeavyTailedRegressor: n={n}, d={d}, Student-t(5) features, t(3) noise")
    print(f"{'oracle / setting':<34} {'privacy spent':<30} {'T':>5} {'excess/zero':>11}")
    for label, kw in [("noise_smoothing, convex", {}),
                      ("cwme, convex", dict(mean_oracle="cwme")),
                      ("noise_smoothing, ridge 0.1", dict(alpha=0.1))]:
        reg = DPHeavyTailedRegressor(radius=2.0, random_state=0, **kw).fit(X, y)
        excess = 0.5 * (np.sum((reg.coef_ - w) ** 2) + (reg.intercept_ - 0.5) ** 2)
        spent = f"{reg.privacy_spent_} = {reg.approx_dp_spent_}"
        print(f"{label:<34} {spent:<30} {reg.n_iter_:>5} {excess / zero_risk:>11.4f}")


def demo_cyclic_sgd():
    """DPCyclicSGD on generated sparse classification data (Kong and Ribero 2024, Algorithm 1)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    from .datasets import make_sparse_classification
    from .linear_model import DPCyclicSGD

    n, d, s = 50_000, 1000, 10
    X, y, _ = make_sparse_classification(n, d, s, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    base = LogisticRegression(max_iter=1000).fit(X_train, y_train).score(X_test, y_test)
    _section(f"DPCyclicSGD: logistic, n={n}, d={d}, s={s} nonzeros per row (CSR)")
    print(f"{'target eps':>10} {'privacy spent':<20} {'winning bound':<15} {'z':>6} "
          f"{'accuracy':>9}  (non-private {base:.3f})")
    for eps in [0.5, 1.0, 4.0]:
        est = DPCyclicSGD(epsilon=eps, delta=1e-6, batch_size=2048, epochs=20, alpha=1e-3,
                          classes=[0, 1], random_state=0).fit(X_train, y_train)
        print(f"{eps:>10g} {str(est.privacy_spent_):<20} {est.accounting_['bound']:<15} "
              f"{est.noise_multiplier_:>6.2f} {est.score(X_test, y_test):>9.3f}")


def demo_dp_sgd():
    """DPSGDClassifier on the same kind of data: batches sampled without replacement,
    accounted by Wang, Balle and Kasiviswanathan (2019), Theorem 9."""
    from sklearn.model_selection import train_test_split

    from .datasets import make_sparse_classification
    from .linear_model import DPSGDClassifier

    n, d, s = 50_000, 1000, 10
    X, y, _ = make_sparse_classification(n, d, s, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    _section(f"DPSGDClassifier: logistic, n={n}, d={d}, s={s} nonzeros per row (CSR)")
    print(f"{'target eps':>10} {'privacy spent':<20} {'batch':>6} {'z':>6} {'accuracy':>9}")
    for eps in [1.0, 4.0]:
        est = DPSGDClassifier(epsilon=eps, delta=1e-6, epochs=5, classes=[0, 1],
                              random_state=0).fit(X_train, y_train)
        print(f"{eps:>10g} {str(est.privacy_spent_):<20} {est.batch_size_:>6} "
              f"{est.noise_multiplier_:>6.2f} {est.score(X_test, y_test):>9.3f}")


def demo_noisy_sgd():
    """DPNoisySGDClassifier on sparse classification data (Arora et al. 2020, Algorithm 1).

    The default calibration is the provable one (each row enters at most one noisy
    gradient step, so a run is one discrete Gaussian release of sensitivity 2L, and
    its noise does not shrink with n); ``"rdp"``, the subsampling accountant, needs
    less noise but is unproven (it treats the set of seen rows as fixed in each step).
    """
    from sklearn.linear_model import LogisticRegression

    from .datasets import make_sparse_classification
    from .linear_model import DPNoisySGDClassifier

    n, d, s, seeds = 100_000, 20, 4, 3
    X, y, _ = make_sparse_classification(n, d, s, separation=8.0, random_state=0)
    n_train = 3 * n // 4
    X_train, y_train, X_test, y_test = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    _section(f"DPNoisySGDClassifier: n={n_train}, d={d}, s={s} nonzeros per row (CSR)")
    baseline = LogisticRegression().fit(X_train, y_train).score(X_test, y_test)
    print(f"non-private logistic regression: accuracy {baseline:.3f}")
    print(f"{'epsilon':>7} {'calibration':<20} {'privacy spent':<20} {'sigma':>6} "
          f"{'steps':>6} {'accuracy (mean of 3 seeds)':>26}")
    for eps, calibration in [(1.0, "provable"), (4.0, "provable"), (8.0, "provable"),
                             (1.0, "rdp"), (4.0, "rdp")]:
        accs = []
        for seed in range(seeds):
            clf = DPNoisySGDClassifier(epsilon=eps, noise_calibration=calibration,
                                       classes=[0, 1], random_state=seed).fit(X_train, y_train)
            accs.append(clf.score(X_test, y_test))
        label = calibration + ("" if calibration == "provable" else " (unproven)")
        print(f"{eps:>7g} {label:<20} {str(clf.privacy_spent_):<20} {clf.noise_std_:>6.2f} "
              f"{clf.n_iter_[0]:>6} {np.mean(accs):>26.3f}")


def demo_output_perturbation():
    """DPOutputPerturbationClassifier on sparse logistic data (Ghazi et al. 2024 v1,
    Algorithms 3-4)."""
    from sklearn.linear_model import LogisticRegression

    from .datasets import make_sparse_classification
    from .linear_model import DPOutputPerturbationClassifier

    n, d, s, seeds = 20_000, 4096, 32, 5
    X, y, _ = make_sparse_classification(n + 5000, d, s, random_state=0)
    X_train, y_train, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
    _section(f"DPOutputPerturbationClassifier: n={n}, d={d}, s={s} nonzeros per row (CSR)")
    baseline = LogisticRegression().fit(X_train, y_train).score(X_test, y_test)
    print(f"non-private logistic regression: accuracy {baseline:.3f}")
    print(f"{'noise, domain (mean of 5 seeds)':<34} {'privacy spent':<15} {'alpha_':>7} "
          f"{'accuracy':>8}")
    for label, params in [("Laplace, R^d", dict(epsilon=4.0, delta=0)),
                          ("Gaussian, R^d", dict(epsilon=4.0)),
                          ("Gaussian, ball D=1 + l-inf proj.", dict(epsilon=4.0, radius=1.0)),
                          ("Gaussian, ball D=1, eps=64", dict(epsilon=64.0, radius=1.0))]:
        accs = []
        for seed in range(seeds):
            clf = DPOutputPerturbationClassifier(sparsity=s, classes=[0, 1], random_state=seed,
                                                 **params).fit(X_train, y_train)
            accs.append(clf.score(X_test, y_test))
        print(f"{label:<34} {str(clf.privacy_spent_):<15} {clf.alpha_:>7.2g} "
              f"{np.mean(accs):>8.3f}")
    # Algorithm 4 enumerates a net of the ball: a handful of parameters only.
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(2000, 2)) / 2
    t = (Z @ np.array([1.0, -1.0]) + 0.2 * rng.normal(size=2000) > 0).astype(int)
    clf = DPOutputPerturbationClassifier(loss="hinge", method="exponential", epsilon=1.0,
                                         radius=2.0, max_net_size=20_000, classes=[0, 1],
                                         random_state=0).fit(Z[:1500], t[:1500])
    print(f"{'hinge, exponential mech., d=2':<34} {str(clf.privacy_spent_):<15} "
          f"{'tau=' + format(clf.tau_, '.2g'):>7} {clf.score(Z[1500:], t[1500:]):>8.3f}")


def demo_bias_reduced_sgd():
    """DPBiasReducedSGDClassifier (Ghazi et al. 2024 v1, Algorithms 5-7) on a strong
    sparse signal."""
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    from .linear_model import DPBiasReducedSGDClassifier, DPOutputPerturbationClassifier

    # 2-sparse unit rows: column 0 or 1 carries the class (flipped w.p. 0.05), the other
    # nonzero is on a random column of 198 noise columns.
    n, d = 50_000, 200
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, n + 10_000)
    tell = np.where(rng.random(y.size) < 0.05, 1 - y, y)
    cols = np.column_stack([tell, 2 + rng.integers(0, d - 2, y.size)]).ravel()
    X = sp.csr_matrix((np.full(2 * y.size, 2**-0.5), cols, np.arange(0, 2 * y.size + 1, 2)),
                      shape=(y.size, d))
    X_train, y_train, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
    _section(f"DPBiasReducedSGDClassifier: n={n}, d={d}, 2 nonzeros per row (CSR)")
    baseline = LogisticRegression().fit(X_train, y_train).score(X_test, y_test)
    print(f"non-private logistic regression: accuracy {baseline:.3f}")
    print(f"{'estimator':<50} {'privacy spent':<26} {'steps':>6} {'accuracy':>8}")
    for eps in (1.0, 10.0):
        for label, model in [
                ("bias-reduced SGD", DPBiasReducedSGDClassifier(
                    epsilon=eps, sparsity=2, classes=[0, 1], random_state=0)),
                ("bias-reduced SGD, boosted (noisy min, K=3)", DPBiasReducedSGDClassifier(
                    epsilon=eps, sparsity=2, boosting="noisy_min", n_runs=3,
                    classes=[0, 1], random_state=0)),
                ("output perturbation (reference)", DPOutputPerturbationClassifier(
                    epsilon=eps, sparsity=2, classes=[0, 1], random_state=0))]:
            model.fit(X_train, y_train)
            steps = getattr(model, "n_iter_", "")
            print(f"{label + f' eps={eps:g}':<50} {str(model.privacy_spent_):<26} "
                  f"{steps:>6} {model.score(X_test, y_test):>8.3f}")
    print("Each of the oracle's four means runs at eps/32 and is scaled by 1/p_N (Lemma "
          "6.4), and the filter stops at about 62 % of the budget (Lemma 6.3): it needs a "
          "strong signal or a large n*eps; on weaker signals it stays near chance.")


def demo_private_regressors_and_selection():
    """The private linear regressors on one task, and private parameter selection."""
    from sklearn.linear_model import Ridge

    from .linear_model import (
        DPBiasReducedSGDRegressor,
        DPNoisySGDRegressor,
        DPOutputPerturbationRegressor,
    )
    from .model_selection import PrivateParameterSelection

    n, d = 40_000, 5
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n + 10_000, d)) / np.sqrt(d)  # rows of norm about 1
    y = X @ np.ones(d) / 2 + 0.1 * rng.normal(size=n + 10_000)
    X_train, y_train, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
    _section(f"Private linear regression and private parameter selection: n={n}, d={d}")
    base = Ridge(alpha=1e-3).fit(X_train, y_train).score(X_test, y_test)
    print(f"{'estimator':<44} {'privacy spent':<27} {'R^2':>6}  (non-private {base:.3f})")
    models = [("DPOutputPerturbationRegressor (Huber)",
               DPOutputPerturbationRegressor(loss="huber", epsilon=1.0, random_state=0)),
              ("DPNoisySGDRegressor (Huber, rdp)",
               DPNoisySGDRegressor(loss="huber", epsilon=1.0, noise_calibration="rdp",
                                   random_state=0)),
              ("DPBiasReducedSGDRegressor (Huber, ball D=1)",
               DPBiasReducedSGDRegressor(epsilon=1.0, radius=1.0, random_state=0)),
              ("PrivateParameterSelection over alpha",
               PrivateParameterSelection(DPOutputPerturbationRegressor(loss="huber"),
                                         {"alpha": [1e-3, 1e-2, 1e-1]}, epsilon=1.0,
                                         scoring="neg_mean_squared_error", random_state=0))]
    for label, model in models:
        model.fit(X_train, y_train)
        print(f"{label:<44} {str(model.privacy_spent_):<27} "
              f"{model.score(X_test, y_test):>6.3f}")


DEMOS = [demo_sparse_mean, demo_heavy_tailed_mean, demo_heavy_tailed_regression,
         demo_cyclic_sgd, demo_dp_sgd, demo_noisy_sgd, demo_output_perturbation,
         demo_bias_reduced_sgd, demo_private_regressors_and_selection]


def run_demo():
    """Run every demo section inside a ledger with a budget store, then print what the
    store recorded; returns a process exit code."""
    import os
    import tempfile

    from .ledger import PrivacyLedger

    print("skdpsparse demo: privacy spent and utility reached, per estimator")
    with tempfile.TemporaryDirectory() as folder:
        with PrivacyLedger(store=os.path.join(folder, "budget.sqlite"),
                           dataset="demo") as ledger:
            for demo in DEMOS:
                start = time.perf_counter()
                demo()
                print(f"({time.perf_counter() - start:.1f} s)")
        _section("The budget store: the demo's fits, as recorded")
        rows = ledger.history()  # a DataFrame with pandas, else a list of dicts
        rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
        for row in rows:
            print(f"{row['id']:>3} {row['time']:%H:%M:%S} pid {row['pid']:<7} "
                  f"{str(row['guarantee']):<30} {row['source']}")
    return 0
