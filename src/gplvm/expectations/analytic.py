r"""Closed-form psi-statistics (seed 001 §C, eqs. 33–41) for RBF, Linear, White, Constant and sums.

Notation: :math:`q(\mathbf x_n) = \mathcal N(\mu_n, \mathrm{diag}\,S_n)`, RBF
:math:`k = \sigma^2 \exp(-\tfrac12\sum_q \gamma_q (x_q - x'_q)^2)` with
:math:`\gamma_q = \ell_q^{-2}`, Linear :math:`k = \sum_q \alpha_q x_q x'_q`.  Every function
here works per point (``psi0`` entries, ``psi1`` rows) or sums over points with a (G, N) weight
matrix ``W`` (``psi2``: G × M × M).

A sum kernel :math:`k = \sum_t k_t` has additive ``psi0`` and ``psi1``; its ``psi2`` also needs the
cross terms :math:`C^{st}_{jj'} = \sum_n w_n E[k_s(\mathbf x_n, z_j) k_t(\mathbf x_n, z_{j'})]`,
available here for RBF×RBF (any two length-scales), RBF×Linear, Linear×Linear, Constant×anything
with a closed-form ``psi1``, and White×anything (zero: white noise has no cross-covariance).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.expectations._chunks import choose_chunk, map_reduce_points
from gplvm.kernels import RBF, AbstractKernel, Constant, Linear, Sum, White
from gplvm.typing import Array, Float

#: psi2 for G weightings of the points: one M × M matrix per row of W.
Psi2 = Float[Array, "G M M"]


def _floor_exponent(log_value):
    """Clamp log-values at −700 before ``exp``.

    exp(−700) ≈ 1e−304 is still a normal float; below −708 the result is subnormal, and
    arithmetic on subnormals (in the backward pass over N × M × M arrays) is orders of magnitude
    slower on x86, which stalled fits whose line search probed far-away parameters.  The clamp
    changes values by less than 1e−304 and only where they are negligible anyway.
    """
    return jnp.maximum(log_value, -700.0)


def _ard(param, Q):
    """A scalar or (Q,) hyper-parameter as a (Q,) vector."""
    return jnp.broadcast_to(jnp.asarray(param, dtype=float), (Q,))


def _scalar(param):
    return jnp.asarray(param, dtype=float)


# --------------------------------------------------------------------------- single kernels


def _rbf_psi0(k, mu, S):
    """Seed 001 eq. 34: E[k(x, x)] = σ² for a stationary kernel."""
    return jnp.full(mu.shape[0], _scalar(k.variance))


def _rbf_psi1(k, Z, mu, S):
    r"""Seed 001 eqs. 36–38:

    .. math:: [\Psi_1]_{nj} = \sigma^2 \prod_q (\gamma_q S_{nq} + 1)^{-1/2}
              \exp\Big(-\sum_q \frac{\gamma_q (\mu_{nq} - z_{jq})^2}{2(\gamma_q S_{nq} + 1)}\Big).

    The quadratic is expanded into matrix products (N × M memory, not N × M × Q); it is a sum
    of non-negative terms, so round-off below zero is clipped.
    """
    gamma = 1.0 / _ard(k.lengthscale, mu.shape[1]) ** 2
    a = gamma / (gamma * S + 1.0)                                          # (N, Q)
    quad = (jnp.sum(a * mu**2, axis=1)[:, None] - 2.0 * (a * mu) @ Z.T + a @ (Z**2).T)
    log_pref = jnp.log(_scalar(k.variance)) - 0.5 * jnp.sum(jnp.log1p(gamma * S), axis=1)
    return jnp.exp(_floor_exponent(log_pref[:, None] - 0.5 * jnp.maximum(quad, 0.0)))


def _linear_psi0(k, mu, S):
    """E[Σ_q α_q x_q²] = Σ_q α_q (μ_q² + S_q)."""
    return jnp.sum(_ard(k.variance, mu.shape[1]) * (mu**2 + S), axis=1)


def _linear_psi1(k, Z, mu, S):
    """E[Σ_q α_q x_q z_q] = (μ ⊙ α) Zᵀ."""
    return (mu * _ard(k.variance, mu.shape[1])) @ Z.T


def _constant_psi0(k, mu, S):
    return jnp.full(mu.shape[0], _scalar(k.variance))


def _constant_psi1(k, Z, mu, S):
    return jnp.full((mu.shape[0], Z.shape[0]), _scalar(k.variance))


def _white_psi0(k, mu, S):
    """White noise sits on the diagonal k(x, x) = σ² only."""
    return jnp.full(mu.shape[0], _scalar(k.variance))


def _white_psi1(k, Z, mu, S):
    """k_white(x_n, z_j) = 0: a latent point never coincides with an inducing input."""
    return jnp.zeros((mu.shape[0], Z.shape[0]))


_PSI0 = {RBF: _rbf_psi0, Linear: _linear_psi0, Constant: _constant_psi0, White: _white_psi0}
_PSI1 = {RBF: _rbf_psi1, Linear: _linear_psi1, Constant: _constant_psi1, White: _white_psi1}


# --------------------------------------------------------------------------- psi2 and cross terms


def rbf_rbf_psi2(k1: RBF, k2: RBF, Z: Float[Array, "M Q"], mu: Float[Array, "N Q"],
                 S: Float[Array, "N Q"], W: Float[Array, "G N"], chunk_size: int | None = None
                 ) -> Psi2:
    r"""Σ_n w_gn E[k1(x_n, z_j) k2(x_n, z_j')] for two RBF kernels (G × M × M).

    With :math:`g = \gamma_1 + \gamma_2`, completing the square in x gives per dimension
    :math:`e^{-\frac12\gamma_1 (x-z_j)^2 - \frac12\gamma_2 (x-z_{j'})^2}
    = e^{-\frac{\gamma_1\gamma_2}{2g}(z_j - z_{j'})^2} e^{-\frac g2 (x - c)^2}`, and the Gaussian
    expectation of the last factor is :math:`(1 + gS)^{-1/2} e^{-\frac{g}{2(1+gS)}(\mu - c)^2}`.
    For k1 = k2 this is seed 001 eqs. 40–41 (with the sum over n *outside* the exponential:
    eq. 40 as printed puts it inside the log).  We write the exponent in the differences
    :math:`d_1 = \mu - z_j`, :math:`d_2 = \mu - z_{j'}`:

    .. math:: -\frac12\sum_q \frac{\gamma_1(1+\gamma_2 S) d_1^2 + \gamma_2(1+\gamma_1 S) d_2^2
              - 2\gamma_1\gamma_2 S\, d_1 d_2}{1 + gS},

    which is translation invariant (no cancellation between large μ and z) and needs only an
    N × M × Q difference array and one batched matrix product for the N × M × M cross term.

    Memory: chunks of C points hold C·M·(3M + 2Q) floats; C is chosen so this stays within
    :data:`gplvm.expectations._chunks.CHUNK_BUDGET` (or given by ``chunk_size``).
    """
    Q, M = mu.shape[1], Z.shape[0]
    g1 = 1.0 / _ard(k1.lengthscale, Q) ** 2
    g2 = 1.0 / _ard(k2.lengthscale, Q) ** 2
    log_s4 = jnp.log(_scalar(k1.variance)) + jnp.log(_scalar(k2.variance))

    def body(chunk):
        mu_c, S_c, Wt_c = chunk
        den = 1.0 + (g1 + g2) * S_c                                         # (C, Q)
        c1, c2 = g1 * (1.0 + g2 * S_c) / den, g2 * (1.0 + g1 * S_c) / den
        c12 = g1 * g2 * S_c / den
        D = mu_c[:, None, :] - Z[None, :, :]                               # (C, M, Q)
        t1 = jnp.sum(D**2 * c1[:, None, :], axis=2)                         # (C, M)
        t2 = jnp.sum(D**2 * c2[:, None, :], axis=2)
        cross = jnp.einsum("cjq,ckq->cjk", D * c12[:, None, :], D)          # (C, M, M)
        quad = t1[:, :, None] + t2[:, None, :] - 2.0 * cross
        log_pref = log_s4 - 0.5 * jnp.sum(jnp.log(den), axis=1)            # (C,)
        P = jnp.exp(_floor_exponent(log_pref[:, None, None] - 0.5 * jnp.maximum(quad, 0.0)))
        return jnp.einsum("cg,cjk->gjk", Wt_c, P), ()

    chunk = choose_chunk(mu.shape[0], M * (3 * M + 2 * Q), chunk_size)
    psi2, _ = map_reduce_points(body, (mu, S, W.T), (0.0, 1.0, 0.0), chunk)
    return psi2


def rbf_psi2(k: RBF, Z: Float[Array, "M Q"], mu: Float[Array, "N Q"], S: Float[Array, "N Q"],
             W: Float[Array, "G N"], chunk_size: int | None = None) -> Psi2:
    r"""Σ_n w_gn E[k(x_n, z_j) k(x_n, z_j')] for one RBF kernel (G × M × M), as matrix products.

    Seed 001 eqs. 40–41 (sum over n outside the exponential).  Per dimension,
    :math:`e^{-\frac\gamma2 (x-z_j)^2 - \frac\gamma2 (x-z_{j'})^2}
    = e^{-\frac\gamma4 (z_j - z_{j'})^2} e^{-\gamma (x - \bar z_{jj'})^2}` and
    :math:`E\,e^{-\gamma (x - \bar z)^2} = (1 + 2\gamma S)^{-1/2}
    e^{-b (\mu - \bar z)^2}` with :math:`b = \gamma / (1 + 2\gamma S)`.  Expanding
    :math:`\sum_q b_{nq} (\mu_{nq} - \bar z_{jj'q})^2` writes the whole N × P exponent (P =
    M(M+1)/2 pairs j ≤ j'; psi2 is symmetric) as one (N × (2Q+1)) ((2Q+1) × P) matrix product,
    and the weighted sum over n is a second one; reverse mode then needs two more.  This replaces
    N small (M × Q)(Q × M) products in :func:`rbf_rbf_psi2` (kept for two different RBF
    kernels) and is about 4× faster with its gradient at oil-flow sizes (N = 1000, M = 30,
    Q = 10).  μ and z are first shifted by the mean inducing input (the statistics are
    translation invariant), so the expansion does not cancel large numbers; the exponent is a
    sum of squares up to round-off of order 1e−15, which is not clipped.
    """
    Q, M = mu.shape[1], Z.shape[0]
    gamma = 1.0 / _ard(k.lengthscale, Q) ** 2
    centre = jax.lax.stop_gradient(jnp.mean(Z, axis=0))
    Zc, mu = Z - centre, mu - centre
    # psi2 is symmetric: compute the M(M+1)/2 pairs j ≤ j' and fill the rest by symmetry
    rows, cols = np.triu_indices(M)
    Zbar = 0.5 * (Zc[rows] + Zc[cols])                                      # (P, Q)
    A = 0.25 * jnp.sum(gamma * (Zc[rows] - Zc[cols]) ** 2, axis=1)          # (P,)
    log_s4 = 2.0 * jnp.log(_scalar(k.variance))
    # exponent = −F_n · G_p with per-point F = [bμ, b, Σ_q bμ² − log prefactor] and per-pair
    # G = [−2 z̄, z̄², 1] (+ A_p): one (C × (2Q+1)) (2Q+1 × P) product, forward and backward
    G = jnp.concatenate([-2.0 * Zbar, Zbar**2, jnp.ones((rows.size, 1))], axis=1)

    def body(chunk):
        mu_c, S_c, Wt_c = chunk
        den = 1.0 + 2.0 * gamma * S_c                                        # (C, Q)
        b = gamma / den
        log_pref = log_s4 - 0.5 * jnp.sum(jnp.log(den), axis=1)             # (C,)
        F = jnp.concatenate([b * mu_c, b, (jnp.sum(b * mu_c**2, axis=1) - log_pref)[:, None]],
                            axis=1)
        P = jnp.exp(_floor_exponent(-(F @ G.T) - A[None, :]))              # (C, P)
        return Wt_c.T @ P, ()

    chunk = choose_chunk(mu.shape[0], 3 * rows.size, chunk_size)
    tri, _ = map_reduce_points(body, (mu, S, W.T), (0.0, 1.0, 0.0), chunk)  # (G, P)
    pair = np.zeros((M, M), dtype=np.int32)
    pair[rows, cols] = np.arange(rows.size)
    pair[cols, rows] = np.arange(rows.size)
    return tri[:, pair]


def rbf_linear_psi2(k_rbf: RBF, k_lin: Linear, Z: Float[Array, "M Q"], mu: Float[Array, "N Q"],
                    S: Float[Array, "N Q"], W: Float[Array, "G N"],
                    psi1_rbf: Float[Array, "N M"], chunk_size: int | None = None) -> Psi2:
    r"""Σ_n w_gn E[k_rbf(x_n, z_j) k_lin(x_n, z_j')] (G × M × M).

    Under the tilted density :math:`\mathcal N(x|\mu, S) e^{-\frac\gamma2 (x - z_j)^2}` the mean
    of x is :math:`m_{nj} = (\mu_n + \gamma S_n z_j) / (1 + \gamma S_n)`, so the cross term is
    :math:`\sum_n w_n [\Psi_1]_{nj} \sum_q \alpha_q z_{j'q} m_{njq}`.
    """
    Q, M = mu.shape[1], Z.shape[0]
    gamma = 1.0 / _ard(k_rbf.lengthscale, Q) ** 2
    alpha = _ard(k_lin.variance, Q)

    def body(chunk):
        mu_c, S_c, Wt_c, p1_c = chunk
        A = mu_c / (1.0 + gamma * S_c)                                      # (C, Q)
        B = gamma * S_c / (1.0 + gamma * S_c)
        wp = Wt_c.T[:, :, None] * p1_c[None, :, :]                          # (G, C, M)
        U = jnp.einsum("gcj,cq->gjq", wp, A) + jnp.einsum("gcj,cq->gjq", wp, B) * Z[None]
        return jnp.einsum("gjq,kq->gjk", U, Z * alpha), ()

    chunk = choose_chunk(mu.shape[0], M * (W.shape[0] + 2 * Q), chunk_size)
    out, _ = map_reduce_points(body, (mu, S, W.T, psi1_rbf), (0.0, 1.0, 0.0, 0.0), chunk)
    return out


def linear_linear_psi2(k1: Linear, k2: Linear, Z: Float[Array, "M Q"], mu: Float[Array, "N Q"],
                       S: Float[Array, "N Q"], W: Float[Array, "G N"]) -> Psi2:
    r"""Σ_n w_gn E[k1(x_n, z_j) k2(x_n, z_j')] for two Linear kernels:

    (Z α_1) [Σ_n w_gn (μ_n μ_nᵀ + diag S_n)] (Z α_2)ᵀ, with a Q × Q middle factor.
    """
    Q = mu.shape[1]
    second_moment = (jnp.einsum("gn,nq,nr->gqr", W, mu, mu)
                     + jnp.eye(Q)[None] * (W @ S)[:, None, :])             # (G, Q, Q)
    A1, A2 = Z * _ard(k1.variance, Q), Z * _ard(k2.variance, Q)
    return jnp.einsum("jq,gqr,kr->gjk", A1, second_moment, A2)


def _constant_cross(c, psi1_other, W, M):
    """Σ_n w_gn E[c · k(x_n, z_j')] = c (W Ψ1)_{g j'}, the same for every row j."""
    row = _scalar(c.variance) * (W @ psi1_other)                           # (G, M)
    return jnp.broadcast_to(row[:, None, :], (W.shape[0], M, M))


class _Term(NamedTuple):
    """A summand of the kernel and its Ψ1 (N, M), which the cross terms with a Constant and
    between an RBF and a Linear kernel read."""

    kernel: AbstractKernel
    psi1: jax.Array


def _pair_psi2(term_a: _Term, term_b: _Term, Z, mu, S, W, chunk_size):
    """Σ_n w_gn E[a(x_n, z_j) b(x_n, z_j')] for the kernels a, b of two summands (with their
    Ψ1, :class:`_Term`), or None when no closed form is implemented."""
    (a, psi1_a), (b, psi1_b) = term_a, term_b
    M = Z.shape[0]
    ta, tb = type(a), type(b)
    if ta is White or tb is White:
        return jnp.zeros((W.shape[0], M, M))
    if ta is Constant:
        return _constant_cross(a, psi1_b, W, M)
    if tb is Constant:
        return jnp.swapaxes(_constant_cross(b, psi1_a, W, M), 1, 2)
    if ta is RBF and tb is RBF:
        if a is b:
            return rbf_psi2(a, Z, mu, S, W, chunk_size)
        return rbf_rbf_psi2(a, b, Z, mu, S, W, chunk_size)
    if ta is Linear and tb is Linear:
        return linear_linear_psi2(a, b, Z, mu, S, W)
    if ta is RBF and tb is Linear:
        return rbf_linear_psi2(a, b, Z, mu, S, W, psi1_a, chunk_size)
    if ta is Linear and tb is RBF:
        return jnp.swapaxes(rbf_linear_psi2(b, a, Z, mu, S, W, psi1_b, chunk_size), 1, 2)
    return None


_PAIRS = {(RBF, RBF), (Linear, Linear), (RBF, Linear), (Linear, RBF)}


def _pair_supported(ta, tb) -> bool:
    return (White in (ta, tb) or Constant in (ta, tb) or (ta, tb) in _PAIRS)


# --------------------------------------------------------------------------- sums and dispatch


def additive_terms(kernel: AbstractKernel) -> list[AbstractKernel]:
    """The summands of a (nested) :class:`~gplvm.kernels.Sum`, left to right."""
    if type(kernel) is Sum:
        return additive_terms(kernel.k1) + additive_terms(kernel.k2)
    return [kernel]


def has_analytic(kernel: AbstractKernel) -> bool:
    """Whether :func:`analytic_psi` has a closed form for every term and cross term."""
    types = [type(t) for t in additive_terms(kernel)]
    if not all(t in _PSI1 for t in types):
        return False
    return all(_pair_supported(a, b) for i, a in enumerate(types) for b in types[i + 1:])


def analytic_psi(kernel: AbstractKernel, Z: Float[Array, "M Q"], mu: Float[Array, "N Q"],
                 S: Float[Array, "N Q"], W: Float[Array, "G N"], chunk_size: int | None = None
                 ) -> tuple[Float[Array, " G"], Float[Array, "N M"], Psi2]:
    """Closed-form (psi0 (G,), psi1 (N, M), psi2 (G, M, M)) for a kernel with :func:`has_analytic`.

    ``W`` (G × N) weights the points; psi1 is unweighted.
    """
    terms = additive_terms(kernel)
    psi1s = [_PSI1[type(t)](t, Z, mu, S) for t in terms]
    psi0 = W @ sum(_PSI0[type(t)](t, mu, S) for t in terms)
    pairs = [_Term(t, p) for t, p in zip(terms, psi1s)]
    psi2 = 0.0
    for i in range(len(terms)):
        for j in range(i, len(terms)):
            C = _pair_psi2(pairs[i], pairs[j], Z, mu, S, W, chunk_size)
            # a cross term appears twice in E[(Σ_t k_t)(Σ_t k_t)ᵀ]: C and its transpose
            psi2 = psi2 + (C if i == j else C + jnp.swapaxes(C, 1, 2))
    return psi0, sum(psi1s), psi2
