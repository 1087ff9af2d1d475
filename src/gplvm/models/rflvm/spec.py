"""Static description, data container and per-chain state of the RFLVM sampler (seed 000, eq. 21).

Names follow ``DESIGN.md``: ``W`` (M/2 × Q) frequencies, ``beta`` (P × D) weights with
P = M (+1 when the model has a per-column intercept), ``omega`` Pólya-gamma variables,
``noise_var`` the Gaussian noise *variance*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
from gplvm.likelihoods import AbstractLikelihood, likelihood_class
from gplvm.registry import register

Array = jax.Array


@register("gplvm.state.RFLVMSpec")
@dataclass(frozen=True)
class RFLVMSpec:
    """Everything about the model that fixes array shapes or control flow (hashable, static).

    Attributes:
        likelihood: the ``name`` of a :mod:`gplvm.likelihoods` class (``'poisson'``, ...).
        n_components: Q, the latent dimension.
        n_freq: M/2, the number of frequencies (the feature map has M = 2·n_freq columns).
        n_outputs: D, the number of latent output columns (J − 1 for the multinomial).
        intercept: whether β has a last row of per-column intercepts (count models).
        learn_kernel: Dirichlet-process mixture on W (eqs. 22–25) instead of a fixed kernel.
        dynamic: GP prior over time on each latent dimension (§3.1) instead of N(0, I) rows.
        beta_prior_var: s0, the prior variance of the feature weights (B0 = s0·I; for the
            Gaussian likelihood B0 = σ_j² s0 I, the conjugate form the collapsed updates need).
        intercept_prior_var: prior variance of the intercepts around their empirical centre.
        noise_prior: (a0, b0) of the inverse-gamma prior on each σ_j² (Gaussian).
        dispersion_prior: (a0, b0, g0) of r_j ~ Ga(a0, rate h), h ~ Ga(b0, rate g0) (eq. 29).
        initial_dispersion: negative binomial: r_j's starting value, held during the X warm-up
            (``map_sweeps``), so that the latents warm up under a near-Poisson likelihood.
            Started at the data's marginal overdispersion (r ≈ 10 on the bridges counts) the
            dispersion absorbs structure the latents have not yet learned; measured on
            bridges (Table 1 protocol, 5 seeds) r0 = 100 / 1000 / 1e5 gave 1-NN 0.814 / 0.852 /
            0.835, and r settles at 700–1300 from any of them once it is sampled
            (:mod:`gplvm.models.rflvm.dispersion`).
        alpha_prior: (a_α, b_α) of the Gamma prior on the DP concentration (eq. 25).
        n_x_steps: elliptical-slice updates of X per sweep.
        map_sweeps: for the first ``map_sweeps`` sweeps (part of burn-in) X is moved uphill
            on its conditional posterior instead of sampled (the reference code's MAP update
            of X), to reach the posterior's bulk quickly from the PCA start.
        map_steps: line-searched gradient steps on X per MAP sweep.
        nb_beta: how the negative binomial's weights are drawn: ``'polya_gamma'`` (default),
            the paper's Gibbs step given Pólya-gamma variables (eqs. 26–28), or ``'slice'``, an
            elliptical slice per column with no augmentation, as for the Poisson
            (:mod:`gplvm.models.rflvm.weights_ess`, issue 14): ~2x cheaper per sweep on
            congress109 but slower to mix where a column's counts span orders of magnitude
            (bridges).  Both leave the same posterior invariant.
        sampler: ``'gibbs'`` (seed 000's sweep: β given X, X given β) or ``'nuts'``: X, W
            (where its prior has a density), β and the NB's log r jointly by one NUTS
            transition per sweep, its step size and diagonal mass matrix adapted during
            burn-in, from over-dispersed starts around the block's mode (:mod:`.joint`,
            :mod:`.map_start`, issue 30).
        max_doublings: ``'nuts'``: at most 2^max_doublings − 1 leapfrog steps per transition.
        frequencies: ``'sampled'`` (seed 000: W is a parameter, moved by the sweep) or
            ``'fixed'``: chain 0's draw of W from the kernel's spectral density, shared by
            every chain and never moved (random Fourier features, Rahimi & Recht 2007: the
            model given W; a fixed kernel only).
        dp_components: under the DP kernel with ``sampler='nuts'``, what the NUTS block's
            frequencies are conditioned on: ``'drawn'`` (each w_m's component N(μ_k, Σ_k) as
            the DP sweep last drew it) or ``'integrated'`` (every (μ_k, Σ_k) integrated out
            under the NIW base measure given the assignments,
            :func:`gplvm.samplers._niw.niw_log_marginal`, and drawn afresh after the block;
            the block's target is then invariant under rotations of (X, W), which it samples
            modulo them: :mod:`.gauge`).  The same posterior either way.
    """

    likelihood: str
    n_components: int
    n_freq: int
    n_outputs: int
    intercept: bool
    learn_kernel: bool = True
    dynamic: bool = False
    beta_prior_var: float = 1.0
    intercept_prior_var: float = 4.0
    noise_prior: tuple = (1.0, 1.0)
    dispersion_prior: tuple = (1.0, 1.0, 1.0)
    initial_dispersion: float = 1000.0
    alpha_prior: tuple = (1.0, 1.0)
    n_x_steps: int = 1
    map_sweeps: int = 0
    map_steps: int = 5
    nb_beta: str = "polya_gamma"
    sampler: str = "gibbs"
    max_doublings: int = 8
    frequencies: str = "sampled"
    dp_components: str = "drawn"

    def __post_init__(self):
        if self.dp_components not in ("drawn", "integrated"):
            raise ValueError(f"dp_components={self.dp_components!r}: use 'drawn' or "
                             "'integrated'")
        if self.frequencies not in ("sampled", "fixed"):
            raise ValueError(f"frequencies={self.frequencies!r}: use 'sampled' or 'fixed'")
        if self.frequencies == "fixed" and self.learn_kernel:
            raise ValueError("frequencies='fixed' holds W at one draw of a fixed kernel's "
                             "spectral density; it cannot be combined with learn_kernel=True")

    @property
    def integrates_components(self) -> bool:
        """Whether the NUTS block's frequencies' prior has the DP components integrated out
        (``dp_components='integrated'`` under the DP kernel and NUTS, W sampled)."""
        return (self.dp_components == "integrated" and self.learn_kernel
                and self.sampler == "nuts" and self.frequencies == "sampled")

    @property
    def n_weights(self) -> int:
        """P: rows of β."""
        return 2 * self.n_freq + int(self.intercept)

    @property
    def family(self) -> type[AbstractLikelihood]:
        """The likelihood's class (:func:`gplvm.likelihoods.likelihood_class`): what the
        sampler asks of the likelihood, so that it has no branch per likelihood."""
        return likelihood_class(self.likelihood)

    def export_key(self, what: str) -> str | None:
        """The key of the exported program ``what`` of this spec
        (:mod:`gplvm.inference.mcmc._exported`), or None (compile in the process, no file)
        when the likelihood's class is not gplvm's: the files' key digests gplvm's own source
        only, so an edited user likelihood would otherwise run a stale program."""
        if not self.family.__module__.startswith("gplvm."):
            return None
        return f"gplvm.RFLVM {what}{self!r}"

    @property
    def collapsed(self) -> bool:
        """β is integrated out and there is no intercept (Gaussian: ``conjugate_normal``)."""
        return self.family.conjugate_normal

    @property
    def dispersed(self) -> bool:
        """The likelihood has a dispersion r the sampler draws (eqs. 29–31, :mod:`.dispersion`)."""
        sampled = self.family.sampled_parameter
        return sampled is not None and sampled[0] == "dispersion"

    @property
    def polya_gamma(self) -> bool:
        """Whether β is drawn given Pólya-gamma variables ω (eq. 28)."""
        if self.sampler == "nuts" or not self.family.supports_polya_gamma:
            return False
        if self.dispersed:
            return self.nb_beta == "polya_gamma"
        return True


@register("gplvm.state.RFLVMData")
class RFLVMData(NamedTuple):
    """The observed data, prepared once (NaN-free arrays, so nothing inside jit sees a NaN).

    Attributes:
        Y: (N, J) observations with missing entries set to 0.
        observed: (N, D) 1.0 where the entry is observed (for the multinomial: per row,
            broadcast over its J − 1 latent columns), else 0.0.
        offset: (N, 1) known row offsets added to every linear predictor ψ (e.g. log size
            factors); zeros when not given.
        trials: (N, D) binomial numbers of trials / multinomial row totals (ones otherwise).
        beta_prior_mean: (P, D) prior mean of β (zero except the intercept row).
        beta_prior_prec: (P,) prior precision of each row of β.
        kernel: the fixed kernel whose spectral density proposes W (ignored under the DP).
        time: (N,) time stamps (dynamic model) or zeros.
        nonzero: Poisson and negative binomial: (y (K,), column (K,)) of the K observed
            entries with y > 0, for the terms log y! and Γ(y + r)/Γ(r) (the dispersion moves,
            the trace's normaliser), which vanish at y = 0 (91% of congress109); None
            otherwise (and in files saved before it existed).
        customers: negative binomial: the layout of the CRT draws of the dispersion step,
            fixed by the counts (:func:`gplvm.models.rflvm.dispersion.crt_layout`); None
            otherwise (and in files saved before it existed: the step then lays them out in
            every sweep).
        log_factorial: Poisson and negative binomial: Σ log y! over the observed entries, a
            constant of the data in every sweep's normalised trace; None otherwise (files
            saved before it existed get it on loading, :mod:`.legacy`).
    """

    Y: Array
    observed: Array
    offset: Array
    trials: Array
    beta_prior_mean: Array
    beta_prior_prec: Array
    kernel: Any
    time: Array
    nonzero: Any = None
    customers: Any = None
    log_factorial: Any = None


class MapParams(NamedTuple):
    """The parameters θ = (W, β, σ², r) of the map x ↦ p(y | x) (seed 000, eq. 21): what a
    latent point is conditioned on, in the X step and in predictions for new rows.

    One draw has W (M/2, Q), beta (P, D), noise_var (D,), dispersion (D,); the predictions of
    :mod:`.predict` take S stored draws stacked on a leading axis (S, ...).  A NamedTuple, so
    a pytree: ``jax.vmap`` over stored draws maps every field at once.

    Attributes:
        W: frequencies.
        beta: weights.
        noise_var: Gaussian noise variances σ_j² (ones for other likelihoods).
        dispersion: negative-binomial r_j (ones for other likelihoods).
    """

    W: Array
    beta: Array
    noise_var: Array
    dispersion: Array

    @classmethod
    def of(cls, state: "RFLVMState") -> "MapParams":
        """The map of one chain's current position."""
        return cls(state.W, state.beta, state.noise_var, state.dispersion)


@register("gplvm.state.RFLVMState")
class RFLVMState(NamedTuple):
    """One chain's position.

    Attributes:
        X: (N, Q) latents.
        W: (M/2, Q) frequencies.
        beta: (P, D) weights (drawn even for the Gaussian model, where the W and σ² updates
            integrate them out; they are what the X update and predictions condition on).
        noise_var: (D,) Gaussian noise variances σ_j² (ones for other likelihoods).
        dispersion: (D,) negative-binomial r_j (ones for other likelihoods).
        dispersion_rate: () h, the rate of the Gamma prior on r_j.
        dp: the Dirichlet-process mixture state of :mod:`gplvm.samplers.dp_mixture`.
        Y_fill: (N, J) data with missing entries imputed by their current conditional draw
            (Gaussian only; the other likelihoods leave missing entries out).
        time_params: (2,) log length-scale and log variance of the time kernel (dynamic).
        log_lik: () log p(Y_obs | X, W, β, θ) after the sweep.
        accept_W: () fraction of frequency proposals accepted in the sweep (the Metropolis–
            Hastings kernel's ``MHInfo.accepted``, averaged over the M/2 moves); NaN with
            ``frequencies='fixed'`` (no proposals).
        n_sweeps: () sweeps done (selects the MAP warm-up of X).
        n_proposals_X: () points evaluated on the ellipse per elliptical-slice block of X
            (rows, or columns under the GP prior; ``ESSInfo.n_proposals``, 1 = the first point
            accepted), averaged over blocks and the sweep's X steps; NaN in a MAP warm-up sweep.
        n_proposals_beta: () the same for the columns of β (Poisson); NaN where β is drawn
            from its exact conditional.
        tuning: ``sampler='nuts'``: the NUTS block's step size, mass matrix and adaptation
            state (:class:`gplvm.inference.mcmc.nuts.NUTSTuning`); None for the Gibbs sweep.

    The last two are None only in states read from files saved before they existed
    (:meth:`gplvm.RFLVM._upgrade_fitted` fills them in).
    """

    X: Array
    W: Array
    beta: Array
    noise_var: Array
    dispersion: Array
    dispersion_rate: Array
    dp: Any
    Y_fill: Array
    time_params: Array
    log_lik: Array
    accept_W: Array
    n_sweeps: Array
    n_proposals_X: Any = None
    n_proposals_beta: Any = None
    tuning: Any = None
