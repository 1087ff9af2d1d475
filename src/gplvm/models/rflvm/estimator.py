"""``RFLVM``: the random-feature latent variable model with MCMC (Zhang, Gundersen & Engelhardt,
JMLR 2023; seed 000).

.. math:: y_j \\sim \\mathcal L(g(\\varphi_W(X)\\beta_j), \\theta), \\quad
          \\beta_j \\sim N(\\beta_0, B_0), \\quad x_n \\sim N(0, I), \\quad
          w_m \\sim \\sum_k \\pi_k N(\\mu_k, \\Sigma_k), \\quad \\pi \\sim DP(\\alpha, NIW)

(eq. 21) with posterior samples of the latent space.  The sampler is in
:mod:`gplvm.models.rflvm` (one Gibbs sweep per likelihood, :mod:`.sweep`); chains run
together under ``vmap`` with compiled blocks of sweeps (:mod:`gplvm.inference.mcmc.driver`).
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning

from gplvm._config import float_dtype
from gplvm._pytree import to_device
from gplvm._params import (CHECKPOINT, DEVICES, FLAG, LIKELIHOOD, MAP_SWEEPS, NON_NEGATIVE,
                          NON_NEGATIVE_INT, N_ITER_AUTO, POSITIVE, POSITIVE_INT, RANDOM_STATE,
                          STATIONARY_KERNEL, burn_in_below_n_iter, check_argument, check_params,
                          choice, integer, optional)
from gplvm._random import as_key
from gplvm._validation import (
    as_1d_float, as_2d_float, check_magnitude, check_new_values, column_standardisation,
    dropped_columns_notice, kept_columns, require_float64, standardise_kept,
)
from gplvm.inference.mcmc import Execution, Keep, Report, Sweeps, run_chains, split_rhat
from gplvm.inference.sharding import checkpoint_devices_problem
from gplvm.inference.mcmc.driver import concat_results
from gplvm.inference.run import CheckpointTimer
from gplvm.io import SaveMixin
from gplvm.kernels import RBF
from gplvm.likelihoods import get_likelihood
from gplvm.models._checkpoint import holding_checkpoint, refuse_data
from gplvm.models._common import check_is_fitted, in_model_precision
from gplvm.models._rows import map_rows
from gplvm.models.rflvm import predict as pred
from gplvm.models.rflvm.checks import check_fit_inputs, check_latent_points
from gplvm.models.rflvm.columns import narrow, widen
from gplvm.models.rflvm.convergence import (RHAT_TARGET, convergence_figures, describe,
                                             has_converged)
from gplvm.models.rflvm.fitted import (aligned_draws, record_heavy,
                                        record_light, trace)
from gplvm.models.rflvm.inference_data import inference_data
from gplvm.models.rflvm.init import initial_states, prepare_data
from gplvm.models.rflvm.map_fit import SCALED_TOLERANCE, map_result
from gplvm.models.rflvm.map_start import start_chains
from gplvm.models.rflvm.legacy import current_layouts, upgrade_fitted
from gplvm.models.rflvm.loglik import likelihood_object
from gplvm.models.rflvm.spec import POLYA_GAMMA, RFLVMSpec
from gplvm.models.rflvm.sweep import sweep as rflvm_sweep
from gplvm.registry import register


MAX_NEW_ROW_DRAWS = 50


#: ``n_iter='auto'``: the fewest sweeps of a round after burn-in
AUTO_ROUND = 100


@register("gplvm.RFLVM", estimator=True)
class RFLVM(SaveMixin, TransformerMixin, BaseEstimator):
    """Random-feature latent variable model, sampled by MCMC (seed 000).

    Columns kept out of the fit (issue 32; docs/contract.md, "Columns kept out of the fit"):
    with the Gaussian likelihood a column whose observed entries are all equal, or that has
    none, says nothing about the latents; with the Poisson, negative binomial, binomial and
    Bernoulli likelihoods a column with no observed entry.  The sampler fits the other columns,
    a :class:`gplvm._validation.DroppedColumnsWarning` names the dropped ones, and every output
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
        n_iter: sweeps per chain, burn-in included (paper: 2000), or ``'auto'``: after
            ``burn_in`` sweeps, rounds of max(burn_in, 100) sweeps until every chain
            statistic has converged — rank-normalised split R-hat ≤ 1.01 and bulk ESS ≥
            ``ess_target`` for the log-likelihood and for the distances between 20 fixed row
            pairs of X (:mod:`gplvm.models.rflvm.convergence`) — or ``max_iter`` sweeps have
            run (then a ``ConvergenceWarning`` gives the figures).  The progress bar shows
            them after each round.
        burn_in: sweeps discarded (paper: 1000).
        n_chains: chains run together (``vmap``).
        thin: keep every ``thin``-th latent draw after burn-in.
        max_stored: at most this many draws of the big arrays (β, W) are kept in all.
        learn_kernel: Dirichlet-process mixture prior on the frequencies (eqs. 22–25);
            ``False`` keeps the kernel fixed and proposes W from its spectral density.
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
        sampler: ``'gibbs'`` (seed 000's sweep: β given X, X given β, each by its own
            kernel) or ``'nuts'``: X, W, β and the negative binomial's log r jointly by one
            NUTS transition per sweep (blackjax; step size and diagonal mass matrix adapted
            during burn-in; the Gaussian's β integrated out; W given, and moved by its own
            Metropolis step only, for a kernel without a closed-form spectral density), the DP
            mixture over W by its own step (:mod:`gplvm.models.rflvm.joint`, issue 30).  Each chain starts from an
            over-dispersed draw around the block's mode (L-BFGS from the PCA start), its first mass matrix the Laplace variances there
            (:mod:`gplvm.models.rflvm.map_start`).  Static latent prior only.
        devices: None (default): the chains run one per device (one CPU device per core).  A
            count d (the first d devices), a list of ``jax.Device`` or a
            ``jax.sharding.Mesh``: for data too big for one device, each chain is split over
            those devices by the rows of Y (the latents, the data and every N × D product and
            sum of the sweep, laid out by XLA), the chains one after the other; the draws are
            those of one device up to the order of the additions over rows
            (:func:`gplvm.inference.mcmc.run_chains`, ``row_mesh``).
        max_iter: ``n_iter='auto'``: the most sweeps per chain, burn-in included.
        ess_target: ``n_iter='auto'``: the bulk ESS every followed statistic must reach.
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
        below 1.1, or with ``n_iter='auto'`` the rule above; a ``ConvergenceWarning``
        otherwise); convergence_ (dict: ``rhat_log_lik``, ``ess_log_lik``,
        ``rhat_distances`` (largest), ``ess_distances`` (smallest), ``n_draws``:
        :func:`gplvm.models.rflvm.convergence.convergence_figures`); interrupted_; mode_start_
        (``sampler='nuts'`` or ``inference='map'``: dict of (chains,) arrays ``log_density``
        at the mode found, ``n_iterations`` of L-BFGS, ``max_gradient`` left there; with
        ``inference='map'`` also ``max_scaled_gradient``, that gradient in Laplace standard
        deviations, :mod:`gplvm.models.rflvm.map_fit`).
    """

    #: one rule per constructor argument (:mod:`gplvm._params`)
    _parameter_constraints = {"n_components": POSITIVE_INT, "likelihood": LIKELIHOOD,
        "n_features": integer(2, even=True), "n_iter": N_ITER_AUTO,
        "max_iter": POSITIVE_INT, "ess_target": POSITIVE_INT,
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
        "inference": choice("mcmc", "map"),
        "devices": DEVICES}
    _parameter_relations = (burn_in_below_n_iter,)

    def __init__(self, n_components: int = 2, likelihood: str = "poisson", n_features: int = 100,
                 n_iter: int = 2000, burn_in: int = 1000, n_chains: int = 4, thin: int = 1,
                 max_stored: int = 200, learn_kernel: bool = True, kernel=None,
                 n_clusters: int = 20, beta_prior_var: float = 1.0,
                 intercept_prior_var: float = 4.0, n_inducing_times: int = 20,
                 init: str = "pca", x_steps: int = 1, map_sweeps="auto",
                 transform_steps: int = 50,
                 block_size: int = 50, standardize: bool = True, random_state=0,
                 progress: bool = True, checkpoint=None, checkpoint_interval: float = 60.0,
                 nb_beta: str = "polya_gamma", sampler: str = "gibbs", devices=None,
                 max_iter: int = 10000, ess_target: int = 400, inference: str = "mcmc"):
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
        self.nb_beta = nb_beta
        self.sampler = sampler
        self.devices = devices
        self.max_iter = max_iter
        self.ess_target = ess_target
        self.inference = inference

    # --- fitting ------------------------------------------------------------------------------

    def _spec(self, kind: str, n_outputs: int, dynamic: bool) -> RFLVMSpec:
        return RFLVMSpec(likelihood=kind, n_components=int(self.n_components),
                         n_freq=int(self.n_features) // 2, n_outputs=n_outputs,
                         intercept=kind != "gaussian", learn_kernel=bool(self.learn_kernel),
                         dynamic=dynamic, beta_prior_var=float(self.beta_prior_var),
                         intercept_prior_var=float(self.intercept_prior_var),
                         n_x_steps=int(self.x_steps), map_sweeps=self._map_sweeps(),
                         nb_beta=str(self.nb_beta), sampler=str(self.sampler))

    def _map_sweeps(self) -> int:
        if self.map_sweeps == "auto" and self.sampler == "nuts":
            return 0     # NUTS adapts from the start; uphill sweeps would disturb adaptation
        if self.map_sweeps == "auto":
            return int(self.burn_in) // 2
        return int(self.map_sweeps)

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
        check_params(self)
        self._check_devices()
        lik, Y, times, offset, dropped = check_fit_inputs(self, Y, times, offset, n_trials)
        kind = lik.name
        if kind in POLYA_GAMMA:  # their Pólya-gamma and CRT samplers need 64-bit numbers
            require_float64(f"RFLVM(likelihood={kind!r}) fits (Pólya-gamma draws)")
        self._check_data(Y, kind)
        self.n_features_in_ = Y.shape[1]
        # the sampler sees the kept columns only (:mod:`.columns`)
        Ys = self._standardise_fit(Y, kind, dropped)
        self.n_outputs_ = lik.latent_dim(Ys.shape[1])
        spec = self._spec(kind, self.n_outputs_, times is not None)
        kernel = RBF(lengthscale=1.0) if self.kernel is None else self.kernel
        trials = (narrow(getattr(lik, "n_trials", None), Y.shape[1], ~dropped)
                  if kind == "binomial" else None)
        data = prepare_data(spec, Ys, offset, trials, kernel, times)
        key = as_key(self.random_state)
        key_init, key_run = jax.random.split(key)
        X0 = self._initial_latents(Ys, kind, key_init, offset)
        keys = jax.random.split(key_init, self.n_chains)
        jitter = 0.1
        states = initial_states(keys, spec, data, X0, jitter, self.n_clusters)
        u = _inducing_times(times, self.n_inducing_times)
        self._spec_, self._data_, self._u_ = spec, data, u
        self._key_run_ = key_run
        self._train_Y_ = Y.copy()          # the caller may change its array later
        if self.inference == "map":
            return self._fit_map((states, _per_chain(data, self.n_chains),
                                  _per_chain(u, self.n_chains)))
        if states.tuning is not None:     # the NUTS block adapts over the burn-in
            states = states._replace(tuning=states.tuning._replace(
                burn_in=np.full(self.n_chains, int(self.burn_in), np.int32)))
            # ... from over-dispersed draws around the block's mode, Laplace-scaled
            keys_start = jax.random.split(jax.random.fold_in(key_init, 1), self.n_chains)
            states, search, _ = start_chains(keys_start, spec, data, states)
            self.mode_start_ = {k: np.asarray(v) for k, v in search._asdict().items()
                                if k != "position"}
        # The data travel with each chain's state, so the compiled sweep depends on the spec
        # and the shapes only and is reused by later fits (other seeds, other data of the
        # same size) instead of being compiled again.
        init = (states, _per_chain(data, self.n_chains), _per_chain(u, self.n_chains))
        return self._sample(init, start=0, earlier=None)

    @holding_checkpoint
    def _fit_map(self, init):
        """``inference='map'`` (:mod:`gplvm.models.rflvm.map_fit`): the chains' modes as the
        fitted draws (``converged_``: :meth:`_check_convergence`)."""
        result, self.mode_start_ = map_result(self._spec_, self._data_, init)
        self._set_fitted(result)
        if self.checkpoint is not None:
            self.save(self.checkpoint)
        return self

    def _check_data(self, Y, kind: str) -> None:
        """What the sampler needs of the data beyond its likelihood's support."""
        check_magnitude(Y, "Y", "rescale Y (counts this large cannot be modelled exactly "
                                "either)" if kind != "gaussian" else "rescale Y (e.g. divide "
                                "it by its largest entry)")
        if kind == "multinomial":
            empty = np.nansum(Y, axis=1) == 0
            if empty.any():
                raise ValueError(f"Y has {int(empty.sum())} rows with no counts (rows "
                                 f"{np.flatnonzero(empty)[:5].tolist()}); the multinomial "
                                 f"likelihood models how a row's total is split over the "
                                 f"categories, so a row of zeros says nothing: drop those rows")

    def _check_devices(self) -> None:
        """``devices`` with ``checkpoint``: the rule the Bayesian GPLVM applies too
        (:func:`gplvm.inference.sharding.checkpoint_devices_problem`)."""
        why = checkpoint_devices_problem(self.devices, self.checkpoint)
        if why is not None:
            raise ValueError(f"RFLVM: devices={self.devices!r}: {why}")

    def _row_mesh(self):
        """The mesh each chain is split over by rows, or None (``devices``)."""
        if self.devices is None:
            return None
        from gplvm.inference.sharding import make_mesh   # jax.sharding only when asked
        return make_mesh(self.devices)

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
        if self.inference == "map":          # nothing to continue: the modes are the fit
            return self
        # a file saved before the CRT layout changed carries the old one: lay it out again
        for name, value in current_layouts(
                {"_spec_": self._spec_, "_data_": self._data_, "_result_": self._result_}).items():
            setattr(self, name, value)
        earlier = self._result_
        done = (earlier.n_done >= self.max_iter or (self.converged_ and not self.interrupted_)
                if self._auto() else earlier.n_done >= self.n_iter)
        if done:
            return self
        if self.devices is not None:   # e.g. a file's devices=4 read on a smaller machine
            check_params(self)
        return self._sample(earlier.state, start=int(earlier.n_done), earlier=earlier)

    def _auto(self) -> bool:
        return isinstance(self.n_iter, str) and self.n_iter == "auto"

    def _sample(self, init, start: int, earlier):
        """``n_iter`` sweeps, or with ``n_iter='auto'`` rounds until converged (see ``n_iter``);
        each round continues the chains exactly as :meth:`resume` does."""
        if not self._auto():
            return self._run(init, start, earlier, int(self.n_iter))
        max_iter, burn_in = int(self.max_iter), int(self.burn_in)
        round_length = max(burn_in, AUTO_ROUND)
        # rounds end at burn_in + k·round whatever the start, so a resumed run checks (and
        # stops) where an uninterrupted one does
        target = burn_in + round_length * (max(start - burn_in, 0) // round_length + 1)
        desc = None
        while True:
            target = min(target, max_iter)
            self._run(init, start, earlier, target, quiet=True, desc=desc)
            if self.interrupted_ or self.converged_ or self.n_iter_ >= max_iter:
                break
            earlier = self._result_
            init, start = earlier.state, int(earlier.n_done)
            desc = describe(self.convergence_)
            target += round_length
        if not self.converged_ and not self.interrupted_:
            warnings.warn(f"RFLVM: not converged after max_iter={max_iter} sweeps per chain "
                          f"({describe(self.convergence_)} for the log-likelihood / the worst "
                          f"latent distance; the targets are R-hat <= {RHAT_TARGET} and ESS >= "
                          f"{self.ess_target}); converged_ is False: raise max_iter, or "
                          f"resume() after raising it", ConvergenceWarning, stacklevel=3)
        return self

    @holding_checkpoint
    def _run(self, init, start: int, earlier, n_iter: int, quiet: bool = False,
             desc: str | None = None):
        spec = self._spec_
        # n_iter='auto' sizes the thinning of the big arrays for its largest run
        n_total = int(self.max_iter) if self._auto() else n_iter
        n_kept = max((n_total - self.burn_in) // max(self.thin, 1), 1)
        thin_heavy = (earlier.thin_heavy if earlier is not None else
                      max(int(np.ceil(n_kept * self.thin * self.n_chains / self.max_stored)), 1))
        checkpoint = (None if self.checkpoint is None else
                      CheckpointTimer(self._checkpoint_writer(earlier),
                                      float(self.checkpoint_interval)))
        result = run_chains(
            self._key_run_, init, _sweep_for(spec),
            Sweeps(n_iter, burn_in=int(self.burn_in), thin=int(self.thin),
                   thin_heavy=thin_heavy, start=start),
            Keep(record=record_light, record_heavy=record_heavy, trace=trace),
            execution=Execution(
                block_size=int(self.block_size), row_mesh=self._row_mesh(),
                n_rows=int(self._data_.Y.shape[0]),
                export_key=f"gplvm.RFLVM {spec!r}"),  # the spec fixes the sweep and the records
            report=Report(
                progress=self.progress,
                desc=f"RFLVM ({spec.likelihood})" + (f" {desc}" if desc else ""),
                # the MAP warm-up sweeps: X climbs, no proposals
                stage=lambda done: "MAP" if done < spec.map_sweeps else ""),
            checkpoint=checkpoint)
        if earlier is not None:
            result = concat_results(earlier, result)
        self._set_fitted(result, quiet=quiet)
        if self.checkpoint is not None:
            self.save(self.checkpoint)
        return self

    def _checkpoint_writer(self, earlier):
        """The write of the checkpoint timer: the model with the draws so far (joined to the
        ``earlier`` ones), saved to ``checkpoint``."""
        def write(partial):
            joined = partial if earlier is None else concat_results(earlier, partial)
            self._set_fitted(jax.tree_util.tree_map(np.array, joined), quiet=True)
            self.save(self.checkpoint)

        return write

    def _standardise_fit(self, Y, kind: str, dropped=None):
        """Sets ``Y_mean_`` and ``Y_std_`` of all D columns (centring and scaling only for the
        Gaussian with ``standardize``), the ``dropped`` ones coded in them
        (:mod:`.columns`), with the one-line notice naming them; returns the kept
        columns standardised, what the sampler reads.  In the float32 mode (gplvm.config)
        predictions in original units are float32 too."""
        dropped = np.zeros(Y.shape[1], bool) if dropped is None else dropped
        if dropped.any():
            dropped_columns_notice("RFLVM", Y, dropped)
        self.Y_mean_, self.Y_std_ = column_standardisation(Y, dropped,
                                                         kind == "gaussian" and self.standardize)
        return standardise_kept(Y, self.Y_mean_, self.Y_std_)

    def _initial_latents(self, Ys, kind: str, key, offset=None):
        Q = int(self.n_components)
        if self.init == "random":
            return jax.random.normal(key, (Ys.shape[0], Q))
        Z = np.where(np.isnan(Ys), np.nanmean(Ys, axis=0), Ys)
        if kind != "gaussian":
            if offset is not None:               # counts per unit of exposure exp(offset)
                Z = Z * np.exp(-(np.asarray(offset, float) - np.mean(offset))).reshape(-1, 1)
            Z = np.log1p(np.maximum(Z, 0.0))     # PCA of log counts (variance-stabilised)
        Z = Z - Z.mean(0)
        U, s, _ = np.linalg.svd(Z, full_matrices=False)
        X0 = U[:, :Q] * s[:Q]
        X0 = X0 / np.maximum(X0.std(0), 1e-12)   # unit variance, the N(0, I) prior's scale
        return to_device(X0)

    def _set_fitted(self, result, quiet: bool = False):
        result = result._replace(state=jax.tree_util.tree_map(np.asarray, result.state))
        self._result_ = result       # raw (unaligned) draws and chain states, for resume()
        draws, heavy = result.draws, result.heavy
        self.n_iter_ = int(result.n_done)
        self.interrupted_ = bool(result.interrupted)
        self.history_ = np.asarray(result.trace["log_lik"])
        self.sampler_info_ = {k: np.asarray(v) for k, v in result.trace.items()
                              if k != "log_lik"}
        self.accept_rate_ = float(np.mean(self.sampler_info_["accept_W"]))
        # Interrupted before a (heavy) draw was kept: the chains' last states stand in for the
        # draws, so the model stays usable (API.md); they are not posterior draws.
        def last(record):
            return {k: np.asarray(v)[:, None]
                    for k, v in jax.vmap(record)(result.state).items()}

        if np.asarray(draws["X"]).shape[1] == 0:
            if not quiet:
                warnings.warn("the fit was interrupted during burn-in: the model holds the "
                              "last state of each chain, not posterior draws", RuntimeWarning,
                              stacklevel=3)
            draws = last(record_light)
        if np.asarray(heavy["W"]).shape[1] == 0:
            heavy = last(record_heavy)
        self.X_samples_, self.X_mean_, self._draws_ = aligned_draws(draws, heavy)
        self.X_var_ = np.var(self.X_samples_.reshape(-1, *self.X_samples_.shape[2:]), axis=0)
        self.W_samples_ = self._draws_["W"]
        # per-column figures over all D columns; the draws (``_draws_``) are the kept columns'
        kept = kept_columns(self.Y_std_)
        self.beta_samples_ = widen(self._draws_["beta"], kept)
        kind = self._spec_.likelihood
        nv = widen(self._draws_["noise_var"].mean(0), kept)       # · Y_std_²: 0, or NaN
        self.noise_var_ = nv * self.Y_std_**2 if kind == "gaussian" else None
        self.dispersion_ = (widen(self._draws_["dispersion"].mean(0), kept, np.nan)
                            if kind == "negative_binomial" else None)
        self.relevance_ = np.mean(self._draws_["W"] ** 2, axis=(0, 1))
        self._light_ = {k: np.asarray(v) for k, v in draws.items() if k != "X"}
        self._check_convergence(quiet or self.interrupted_)

    def _check_convergence(self, quiet: bool) -> None:
        """``convergence_`` (:func:`.convergence_figures`) and ``converged_``: with
        ``n_iter='auto'`` its rule (:func:`.has_converged`); with ``inference='map'`` every
        mode search within :data:`~gplvm.models.rflvm.map_fit.SCALED_TOLERANCE` Laplace sds
        of a stationary point; else split R-hat (Gelman et al. 2013, §11.4) of the
        log-likelihood after burn-in below 1.1; a ``ConvergenceWarning`` when it is not."""
        if self.inference == "map":    # no chains to diagnose: the mode searches' own test
            self.convergence_ = convergence_figures(self.history_[:, :0], self.X_samples_[:, :0])
            worst = float(np.max(self.mode_start_["max_scaled_gradient"]))
            self.converged_ = bool(worst <= SCALED_TOLERANCE)
            if not self.converged_ and not quiet:
                warnings.warn(f"RFLVM(inference='map'): L-BFGS stopped {worst:.3g} Laplace "
                              f"standard deviations from a stationary point along some "
                              f"coordinate (tolerance {SCALED_TOLERANCE}); converged_ is False: "
                              f"the modes are approximate", ConvergenceWarning, stacklevel=5)
            return
        kept_trace = self.history_[:, self.burn_in:]
        self.convergence_ = convergence_figures(kept_trace, self.X_samples_)
        if self._auto():
            self.converged_ = has_converged(self.convergence_, int(self.ess_target))
            return                      # :meth:`_sample` warns once the rounds have ended
        rhat = split_rhat(kept_trace) if kept_trace.shape[1] >= 4 else float("nan")
        self.converged_ = bool(rhat < 1.1)
        if not self.converged_ and not quiet:
            why = (f"the split R-hat of the log-likelihood after burn-in is {rhat:.3g}"
                   if np.isfinite(rhat) else
                   f"{kept_trace.shape[1]} sweeps after burn-in are too few to compute R-hat")
            warnings.warn(f"RFLVM: {why} (converged_ is False); run more sweeps (n_iter, "
                          f"burn_in) or more chains", ConvergenceWarning, stacklevel=5)

    # --- prediction ---------------------------------------------------------------------------

    def _map_draws(self, subset: bool = False):
        """Stored draws of the map; ``subset``: at most ``MAX_NEW_ROW_DRAWS`` evenly spaced ones
        (inferring new rows costs an elliptical-slice run per draw)."""
        d = self._draws_
        n = d["W"].shape[0]
        idx = (np.unique(np.linspace(0, n - 1, min(n, MAX_NEW_ROW_DRAWS)).round().astype(int))
               if subset else np.arange(n))
        return (jnp.asarray(d["W"][idx]), jnp.asarray(d["beta"][idx]),
                jnp.asarray(d["noise_var"][idx]), jnp.asarray(d["dispersion"][idx]))

    def _prepare_new(self, Y, offset=None):
        """(Y, prepared data) of new rows, validated against the fitted model."""
        check_is_fitted(self, "X_mean_")
        Y = as_2d_float(Y, "Y", allow_nan=True)
        if Y.shape[1] != self.n_features_in_:
            raise ValueError(f"Y has {Y.shape[1]} columns but the model was fitted on "
                             f"{self.n_features_in_}; pass rows with the same columns")
        check_new_values(Y, "Y")
        spec = self._spec_
        if spec.likelihood != "binomial":
            get_likelihood(spec.likelihood).validate(Y)
        if offset is not None:
            offset = as_1d_float(offset, "offset")
            if offset.shape[0] != Y.shape[0]:
                raise ValueError(f"offset has {offset.shape[0]} entries but Y has {Y.shape[0]} "
                                 f"rows; pass one offset per row")
        Ys = standardise_kept(Y, self.Y_mean_, self.Y_std_)   # dropped columns: ignored
        return Y, prepare_data(spec, Ys, offset, None, self._data_.kernel, None)

    def _new_latents(self, Y, data):
        """(S, N*, Q) latents of new rows, one chain per row and stored draw of the map."""
        W, beta, nv, disp = self._map_draws(subset=True)
        # keyed by the row as the model sees it (standardised), so data that standardise to the
        # same rows (a·Y + b) get the same random numbers
        Ys = standardise_kept(Y, self.Y_mean_, self.Y_std_)
        keys = pred.row_keys(as_key(self.random_state), Ys, np.asarray(data.offset))
        return pred.infer_new_latents(keys, self._spec_.likelihood, self._spec_.intercept,
                                      int(self.transform_steps), pred.Rows.of(data),
                                      pred.MapParams(W, beta, nv, disp))

    @in_model_precision
    def transform(self, Y, return_var: bool = False, *, offset=None):
        """Posterior mean latents of new rows (map held fixed; rows may contain NaN).

        Each row's latent depends on that row (and its offset) and the fitted model only: its
        elliptical-slice chains draw random numbers from a key derived from the row's values.
        """
        Y, data = self._prepare_new(Y, offset)
        Xs = np.asarray(self._new_latents(Y, data))
        return (Xs.mean(0), Xs.var(0)) if return_var else Xs.mean(0)

    def fit_transform(self, Y, y=None, **fit_params):
        return self.fit(Y, **fit_params).X_mean_

    @in_model_precision
    def predict(self, X, return_var: bool = False):
        """Posterior predictive mean (and variance over draws of E[y | ψ]) at latent points X,
        in the units of Y; the variance leaves out the observation noise (for the Gaussian
        model add ``noise_var_``)."""
        check_is_fitted(self, "X_mean_")
        X = check_latent_points(X, int(self.n_components))
        W, beta, nv, disp = self._map_draws()
        S = W.shape[0]

        def moments(rows):      # blocks of a fixed number of rows: a row's value never
            Xs = jnp.broadcast_to(rows, (S,) + rows.shape)   # depends on the call's size
            means = _per_draw_means(self, Xs, W, beta, nv, disp, jnp.zeros((rows.shape[0], 1)))
            return means.mean(0), means.var(0)

        mean, var = map_rows(moments, np.asarray(X))
        # the dropped columns' value 0 becomes their constant (variance 0) or NaN
        kept = kept_columns(self.Y_std_)
        mean = widen(mean, kept) * self.Y_std_ + self.Y_mean_
        if return_var:
            return mean, widen(var, kept) * self.Y_std_**2
        return mean

    inverse_transform = predict

    @in_model_precision
    def impute(self, Y, *, offset=None):
        """A copy of Y with each NaN replaced by its posterior expected value (seed 000 §4.2).

        The training data (exactly: same values, same NaN, same offset) are imputed from the
        stored draws of their latents; other rows from latents inferred with the map fixed.
        """
        Y, data = self._prepare_new(Y, offset)
        if self._is_training_data(Y, data):
            data = self._data_
            Xs = jnp.asarray(self._draws_["X"])
            W, beta, nv, disp = self._map_draws()
        else:
            Xs = self._new_latents(Y, data)
            W, beta, nv, disp = self._map_draws(subset=True)
        mean = np.asarray(_per_draw_means(self, Xs, W, beta, nv, disp, data.offset,
                                          data.trials).mean(0))
        mean = widen(mean, kept_columns(self.Y_std_)) * self.Y_std_ + self.Y_mean_
        return np.where(np.isnan(Y), mean, Y)

    def _is_training_data(self, Y, data) -> bool:
        return (np.array_equal(Y, self._train_Y_, equal_nan=True)
                and np.array_equal(np.asarray(data.offset), np.asarray(self._data_.offset)))

    @in_model_precision
    def score(self, Y, y=None, *, offset=None):
        """Log pointwise predictive density of Y's observed entries, in the units of Y:
        Σ_i log of the mean over stored draws of p(y_i,obs | x_i*, map), with x_i* inferred
        per draw (map fixed)."""
        Y, data = self._prepare_new(Y, offset)
        Xs = self._new_latents(Y, data)
        W, beta, nv, disp = self._map_draws(subset=True)
        lp = pred.log_predictive_rows(self._spec_.likelihood, self._spec_.intercept, Xs,
                                      pred.MapParams(W, beta, nv, disp), pred.Rows.of(data))
        # Standardised Gaussian densities back to original units: −Σ log scale_j per entry
        # (of the kept columns: the dropped ones are not scored)
        kept = kept_columns(self.Y_std_)
        jac = np.sum(np.where(np.isnan(Y[:, kept]), 0.0, np.log(self.Y_std_[kept])))
        return float(lp) - float(jac)

    @in_model_precision
    def sample(self, n_samples: int = 1, X=None, random_state=None, n_trials=None):
        """Data from the posterior generative process: per row a stored draw s of the map,
        x ~ N(0, I) (or the given X), y ~ p(y | φ_{W_s}(x)β_s, θ_s).

        Returns:
            (Y (n, J) in the units of the data, X (n, Q) the latent points used).
        """
        check_argument("RFLVM", "n_samples", n_samples, POSITIVE_INT)
        if random_state is not None:
            check_argument("RFLVM", "random_state", random_state, RANDOM_STATE, "0")
        check_is_fitted(self, "X_mean_")
        key = as_key(self.random_state if random_state is None else random_state)
        k_draw, k_x, k_y = jax.random.split(key, 3)
        W, beta, nv, disp = self._map_draws()
        Q = int(self.n_components)
        kind = self._spec_.likelihood
        X = (jax.random.normal(k_x, (n_samples, Q)) if X is None
             else jnp.asarray(check_latent_points(X, Q)))
        s = jax.random.randint(k_draw, (X.shape[0],), 0, W.shape[0])
        psi = pred.linear_predictor_per_row(X, s, W, beta, self._spec_.intercept)
        kept = kept_columns(self.Y_std_)
        trials = (self._data_.trials[:1] if n_trials is None
                  else jnp.broadcast_to(jnp.asarray(narrow(n_trials, self.n_features_in_, kept),
                                                    float), psi.shape))
        if kind == "multinomial" and n_trials is None:
            trials = jnp.full_like(psi, jnp.round(jnp.mean(self._data_.trials[:, 0])))
        lik = likelihood_object(kind, jnp.broadcast_to(trials, psi.shape)
                                if kind != "multinomial" else trials[:, :1], nv[s], disp[s])
        Yn = np.asarray(lik.sample(k_y, psi))
        return widen(Yn, kept) * self.Y_std_ + self.Y_mean_, np.asarray(X)

    @property
    def dropped_columns_(self) -> np.ndarray:
        """Indices of the columns kept out of the fit (constant Gaussian columns, or columns
        with no observed entry); they come back on output as their constant (variance 0) or
        NaN (:mod:`gplvm.models.rflvm.columns`)."""
        check_is_fitted(self, "X_mean_")
        return np.flatnonzero(~kept_columns(self.Y_std_))

    def to_arviz(self):
        """ArviZ ``InferenceData`` with the log-likelihood, latent pairwise distances and the
        scalar parameters, per chain and draw (R-hat and ESS via ``arviz.summary``)."""
        check_is_fitted(self, "X_mean_")
        return inference_data(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True        # NaN marks a missing entry
        return tags

    @classmethod
    def _upgrade_fitted(cls, fitted: dict, format_version: int, params: dict | None = None) -> dict:
        """Attributes of a file saved by an earlier gplvm (:mod:`.legacy`)."""
        burn_in = (params or {}).get("burn_in", cls().burn_in)
        return upgrade_fitted(fitted, format_version, burn_in)


# --- helpers ------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=32)
def _sweep_for(spec: RFLVMSpec):
    """The per-chain sweep for ``spec``, one function object per spec (the driver caches its
    compiled blocks per function object)."""
    def one_sweep(key, carry):
        state, data, u = carry
        return rflvm_sweep(key, state, spec, data, u), data, u
    return one_sweep


def _per_chain(tree, n_chains: int):
    """Copies of ``tree``'s arrays along a leading chain axis, made on the host (on the device
    each leaf shape would compile a broadcast, again in every new process)."""
    return jax.tree_util.tree_map(
        lambda x: np.broadcast_to(np.asarray(to_device(x)), (n_chains,) + np.shape(x)), tree)


def _inducing_times(times, n):
    if times is None:
        return to_device(np.zeros(1, float_dtype()))
    t = np.asarray(times, float)
    return jnp.linspace(t.min(), t.max(), int(min(n, len(np.unique(t)))))


def _per_draw_means(model, Xs, W, beta, nv, disp, offset, trials=None):
    if trials is None:
        trials = jnp.ones((Xs.shape[1], model.n_outputs_))
    return pred.expected_y_per_draw(model._spec_.likelihood, model._spec_.intercept, Xs,
                                    pred.MapParams(W, beta, nv, disp), offset, trials)
