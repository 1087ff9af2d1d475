"""Linear algebra: Kronecker operations against dense ones, and the jitter policy."""

import warnings

import jax
import numpy as np
import pytest

from gplvm import linalg as la
from gplvm.kernels import RBF

rng = np.random.default_rng(0)


def _spd(n):
    A = rng.normal(size=(n, n))
    return A @ A.T + 0.1 * np.eye(n)


FACTORS = [_spd(3), _spd(4), _spd(2)]
DENSE = np.kron(np.kron(FACTORS[0], FACTORS[1]), FACTORS[2])


@pytest.mark.parametrize("cols", [None, 3])
def test_kron_mvp_matches_dense(cols):
    V = rng.normal(size=(24,) if cols is None else (24, cols))
    np.testing.assert_allclose(la.kron_mvp(FACTORS, V), DENSE @ V, rtol=1e-10, atol=1e-10)


def test_kron_mvp_rectangular_factors():
    A, B = rng.normal(size=(2, 3)), rng.normal(size=(5, 4))
    V = rng.normal(size=(12, 2))
    np.testing.assert_allclose(la.kron_mvp([A, B], V), np.kron(A, B) @ V, rtol=1e-10,
                               atol=1e-12)


def test_kron_eigh_solve_logdet_diag_match_dense():
    eig = la.kron_eigh(FACTORS)
    np.testing.assert_allclose(np.sort(eig.values()), np.linalg.eigvalsh(DENSE), rtol=1e-10)
    V = rng.normal(size=(24, 2))
    ref = np.linalg.solve(DENSE + 0.37 * np.eye(24), V)
    np.testing.assert_allclose(la.kron_solve_shifted(eig, 0.37, V), ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(la.kron_logdet_shifted(eig, 0.37),
                               np.linalg.slogdet(DENSE + 0.37 * np.eye(24))[1], rtol=1e-10)
    np.testing.assert_allclose(la.kron_diag(FACTORS), np.diag(DENSE), rtol=1e-12)
    np.testing.assert_allclose(la.kron(FACTORS), DENSE, rtol=1e-12)


def test_cholesky_helpers():
    A = _spd(6)
    B = rng.normal(size=(6, 2))
    res = la.safe_cholesky(A)
    assert res.jitter == 0.0
    np.testing.assert_allclose(res.L @ res.L.T, A, rtol=1e-12)
    np.testing.assert_allclose(la.cho_solve(res.L, B), np.linalg.solve(A, B), rtol=1e-10)
    np.testing.assert_allclose(la.logdet_from_cholesky(res.L), np.linalg.slogdet(A)[1],
                               rtol=1e-12)
    np.testing.assert_allclose(la.solve_triangular(res.L, B), np.linalg.solve(res.L, B),
                               rtol=1e-10)
    np.testing.assert_allclose(la.solve_triangular(res.L, B, trans=True),
                               np.linalg.solve(res.L.T, B), rtol=1e-10)


def test_positive_definite_needs_no_jitter_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert la.safe_cholesky(_spd(5)).jitter == 0.0


def test_singular_matrix_gets_warning_and_valid_factor():
    # duplicated inputs make an RBF Gram matrix exactly singular (rank 3 of 6)
    X = np.repeat(rng.normal(size=(3, 2)), 2, axis=0)
    K = np.asarray(RBF(1.0)(X))
    with pytest.warns(RuntimeWarning, match="jitter"):
        res = la.safe_cholesky(K, name="Kuu")
    assert res.jitter > 0
    assert np.all(np.isfinite(res.L))
    # the factor is exact for the jittered matrix, and the recorded jitter reproduces it in jit
    np.testing.assert_allclose(res.L @ res.L.T, K + res.jitter * np.eye(6), rtol=1e-10,
                               atol=1e-12)
    L2 = jax.jit(la.cholesky)(K, res.jitter)
    np.testing.assert_allclose(L2, res.L, rtol=1e-12, atol=1e-14)


def test_impossible_matrix_raises_error_naming_the_knob():
    A = -_spd(4)
    with pytest.raises(la.CholeskyError, match="max_jitter"):
        la.safe_cholesky(A, name="Kuu")
    with pytest.raises(la.CholeskyError, match="non-finite"):
        la.safe_cholesky(np.full((2, 2), np.nan))


def test_safe_cholesky_refuses_tracers():
    with pytest.raises(TypeError, match="outside"):
        jax.jit(lambda A: la.safe_cholesky(A).L)(np.eye(2))


def test_escalate_jitter_climbs_the_one_policy():
    """Rungs: sqrt(eps)·scale, then ×10 each time, refused past max_jitter·scale with an error
    that names the knob (DESIGN.md, "Numbers and numerics")."""
    scale, eps = 4.0, np.finfo(np.float64).eps
    rung = la.escalate_jitter(0.0, scale)
    assert rung == pytest.approx(np.sqrt(eps) * scale, rel=1e-15)
    rungs = [rung]
    with pytest.raises(la.CholeskyError, match="max_jitter"):
        while True:
            rungs.append(la.escalate_jitter(rungs[-1], scale))
    np.testing.assert_allclose(np.diff(np.log10(rungs)), 1.0, rtol=1e-12)
    assert rungs[-1] <= 1e-2 * scale < 10 * rungs[-1]
