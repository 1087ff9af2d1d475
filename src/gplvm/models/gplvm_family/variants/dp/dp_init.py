r"""Initial assignments of the DP-GP-LVM from one atom per column.

Started from random assignments, coordinate ascent splits a function's columns between atoms
early, q(X) then adapts to the fragments, and the fragments stay (:mod:`.dp_fit`'s merges
repair some).  A better start: every column its own atom (T = D, φ = I — the fully independent
MRD of seed 001 §F, whose bound is the DP-GP-LVM's data term with those assignments), a few
hundred L-BFGS steps, then the columns grouped by the ARD profiles they chose.  Each column's
profile is :math:`\log(\gamma_{dq} / \max_q\gamma_{dq})` clipped at log 10⁻³ (so "switched off"
is one value however far off), and the columns are grouped by a Dirichlet-process Gaussian
mixture (scikit-learn's variational ``BayesianGaussianMixture``, T components), whose
responsibilities are the initial φ, the components ordered by size (the stick-breaking prior
favours low indices).  Each atom starts at the φ-weighted geometric mean of its columns'
hyper-parameters; q(X) and Z start where the per-column phase left them.

The per-column phase costs D bounds per step instead of T (so ``n_steps`` of them cost about
D/T sweeps' worth of steps of the main phase).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture

from gplvm.inference import minimise
from gplvm.models.gplvm_family.variants.dp import atoms
from gplvm.models.gplvm_family.bound import Problem
from gplvm.transforms import inverse_softplus, softplus

#: ARD weights below this fraction of a column's largest count as switched off
_FLOOR = 1e-3


def has_ard(kernel) -> bool:
    """Whether the kernel template has a length-scale per latent dimension to group by."""
    return getattr(kernel, "lengthscale", None) is not None


def per_column_fit(u: dict, problem: Problem, prior: atoms.AtomPrior, n_steps: int):
    """``n_steps`` L-BFGS steps with one atom per column (φ = I), from u's first atom."""
    D = problem.Y0.shape[1]
    first = atoms.atom(u["kernel"], 0)
    u_cols = dict(u, kernel=atoms.stack_atoms([first] * D),
                  noise_var=jnp.full(D, u["noise_var"][0]))
    result = minimise(atoms.negative_gp_part, u_cols, args=(problem, jnp.eye(D), prior),
                      n_iter=n_steps, progress=False, desc="DPGPLVM init")
    if result.interrupted:  # Ctrl-C: stop the fit, not go on from a truncated start
        raise KeyboardInterrupt
    return result.params


def ard_profiles(u_cols: dict, problem: Problem) -> np.ndarray:
    """(D, Q) log(γ_dq / max_q γ_dq), clipped at log 10⁻³."""
    kernels = jax.vmap(problem.kernel.from_unconstrained)(u_cols["kernel"])
    Q = u_cols["Z"].shape[1]
    gamma = np.broadcast_to(1.0 / np.asarray(kernels.lengthscale) ** 2,
                            (u_cols["noise_var"].shape[0], Q))
    return np.log(np.clip(gamma / gamma.max(axis=1, keepdims=True), _FLOOR, None))


def group_columns(profiles: np.ndarray, n_atoms: int, seed: int) -> np.ndarray:
    """(D, T) responsibilities of a DP Gaussian mixture over the profiles, components by
    decreasing size, floored at 10⁻⁶ and renormalised (one column: all on the first atom)."""
    n_components = min(n_atoms, profiles.shape[0])
    if n_components < 2:
        resp = np.ones((profiles.shape[0], 1))
        n_components = 1
    else:
        resp = _mixture_responsibilities(profiles, n_components, seed)
    phi = np.full((profiles.shape[0], n_atoms), 1e-6)
    phi[:, :n_components] += resp
    return phi / phi.sum(axis=1, keepdims=True)


def _mixture_responsibilities(profiles, n_components, seed):
    mixture = BayesianGaussianMixture(n_components=n_components, covariance_type="diag",
                                      weight_concentration_prior_type="dirichlet_process",
                                      max_iter=500, n_init=3, random_state=seed)
    with warnings.catch_warnings():
        # an initialiser: its own iteration limit is no ConvergenceWarning of the model's fit
        warnings.simplefilter("ignore", ConvergenceWarning)
        resp = mixture.fit(profiles).predict_proba(profiles)
    return resp[:, np.argsort(-resp.sum(0), kind="stable")]


def atoms_from_columns(u_cols: dict, phi: np.ndarray, template_u, noise_u):
    """Each atom at the φ-weighted geometric mean of its columns' constrained
    hyper-parameters; atoms with less than half a column of mass at the template."""
    mass = phi.sum(axis=0)
    weights = phi / np.maximum(mass, 1e-12)                             # (D, T)

    def mean_leaf(cols, template):
        logs = np.log(np.asarray(softplus(cols)))                       # (D, ...)
        means = np.tensordot(weights.T, logs, axes=1)                   # (T, ...)
        out = np.where((mass > 0.5).reshape((-1,) + (1,) * (logs.ndim - 1)), means,
                       np.log(np.asarray(softplus(template))))
        return inverse_softplus(jnp.asarray(np.exp(out)))

    kernel = jax.tree_util.tree_map(mean_leaf, u_cols["kernel"], template_u)
    noise = mean_leaf(u_cols["noise_var"], noise_u)
    return kernel, noise


def initial_from_columns(u: dict, problem: Problem, prior: atoms.AtomPrior, n_steps: int,
                         seed: int):
    """(u, φ0) for the main phase: the module docstring's per-column start."""
    n_atoms = u["noise_var"].shape[0]
    u_cols = per_column_fit(u, problem, prior, n_steps)
    phi = group_columns(ard_profiles(u_cols, problem), n_atoms, seed)
    kernel, noise = atoms_from_columns(u_cols, phi, atoms.atom(u["kernel"], 0),
                                       u["noise_var"][0])
    return dict(u_cols, kernel=kernel, noise_var=noise), phi
