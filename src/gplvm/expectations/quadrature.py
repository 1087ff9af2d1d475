r"""Psi-statistics of any kernel by quadrature over q(x_n) (seed 004 §B).

Every rule replaces :math:`E_{\mathcal N(\mu_n, \mathrm{diag} S_n)}[f(\mathbf x)]` by
:math:`\sum_s \omega_s f(\mu_n + \sqrt{S_n} \odot \varepsilon_s)` with standard nodes ε_s and
weights ω_s summing to one:

* unscented (§B.1): ε = ±√Q e_q, ω = 1/(2Q);
* Gauss–Hermite (§B.2): the tensor grid of the 1-D probabilists' rule.  Seed 004 writes nodes
  √2 r_t with the physicists' weights, whose products sum to π^{Q/2}; the missing π^{−Q/2} is
  restored here by normalising the weights (they must sum to one);
* Monte Carlo (§B.3): ε ~ N(0, I) drawn per point from ``fold_in(key, n)``, ω = 1/T.

Then, stacking the (n, s) points, psi1 = Σ_s ω_s K[(n, s), :], psi0 = Σ_n w_n Σ_s ω_s k(x_ns, x_ns)
(``kernel.diag``, so white noise counts), and psi2 = Kᵀ diag(w_n ω_s) K — one matrix product per
chunk of points; no N × M × M × Q (or N × S × M × M) array is formed.  Memory per chunk of C points
is about C·S·M·(G + 1) floats (G weightings), bounded by
:data:`gplvm.expectations._chunks.CHUNK_BUDGET`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.expectations._chunks import choose_chunk, map_reduce_points
from gplvm.expectations.rules import AbstractRule, GaussHermite, MonteCarlo, Unscented
from gplvm.kernels import AbstractKernel
from gplvm.typing import Array, Float

#: Standard nodes ε_s (S × Q) and weights ω_s (S,) summing to one.
Nodes = tuple[Float[Array, "S Q"], Float[Array, " S"]]

#: The largest Gauss–Hermite grid (nodes per point) accepted before asking for another rule.
MAX_GRID_NODES = 2**20


def unscented_nodes(Q: int) -> Nodes:
    """Seed 004 §B.1: sigma points ±√Q e_q (2Q × Q) and equal weights 1/(2Q)."""
    E = math.sqrt(Q) * np.eye(Q)
    return jnp.asarray(np.concatenate([E, -E])), jnp.full(2 * Q, 1.0 / (2 * Q))


def gauss_hermite_nodes(n_points: int, Q: int) -> Nodes:
    """Tensor-grid nodes (H^Q × Q) for N(0, I) and weights summing to one (seed 004 §B.2)."""
    if n_points < 1:
        raise ValueError(f"GaussHermite needs n_points >= 1; got {n_points}")
    if n_points**Q > MAX_GRID_NODES:
        raise ValueError(f"GaussHermite(n_points={n_points}) at Q = {Q} has {n_points}^{Q} = "
                         f"{n_points**Q:.3g} nodes per point (limit {MAX_GRID_NODES}); lower "
                         f"n_points or use Unscented() / MonteCarlo() for this many dimensions")
    # probabilists' Hermite rule: ∫ f(t) e^{−t²/2} dt ≈ Σ w_i f(t_i), Σ w_i = √(2π)
    t, w = np.polynomial.hermite_e.hermegauss(n_points)
    w = w / w.sum()
    nodes = np.stack([g.ravel() for g in np.meshgrid(*[t] * Q, indexing="ij")], axis=1)
    weights = np.prod(np.stack([g.ravel() for g in np.meshgrid(*[w] * Q, indexing="ij")],
                               axis=1), axis=1)
    return jnp.asarray(nodes), jnp.asarray(weights / weights.sum())


def _monte_carlo_eps(key, index, n_samples: int, Q: int):
    """Standard normal draws (C × T × Q) for the points with global indices ``index``."""
    if key is None:
        key = jax.random.PRNGKey(0)
    draw = lambda n: jax.random.normal(jax.random.fold_in(key, n), (n_samples, Q))  # noqa: E731
    return jax.vmap(draw)(index)


def quadrature_psi(kernel: AbstractKernel, Z: Float[Array, "M Q"], mu: Float[Array, "N Q"],
                   S: Float[Array, "N Q"], W: Float[Array, "G N"], rule: AbstractRule,
                   row_offset=0
                   ) -> tuple[Float[Array, " G"], Float[Array, "N M"], Float[Array, "G M M"]]:
    """(psi0 (G,), psi1 (N, M), psi2 (G, M, M)) by the quadrature ``rule`` (see module doc);
    ``row_offset``: the global index of the first row (the Monte Carlo draws' key)."""
    N, Q = mu.shape
    M, G = Z.shape[0], W.shape[0]
    if isinstance(rule, Unscented):
        eps, omega = unscented_nodes(Q)
    elif isinstance(rule, GaussHermite):
        eps, omega = gauss_hermite_nodes(rule.n_points, Q)
    elif isinstance(rule, MonteCarlo):
        if rule.n_samples < 1:
            raise ValueError(f"MonteCarlo needs n_samples >= 1; got {rule.n_samples}")
        eps, omega = None, jnp.full(rule.n_samples, 1.0 / rule.n_samples)
    else:  # pragma: no cover - psi_statistics resolves rules first
        raise TypeError(f"not a quadrature rule: {rule!r}")
    n_nodes = omega.shape[0]

    def body(chunk):
        mu_c, S_c, Wt_c, idx_c = chunk
        C = mu_c.shape[0]
        e = eps if eps is not None else _monte_carlo_eps(rule.key, idx_c, n_nodes, Q)
        X = (mu_c[:, None, :] + jnp.sqrt(S_c)[:, None, :] * e).reshape(C * n_nodes, Q)
        K = kernel(X, Z)                                                     # (C·S, M)
        e0 = kernel.diag(X).reshape(C, n_nodes) @ omega                      # (C,)
        psi1 = jnp.einsum("csm,s->cm", K.reshape(C, n_nodes, M), omega)
        V = (Wt_c.T[:, :, None] * omega[None, None, :]).reshape(G, C * n_nodes)
        psi2 = jnp.einsum("gpj,pk->gjk", V[:, :, None] * K[None], K)         # Kᵀ diag(v_g) K
        return (Wt_c.T @ e0, psi2), psi1

    chunk = choose_chunk(N, n_nodes * (M * (G + 1) + Q), rule.chunk_size)
    index = row_offset + jnp.arange(N)
    (psi0, psi2), psi1 = map_reduce_points(body, (mu, S, W.T, index), (0.0, 1.0, 0.0, 0), chunk)
    return psi0, psi1, psi2
