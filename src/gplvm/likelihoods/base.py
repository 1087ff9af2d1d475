"""The likelihood interface p(y | f) shared by every observation model (DESIGN.md, "likelihood").

A likelihood maps the latent function values ``F`` (what the map prior produces, N × D) to a
distribution over the observations ``Y`` (N × D; NaN = missing).  Concrete likelihoods are small
immutable pytree dataclasses (STYLE.md 3, 4): :class:`AbstractLikelihood` is abstract; each
final class defines the hooks ``_log_prob`` (on complete data), ``_inverse_link``,
``_conditional_variance``, ``_sample`` and ``_check`` (plus optional closed forms) and inherits
the public methods, which are compiled once per likelihood type and shape with ``jax.jit``
(the likelihood is a pytree argument, so its parameters are traced, not baked in).

* Missing data: NaN entries of ``Y`` are replaced by a harmless placeholder (0, in every
  support) *before* the density is evaluated, and their contribution is then set to exactly 0
  with ``jnp.where``.  Evaluating at a placeholder instead of at NaN is what keeps ``jax.grad``
  finite: ``where`` sends a zero cotangent to the masked branch, and 0·finite = 0, 0·NaN = NaN.
* Predictive moments under a Gaussian belief f ~ N(F_mean, F_var), by Gauss–Hermite quadrature
  unless a likelihood overrides the hook with a closed form.
* The Pólya-gamma parametrisation of seed 000, eq. 26, for the logistic-type likelihoods.
"""

from __future__ import annotations

import abc
from functools import partial
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from gplvm._validation import as_2d_float
from gplvm.likelihoods._common import as_float, quadrature_nodes
from gplvm.typing import Array, ArrayLike, Float, PRNGKeyArray, PyTree, Real, UserArrayLike

# Shapes: the data Y are (N, D) — (N, J) counts of J categories for the multinomial — and the
# latent values F are (N, L) with L = latent_dim(D) (D, or J − 1 for the multinomial).  Any
# leading axes (*batch) may stand for N, e.g. (S, N, D) for S posterior draws, or none at all.
#: Observations, NaN = missing.
Data = Real[ArrayLike, "*batch D"]
#: Latent function values, one row per row of the data.
Latent = Real[ArrayLike, "*batch L"]
#: A value per entry of the data (elementwise likelihoods and moments) or per row (the
#: multinomial's log-density).
PerEntry = Float[Array, "*batch D"]
PerEntryOrRow = Float[Array, "*batch D"] | Float[Array, " *batch"]


# One compiled function per public method; `lik` is a pytree, so its class (static) selects
# the implementation and its parameters are traced.

@jax.jit
def _log_prob(lik, Y, F):
    F = as_float(F)
    return lik._masked_log_prob(as_float(Y, F), F)


@jax.jit
def _grad_log_prob(lik, Y, F):
    F = as_float(F)
    Y = as_float(Y, F)
    return lik._masked_in_latent(Y, lik._grad_log_prob(jnp.where(jnp.isnan(Y), 0.0, Y), F))


@jax.jit
def _curvature(lik, Y, F):
    F = as_float(F)
    Y = as_float(Y, F)
    return lik._masked_in_latent(Y, lik._curvature(jnp.where(jnp.isnan(Y), 0.0, Y), F))


@jax.jit
def _inverse_link(lik, F):
    return lik._inverse_link(as_float(F))


@jax.jit
def _conditional_variance(lik, F):
    return lik._conditional_variance(as_float(F))


@jax.jit
def _sample(lik, key, F):
    return lik._sample(key, as_float(F))


@partial(jax.jit, static_argnames="n_points")
def _predictive_mean_var(lik, F_mean, F_var, n_points):
    F_mean = as_float(F_mean)
    if F_var is None:
        return lik._inverse_link(F_mean), lik._conditional_variance(F_mean)
    return lik._predictive_mean_var(F_mean, as_float(F_var, F_mean), n_points)


@partial(jax.jit, static_argnames="n_points")
def _expected_log_prob(lik, Y, F_mean, F_var, n_points):
    F_mean = as_float(F_mean)
    return lik._expected_log_prob(as_float(Y, F_mean), F_mean, as_float(F_var, F_mean), n_points)


@jax.jit
def _polya_gamma_params(lik, Y):
    return lik._polya_gamma_params(as_float(Y))


@jax.jit
def _polya_gamma_offset(lik, F):
    return lik._polya_gamma_offset(as_float(F))


class AbstractLikelihood(abc.ABC):
    """Interface of an observation model p(y | f); see the module docstring.

    Class attributes:
        name: the string accepted by :func:`gplvm.likelihoods.get_likelihood`.
        is_count: observations are non-negative integers.
        supports_polya_gamma: :meth:`polya_gamma_params` is available (seed 000, eq. 26).
    """

    name: ClassVar[str]
    is_count: ClassVar[bool] = True
    supports_polya_gamma: ClassVar[bool] = False

    # --- what a sampler of the linear predictor ψ reads (the RFLVM, docs/contract.md "Adding
    # a likelihood"); the defaults suit a likelihood without parameters of its own ------------
    #: (field, description) of a parameter a fully Bayesian model draws from its own prior
    #: (the RFLVM: σ² of the Gaussian, the negative binomial's r), so that a value set on the
    #: object would be ignored; None: the likelihood has none.
    sampled_parameter: ClassVar[tuple[str, str] | None] = None
    #: ``fit(n_trials=...)`` sets the ``n_trials`` field (the binomial's numbers of trials).
    takes_trials: ClassVar[bool] = False
    #: known per-row offsets (e.g. log size factors) may be added to the linear predictor.
    takes_offset: ClassVar[bool] = True
    #: y | f ~ N(f, σ²): the RFLVM integrates the weights out (seed 000, App. A) and fits no
    #: intercept (the Gaussian only).
    conjugate_normal: ClassVar[bool] = False
    #: :meth:`log_prob` is one value per row (the multinomial): a row is observed or missing
    #: as a whole, and its latent columns are coupled.
    row_density: ClassVar[bool] = False
    #: the RFLVM may draw the weights by the log-rate working Gaussian of
    #: :mod:`gplvm.models.rflvm.weights_ess` (Poisson, negative binomial); other likelihoods
    #: without an augmentation get the generic elliptical slice under β's prior.
    log_rate_slice: ClassVar[bool] = False
    #: fields of the RFLVM's data laid out once from the counts (``nonzero``, ``customers``,
    #: ``log_factorial``), for :meth:`_psi_free_total` and the dispersion steps.
    count_layouts: ClassVar[tuple[str, ...]] = ()

    # --- hooks each final likelihood defines --------------------------------------------------

    @abc.abstractmethod
    def _log_prob(self, Y: Array, F: Array) -> Array:
        """Elementwise log p(y | f) on complete (NaN-free) ``Y``."""

    @abc.abstractmethod
    def _inverse_link(self, F: Array) -> Array:
        """E[y | f] (see :meth:`inverse_link`)."""

    @abc.abstractmethod
    def _conditional_variance(self, F: Array) -> Array:
        """Var[y | f] (see :meth:`conditional_variance`)."""

    @abc.abstractmethod
    def _sample(self, key: Array, F: Array) -> Array:
        """One draw of y | f for every row/entry of ``F``."""

    def _cdf(self, y: Array, F: Array) -> Array:
        """P(Y ≤ y | f), elementwise (used for predictive quantiles, seed 002 eq. 30)."""
        raise NotImplementedError(f"{type(self).__name__} has no CDF")

    def cdf(self, y: Real[ArrayLike, "*#shape"], F: Real[ArrayLike, "*#shape"]
            ) -> Float[Array, "*shape"]:
        """P(Y ≤ y | f) elementwise; for counts, y is floored (a step CDF)."""
        F = as_float(F)
        return self._cdf(as_float(y, F), F)

    def _check(self, Y: np.ndarray) -> None:
        """Likelihood-specific checks of a finite float (N, D) array with NaN = missing."""

    # --- log-density ---------------------------------------------------------------------------

    def _missing(self, Y: Array) -> Array:
        """Boolean mask, shaped like the output of :meth:`log_prob`, of entries to ignore."""
        return jnp.isnan(Y)

    def _masked_log_prob(self, Y: Array, F: Array) -> Array:
        # Placeholder, then mask: see the module docstring for why both are needed.
        Y_safe = jnp.where(jnp.isnan(Y), 0.0, Y)
        return jnp.where(self._missing(Y), 0.0, self._log_prob(Y_safe, F))

    def log_prob(self, Y: Data, F: Latent) -> PerEntryOrRow:
        """Elementwise log p(y | f); NaN entries of ``Y`` contribute exactly 0.

        Args:
            Y: observations, shape (N, D), NaN = missing.
            F: latent function values, shape (N, ``latent_dim(D)``).

        Returns:
            Shape (N, D), the log-density of each entry (0 where missing); (N,) for the
            multinomial, whose density is per row.
        """
        return _log_prob(self, Y, F)

    def log_likelihood(self, Y: Data, F: Latent) -> Float[Array, ""]:
        """Σ log p(y | f) over all observed entries (a scalar)."""
        return jnp.sum(self.log_prob(Y, F))

    # --- gradient and curvature in the latent values (gradient-based samplers, MAP, Laplace) ---

    def grad_log_prob(self, Y: Data, F: Latent) -> Float[Array, "*batch L"]:
        """∂/∂F of :meth:`log_likelihood`: the score of each latent value, in closed form.

        What a gradient-based sampler or optimiser of ψ = Φβ (seed 000) needs from the
        observation model: the chain rule through ψ is the model's, this factor the
        likelihood's, so the sampler has no branch per likelihood.  0 where ``Y`` is missing.

        Returns:
            Shape of ``F``: (N, D); (N, J − 1) for the multinomial.
        """
        return _grad_log_prob(self, Y, F)

    def curvature(self, Y: Data, F: Latent) -> Float[Array, "*batch L"]:
        """−∂² log p(y | f)/∂f², elementwise: the diagonal of the negative Hessian of
        :meth:`log_likelihood` in ``F`` (≥ 0; 0 where ``Y`` is missing).

        For every likelihood here but the multinomial the Hessian is diagonal, so this is all
        of it; for the multinomial it is the diagonal of each row's N_i (diag π − π πᵀ) over
        the first J − 1 categories.  It sets the scale of a mass matrix or a Laplace
        approximation (e.g. per-column scales from the MAP fit's curvature).

        Returns:
            Shape of ``F``.
        """
        return _curvature(self, Y, F)

    def _grad_log_prob(self, Y: Array, F: Array) -> Array:
        """∂ log p/∂F on complete ``Y`` (default: autodiff of the elementwise ``_log_prob``)."""
        return jax.grad(lambda f: jnp.sum(self._log_prob(Y, f)))(F)

    def _curvature(self, Y: Array, F: Array) -> Array:
        """−∂² log p/∂F² elementwise on complete ``Y`` (default: a Hessian-vector product with
        ones, which is the diagonal because an elementwise likelihood's Hessian is diagonal)."""
        return -jax.jvp(lambda f: self._grad_log_prob(Y, f), (F,), (jnp.ones_like(F),))[1]

    def _masked_in_latent(self, Y: Array, values: Array) -> Array:
        """``values`` (shaped like F) set to 0 where Y is missing (a row, for the multinomial)."""
        missing = self._missing(Y)
        if missing.ndim < values.ndim:
            missing = missing[..., None]
        return jnp.where(missing, 0.0, values)

    def latent_dim(self, n_columns: int) -> int:
        """Number of columns of ``F`` for a ``Y`` with ``n_columns`` columns."""
        return n_columns

    # --- moments and quadrature ----------------------------------------------------------------

    def inverse_link(self, F: Latent) -> PerEntry:
        """E[y | f]: one value per entry of the data (shape (N, D); (N, J) for the multinomial)."""
        return _inverse_link(self, F)

    def conditional_variance(self, F: Latent) -> PerEntry:
        """Var[y | f], shaped like :meth:`inverse_link` (the integrand quadrature users need)."""
        return _conditional_variance(self, F)

    def predictive_mean_var(self, F_mean: Latent, F_var: Latent | None = None,
                            n_points: int = 20) -> tuple[PerEntry, PerEntry]:
        """Mean and variance of y, given f = ``F_mean`` or given f ~ N(F_mean, F_var).

        With ``F_var`` the moments follow from the laws of total expectation and variance,

        .. math:: E[y] = E_f[\\mu(f)], \\qquad
                  \\mathrm{Var}[y] = E_f[\\sigma^2(f)] + \\mathrm{Var}_f[\\mu(f)],

        by ``n_points``-node Gauss–Hermite quadrature or a closed form (Gaussian, Poisson).

        Args:
            F_mean: shape (N, D).
            F_var: marginal variances of f, shape (N, D), or None for a point value.
            n_points: quadrature nodes (static).

        Returns:
            (mean, var), each of the shape of the data.
        """
        return _predictive_mean_var(self, F_mean, F_var, n_points)

    def _predictive_mean_var(self, F_mean: Array, F_var: Array,
                             n_points: int) -> tuple[Array, Array]:
        f, w = quadrature_nodes(F_mean, F_var, n_points)              # (n_points, N, D)
        mu = self._inverse_link(f)
        mean = jnp.sum(w * mu, axis=0)
        second = jnp.sum(w * (self._conditional_variance(f) + mu**2), axis=0)
        return mean, second - mean**2

    def expected_log_prob(self, Y: Data, F_mean: Latent, F_var: Latent,
                          n_points: int = 20) -> PerEntry:
        """E_{f ~ N(F_mean, F_var)}[log p(y | f)] elementwise (0 where ``Y`` is NaN).

        The data term of a variational bound (GLM ELBO, seed 002): Gauss–Hermite quadrature
        with ``n_points`` nodes unless the likelihood has a closed form.  Shape of ``Y``.
        """
        return _expected_log_prob(self, Y, F_mean, F_var, n_points)

    def _expected_log_prob(self, Y: Array, F_mean: Array, F_var: Array,
                           n_points: int) -> Array:
        f, w = quadrature_nodes(F_mean, F_var, n_points)
        return jnp.sum(w * self._masked_log_prob(jnp.broadcast_to(Y, f.shape), f), axis=0)

    # --- sampling and validation ---------------------------------------------------------------

    def sample(self, key: PRNGKeyArray, F: Latent) -> PerEntry:
        """Draw y ~ p(y | f) (a float array with the shape of the data)."""
        return _sample(self, key, F)

    def validate(self, Y: UserArrayLike, name: str = "Y") -> Float[np.ndarray, "N D"]:
        """Check that ``Y`` is valid data for this likelihood, before any computation.

        NaN marks a missing entry; inf never is allowed, nor (library policy,
        ``gplvm._validation.as_2d_float``) a row with no observed entry.  Raises ``ValueError``
        naming the problem, where it is, and the fix (STYLE.md 9).

        Returns:
            ``Y`` as a float64 NumPy array of shape (N, D).
        """
        arr = as_2d_float(Y, name=name, allow_nan=True)
        self._check(arr)
        return arr

    # --- Pólya-gamma augmentation (seed 000, eq. 26) -------------------------------------------

    def polya_gamma_params(self, Y: Data) -> tuple[Float[Array, "*batch L"],
                                                   Float[Array, "*batch L"],
                                                   Float[Array, "*batch L"]]:
        """(a, b, κ = a − b/2) with p(y | ψ) = c(y) (e^ψ)^a / (1 + e^ψ)^b (seed 000, eq. 26).

        ψ = F − :meth:`polya_gamma_offset` (F), and ω | ψ ~ PG(b, ψ).  Missing entries get
        a = b = κ = 0, i.e. ω ~ PG(0, ·) = δ₀, so they drop out of the Gaussian update (eq. 28).
        Each array has the shape of ``F``.
        """
        return _polya_gamma_params(self, Y)

    def _polya_gamma_params(self, Y: Array) -> tuple[Array, Array, Array]:
        raise NotImplementedError(
            f"the {self.name} likelihood has no Pólya-gamma representation; use a "
            f"gradient-based or elliptical-slice update instead (supports_polya_gamma is False)")

    def polya_gamma_offset(self, F: Latent) -> Float[Array, "*batch L"]:
        """ξ such that ψ = F − ξ is the logistic argument (0 except for the multinomial)."""
        return _polya_gamma_offset(self, F)

    def _polya_gamma_offset(self, F: Array) -> Array:
        return jnp.zeros_like(F)

    @staticmethod
    def _pg_masked(Y: Array, a: Array, b: Array, kappa: Array | None = None
                   ) -> tuple[Array, Array, Array]:
        """Zero a, b and κ where Y is NaN (broadcast to a common shape); κ = a − b/2 unless
        given (in a form with less rounding, e.g. the negative binomial's (y − r)/2)."""
        shape = jnp.broadcast_shapes(Y.shape, a.shape, b.shape)
        missing = jnp.broadcast_to(jnp.isnan(Y), shape)
        a = jnp.where(missing, 0.0, a)
        b = jnp.where(missing, 0.0, b)
        if kappa is None:
            return a, b, a - b / 2.0
        return a, b, jnp.where(missing, 0.0, kappa)

    # --- a sampler's view: parameters from its state, ψ-dependent terms, empirical centre ---

    @classmethod
    def from_state(cls, trials: Array, noise_var: Array, dispersion: Array
                   ) -> AbstractLikelihood:
        """The likelihood at a sampler's state: ``trials`` (N, D) the numbers of trials /
        row totals of the data (ones where the likelihood has none), ``noise_var`` and
        ``dispersion`` (D,) the values of :attr:`sampled_parameter` (ones otherwise).  A
        likelihood without such parameters is ``cls()`` (the default)."""
        return cls()

    def _psi_log_prob(self, Y: Array, F: Array) -> Array:
        """The terms of :meth:`_log_prob` that depend on ``F`` (complete ``Y``); what every
        Metropolis ratio and slice level of a sampler compares.  Default: all of them."""
        return self._log_prob(Y, F)

    def _psi_free_total(self, data) -> Array | None:
        """Σ over the observed entries of ``_log_prob − _psi_log_prob`` from the sufficient
        summaries a sampler laid out once (``data``: :class:`gplvm.models.rflvm.spec.
        RFLVMData`); None (the default) where there is no such shortcut, and the sampler
        evaluates the full density instead."""
        return None

    def _fisher_weight(self, Y: Array, F: Array) -> Array:
        """A non-negative weight per entry of ``F`` close to −∂² log p/∂f², which a sampler
        may use to scale its proposals (any positive weight keeps it exact).  Default:
        :meth:`_curvature`."""
        return self._curvature(Y, F)

    @classmethod
    def intercept_centre(cls, Y: np.ndarray, offset: np.ndarray, trials: np.ndarray
                         ) -> np.ndarray:
        """(D,) the link of each column's empirical mean: the centre of a per-column
        intercept's prior.  ``Y`` (N, D) with NaN = missing, ``offset`` (N, 1) the row
        offsets, ``trials`` (N, D).  Default: the log link, the log of the column's mean count
        per unit of exposure e^offset (floored at half a count over the observed rows)."""
        obs = ~np.isnan(Y)
        Y0 = np.where(obs, Y, 0.0)
        n_obs = np.maximum(obs.sum(0), 1)
        rate = Y0.sum(0) / np.maximum((np.exp(offset) * obs).sum(0), 1e-12)
        return np.log(np.maximum(rate, 0.5 / n_obs))

    def check_model_data(self, Y: np.ndarray) -> None:
        """What a latent-variable model needs of ``Y`` beyond :meth:`validate` (e.g. the
        multinomial's rows with no counts); nothing by default.  ``Y`` float (N, D), NaN =
        missing."""

    # --- trainable state (gplvm.transforms) ----------------------------------------------------

    def unconstrained(self) -> dict[str, PyTree]:
        """Trainable parameters on the real line (empty for a parameter-free likelihood)."""
        return {}

    def from_unconstrained(self, u: dict[str, PyTree]) -> AbstractLikelihood:
        """A copy with the trainable parameters set from an :meth:`unconstrained`-shaped ``u``."""
        return self
