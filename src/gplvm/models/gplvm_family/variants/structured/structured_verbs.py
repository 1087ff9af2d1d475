"""The structured GPLVM's verbs on images (seed 003 §2.2.2, eqs. 29–35): ``impute`` (each
image's missing pixels from the joint predictive Gaussian conditioned on its observed ones),
``predict`` at latent points and any pixel grid (optionally conditioned on given images:
super-resolution), ``inverse_transform`` and ``predict_times`` (dynamical prior) — a mixin of
:class:`gplvm.StructuredGPLVM`, the numbers made in :mod:`.structured_fitted`.
"""

from __future__ import annotations

import numpy as np

from gplvm.models._common import check_is_fitted, in_model_precision
from gplvm.models.gplvm_family.variants.structured import structured_fitted as sf
from gplvm.models.gplvm_family.latent import DynamicalLatent


class ImageVerbs:
    """The image verbs of a fitted ``StructuredGPLVM`` (it has ``fitted_``, ``params_``,
    ``_problem``, ``_layout`` and the family's ``_check_X``, ``_infer_new`` and
    ``_standardise_new``)."""

    @in_model_precision
    def _standardise_new(self, Y):
        check_is_fitted(self, "fitted_")
        return super()._standardise_new(self._layout.flatten(Y))

    @in_model_precision
    def impute(self, Y, return_var: bool = False):
        """A copy of the images Y with their NaN pixels replaced by posterior predictive means,
        in Y's shape: q(x*) from the observed pixels (:meth:`transform`), then the joint
        predictive Gaussian over the image's pixels at x* = E[x*] conditioned on its observed
        pixels (seed 003 §2.2.2), which is where a spatial kernel helps beyond the Bayesian
        GPLVM.  Images without missing pixels come back unchanged.

        Args:
            return_var: also return the predictive variance of each filled entry (noise
                included; 0 where Y is observed), original units.
        """
        Yf, Ys = self._standardise_new(Y)
        filled, var = Yf.copy(), np.zeros_like(Yf)
        missing = np.isnan(Yf)
        rows = np.flatnonzero(missing.any(axis=1))
        if len(rows):
            X_mean = self._infer_new(Ys[rows])[0]
            mean, v = sf.condition_on_observed(self.fitted_, X_mean, np.nan_to_num(Ys[rows]),
                                               ~missing[rows])
            filled[rows] = np.where(missing[rows], mean, Yf[rows])
            var[rows] = np.where(missing[rows], v, 0.0)
        shape = np.shape(Y)
        return (filled.reshape(shape), var.reshape(shape)) if return_var else filled.reshape(shape)

    @in_model_precision
    def predict(self, X, return_var: bool = False, *, grid=None, given=None):
        """Predictive mean (and variance, noise included) of the images at latent points X
        (N*, Q) and at the pixel coordinates ``grid`` (default: the training pixels; a tuple
        of axes on images, an (n*_s, d_s) array otherwise) — any resolution (eqs. 29–33).
        Returns images in the layout of the training data.  ``return_var`` is second, as in
        every estimator (``predict(X, True)`` returns the mean and the variance); ``grid``
        and ``given`` are keyword-only.

        Args:
            given: optional images (N*, ...) at the training pixels, NaN where unobserved:
                each prediction is then the predictive Gaussian of image i at X[i]
                conditioned on the observed pixels of ``given[i]`` (seed 003 §2.2.2) — e.g.
                super-resolution: ``predict(transform(Y_low), grid=fine, given=Y_low)``.
        """
        X = self._check_X(X)
        if grid is None:
            coords, shape = None, tuple(self._layout.tail)
        else:
            coords, shape = self._layout.new_coords(grid)
        if given is not None:
            _, Ys = self._standardise_new(given)
            if len(Ys) != len(X):
                raise ValueError(f"given has {len(Ys)} images for {len(X)} latent points; "
                                 f"give one image per row of X")
            mean, var = sf.condition_on_observed(self.fitted_, X, np.nan_to_num(Ys),
                                                 ~np.isnan(Ys), coords)
            out = (mean, var) if return_var else mean
        else:
            out = sf.predict(self.fitted_, X, coords, return_var)
        if not return_var:
            return out.reshape((len(X),) + shape)
        return out[0].reshape((len(X),) + shape), out[1].reshape((len(X),) + shape)

    def inverse_transform(self, X):
        """The predictive mean of the images at latent points X."""
        return self.predict(X)

    def predict_times(self, t_new, sequence: int = 0):
        """Latent trajectory and expected images at new frame times of one training sequence
        (dynamical prior; seed 003 eqs. 35 and 34).  Returns (X_mean, X_var, images)."""
        check_is_fitted(self, "fitted_")
        latent = self._problem.latent
        if not isinstance(latent, DynamicalLatent):
            raise ValueError("predict_times needs a model fitted with times= (dynamical prior)")
        X_mean, X_var = (np.asarray(a) for a in latent.predict(self.params_, t_new, sequence))
        images = sf.expected_y(self.fitted_, X_mean, X_var)
        return X_mean, X_var, images.reshape((len(X_mean),) + tuple(self._layout.tail))
