"""Adversarial review of user-level bounding (skdpsparse/distributed/_units.py).

The claim (module notes): with one privacy unit replaced (U public), "replacing one
unit changes one bounded total, so the mean moves by at most 2L/U", and the computed
sensitivity of ``bounded_mean_sensitivity(U, ...)`` holds for the exact statistic.

The break (found, then fixed): every row was first rounded to 2^-F1 with F1 the
fixed-point bits of the number of *rows* n. n is not fixed by the unit-level neighbour
relation (the replaced unit can have any number of rows), so replacing one unit
re-rounded the totals of all the *other* units on another grid. With U = 2^16 units of
one row 1/3 each, replacing the unit "one row +1" by "2^20 rows of -2^-20" (total -1)
moved F1 from 44 to 40 and the mean by 2/U plus the drift of the 65535 unchanged
units, beyond the computed sensitivity that the noise is calibrated to. F1 now depends
on L only (``unit_row_frac_bits``), and these tests run the fit itself.
"""

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("numba")

from skdpsparse.distributed import _sparse_mean, fit_sparse_mean_units_in_memory  # noqa: E402
from skdpsparse.mean import DPSparseMeanEstimator  # noqa: E402
from skdpsparse.mechanisms.projection import bounded_mean_sensitivity  # noqa: E402

U = 2**16


def _unit_level_mean(monkeypatch, unit0_rows):
    """The exact pre-noise statistic of ``fit_sparse_mean_units_in_memory`` (captured
    where it is released): unit 0 holds ``unit0_rows``, units 1..U-1 one row 1/3
    each; d = 1, norm_bound = 1, sparsity = 1."""
    values = np.concatenate([unit0_rows, np.full(U - 1, 1.0 / 3.0)])
    ids = np.concatenate([np.zeros(len(unit0_rows), dtype=np.int64), np.arange(1, U)])
    X = sp.csr_matrix(values.reshape(-1, 1))
    seen = []
    original = _sparse_mean.sparse_mean_attributes

    def capture(estimator, part, plan, *args, **kwargs):
        seen.append((part, plan))
        return original(estimator, part, plan, *args, **kwargs)

    monkeypatch.setattr(_sparse_mean, "sparse_mean_attributes", capture)
    fit_sparse_mean_units_in_memory(
        DPSparseMeanEstimator(epsilon=1.0, delta=1e-6, norm_bound=1.0, sparsity=1,
                              method="gaussian", random_state=0), X, ids)
    ((part, plan),) = seen
    assert plan.n_rows == U
    return np.ldexp(part.sums.astype(np.float64), -plan.frac_bits) / U


def test_unchanged_units_do_not_move_when_one_unit_is_split_into_more_rows(monkeypatch):
    # Unit 0's total is 0.5 in both (2^-21 is on the rows' grid): the statistic is
    # the same bit for bit, whatever the row count n.
    a = _unit_level_mean(monkeypatch, np.array([0.5]))
    b = _unit_level_mean(monkeypatch, np.full(2**20, 0.5 * 2.0**-20))
    np.testing.assert_array_equal(a, b)


def test_unit_replacement_stays_within_the_computed_sensitivity(monkeypatch):
    a = _unit_level_mean(monkeypatch, np.array([1.0]))  # n = 2^16 rows
    b = _unit_level_mean(monkeypatch, np.full(2**20, -(2.0**-20)))  # n = 2^16 - 1 + 2^20
    claimed, computed = bounded_mean_sensitivity(U, 1, norm_bound=1.0, sparsity=1,
                                                 kind="gaussian")
    # Only unit 0's bounded total changed, from +1 to -1 (both on every grid): the
    # move is exactly the claimed 2L/U, within the computed bound.
    assert abs(a - b)[0] == claimed
    assert abs(a - b)[0] <= computed
