"""Pieces shared by the estimators: default feature maps, masks, fitted-state checks, the
precision a fitted model computes in."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import NotFittedError

from gplvm._config import precision
from gplvm._validation import as_2d_float, check_new_values
from gplvm.features import AbstractFeatureMap, RandomFourierFeatures
from gplvm.kernels import RBF
from gplvm.kernels.lengthscale import median_distance


def check_is_fitted(model, attribute: str) -> None:
    if not hasattr(model, attribute):
        raise NotFittedError(f"this {type(model).__name__} is not fitted yet; call fit first")


def new_rows(model, Y, fitted_attribute: str) -> np.ndarray:
    """New rows for a fitted latent-variable model (NaN marks a missing entry): checked to be
    fitted, a float matrix with the fit's columns and values of a workable magnitude."""
    check_is_fitted(model, fitted_attribute)
    Y = as_2d_float(Y, "Y", allow_nan=True)
    if Y.shape[1] != model.n_features_in_:
        raise ValueError(f"Y has {Y.shape[1]} columns but the model was fitted on "
                         f"{model.n_features_in_}; pass rows with the same columns")
    check_new_values(Y, "Y")
    return Y


def in_model_precision(method):
    """Run a method of a fitted model in the precision it was fitted in (float32 or float64),
    whatever the process's precision now: a float32 model used in a float64 process (or after
    ``gplvm.load`` there), or the reverse, computes as it was fitted instead of mixing dtypes
    or rounding its parameters (issue 31).  Outputs come in the model's precision.

    The fitted precision is the dtype of the fitted array the class names in
    ``_precision_attribute`` (default ``X_mean_``); an unfitted model runs the method as it
    is (the method itself says it is not fitted)."""
    @functools.wraps(method)
    def in_precision(self, *args, **kwargs):
        reference = getattr(self, getattr(self, "_precision_attribute", "X_mean_"), None)
        if reference is None:
            return method(self, *args, **kwargs)
        fitted = "float32" if np.asarray(reference).dtype == np.float32 else "float64"
        with precision(fitted):
            return method(self, *args, **kwargs)

    return in_precision


def default_features(X: np.ndarray, n_features: int, key, ard: bool = False
                     ) -> AbstractFeatureMap:
    """Random Fourier features of an RBF kernel, length-scale at the median distance, variance 1."""
    ell = median_distance(X)
    lengthscale = jnp.full(X.shape[1], ell) if ard else jnp.asarray(ell)
    return RandomFourierFeatures.create(RBF(lengthscale=lengthscale, variance=1.0), n_features,
                                        X.shape[1], key)


def freeze_feature_variance(u):
    """Stop gradients through feature-map variances.

    In a linear model the prior variance of the weights and the kernel variance inside φ play the
    same role; only the former is learned, so the two are identifiable.
    """
    def mask(path, leaf):
        last = path[-1] if path else None
        is_var = isinstance(last, jax.tree_util.DictKey) and last.key == "variance"
        return jax.lax.stop_gradient(leaf) if is_var else leaf

    return jax.tree_util.tree_map_with_path(mask, u)


def block_expand(values, blocks) -> jnp.ndarray:
    """Repeat one value per block to one value per feature."""
    return jnp.repeat(jnp.asarray(values), jnp.asarray(blocks), total_repeat_length=sum(blocks))


def check_features(features, n_columns: int) -> None:
    """A user's feature map must be a gplvm feature map reading X's columns."""
    if features is None:
        return
    if not isinstance(features, AbstractFeatureMap):
        raise ValueError(f"features must be a gplvm.features map (or None for the default "
                         f"random Fourier features); got {type(features).__name__}")
    if features.input_dim != n_columns:
        raise ValueError(f"the feature map expects {features.input_dim} input columns but X "
                         f"has {n_columns}; build it with input_dim={n_columns} or wrap it in "
                         f"ColumnSubset")
