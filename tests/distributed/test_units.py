"""User-level totals (skdpsparse/distributed/_units.py): the rows' grid is public and
each unit's total is a function of that unit's rows alone, for every chunking."""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsparse.distributed import _units
from skdpsparse.distributed._core import sparse_mean_plan


def test_the_rows_grid_depends_on_the_bound_only():
    assert _units.unit_row_frac_bits(1.0) == 40  # 2^20·(2^40 + 1) < 2^62 ≤ 2^20·(2^41 + 1)
    assert _units.unit_row_frac_bits(4.0) == 38
    assert 2**20 * (1.0 * 2**40 + 1) < 2**62


def test_saturating_sums_are_min_of_cap_and_the_exact_sum_in_any_order():
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 5, 400)
    cols = rng.integers(0, 3, 400)
    values = rng.integers(0, 40, 400)
    cap = 300
    exact = np.zeros((5, 3), dtype=np.int64)
    np.add.at(exact, (rows, cols), values)
    for _ in range(3):
        order = rng.permutation(400)
        got = _units._saturating_sum(rows[order], cols[order], values[order], (5, 3),
                                     cap=cap)
        np.testing.assert_array_equal(got.toarray(), np.minimum(exact, cap))


def test_saturation_cannot_overflow_int64():
    big = np.full(8, _units.SATURATION, dtype=np.int64)
    got = _units._saturating_sum(np.zeros(8, dtype=np.int64), np.zeros(8, dtype=np.int64),
                                 big, (1, 1))
    assert got[0, 0] == _units.SATURATION


def test_unit_totals_are_the_same_for_every_chunking():
    rng = np.random.default_rng(1)
    n, d = 600, 20
    X = sp.random(n, d, density=0.2, format="csr", random_state=rng)
    X.data = rng.normal(size=X.data.shape) * 3  # some rows out of bounds: scaled
    ids = rng.integers(0, 50, n)
    whole_ids, whole = _units.unit_totals(X, ids, 1.0, 2.0)
    assert whole.shape == (len(whole_ids), 2 * d)
    assert whole.data.min() >= 0
    cuts = [0, 97, 250, 251, 600]
    pieces = [_units.unit_totals(X[a:b], ids[a:b], 1.0, 2.0) for a, b in zip(cuts, cuts[1:])]
    pieces.reverse()
    merged_ids, merged = _units.add_unit_totals(pieces)
    np.testing.assert_array_equal(merged_ids, whole_ids)
    np.testing.assert_array_equal(merged.toarray(), whole.toarray())
    # P − N is the exact sum of the rounded rows (no saturation here).
    grid = _units.row_grid_values(X, 1.0, 2.0, _units.unit_row_frac_bits(1.0)).toarray()
    exact = np.zeros((len(whole_ids), d), dtype=np.int64)
    np.add.at(exact, np.searchsorted(whole_ids, ids), grid)
    dense = whole.toarray()
    np.testing.assert_array_equal(dense[:, :d] - dense[:, d:], exact)


@pytest.mark.parametrize("n_other_rows", [1, 5000])
def test_a_unit_total_does_not_depend_on_the_other_units(n_other_rows):
    # Unit 7's bounded total is the same whatever the other unit brings (any row count).
    rng = np.random.default_rng(2)
    mine = sp.random(30, 8, density=0.5, format="csr", random_state=rng)
    other = sp.random(n_other_rows, 8, density=0.5, format="csr", random_state=rng)
    X = sp.vstack([mine, other], format="csr")
    ids = np.r_[np.full(30, 7), np.full(n_other_rows, 9)]
    plan = sparse_mean_plan(2, 8, 1.0, 3)
    _, totals = _units.unit_totals(X, ids, plan.l2_bound, plan.l1_bound)
    _, alone = _units.unit_totals(mine, np.full(30, 7), plan.l2_bound, plan.l1_bound)
    np.testing.assert_array_equal(totals[0].toarray(), alone.toarray())
    one = _units.bound_unit_totals(alone, sparse_mean_plan(1, 8, 1.0, 3))
    assert one.n_rows == 1 and np.abs(one.sums).max() > 0


def test_a_saturated_unit_is_still_bounded(monkeypatch):
    # The cap lowered to 2^45 quanta = 32 (F₁ = 40) so that 64 rows saturate (the real
    # cap, 2^22 for L = 1, needs millions of rows): coordinate 0 sums to 64 > 32 and
    # saturates, coordinate 1 to -3 exactly; the bounded total has norm L, and P − N
    # is the same for every chunking.
    monkeypatch.setattr(_units, "SATURATION", np.int64(2**45))
    rows = np.r_[np.arange(64), 64, 65, 66]
    cols = np.r_[np.zeros(64, dtype=np.int64), 1, 1, 1]
    X = sp.csr_matrix((np.r_[np.ones(64), -1.0, -1.0, -1.0], (rows, cols)), shape=(67, 2))
    ids = np.zeros(67, dtype=np.int64)
    _, totals = _units.unit_totals(X, ids, 1.0, 2.0)
    np.testing.assert_array_equal(totals.toarray(), [[2**45, 0, 0, 3 * 2**40]])
    pieces = [_units.unit_totals(X[a:b], ids[a:b], 1.0, 2.0) for a, b in [(0, 40), (40, 67)]]
    np.testing.assert_array_equal(_units.add_unit_totals(pieces)[1].toarray(),
                                  totals.toarray())
    plan = sparse_mean_plan(1, 2, 1.0, 4)
    part = _units.bound_unit_totals(totals, plan)
    got = np.ldexp(part.sums.astype(np.float64), -plan.frac_bits)
    np.testing.assert_allclose(got, np.array([32.0, -3.0]) / np.hypot(32.0, 3.0),
                               rtol=0, atol=2.0**-plan.frac_bits)


def test_saturating_sums_with_many_duplicates_and_rows_match_the_exact_sum():
    # The one-key sort (row · columns + column) orders the pairs as (row, column):
    # every row's segments land in its CSR row, in column order, whatever the input
    # order, with many repeats of each pair.
    rng = np.random.default_rng(5)
    shape = (300, 2 * 4096)
    rows = rng.integers(0, shape[0], 20000)
    cols = rng.integers(0, 40, 20000) * 200  # repeated pairs, spread columns
    values = rng.integers(0, 2**40, 20000)
    exact = sp.coo_matrix((values, (rows, cols)), shape=shape).tocsr()
    exact.sum_duplicates()
    got = _units._saturating_sum(rows, cols, values, shape)
    assert got.has_sorted_indices
    np.testing.assert_array_equal(got.indptr, exact.indptr)
    np.testing.assert_array_equal(got.indices, exact.indices)
    np.testing.assert_array_equal(got.data, exact.data)
