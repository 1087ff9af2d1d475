"""``RFLVM``: the random-feature latent variable model with MCMC (Zhang, Gundersen & Engelhardt,
JMLR 2023; seed 000).

.. math:: y_j \\sim \\mathcal L(g(\\varphi_W(X)\\beta_j), \\theta), \\quad
          \\beta_j \\sim N(\\beta_0, B_0), \\quad x_n \\sim N(0, I), \\quad
          w_m \\sim \\sum_k \\pi_k N(\\mu_k, \\Sigma_k), \\quad \\pi \\sim DP(\\alpha, NIW)

(eq. 21) with posterior samples of the latent space.  The sweep is :mod:`.sweep`, its chains
run in compiled blocks (:mod:`gplvm.inference.mcmc.driver`); the run is in :mod:`.run`, the
verbs after fitting in :mod:`.verbs`.
"""

from __future__ import annotations

import time

import jax
from sklearn.base import BaseEstimator, TransformerMixin

from gplvm._params import (CHECKPOINT, DEVICES, FLAG, LIKELIHOOD, MAP_SWEEPS, NON_NEGATIVE,
                          NON_NEGATIVE_INT, N_ITER_AUTO, POSITIVE, POSITIVE_INT, RANDOM_STATE,
                          STATIONARY_KERNEL, burn_in_below_n_iter, check_params, choice,
                          fixed_frequencies_need_a_fixed_kernel, integer, optional)
from gplvm._random import as_key
from gplvm._validation import require_float64
from gplvm.io import SaveMixin
from gplvm.kernels import RBF
from gplvm.models._checkpoint import refuse_data
from gplvm.models._common import check_is_fitted
from gplvm.models.rflvm.checks import check_data, check_devices, check_fit_inputs
from gplvm.models.rflvm.columns import narrow, standardise_fit
from gplvm.models.rflvm.init import (inducing_times, initial_latents, initial_states,
                                     per_chain, prepare_data)
from gplvm.io.legacy.rflvm import RFLVMFiles
from gplvm.models.rflvm.run import RFLVMRun
from gplvm.models.rflvm.verbs import RFLVMVerbs
from gplvm.registry import register


@register("gplvm.RFLVM", estimator=True)
class RFLVM(RFLVMFiles, SaveMixin, RFLVMVerbs, RFLVMRun, TransformerMixin, BaseEstimator):
    """Random-feature latent variable model, sampled by MCMC (seed 000).

    Columns kept out of the fit (issue 32; docs/contract.md, "Columns kept out of the fit"):
    with the Gaussian likelihood a column whose observed entries are all equal, or that has
    none, says nothing about the latents; with the Poisson, negative binomial, binomial and
    Bernoulli likelihoods a column with no observed entry.  The sampler fits the other columns,
    a :class:`gplvm.DroppedColumnsWarning` names the dropped ones, and every output
    keeps all D columns: ``predict``/``inverse_transform``/``sample``/``impute`` give a constant
    column its constant exactly (variance 0, ``noise_var_`` 0) and a never-observed column NaN.
    A constant *count* column (all zeros, say) is data, not a column to drop: it stays in the
    fit, where it pins its intercept (and the negative binomial's dispersion).  A multinomial
    category never observed is refused (the multinomial leaves out rows with a missing
    category, so no row would be left).

    Args:
        n_components: Q, the latent dimension: at most the number of columns that enter the
            fit and below the number of rows (:func:`gplvm._validation.check_n_components`,
            checked before any computation).
        likelihood: ``'gaussian'``, ``'poisson'``, ``'bernoulli'``, ``'binomial'``,
            ``'negative_binomial'`` or ``'multinomial'`` (last category the reference), in
            any case, or a :mod:`gplvm.likelihoods` object (``Binomial(n_trials=16)``).  The
            sampler draws the Gaussian noise variance and the negative-binomial dispersion,
            so those objects are taken with their default values.
        n_features: M, the number of random features (M/2 frequencies; even).
        n_iter: ``'auto'`` (default): after ``burn_in`` sweeps, rounds of max(burn_in, 100)
            sweeps until every chain statistic has converged — rank-normalised split R-hat ≤
            1.01 and bulk ESS ≥ ``ess_target`` for the log-likelihood and for the distances
            between 20 fixed row pairs of X (:mod:`gplvm.models.rflvm.convergence`) — or
            ``max_iter`` sweeps or ``max_time`` seconds have run (then a
            ``ConvergenceWarning`` gives the figures); the progress bar shows them after each
            round, with the sweeps and time that ESS would need at its rate so far.  Or a
            number of sweeps per chain, burn-in included (paper: 2000).
        burn_in: sweeps discarded: NUTS's adaptation (default 200, 20 at least; paper, Gibbs: 1000).
        n_chains: chains run together (``vmap``).
        thin: keep every ``thin``-th latent draw after burn-in.
        max_stored: at most this many draws of the big arrays (β, W) are kept in all.
        learn_kernel: Dirichlet-process mixture prior on the frequencies (eqs. 22–25);
            ``False`` keeps the kernel fixed and proposes W from its spectral density.
        frequencies: ``'sampled'`` (the paper) or ``'fixed'`` (``learn_kernel=False``): chain
            0's start W for every chain, never moved (random Fourier features: the posterior
            given W; ``accept_rate_`` NaN; NUTS 2–4× the ESS/CPU-s: benchmarks/README.md).
        dp_components: NUTS, DP kernel: ``'integrated'`` (the DP components integrated out
            of the NUTS block, then drawn) or ``'drawn'`` (the block given them; 1.6× / 1.3×
            less ESS, six seeds: benchmarks/README.md).  The same posterior either way.
        kernel: the stationary kernel whose spectral density proposes W when the kernel is
            fixed, and draws the initial W (default RBF with unit length-scale).
        n_clusters: initial number of DP components (paper: 20).
        beta_prior_var: prior variance of the feature weights (B0 = s0·I).
        intercept_prior_var: prior variance of the count models' per-column intercepts around
            the column's empirical link-scale mean (negative binomial: of the log-mean
            c_j + log r_j around log ȳ_j, so that it says nothing about the dispersion r_j).
        n_inducing_times: inducing times of the GP prior over time (dynamic RFLVM).
        init: ``'pca'`` (paper's code) or ``'random'`` initial latents.
        x_steps: elliptical-slice updates of X per sweep.
        map_sweeps: sweeps at the start of burn-in in which X climbs its conditional posterior
            (line-searched gradient steps, the reference code's MAP update of X) instead of
            being sampled; ``'auto'`` is half the burn-in, 0 samples X by
            elliptical slice from the first sweep.
        transform_steps: elliptical-slice updates for latents of new rows.
        block_size: sweeps compiled into one block (one progress-bar step).
        standardize: Gaussian likelihood: centre and scale the columns of Y.
        random_state: seed; same seed, same result.
        progress: show a progress bar per block.
        checkpoint: a file path: the model is saved there (:meth:`save`) after a block at most
            every ``checkpoint_interval`` seconds and when the run ends or is interrupted, so a
            killed process loses at most that much work; ``gplvm.load(path).resume()``
            finishes the run with exactly the draws an uninterrupted one gives.
        checkpoint_interval: seconds between checkpoint writes.
        nb_beta: the negative binomial's weight step: ``'polya_gamma'`` (the paper's Gibbs step
            given Pólya-gamma variables, eqs. 26–28) or ``'slice'`` (an elliptical slice per
            column without augmentation, about half the cost of a congress109 sweep, but slower
            to mix where counts span orders of magnitude: bridges 1-NN 0.755 against 0.836 in
            the Table 1 protocol, ``benchmarks/README.md``).
        sampler: ``'nuts'`` (default): X, W, β and the negative binomial's log r jointly by
            one NUTS transition per sweep (blackjax; step size and diagonal mass matrix
            adapted during burn-in; the Gaussian's β integrated out; W moved by its own
            Metropolis step only for a kernel without a closed-form spectral density), the DP
            mixture over W by its own step (:mod:`gplvm.models.rflvm.joint`, issue 30), each
            chain from an over-dispersed draw around the block's mode (L-BFGS from the PCA
            start; :mod:`gplvm.models.rflvm.map_start`); static latent prior only.  Or
            ``'gibbs'``: seed 000's sweep (β given X, X given β, each by its own kernel), the
            paper's protocol with ``n_iter=2000, burn_in=1000``, and the dynamic RFLVM's.
        devices: None (default): the chains run one per device (one CPU device per core).  A
            count d (the first d devices), a list of ``jax.Device`` or a
            ``jax.sharding.Mesh``: for data too big for one device, each chain is split over
            those devices by the rows of Y (the latents, the data and every N × D product and
            sum of the sweep, laid out by XLA), the chains one after the other; the draws are
            those of one device up to the order of the additions over rows
            (:func:`gplvm.inference.mcmc.run_chains`, ``row_mesh``).
        max_iter: ``n_iter='auto'``: the most sweeps per chain, burn-in included.
        ess_target: ``n_iter='auto'``: the bulk ESS every followed statistic must reach.
        max_time: ``n_iter='auto'``: seconds of wall time (None: no limit), counted from the
            start of ``fit`` (compilation and NUTS's mode search included, not cut short);
            checked after each call of ~2 s of sweeps per round of chains, keeping them all.
        inference: ``'mcmc'`` (sample the posterior with ``sampler``) or ``'map'``: no
            sampling, each chain's state the mode of the joint density of (X, W, β, log r)
            found by L-BFGS from its jittered PCA start, a fast point estimate whose restarts
            (one per chain) show whether the optimisation lands in one place
            (:mod:`gplvm.models.rflvm.map_fit`); ``n_iter``, ``burn_in`` and ``sampler``
            are then unused, and the fitted draws are the chains' modes (one each).

    Attributes:
        X_samples_ (chains, draws, N, Q) aligned to a common frame; X_mean_, X_var_ (N, Q);
        W_samples_, beta_samples_ (stored draws, flattened over chains, aligned frame for W);
        noise_var_ (Gaussian, per column, original units); dispersion_ (NB, per column);
        dropped_columns_ (indices of the columns kept out of the fit, above; they have
        ``Y_std_`` 0 and ``Y_mean_`` their constant, or both NaN, and zero columns in
        ``beta_samples_``);
        history_ (chains, sweeps) log-likelihood per sweep; sampler_info_ (dict of
        (chains, sweeps) arrays: ``accept_W`` the fraction of frequency proposals accepted,
        ``n_proposals_X`` / ``n_proposals_beta`` the mean number of points an elliptical
        slice evaluated per block of X / per column of β, 1 meaning the first proposal was
        accepted; NaN where the sweep did not slice-sample that block); accept_rate_ (mean
        of ``accept_W``); relevance_ (Q,) mean squared frequency per latent dimension;
        n_features_in_; n_iter_; converged_ (split R-hat of the kept log-likelihood trace
        below 1.1, or with ``n_iter='auto'`` the rule above at a round's end or max_iter,
        never mid-round; a ``ConvergenceWarning`` otherwise); convergence_ (dict:
        ``rhat_log_lik``, ``ess_log_lik``, ``rhat_distances`` (largest), ``ess_distances``
        (smallest), ``n_draws``, ``n_modes`` (the groups of chains stuck in separate modes
        of the log-likelihood, 1 when they agree or still drift; the warning then names them):
        :func:`.convergence.convergence_figures`); interrupted_;
        mode_start_ (``sampler='nuts'`` or ``inference='map'``: dict of (chains,) arrays
        ``log_density`` at the mode found, ``n_iterations`` of L-BFGS, ``max_gradient`` left
        there; with ``inference='map'`` also ``max_scaled_gradient``, that gradient in Laplace
        standard deviations, :mod:`gplvm.models.rflvm.map_fit`).
    """

    #: one rule per constructor argument (:mod:`gplvm._params`)
    _parameter_constraints = {"n_components": POSITIVE_INT, "likelihood": LIKELIHOOD,
        "n_features": integer(2, even=True), "n_iter": N_ITER_AUTO,
        "max_iter": POSITIVE_INT, "ess_target": POSITIVE_INT,
        "max_time": optional(POSITIVE, "300.0"),
        "burn_in": NON_NEGATIVE_INT, "n_chains": POSITIVE_INT, "thin": POSITIVE_INT,
        "max_stored": POSITIVE_INT, "learn_kernel": FLAG,
        "kernel": optional(STATIONARY_KERNEL, "gplvm.kernels.RBF(lengthscale=1.0)"),
        "n_clusters": POSITIVE_INT, "beta_prior_var": POSITIVE,
        "intercept_prior_var": POSITIVE, "n_inducing_times": POSITIVE_INT,
        "init": choice("pca", "random"), "x_steps": POSITIVE_INT,
        "map_sweeps": MAP_SWEEPS, "transform_steps": NON_NEGATIVE_INT,
        "block_size": POSITIVE_INT, "standardize": FLAG, "random_state": RANDOM_STATE,
        "progress": FLAG, "checkpoint": CHECKPOINT,
        "checkpoint_interval": NON_NEGATIVE,
        "nb_beta": choice("polya_gamma", "slice"), "sampler": choice("gibbs", "nuts"),
        "inference": choice("mcmc", "map"), "frequencies": choice("sampled", "fixed"),
        "dp_components": choice("drawn", "integrated"), "devices": DEVICES}
    _parameter_relations = (burn_in_below_n_iter, fixed_frequencies_need_a_fixed_kernel)

    def __init__(self, n_components: int = 2, likelihood: str = "poisson", n_features: int = 100,
                 n_iter: int | str = "auto", burn_in: int = 200, n_chains: int = 4, thin: int = 1,
                 max_stored: int = 200, learn_kernel: bool = True, kernel=None,
                 n_clusters: int = 20, beta_prior_var: float = 1.0,
                 intercept_prior_var: float = 4.0, n_inducing_times: int = 20,
                 init: str = "pca", x_steps: int = 1, map_sweeps="auto",
                 transform_steps: int = 50,
                 block_size: int = 50, standardize: bool = True, random_state=0,
                 progress: bool = True, checkpoint=None, checkpoint_interval: float = 60.0,
                 nb_beta: str = "polya_gamma", sampler: str = "nuts", devices=None,
                 max_iter: int = 10000, ess_target: int = 400, inference: str = "mcmc",
                 max_time: float | None = None, frequencies: str = "sampled",
                 dp_components: str = "integrated"):
        self.n_components = n_components
        self.likelihood = likelihood
        self.n_features = n_features
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.n_chains = n_chains
        self.thin = thin
        self.max_stored = max_stored
        self.learn_kernel = learn_kernel
        self.kernel = kernel
        self.n_clusters = n_clusters
        self.beta_prior_var = beta_prior_var
        self.intercept_prior_var = intercept_prior_var
        self.n_inducing_times = n_inducing_times
        self.init = init
        self.x_steps = x_steps
        self.map_sweeps = map_sweeps
        self.transform_steps = transform_steps
        self.block_size = block_size
        self.standardize = standardize
        self.random_state = random_state
        self.progress = progress
        self.checkpoint = checkpoint
        self.checkpoint_interval = checkpoint_interval
        self.nb_beta, self.sampler, self.devices = nb_beta, sampler, devices
        self.max_iter, self.ess_target = max_iter, ess_target
        self.inference, self.max_time, self.frequencies = inference, max_time, frequencies
        self.dp_components = dp_components

    def fit(self, Y, y=None, *, times=None, offset=None, n_trials=None):
        """Sample the posterior of the latents and the map given ``Y`` (NaN = missing).

        Args:
            Y: (N, J) data; NaN marks a missing entry.
            y: ignored (scikit-learn's place for targets; unsupervised).
            times: (N,) time stamps for the dynamic RFLVM (a GP prior over time on each
                latent dimension); ``None`` for the iid N(0, I) prior.
            offset: (N,) known row offsets of the linear predictor for count models (e.g. log
                size factors of single-cell data).
            n_trials: binomial numbers of trials (scalar, (J,), (N, 1) or (N, J)).

        Returns:
            self.
        """
        started = time.perf_counter()           # max_time counts from here
        check_params(self)
        check_devices(self.devices, self.checkpoint)
        lik, Y, times, offset, dropped = check_fit_inputs(self, Y, times, offset, n_trials)
        kind = lik.name
        if lik.supports_polya_gamma:   # their Pólya-gamma and CRT samplers need 64-bit numbers
            require_float64(f"RFLVM(likelihood={kind!r}) fits (Pólya-gamma draws)")
        check_data(Y, lik)
        vars(self).pop("mode_start_", None)     # a Gibbs refit after a NUTS or MAP fit has none
        self.n_features_in_ = Y.shape[1]
        # the sampler sees the kept columns only (:mod:`.columns`)
        self.Y_mean_, self.Y_std_, Ys = standardise_fit(Y, kind, self.standardize, dropped)
        self.n_outputs_ = lik.latent_dim(Ys.shape[1])
        spec = self._spec(kind, self.n_outputs_, times is not None)
        kernel = RBF(lengthscale=1.0) if self.kernel is None else self.kernel
        trials = (narrow(getattr(lik, "n_trials", None), Y.shape[1], ~dropped)
                  if lik.takes_trials else None)
        data = prepare_data(spec, Ys, offset, trials, kernel, times)
        key_init, key_run = jax.random.split(as_key(self.random_state))
        X0 = initial_latents(Ys, kind, key_init, self.n_components, self.init, offset)
        keys = jax.random.split(key_init, self.n_chains)
        states = initial_states(keys, spec, data, X0, 0.1, self.n_clusters)   # jitter 0.1
        u = inducing_times(times, self.n_inducing_times)
        self._spec_, self._data_, self._u_ = spec, data, u
        self._key_run_ = key_run
        self._train_Y_ = Y.copy()          # the caller may change its array later
        # The data travel with each chain's state, so the compiled sweep depends on the spec
        # and the shapes only and is reused by later fits (other seeds, other data of the
        # same size) instead of being compiled again.
        carry = (per_chain(data, self.n_chains), per_chain(u, self.n_chains))
        if self.inference == "map":
            return self._fit_map((states, *carry))
        if states.tuning is not None:     # the NUTS block adapts over the burn-in
            states = self._start_nuts(states, key_init)
        return self._sample((states, *carry), start=0, earlier=None, started=started)

    def resume(self, Y=None):
        """Finish an interrupted (or checkpointed) fit: the remaining sweeps from the stored
        chain states, joined to the draws so far; the result equals an uninterrupted fit's.

        Typical use: ``gplvm.load(path).resume()`` after a run with ``checkpoint=path`` was
        killed, or ``model.resume()`` after Ctrl-C.  A finished fit is returned unchanged.

        Args:
            Y: leave it None: the fit keeps its data (the argument exists so that every
                estimator's ``resume`` has one signature, docs/contract.md).
        """
        check_is_fitted(self, "_result_")
        refuse_data(self, Y)
        earlier = self._unfinished()       # the stored run, laid out as today's (:mod:`.run`)
        if earlier is None:
            return self
        if self.devices is not None:   # e.g. a file's devices=4 read on a smaller machine
            check_params(self)
        return self._sample(earlier.state, start=int(earlier.n_done), earlier=earlier)
