"""The linear-model rows of ``bench_real_data.py``.

For one task and one seed: every applicable private estimator of the library with its
defaults and with what a user knows publicly (``Task.public``), the same estimators
tuned on the validation split (reported with the privacy the tuning spends), the
non-private scikit-learn model, the trivial baseline and a DP-SGD recipe written here,
not in the library. diffprivlib runs in its own process (``bench_real_data.py``).

Scores are on the test split: accuracy for classification, R² for regression. The
test split is never used to choose anything.

A tuned row comes three ways (:func:`linear_rows`): the fit that won on validation
kept, the winning configuration refitted with a fresh seed (as scikit-learn's
``GridSearchCV(refit=True)``), and a control, the default's best of k seeds on
validation, which measures what keeping the winning fit gains from the selection among
noise draws alone.

The DP-SGD recipe (Abadi et al. 2016, "Deep learning with differential privacy"):
Poisson sampling of each row with probability q = 2000/n, ~20 epochs (T = ⌈20/q⌉
steps), per-example gradients clipped to norm C = 1, N(0, σ²C²) added to their sum,
the sum divided by the expected batch size 2000, plain SGD at step 1/M (M the
smoothness over rows of norm ≤ √2, with the intercept's constant feature). σ is the
smallest noise multiplier for which the RDP accountant of Google's ``dp_accounting``
(Mironov, Talwar and Zhang 2019, "Rényi differential privacy of the sampled Gaussian
mechanism") gives (ε, δ) after T steps. Its unit is the one of that analysis: adding
or removing one row (the library's estimators protect the replacement of a row,
which costs up to twice as much): the recipe is favoured, not handicapped. Regression
targets are divided by the public bound B when there is one (and multiplied back).

The same recipe in the library's unit (``unit="replace_one"``): each of the
T = ⌈20·n/b⌉ steps takes a batch of exactly b = min(2000, n) distinct rows uniformly
without replacement (the batches of :class:`~skdpsparse.linear_model.DPSGDClassifier`),
the clipped sum gets N(0, (2zC)²) per coordinate (a replaced row moves the sum by up
to 2C) and is divided by b; z is the smallest multiplier for which ``dp_accounting``'s
RDP accountant with ``NeighboringRelation.REPLACE_ONE`` and
``SampledWithoutReplacementDpEvent`` (Wang, Balle and Kasiviswanathan 2019,
"Subsampled Rényi differential privacy and analytical moments accountant", Theorem 27
for the Gaussian; its noise multiplier is relative to the ℓ2 sensitivity, here 2C)
gives (ε, δ), or the library's own bound for the same steps when smaller
(:func:`~skdpsparse.mechanisms.dp_sgd.calibrate_dp_sgd_noise`; it is proven for the
continuous Gaussian too). This row protects what the library's estimators protect, with
continuous Gaussian noise and floating-point arithmetic (not charged): it is the
like-for-like comparison; the add/remove row is kept beside it.
"""

import math
import time
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, r2_score

__all__ = ["linear_rows", "dp_sgd_recipe", "recipe_noise_multiplier",
           "recipe_noise_multiplier_replace_one", "score"]


def score(kind, y_true, y_pred):
    """Accuracy or R²."""
    if kind == "classification":
        return float(accuracy_score(y_true, y_pred))
    return float(r2_score(y_true, y_pred))


# --------------------------------------------------------------------- DP-SGD recipe

_SIGMA_CACHE = {}


def _smallest_noise(eps_of, epsilon):
    """The smallest noise multiplier (to 0.5 %, rounded up) whose ε, ``eps_of(z)``
    (decreasing in z), is at most ``epsilon``: doubling, then geometric bisection."""
    lo, hi = 0.3, 1.0
    while eps_of(hi) > epsilon:
        lo, hi = hi, hi * 2.0
    while hi / lo > 1.005:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if eps_of(mid) > epsilon else (lo, mid)
    return hi


def recipe_noise_multiplier(q, steps, epsilon, delta):
    """Smallest σ (to 0.5 %) with (ε, δ) after ``steps`` Poisson-sampled Gaussians."""
    import dp_accounting

    key = (round(q, 12), int(steps), float(epsilon), float(delta))
    if key in _SIGMA_CACHE:
        return _SIGMA_CACHE[key]

    def eps_of(sigma):
        # Integer orders only: dp_accounting's series for fractional orders fails to
        # converge (and is slow) at small σ; integer orders are exact and enough.
        acc = dp_accounting.rdp.RdpAccountant(orders=list(range(2, 257)))
        event = dp_accounting.PoissonSampledDpEvent(
            q, dp_accounting.GaussianDpEvent(sigma))
        acc.compose(event, int(steps))
        return acc.get_epsilon(delta)

    _SIGMA_CACHE[key] = hi = _smallest_noise(eps_of, epsilon)
    return hi


#: Orders for the replace-one accountant: dp_accounting's without-replacement series
#: costs O(α) per order; the optimal order at these (ε, δ) lies well below 64 (checked:
#: the same ε as orders 2..256 at n = 12 456, b = 2000, T = 125, z ∈ {1, 2, 4}).
_WOR_ORDERS = list(range(2, 65)) + [72, 80, 96, 112, 128, 160, 192, 256]


def recipe_noise_multiplier_replace_one(n, batch_size, steps, epsilon, delta):
    """Smallest z (to 0.5 %) with (ε, δ) after ``steps`` batches of exactly b of n rows.

    Replace-one neighbours and sampling without replacement: ``dp_accounting``'s RDP
    accountant with ``NeighboringRelation.REPLACE_ONE`` and
    ``SampledWithoutReplacementDpEvent``. z is relative to the ℓ2 sensitivity (2C for
    a clipped sum under replacement)."""
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    key = ("wor", int(n), int(batch_size), int(steps), float(epsilon), float(delta))
    if key in _SIGMA_CACHE:
        return _SIGMA_CACHE[key]

    def eps_of(z):
        acc = RdpAccountant(orders=_WOR_ORDERS,
                            neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
        acc.compose(dp_accounting.SampledWithoutReplacementDpEvent(
            int(n), int(batch_size), dp_accounting.GaussianDpEvent(z)), int(steps))
        return acc.get_epsilon(delta)

    hi = _smallest_noise(eps_of, epsilon)
    # The library's bound for the same steps (Wang, Balle and Kasiviswanathan's
    # expansion with the exact ternary moments of Gaussians: derived for the continuous
    # Gaussian, doc/derivations/dp_sgd.rst) is also valid here; each z alone gives
    # (ε, δ), so the smaller one is used, and both are kept for the notes.
    from skdpsparse.mechanisms.dp_sgd import calibrate_dp_sgd_noise

    z_lib = calibrate_dp_sgd_noise(epsilon, delta, int(batch_size), int(n), int(steps))
    _SIGMA_CACHE[key] = min(hi, z_lib)
    _SIGMA_CACHE[key + ("both",)] = (hi, z_lib)
    return _SIGMA_CACHE[key]


def dp_sgd_recipe(X, y, kind, epsilon, delta, seed, *, label_bound=None,
                  batch_size=2000, epochs=20, clip=1.0, unit="add_remove"):
    """Train the recipe; return a ``predict`` function.

    ``unit="add_remove"``: Poisson sampling at q = b/n, noise σ·C, accounted for adding
    or removing a row. ``unit="replace_one"``: batches of exactly b rows without
    replacement, noise z·2C, accounted for replacing a row (the library's unit)."""
    X = sp.csr_matrix(X)
    n, d = X.shape
    q = min(1.0, batch_size / n)
    steps = int(math.ceil(epochs / q))
    if unit == "add_remove":
        sigma = recipe_noise_multiplier(q, steps, epsilon, delta)
    elif unit == "replace_one":
        size = min(int(batch_size), n)
        sigma = 2.0 * recipe_noise_multiplier_replace_one(n, size, steps, epsilon, delta)
    else:
        raise ValueError(f"unit must be 'add_remove' or 'replace_one', got {unit!r}")
    rng = np.random.default_rng(1_000_003 + seed)
    scale = float(label_bound) if (kind == "regression" and label_bound) else 1.0
    target = (2.0 * y - 1.0) if kind == "classification" else y / scale
    row_norm = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel() + 1.0)
    smooth = 0.25 * 2.0 if kind == "classification" else 2.0  # ℓ''·max‖(x, 1)‖²
    lr = 1.0 / smooth
    expected = q * n
    w, b = np.zeros(d), 0.0
    for _ in range(steps):
        if unit == "add_remove":
            idx = np.flatnonzero(rng.random(n) < q)
        else:
            idx = np.sort(rng.choice(n, size=size, replace=False))
            expected = size
        Xb = X[idx]
        z = Xb @ w + b
        if kind == "classification":
            g = -target[idx] * expit(-target[idx] * z)
        else:
            g = z - target[idx]
        g = g * np.minimum(1.0, clip / np.maximum(np.abs(g) * row_norm[idx], 1e-300))
        noise = rng.normal(0.0, sigma * clip, d + 1)
        w -= lr * (Xb.T @ g + noise[:d]) / expected
        b -= lr * (g.sum() + noise[d]) / expected

    def predict(Xt):
        z = np.asarray(Xt @ w).ravel() + b
        if kind == "classification":
            return (z > 0).astype(np.int64)
        return z * scale

    return predict


# ------------------------------------------------------------------------- the rows


def _label(text, **kw):
    return text.format(**kw)


def _private_specs(task, tuned):
    """(row name, factory(ε, seed) -> estimator) of the library's estimators."""
    from skdpsparse.linear_model import (DPCyclicSGD, DPHeavyTailedRegressor,
                                         DPOutputPerturbationClassifier,
                                         DPOutputPerturbationRegressor, DPSGDClassifier,
                                         DPSGDRegressor)

    pub = task.public
    s = pub.get("sparsity")
    specs = []
    if task.kind == "classification":
        cls = pub["classes"]
        specs.append(("OutputPerturbation (defaults)",
                      lambda e, r: DPOutputPerturbationClassifier(
                          epsilon=e, classes=cls, random_state=r)))
        specs.append((f"OutputPerturbation (sparsity={s}, norm_bound=1)",
                      lambda e, r: DPOutputPerturbationClassifier(
                          epsilon=e, classes=cls, sparsity=s, norm_bound=1.0,
                          random_state=r)))
        specs.append(("CyclicSGD (defaults; norm_bound=1 is public)",
                      lambda e, r: DPCyclicSGD(epsilon=e, classes=cls, random_state=r)))
        specs.append(("DPSGD (defaults; norm_bound=1 is public)",
                      lambda e, r: DPSGDClassifier(epsilon=e, classes=cls, random_state=r)))
    else:
        B = pub.get("label_bound")
        specs.append(("OutputPerturbation (defaults)",
                      lambda e, r: DPOutputPerturbationRegressor(epsilon=e, random_state=r)))
        if B is not None:
            specs.append((f"OutputPerturbation (sparsity={s}, label_bound={B:g})",
                          lambda e, r: DPOutputPerturbationRegressor(
                              epsilon=e, sparsity=s, label_bound=B, random_state=r)))
        interval = pub.get("label_interval")
        if interval is not None:
            specs.append((f"OutputPerturbation (sparsity={s}, label_bound=({interval[0]:g}, "
                          f"{interval[1]:g}))",
                          lambda e, r: DPOutputPerturbationRegressor(
                              epsilon=e, sparsity=s, label_bound=interval,
                              random_state=r)))
        if _has_private_label_bound():
            specs.append((f"OutputPerturbation (sparsity={s}, label_bound='private')",
                          lambda e, r: DPOutputPerturbationRegressor(
                              epsilon=e, sparsity=s, label_bound="private",
                              random_state=r)))
        specs.append(("DPSGD (defaults: label_bound='private')",
                      lambda e, r: DPSGDRegressor(epsilon=e, random_state=r)))
        if B is not None:
            specs.append((f"DPSGD (label_bound={B:g})",
                          lambda e, r: DPSGDRegressor(epsilon=e, label_bound=B,
                                                      random_state=r)))
        specs.append(("CyclicSGD squared (defaults)",
                      lambda e, r: DPCyclicSGD("squared", epsilon=e, random_state=r)))
        specs.append(("HeavyTailedRegressor (defaults)",
                      lambda e, r: DPHeavyTailedRegressor(epsilon=e, random_state=r)))
    return specs


def _has_private_label_bound():
    from skdpsparse.linear_model import DPOutputPerturbationRegressor

    constraints = DPOutputPerturbationRegressor._parameter_constraints["label_bound"]
    return any("private" in repr(getattr(c, "options", c)) for c in constraints)


def _slow_specs(task):
    """H6's SGD estimators (minutes per fit before their rework): ``--slow`` only."""
    from skdpsparse.linear_model import (DPBiasReducedSGDClassifier,
                                         DPBiasReducedSGDRegressor, DPNoisySGDClassifier,
                                         DPNoisySGDRegressor)

    if task.kind == "classification":
        cls = task.public["classes"]
        return [("NoisySGD (defaults)",
                 lambda e, r: DPNoisySGDClassifier(epsilon=e, classes=cls, random_state=r)),
                ("BiasReducedSGD (defaults)",
                 lambda e, r: DPBiasReducedSGDClassifier(epsilon=e, classes=cls,
                                                         random_state=r))]
    return [("NoisySGD (defaults)", lambda e, r: DPNoisySGDRegressor(epsilon=e, random_state=r)),
            ("BiasReducedSGD (defaults)",
             lambda e, r: DPBiasReducedSGDRegressor(epsilon=e, random_state=r))]


def _tuning_grids(task):
    """(name, description, [factory(ε, seed)], default factory or None).

    k candidates; the best on validation is kept (the "best fit kept" row), or refitted
    with a fresh seed (the "refit" row). The default factory is the row's untuned
    default with public knowledge, for the control "default, best of k seeds"; every
    grid with a default contains it (the tuned rows never choose from a smaller set of
    configurations than the default)."""
    from skdpsparse.linear_model import (DPCyclicSGD, DPOutputPerturbationClassifier,
                                         DPOutputPerturbationRegressor, DPSGDClassifier,
                                         DPSGDRegressor)

    pub = task.public
    s = pub.get("sparsity")
    multiples = (1.0, 10.0, 100.0, 1000.0)  # λ·n: public numbers only
    schedules = ((5, 256), (10, 1024), (50, 1 << 30), ("auto", "auto"))  # the last: defaults
    if task.kind == "classification":
        cls = pub["classes"]

        def op_default(e, r):  # the same parameters as the public-knowledge row
            return DPOutputPerturbationClassifier(epsilon=e, classes=cls, sparsity=s,
                                                  norm_bound=1.0, random_state=r)

        op = [lambda e, r, m=m: _AlphaTimesN(DPOutputPerturbationClassifier(
                  epsilon=e, classes=cls, sparsity=s, random_state=r), m)
              for m in multiples]

        def cyc_default(e, r):
            return DPCyclicSGD(epsilon=e, classes=cls, random_state=r)

        cyc = [lambda e, r, E=E, b=b: DPCyclicSGD(epsilon=e, classes=cls, epochs=E,
                                                  batch_size=b, random_state=r)
               for E, b in schedules]
    else:
        B = pub.get("label_bound") or "private"
        B_op = pub.get("label_interval") or B  # centred when an interval is public

        def op_default(e, r):  # the public-knowledge row with the grid's label bound
            return DPOutputPerturbationRegressor(epsilon=e, sparsity=s, label_bound=B_op,
                                                 random_state=r)

        op = [lambda e, r, m=m: _AlphaTimesN(DPOutputPerturbationRegressor(
                  epsilon=e, sparsity=s, label_bound=B_op, random_state=r), m)
              for m in multiples]

        def cyc_default(e, r):
            return DPCyclicSGD("squared", epsilon=e, random_state=r)

        cyc = [lambda e, r, E=E, b=b: DPCyclicSGD("squared", epsilon=e, epochs=E,
                                                  batch_size=b, random_state=r)
               for E, b in schedules]
    # alpha="auto" (the default) is a candidate: it was missing before this row's
    # "best fit kept"/"refit"/control split, so the tuned row chose from 4
    # configurations that did not include the default.
    op = op + [op_default]
    batches = (256, 512, 1024, 2048)
    if task.kind == "classification":
        sgd = [lambda e, r, b=b: DPSGDClassifier(
            epsilon=e, classes=cls, batch_size=b, random_state=r) for b in batches]
    else:
        sgd = [lambda e, r, b=b: DPSGDRegressor(
            epsilon=e, label_bound=B, batch_size=b, random_state=r) for b in batches]
    return [("OutputPerturbation", "alpha·n in {1, 10, 100, 1000, auto}", op, op_default),
            ("CyclicSGD",
             "(epochs, batch) in {(5,256), (10,1024), (50,n), (auto,auto)}", cyc,
             cyc_default),
            ("DPSGD", "batch in {256, 512, 1024, 2048} (label_bound public or 'private')",
             sgd, None)]


#: Seeds of the control's extra fits (seed + j·_CONTROL_STRIDE, j = 1 .. k-1) and of
#: the refit (seed + _REFIT_OFFSET): distinct from every bench seed and from each other.
_CONTROL_STRIDE = 1000
_REFIT_OFFSET = 500_000


class _AlphaTimesN:
    """An estimator fitted with alpha = multiple / n (n public)."""

    def __init__(self, est, multiple):
        self.est, self.multiple = est, multiple

    def fit(self, X, y):
        self.est.set_params(alpha=self.multiple / X.shape[0]).fit(X, y)
        return self

    def predict(self, X):
        return self.est.predict(X)


def _baselines(task, Xtr, ytr, Xte, yte):
    out = {}
    if task.kind == "classification":
        majority = np.bincount(ytr).argmax()
        out["trivial: majority class"] = score(task.kind, yte, np.full(yte.shape, majority))
        model = LogisticRegression(max_iter=2000).fit(Xtr, ytr)
        out["non-private: sklearn LogisticRegression"] = score(task.kind, yte,
                                                               model.predict(Xte))
    else:
        out["trivial: training mean"] = score(task.kind, yte, np.full(yte.shape, ytr.mean()))
        model = Ridge(alpha=1.0).fit(Xtr, ytr)
        out["non-private: sklearn Ridge"] = score(task.kind, yte, model.predict(Xte))
    return out


def _select(candidates, eps, seed, fitted, cache, kind, Xva, yva):
    """The candidate best on validation: (index 0-based or None, its fit, its score)."""
    best, best_val, chosen = None, -math.inf, None
    for k, make in enumerate(candidates):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = fitted(make, eps, seed, cache)
            val = score(kind, yva, est.predict(Xva))
        except Exception:  # noqa: BLE001 - a failed candidate is skipped
            continue
        if val > best_val:
            best, best_val, chosen = est, val, k
    return chosen, best, best_val


def _holdout(task, seed, holdout):
    """(train, selection, scoring) splits. ``holdout="test"``: the bench's validation
    and test splits. ``"validation"``: the validation split halved (selection on the
    first half, scores on the second); the test split is not read."""
    from .datasets import split

    train, valid, test = split(task, seed)
    if holdout == "test":
        return train, valid, test
    if holdout != "validation":
        raise ValueError(f"holdout must be 'test' or 'validation', got {holdout!r}")
    Xva, yva = valid
    half = Xva.shape[0] // 2  # the split is already a random permutation
    return train, (Xva[:half], yva[:half]), (Xva[half:], yva[half:])


def linear_rows(task, seeds, epsilons, delta, *, tune=True, slow=False, rows=None,
                recipe=True, holdout="test", log=print):
    """Scores of every row: {row: {eps or None: [score per seed]}}, and notes.

    ``rows``: keep only the library rows whose name contains one of these strings
    (the baselines always run). ``recipe=False`` skips the two DP-SGD recipe rows
    (to run a piece of the table whose recipe cells another piece already holds).
    ``holdout="validation"``: every score on the second half of the validation split,
    every choice on its first half (the test split is not read: to study the tuning
    rows without the test split).

    Each tuning grid gives three rows (plus, under ``[validation]``, the selection
    split's score of what they chose): "tuned (best fit kept)", the fit that won on
    validation; "tuned (refit)", the winning configuration fitted again with a fresh
    seed (scikit-learn's ``GridSearchCV(refit=True)`` selects, then refits); and the
    control "default, best of k seeds", the default fitted with k seeds and the best on
    validation kept: the same selection among k noise draws with no configuration to
    choose. The kept row beats one draw of even a perfect default by the selection
    among noise draws wherever the noise moves validation and test scores together;
    the control measures that part alone, the refit row removes it."""
    table, notes, timing, picks = {}, {}, {}, {}

    def put(row, eps, value):
        table.setdefault(row, {}).setdefault(eps, []).append(value)

    specs = _private_specs(task, tune) + (_slow_specs(task) if slow else [])
    if rows:
        specs = [(name, make) for name, make in specs if any(r in name for r in rows)]
    grids = _tuning_grids(task) if tune else []
    if rows:
        grids = [g for g in grids if any(r in g[0] + " tuned" for r in rows)]

    def fitted(make, eps, seed, cache):
        """One fit per distinct estimator and parameter set in a cell: a tuning
        candidate or a control fit equal to a row already fitted (the same seed, hence
        the same noise) is that fit. The wrapper ``_AlphaTimesN`` is not cached."""
        est = make(eps, seed)
        key = ((type(est).__name__, repr(sorted(est.get_params().items())))
               if hasattr(est, "get_params") else None)
        if key is not None and key in cache:
            return cache[key]
        est.fit(Xtr, ytr)
        if key is not None:
            cache[key] = est
        return est

    for seed in seeds:
        (Xtr, ytr), (Xva, yva), (Xte, yte) = _holdout(task, seed, holdout)
        for row, value in _baselines(task, Xtr, ytr, Xte, yte).items():
            put(row, None, value)
        for eps in epsilons:
            cache = {}
            for row, make in specs:
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        est = fitted(make, eps, seed, cache)
                        value = score(task.kind, yte, est.predict(Xte))
                    except Exception as err:  # a refused fit is a result too
                        value = float("nan")
                        notes[row] = f"fit failed: {type(err).__name__}: {err}"[:200]
                for w in caught:
                    if not issubclass(w.category, DeprecationWarning):
                        notes.setdefault(row + " [warns]", str(w.message)[:200])
                timing.setdefault(row, []).append(time.perf_counter() - t0)
                put(row, eps, value)
            for name, grid, candidates, default in grids:
                k = len(candidates)
                kept = f"{name} tuned (best fit kept): {grid}"
                chosen, best, best_val = _select(candidates, eps, seed, fitted, cache,
                                                 task.kind, Xva, yva)
                put(kept, eps, float("nan") if best is None
                    else score(task.kind, yte, best.predict(Xte)))
                put(kept + " [validation]", eps, best_val)
                picks.setdefault(kept, {}).setdefault(eps, []).append(
                    None if chosen is None else chosen + 1)
                notes[kept] = (f"best of {k} fits on the validation split, that fit kept: "
                               f"spends {k}·ε on the training rows (basic composition), "
                               "and the selection is not private in the validation rows")
                refit = f"{name} tuned (refit with a fresh seed): {grid}"
                if chosen is None:
                    put(refit, eps, float("nan"))
                else:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        est = fitted(candidates[chosen], eps, seed + _REFIT_OFFSET, cache)
                    put(refit, eps, score(task.kind, yte, est.predict(Xte)))
                notes[refit] = (f"the configuration chosen by the row above fitted again "
                                f"with a fresh seed: spends ({k} + 1)·ε on the training "
                                "rows (basic composition); the selection is not private "
                                "in the validation rows")
                if default is None:
                    continue
                control = f"{name} control: default, best of {k} seeds on validation"
                draws = [lambda e, r, j=j: default(e, r + j * _CONTROL_STRIDE)
                         for j in range(k)]  # j = 0: the default row's own fit
                _, best, best_val = _select(draws, eps, seed, fitted, cache, task.kind,
                                            Xva, yva)
                put(control, eps, float("nan") if best is None
                    else score(task.kind, yte, best.predict(Xte)))
                put(control + " [validation]", eps, best_val)
                default_fit = fitted(default, eps, seed, cache)
                put(f"{name} default [validation]", eps,
                    score(task.kind, yva, default_fit.predict(Xva)))
                notes[control] = (f"the default with {k} seeds (seed + 1000·j), the best "
                                  "on the validation split kept: the tuned row's selection "
                                  f"with no configuration to choose; spends {k}·ε")
            if not recipe:
                continue
            B = task.public.get("label_bound")
            predict = dp_sgd_recipe(Xtr, ytr, task.kind, eps, delta, seed, label_bound=B)
            put("DP-SGD recipe (Poisson q=2000/n, 20 epochs, C=1, RDP; add/remove unit)",
                eps, score(task.kind, yte, predict(Xte)))
            predict = dp_sgd_recipe(Xtr, ytr, task.kind, eps, delta, seed, label_bound=B,
                                    unit="replace_one")
            put("DP-SGD recipe (batches of 2000 w/o replacement, 20 epochs, C=1, RDP; "
                "replace-one unit, as the library)", eps, score(task.kind, yte, predict(Xte)))
        both = {k[4]: v for k, v in _SIGMA_CACHE.items()
                if k[0] == "wor" and k[-1] == "both" and k[1] == Xtr.shape[0]}
        if both:
            notes["DP-SGD recipe, replace-one unit: z = noise std / 2C"] = "; ".join(
                f"ε={e:g}: dp_accounting {a:.3g}, library bound {b:.3g}"
                for e, (a, b) in sorted(both.items()))
        log(f"  {task.name}: seed {seed} done")
    for row, ts in timing.items():
        notes.setdefault(row + " [time]", f"{np.median(ts):.1f} s per fit (median)")
    for row, by_eps in picks.items():  # which candidate (1-based, in the row's order) won
        notes[row + " [chosen on validation]"] = "; ".join(
            f"ε={e:g}: " + ",".join("-" if k is None else str(k) for k in ks)
            for e, ks in by_eps.items())
    return table, notes
