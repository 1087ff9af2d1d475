r"""q(X), the variational distribution of the latents, under either latent prior.

Two final classes with one interface, chosen by the estimator (DESIGN.md, "latent prior"):

* :class:`IidLatent`: :math:`p(X) = \prod_n N(x_n | 0, I)` and a diagonal Gaussian q(X) with
  free means and variances; :math:`\mathrm{KL}(q\|p)` in closed form (seed 001 eq. 32).
* :class:`DynamicalLatent`: each latent dimension a GP over time stamps, with the
  reparameterised q(X) of seed 001 §E (eqs. 48–50), computed by
  :func:`gplvm.priors.dynamical.q_x_and_kl`.

Both map the unconstrained parameter pytree ``u`` to ``(X_mean, X_var, KL)`` with
:meth:`marginals`, and give the starting values of their own entries of ``u`` with
:meth:`initial_params`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gplvm._pytree import pytree_dataclass, static_field
from gplvm.kernels import AbstractKernel
from gplvm.objectives.collapsed import kl_standard_normal
from gplvm.priors import dynamical
from gplvm.registry import register
from gplvm.transforms import inverse_softplus, softplus


@register("gplvm.state.IidLatent")
@pytree_dataclass
class IidLatent:
    """q(X) = Π N(x_nq | μ_nq, s_nq) under the N(0, I) prior; parameters ``X_mean``, ``X_var``."""

    def initial_params(self, X0: np.ndarray, X_var0: np.ndarray) -> dict:
        return {"X_mean": jnp.asarray(X0), "X_var": inverse_softplus(jnp.asarray(X_var0))}

    def marginals(self, u: dict):
        """(X_mean, X_var, KL(q(X) ‖ N(0, I)))."""
        X_mean, X_var = u["X_mean"], softplus(u["X_var"])
        return X_mean, X_var, kl_standard_normal(X_mean, X_var)


@register("gplvm.state.DynamicalLatent")
@pytree_dataclass
class DynamicalLatent:
    """q(X) under a GP prior over time on every latent dimension (seed 001 §E).

    Attributes:
        layout: the rows laid out as padded sequences (:func:`dynamical.sequence_layout`).
        time_kernel: the kernel over time stamps whose *structure* is used; its values are read
            from ``u["time_kernel"]``.
        n_rows: N.
    """

    layout: dynamical.SequenceLayout
    time_kernel: AbstractKernel
    n_rows: int = static_field()

    def initial_params(self, X0: np.ndarray, init_var: float) -> dict:
        """Start near the PCA means, with Λ so that the variances are about ``init_var``.

        μ̄ = (K_t + I)⁻¹ X0 per sequence, a ridge solve: the mean K_t μ̄ is X0 smoothed along
        time.  The plain solve K_t⁻¹ X0 is ill-conditioned for a smooth K_t and gives huge μ̄
        and gradients.  With S = (K⁻¹ + Λ)⁻¹ ≈ Λ⁻¹ when Λ ≫ K⁻¹, Λ = 1/init_var gives
        variances near init_var.
        """
        N, Q = X0.shape
        layout = self.layout
        mu_bar = np.zeros((N, Q))
        for s in range(layout.index.shape[0]):
            rows = np.asarray(layout.index[s])[np.asarray(layout.mask[s]) > 0]
            t = jnp.asarray(np.asarray(layout.times[s])[: len(rows), None])
            K = np.asarray(self.time_kernel(t))
            mu_bar[rows] = np.linalg.solve(K + np.eye(len(rows)), X0[rows])
        return {"mu_bar": jnp.asarray(mu_bar),
                "lam": inverse_softplus(jnp.full((N, Q), 1.0 / init_var)),
                "time_kernel": self.time_kernel.unconstrained()}

    def marginals(self, u: dict):
        """(X_mean, X_var, KL(q(X) ‖ p(X))) under the dynamical prior (seed 001 eqs. 48–50)."""
        time_kernel = self.time_kernel.from_unconstrained(u["time_kernel"])
        return dynamical.q_x_and_kl(time_kernel, self.layout, u["mu_bar"], softplus(u["lam"]),
                                    self.n_rows)

    def fitted_time_kernel(self, u: dict) -> AbstractKernel:
        return self.time_kernel.from_unconstrained(u["time_kernel"])

    def predict(self, u: dict, t_new, sequence: int):
        """q(x*) at new times of one training sequence (seed 003 eq. 35)."""
        return dynamical.predict_q_x(self.fitted_time_kernel(u), self.layout, u["mu_bar"],
                                     softplus(u["lam"]), t_new, sequence)
