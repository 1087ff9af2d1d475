r"""Where the NUTS chains start: the mode of the joint block given W, and its curvature
(issue 30, item 2).

From the PCA start the NUTS block (:mod:`.joint`) first has to travel to where the posterior
is, and a burn-in of a few hundred transitions spends much of itself in transit (split R-hat
1.3 on the S-curve's latent distances after 200 adapted transitions).  Each chain therefore
starts from

1. the mode of the block's log-density (:func:`.joint.log_density`; given the DP state, and
   given W where W is not in the block), found by L-BFGS (``optax.lbfgs``, zoom line search) from the chain's jittered PCA start;
2. the diagonal d of the negative Hessian there, computed exactly with a handful of
   Hessian-vector products (:func:`curvature_diagonal`): the Laplace approximation's
   per-coordinate precisions.  1/d is the first inverse mass matrix, so the first transitions
   are already well scaled (the windows of :mod:`gplvm.inference.mcmc.nuts` replace it with
   the chain's own variances later in the burn-in);
3. an over-dispersed draw around the mode: mode + c·d^(-1/2)·ε, ε ~ N(0, I), c =
   :data:`OVERDISPERSION`, so that split R-hat can still detect chains that do not meet
   (Gelman & Rubin 1992 ask for starts over-dispersed relative to the posterior).

The start changes where the chains begin, not the kernel: the NUTS transitions that follow
leave the same posterior invariant (the Geweke tests of :mod:`tests.test_rflvm_geweke`).

**Why a handful of Hessian-vector products is exact.**  Given W, the rows of X are independent
in the count likelihoods (ψ_n· depends on x_n only, the N(0, I) prior factorises), so the
Hessian has no entry between x_nq and x_mq for n ≠ m; a tangent that is 1 on column q of every
row therefore gives, coordinate by coordinate, the diagonal entries of that column.  Likewise
the columns of β are independent given X and W (the outputs of every count likelihood but the
multinomial are), so one tangent per row p of z, and one for all of log r, cover those blocks.
The frequencies, where they are in the position (:func:`.joint.has_frequencies`), share every
row's features and get one tangent per coordinate: Q + (M/2)Q + P (+ 1) products in all.  The intercept's centring
(:mod:`.joint`) couples the rows through m(X), by terms of order 1/N; the curvature is taken
with m held at the mode's value, which makes the rows independent again (``centre`` of
:func:`.joint.log_density`).  For
the multinomial (outputs coupled through the softmax) the z-block's figures are the row sums
of each P-row's D × D block, an approximation; floors keep every precision at least the
prior's for X and z (:func:`curvature_diagonal`).  For the Gaussian, whose block density
integrates β out and so couples the rows, the curvature is taken from the uncollapsed density
at β's conditional mean, which factorises over rows again (:func:`gaussian_row_density`).
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.scipy.linalg import solve_triangular

from gplvm._pytree import to_device
from gplvm.inference.mcmc._block import Block
from gplvm.models.rflvm.features import design
from gplvm.models.rflvm.joint import (_feature_means, from_position,
                                       has_frequencies, log_density, n_frequency_coords,
                                       n_position, state_at, to_position)
from gplvm.models.rflvm.loglik import total_log_lik
from gplvm.models.rflvm.spec import RFLVMData, RFLVMSpec, RFLVMState
from gplvm.models.rflvm.sweep import prior_W
from gplvm.models.rflvm.weights import collapsed_terms

Array = jax.Array

#: the most L-BFGS iterations of the mode search (each a gradient and its line search)
MAX_ITERATIONS = 300
#: the search stops when no coordinate's gradient exceeds this (in units of the log-density)
GRADIENT_TOLERANCE = 1e-3
#: the start's spread around the mode, in Laplace standard deviations
OVERDISPERSION = 2.0
#: the least precision of W's and log r's coordinates (a standard deviation of at most 10)
SMALL_FLOOR = 1e-2


class ModeSearch(NamedTuple):
    """What the mode search reports per chain.

    Attributes:
        position: the mode found (flat, :func:`.joint.to_position`).
        log_density: the block's log-density there.
        n_iterations: (int32) L-BFGS iterations used.
        max_gradient: the largest |gradient| coordinate at the last iterate.
    """

    position: Array
    log_density: Array
    n_iterations: Array
    max_gradient: Array


def find_mode(fn: Callable[[Array], Array], position: Array,
              max_iterations: int = MAX_ITERATIONS, scale: Array | None = None) -> ModeSearch:
    """Maximise ``fn`` from ``position`` by L-BFGS until every |gradient| coordinate is at most
    :data:`GRADIENT_TOLERANCE` or ``max_iterations`` have run; a step to a non-finite point
    ends the search at the last finite one.  ``max_iterations`` ≥ 1: the value and gradient
    returned are the last iteration's own.

    With ``scale`` (positive, the position's shape) the search runs in the coordinates
    u = (p − position)/scale — a diagonal preconditioner, e.g. the Laplace standard deviations
    — and its tolerance and the result (position, gradient) are still in p's."""
    if max_iterations < 1:
        raise ValueError(f"find_mode needs max_iterations >= 1; got {max_iterations}")
    if scale is not None:
        found = _lbfgs(lambda u: fn(position + scale * u), jnp.zeros_like(position),
                       max_iterations, 1.0 / scale)       # ∂fn/∂p = (∂fn/∂u) / scale
        return found._replace(position=position + scale * found.position)
    return _lbfgs(fn, position, max_iterations, 1.0)


def _lbfgs(fn: Callable[[Array], Array], position: Array, max_iterations: int,
           gradient_scale) -> ModeSearch:
    """:func:`find_mode`'s search; ``gradient_scale`` maps the gradient in the search's
    coordinates to the caller's (the tolerance and the reported gradient are the caller's)."""
    optimizer = optax.lbfgs()

    def loss(p):
        return -fn(p)

    value_and_grad = optax.value_and_grad_from_state(loss)

    def cond(carry):
        _, _, i, g_max, ok, _ = carry
        return (i < max_iterations) & (g_max > GRADIENT_TOLERANCE) & ok

    def body(carry):
        p, state, i, _, _, _ = carry
        value, grad = value_and_grad(p, state=state)
        updates, new_state = optimizer.update(grad, state, p, value=value, grad=grad,
                                              value_fn=loss)
        new = optax.apply_updates(p, updates)
        new_grad = optax.tree_utils.tree_get(new_state, "grad")   # the line search's, at new
        ok = jnp.all(jnp.isfinite(new)) & jnp.all(jnp.isfinite(new_grad))
        p = jnp.where(ok, new, p)
        state = jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), new_state, state)
        g_max = jnp.where(ok, jnp.max(jnp.abs(new_grad * gradient_scale)),
                          jnp.max(jnp.abs(grad * gradient_scale)))
        value = jnp.where(ok, optax.tree_utils.tree_get(new_state, "value"), value)
        return p, state, i + 1, g_max, ok, value

    init = (position, optimizer.init(position), jnp.zeros((), jnp.int32),
            jnp.full((), jnp.inf, position.dtype), jnp.asarray(True),
            jnp.zeros((), position.dtype))
    p, _, n, g_max, _, value = lax.while_loop(cond, body, init)
    # −fn and its largest |gradient| coordinate at p are the last iteration's own (the line
    # search's at an accepted step, the iteration's start at a refused one): not evaluated
    # again after the loop, a copy of the gradient that was ~15% of this program's compile
    # (issue 30; the same numbers, checked bit for bit)
    return ModeSearch(p, -value, n, g_max)


def _tangents(spec: RFLVMSpec, data: RFLVMData, dtype) -> Array:
    """(K, n) 0/1 tangents, each coordinate of the flat position in exactly one of them:
    one per latent dimension q (column q of every row), one per coordinate of W (the
    frequencies share every row's features, so they are coupled to each other), one per row
    p of z (all outputs), one for all of log r (see the module docstring)."""
    N, Q = data.Y.shape[0], spec.n_components
    n = n_position(spec, data)
    x_part = jnp.eye(Q, dtype=dtype)[:, None, :] * jnp.ones((1, N, 1), dtype)     # (Q, N, Q)
    rows = [jnp.zeros((Q, n), dtype).at[:, :N * Q].set(x_part.reshape(Q, N * Q))]
    start = N * Q
    if has_frequencies(spec, data):
        n_w = n_frequency_coords(spec, data)
        rows.append(jnp.zeros((n_w, n), dtype).at[:, start:start + n_w].set(
            jnp.eye(n_w, dtype=dtype)))
        start += n_w
    if not spec.collapsed:
        P, D = spec.n_weights, spec.n_outputs
        z_part = jnp.eye(P, dtype=dtype)[:, :, None] * jnp.ones((1, 1, D), dtype)  # (P, P, D)
        rows.append(jnp.zeros((P, n), dtype).at[:, start:start + P * D].set(
            z_part.reshape(P, P * D)))
        if spec.dispersed:
            rows.append(jnp.zeros((1, n), dtype).at[:, start + P * D:].set(1.0))
    return jnp.concatenate(rows)


def curvature_diagonal(spec: RFLVMSpec, data: RFLVMData, fn: Callable[[Array], Array],
                       position: Array) -> Array:
    """The diagonal of −∇²fn at ``position`` by Hessian-vector products along
    :func:`_tangents` (exact where the module docstring says), floored at the prior's
    precision for X and z (1) and at :data:`SMALL_FLOOR` for W and log r."""
    tangents = _tangents(spec, data, position.dtype)
    grad = jax.grad(fn)

    def hvp(v):
        return jax.jvp(grad, (position,), (v,))[1]

    diagonal = -jnp.sum(tangents * lax.map(hvp, tangents), axis=0)
    floor = _floors(spec, data, position.dtype)
    return jnp.maximum(jnp.where(jnp.isfinite(diagonal), diagonal, floor), floor)


def _floors(spec: RFLVMSpec, data: RFLVMData, dtype) -> Array:
    """1 on X and z (their N(0, 1) priors' precision), :data:`SMALL_FLOOR` on W and log r."""
    N, Q = data.Y.shape[0], spec.n_components
    parts = [jnp.ones(N * Q, dtype)]
    if has_frequencies(spec, data):
        parts.append(jnp.full(n_frequency_coords(spec, data), SMALL_FLOOR, dtype))
    if not spec.collapsed:
        parts.append(jnp.ones(spec.n_weights * spec.n_outputs, dtype))
        if spec.dispersed:
            parts.append(jnp.full(spec.n_outputs, SMALL_FLOOR, dtype))
    return jnp.concatenate(parts)


def gaussian_row_density(spec: RFLVMSpec, data: RFLVMData, W: Array, noise_var: Array,
                         Y: Array, position_hat: Array,
                         log_prior_W=None) -> Callable[[Array], Array]:
    """The uncollapsed Gaussian density of the position (X, and W when it is in it),
    log N(Y | Φβ̂, σ²) − ½‖X‖² (+ Σ_m log p(w_m)), β̂ = A⁻¹ΦᵀY the weights' conditional mean at
    ``position_hat`` (:mod:`.weights`): it factorises over the rows of X given W, so its
    curvature stands in for the collapsed one's (module docstring)."""
    X_hat, W_hat, _, _ = from_position(spec, data, position_hat, W)
    W_hat = W if W_hat is None else W_hat
    Phi = design(X_hat, W_hat, False)
    terms = collapsed_terms(Phi.T @ Phi, Phi.T @ Y, spec.beta_prior_var)
    beta = solve_triangular(terms.L.T, terms.v, lower=False)
    def density(position):
        X, W_pos, _, _ = from_position(spec, data, position, W)
        log_prior = 0.0 if W_pos is None else log_prior_W(W_pos)
        psi = design(X, W if W_pos is None else W_pos, False) @ beta
        ones = jnp.ones_like(noise_var)
        return (total_log_lik(spec.likelihood, Y, psi, data.observed, data.trials, noise_var, ones)
                - 0.5 * jnp.sum(X**2) + log_prior)
    return density


def laplace_precision(spec: RFLVMSpec, data: RFLVMData, state: RFLVMState, log_prior_W,
                      position: Array) -> Array:
    """The Laplace approximation's per-coordinate precisions at ``position`` (a mode of the
    block's density given the state's W, σ², h): :func:`curvature_diagonal` of the density
    whose curvature is exact by a few products (module docstring) — the count density with
    the intercept centred at ``position``'s m(X), the Gaussian's uncollapsed row density."""
    Y = state.Y_fill if spec.collapsed else None
    if spec.collapsed:
        curvature_fn = gaussian_row_density(spec, data, state.W, state.noise_var, Y,
                                            position, log_prior_W)
    else:      # the intercept centred at the mode's m(X): rows independent again
        X_hat, W_hat, _, _ = from_position(spec, data, position, state.W)
        centre = _feature_means(spec, X_hat, state.W if W_hat is None else W_hat)
        curvature_fn = log_density(spec, data, state.W, state.noise_var,
                                   state.dispersion_rate, Y, log_prior_W, centre)
    return curvature_diagonal(spec, data, curvature_fn, position)


def start_at_mode(key: Array, spec: RFLVMSpec, data: RFLVMData, state: RFLVMState):
    """One chain's state moved to an over-dispersed draw around the block's mode (given W
    where W is not in it), its inverse mass matrix the Laplace variances (module docstring).

    Returns:
        (state, :class:`ModeSearch`).
    """
    k_prior, k_noise = jax.random.split(key)
    log_prior_W = prior_W(k_prior, spec, data, state).total
    Y = state.Y_fill if spec.collapsed else None
    fn = log_density(spec, data, state.W, state.noise_var, state.dispersion_rate, Y,
                     log_prior_W)
    search = find_mode(fn, to_position(spec, data, state))
    precision = laplace_precision(spec, data, state, log_prior_W, search.position)
    noise = jax.random.normal(k_noise, search.position.shape, search.position.dtype)
    position = search.position + OVERDISPERSION * noise / jnp.sqrt(precision)
    state = state_at(spec, data, state, position)
    return state._replace(tuning=state.tuning._replace(inverse_mass=1.0 / precision)), search


def start_chains(keys: Array, spec: RFLVMSpec, data: RFLVMData, states: RFLVMState):
    """:func:`start_at_mode` for every chain (a leading chain axis on ``keys`` and
    ``states``), one after the other (``lax.map``: each chain pays for its own L-BFGS
    iterations), as one program kept across processes like the sampler's block.

    Returns:
        (states, :class:`ModeSearch` with a leading chain axis, seconds spent compiling).
    """
    args = to_device((keys, data, states))   # strong dtypes (a kernel's floats)
    program, seconds = _start_block(spec).compile(*args)
    states, search = program(*args)
    return states, search, seconds


@functools.lru_cache(maxsize=8)
def _start_block(spec: RFLVMSpec) -> Block:
    def start(keys, data, states):
        return lax.map(lambda ks: start_at_mode(ks[0], spec, data, ks[1]), (keys, states))
    return Block(jax.jit(start), export_key=spec.export_key("mode start "))
