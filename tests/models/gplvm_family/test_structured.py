"""StructuredGPLVM (seed 003, issue 13): the estimator over the Kronecker core.

Truths used: a planted one-dimensional structure (a blob moving along the rows of small
images) recovered by the dominant latent dimension; the Coincidence spatial kernel makes the
model the Bayesian GPLVM on the flattened images, so the two bounds agree at the same parameters;
the fitted q(x_n) is a stationary point of the new-image bound at the optimal q(U) (envelope
theorem), so ``transform`` of a training image returns its latent; a smooth planted field is
interpolated on a finer grid better than by nearest-neighbour upsampling; the pixel sums of
eq. 37 (``new_image_statistics``) reproduce ``new_image_term`` exactly; with missing pixels, a
spatial axis at white noise (σ²I) is a valid kernel, and an image's observed pixels predict its
hidden ones better than the pixels' means.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import spearmanr

import gplvm
from gplvm.pytree import replace
from gplvm.data import load_digits
from gplvm.expectations import psi_statistics
from gplvm.kernels import RBF, Coincidence, Matern32
from gplvm.models.gplvm_family.variants.structured import structured_fitted as sf
from gplvm.models.gplvm_family.bound import bound_and_parts_jit
from gplvm.objectives import kronecker

H, W = 6, 7
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def blob(t, rows=None, cols=None):
    """Images of a Gaussian blob whose row position is 1 + t (t in [0, 3]): a smooth field
    with one planted latent coordinate."""
    rows = np.arange(H, dtype=float) if rows is None else rows
    cols = np.arange(W, dtype=float) if cols is None else cols
    r, c = np.meshgrid(rows, cols, indexing="ij")
    t = np.asarray(t, dtype=float)[:, None, None]
    return np.exp(-((r - 1.0 - t) ** 2 + (c - 3.0) ** 2) / 4.0)


@pytest.fixture(scope="module")
def planted():
    rng = np.random.default_rng(0)
    t = rng.uniform(0.0, 3.0, size=30)
    Y = blob(t) + 0.02 * rng.normal(size=(30, H, W))
    model = gplvm.StructuredGPLVM(n_components=2, n_inducing=10, max_iter=300,
                                  progress=False).fit(Y)
    return t, Y, model


def test_planted_structure_is_recovered(planted):
    """The most relevant latent dimension orders the images as the blob's position does."""
    t, _, model = planted
    x = model.X_mean_[:, np.argmax(model.relevance_)]
    assert abs(spearmanr(x, t)[0]) >= 0.95
    assert model.noise_var_[0] < 0.05**2        # the planted noise is 0.02²; the field is fitted
    Ys, Xs = model.sample(2)
    assert Ys.shape == (2, H, W) and Xs.shape == (2, 2)


def test_fixed_spatial_inducing_at_the_pixels_is_the_pixel_route(planted):
    """Fixed spatial inducing inputs placed on the pixels make the Nyström approximation exact
    (K_us = K_uu = K_s), so the bound equals that of inducing inputs at the pixels at the same
    parameters; the estimator accepts such a grid and fits with it."""
    _, Y, model = planted
    route = model._problem.route
    fixed = replace(route, inducing=route.coords)
    value = float(bound_and_parts_jit(model.params_, model._problem._replace(route=fixed))[0])
    assert value == pytest.approx(model.elbo_, rel=1e-8)
    other = gplvm.StructuredGPLVM(n_components=2, n_inducing=10, max_iter=5, progress=False,
                                  spatial_inducing=(np.array([0.5, 2.5, 4.5]),
                                                    np.array([1.0, 3.0, 5.0])))
    assert np.isfinite(other.fit(Y).elbo_)


def test_transform_recovers_training_latents(planted):
    """q(x_n) maximises the new-image bound at the fitted q(U) (envelope theorem), so
    transform of training images returns their fitted latents along the used (most relevant)
    dimension, up to the optimisers' tolerance; a switched-off dimension is seen only through
    the KL, whose slope there is too flat to pin within the fit's iterations."""
    _, Y, model = planted
    q = np.argmax(model.relevance_)
    X = model.transform(Y[:6])
    spread = np.std(model.X_mean_[:, q])
    assert np.max(np.abs(X[:, q] - model.X_mean_[:6, q])) < 0.01 * spread


def test_missing_training_pixels(planted):
    """A third of the training pixels missing at random: the mean-field completion keeps the
    planted latent order, and imputing the training images fills their missing pixels to the
    planted noise level (0.02), far below the pixel means' error."""
    t, Y, _ = planted
    rng = np.random.default_rng(3)
    masked = Y.copy()
    masked[rng.uniform(size=Y.shape) < 1 / 3] = np.nan
    model = gplvm.StructuredGPLVM(n_components=2, n_inducing=10, max_iter=150,
                                  progress=False).fit(masked)
    assert np.isfinite(model.elbo_)
    x = model.X_mean_[:, np.argmax(model.relevance_)]
    assert abs(spearmanr(x, t)[0]) >= 0.95
    filled = model.impute(masked[:8])
    missing = np.isnan(masked[:8])
    rmse = np.sqrt(np.mean((filled[missing] - Y[:8][missing]) ** 2))
    baseline = np.sqrt(np.mean((np.nanmean(masked, 0)[None].repeat(8, 0)[missing]
                                - Y[:8][missing]) ** 2))
    assert rmse < 0.05 and rmse < 0.3 * baseline


def test_impute_beats_column_means(planted):
    """New images (positions not in the training set) with half their pixels missing."""
    t, Y, model = planted
    rng = np.random.default_rng(1)
    truth = blob(rng.uniform(0.2, 2.8, size=8))
    masked = truth.copy()
    for img in masked:
        img.ravel()[rng.permutation(H * W)[: H * W // 2]] = np.nan
    filled = model.impute(masked)
    missing = np.isnan(masked)
    assert filled.shape == masked.shape and not np.isnan(filled).any()
    assert np.array_equal(filled[~missing], masked[~missing])
    means = np.broadcast_to(Y.mean(0), truth.shape)
    rmse = np.sqrt(np.mean((filled[missing] - truth[missing]) ** 2))
    baseline = np.sqrt(np.mean((means[missing] - truth[missing]) ** 2))
    assert rmse < 0.3 * baseline


def test_conditioning_on_observed_pixels(planted):
    """impute's conditional Gaussian: the joint covariance's diagonal is predict's variance
    (less the noise), and the filled pixels and their variances are the textbook conditioning
    μ_M + Σ_MO(Σ_OO + σ²I)⁻¹(y_O − μ_O) done here with explicit index sets."""
    _, Y, model = planted
    fitted = model.fitted_
    x = model.X_mean_[3:4]
    cov = sf.predictive_covariance(fitted, x) * sf.channel_scale(fitted)[0] ** 2
    mean, var = model.predict(x, return_var=True)
    np.testing.assert_allclose(np.diag(cov), var.ravel() - model.noise_var_[0], rtol=1e-8)
    rng = np.random.default_rng(6)
    y = Y[5].ravel().copy()
    miss = rng.permutation(H * W)[:20]
    obs = np.setdiff1d(np.arange(H * W), miss)
    S = cov + model.noise_var_[0] * np.eye(H * W)
    mu = mean.ravel()
    ref_mean = mu[miss] + cov[np.ix_(miss, obs)] @ np.linalg.solve(S[np.ix_(obs, obs)],
                                                                   y[obs] - mu[obs])
    ref_var = S[miss, miss] - np.einsum("ij,ji->i", cov[np.ix_(miss, obs)], np.linalg.solve(
        S[np.ix_(obs, obs)], cov[np.ix_(obs, miss)]))
    ys = (y - model.Y_mean_) / model.Y_std_
    observed = np.ones(H * W, bool)
    observed[miss] = False
    got_mean, got_var = sf.condition_on_observed(fitted, x, np.where(observed, ys, 0)[None],
                                                 observed[None])
    np.testing.assert_allclose(got_mean[0, miss], ref_mean, rtol=1e-7)
    np.testing.assert_allclose(got_var[0, miss], ref_var, rtol=1e-7)


def test_finer_grid_beats_nearest_neighbour(planted):
    """At half-pixel coordinates the predicted field at the fitted latents is closer to the
    planted blob than the nearest training pixel's value."""
    t, Y, model = planted
    fine_r, fine_c = np.arange(0, H - 0.9, 0.5), np.arange(0, W - 0.9, 0.5)
    pred = model.predict(model.X_mean_, grid=(fine_r, fine_c))
    assert pred.shape == (30, len(fine_r), len(fine_c))
    truth = blob(t, fine_r, fine_c)
    nearest = Y[:, np.floor(fine_r + 0.5).astype(int)][:, :, np.floor(fine_c + 0.5).astype(int)]
    assert np.sqrt(np.mean((pred - truth) ** 2)) < 0.5 * np.sqrt(np.mean((nearest - truth)**2))
    _, var = model.predict(model.X_mean_[:2], grid=(fine_r, fine_c), return_var=True)
    assert np.all(var > 0)


def test_prediction_given_observed_pixels_at_a_new_grid(planted):
    """predict(..., given=): at the training pixels given as a new grid it is the conditioning
    at the training grid (the same Gaussian); conditioning on half the pixels of images never
    seen lowers the variance and the error against the planted field at half-pixel
    coordinates."""
    _, _, model = planted
    fine = (np.arange(0, H - 0.9, 0.5), np.arange(0, W - 0.9, 0.5))
    rng = np.random.default_rng(2)
    t_new = rng.uniform(0.2, 2.8, size=3)
    half = blob(t_new)
    half[rng.uniform(size=half.shape) < 0.5] = np.nan
    X_new = model.transform(half)
    at_train = model.predict(X_new, given=half, return_var=True)
    as_grid = model.predict(X_new, grid=(np.arange(H, dtype=float), np.arange(W, dtype=float)),
                            given=half, return_var=True)
    for a, b in zip(at_train, as_grid):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-8)
    cond = model.predict(X_new, grid=fine, given=half, return_var=True)
    free = model.predict(X_new, grid=fine, return_var=True)
    assert np.all(cond[1] <= free[1] * (1 + 1e-9))
    truth = blob(t_new, *fine)
    assert np.mean((cond[0] - truth) ** 2) < np.mean((free[0] - truth) ** 2)
    with pytest.raises(ValueError, match="one image per row of X"):
        model.predict(X_new[:2], given=half)


def test_coincidence_kernel_bound_is_the_bayesian_gplvm():
    """With K_s = σ_c²I the fitted bound equals the Bayesian GPLVM's bound (the family's dense
    route) on the flattened images at the same parameters: latent variance σ_ξ²σ_c²."""
    rng = np.random.default_rng(2)
    Y = blob(rng.uniform(0, 3, 12)) + 0.05 * rng.normal(size=(12, H, W))
    model = gplvm.StructuredGPLVM(n_components=2, n_inducing=5, spatial_kernel=Coincidence(),
                                  standardize=False, max_iter=10, transform_max_iter=20,
                                  progress=False).fit(Y)
    flat = Y.reshape(12, -1)
    dense = gplvm.BayesianGPLVM(n_components=2, n_inducing=5, standardize=False, max_iter=1,
                                progress=False).fit(flat)
    u = model.params_
    k, c = model.kernel_, model.spatial_kernel_[0]
    u_dense = {key: u[key] for key in ("Z", "noise_var", "X_mean", "X_var")}
    u_dense["kernel"] = RBF(lengthscale=k.lengthscale,
                            variance=k.variance * c.variance).unconstrained()
    problem = dense._problem._replace(jitter=model.jitter_)
    ref = float(bound_and_parts_jit(u_dense, problem)[0])
    assert model.elbo_ == pytest.approx(ref, rel=1e-9)
    # pixels are independent given x* under K_s = σ_c²I: conditioning on the observed pixels
    # leaves the prediction of the missing ones at the point prediction
    masked = Y[:2].copy()
    masked[:, :2] = np.nan
    filled = model.impute(masked)
    point = model.predict(model.transform(masked))
    np.testing.assert_allclose(filled[:, :2], point[:, :2], rtol=1e-9)


def test_new_image_statistics_equal_new_image_term():
    """ℒ* from the once-per-image pixel sums equals kronecker.new_image_term (tested against
    a dense eq. 37 in test_kronecker_bound) on images with 2 channels and missing pixels."""
    rng = np.random.default_rng(4)
    n, Q, m = 5, 2, 4
    rows, cols = np.arange(3.0), np.arange(4.0)
    k = RBF(lengthscale=jnp.array([1.2, 0.7]), variance=1.3)
    Z, mu, S = rng.normal(size=(m, Q)), rng.normal(size=(n, Q)), rng.uniform(0.1, 0.3, (n, Q))
    spatial = [Matern32(lengthscale=1.3), Matern32(lengthscale=2.0, variance=0.7)]
    Y = rng.normal(size=(n, 12, 2))
    for inducing in (None, [np.array([0.5, 1.5]), np.array([0.0, 2.0, 3.0])]):
        factors = [kronecker.latent_factor(*psi_statistics(k, Z, mu, S), k(Z))]
        factors += kronecker.spatial_factors(spatial, [rows, cols], inducing)
        post = kronecker.posterior(factors, jnp.asarray(Y), 0.2)
        Zs = [rows, cols] if inducing is None else inducing
        K_u = [s(x, z) for s, x, z in zip(spatial, [rows, cols], Zs)]
        K_d = [s.diag(x) for s, x in zip(spatial, [rows, cols])]
        Y_new, X_new = rng.normal(size=(3, 12, 2)), rng.normal(size=(3, Q))
        Y_new[rng.random(Y_new.shape) < 0.4] = np.nan
        psi = psi_statistics(k, Z, X_new, np.full((3, Q), 0.2), weights=jnp.eye(3))
        got, ref = _both_terms(post, psi, K_u, K_d, jnp.asarray(Y_new))
        np.testing.assert_allclose(got, ref, rtol=1e-10)


@jax.jit
def _both_terms(post, psi, K_u, K_d, Y_new):
    ref = kronecker.new_image_term(post, *psi, K_u, K_d, Y_new, 0.2)
    observed = ~jnp.isnan(Y_new)
    stats = kronecker.new_image_statistics(post, K_u, K_d, jnp.where(observed, Y_new, 0.0),
                                           observed)
    return kronecker.new_image_term_from_statistics(stats, *psi, 0.2), ref


def test_point_grid_layout_and_channels():
    """(n_images, n_pixels, channels) with grid= coordinates (one spatial factor over 2-D
    points): the model's columns and predictions keep the layout."""
    rng = np.random.default_rng(5)
    t = rng.uniform(0, 3, 10)
    img = blob(t).reshape(10, -1)
    Y = np.stack([img, 0.5 * img], -1) + 0.02 * rng.normal(size=(10, H * W, 2))
    r, c = np.meshgrid(np.arange(H, dtype=float), np.arange(W, dtype=float), indexing="ij")
    grid = np.stack([r.ravel(), c.ravel()], 1)
    model = gplvm.StructuredGPLVM(n_components=1, n_inducing=5, grid=grid, max_iter=10,
                                  progress=False).fit(Y)
    assert model.n_features_in_ == H * W * 2
    assert model.predict(model.X_mean_[:2]).shape == (2, H * W, 2)
    assert model.predict(model.X_mean_[:2], grid=grid[:5] + 0.5).shape == (2, 5, 2)


def test_dynamical_prior_over_frame_times():
    """Frames of a blob moving steadily in time, one frame held out: under the GP prior over
    frame times, predict_times at the held-out time is closer to the planted frame than the
    nearest observed frame is."""
    t = np.linspace(0.0, 3.0, 16)
    Y = blob(t) + 0.02 * np.random.default_rng(7).normal(size=(16, H, W))
    keep = np.arange(16) != 7
    model = gplvm.StructuredGPLVM(n_components=2, n_inducing=8, max_iter=150,
                                  progress=False).fit(Y[keep], times=t[keep])
    _, _, frame = model.predict_times(t[7:8])
    nearest = Y[6]
    truth = blob(t[7:8])[0]
    assert np.sqrt(np.mean((frame[0] - truth) ** 2)) < np.sqrt(np.mean((nearest - truth) ** 2))


def test_bad_input_raises_before_computation(planted):
    Y = blob(np.linspace(0, 3, 8))
    make = lambda **kw: gplvm.StructuredGPLVM(n_components=2, progress=False, **kw)  # noqa
    bad = Y.copy()
    bad[0, 1, 1] = np.nan
    with pytest.raises(ValueError, match="missing pixels with the Coincidence .*BayesianGPLVM"):
        make(spatial_kernel=Coincidence()).fit(bad)
    bad[2] = np.nan
    with pytest.raises(ValueError, match=r"image\(s\) \[2\] have no observed pixel; drop"):
        make().fit(bad)
    bad[2] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        make().fit(bad)
    with pytest.raises(ValueError, match="n_images, height, width"):
        make().fit(Y.reshape(8, -1))
    with pytest.raises(ValueError, match="grid has 5 pixel coordinates"):
        make(grid=np.zeros((5, 2))).fit(Y.reshape(8, -1))
    with pytest.raises(ValueError, match="axes of lengths"):
        make(grid=(np.arange(3.0), np.arange(W))).fit(Y)
    with pytest.raises(ValueError, match="one per axis"):
        make(spatial_kernel=(Matern32(),)).fit(Y)
    with pytest.raises(ValueError, match="times must be 8"):
        make().fit(Y, times=np.arange(5.0))
    with pytest.raises(ValueError, match="at least 3"):
        make().fit(Y[:2])
    n_pixels = Y[0].size        # the family's rule on Q: at most the columns (issue 32)
    with pytest.raises(ValueError, match=f"n_components={n_pixels + 1} exceeds the {n_pixels} "
                                         f"column"):
        gplvm.StructuredGPLVM(n_components=n_pixels + 1, n_inducing=5,
                              progress=False).fit(np.tile(Y, (n_pixels // 8 + 1, 1, 1)))
    with pytest.raises(ValueError, match="images of shape"):
        planted[2].transform(Y[:, :4])


def test_area_kernel_predicts_points_at_new_coordinates(planted):
    """With a BlockAverage spatial kernel (pixels as block means), the covariances with the
    training pixels are the block kernel's, and those of new coordinates are its point-to-block
    covariances and point variances (the field itself), per factor."""
    from gplvm.kernels import BlockAverage
    fitted = planted[2].fitted_
    blocks = [BlockAverage(k) for k in fitted.spatial]
    area = fitted._replace(spatial=blocks)
    K_u, K_diag = sf.spatial_inputs(area)
    new = (np.arange(0, H - 0.9, 0.5), np.arange(0, W - 0.9, 0.5))
    P_u, P_diag = sf.spatial_inputs(area, new)
    for p, (b, c) in enumerate(zip(blocks, fitted.coords)):
        np.testing.assert_allclose(K_u[p], b(c, c), rtol=1e-12)
        np.testing.assert_allclose(K_diag[p], b.diag(c), rtol=1e-12)
        np.testing.assert_allclose(P_u[p], b.point_cross(new[p], c), rtol=1e-12)
        np.testing.assert_allclose(P_diag[p], b.kernel.diag(new[p]), rtol=1e-12)


def test_a_constant_channel_or_coinciding_pixels_are_refused_before_fitting(forbid_computation):
    """A channel constant over every image (its standardising spread 0: noise variance 0, NaN
    imputations) and a grid whose pixels coincide (a singular spatial kernel) are refused
    with the fix named, before any computation (issue 31)."""
    from gplvm.models import structured

    StructuredGPLVM = gplvm.StructuredGPLVM
    forbid_computation(structured, "as_key")
    rng = np.random.default_rng(0)
    images = rng.normal(size=(6, 4, 3, 2))
    images[..., 1] = 0.5
    kw = dict(n_components=2, n_inducing=3, max_iter=2, progress=False)
    with pytest.raises(ValueError, match="channel 1 of Y is constant over every image"):
        StructuredGPLVM(**kw).fit(images)
    flat = rng.normal(size=(6, 5))
    with pytest.raises(ValueError, match=r"the grid repeats a coordinate \(5 pixels at 1 "):
        StructuredGPLVM(grid=np.zeros((5, 1)), **kw).fit(flat)
    with pytest.raises(ValueError, match="axis 1 of the grid repeats a coordinate"):
        StructuredGPLVM(grid=(np.arange(4.0), np.array([0.0, 1.0, 1.0])), **kw).fit(
            rng.normal(size=(6, 4, 3)))


def test_missing_pixels_with_a_spatial_axis_at_white_noise():
    """Issue 32: on digits with 30 % of the pixels missing the fit stopped on a non-finite
    gradient once the column axis's length-scale fell far below the pixel spacing.  That axis's
    Gram matrix is then σ²I, a valid kernel (independent columns) with one repeated eigenvalue,
    at which autodiff through the missing-pixel term's ``eigh`` divides by zero.  Started there
    (length-scale 0.02: neighbours' correlation e^-86 underflows to 0) on 60 digits whose edge
    columns are always 0, the bound and its gradient stay finite for every iteration (before the
    fix: a non-finite gradient at the start), and the hidden pixels, conditioned on each image's
    observed ones, beat each pixel's observed mean (an independent baseline)."""
    Y = load_digits().Y[:60].reshape(-1, 8, 8)
    assert (Y[:, 1:6, 0] == 0).all() and (Y[:, 1:6, 7] == 0).all()     # always-zero edges
    hidden = np.random.default_rng(0).random(Y.shape) < 0.3
    masked = np.where(hidden, np.nan, Y)
    model = gplvm.StructuredGPLVM(n_components=3, n_inducing=10, max_iter=30, progress=False,
                                  spatial_kernel=(Matern32(lengthscale=1.0),
                                                  Matern32(lengthscale=0.02)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)        # a rejected non-finite step
        model.fit(masked)
    assert model.n_iter_ == 30 and np.all(np.isfinite(model.history_))
    assert np.isfinite(model.elbo_)
    filled = model.predict(model.X_mean_, given=masked)
    rmse = np.sqrt(np.mean((filled[hidden] - Y[hidden]) ** 2))
    means = np.broadcast_to(np.nanmean(masked, axis=0), Y.shape)
    baseline = np.sqrt(np.mean((means[hidden] - Y[hidden]) ** 2))
    assert rmse < 0.85 * baseline
