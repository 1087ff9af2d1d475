r"""Normal-inverse-Wishart (NIW) algebra for the DP mixture on the frequencies (seed 000, eq. 24).

The base measure of the Dirichlet process (seed 000, eq. 21) is

.. math:: \Sigma \sim \mathcal W^{-1}(\Psi_0, \nu_0), \qquad
          \mu \mid \Sigma \sim \mathcal N(\mu_0, \Sigma/\lambda_0).

Conjugacy (Gelman et al. 2013, §3.6; Murphy 2007, "Conjugate Bayesian analysis of the
Gaussian distribution", §9): given the n items of a cluster, with mean :math:`\bar w` and
scatter :math:`S = \sum_m (w_m - \bar w)(w_m - \bar w)^\top`,

.. math::
    \lambda_n = \lambda_0 + n, \quad \nu_n = \nu_0 + n, \quad
    m_n = \frac{\lambda_0 \mu_0 + n \bar w}{\lambda_n}, \quad
    \Psi_n = \Psi_0 + S + \frac{\lambda_0 n}{\lambda_0 + n}(\bar w - \mu_0)(\bar w - \mu_0)^\top.

(Eq. 24 of seed 000 prints :math:`w_m` where the last term needs the cluster mean
:math:`\bar w`; the form above is the correct one.)  Integrating (μ, Σ) out of one Gaussian
draw gives the prior predictive, a multivariate Student-t with :math:`\nu_0 - Q + 1` degrees of
freedom, location :math:`\mu_0` and shape
:math:`\Psi_0 (\lambda_0 + 1) / (\lambda_0 (\nu_0 - Q + 1))` (Murphy 2007, eq. 258).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import gammaln, multigammaln
from gplvm.registry import register
from gplvm.typing import Array, Float, Int, PRNGKeyArray


@register("gplvm.state.NIWPrior")
class NIWPrior(NamedTuple):
    """Normal-inverse-Wishart base measure H of the Dirichlet process (seed 000, eq. 21).

    Attributes:
        mu0: ``Float[Array, "Q"]`` prior mean of the cluster means.
        lambda0: ``Float[Array, ""]`` prior pseudo-count of the means (> 0).
        nu0: ``Float[Array, ""]`` inverse-Wishart degrees of freedom (> Q - 1).
        Psi0: ``Float[Array, "Q Q"]`` inverse-Wishart scale matrix (positive definite).
    """

    mu0: Float[Array, " Q"]
    lambda0: Float[Array, ""]
    nu0: Float[Array, ""]
    Psi0: Float[Array, "Q Q"]


class NIWPosterior(NamedTuple):
    """Parameters of NIW posteriors, one per cluster slot (leading axis K), or of one."""

    m: Float[Array, "*K Q"]
    lam: Float[Array, "*K"]
    nu: Float[Array, "*K"]
    Psi: Float[Array, "*K Q Q"]


def default_niw_prior(Q: int) -> NIWPrior:
    """The defaults of the authors' code: μ0 = 0, λ0 = Q, ν0 = Q + 1, Ψ0 = I.

    With ν0 = Q + 1 the prior mean of Σ does not exist (it needs ν0 > Q + 1) and the prior
    predictive is a Student-t with 2 degrees of freedom: a heavy-tailed, weakly informative base.
    """
    Q = int(Q)
    if Q < 1:
        raise ValueError(f"Q (the latent dimension) must be a positive integer; got {Q}")
    return NIWPrior(mu0=jnp.zeros(Q), lambda0=jnp.asarray(float(Q)),
                    nu0=jnp.asarray(Q + 1.0), Psi0=jnp.eye(Q))


def cluster_statistics(W: Float[Array, "M2 Q"], z: Int[Array, " M2"], n_slots: int
                       ) -> tuple[Float[Array, " K"], Float[Array, "K Q"], Float[Array, "K Q Q"]]:
    """Counts, means and scatter matrices of the items in each of ``n_slots`` clusters.

    The scatter is summed about the cluster mean, not formed as Σ w wᵀ - n w̄ w̄ᵀ, which
    cancels catastrophically when the items are far from the origin.

    Returns:
        ``counts`` (K,), ``means`` (K, Q) (zero for empty slots), ``scatter`` (K, Q, Q).
    """
    counts = jax.ops.segment_sum(jnp.ones(W.shape[0], W.dtype), z, num_segments=n_slots)
    sums = jax.ops.segment_sum(W, z, num_segments=n_slots)
    means = sums / jnp.maximum(counts, 1.0)[:, None]
    centred = W - means[z]
    scatter = jax.ops.segment_sum(centred[:, :, None] * centred[:, None, :], z,
                                  num_segments=n_slots)
    return counts, means, scatter


def niw_posterior(prior: NIWPrior, counts: Float[Array, "*K"], means: Float[Array, "*K Q"],
                  scatter: Float[Array, "*K Q Q"]) -> NIWPosterior:
    """The conjugate update above (seed 000, eq. 24, corrected), batched over leading axes.

    An empty cluster (count 0) gets the prior back: its mean does not enter.
    """
    lam = prior.lambda0 + counts
    nu = prior.nu0 + counts
    m = (prior.lambda0 * prior.mu0 + counts[..., None] * means) / lam[..., None]
    d = means - prior.mu0
    shrink = prior.lambda0 * counts / lam                      # λ0 n / (λ0 + n); 0 when n = 0
    Psi = prior.Psi0 + scatter + shrink[..., None, None] * d[..., :, None] * d[..., None, :]
    return NIWPosterior(m=m, lam=lam, nu=nu, Psi=0.5 * (Psi + jnp.swapaxes(Psi, -1, -2)))


def inverse_wishart_from(Psi: Float[Array, "Q Q"], chi2: Float[Array, " Q"],
                         lower: Float[Array, "Q Q"]
                         ) -> tuple[Float[Array, "Q Q"], Float[Array, "Q Q"]]:
    r"""Σ ~ W⁻¹(Ψ, ν) from its Bartlett variates, by the Bartlett decomposition.

    With Ψ = C Cᵀ (Cholesky) and A lower triangular, :math:`A_{ii} = \sqrt{\chi^2_{\nu - i + 1}}`
    (i = 1..Q: ``chi2``) and :math:`A_{ij} \sim N(0, 1)` below the diagonal (``lower``'s
    strictly lower triangle; the rest of it is not read),
    :math:`C^{-\top} A A^\top C^{-1} \sim \mathcal W(\Psi^{-1}, \nu)`, so
    :math:`\Sigma = B B^\top` with :math:`B = C A^{-\top}`.  B comes from one triangular solve
    (no matrix is inverted) and is returned too: any B with B Bᵀ = Σ draws N(0, Σ) as B ε.

    Returns:
        ``(Sigma, B)``, both (Q, Q).
    """
    A = jnp.tril(lower, -1) + jnp.diag(jnp.sqrt(chi2))
    C = jnp.linalg.cholesky(Psi)
    B = solve_triangular(A, C.T, lower=True).T                  # Bᵀ = A⁻¹ Cᵀ
    Sigma = B @ B.T
    return 0.5 * (Sigma + Sigma.T), B


def _bartlett_variates(key: PRNGKeyArray, nu: Float[Array, ""], Q: int, dtype
                       ) -> tuple[Float[Array, " Q"], Float[Array, "Q Q"]]:
    """The variates :func:`inverse_wishart_from` takes: χ²_{ν−i+1} (i = 1..Q, drawn as
    2·Gamma((ν − i + 1)/2)) and a (Q, Q) block of N(0, 1)."""
    k_chi, k_normal = jax.random.split(key)
    dof = nu - jnp.arange(Q, dtype=dtype)                        # ν − i + 1, i = 1..Q
    chi2 = 2.0 * jax.random.gamma(k_chi, 0.5 * dof, dtype=dtype)
    return chi2, jax.random.normal(k_normal, (Q, Q), dtype=dtype)


def sample_inverse_wishart(key: PRNGKeyArray, Psi: Float[Array, "Q Q"], nu: Float[Array, ""]
                           ) -> tuple[Float[Array, "Q Q"], Float[Array, "Q Q"]]:
    r"""Σ ~ W⁻¹(Ψ, ν) for one (Q, Q) scale (:func:`inverse_wishart_from`).

    Returns:
        ``(Sigma, B)``, both (Q, Q), B Bᵀ = Σ.
    """
    return inverse_wishart_from(Psi, *_bartlett_variates(key, nu, Psi.shape[-1], Psi.dtype))


def niw_from(post: NIWPosterior, chi2: Float[Array, " Q"], lower: Float[Array, "Q Q"],
             eps: Float[Array, " Q"]) -> tuple[Float[Array, " Q"], Float[Array, "Q Q"]]:
    """(μ, Σ) from the variates of one draw: Σ by :func:`inverse_wishart_from`, μ = m + B ε/√λ
    (ε ~ N(0, I)), so μ | Σ ~ N(m, Σ/λ)."""
    Sigma, B = inverse_wishart_from(post.Psi, chi2, lower)
    return post.m + B @ eps / jnp.sqrt(post.lam), Sigma


def sample_niw(key: PRNGKeyArray, post: NIWPosterior
               ) -> tuple[Float[Array, " Q"], Float[Array, "Q Q"]]:
    """One draw (μ, Σ): Σ ~ W⁻¹(Ψ, ν), μ | Σ ~ N(m, Σ/λ) (seed 000, eq. 24), for one slot."""
    k_sigma, k_mu = jax.random.split(key)
    chi2, lower = _bartlett_variates(k_sigma, post.nu, post.m.shape[-1], post.m.dtype)
    return niw_from(post, chi2, lower, jax.random.normal(k_mu, post.m.shape, dtype=post.m.dtype))


def sample_niw_slots(key: PRNGKeyArray, post: NIWPosterior
                     ) -> tuple[Float[Array, "K Q"], Float[Array, "K Q Q"]]:
    """Independent draws for K slots (the leading axis of every field of ``post``)."""
    keys = jax.random.split(key, post.m.shape[0])
    return jax.vmap(sample_niw)(keys, post)


def niw_centre(post: NIWPosterior) -> tuple[Float[Array, "*K Q"], Float[Array, "*K Q Q"]]:
    """A point of each NIW posterior without a draw: μ at its mean m, Σ at the inverse-Wishart's
    mode Ψ/(ν + Q + 1) (which exists for every ν, unlike its mean)."""
    Q = post.m.shape[-1]
    return post.m, post.Psi / (post.nu + Q + 1.0)[..., None, None]


def gaussian_logpdf(w: Float[Array, "*#batch Q"], mu: Float[Array, "*#batch Q"],
                    chol: Float[Array, "*#batch Q Q"]) -> Float[Array, "*#batch"]:
    """log N(w | μ, L Lᵀ) with L lower triangular; batched over the leading axes of μ and L."""
    Q = w.shape[-1]
    diff = jnp.broadcast_to(w - mu, mu.shape)[..., None]
    sol = solve_triangular(chol, diff, lower=True)[..., 0]
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * (Q * jnp.log(2.0 * jnp.pi) + log_det + jnp.sum(sol * sol, axis=-1))


def whitener(Sigma: Float[Array, "*K Q Q"]) -> tuple[Float[Array, "*K Q Q"], Float[Array, "*K"]]:
    """``(L⁻¹, log|Σ|)`` with Σ = L Lᵀ, batched: once L⁻¹ is formed, a density needs only a
    matrix-vector product, where a triangular solve per cluster would sit inside the
    sequential loop over items."""
    Q = Sigma.shape[-1]
    L = jnp.linalg.cholesky(Sigma)
    eye = jnp.broadcast_to(jnp.eye(Q, dtype=Sigma.dtype), Sigma.shape)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)
    return solve_triangular(L, eye, lower=True), log_det


def gaussian_logpdf_whitened(w: Float[Array, " Q"], mu: Float[Array, "K Q"],
                             L_inv: Float[Array, "K Q Q"], log_det: Float[Array, " K"]
                             ) -> Float[Array, " K"]:
    """log N(w | μ_k, Σ_k) for every k, given the :func:`whitener` of each Σ_k."""
    sol = jnp.einsum("...ij,...j->...i", L_inv, w - mu)
    return -0.5 * (w.shape[-1] * jnp.log(2.0 * jnp.pi) + log_det + jnp.sum(sol * sol, axis=-1))


def log_prior_predictive(W: Float[Array, "M2 Q"], prior: NIWPrior) -> Float[Array, " M2"]:
    r"""log of the NIW prior predictive :math:`\int N(w \mid \mu, \Sigma)\, dH(\mu, \Sigma)`.

    The multivariate Student-t of the module docstring, evaluated at each row of ``W``
    (the "new cluster" weight of seed 000, eq. 23).

    Args:
        W: ``Float[Array, "M2 Q"]``.
        prior: the base measure.

    Returns:
        ``Float[Array, "M2"]``.
    """
    Q = W.shape[-1]
    dof = prior.nu0 - Q + 1.0
    shape = prior.Psi0 * (prior.lambda0 + 1.0) / (prior.lambda0 * dof)
    L = jnp.linalg.cholesky(shape)
    sol = solve_triangular(L, (W - prior.mu0).T, lower=True)
    maha = jnp.sum(sol * sol, axis=0)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(L)))
    return (gammaln(0.5 * (dof + Q)) - gammaln(0.5 * dof) - 0.5 * Q * jnp.log(dof * jnp.pi)
            - 0.5 * log_det - 0.5 * (dof + Q) * jnp.log1p(maha / dof))


def niw_log_marginal(W: Float[Array, "M2 Q"], z: Int[Array, " M2"], prior: NIWPrior,
                     n_slots: int) -> Float[Array, ""]:
    r"""log p(W | z): every cluster's (μ_k, Σ_k) integrated out under the NIW base measure.

    For the n items of one cluster (Murphy 2007, eq. 266; Gelman et al. 2013, §3.6),

    .. math::
        \log p(w_{1:n}) = -\frac{nQ}{2}\log\pi
            + \log\Gamma_Q\!\big(\tfrac{\nu_n}{2}\big) - \log\Gamma_Q\!\big(\tfrac{\nu_0}{2}\big)
            + \frac{\nu_0}{2}\log|\Psi_0| - \frac{\nu_n}{2}\log|\Psi_n|
            + \frac Q2 \log\frac{\lambda_0}{\lambda_n},

    with λ_n, ν_n, Ψ_n the conjugate update of the module docstring; an empty slot
    contributes 0.  Differentiable in W (the NUTS block's frequencies' prior when the DP
    components are integrated out: :mod:`gplvm.models.rflvm.joint`).  With μ0 = 0 and an
    isotropic Ψ0 (:func:`default_niw_prior`) it is unchanged by W ↦ WO, O orthogonal.

    Returns:
        the sum over the ``n_slots`` slots, a scalar.
    """
    Q = W.shape[-1]
    counts, means, scatter = cluster_statistics(W, z, n_slots)
    post = niw_posterior(prior, counts, means, scatter)
    log_det_0 = 2.0 * jnp.sum(jnp.log(jnp.diag(jnp.linalg.cholesky(prior.Psi0))))
    chol = jnp.linalg.cholesky(post.Psi)
    log_det_n = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    per_slot = (-0.5 * counts * Q * jnp.log(jnp.pi)
                + multigammaln(0.5 * post.nu, Q) - multigammaln(0.5 * prior.nu0, Q)
                + 0.5 * prior.nu0 * log_det_0 - 0.5 * post.nu * log_det_n
                + 0.5 * Q * (jnp.log(prior.lambda0) - jnp.log(post.lam)))
    return jnp.sum(per_slot)
