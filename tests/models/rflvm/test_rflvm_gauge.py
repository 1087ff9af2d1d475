"""The NUTS block's (X, W) modulo rotations (:mod:`gplvm.models.rflvm.gauge`, issue 30): the
canonical point, its coordinates and the Jacobian that makes its density the posterior's."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import expm

from _rflvm_tiny import tiny_rflvm
from gplvm.kernels import RBF
from gplvm.models.rflvm import gauge
from gplvm.models.rflvm.init import prepare_data


@pytest.mark.parametrize("Q", [2, 3])
def test_log_jacobian_is_the_change_of_variables_to_l_and_the_rotation(Q):
    """W₁:Q = L(c) expm(S(s)) O₀, c = (log l_ii, l_ij for i > j), S skew-symmetric from s:
    near s = 0 the coordinates s carry Haar measure with one constant density whatever O₀, so
    |det ∂W₁:Q/∂(c, s)| at s = 0 must equal exp(log_jacobian) times one constant at every
    point (Muirhead 1982, Thm 2.1.13, with one power of l_ii more for log l_ii) — checked by
    automatic differentiation at five random points, not from the formula."""
    rng = np.random.default_rng(Q)
    rows, cols = np.tril_indices(Q, -1)
    up_r, up_c = np.triu_indices(Q, 1)

    def W_of(coords, O0):
        L = jnp.diag(jnp.exp(coords[:Q])).at[rows, cols].set(coords[Q:Q + rows.size])
        s = coords[Q + rows.size:]
        S = jnp.zeros((Q, Q)).at[up_r, up_c].set(s).at[up_c, up_r].set(-s)
        return (L @ expm(S) @ O0).ravel()

    jacobian = jax.jit(jax.jacfwd(W_of))
    ratios = []
    for _ in range(5):
        c = jnp.asarray(np.r_[rng.normal(0, 0.5, Q), rng.normal(size=rows.size),
                              np.zeros(up_r.size)])
        O0 = jnp.asarray(np.linalg.qr(rng.normal(size=(Q, Q)))[0])
        det = abs(np.linalg.det(np.asarray(jacobian(c, O0))))
        L = jnp.diag(jnp.exp(c[:Q])).at[rows, cols].set(c[Q:Q + rows.size])
        ratios.append(det / float(jnp.exp(gauge.log_jacobian(L))))
    np.testing.assert_allclose(ratios, ratios[0], rtol=1e-10)


def test_canonical_point_is_lower_triangular_and_keeps_every_feature():
    """(X Oᵀ, W Oᵀ): W₁:Q lower-triangular with a positive diagonal, XWᵀ and XXᵀ unchanged,
    and pack/unpack invert each other with (M/2)Q − Q(Q − 1)/2 coordinates."""
    rng = np.random.default_rng(0)
    X, W = jnp.asarray(rng.normal(size=(6, 3))), jnp.asarray(rng.normal(size=(5, 3)))
    Xc, Wc = gauge.canonical(X, W)
    np.testing.assert_allclose(Xc @ Wc.T, X @ W.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Xc @ Xc.T, X @ X.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.triu(np.asarray(Wc[:3]), 1), 0.0, atol=1e-14)
    assert np.all(np.diag(np.asarray(Wc[:3])) > 0)
    flat = gauge.pack(Wc)
    assert flat.shape == (gauge.n_coords(5, 3),) == (15 - 3,)
    np.testing.assert_allclose(gauge.unpack(flat, 5, 3), Wc, rtol=1e-14, atol=1e-15)


def test_applies_only_where_the_prior_is_rotation_invariant():
    """An RBF with one length-scale under ``sampler='nuts'``: yes; an ARD length-scale, the DP
    mixture with its components as drawn or the Gibbs sweep: no; the DP mixture with its
    components integrated out (an isotropic NIW base): yes, and a bad value is refused."""
    spec, data, _, Y = tiny_rflvm("poisson")
    assert gauge.applies(spec, data)
    ard = prepare_data(spec, Y, None, None, RBF(lengthscale=jnp.ones(2)), None)
    assert not gauge.applies(spec, ard)
    for change in ({"learn_kernel": True}, {"sampler": "gibbs"},
                   {"learn_kernel": True, "dp_components": "integrated", "sampler": "gibbs"}):
        assert not gauge.applies(dataclasses.replace(spec, **change), data)
    integrated = dataclasses.replace(spec, learn_kernel=True, dp_components="integrated")
    assert gauge.applies(integrated, data) and gauge.applies(integrated, ard)
    with pytest.raises(ValueError, match="dp_components='marginal'.*'drawn' or 'integrated'"):
        dataclasses.replace(spec, dp_components="marginal")
