"""The RFLVM's verbs after fitting: latents of new rows (``transform``), the posterior
predictive mean at latent points (``predict`` / ``inverse_transform``), ``impute``,
``score``, ``sample``, ``dropped_columns_`` and ``to_arviz``, with their helpers over the
stored draws of the map (:mod:`.predict`).  A mixin of :class:`gplvm.RFLVM`, so that its
module keeps to the estimator.  It is a ``TransformerMixin`` so that scikit-learn wraps its
``transform`` and ``fit_transform`` for ``set_output`` (it wraps a class's own methods only)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import TransformerMixin

from gplvm._params import POSITIVE_INT, RANDOM_STATE, check_argument
from gplvm._random import as_key
from gplvm._validation import as_1d_float, kept_columns, standardise_kept
from gplvm.likelihoods import get_likelihood
from gplvm.models._common import check_is_fitted, in_model_precision, new_rows
from gplvm.models._rows import map_rows
from gplvm.models.rflvm import predict as pred
from gplvm.models.rflvm.checks import check_latent_points
from gplvm.models.rflvm.columns import narrow, widen
from gplvm.models.rflvm.inference_data import inference_data
from gplvm.models.rflvm.init import prepare_data
from gplvm.models.rflvm.loglik import likelihood_object

#: at most this many stored draws of the map infer the latents of new rows
MAX_NEW_ROW_DRAWS = 50


class RFLVMVerbs(TransformerMixin):
    """``transform``, ``fit_transform``, ``predict`` (``inverse_transform``), ``impute``,
    ``score``, ``sample``, ``dropped_columns_``, ``to_arviz`` and the input tag that lets
    rows contain NaN; the estimator has the fitted
    ``_draws_``, ``_spec_``, ``_data_``, ``_train_Y_``, ``Y_mean_``, ``Y_std_``,
    ``n_features_in_``, ``n_outputs_``, ``X_mean_``, ``fit`` and the constructor arguments.

    The RFLVM's fitted value, what a file holds (docs/contract.md), is declared here, beside
    the verbs that read it (the estimator's module is at its length limit).  Its private
    fields: ``_spec_``, ``_data_`` and ``_u_``, the sweep's settings, prepared data and
    inducing times; ``_key_run_`` and ``_result_``, the run's key and raw chains (draws, chain
    states, trace), which ``resume`` continues; ``_train_Y_``, the training data
    (``impute``'s exact test for them); ``_draws_``, the heavy draws aligned to one frame,
    kept although ``_result_`` holds them unaligned: the alignment (generalised Procrustes,
    SVDs) redone by another machine's LAPACK could differ in the last bits, and a loaded model
    must predict as the saved one did, bit for bit.  The light draws of ``to_arviz`` (α) are
    read from ``_result_`` when asked for."""

    _fitted_fields = ("n_features_in_", "feature_names_in_", "Y_mean_", "Y_std_", "n_outputs_",
                      "_spec_", "_data_", "_u_", "_key_run_", "_train_Y_", "mode_start_",
                      "_result_", "n_iter_", "interrupted_", "history_", "sampler_info_",
                      "accept_rate_", "X_samples_", "X_mean_", "_draws_", "X_var_",
                      "W_samples_", "beta_samples_", "noise_var_", "dispersion_", "relevance_",
                      "convergence_", "converged_")
    #: the data's column names, which ``gplvm fit`` gives the model; the mode searches'
    #: summary, of ``sampler='nuts'`` and ``inference='map'`` fits only
    _optional_fields = ("feature_names_in_", "mode_start_")

    def _map_draws(self, subset: bool = False):
        """Stored draws of the map; ``subset``: at most ``MAX_NEW_ROW_DRAWS`` evenly spaced ones
        (inferring new rows costs an elliptical-slice run per draw)."""
        d = self._draws_
        n = d["W"].shape[0]
        idx = (np.unique(np.linspace(0, n - 1, min(n, MAX_NEW_ROW_DRAWS)).round().astype(int))
               if subset else np.arange(n))
        return (jnp.asarray(d["W"][idx]), jnp.asarray(d["beta"][idx]),
                jnp.asarray(d["noise_var"][idx]), jnp.asarray(d["dispersion"][idx]))

    def _prepare_new(self, Y, offset=None):
        """(Y, prepared data) of new rows, validated against the fitted model."""
        Y = new_rows(self, Y, "X_mean_")
        spec = self._spec_
        if not spec.family.takes_trials:    # new rows' trials are not known here
            get_likelihood(spec.likelihood).validate(Y)
        if offset is not None:
            offset = as_1d_float(offset, "offset")
            if offset.shape[0] != Y.shape[0]:
                raise ValueError(f"offset has {offset.shape[0]} entries but Y has {Y.shape[0]} "
                                 f"rows; pass one offset per row")
        Ys = standardise_kept(Y, self.Y_mean_, self.Y_std_)   # dropped columns: ignored
        return Y, prepare_data(spec, Ys, offset, None, self._data_.kernel, None)

    def _new_latents(self, Y, data):
        """(S, N*, Q) latents of new rows, one chain per row and stored draw of the map."""
        W, beta, nv, disp = self._map_draws(subset=True)
        # keyed by the row as the model sees it (standardised), so data that standardise to the
        # same rows (a·Y + b) get the same random numbers
        Ys = standardise_kept(Y, self.Y_mean_, self.Y_std_)
        keys = pred.row_keys(as_key(self.random_state), Ys, np.asarray(data.offset))
        return pred.infer_new_latents(keys, self._spec_.likelihood, self._spec_.intercept,
                                      int(self.transform_steps), pred.Rows.of(data),
                                      pred.MapParams(W, beta, nv, disp))

    @in_model_precision
    def transform(self, Y, return_var: bool = False, *, offset=None):
        """Posterior mean latents of new rows (map held fixed; rows may contain NaN).

        Each row's latent depends on that row (and its offset) and the fitted model only: its
        elliptical-slice chains draw random numbers from a key derived from the row's values.
        """
        Y, data = self._prepare_new(Y, offset)
        Xs = np.asarray(self._new_latents(Y, data))
        return (Xs.mean(0), Xs.var(0)) if return_var else Xs.mean(0)

    def fit_transform(self, Y, y=None, **fit_params):
        return self.fit(Y, **fit_params).X_mean_

    @in_model_precision
    def predict(self, X, return_var: bool = False):
        """Posterior predictive mean (and variance over draws of E[y | ψ]) at latent points X,
        in the units of Y; the variance leaves out the observation noise (for the Gaussian
        model add ``noise_var_``)."""
        check_is_fitted(self, "X_mean_")
        X = check_latent_points(X, int(self.n_components))
        W, beta, nv, disp = self._map_draws()
        S = W.shape[0]

        def moments(rows):      # blocks of a fixed number of rows: a row's value never
            Xs = jnp.broadcast_to(rows, (S,) + rows.shape)   # depends on the call's size
            means = _per_draw_means(self, Xs, W, beta, nv, disp, jnp.zeros((rows.shape[0], 1)))
            return means.mean(0), means.var(0)

        mean, var = map_rows(moments, np.asarray(X))
        # the dropped columns' value 0 becomes their constant (variance 0) or NaN
        kept = kept_columns(self.Y_std_)
        mean = widen(mean, kept) * self.Y_std_ + self.Y_mean_
        if return_var:
            return mean, widen(var, kept) * self.Y_std_**2
        return mean

    inverse_transform = predict

    @in_model_precision
    def impute(self, Y, *, offset=None):
        """A copy of Y with each NaN replaced by its posterior expected value (seed 000 §4.2).

        The training data (exactly: same values, same NaN, same offset) are imputed from the
        stored draws of their latents; other rows from latents inferred with the map fixed.
        """
        Y, data = self._prepare_new(Y, offset)
        if self._is_training_data(Y, data):
            data = self._data_
            Xs = jnp.asarray(self._draws_["X"])
            W, beta, nv, disp = self._map_draws()
        else:
            Xs = self._new_latents(Y, data)
            W, beta, nv, disp = self._map_draws(subset=True)
        mean = np.asarray(_per_draw_means(self, Xs, W, beta, nv, disp, data.offset,
                                          data.trials).mean(0))
        mean = widen(mean, kept_columns(self.Y_std_)) * self.Y_std_ + self.Y_mean_
        return np.where(np.isnan(Y), mean, Y)

    def _is_training_data(self, Y, data) -> bool:
        return (np.array_equal(Y, self._train_Y_, equal_nan=True)
                and np.array_equal(np.asarray(data.offset), np.asarray(self._data_.offset)))

    @in_model_precision
    def score(self, Y, y=None, *, offset=None):
        """Log pointwise predictive density of Y's observed entries, in the units of Y:
        Σ_i log of the mean over stored draws of p(y_i,obs | x_i*, map), with x_i* inferred
        per draw (map fixed)."""
        Y, data = self._prepare_new(Y, offset)
        Xs = self._new_latents(Y, data)
        W, beta, nv, disp = self._map_draws(subset=True)
        lp = pred.log_predictive_rows(self._spec_.likelihood, self._spec_.intercept, Xs,
                                      pred.MapParams(W, beta, nv, disp), pred.Rows.of(data))
        # Standardised Gaussian densities back to original units: −Σ log scale_j per entry
        # (of the kept columns: the dropped ones are not scored)
        kept = kept_columns(self.Y_std_)
        jac = np.sum(np.where(np.isnan(Y[:, kept]), 0.0, np.log(self.Y_std_[kept])))
        return float(lp) - float(jac)

    @in_model_precision
    def sample(self, n_samples: int = 1, X=None, random_state=None, n_trials=None):
        """Data from the posterior generative process: per row a stored draw s of the map,
        x ~ N(0, I) (or the given X), y ~ p(y | φ_{W_s}(x)β_s, θ_s).

        Returns:
            (Y (n, J) in the units of the data, X (n, Q) the latent points used).
        """
        check_argument("RFLVM", "n_samples", n_samples, POSITIVE_INT)
        if random_state is not None:
            check_argument("RFLVM", "random_state", random_state, RANDOM_STATE, "0")
        check_is_fitted(self, "X_mean_")
        key = as_key(self.random_state if random_state is None else random_state)
        k_draw, k_x, k_y = jax.random.split(key, 3)
        W, beta, nv, disp = self._map_draws()
        Q = int(self.n_components)
        kind = self._spec_.likelihood
        X = (jax.random.normal(k_x, (n_samples, Q)) if X is None
             else jnp.asarray(check_latent_points(X, Q)))
        s = jax.random.randint(k_draw, (X.shape[0],), 0, W.shape[0])
        psi = pred.linear_predictor_per_row(X, s, W, beta, self._spec_.intercept)
        kept = kept_columns(self.Y_std_)
        trials = (self._data_.trials[:1] if n_trials is None
                  else jnp.broadcast_to(jnp.asarray(narrow(n_trials, self.n_features_in_, kept),
                                                    float), psi.shape))
        if self._spec_.family.row_density and n_trials is None:    # the mean row total
            trials = jnp.full_like(psi, jnp.round(jnp.mean(self._data_.trials[:, 0])))
        lik = likelihood_object(kind, jnp.broadcast_to(trials, psi.shape), nv[s], disp[s])
        Yn = np.asarray(lik.sample(k_y, psi))
        return widen(Yn, kept) * self.Y_std_ + self.Y_mean_, np.asarray(X)

    @property
    def dropped_columns_(self) -> np.ndarray:
        """Indices of the columns kept out of the fit (constant Gaussian columns, or columns
        with no observed entry); they come back on output as their constant (variance 0) or
        NaN (:mod:`gplvm.models.rflvm.columns`)."""
        check_is_fitted(self, "X_mean_")
        return np.flatnonzero(~kept_columns(self.Y_std_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True        # NaN marks a missing entry
        return tags

    def to_arviz(self):
        """ArviZ ``InferenceData`` with the log-likelihood, latent pairwise distances and the
        scalar parameters, per chain and draw (R-hat and ESS via ``arviz.summary``)."""
        check_is_fitted(self, "X_mean_")
        return inference_data(self)


def _per_draw_means(model, Xs, W, beta, nv, disp, offset, trials=None):
    """(S, N, D) E[y | ψ] at latents ``Xs`` (S, N, Q) under each given draw of the map."""
    if trials is None:
        trials = jnp.ones((Xs.shape[1], model.n_outputs_))
    return pred.expected_y_per_draw(model._spec_.likelihood, model._spec_.intercept, Xs,
                                    pred.MapParams(W, beta, nv, disp), offset, trials)
