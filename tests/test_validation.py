"""The checks and column standardisation every estimator shares (:mod:`gplvm._validation`,
issues 31 and 32), tested on their own: a column's spread taken relative to its size, so columns
of tiny values are neither called constant nor given a zero scale (their squares underflow)."""

from __future__ import annotations

import numpy as np

from gplvm._validation import (column_standardisation, column_std, kept_columns,
                               uninformative_columns)


def test_column_std_is_relative_to_each_column_s_size():
    """column_std of 1e-300·Y is 1e-300 times numpy's std of Y (numpy's own underflows there),
    and equals numpy's on ordinary data."""
    Y = np.random.default_rng(0).normal(size=(20, 4))
    np.testing.assert_allclose(column_std(1e-300 * Y), 1e-300 * np.nanstd(Y, axis=0),
                               rtol=1e-12)
    assert np.array_equal(column_std(Y), np.nanstd(Y, axis=0))


def test_a_kept_column_of_tiny_values_gets_its_spread_not_zero():
    """The standardisation every estimator shares (issue 32, with issue 31's column_std):
    a column of different values near 1e-170 is kept (its spread is not 0), so its scale must
    be positive — np.nanstd underflows to 0 there, which would drop it silently."""
    Y = np.array([[1e-170, 1.0, 5.0], [2e-170, 2.0, 5.0], [3e-170, 4.0, 5.0]])
    dropped = uninformative_columns(Y)
    assert dropped.tolist() == [False, False, True]
    mean, scale = column_standardisation(Y, dropped, True)
    assert kept_columns(scale).tolist() == [True, True, False]
    np.testing.assert_allclose(scale[0], np.sqrt(2 / 3) * 1e-170, rtol=1e-12)
    assert (mean[2], scale[2]) == (5.0, 0.0)
