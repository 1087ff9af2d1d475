r"""The Dirichlet-process terms of the DP-GP-LVM bound and their closed-form coordinate updates
(seed 001 §A eqs. 5–8 and §D eqs. 42–47).

Truncated stick-breaking with T atoms: :math:`v_t \sim \mathrm{Beta}(1, \alpha)` for
:math:`t < T` and :math:`v_T = 1`, so that :math:`\pi_t = v_t \prod_{i<t}(1 - v_i)` (generative
step 4 of §A, whose minus sign the supplement lost) sums to one; :math:`\alpha \sim
\mathrm{Gamma}(s_1, s_2)` (shape, rate).  The variational family is

.. math:: q(z_d) = \mathrm{Cat}(\phi_d), \quad q(v_t) = \mathrm{Beta}(a_t, b_t)\ (t < T), \quad
          q(\alpha) = \mathrm{Gamma}(w_1, w_2).

Because :math:`v_T = 1`, the sums over t in eqs. 43 and 45 run to T − 1 (the supplement's
eq. 45 sums to T).  With :math:`\langle\log v_t\rangle = \psi(a_t) - \psi(a_t + b_t)` and
:math:`\langle\log(1 - v_t)\rangle = \psi(b_t) - \psi(a_t + b_t)`, every term is a closed form,
and the data term of the bound is linear in φ with coefficient :math:`F_d(\theta_t, \beta_t)`
(seed 001 §A: :math:`\sum_t\phi_{dt}F_d(\theta_t)`, not :math:`F_d` at averaged
hyper-parameters), so φ, (a, b) and (w1, w2) each have an exact coordinate maximiser
(:func:`update_phi`, :func:`update_v`, :func:`update_alpha`; Blei & Jordan 2006, §4).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import betaln, digamma, gammaln, xlogy

from gplvm.registry import register


@register("gplvm.state.DPState")
class DPState(NamedTuple):
    """The variational parameters of the Dirichlet process.

    Attributes:
        phi: (D, T) q(z_d) = Cat(φ_d); rows sum to one.
        a, b: (T − 1,) q(v_t) = Beta(a_t, b_t) for t < T (v_T = 1 under truncation).
        w1, w2: q(α) = Gamma(w1, w2), shape and rate.
    """

    phi: jnp.ndarray
    a: jnp.ndarray
    b: jnp.ndarray
    w1: jnp.ndarray
    w2: jnp.ndarray


@register("gplvm.state.DPPrior")
class DPPrior(NamedTuple):
    """p(α) = Gamma(s1, s2) (shape, rate) of seed 001 eq. 44."""

    s1: float = 1.0
    s2: float = 1.0


def expected_log_sticks(a, b):
    """(⟨log v_t⟩, ⟨log(1 − v_t)⟩) under Beta(a_t, b_t), each (T − 1,)."""
    total = digamma(a + b)
    return digamma(a) - total, digamma(b) - total


def expected_log_pi(state: DPState):
    r"""(T,) :math:`\langle\log\pi_t\rangle = \langle\log v_t\rangle + \sum_{i<t}
    \langle\log(1 - v_i)\rangle`, with :math:`\langle\log v_T\rangle = 0`."""
    log_v, log_1mv = expected_log_sticks(state.a, state.b)
    before = jnp.concatenate([jnp.zeros(1), jnp.cumsum(log_1mv)])        # Σ_{i<t}, (T,)
    return jnp.concatenate([log_v, jnp.zeros(1)]) + before


def _tail_mass(phi):
    """(D, T − 1) Σ_{t' > t} φ_dt' for t < T."""
    return jnp.cumsum(phi[:, ::-1], axis=1)[:, ::-1][:, 1:]


def expected_log_p_z(state: DPState):
    """Σ_d E[log p(z_d | V)] (seed 001 eq. 42, summed over d)."""
    log_v, log_1mv = expected_log_sticks(state.a, state.b)
    phi = state.phi
    return jnp.sum(phi[:, :-1] * log_v + _tail_mass(phi) * log_1mv)


def expected_alpha(state: DPState):
    """E[α] = w1 / w2."""
    return state.w1 / state.w2


def expected_log_alpha(state: DPState):
    """E[log α] = ψ(w1) − log w2."""
    return digamma(state.w1) - jnp.log(state.w2)


def expected_log_p_v(state: DPState):
    """E[log p(V | α)] over the T − 1 free sticks (seed 001 eq. 43)."""
    _, log_1mv = expected_log_sticks(state.a, state.b)
    n_sticks = state.a.shape[0]
    return (n_sticks * expected_log_alpha(state)
            + jnp.sum((expected_alpha(state) - 1.0) * log_1mv))


def expected_log_p_alpha(state: DPState, prior: DPPrior):
    """E[log p(α)] under p(α) = Gamma(s1, s2) (seed 001 eq. 44)."""
    s1, s2 = prior.s1, prior.s2
    return (-gammaln(s1) + s1 * jnp.log(s2) - s2 * expected_alpha(state)
            + (s1 - 1.0) * expected_log_alpha(state))


def entropy_v(state: DPState):
    """H[q(V)], the Beta entropies of the T − 1 free sticks (seed 001 eq. 45)."""
    a, b = state.a, state.b
    return jnp.sum(betaln(a, b) - (a - 1.0) * digamma(a) - (b - 1.0) * digamma(b)
                   + (a + b - 2.0) * digamma(a + b))


def entropy_z(state: DPState):
    """H[q(Z)] = −Σ_d Σ_t φ_dt log φ_dt (seed 001 eq. 46; 0 log 0 = 0)."""
    return -jnp.sum(xlogy(state.phi, state.phi))


def entropy_alpha(state: DPState):
    """H[q(α)] of Gamma(w1, w2) (seed 001 eq. 47)."""
    w1, w2 = state.w1, state.w2
    return w1 - jnp.log(w2) + gammaln(w1) + (1.0 - w1) * digamma(w1)


def dp_terms(state: DPState, prior: DPPrior):
    """The DP part of the bound: eqs. 42 + 43 + 44 + 45 + 46 + 47."""
    return (expected_log_p_z(state) + expected_log_p_v(state)
            + expected_log_p_alpha(state, prior) + entropy_v(state) + entropy_z(state)
            + entropy_alpha(state))


# ------------------------------------------------------------------ coordinate updates
def update_phi(F, state: DPState) -> DPState:
    r"""The exact maximiser of the bound over φ given everything else:
    :math:`\phi_{dt} \propto \exp(F_{dt} + \langle\log\pi_t\rangle)`.

    Args:
        F: (D, T) per-column data terms F_d(θ_t, β_t) (``BoundParts.per_column`` of atom t).
    """
    logits = F + expected_log_pi(state)[None, :]
    return state._replace(phi=jax.nn.softmax(logits, axis=1))


def update_v(state: DPState) -> DPState:
    r"""The exact maximiser over q(V): :math:`a_t = 1 + \sum_d\phi_{dt}`,
    :math:`b_t = E[\alpha] + \sum_d\sum_{t'>t}\phi_{dt'}` (t < T)."""
    phi = state.phi
    a = 1.0 + jnp.sum(phi[:, :-1], axis=0)
    b = expected_alpha(state) + jnp.sum(_tail_mass(phi), axis=0)
    return state._replace(a=a, b=b)


def update_alpha(state: DPState, prior: DPPrior) -> DPState:
    r"""The exact maximiser over q(α): :math:`w_1 = s_1 + T - 1`,
    :math:`w_2 = s_2 - \sum_{t<T}\langle\log(1 - v_t)\rangle`."""
    _, log_1mv = expected_log_sticks(state.a, state.b)
    w1 = jnp.asarray(prior.s1 + state.a.shape[0], dtype=float)
    return state._replace(w1=w1, w2=prior.s2 - jnp.sum(log_1mv))


@jax.jit
def coordinate_ascent(F, state: DPState, prior: DPPrior) -> DPState:
    """One sweep φ → (a, b) → (w1, w2); each step is an exact coordinate maximiser, so the
    bound does not decrease."""
    return update_alpha(update_v(update_phi(F, state)), prior)


def initial_state(phi, prior: DPPrior) -> DPState:
    """q(V) and q(α) consistent with the given φ: (a, b) with E[α] = s1/s2, then (w1, w2),
    then (a, b) again with the new E[α]."""
    phi = jnp.asarray(phi, dtype=float)
    n_sticks = phi.shape[1] - 1
    state = DPState(phi, jnp.ones(n_sticks), jnp.ones(n_sticks),
                    jnp.asarray(prior.s1, dtype=float), jnp.asarray(prior.s2, dtype=float))
    return update_v(update_alpha(update_v(state), prior))
