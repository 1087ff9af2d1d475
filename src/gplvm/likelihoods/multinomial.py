"""Multinomial likelihood, softmax link with the last category as reference (seed 000, eq. 32).

Conventions a model must follow:

* ``Y`` is N × J: row i holds the counts of J categories, total N_i = Σ_j y_ij.
* ``F`` is N × (J − 1): the logits of the first J − 1 categories; the last category's logit is
  fixed to 0 (seed 000: "we set β_J = 0" for identifiability), so π_i = softmax([F_i, 0]).
  ``latent_dim(J)`` returns J − 1.
* :meth:`log_prob` returns one value per row (shape (N,)); a row with any NaN is missing as a
  whole (a partially observed row has no known total).

Pólya-gamma form (seed 000, eqs. 32–37, after Holmes & Held 2006).  Fix row i and category
j < J and write ξ_ij = log Σ_{k≠j} e^{f_ik} (the sum includes the reference's e^0) and
ψ_ij = f_ij − ξ_ij.  Then π_ij = σ(ψ_ij) and, for every k ≠ j,
π_ik = e^{f_ik} / (e^{f_ij} + e^{ξ_ij}) = σ(−ψ_ij) e^{f_ik − ξ_ij}, so as a function of f_ij

.. math:: \\prod_k \\pi_{ik}^{y_{ik}} = \\sigma(\\psi_{ij})^{y_{ij}}\\,
          \\sigma(-\\psi_{ij})^{N_i - y_{ij}} \\times (\\text{terms free of } f_{ij})
          = \\frac{(e^{\\psi_{ij}})^{y_{ij}}}{(1 + e^{\\psi_{ij}})^{N_i}} \\times \\ldots

i.e. eq. 26 with a_ij = y_ij, b_ij = N_i, κ_ij = y_ij − N_i/2 — the κ of eq. 36 and the
PG(N_i, ψ) of eq. 37.  (The exponent "y_ij + Σ_j y_ij" printed in the denominator of eq. 32 is
a typo for N_i: it contradicts eqs. 36–37 and the derivation above.)  The conditional is valid
for one column at a time given the others, so a sampler updates columns j = 1..J−1 in turn,
recomputing ξ with :meth:`Multinomial.polya_gamma_offset` after each.

The stick-breaking alternative of Linderman et al. (2015), b_ij = N_i − Σ_{k<j} y_ik, is the
exact augmentation of a *different* link, π_ij = σ(f_ij) Π_{k<j} σ(−f_ik); it is not the softmax
model above, so it is not used here.
"""

from __future__ import annotations

from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, logsumexp

from gplvm._pytree import pytree_dataclass
from gplvm._validation import _where, check_counts
from gplvm.likelihoods._common import as_float
from gplvm.likelihoods.base import AbstractLikelihood, Latent
from gplvm.registry import register
from gplvm.typing import Array, Float


def _logits(F: Array) -> Array:
    """[F, 0]: append the reference category's logit, (..., J − 1) -> (..., J)."""
    return jnp.concatenate([F, jnp.zeros(F.shape[:-1] + (1,), F.dtype)], axis=-1)


@jax.jit
def logsumexp_others(L: Float[Array, "*batch J"]) -> Float[Array, "*batch J"]:
    """ξ_j = log Σ_{k≠j} exp(L_k) along the last axis, in O(J) per row and without cancellation.

    For j that is not the row's arg-max, m = max_k L_k is still in the sum, so
    Σ_k e^{L_k − m} − e^{L_j − m} ≥ 1 and the subtraction loses nothing.  For the arg-max itself
    the subtraction could cancel catastrophically, so its ξ is a masked sum shifted by the
    second-largest value.  (A (J × J) masked logsumexp is simpler but O(N J²) in memory.)
    """
    is_max = jax.nn.one_hot(jnp.argmax(L, axis=-1), L.shape[-1], dtype=bool)
    m1 = jnp.max(L, axis=-1, keepdims=True)
    rest = jnp.sum(jnp.exp(L - m1), axis=-1, keepdims=True) - jnp.exp(L - m1)
    # The arg-max entry of `rest` may be 0: give it a placeholder so the log (and its
    # gradient, which `where` multiplies by 0) stays finite.
    xi_others = m1 + jnp.log(jnp.where(is_max, 1.0, rest))
    xi_max = logsumexp(jnp.where(is_max, -jnp.inf, L), axis=-1, keepdims=True)
    return jnp.where(is_max, xi_max, xi_others)


@register("gplvm.likelihoods.Multinomial")
@pytree_dataclass
class Multinomial(AbstractLikelihood):
    """Rows of ``Y`` ~ Multinomial(N_i, softmax([F_i, 0])); see the module docstring.

    Args:
        n_trials: row totals N_i for the generative methods (:meth:`inverse_link`,
            :meth:`predictive_mean_var`, :meth:`sample`): a scalar or shape (N,) / (N, 1).
            ``None`` (default) means one trial, so those methods return probabilities and
            one-hot draws.  :meth:`log_prob` always conditions on each row's observed total;
            when ``n_trials`` is given, :meth:`validate` checks the totals agree with it.
    """

    n_trials: Any = None

    name: ClassVar[str] = "multinomial"
    supports_polya_gamma: ClassVar[bool] = True
    takes_offset: ClassVar[bool] = False
    row_density: ClassVar[bool] = True

    @classmethod
    def from_state(cls, trials: Array, noise_var: Array, dispersion: Array) -> Multinomial:
        """``trials`` (N, J − 1): each row's total, repeated over its latent columns."""
        return cls(n_trials=trials[..., :1])

    def _psi_log_prob(self, Y: Array, F: Array) -> Array:
        """Σ_j<J y_ij f_ij − N_i log Σ_k e^{L_ik}, one value per row kept as (N, 1)."""
        L = _logits(F)
        return (jnp.sum(Y[..., :-1] * F, axis=-1, keepdims=True)
                - self.n_trials * logsumexp(L, axis=-1, keepdims=True))

    def _fisher_weight(self, Y: Array, F: Array) -> Array:
        """N_i π_ij (1 − π_ij) at the row totals ``n_trials`` (a proposal metric)."""
        p = jax.nn.softmax(_logits(F), axis=-1)[..., :-1]
        return self.n_trials * p * (1.0 - p)

    @classmethod
    def intercept_centre(cls, Y: np.ndarray, offset: np.ndarray, trials: np.ndarray
                         ) -> np.ndarray:
        """log of each category's total over the reference's (half a count added)."""
        totals = np.where(np.isnan(Y), 0.0, Y).sum(0) + 0.5
        return np.log(totals[:-1] / totals[-1])

    def check_model_data(self, Y: np.ndarray) -> None:
        empty = np.nansum(Y, axis=1) == 0
        if empty.any():
            raise ValueError(f"Y has {int(empty.sum())} rows with no counts (rows "
                             f"{np.flatnonzero(empty)[:5].tolist()}); the multinomial "
                             f"likelihood models how a row's total is split over the "
                             f"categories, so a row of zeros says nothing: drop those rows")

    def latent_dim(self, n_columns: int) -> int:
        return n_columns - 1

    def _missing(self, Y: Array) -> Array:
        return jnp.any(jnp.isnan(Y), axis=-1)

    def _log_prob(self, Y: Array, F: Array) -> Array:
        if F.shape[-1] != Y.shape[-1] - 1:
            raise ValueError(f"F has {F.shape[-1]} columns but Y has {Y.shape[-1]} categories; "
                             f"the multinomial likelihood takes J − 1 = {Y.shape[-1] - 1} latent "
                             f"columns (the last category is the reference with logit 0)")
        L = _logits(F)
        log_pi = L - logsumexp(L, axis=-1, keepdims=True)
        total = jnp.sum(Y, axis=-1)
        log_coef = gammaln(total + 1.0) - jnp.sum(gammaln(Y + 1.0), axis=-1)
        return log_coef + jnp.sum(Y * log_pi, axis=-1)

    def _grad_log_prob(self, Y: Array, F: Array) -> Array:
        """y_ij − N_i π_ij for the first J − 1 categories (N_i the row's observed total)."""
        total = jnp.sum(Y, axis=-1, keepdims=True)
        return Y[..., :-1] - total * self.probabilities(F)[..., :-1]

    def _curvature(self, Y: Array, F: Array) -> Array:
        """N_i π_ij (1 − π_ij), 1 − π_ij as σ(−ψ_ij) (no cancellation when π_ij → 1)."""
        L = _logits(F)
        psi = (L - logsumexp_others(L))[..., :-1]
        total = jnp.sum(Y, axis=-1, keepdims=True)
        return total * jax.nn.sigmoid(psi) * jax.nn.sigmoid(-psi)

    def _totals(self, F: Array) -> Array:
        """n_trials shaped to broadcast against (..., J)."""
        if self.n_trials is None:
            return jnp.ones((), F.dtype)
        n = as_float(self.n_trials, F)
        return n if n.ndim == 0 or n.shape[-1] == 1 else n[..., None]

    def probabilities(self, F: Latent) -> Float[Array, "*batch J"]:
        """π = softmax([F, 0]), shape (..., J)."""
        return jax.nn.softmax(_logits(as_float(F)), axis=-1)

    def _inverse_link(self, F: Array) -> Array:
        """E[y | f] = N_i π_i, shape (N, J) (probabilities when ``n_trials`` is None)."""
        F = as_float(F)
        return self._totals(F) * self.probabilities(F)

    def _conditional_variance(self, F: Array) -> Array:
        """Marginal Var[y_ij | f] = N_i π_ij (1 − π_ij), shape (N, J).

        1 − π_ij is computed as σ(−ψ_ij) with ψ_ij = L_ij − ξ_ij, not by subtraction.
        """
        F = as_float(F)
        L = _logits(F)
        psi = L - logsumexp_others(L)
        return self._totals(F) * jax.nn.sigmoid(psi) * jax.nn.sigmoid(-psi)

    def _predictive_mean_var(self, F_mean, F_var, n_points):
        raise NotImplementedError(
            "the multinomial likelihood has no quadrature rule for an uncertain F (the "
            "J − 1 logits are integrated jointly); average predictive_mean_var(F) over "
            "posterior samples of F instead")

    def _expected_log_prob(self, Y, F_mean, F_var, n_points):
        raise NotImplementedError(
            "expected_log_prob is not available for the multinomial likelihood; average "
            "log_prob over samples of F instead")

    def _sample(self, key: Array, F: Array) -> Array:
        p = self.probabilities(F)
        n = jnp.broadcast_to(self._totals(F), p.shape[:-1] + (1,))[..., 0]
        return jax.random.multinomial(key, n, p, dtype=F.dtype)

    def _check(self, Y: np.ndarray) -> None:
        if Y.shape[1] < 2:
            raise ValueError(f"Y has {Y.shape[1]} column; the multinomial likelihood needs at "
                             f"least 2 categories (use likelihood='binomial' for one count)")
        nan = np.isnan(Y)
        partial = nan.any(axis=1) & ~nan.all(axis=1)
        if partial.any():
            raise ValueError(f"Y has {int(partial.sum())} rows with some but not all entries "
                             f"missing (rows {_where(partial)}); a multinomial row is observed "
                             f"or missing as a whole: drop or fill in these rows")
        check_counts(Y, what="multinomial")
        if self.n_trials is not None:
            self._check_totals(Y, ~nan.any(axis=1))

    def _check_totals(self, Y: np.ndarray, observed: np.ndarray) -> None:
        n = np.asarray(self.n_trials, dtype=float)
        if n.ndim == 2 and n.shape[1] == 1:
            n = n[:, 0]
        if n.ndim > 1 or (n.ndim == 1 and n.shape[0] != Y.shape[0]):
            raise ValueError(f"n_trials has shape {np.shape(self.n_trials)}; pass a scalar or one "
                             f"total per row of Y (shape ({Y.shape[0]},))")
        totals = np.where(observed, np.nansum(Y, axis=1), 0.0)
        wrong = observed & (np.abs(totals - n) > 1e-8)
        if wrong.any():
            raise ValueError(f"Y has {int(wrong.sum())} rows whose counts do not sum to n_trials "
                             f"(rows {_where(wrong)}); the multinomial likelihood needs each row "
                             f"to total n_trials: pass n_trials=Y.sum(axis=1) or n_trials=None")

    def _polya_gamma_params(self, Y: Array) -> tuple[Array, Array, Array]:
        """a_ij = y_ij, b_ij = N_i, κ_ij = y_ij − N_i/2 for j < J, each (N, J − 1).

        Seed 000, eqs. 36–37; ψ = F − :meth:`polya_gamma_offset` (F).  Missing rows get zeros.
        """
        missing = jnp.any(jnp.isnan(Y), axis=-1, keepdims=True)
        Y_safe = jnp.where(missing, 0.0, Y)
        a = Y_safe[..., :-1]
        b = jnp.broadcast_to(jnp.sum(Y_safe, axis=-1, keepdims=True), a.shape)
        return self._pg_masked(jnp.where(missing, jnp.nan, a), a, b)

    def _polya_gamma_offset(self, F: Array) -> Array:
        """ξ_ij = log Σ_{k≠j} e^{f_ik} (reference logit 0 included), shape (N, J − 1)."""
        return logsumexp_others(_logits(as_float(F)))[..., :-1]
