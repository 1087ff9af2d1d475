r"""The fitted structured GPLVM and what is computed from it (seed 003 §2.2.2, eqs. 29–37).

:class:`FittedStructured` holds the latent kernel and inducing inputs, the fitted spatial
kernels over their pixel coordinates, the eigendecompositions of the Kronecker factors at the
fitted q(X) (:class:`~gplvm.objectives.kronecker.KronPosterior`, which carries the optimal
q(U)) and the standardisation.  Predictions at deterministic latent points and any pixel
coordinates (eqs. 29–33), the expected images under q(x*) (eq. 34), joint samples, and the
new-image objective (eq. 37 corrected) are functions of it; none forms an n_s × n_s matrix
except :func:`sample`, which draws images jointly over their pixels.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.expectations import psi_statistics
from gplvm.linalg import kron, kron_apply, safe_cholesky
from gplvm.models._rows import map_rows
from gplvm.models.gplvm_family.bound import Problem, bound_and_parts_jit
from gplvm.objectives import kronecker
from gplvm.objectives.collapsed import kl_standard_normal
from gplvm.registry import register
from gplvm.transforms import softplus


@register("gplvm.state.FittedStructured")
class FittedStructured(NamedTuple):
    """A fitted structured GPLVM (standardised units inside, original units via Y_mean, Y_std).

    Attributes:
        kernel, Z: the latent kernel and its inducing inputs (m_ξ, Q).
        spatial: the fitted spatial kernels, one per factor.
        coords, inducing: per factor the pixel coordinates and the fixed spatial inducing
            inputs (None: at the pixels).
        post: :class:`~gplvm.objectives.kronecker.KronPosterior` at the fitted parameters.
        rule: the Ψ-statistic rule.  noise_var: σ² (standardised units).
        Y_mean, Y_std: (n_s·D,) per-pixel means and per-channel scales, pixel-major.
        n_channels: D.
    """

    kernel: Any
    Z: jnp.ndarray
    spatial: list
    coords: tuple
    inducing: tuple
    post: kronecker.KronPosterior
    rule: Any
    noise_var: jnp.ndarray
    Y_mean: np.ndarray
    Y_std: np.ndarray
    n_channels: int


class StructuredSummary(NamedTuple):
    fitted: FittedStructured
    bound: float
    X_mean: np.ndarray
    X_var: np.ndarray


@jax.jit
def _posterior(parts, noise_var):
    return kronecker.posterior(parts.factors, parts.Y, noise_var)


def fitted_from(u: dict, problem: Problem, Y_mean, Y_std) -> StructuredSummary:
    """Evaluate the bound at ``u`` and eigendecompose the factors once for prediction."""
    value, parts, unpacked = bound_and_parts_jit(u, problem)
    route = problem.route
    fitted = FittedStructured(unpacked.kernel, u["Z"], route.spatial_kernels(u["route"]),
                              route.coords, route.inducing,
                              _posterior(parts, unpacked.noise_var), problem.rule,
                              unpacked.noise_var, np.asarray(Y_mean), np.asarray(Y_std),
                              int(route.n_channels))
    return StructuredSummary(fitted, float(value), np.asarray(unpacked.X_mean),
                             np.asarray(unpacked.X_var))


# ---------------------------------------------------------------------------- spatial inputs

def _point_kernel(k, new: bool):
    """The cross-covariance and variance functions of new pixel coordinates: a kernel of pixel
    *areas* (:class:`~gplvm.kernels.BlockAverage`) predicts the field at new points with its
    point-to-block covariance; at the training pixels, and for other kernels, k itself."""
    if new and hasattr(k, "point_cross"):
        return k.point_cross, k.point_diag
    return k, k.diag


def spatial_inputs(fitted: FittedStructured, coords=None):
    """Per spatial factor, K(X*_p, Z_p) and k_p(X*_p, X*_p) at new coordinates (default: the
    training pixels), Z_p the fixed inducing inputs or the training pixels."""
    new = coords is not None
    coords = fitted.coords if coords is None else coords
    K_u, K_diag = [], []
    for k, X_new, X, Z in zip(fitted.spatial, coords, fitted.coords, fitted.inducing):
        X_new = jnp.asarray(X_new)
        cross, diag = _point_kernel(k, new)
        K_u.append(cross(X_new, X if Z is None else Z))
        K_diag.append(diag(X_new))
    return K_u, K_diag


def channel_scale(fitted: FittedStructured) -> np.ndarray:
    """(D,) the per-channel scale of the standardisation."""
    return fitted.Y_std.reshape(-1, fitted.n_channels)[0]


def mean_image(fitted: FittedStructured, coords=None) -> np.ndarray:
    """The standardisation's mean image (n*_s, D) at new coordinates: its per-channel average
    plus kriging of its deviations from that average with the fitted spatial kernels,
    W_p = k_p(X*_p, X_p)(K_p + εI)⁻¹ per factor (ε = 1e-8 of the mean diagonal, only against
    round-off); the mean itself at the pixels.  (Kriging the raw mean image would pull it
    towards 0 between pixels, by as much as the intensities themselves.)"""
    mean = fitted.Y_mean.reshape(-1, fitted.n_channels)
    if coords is None:
        return mean
    level = mean.mean(axis=0)
    maps, sizes = [], []
    for k, X_new, X in zip(fitted.spatial, coords, fitted.coords):
        K = np.asarray(k(jnp.asarray(X)))
        eps = 1e-8 * float(np.mean(np.diag(K)))
        cross = _point_kernel(k, True)[0]
        maps.append(np.linalg.solve(K + eps * np.eye(len(K)),
                                    np.asarray(cross(jnp.asarray(X_new), jnp.asarray(X))).T).T)
        sizes.append(len(K))
    return level + np.asarray(kron_apply(maps, sizes, jnp.asarray(mean - level)))


# ------------------------------------------------------------------------------- predictions

@jax.jit
def _predict_rows(X, kernel, Z, post, K_u, K_diag):
    mean, var = kronecker.predict_points(post, [kernel(X, Z)] + list(K_u),
                                         [kernel.diag(X)] + list(K_diag))
    n = X.shape[0]
    return mean.reshape(n, -1, mean.shape[-1]), var.reshape(n, -1)


def predict(fitted: FittedStructured, X, coords=None, return_var: bool = False):
    """Predictive mean (and variance, noise included) of the images at latent points X and
    pixel coordinates ``coords`` (default: the training pixels), original units (eqs. 32–33).

    Returns:
        mean (N*, n*_s, D) and, with ``return_var``, the variance of the same shape.
    """
    K_u, K_diag = spatial_inputs(fitted, coords)
    mean, var = map_rows(_predict_rows, np.asarray(X, dtype=float), fitted.kernel, fitted.Z,
                         fitted.post, K_u, K_diag)
    scale = channel_scale(fitted)
    mean = mean * scale + mean_image(fitted, coords)
    if not return_var:
        return mean
    return mean, (var[..., None] + float(fitted.noise_var)) * scale**2


@jax.jit
def _expected_rows(rows, kernel, Z, rule, C):
    X_mean, X_var = rows
    _, psi1, _ = psi_statistics(kernel, Z, X_mean, X_var, rule)
    return jnp.einsum("na,asd->nsd", psi1, C)


def expected_y(fitted: FittedStructured, X_mean, X_var) -> np.ndarray:
    """E[y*] = Σ_a ψ1*_a C_a under q(x*) (seed 003 eq. 34), original units, (N*, n_s·D)."""
    C = kronecker.latent_coefficients(fitted.post, spatial_inputs(fitted)[0])[0]
    rows = (np.asarray(X_mean, dtype=float), np.asarray(X_var, dtype=float))
    F = map_rows(_expected_rows, rows, fitted.kernel, fitted.Z, fitted.rule, C)
    return (F * channel_scale(fitted) + mean_image(fitted)).reshape(len(F), -1)


@jax.jit
def _uncertain_rows(rows, kernel, Z, rule, post, K_u, K_diag):
    X_mean, X_var = rows
    psi = psi_statistics(kernel, Z, X_mean, X_var, rule, weights=jnp.eye(X_mean.shape[0]))
    return kronecker.predict_uncertain(post, *psi, K_u, K_diag)


def predict_uncertain(fitted: FittedStructured, X_mean, X_var):
    """Mean and exact marginal variance (noise included) of y at the training pixels under
    q(x*) = N(X_mean, diag X_var) (seed 003 eq. 34 and
    :func:`gplvm.objectives.kronecker.predict_uncertain`), original units, (N*, n_s·D) each."""
    K_u, K_diag = spatial_inputs(fitted)
    rows = (np.asarray(X_mean, dtype=float), np.asarray(X_var, dtype=float))
    mean, var = map_rows(_uncertain_rows, rows, fitted.kernel, fitted.Z, fitted.rule,
                         fitted.post, K_u, K_diag)
    scale = channel_scale(fitted)
    mean = mean * scale + mean_image(fitted)
    var = (var + float(fitted.noise_var)) * scale**2
    return mean.reshape(len(mean), -1), var.reshape(len(var), -1)


# --------------------------------------------- conditioning on the observed pixels of an image

def _spatial_dense(fitted: FittedStructured):
    """The spatial prior K_s and the spatial map ⊗V_p at the training pixels, dense (n_s²)."""
    K_u, _ = spatial_inputs(fitted)
    V_s = kron([kronecker.new_input_map(fitted.post, p + 1, K) for p, K in enumerate(K_u)])
    K_s = kron([k(jnp.asarray(c)) for k, c in zip(fitted.spatial, fitted.coords)])
    return K_s, V_s, K_u


class _Pixels(NamedTuple):
    """Pixels at which a conditioned prediction reads the fitted field: per factor K(X*_p, Z_p)
    and k_p(X*_p, X*_p), the spatial prior between those pixels and the training ones
    (n*_s, n_s), and their spatial map ⊗V_p (n*_s, Π m_p).  At the training pixels themselves
    these are K_u, K_diag, K_s and V_s."""

    K_u: list
    K_diag: list
    K_cross: jnp.ndarray
    V: jnp.ndarray


class _Latent(NamedTuple):
    """What conditioning reads from the fitted model besides the pixels: the latent kernel, its
    inducing inputs Z, the posterior (:class:`~gplvm.objectives.kronecker.KronPosterior`) and
    σ²."""

    kernel: Any
    Z: jnp.ndarray
    post: kronecker.KronPosterior
    noise_var: jnp.ndarray


@jax.jit
def _condition_one(x, y0, observed, latent: _Latent, train: _Pixels, target: _Pixels):
    """One image at latent point x: the joint predictive N(μ, Σ) over its training pixels
    (``train``) and the target pixels (eqs. 30–31; Σ = k_ξ(x, x)K_s − V_s diag(c) V_sᵀ with c
    the latent-weighted variance reduction), then each channel's target pixels conditioned on
    its observed ones, μ_* + Σ_*O(Σ_OO + σ²I)⁻¹(y_O − μ_O).  The unobserved rows and columns of
    Σ_OO + σ²I are replaced by the identity (so one n_s × n_s Cholesky serves any mask under
    jit)."""
    kernel, Z, post, noise_var = latent
    K_u, K_diag, K_s, V_s = train
    X = x[None]
    k_u, k_diag = [kernel(X, Z)], [kernel.diag(X)]
    mean, _ = kronecker.predict_points(post, k_u + list(K_u), k_diag + list(K_diag))
    mean_t, _ = kronecker.predict_points(post, k_u + list(target.K_u),
                                         k_diag + list(target.K_diag))
    V_xi = kronecker.new_input_map(post, 0, kernel(X, Z))[0]
    c = (V_xi**2) @ post.var_weight.reshape(V_xi.shape[0], -1)
    kxx = kernel.diag(X)[0]
    cov = kxx * K_s - (V_s * c) @ V_s.T
    cross = kxx * target.K_cross - (target.V * c) @ V_s.T                  # (n*_s, n_s)
    var_t = kxx * kronecker._kron_vec(list(target.K_diag)) - (target.V**2) @ c
    means, variances = [], []
    for d in range(y0.shape[1]):
        o = observed[:, d]
        A = jnp.outer(o, o) * (cov + noise_var * jnp.eye(len(o))) + jnp.diag(1.0 - o)
        L = jnp.linalg.cholesky(A)
        solve = lambda B: jax.scipy.linalg.cho_solve((L, True), B)   # noqa: E731
        means.append(mean_t[:, d] + cross @ solve(o * (y0[:, d] - mean[:, d])))
        G = solve(o[:, None] * cross.T)
        variances.append(var_t - jnp.sum(cross * (o[None, :] * G.T), axis=1))
    return jnp.stack(means, 1), jnp.stack(variances, 1)


def _targets(fitted: FittedStructured, coords, K_s, V_s) -> _Pixels:
    """The :class:`_Pixels` of new pixel coordinates (None: the training pixels)."""
    if coords is None:
        K_u, K_diag = spatial_inputs(fitted)
        return _Pixels(K_u, K_diag, K_s, V_s)
    K_u, K_diag = spatial_inputs(fitted, coords)
    V = kron([kronecker.new_input_map(fitted.post, p + 1, K) for p, K in enumerate(K_u)])
    K_cross = kron([_point_kernel(k, True)[0](jnp.asarray(c_new), jnp.asarray(c))
                    for k, c_new, c in zip(fitted.spatial, coords, fitted.coords)])
    return _Pixels(K_u, K_diag, K_cross, V)


def condition_on_observed(fitted: FittedStructured, X, Y0, observed, coords=None):
    """Predictive mean and variance (noise included) of each image at pixel coordinates
    ``coords`` (default: the training pixels) given its observed training pixels and its latent
    point X[i] (seed 003 §2.2.2: the predictive Gaussian conditioned on the observed pixels of a
    test image); original units, (N*, n*_s·D) each.  One image at a time, so a row's result
    does not depend on the others."""
    K_s, V_s, K_u = _spatial_dense(fitted)
    train = _Pixels(K_u, spatial_inputs(fitted)[1], K_s, V_s)
    target = _targets(fitted, coords, K_s, V_s)
    latent = _Latent(fitted.kernel, fitted.Z, fitted.post, fitted.noise_var)
    D = fitted.n_channels
    means, variances = [], []
    for x, y, o in zip(np.asarray(X, dtype=float), np.asarray(Y0), np.asarray(observed)):
        m, v = _condition_one(jnp.asarray(x), jnp.asarray(y.reshape(-1, D)),
                              jnp.asarray(o.reshape(-1, D), dtype=float), latent, train,
                              target)
        means.append(np.asarray(m))
        variances.append(np.asarray(v))
    scale = channel_scale(fitted)
    mean = np.stack(means) * scale + mean_image(fitted, coords)
    var = (np.stack(variances) + float(fitted.noise_var)) * scale**2
    return mean.reshape(len(mean), -1), var.reshape(len(var), -1)


def predictive_covariance(fitted: FittedStructured, X) -> np.ndarray:
    """The joint covariance of f over the (image, pixel) pairs of X × training pixels,
    image-major: K** − (⊗V_p) diag(w) (⊗V_p)ᵀ (eqs. 30–31 in the factors' eigenbasis), dense
    (N*·n_s)²."""
    post = fitted.post
    K_u, _ = spatial_inputs(fitted)
    X = jnp.asarray(X)
    V_xi = kronecker.new_input_map(post, 0, fitted.kernel(X, fitted.Z))            # (N*, m_ξ)
    V_s = kron([kronecker.new_input_map(post, p + 1, K) for p, K in enumerate(K_u)])
    w = post.var_weight.reshape(V_xi.shape[1], V_s.shape[1])
    B = jnp.einsum("ik,jk,kl->ijl", V_xi, V_xi, w)                                 # (N*, N*, m_s)
    reduction = jnp.einsum("ijl,sl,tl->isjt", B, V_s, V_s)
    n, n_s = X.shape[0], V_s.shape[0]
    prior = kron([fitted.kernel(X)] + [k(jnp.asarray(c)) for k, c in
                                        zip(fitted.spatial, fitted.coords)])
    return np.asarray(prior - reduction.reshape(n * n_s, n * n_s))


def sample(fitted: FittedStructured, X, key_f, key_noise) -> np.ndarray:
    """Images drawn at latent points X: f ~ q(f | X) jointly over images and pixels (key
    ``key_f``; the D channels independent given the shared covariance), then noise; original
    units, (N*, n_s, D)."""
    K_u, K_diag = spatial_inputs(fitted)
    mean, _ = _predict_rows(jnp.asarray(X), fitted.kernel, fitted.Z, fitted.post, K_u, K_diag)
    cov = predictive_covariance(fitted, X)
    L = np.asarray(safe_cholesky(0.5 * (cov + cov.T), name="predictive covariance").L)
    D = fitted.n_channels
    eps = np.asarray(jax.random.normal(key_f, (L.shape[0], D)))
    F = np.asarray(mean).reshape(-1, D) + L @ eps
    noise = np.asarray(jax.random.normal(key_noise, F.shape)) * np.sqrt(float(fitted.noise_var))
    F = (F + noise).reshape(len(X), -1, D)
    return F * channel_scale(fitted) + mean_image(fitted)


# ---------------------------------------------------------------------------------- new rows

class RowFixed(NamedTuple):
    """What every new image's objective shares: the latent kernel, Z, the rule and σ²."""

    kernel: Any
    Z: jnp.ndarray
    rule: Any
    noise_var: jnp.ndarray


def row_objective(u: dict, fixed: RowFixed, y0, observed, sums: kronecker.NewImageStatistics):
    """The negative new-image bound ℒ* − KL(q(x*) ‖ N(0, I)) of one image (seed 003 eq. 37
    corrected), from its pixel sums ``sums`` (one image's row of
    :func:`gplvm.objectives.kronecker.new_image_statistics`, which already hold y0 and the
    observed mask)."""
    del y0, observed
    X_mean, X_var = u["X_mean"][None], softplus(u["X_var"])[None]
    psi0, psi1, psi2 = psi_statistics(fixed.kernel, fixed.Z, X_mean, X_var, rule=fixed.rule,
                                      weights=jnp.eye(1))
    stats = kronecker.NewImageStatistics(*(s[None] for s in sums))
    value = kronecker.new_image_term_from_statistics(stats, psi0, psi1, psi2, fixed.noise_var)
    return -(value[0] - kl_standard_normal(X_mean, X_var))


@jax.jit
def _statistics_rows(rows, post, K_u, K_diag):
    Y0, observed = rows
    n = Y0.shape[0]
    D = post.coef.shape[-1]
    return kronecker.new_image_statistics(post, K_u, K_diag, Y0.reshape(n, -1, D),
                                          observed.reshape(n, -1, D))


def row_statistics(fitted: FittedStructured, Y0, observed) -> kronecker.NewImageStatistics:
    """Per new image its pixel sums (:class:`~gplvm.objectives.kronecker.NewImageStatistics`
    of NumPy arrays), in fixed blocks of rows (a row's sums do not depend on the other rows in
    the call)."""
    K_u, K_diag = spatial_inputs(fitted)
    return map_rows(_statistics_rows, (np.asarray(Y0), np.asarray(observed)), fitted.post,
                    K_u, K_diag)
