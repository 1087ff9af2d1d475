"""The RFLVM's run: the sampler's spec from the constructor arguments; the chains sampled by
the driver (:func:`gplvm.inference.mcmc.run_chains`) over ``n_iter`` sweeps, or with
``n_iter='auto'`` in rounds until the convergence rule holds (:mod:`.convergence`); the
checkpoint writes during a run; the fitted attributes set from the driver's result (aligned
draws, traces, per-column figures) and the convergence check; the ``inference='map'`` fit
(:mod:`.map_fit`) and the NUTS chains' start (:mod:`.map_start`).  A mixin of
:class:`gplvm.RFLVM`, so that its module keeps to the estimator."""

from __future__ import annotations

import functools
import time
import warnings

import jax
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from gplvm._validation import kept_columns
from gplvm.inference.mcmc import Execution, Keep, Report, Sweeps, run_chains, split_rhat
from gplvm.inference.mcmc.driver import concat_results
from gplvm.inference.run import CheckpointTimer
from gplvm.io.legacy.rflvm import current_layouts
from gplvm.likelihoods import likelihood_class
from gplvm.models._checkpoint import holding_checkpoint
from gplvm.models.rflvm.checks import warn_short_adaptation
from gplvm.models.rflvm.columns import widen
from gplvm.models.rflvm.convergence import (RHAT_TARGET, convergence_figures, describe,
                                             describe_modes, describe_pace, describe_shortfall,
                                             describe_transit, has_converged)
from gplvm.models.rflvm.fitted import (aligned_draws, last_states, record_heavy, record_light,
                                       trace)
from gplvm.models.rflvm.map_fit import map_result, modes_converged
from gplvm.models.rflvm.map_start import start_chains
from gplvm.models.rflvm.spec import RFLVMSpec
from gplvm.models.rflvm.sweep import sweep as rflvm_sweep

#: ``n_iter='auto'``: the fewest sweeps of a round after burn-in
AUTO_ROUND = 100


class RFLVMRun:
    """The sampler's spec from the constructor arguments (``_spec``, ``_map_sweeps``,
    ``_auto``); ``_sample`` / ``_run`` from a chain start (``fit``) or from the stored chain
    states (``resume``, ``_unfinished``), ``_fit_map``, ``_start_nuts``, ``_checkpoint_writer``,
    ``_set_fitted`` and ``_check_convergence``; the estimator has ``_spec_``, ``_data_``,
    ``_key_run_`` (set by ``fit``), ``Y_std_``, ``save`` and the constructor arguments."""

    def _spec(self, kind: str, n_outputs: int, dynamic: bool) -> RFLVMSpec:
        return RFLVMSpec(likelihood=kind, n_components=int(self.n_components),
                         n_freq=int(self.n_features) // 2, n_outputs=n_outputs,
                         intercept=not likelihood_class(kind).conjugate_normal,
                         learn_kernel=bool(self.learn_kernel),
                         dynamic=dynamic, beta_prior_var=float(self.beta_prior_var),
                         intercept_prior_var=float(self.intercept_prior_var),
                         n_x_steps=int(self.x_steps), map_sweeps=self._map_sweeps(),
                         nb_beta=str(self.nb_beta), frequencies=str(self.frequencies),
                         dp_components=str(getattr(self, "dp_components", "drawn")),
                         # a MAP fit runs no sampler: its states carry no NUTS adaptation
                         sampler="gibbs" if self.inference == "map" else str(self.sampler))

    def _map_sweeps(self) -> int:
        if self.map_sweeps == "auto" and self.sampler == "nuts":
            return 0     # NUTS adapts from the start; uphill sweeps would disturb adaptation
        if self.map_sweeps == "auto":
            return int(self.burn_in) // 2
        return int(self.map_sweeps)

    def _auto(self) -> bool:
        return isinstance(self.n_iter, str) and self.n_iter == "auto"

    def _round_length(self) -> int:
        """Sweeps per round of ``n_iter='auto'`` after the burn-in: max(burn_in, 100)."""
        return max(int(self.burn_in), AUTO_ROUND)

    def _at_check(self, n_done: int) -> bool:
        """Whether ``n_iter='auto'`` applies its rule after ``n_done`` sweeps: at the end of a
        round (``burn_in`` + k · :meth:`_round_length`) or at ``max_iter``, never where a
        budget or Ctrl-C stopped the run in the middle of one, so that a resumed run is judged
        where an unstopped one is."""
        burn_in = int(self.burn_in)
        return n_done >= int(self.max_iter) or (
            n_done > burn_in and (n_done - burn_in) % self._round_length() == 0)

    def _unfinished(self):
        """The stored run that :meth:`resume` continues, laid out as today's (a file saved
        before the CRT layout changed carries the old one), or None when nothing is left:
        ``inference='map'``, ``n_iter`` sweeps done, or with ``n_iter='auto'`` converged (not
        interrupted) or ``max_iter`` sweeps done.  A run that stopped on ``max_time`` goes on,
        its budget counted again from the resume."""
        if self.inference == "map":          # nothing to continue: the modes are the fit
            return None
        for name, value in current_layouts(
                {"_spec_": self._spec_, "_data_": self._data_, "_result_": self._result_}).items():
            setattr(self, name, value)
        earlier = self._result_
        done = (earlier.n_done >= self.max_iter or (self.converged_ and not self.interrupted_)
                if self._auto() else earlier.n_done >= self.n_iter)
        return None if done else earlier

    @holding_checkpoint
    def _fit_map(self, init):
        """``inference='map'`` (:mod:`gplvm.models.rflvm.map_fit`): the chains' modes as the
        fitted draws (``converged_``: :meth:`_check_convergence`)."""
        result, self.mode_start_ = map_result(self._spec_, self._data_, init)
        self._set_fitted(result)
        if self.checkpoint is not None:
            self.save(self.checkpoint)
        return self

    def _start_nuts(self, states, key_init):
        """``sampler='nuts'``: the chains' states with the block's adaptation over the burn-in,
        from over-dispersed draws around its mode (:func:`.start_chains`); sets ``mode_start_``."""
        warn_short_adaptation(int(self.burn_in))
        states = states._replace(tuning=states.tuning._replace(
            burn_in=np.full(self.n_chains, int(self.burn_in), np.int32)))
        keys_start = jax.random.split(jax.random.fold_in(key_init, 1), self.n_chains)
        states, search, _ = start_chains(keys_start, self._spec_, self._data_, states)
        self.mode_start_ = {k: np.asarray(v) for k, v in search._asdict().items()
                            if k != "position"}
        return states

    def _row_mesh(self):
        """The mesh each chain is split over by rows, or None (``devices``)."""
        if self.devices is None:
            return None
        from gplvm.inference.sharding import make_mesh   # jax.sharding only when asked
        return make_mesh(self.devices)

    def _sample(self, init, start: int, earlier, started: float | None = None):
        """``n_iter`` sweeps, or with ``n_iter='auto'`` rounds until converged (see ``n_iter``);
        each round continues the chains exactly as :meth:`resume` does.  ``started``: the
        ``time.perf_counter()`` from which ``max_time`` counts (``fit``'s start; by default
        now, as in ``resume``)."""
        if not self._auto():
            return self._run(init, start, earlier, int(self.n_iter))
        started = time.perf_counter() if started is None else started
        deadline = None if self.max_time is None else started + float(self.max_time)
        max_iter, burn_in = int(self.max_iter), int(self.burn_in)
        round_length = self._round_length()
        # rounds end at burn_in + k·round whatever the start, so a resumed run checks (and
        # stops) where an uninterrupted one does
        target = burn_in + round_length * (max(start - burn_in, 0) // round_length + 1)
        desc, paces = None, []    # seconds per sweep, each round (the first compiles)
        while True:
            target, round_started = min(target, max_iter), time.perf_counter()
            self._run(init, start, earlier, target, quiet=True, desc=desc, deadline=deadline)
            paces.append((time.perf_counter() - round_started) / max(self.n_iter_ - start, 1))
            pace = min(paces[1:], default=None)      # the fastest round's after the first
            if self.interrupted_ or self.converged_ or self.n_iter_ >= max_iter:
                break
            if self.n_iter_ < target or (deadline is not None
                                         and time.perf_counter() > deadline):
                break                # the driver stopped within this round, or it ended late
            earlier = self._result_
            init, start = earlier.state, int(earlier.n_done)
            desc = ", ".join(filter(None, (describe(self.convergence_), describe_pace(
                self.convergence_, int(self.ess_target), pace))))
            target += round_length
        if not self.converged_ and not self.interrupted_:
            warnings.warn(self._not_converged(time.perf_counter() - started, pace),
                          ConvergenceWarning, stacklevel=3)
        return self

    def _not_converged(self, elapsed: float, pace: float | None) -> str:
        """The warning of an ``n_iter='auto'`` run out of sweeps or time; ``pace``: seconds per
        sweep of its fastest round after the first, or None (:func:`.describe_pace`)."""
        figures = (f"{describe(self.convergence_)} for the log-likelihood / the worst latent "
                   f"distance; the targets are R-hat <= {RHAT_TARGET} and ESS >= "
                   f"{self.ess_target}")
        if self.n_iter_ <= int(self.burn_in):
            figures += ("; still in burn-in: the model holds each chain's last state, not "
                        "posterior draws")
        kept = self.history_[:, int(self.burn_in):]
        figures += describe_shortfall(self.convergence_, kept, int(self.ess_target), pace)
        if self.n_iter_ >= int(self.max_iter):
            return (f"RFLVM: not converged after max_iter={int(self.max_iter)} sweeps per "
                    f"chain ({figures}); converged_ is False: raise max_iter, or resume() "
                    f"after raising it")
        return (f"RFLVM: not converged within max_time={self.max_time:g} s: {elapsed:.0f} s "
                f"of wall time, {self.n_iter_} sweeps per chain ({figures}); converged_ is "
                f"False: raise max_time, or resume() to run up to max_time seconds more")

    @holding_checkpoint
    def _run(self, init, start: int, earlier, n_iter: int, quiet: bool = False,
             desc: str | None = None, deadline: float | None = None):
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
                export_key=spec.export_key(""),   # the spec fixes the sweep and the records
                deadline=deadline),
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
        if np.asarray(draws["X"]).shape[1] == 0:
            if not quiet:
                warnings.warn("the fit was interrupted during burn-in: the model holds the "
                              "last state of each chain, not posterior draws", RuntimeWarning,
                              stacklevel=3)
            draws = last_states(record_light, result.state)
        if np.asarray(heavy["W"]).shape[1] == 0:
            heavy = last_states(record_heavy, result.state)
        self.X_samples_, self.X_mean_, self._draws_ = aligned_draws(draws, heavy)
        self.X_var_ = np.var(self.X_samples_.reshape(-1, *self.X_samples_.shape[2:]), axis=0)
        self.W_samples_ = self._draws_["W"]
        # per-column figures over all D columns; the draws (``_draws_``) are the kept columns'
        kept = kept_columns(self.Y_std_)
        self.beta_samples_ = widen(self._draws_["beta"], kept)
        spec = self._spec_
        nv = widen(self._draws_["noise_var"].mean(0), kept)       # · Y_std_²: 0, or NaN
        self.noise_var_ = nv * self.Y_std_**2 if spec.collapsed else None
        self.dispersion_ = (widen(self._draws_["dispersion"].mean(0), kept, np.nan)
                            if spec.dispersed else None)
        self.relevance_ = np.mean(self._draws_["W"] ** 2, axis=(0, 1))
        self._check_convergence(quiet or self.interrupted_)

    def _check_convergence(self, quiet: bool) -> None:
        """``convergence_`` (:func:`.convergence_figures`) and ``converged_``: with
        ``n_iter='auto'`` its rule (:func:`.has_converged`); with ``inference='map'`` every
        mode search within :data:`~gplvm.models.rflvm.map_fit.SCALED_TOLERANCE` Laplace sds
        of a stationary point; else split R-hat (Gelman et al. 2013, §11.4) of the
        log-likelihood after burn-in below 1.1; a ``ConvergenceWarning`` when it is not."""
        if self.inference == "map":    # no chains to diagnose: the mode searches' own test
            self.convergence_ = convergence_figures(self.history_[:, :0], self.X_samples_[:, :0])
            self.converged_ = modes_converged(self.mode_start_, quiet)
            return
        kept_trace = self.history_[:, self.burn_in:]
        self.convergence_ = convergence_figures(kept_trace, self.X_samples_)
        if self._auto():
            self.converged_ = (self._at_check(self.n_iter_)
                               and has_converged(self.convergence_, int(self.ess_target)))
            return                      # :meth:`_sample` warns once the rounds have ended
        rhat = split_rhat(kept_trace) if kept_trace.shape[1] >= 4 else float("nan")
        self.converged_ = bool(rhat < 1.1)
        if not self.converged_ and not quiet:
            why = (f"the split R-hat of the log-likelihood after burn-in is {rhat:.3g}"
                   if np.isfinite(rhat) else
                   f"{kept_trace.shape[1]} sweeps after burn-in are too few to compute R-hat")
            modes = describe_modes(kept_trace)
            fix = modes or (describe_transit(kept_trace)
                            + "; run more sweeps (n_iter, burn_in) or more chains")
            warnings.warn(f"RFLVM: {why} (converged_ is False){fix}",
                          ConvergenceWarning, stacklevel=5)


@functools.lru_cache(maxsize=32)
def _sweep_for(spec: RFLVMSpec):
    """The per-chain sweep for ``spec``, one function object per spec (the driver caches its
    compiled blocks per function object)."""
    def one_sweep(key, carry):
        state, data, u = carry
        return rflvm_sweep(key, state, spec, data, u), data, u
    return one_sweep
