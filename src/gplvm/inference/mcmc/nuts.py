r"""One NUTS transition per sweep, with its step size and diagonal mass matrix adapted in burn-in.

The transition itself is blackjax's iterative NUTS (Hoffman & Gelman 2014, with multinomial
sampling along the trajectory, Betancourt 2017); this module only carries what blackjax's
``window_adaptation`` keeps in its own loop, so that the adaptation can live inside a Gibbs
sweep whose other blocks (the frequencies, the DP mixture) change the target between two NUTS
transitions.  The schedule is Stan's (Stan Reference Manual, "HMC algorithm parameters",
§15.2), in sweeps of the burn-in B:

1. sweeps [0, B): the log step size follows dual averaging towards the target acceptance
   rate (Hoffman & Gelman 2014, §3.2.1; blackjax ``dual_averaging_adaptation``);
2. sweeps [B/10, 3B/10) and [3B/10, 8B/10): Welford estimates of each coordinate's variance
   (blackjax ``welford_algorithm``); at the end of each window the inverse mass matrix
   becomes that variance, shrunk towards 10⁻³ as Stan does ((n/(n+5))·var + 10⁻³·5/(n+5)),
   and dual averaging restarts from the current step size;
3. at sweep B − 1 the step size is fixed at dual averaging's running average, and nothing
   changes after burn-in — so the kept sweeps are draws of one fixed, valid kernel.

With B = 0 nothing adapts: the kernel is NUTS at the initial step size and unit mass, which
is what a Geweke test checks.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gplvm.registry import register

Array = jax.Array

#: Stan's default target of the mean acceptance statistic during adaptation
TARGET_ACCEPT = 0.8


@register("gplvm.state.NUTSTuning")      # a NUTS fit's chain states are saved with it
class NUTSTuning(NamedTuple):
    """The adaptation state carried from sweep to sweep (strong dtypes: the sweep's output
    must have its input's types, or the compiled loop would compile twice).

    Attributes:
        step_size: () the step size of the next transition.
        inverse_mass: (n,) the diagonal inverse mass matrix.
        log_step: (), log_step_avg (), n_da (int32 ()), avg_error (), mu (): dual averaging
            (blackjax ``DualAveragingState``).
        mean (n,), m2 (n,), n_welford (int32 ()): Welford's running moments.
        accept: () the last transition's mean acceptance statistic (diagnostic).
        n_steps: () the last transition's number of leapfrog steps (diagnostic).
        burn_in: (int32 ()) B, the sweeps of the schedule: data, not a static setting, so
            that fits with another burn-in reuse the compiled sweep.
    """

    step_size: Array
    inverse_mass: Array
    log_step: Array
    log_step_avg: Array
    n_da: Array
    avg_error: Array
    mu: Array
    mean: Array
    m2: Array
    n_welford: Array
    accept: Array
    n_steps: Array
    burn_in: Array


def tuning_init(n_dims: int, step_size: float, dtype, burn_in: int = 0) -> NUTSTuning:
    """Unit mass, ``step_size``, dual averaging started there (μ = log(10 ε₀)), the schedule
    of a burn-in of ``burn_in`` sweeps."""
    eps = jnp.asarray(step_size, dtype)
    return _restart_dual_averaging(NUTSTuning(
        step_size=eps, inverse_mass=jnp.ones(n_dims, dtype), log_step=jnp.log(eps),
        log_step_avg=jnp.zeros((), dtype), n_da=jnp.ones((), jnp.int32),
        avg_error=jnp.zeros((), dtype), mu=jnp.log(10.0 * eps), mean=jnp.zeros(n_dims, dtype),
        m2=jnp.zeros(n_dims, dtype), n_welford=jnp.zeros((), jnp.int32),
        accept=jnp.zeros((), dtype), n_steps=jnp.zeros((), dtype),
        burn_in=jnp.asarray(burn_in, jnp.int32)), eps)


def _restart_dual_averaging(t: NUTSTuning, eps: Array) -> NUTSTuning:
    return t._replace(step_size=eps, log_step=jnp.log(eps), log_step_avg=jnp.zeros_like(eps),
                      n_da=jnp.ones((), jnp.int32), avg_error=jnp.zeros_like(eps),
                      mu=jnp.log(10.0 * eps))


def _dual_averaging(t: NUTSTuning, accept: Array, t0: float = 10.0, gamma: float = 0.05,
                    kappa: float = 0.75) -> NUTSTuning:
    """One update of Hoffman & Gelman (2014), Algorithm 5 (blackjax ``dual_averaging``)."""
    n = t.n_da.astype(t.log_step.dtype)
    avg_error = (1.0 - 1.0 / (n + t0)) * t.avg_error + (TARGET_ACCEPT - accept) / (n + t0)
    log_step = t.mu - jnp.sqrt(n) / gamma * avg_error
    eta = n ** (-kappa)
    log_step_avg = eta * log_step + (1.0 - eta) * t.log_step_avg
    return t._replace(log_step=log_step, log_step_avg=log_step_avg, n_da=t.n_da + 1,
                      avg_error=avg_error, step_size=jnp.exp(log_step))


def _welford(t: NUTSTuning, x: Array) -> NUTSTuning:
    n = t.n_welford + 1
    delta = x - t.mean
    mean = t.mean + delta / n.astype(x.dtype)
    return t._replace(mean=mean, m2=t.m2 + delta * (x - mean), n_welford=n)


def _end_window(t: NUTSTuning) -> NUTSTuning:
    """The window's variance as the inverse mass matrix (Stan's shrinkage), moments reset,
    dual averaging restarted from the current step size."""
    n = t.n_welford.astype(t.m2.dtype)
    var = t.m2 / jnp.maximum(n - 1.0, 1.0)
    inverse_mass = (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))
    t = t._replace(inverse_mass=inverse_mass, mean=jnp.zeros_like(t.mean),
                   m2=jnp.zeros_like(t.m2), n_welford=jnp.zeros_like(t.n_welford))
    return _restart_dual_averaging(t, t.step_size)


def windows(burn_in):
    """(start, middle, end) sweeps of the two mass-matrix windows for a burn-in of B sweeps."""
    return burn_in // 10, 3 * burn_in // 10, 8 * burn_in // 10


def adapt(t: NUTSTuning, position: Array, accept: Array, sweep: Array) -> NUTSTuning:
    """The tuning after sweep ``sweep`` (0-based) has drawn ``position`` with mean acceptance
    statistic ``accept``; see the module docstring for the schedule (B = ``t.burn_in``)."""
    burn_in = t.burn_in
    start, middle, end = windows(burn_in)
    in_burn = sweep < burn_in
    t = lax.cond(in_burn, lambda: _dual_averaging(t, accept), lambda: t)
    t = lax.cond(in_burn & (sweep >= start) & (sweep < end), lambda: _welford(t, position),
                 lambda: t)
    closes = in_burn & ((sweep == middle - 1) | (sweep == end - 1)) & (middle > start)
    t = lax.cond(closes, lambda: _end_window(t), lambda: t)
    # the last burn-in sweep fixes the step size at dual averaging's average
    return lax.cond(sweep == burn_in - 1,
                    lambda: t._replace(step_size=jnp.exp(t.log_step_avg)), lambda: t)


def nuts_transition(key: Array, position: Array, logdensity_fn: Callable[[Array], Array],
                    tuning: NUTSTuning, max_doublings: int):
    """One blackjax NUTS transition from ``position`` (a flat vector) at the tuning's step size
    and inverse mass matrix.

    Returns:
        (new position, its log-density, mean acceptance statistic, leapfrog steps,
        divergent?).
    """
    from blackjax.mcmc import hmc, nuts   # imported on first use: ~0.3 s at `import gplvm`

    state = hmc.init(position, logdensity_fn)
    kernel = nuts.build_kernel()
    new, info = kernel(key, state, logdensity_fn, tuning.step_size, tuning.inverse_mass,
                       max_num_doublings=max_doublings)
    return (new.position, new.logdensity, info.acceptance_rate.astype(position.dtype),
            info.num_integration_steps.astype(position.dtype), info.is_divergent)
