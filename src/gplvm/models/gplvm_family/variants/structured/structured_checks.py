"""The structured GPLVM's checks of its data and arguments, before any computation (issue 13,
issue 31): images of a layout :mod:`.structured_input` accepts, finite and of a workable
magnitude, not all one image, no constant channel, no repeated pixel coordinate, an observed
pixel in every image (and no missing pixel under the ``Coincidence`` spatial kernel, which is
the Bayesian GPLVM), spatial kernels and inducing inputs matching the grid, time stamps and
sequence labels one per image.  Each refusal is a ``ValueError`` naming the problem and the fix.
"""

from __future__ import annotations

import numpy as np

from gplvm._params import check_params
from gplvm._validation import as_float_array, check_magnitude
from gplvm.kernels import Coincidence
from gplvm.models.gplvm_family.estimator import check_inducing
from gplvm.models.gplvm_family.variants.structured.structured_input import image_layout


def _check_channels_and_pixels(Yf: np.ndarray, layout) -> None:
    """Each channel is standardised by its spread over images and pixels, and the spatial
    kernel needs distinct pixel coordinates: a constant channel (noise variance 0, NaN
    imputations) or a grid whose pixels coincide (a singular spatial kernel, a non-finite
    gradient after the first steps) is refused before any computation (issue 31)."""
    channels = Yf.reshape(Yf.shape[0], layout.n_pixels, layout.n_channels)
    with np.errstate(invalid="ignore"):
        spread = np.nanmax(channels, axis=(0, 1)) - np.nanmin(channels, axis=(0, 1))
    flat = np.flatnonzero(~(spread > 0))
    if layout.n_channels > 1 and len(flat):
        raise ValueError(f"channel{'s' if len(flat) > 1 else ''} {', '.join(map(str, flat))} "
                         f"of Y {'are' if len(flat) > 1 else 'is'} constant over every image and "
                         f"pixel; each channel is standardised by its spread: drop "
                         f"{'them' if len(flat) > 1 else 'it'} and add the constant back after")
    for i, coords in enumerate(layout.coords):
        points = np.asarray(coords, dtype=float).reshape(len(coords), -1)
        if len(np.unique(points, axis=0)) < len(points):
            what = (f"axis {i} of the grid" if layout.axes is not None else "the grid")
            raise ValueError(f"{what} repeats a coordinate ({len(points)} pixels at "
                             f"{len(np.unique(points, axis=0))} distinct points); give each "
                             f"pixel its own coordinates")


def validate(est, Y, times, groups):
    """Every check of ``est.fit(Y, times=, groups=)`` before any computation (the
    estimator's arguments included); returns (Y flat, layout, times)."""
    check_params(est)
    Y = as_float_array(Y, "Y")
    product = est.spatial_kernel is None or isinstance(est.spatial_kernel, tuple)
    if isinstance(est.grid, np.ndarray) or (est.grid is not None
                                             and not isinstance(est.grid, tuple)):
        product = False
    layout = image_layout(Y, est.grid, product)
    if np.isinf(Y).any():
        raise ValueError("Y has infinite values; give finite pixel intensities")
    check_magnitude(Y, "Y", "rescale the images (e.g. divide them by their largest "
                            "pixel value)")
    _check_settings(est, Y.shape[0], layout)
    Yf = layout.flatten(Y)
    _check_missing(est, np.isnan(Yf))
    spread = np.nanmax(Yf, axis=0) - np.nanmin(Yf, axis=0)
    if not np.any(spread > 0):
        raise ValueError("Y is the same image repeated; there is nothing to model")
    _check_channels_and_pixels(Yf, layout)
    times = _check_times(times, groups, Y.shape[0])
    check_inducing(est.n_inducing, Y.shape[0], "images")
    return Yf, layout, times


def _check_settings(est, n_images, layout):
    # the family's rule on Q (at most the columns, below the images; 'auto'), with the
    # images as rows and pixels × channels as columns
    est._resolved_components(n_images, layout.n_pixels * layout.n_channels)
    n_factors = len(layout.coords)
    kernels = est.spatial_kernel
    if isinstance(kernels, tuple) and len(kernels) != n_factors:
        raise ValueError(f"spatial_kernel has {len(kernels)} kernels for {n_factors} grid "
                         f"axes; give one per axis, or a single kernel")
    if est.spatial_inducing is not None:
        inducing = est.spatial_inducing
        if n_factors > 1 and not (isinstance(inducing, tuple) and len(inducing) == n_factors):
            raise ValueError(f"spatial_inducing must be a tuple of {n_factors} 1-D arrays "
                             f"(one per image axis) on a product grid")
        if n_factors == 1 and np.asarray(inducing).reshape(len(inducing), -1).shape[1] \
                != np.asarray(layout.coords[0]).reshape(layout.n_pixels, -1).shape[1]:
            raise ValueError("spatial_inducing must have as many columns as the pixel "
                             "coordinates")


def _check_missing(est, missing):
    """Missing pixels: every image needs an observed one; the Coincidence spatial kernel is
    sent to the Bayesian GPLVM, which treats missing entries exactly instead of by the
    mean-field completion."""
    if not missing.any():
        return
    empty = np.flatnonzero(missing.all(axis=1))
    if len(empty):
        raise ValueError(f"Y: training image(s) {empty[:5].tolist()} have no observed "
                         f"pixel; drop them (they carry no information about the model)")
    kernels = est.spatial_kernel if isinstance(est.spatial_kernel, tuple) else (
        est.spatial_kernel,)
    if any(isinstance(k, Coincidence) for k in kernels):
        raise ValueError("missing pixels with the Coincidence spatial kernel: that model "
                         "is the Bayesian GPLVM, which handles missing entries exactly; "
                         "use gplvm.BayesianGPLVM on the flattened images")


def _check_times(times, groups, n_images):
    if times is None:
        if groups is not None:
            raise ValueError("groups labels independent sequences of the dynamical prior; "
                             "pass times as well")
        return None
    times = as_float_array(times, "times", "(n_samples,)").ravel()
    if times.shape[0] != n_images or not np.all(np.isfinite(times)):
        raise ValueError(f"times must be {n_images} finite time stamps, one per image; got "
                         f"shape {np.shape(times)}")
    if groups is not None and np.asarray(groups).ravel().shape[0] != n_images:
        raise ValueError("groups must give one sequence label per image")
    return times
