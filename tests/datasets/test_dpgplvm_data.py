"""The data of the DP-GP-LVM experiments: Figure 6's factorised columns and §G's walk with its
legs shifted half a gait cycle."""

from __future__ import annotations

import numpy as np
import pytest

from gplvm.data import (CMU35_LEG_CHANNELS, FIGURE6_DIMENSIONS, gait_period, make_factorised,
                        walk_ambiguity)


def test_factorised_columns_follow_their_function():
    data = make_factorised(n_samples=120, columns_per_function=5, noise_var=0.1,
                           random_state=0)
    assert data.Y.shape == (120, 20) and data.X.shape == (120, 6)
    np.testing.assert_array_equal(np.bincount(data.labels), [5, 5, 5, 5])
    for g, dims in enumerate(FIGURE6_DIMENSIONS):
        np.testing.assert_array_equal(np.flatnonzero(data.active[g]), dims)
    # unit signal variance per column plus independent noise of variance 0.1: the sample
    # variances average 1.1 within a few standard errors (var of a variance ≈ 2σ⁴/N)
    se = np.sqrt(2 * 0.1**2 / 120 / 20)
    assert abs(data.Y.var(0).mean() - 1.1) < 5 * se + 0.02


def test_walk_ambiguity_shifts_only_the_legs():
    rng = np.random.default_rng(0)
    walk = rng.normal(size=(50, 6))
    legs = np.array([False, True, True, False, False, True])
    amb = walk_ambiguity(walk, legs, shift=7)
    n = 50 - 7
    assert amb.Y.shape == (2 * n, 6)
    np.testing.assert_array_equal(amb.Y[:n], walk[7:])                       # the walk
    np.testing.assert_array_equal(amb.Y[n:, ~legs], walk[7:, ~legs])         # same upper body
    np.testing.assert_array_equal(amb.Y[n:, legs], walk[:n, legs])           # legs 7 frames back
    np.testing.assert_array_equal(amb.groups, np.repeat([0, 1], n))


def test_gait_period_of_a_sine():
    t = np.arange(200)
    assert gait_period(np.sin(2 * np.pi * t / 33.0)) in (32, 33, 34)


@pytest.mark.shared_data
def test_cmu35_walk_has_a_human_gait_cycle():
    """Subject 35's walks at 30 fps: a gait cycle (two steps) takes 0.8-1.5 s for adults
    walking, i.e. 24-45 frames, and the left femur's flexion channel shows it."""
    from gplvm.data.loaders import load_cmu_mocap_walkjog

    data = load_cmu_mocap_walkjog()
    for trial in (1, 8):
        walk = data.Y[data.groups == trial]
        assert 24 <= gait_period(walk[:, CMU35_LEG_CHANNELS[0]]) <= 45
