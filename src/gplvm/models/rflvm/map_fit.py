r"""The RFLVM's MAP fit: ``RFLVM(inference='map')`` (issue 30, item 2).

The mode of the same joint density the NUTS block samples (:func:`.joint.log_density`: the
latents X, the frequencies W where their prior has a density (held with
``frequencies='fixed'``), the whitened weights z and the
negative binomial's log r, with their priors), found by L-BFGS (:func:`.map_start.find_mode`;
for the count likelihoods in rounds, each preconditioned by the Laplace standard deviations
where it starts: :func:`_preconditioned_search`)
from each chain's jittered PCA start — the first step of the NUTS chains' start, without the
over-dispersed draw around it.  Each chain is one restart: the fit keeps every chain's mode as
that chain's single "draw", so ``transform``, ``impute``, ``score`` and ``sample`` run on the
modes, and chains whose modes differ (``mode_start_['log_density']``) show a multimodal
posterior that one optimisation would have hidden.  It is a fast point estimate, not a
posterior: ``X_var_`` is the spread between the restarts' aligned modes, not a posterior
variance.

Held at their starting values (the MAP is conditional on them): the DP mixture's assignments
of W (its prior given them), the negative binomial's rate h of r's prior.  For the **Gaussian**,
whose block density integrates β out given σ², the search alternates between the mode of (X, W)
given σ² and the conditional modes of σ² (the inverse-gamma's, b/(a + 1)) and β (A⁻¹ΦᵀY) given
(X, W), the missing entries of Y set to their conditional mean Φβ — coordinate ascent on the
joint density of (X, W, β, σ², missing Y) — until a round changes no σ_j² by more than
:data:`NOISE_TOLERANCE` (relative), at most :data:`GAUSSIAN_ROUNDS` rounds.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular
from sklearn.exceptions import ConvergenceWarning

from gplvm._pytree import to_device
from gplvm.inference.mcmc._block import Block
from gplvm.inference.mcmc._kept import ChainResult
from gplvm.models.rflvm.features import design
from gplvm.models.rflvm.fitted import record_heavy, record_light, trace
from gplvm.models.rflvm.joint import log_density, state_at, to_position
from gplvm.models.rflvm.map_start import (GRADIENT_TOLERANCE, ModeSearch, find_mode,
                                           laplace_precision)
from gplvm.models.rflvm.spec import RFLVMData, RFLVMSpec, RFLVMState
from gplvm.models.rflvm.sweep import current_log_lik, prior_W


#: Gaussian: at most this many rounds of (X, W) | σ², then σ², β | (X, W) ...
GAUSSIAN_ROUNDS = 50
#: ... until a round changes no σ_j² by more than this fraction
NOISE_TOLERANCE = 1e-4
#: Gaussian with missing entries: alternations of β and the missing entries per round
FILL_ITERATIONS = 200
#: ``converged_``: every coordinate's Newton step within this many Laplace standard deviations
SCALED_TOLERANCE = 0.1
#: the most L-BFGS iterations of each search (the chains' starts take fewer: they only
#: need to be near the mode)
MAP_ITERATIONS = 3000
#: the count likelihoods' search: rounds, each with its own diagonal preconditioner
MAP_ROUNDS = 3


def _gaussian_rest(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState) -> RFLVMState:
    """β, the missing entries and σ² at their conditional modes given (X, W): β = A⁻¹ΦᵀY and
    the missing entries Φβ at once — the fixed point of the two, reached by
    :data:`FILL_ITERATIONS` alternations (EM for ridge regression with missing responses,
    whose fixed point is each column's ridge fit on its observed rows) — then σ_j² the
    inverse-gamma's mode given the filled column."""
    Phi = design(state.X, state.W, False)
    A = Phi.T @ Phi + jnp.eye(Phi.shape[1], dtype=Phi.dtype) / spec.beta_prior_var
    L = jnp.linalg.cholesky(A)
    observed = data.observed > 0

    def mean(Y):
        v = solve_triangular(L, Phi.T @ Y, lower=True)
        return solve_triangular(L.T, v, lower=False)

    def fill(_, Y):
        return jnp.where(observed, data.Y, Phi @ mean(Y))

    Y = lax.cond(jnp.all(observed), lambda: data.Y,
                 lambda: lax.fori_loop(0, FILL_ITERATIONS, fill, state.Y_fill))
    beta = mean(Y)
    a0, b0 = spec.noise_prior
    resid = jnp.maximum(jnp.sum(Y**2, axis=0) - jnp.sum(Y * (Phi @ beta), axis=0), 0.0)
    noise_var = (b0 + 0.5 * resid) / (a0 + 0.5 * Y.shape[0] + 1.0)
    return state._replace(noise_var=noise_var, beta=beta, Y_fill=Y)


def mode_state(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState):
    """One chain's state moved to the mode of the joint density (module docstring), its
    ``log_lik`` the log-likelihood there.

    Returns:
        (state, :class:`.map_start.ModeSearch`, the largest |gradient| / √precision over the
        coordinates — how far, in Laplace standard deviations, a Newton step along each
        coordinate would still move: :data:`SCALED_TOLERANCE` decides ``converged_``).
    """
    # the posterior's own mode, not that of the NUTS block's density modulo rotations, which
    # carries the rotation's Jacobian (:mod:`.gauge`)
    spec = dataclasses.replace(spec, sampler="gibbs")
    # the frequencies' prior is a density given the DP state (the key draws nothing it uses)
    log_prior_W = prior_W(jax.random.PRNGKey(0), spec, data, state).total

    def search(state):
        fn = _block_density(spec, data, state, log_prior_W)
        found = find_mode(fn, to_position(spec, data, state), MAP_ITERATIONS)
        return state_at(spec, data, state, found.position), found

    if spec.collapsed:
        def gaussian_round(state):
            state, found = search(state)
            rested = _gaussian_rest(spec, data, state)
            change = jnp.max(jnp.abs(jnp.log(rested.noise_var) - jnp.log(state.noise_var)))
            return rested, found, change

        def cond(carry):
            return (carry[2] < GAUSSIAN_ROUNDS) & (carry[3] > NOISE_TOLERANCE)

        def body(carry):
            state, found, change = gaussian_round(carry[0])
            return state, found, carry[2] + 1, change

        state, found, change = gaussian_round(_gaussian_rest(spec, data, state))
        state, found, _, _ = lax.while_loop(cond, body, (state, found, 1, change))
    else:
        state, found = _preconditioned_search(spec, data, state, log_prior_W)
    precision = laplace_precision(spec, data, state, log_prior_W, found.position)
    gradient = jax.grad(_block_density(spec, data, state, log_prior_W))(found.position)
    scaled = jnp.max(jnp.abs(gradient) / jnp.sqrt(precision))
    return state._replace(log_lik=current_log_lik(spec, data, state)), found, scaled


def _preconditioned_search(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState, log_prior_W):
    """The count likelihoods' search: up to :data:`MAP_ROUNDS` rounds of at most
    :data:`MAP_ITERATIONS` / :data:`MAP_ROUNDS` L-BFGS iterations, until the gradient is within
    the search's tolerance; the first round plain, each later one in coordinates scaled by the
    Laplace standard deviations where it starts (:func:`.map_start.find_mode`'s ``scale``).
    The block's curvature spans orders of magnitude (bridges: counts in the thousands against
    N(0, 1) latents), which plain L-BFGS crosses slowly; the renewed preconditioner finishes
    the climb the plain round began.  (Preconditioned from the PCA start, every round, the
    search ended in worse modes on bridges under the negative binomial: the first round picks
    the basin; ``benchmarks/README.md``, issue 30's fifth stop.)"""
    fn = _block_density(spec, data, state, log_prior_W)
    iterations = MAP_ITERATIONS // MAP_ROUNDS

    def cond(carry):
        found, r = carry
        return (r < MAP_ROUNDS) & (found.max_gradient > GRADIENT_TOLERANCE)

    def body(carry):
        found, r = carry
        p = found.position
        scale = lax.cond(r == 0, lambda: jnp.ones_like(p),      # the first round plain
                         lambda: 1.0 / jnp.sqrt(laplace_precision(spec, data, state,
                                                                  log_prior_W, p)))
        new = find_mode(fn, p, iterations, scale)
        return new._replace(n_iterations=found.n_iterations + new.n_iterations), r + 1

    p0 = to_position(spec, data, state)     # (an infinite gradient: the first round runs)
    first = ModeSearch(p0, jnp.full((), -jnp.inf, p0.dtype), jnp.zeros((), jnp.int32),
                       jnp.full((), jnp.inf, p0.dtype))
    found, _ = lax.while_loop(cond, body, (first, jnp.zeros((), jnp.int32)))
    return state_at(spec, data, state, found.position), found


def _block_density(spec, data, state, log_prior_W):
    """:func:`.joint.log_density` given the state's W, σ², h (and filled Y: Gaussian)."""
    Y = state.Y_fill if spec.collapsed else None
    return log_density(spec, data, state.W, state.noise_var, state.dispersion_rate, Y,
                       log_prior_W)


def mode_states(spec: RFLVMSpec, data: RFLVMData, states: RFLVMState):
    """:func:`mode_state` for every chain (leading chain axis), one after the other, as one
    program kept across processes like the sampler's block.

    Returns:
        (states, :class:`.map_start.ModeSearch` and the scaled gradients, leading chain axis).
    """
    args = to_device((data, states))
    program, _ = _mode_block(spec).compile(*args)
    return program(*args)


@functools.lru_cache(maxsize=8)
def _mode_block(spec: RFLVMSpec) -> Block:
    def modes(data, states):
        return lax.map(lambda s: mode_state(spec, data, s), states)
    return Block(jax.jit(modes), export_key=spec.export_key("MAP "))


def map_result(spec: RFLVMSpec, data: RFLVMData, init) -> tuple:
    """The MAP fit as the chain driver's result: every chain's mode its one kept draw, no
    sweep done (``n_done`` 0); ``init`` the chains' carry (states, data, inducing times),
    leading chain axis, as :func:`gplvm.inference.mcmc.run_chains` takes it.

    Returns:
        (:class:`gplvm.inference.mcmc.ChainResult`, dict of (chains,) arrays: ``log_density``
        at the mode, ``n_iterations`` of L-BFGS, ``max_gradient`` and ``max_scaled_gradient``
        (:func:`mode_state`) left there).
    """
    states, found, scaled = mode_states(spec, data, init[0])
    carry = (states, *init[1:])

    def one(record):         # (chains, 1, ...): the mode as each chain's single draw
        return {k: np.asarray(v)[:, None] for k, v in jax.vmap(record)((states,)).items()}

    result = ChainResult(state=carry, draws=one(record_light), heavy=one(record_heavy),
                         trace=one(trace), n_done=0, interrupted=False, thin_heavy=1)
    report = {k: np.asarray(v) for k, v in found._asdict().items() if k != "position"}
    return result, {**report, "max_scaled_gradient": np.asarray(scaled)}


def modes_converged(mode_start: dict, quiet: bool) -> bool:
    """``converged_`` of ``inference='map'``: every mode search within
    :data:`SCALED_TOLERANCE` Laplace standard deviations of a stationary point along every
    coordinate (``mode_start``: :func:`map_result`'s report); a ``ConvergenceWarning`` when not,
    unless ``quiet``."""
    worst = float(np.max(mode_start["max_scaled_gradient"]))
    if worst > SCALED_TOLERANCE and not quiet:
        warnings.warn(f"RFLVM(inference='map'): L-BFGS stopped {worst:.3g} Laplace standard "
                      f"deviations from a stationary point along some coordinate (tolerance "
                      f"{SCALED_TOLERANCE}); converged_ is False: the modes are approximate",
                      ConvergenceWarning, stacklevel=6)
    return bool(worst <= SCALED_TOLERANCE)


__all__ = ["GAUSSIAN_ROUNDS", "SCALED_TOLERANCE", "ModeSearch", "map_result", "mode_state",
           "mode_states", "modes_converged"]
