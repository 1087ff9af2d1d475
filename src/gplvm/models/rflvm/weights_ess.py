r"""The weights β of the RFLVM by elliptical slice sampling: Poisson, negative binomial, and any
likelihood without an augmentation.

Seed 000 (§3.1, eqs. 26–29) samples the negative-binomial weights through Pólya-gamma
augmentation: N·D draws ω ~ PG(y + r, ψ), then D Gaussian conditionals whose precisions
ΦᵀΩ_jΦ cost O(N·P²) each.  At congress109's size (529 × 1000, P = 101) that is ~5 GFLOP of
Gram matrices and half a million Pólya-gamma draws per sweep, above the whole sweep's budget of
issue 14.  The conditional p(β_j | X, W, r_j, y_j) does not need ω: here both count models
sample it directly, as the Poisson model always has, by an elliptical slice per column under a
Gaussian N(μ_j, Λ_j⁻¹) close to the conditional, with the likelihood replaced by
p(y_j | β) N(β; β0, B0) / N(β; μ_j, Λ_j⁻¹) — the same target (Nishihara, Murray & Adams 2014,
§2), so the update is exact whatever the quality of the approximation, which only affects the
speed of mixing.  ``RFLVMSpec.nb_beta = 'polya_gamma'`` keeps the paper's augmented Gibbs step.

**The working Gaussian** (:func:`working_gaussian`).  The Fisher information of ψ is the
column's rate λ under the Poisson and r λ / (r + λ) under the negative binomial (mean
μ = r e^ψ, −E ∂²ℓ/∂ψ² = (μ + r) σ(ψ)(1 − σ(ψ)) = r σ(ψ)); with one value λ_j per column in
place of every row's, Λ_j = λ_j ΦᵀΦ + B0⁻¹.  In the whitened basis
K = B0^{1/2} ΦᵀΦ B0^{1/2} = V diag(s) Vᵀ (one eigendecomposition for all columns),
Λ_j⁻¹ = B0^{1/2} V diag(1/(λ_j s + 1)) Vᵀ B0^{1/2}.  The centre μ_j is the Λ_j-weighted ridge
fit of the working response z = log((y + ½)/e^o) (minus log r_j for the negative binomial,
whose ψ is log(μ/r)).  Both depend on X, W, r and Y only, never on the current β, which is
what keeps the slice exact.

**Any other likelihood** (:func:`sample_beta_slice`: one the library does not ship, without a
Pólya-gamma augmentation; docs/contract.md, "Adding a likelihood") gets the same slice under a
working Gaussian built from the likelihood object's own gradient and curvature in ψ at the
intercept's prior centre (:func:`likelihood_working_gaussian`): one Fisher-scoring step from
ψ0 = o + c_j, again free of β; its log-target evaluates the likelihood's ``_psi_log_prob``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gplvm.inference.mcmc import ess_init, ess_step
from gplvm.likelihoods._common import plain_softplus as softplus

Array = jax.Array

__all__ = ["BetaPrior", "working_gaussian", "sample_beta_ess", "sample_beta_slice",
           "slice_inputs", "SliceInputs"]


class BetaPrior(NamedTuple):
    """The prior β_j ~ N(β0_j, B0) of every column, B0 = diag(1/prec).

    Attributes:
        mean: (P, D) β0 (for the negative binomial,
            :func:`gplvm.models.rflvm.init.nb_prior_mean`: the intercept's centre moves with
            log r_j).
        prec: (P,) the diagonal of B0⁻¹.
    """

    mean: Array
    prec: Array


def working_gaussian(Phi: Array, data, prior: BetaPrior, dispersion=None):
    r"""A Gaussian N(μ_j, Λ_j⁻¹) near each column's conditional posterior of β_j, free of β
    (module docstring); ``dispersion`` r (D,) for the negative binomial, None for the Poisson.

    Args:
        Phi: (N, P) the design.
        data: the counts ``Y`` (N, D), the mask ``observed`` (N, D) and the row offsets
            ``offset`` (N, 1), as :class:`.spec.RFLVMData` holds them.
        prior: β0 and B0⁻¹ (:class:`BetaPrior`).

    Returns:
        (mu (P, D), lam (D,), scale (P, P) = B0^{1/2} V, s (P,), V (P, P)), with
        K = B0^{1/2} ΦᵀΦ B0^{1/2} = V diag(s) Vᵀ.
    """
    Y, observed, offset = data.Y, data.observed, data.offset
    n_obs = jnp.maximum(jnp.sum(observed, axis=0), 1.0)
    lam = jnp.sum(Y * observed, axis=0) / jnp.sum(jnp.exp(offset) * observed, axis=0)
    lam = jnp.maximum(lam, 0.5 / n_obs)
    z = jnp.log(Y + 0.5) - offset
    if dispersion is not None:
        lam = dispersion * lam / (dispersion + lam)
        z = z - jnp.log(dispersion)
    return working_gaussian_of(Phi, lam, z * observed, prior)


def working_gaussian_of(Phi: Array, lam: Array, z: Array, prior: BetaPrior):
    r"""N(μ_j, Λ_j⁻¹) of :func:`working_gaussian` from one Fisher weight ``lam`` (D,) per
    column and the working response ``z`` (N, D) (0 where unobserved): Λ_j = λ_j ΦᵀΦ + B0⁻¹,
    μ_j = Λ_j⁻¹(λ_j Φᵀz_j + B0⁻¹β0_j).  Same returns as :func:`working_gaussian`."""
    prior_mean, prior_prec = prior
    root = 1.0 / jnp.sqrt(prior_prec)                                   # B0^{1/2} (diagonal)
    K = (Phi * root).T @ (Phi * root)
    s, V = jnp.linalg.eigh(K)
    s = jnp.maximum(s, 0.0)
    scale = root[:, None] * V
    rhs = lam * (Phi.T @ z) + prior_prec[:, None] * prior_mean          # (P, D)
    # μ_j = Λ_j⁻¹ rhs_j = scale diag(1/(λ_j s + 1)) scaleᵀ rhs_j
    mu = scale @ ((scale.T @ rhs) / (lam[None, :] * s[:, None] + 1.0))
    return mu, lam, scale, s, V


def sample_beta_ess(key: Array, Phi: Array, beta: Array, data, prior: BetaPrior,
                    dispersion=None) -> tuple[Array, Array]:
    r"""β_j by elliptical slice sampling, one slice per column (Poisson, or negative binomial
    with ``dispersion`` r (D,)), from the current ``beta`` (P, D), given the design ``Phi``
    (N, P), the data and the prior as :func:`working_gaussian` reads them.

    The slice runs in the coordinates g = β − μ about the working mean, where the ellipse is
    g cos θ + (ν − μ) sin θ, and Φg moves along the same ellipse with Φ(ν − μ): carrying Φg
    beside g in each block makes every shrinkage step O(N + M) per column
    (:func:`_column_ll_on`).  Columns are independent given X, W (and r), so once few columns
    are still shrinking the kernel evaluates just those (``log_lik_on``; issue 14).

    Returns:
        (β (P, D), mean number of points evaluated on the ellipse per column, Φβ (N, D): the
        Φμ + Φg the slice carried, equal to Φ @ β up to rounding, so the caller need not
        recompute the product).
    """
    key_nu, key_ess = jax.random.split(key)
    slice_in = slice_inputs(key_nu, Phi, beta, data, prior, dispersion)
    on = _column_ll_on(slice_in.per_column, beta.shape[0])
    log_lik_fn = on(None)
    state, info = ess_step(key_ess, ess_init(slice_in.blocks, log_lik_fn), log_lik_fn,
                           slice_in.nu_blocks, log_lik_on=on)
    P = beta.shape[0]
    return (slice_in.mu + state.position[:, :P].T,
            jnp.mean(info.n_proposals.astype(beta.dtype)),
            slice_in.Phi_mu + state.position[:, P:].T)


def likelihood_working_gaussian(Phi: Array, data, prior: BetaPrior, lik):
    r""":func:`working_gaussian_of` for any likelihood ``lik``, from its own gradient and
    curvature in ψ (``_grad_log_prob``, ``_curvature``) at ψ0 = o + c_j, c_j the intercept's
    prior centre (the link of the column's mean, ``intercept_centre``): λ_j the mean curvature
    over the column's observed entries, z = c_j + ∂ℓ/∂ψ (ψ0) / λ_j the working response of one
    Fisher-scoring step from ψ0.  Free of β, as the slice needs."""
    Y, observed = data.Y, data.observed
    centre = prior.mean[-1]
    psi0 = jnp.broadcast_to(data.offset + centre, Y.shape)
    n_obs = jnp.maximum(jnp.sum(observed, axis=0), 1.0)
    lam = jnp.sum(lik._curvature(Y, psi0) * observed, axis=0) / n_obs
    lam = jnp.maximum(lam, 1e-6)
    z = centre + lik._grad_log_prob(Y, psi0) / lam
    return working_gaussian_of(Phi, lam, z * observed, prior)


def sample_beta_slice(key: Array, Phi: Array, beta: Array, data, prior: BetaPrior,
                      lik) -> tuple[Array, Array, Array]:
    r"""β by elliptical slice sampling for any likelihood ``lik`` with neither a Pólya-gamma
    augmentation nor ``log_rate_slice``: it needs of the likelihood its ψ-dependent
    log-density ``_psi_log_prob``, its gradient and its curvature.

    With one density per entry the columns of β are independent given X and W: each gets a
    slice under the working Gaussian :func:`likelihood_working_gaussian`, with the target
    p(y_j | β) N(β; β0, B0) / N(β; μ_j, Λ_j⁻¹) (module docstring; exact whatever the
    approximation's quality).  With one density per row (``row_density``) all of β is one
    slice under its prior N(β0, B0) (Murray, Adams & MacKay 2010).

    Returns:
        (β (P, D), mean number of points evaluated on the ellipse per slice, Φβ (N, D)).
    """
    if not lik.row_density:
        return _slice_columns(key, Phi, beta, data, prior, lik)
    P, D = beta.shape
    key_nu, key_ess = jax.random.split(key)
    nu = jax.random.normal(key_nu, beta.shape, beta.dtype) / jnp.sqrt(prior.prec)[:, None]
    to_block = lambda a: a.T.reshape(1, -1)                 # (P, D) -> one block (1, D·P)
    from_block = lambda g: g.reshape(D, P).T

    def log_lik_fn(g):
        psi = Phi @ (prior.mean + from_block(g)) + data.offset
        vals = lik._psi_log_prob(data.Y, psi)
        return jnp.sum(vals * data.observed[..., :vals.shape[-1]])[None]

    state, info = ess_step(key_ess, ess_init(to_block(beta - prior.mean), log_lik_fn),
                           log_lik_fn, to_block(nu))
    beta = prior.mean + from_block(state.position)
    return beta, jnp.mean(info.n_proposals.astype(beta.dtype)), Phi @ beta


def _slice_columns(key: Array, Phi: Array, beta: Array, data, prior: BetaPrior, lik):
    """:func:`sample_beta_slice` for a density per entry: one slice per column of (g_j, Φg_j),
    g = β − μ, on the ellipse of :func:`_ellipse` (as :func:`sample_beta_ess`), its log-target
    from ``lik._psi_log_prob`` (every column evaluated at each shrink: a likelihood's
    parameters may be per column, so its columns are not taken apart)."""
    P = beta.shape[0]
    key_nu, key_ess = jax.random.split(key)
    gaussian = likelihood_working_gaussian(Phi, data, prior, lik)
    blocks, nu_blocks, mu, Phi_mu, c = _ellipse(key_nu, Phi, beta, prior, gaussian)
    lam, a = gaussian[1], Phi_mu + data.offset                            # (D,), (N, D)

    def log_lik_fn(blocks):
        g, Phi_g = blocks[:, :P], blocks[:, P:]
        vals = lik._psi_log_prob(data.Y, a + Phi_g.T) * data.observed
        return (jnp.sum(vals, axis=0) + 0.5 * lam * jnp.sum(Phi_g**2, axis=1)
                - jnp.sum(c * g, axis=1))

    state, info = ess_step(key_ess, ess_init(blocks, log_lik_fn), log_lik_fn, nu_blocks)
    return (mu + state.position[:, :P].T, jnp.mean(info.n_proposals.astype(beta.dtype)),
            Phi_mu + state.position[:, P:].T)


def _ellipse(key_nu: Array, Phi: Array, beta: Array, prior: BetaPrior, gaussian):
    """The ellipse of a per-column slice under the working Gaussian ``gaussian`` = (μ, λ,
    scale, s, V) of :func:`working_gaussian_of`: ν − μ ~ N(0, Λ⁻¹) drawn with ``key_nu``,
    the blocks (g_j, Φg_j) (D, P + N) at g = β − μ and at ν − μ, μ, Φμ (N, D) and
    c = (B0⁻¹(μ − β0))ᵀ (D, P), the slice's linear term (:func:`_column_ll_on`)."""
    mu, lam, scale, s, V = gaussian
    eps = jax.random.normal(key_nu, beta.shape, beta.dtype)
    # ν − μ ~ N(0, Λ⁻¹) through the symmetric square root B0^{1/2} V diag(·)^{-1/2} Vᵀ, a
    # continuous function of ΦᵀΦ: through B0^{1/2} V alone the draw would follow the
    # eigenvectors, which rounding in ΦᵀΦ turns within a (near-)repeated eigenvalue, so that
    # the same key gave another draw when the rows' sums were added in another order
    # (a chain split over devices, issue 18)
    nu_c = scale @ ((V.T @ eps) / jnp.sqrt(lam[None, :] * s[:, None] + 1.0))
    # Φ(β − μ), Φ(ν − μ) and Φμ as one product
    Phi_g, Phi_nu, Phi_mu = jnp.split(Phi @ jnp.concatenate([beta - mu, nu_c, mu], axis=1), 3,
                                      axis=1)
    c = (prior.prec[:, None] * (mu - prior.mean)).T
    stack = lambda g, Phi_g: jnp.concatenate([g.T, Phi_g.T], axis=1)      # (D, P + N)
    return stack(beta - mu, Phi_g), stack(nu_c, Phi_nu), mu, Phi_mu, c


class SliceInputs(NamedTuple):
    """What the slice of :func:`sample_beta_ess` runs on: the blocks (g_j, Φg_j) (D, P + N) at
    the current β and at ν, the per-column data of :func:`_column_ll_on`, μ (P, D) and Φμ
    (N, D)."""

    blocks: Array
    nu_blocks: Array
    per_column: tuple
    mu: Array
    Phi_mu: Array


def slice_inputs(key_nu: Array, Phi: Array, beta: Array, data, prior: BetaPrior,
                 dispersion=None) -> SliceInputs:
    """The working Gaussian (:func:`working_gaussian`, which reads ``data`` and ``prior``),
    ν − μ ~ N(0, Λ⁻¹) drawn with ``key_nu``, the products Φ(β − μ), Φ(ν − μ), Φμ (one
    product) and the blocks and per-column data of the slice, laid out by column
    (:func:`sample_beta_ess`)."""
    Y, observed, offset = data.Y, data.observed, data.offset
    gaussian = working_gaussian(Phi, data, prior, dispersion)
    blocks, nu_blocks, mu, Phi_mu, c = _ellipse(key_nu, Phi, beta, prior, gaussian)
    lam = gaussian[1]
    if dispersion is None:
        per_column = ((Y * observed).T, (observed * jnp.exp(Phi_mu + offset)).T, lam, c)
    else:
        per_column = ((Y * observed).T, ((Y + dispersion) * observed).T, (Phi_mu + offset).T,
                      lam, c)
    return SliceInputs(blocks, nu_blocks, per_column, mu, Phi_mu)


def _column_ll_on(per_column, P: int):
    r"""``cols -> (blocks -> log-targets)`` of :func:`sample_beta_ess`'s columns ``cols``
    (all of them for None).

    Block j is (g_j, Φg_j) with g_j = β_j − μ_j.  With ψ = a_j + Φg_j, a_j = o + Φμ_j, and
    Λ_j = λ_jΦᵀΦ + B0⁻¹, the log-target log p(y_j | β) + log N(β; β0, B0) − log N(β; μ_j, Λ_j⁻¹)
    is, up to a constant of the column (which the slice, comparing values of one column, never
    sees), Σ_n ℓ_n + ½ λ_j ‖Φg‖² − c_jᵀ g with c_j = B0⁻¹(μ_j − β0) (the two quadratic forms in
    β of the Gaussian ratio differ by ½ λ_j‖Φg‖² and a term linear in g), and

    .. math:: \ell_n = y_n (\Phi g)_n - w_n e^{(\Phi g)_n} \quad\text{(Poisson, } w =
              \text{observed} \cdot e^{a_j}\text{)}, \qquad
              \ell_n = y_n (\Phi g)_n - b_n \operatorname{softplus}(a_{jn} + (\Phi g)_n)
              \quad\text{(negative binomial, } b = \text{observed} \cdot (y + r_j)\text{)}.

    ``per_column`` holds ((y·observed)ᵀ (D, N), wᵀ (D, N), λ (D,), cᵀ (D, P)) for the Poisson,
    ((y·observed)ᵀ, bᵀ, a_jᵀ (D, N), λ, cᵀ) for the negative binomial.
    """
    def on(cols):
        take = (lambda a: a) if cols is None else (lambda a: a[cols])
        columns = tuple(map(take, per_column))

        def fn(blocks):
            g, Phi_g = blocks[:, :P], blocks[:, P:]
            if len(columns) == 4:
                Y, w, lam, c = columns
                vals = Phi_g * (Y + 0.5 * lam[:, None] * Phi_g) - w * jnp.exp(Phi_g)
            else:
                Y, b, a, lam, c = columns
                vals = Phi_g * (Y + 0.5 * lam[:, None] * Phi_g) - b * softplus(a + Phi_g)
            return jnp.sum(vals, axis=1) - jnp.sum(c * g, axis=1)
        return fn
    return on
