"""``StructuredGPLVM``: the structured GPLVM of Atkinson & Zabaras (seed 003) for images.

Every image is a point x⁽ξ⁾ in latent space and a function over pixel coordinates x⁽ˢ⁾; the map
prior is k_ξ ⊗ k_s, and the collapsed bound (seed 003 eq. 13) is evaluated by Kronecker
algebra (eqs. 17–28, :mod:`gplvm.objectives.kronecker`) so no (image × pixel) matrix is formed.
A thin estimator over the GPLVM family's core (:mod:`gplvm.models.gplvm_family`): q(X⁽ξ⁾)
under the iid or the dynamical prior (:mod:`.latent`; bound = data term − KL(q(X) ‖ p(X))),
the family's Ψ-statistics and bound (:mod:`.bound`) with the Kronecker route
(:mod:`.kron_route`), predictions at any pixel coordinates and joint samples
(:mod:`.structured_fitted`), new images through the family's per-row solver
(:mod:`.new_rows`) with the corrected eq. 37.

With the :class:`~gplvm.kernels.Coincidence` spatial kernel (1 on identical pixels, 0
elsewhere) the model is the Bayesian GPLVM on the flattened images (the paper's baseline).
"""

from __future__ import annotations

import warnings
from typing import Optional

import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from gplvm._params import GPLVM_FAMILY, GRID, LATENT_KERNEL, SPATIAL_INDUCING, SPATIAL_KERNEL
from gplvm._random import as_key
from gplvm.inference import minimise
from gplvm.kernels import AbstractKernel
from gplvm.models._checkpoint import ResumableMixin, holding_checkpoint
from gplvm.models._common import check_is_fitted
from gplvm.models.fit_state import StructuredFitState
from gplvm.models.gplvm_family.variants.structured import structured_fitted as sf
from gplvm.models.gplvm_family.bound import negative_bound
from gplvm.models.gplvm_family.estimator import (FAMILY_FITTED, FAMILY_OPTIONAL,
                                                 AbstractGPLVM, in_model_precision)
from gplvm.models.gplvm_family.kron_route import kronecker_route, spatial_kernels
from gplvm.models.gplvm_family.new_rows import infer_rows
from gplvm.models.gplvm_family.variants.structured.structured_checks import validate
from gplvm.models.gplvm_family.variants.structured.structured_verbs import ImageVerbs
from gplvm.objectives import collapsed
from gplvm.registry import register


@register("gplvm.StructuredGPLVM", estimator=True)
class StructuredGPLVM(ImageVerbs, ResumableMixin, AbstractGPLVM):
    """Structured GPLVM: a latent × spatial Kronecker kernel over images (seed 003).

    Args:
        n_components: Q, the latent dimension (the paper's 30).
        n_inducing: m_ξ, the latent inducing inputs (at most the number of images).
        latent_kernel: a kernel on Q inputs; ``None`` is an ARD RBF (seed 003 §3).
        spatial_kernel: ``None`` — Matérn 3/2 (seed 003 §3): on images a *product* of 1-D
            Matérn 3/2 kernels over rows and columns, which keeps the product-grid Kronecker
            structure (no n_s × n_s matrix) but is the separable kernel, not the paper's
            Matérn 3/2 of the 2-D distance; with ``grid=`` points an ARD Matérn 3/2 over the
            coordinates.  A single kernel: one spatial factor over the pixel coordinates (on
            images their 2-D coordinates; e.g. ``Coincidence()`` for the Bayesian GPLVM).  A
            tuple of two kernels: one per image axis (product grid).  For images that are
            area averages to be predicted at a finer grid (super-resolution), wrap each in
            :class:`~gplvm.kernels.BlockAverage`: the model then predicts the field itself at
            new coordinates (``benchmarks/reproduce/sgplvm_superres.py``).
        grid: ``None`` for images at integer pixel coordinates; a tuple (rows, cols) of axis
            coordinates for images; or an (n_pixels, d_s) array with Y (n_images, n_pixels).
        spatial_inducing: ``None`` — the spatial inducing inputs at the pixels (m_s = n_s, no
            solve with K_s); or fixed ones: per axis a 1-D array (a tuple, product grid), or an
            (m_s, d_s) array (one factor).  Fixed ones make the cost linear in the pixels.
        psi_rule: the Ψ-statistic rule of q(X⁽ξ⁾) (as :class:`~gplvm.BayesianGPLVM`).
        standardize: subtract each pixel's mean and divide each channel by one standard
            deviation (one scale per channel keeps the field's spatial smoothness); results in
            original units.
        max_iter: L-BFGS iterations.
        init_X_var, init_noise_fraction, time_kernel, transform_max_iter: as
            :class:`~gplvm.BayesianGPLVM`.
        random_state: seed.  progress: show a progress bar with the bound.
        checkpoint: a file path: the model is saved there (:meth:`save`) after an L-BFGS
            iteration at most every ``checkpoint_interval`` seconds and when the run ends or is
            interrupted (Ctrl-C), so a killed process loses at most that much work;
            ``gplvm.load(path).resume()`` finishes the run with exactly the parameters, history
            and predictions of an uninterrupted one (the optax state is in the file).  A file
            written mid-run holds the training images and has ``interrupted_`` set.
        checkpoint_interval: seconds between checkpoint writes (0: after every iteration).

    Missing pixels (NaN) in the training images keep the Kronecker algebra: each gets a
    variational Gaussian whose mean is fitted with the model and whose variance is optimal in
    closed form (:mod:`gplvm.objectives.kronecker_missing`), a lower bound on the evidence of the
    observed pixels.  Every training image needs at least one observed pixel, and the spatial
    kernel must not be ``Coincidence`` (that model is the Bayesian GPLVM, which handles missing
    entries exactly: use :class:`~gplvm.BayesianGPLVM`).  New images given to
    ``transform``, ``score`` and ``impute`` may have any missing pixels (NaN).

    Attributes:
        X_mean_, X_var_ (n_images, Q); Z_; kernel_ (latent); spatial_kernel_ (list, one per
        factor); noise_var_ (per channel, original units); relevance_; history_; n_iter_;
        converged_; interrupted_; elbo_; jitter_; n_features_in_ (n_pixels · channels);
        fitted_ (:class:`~gplvm.models.gplvm_family.variants.structured.structured_fitted.
        FittedStructured`).
    """

    #: the fitted value, what a file holds (docs/contract.md): the family's and the images'
    #: layout (shape, pixel coordinates, channels), which the flattened data no longer show
    _fitted_fields = (*FAMILY_FITTED, "_layout")
    _optional_fields = FAMILY_OPTIONAL

    #: one rule per constructor argument (:mod:`gplvm._params`)
    _parameter_constraints = {**{k: v for k, v in GPLVM_FAMILY.items() if k != "kernel"},
        "latent_kernel": LATENT_KERNEL, "spatial_kernel": SPATIAL_KERNEL,
        "grid": GRID, "spatial_inducing": SPATIAL_INDUCING}

    def __init__(self, n_components: int = 30, n_inducing: int = 100,
                 latent_kernel: AbstractKernel | None = None, spatial_kernel=None, grid=None,
                 spatial_inducing=None, psi_rule=None, standardize: bool = True,
                 max_iter: int = 1000, init_X_var: Optional[float] = None,
                 init_noise_fraction: float = 0.01, time_kernel: AbstractKernel | None = None,
                 transform_max_iter: int = 300, random_state=0, progress: bool = True,
                 checkpoint=None, checkpoint_interval: float = 60.0):
        self.n_components = n_components
        self.n_inducing = n_inducing
        self.latent_kernel = latent_kernel
        self.spatial_kernel = spatial_kernel
        self.grid = grid
        self.spatial_inducing = spatial_inducing
        self.psi_rule = psi_rule
        self.standardize = standardize
        self.max_iter = max_iter
        self.init_X_var = init_X_var
        self.init_noise_fraction = init_noise_fraction
        self.time_kernel = time_kernel
        self.transform_max_iter = transform_max_iter
        self.random_state = random_state
        self.progress = progress
        self.checkpoint = checkpoint
        self.checkpoint_interval = checkpoint_interval

    @property
    def kernel(self):
        """The latent kernel as the family's initialisation reads it (``latent_kernel``)."""
        return self.latent_kernel

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        return tags

    # ------------------------------------------------------------------ fit
    def _standardisation(self, Y):
        """Per-pixel means and one standard deviation per channel, as per-column arrays."""
        D = self._layout.n_channels
        if not self.standardize:
            return np.zeros(Y.shape[1]), np.ones(Y.shape[1])
        observed = ~np.isnan(Y)
        counts = observed.sum(0)
        mean = np.where(observed, Y, 0.0).sum(0) / np.maximum(counts, 1)
        channel = np.nanmean(Y.reshape(Y.shape[0], -1, D), axis=(0, 1))
        mean = np.where(counts > 0, mean, np.tile(channel, Y.shape[1] // D))  # never observed
        std = np.nanstd((Y - mean).reshape(Y.shape[0], -1, D), axis=(0, 1))
        return mean, np.tile(std, Y.shape[1] // D)

    def fit(self, Y, y=None, *, times=None, groups=None):
        """Maximise the collapsed bound (seed 003 eq. 13) over q(X⁽ξ⁾), Z, the latent and
        spatial kernels and the noise.

        Args:
            Y: images (n_images, height, width[, channels]), or (n_images, n_pixels[,
                channels]) with ``grid=`` coordinates; missing pixels as NaN (class docstring).
            y: ignored.
            times: (n_images,) frame times for the dynamical prior (seed 003 §2.2.1).
            groups: (n_images,) sequence labels (independent sequences).
        """
        del y
        Yf, layout, times = validate(self, Y, times, groups)
        self._layout = layout
        Y_mean, Y_std = self._standardisation(Yf)
        Ys = (Yf - Y_mean) / Y_std
        u, problem = self._initial(Ys, times, groups, as_key(self.random_state))
        kernels = spatial_kernels(self.spatial_kernel, layout)
        missing = np.flatnonzero(np.isnan(Ys)) if np.isnan(Ys).any() else None
        problem = problem._replace(route=kronecker_route(self.spatial_inducing, layout,
                                                                   kernels, missing),
                                   groups=collapsed.group_columns(np.nan_to_num(Ys)))
        u["route"] = tuple(k.unconstrained() for k in kernels)
        if missing is not None:     # their means, from the pixel means (0 when standardised)
            u["route"] += (jnp.zeros(len(missing)),)
        self.times_, self.groups_ = times, groups
        self._train_Y = Yf
        self.n_features_in_ = Yf.shape[1]
        # what resume() needs to go on: the start and, once stopped, the optimiser's state
        self._fit_state_ = StructuredFitState(u, problem, Y_mean, Y_std)
        return self._run()

    @holding_checkpoint
    def _run(self):
        """L-BFGS from the start (or the stored state) in ``_fit_state_``; sets the fitted
        attributes and saves the checkpoint."""
        run = self._fit_state_
        result = minimise(negative_bound, run.u, args=(run.problem,), method="lbfgs",
                          n_iter=int(self.max_iter), progress=self.progress, desc="StructuredGPLVM",
                          options=self._checkpointing(self._record_checkpoint, run.state))
        if result.n_iter >= self.max_iter and not result.converged and not result.interrupted:
            warnings.warn(f"StructuredGPLVM: L-BFGS stopped at max_iter={self.max_iter} before "
                          f"the bound converged; raise max_iter", ConvergenceWarning,
                          stacklevel=3)
        self._set_fitted(result.params, result.history, result.converged, result.interrupted)
        if result.interrupted:
            self._fit_state_ = run._replace(state=result.state)
        self._end_run(result.interrupted)
        return self

    def _record_checkpoint(self, state):
        """The run as it stands after an iteration: a model of the current iterate, flagged
        interrupted, that resume() continues from ``state``."""
        self._fit_state_ = self._fit_state_._replace(state=state)
        self._set_fitted(state.params, state.history, False, True)

    def _set_fitted(self, u, history, converged, interrupted):
        run = self._fit_state_
        problem = run.problem
        summary = sf.fitted_from(u, problem, run.Y_mean, run.Y_std)
        self.fitted_, self.params_, self._problem = summary.fitted, u, problem
        self.X_mean_, self.X_var_, self.elbo_ = summary.X_mean, summary.X_var, summary.bound
        self.history_ = -np.asarray(history)
        self.n_iter_, self.converged_ = len(history), bool(converged)
        self.interrupted_ = bool(interrupted)
        self.jitter_ = problem.jitter

    # ------------------------------------------------------------------ fitted values
    @property
    def kernel_(self):
        check_is_fitted(self, "fitted_")
        return self.fitted_.kernel

    @property
    def spatial_kernel_(self):
        check_is_fitted(self, "fitted_")
        return list(self.fitted_.spatial)

    @property
    def noise_var_(self):
        """Noise variance per channel, original units."""
        check_is_fitted(self, "fitted_")
        return float(self.fitted_.noise_var) * sf.channel_scale(self.fitted_) ** 2

    # ------------------------------------------------------------------ hooks
    @in_model_precision
    def _infer_new(self, Ys):
        """q(x*) of each standardised image on its own, with the model fixed (seed 003 eqs.
        36–37 corrected), through the family's per-row solver."""
        X_start, X_var_start = self._start_new(Ys)
        observed = ~np.isnan(Ys)
        stats = sf.row_statistics(self.fitted_, np.nan_to_num(Ys), observed)
        fixed = sf.RowFixed(self.fitted_.kernel, self.fitted_.Z, self.fitted_.rule,
                            self.fitted_.noise_var)

        def extras(observed_rows):
            # the solver pads a single image to two identical rows; repeat its sums to match
            reps = observed_rows.shape[0] // len(Ys)
            return (stats._make(jnp.asarray(np.concatenate([s] * reps)) for s in stats),)

        return infer_rows(sf.row_objective, fixed, Ys, X_start, X_var_start,
                          self.transform_max_iter, row_extras=extras)

    @in_model_precision
    def _predict_fitted(self, X, return_var):
        out = sf.predict(self.fitted_, X, None, return_var)
        flat = lambda a: a.reshape(len(X), -1)   # noqa: E731
        return (flat(out[0]), flat(out[1])) if return_var else flat(out)

    @in_model_precision
    def _expected_y(self, X_mean, X_var):
        return sf.expected_y(self.fitted_, X_mean, X_var)

    @in_model_precision
    def _sample_y(self, X, key_f, key_noise):
        F = sf.sample(self.fitted_, X, key_f, key_noise)
        return F.reshape((len(X),) + tuple(self._layout.tail))
