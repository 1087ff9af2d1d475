"""``BayesianGPLVM``: the Bayesian GPLVM (Titsias & Lawrence 2010) for any kernel.

A thin estimator over the GPLVM family's core (:mod:`gplvm.models.gplvm_family`): the collapsed
bound in the stable form of seed 001 §B with one column group per missingness pattern and unit
column weights, q(X) under the iid or the dynamical prior (seed 001 §E, seed 003 §2.2.1),
Ψ-statistics analytic where they exist and by the unscented transform otherwise (seed 004),
the dense linear-algebra route, and new-row inference with the model fixed (seed 003 eqs. 36–37).
With ``inference='svi'`` the same Ψ-statistics enter the uncollapsed bound of Hensman, Fusi &
Lawrence (2013), maximised over minibatches of rows (:mod:`.gplvm_family.svi_fit`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from gplvm._params import DEVICES, GPLVM_FAMILY, POSITIVE, POSITIVE_INT, choice, optional
from gplvm._random import as_key
from gplvm.inference import sharding
from gplvm.io.legacy import upgrade_bgplvm
from gplvm.kernels import AbstractKernel
from gplvm.models._checkpoint import ResumableMixin
from gplvm.models._common import check_is_fitted
from gplvm.models.gplvm_family import fitted as fam
from gplvm.models.gplvm_family.estimator import (FAMILY_FITTED, FAMILY_OPTIONAL,
                                                 AbstractGPLVM, in_model_precision)
from gplvm.models.gplvm_family import columns
from gplvm.models.gplvm_family.collapsed_run import CollapsedRun
from gplvm.models.gplvm_family.latent import DynamicalLatent
from gplvm.models.gplvm_family.new_rows import infer_latents
from gplvm.models.gplvm_family.sharded_route import off_mesh, on_mesh
from gplvm.models.gplvm_family.variants.svi.svi_estimator import SviMixin, forget_rows
from gplvm.models.fit_state import CollapsedFitState, SviFitState
from gplvm.registry import register

@register("gplvm.BayesianGPLVM", estimator=True)
class BayesianGPLVM(CollapsedRun, SviMixin, ResumableMixin, AbstractGPLVM):
    """Bayesian Gaussian-process latent variable model with a collapsed variational bound.

    Args:
        n_components: Q, the latent dimension: at most the columns fitted and below the rows
            (a ``ValueError`` before any computation otherwise), or ``'auto'``: min(10, D,
            N − 1) with the default ARD kernel, the dimensions kept in ``active_components_``.
        n_inducing: M, the number of inducing inputs.
        kernel: a kernel on Q inputs; ``None`` is an ARD RBF.
        psi_rule: ``None`` (analytic where it exists, unscented otherwise), ``'analytic'``,
            ``'unscented'``, ``'gauss_hermite'``, ``'monte_carlo'`` or a rule object.
        standardize: centre and scale the columns of Y; results are reported in original units.
        max_iter: L-BFGS iterations (``optimizer='adam'``: Adam steps), over all restarts;
            with ``inference='svi'`` the number of epochs (passes over the rows).
        optimizer: ``'lbfgs'`` (optax's L-BFGS, zoom line search; the default),
            ``'lbfgsb'`` (SciPy's L-BFGS-B on the compiled bound and gradient; compared on oil
            flow by benchmarks/bgplvm_time_to_quality.py, not yet the default: the whole suite
            has not been run with it) or ``'adam'``.
        learning_rate: Adam's step size (``optimizer='adam'`` or ``inference='svi'``).
        init_X_var: initial q(X) variances: a number for that constant, or ``None`` (the
            default) to draw each from U(0, 0.1) as GPy does (mean 0.05).  The issue's
            constant 0.1 gave 5 oil-flow 1-NN errors (median over 5 seeds) in both this
            library and GPy; GPy's draws gave 2 here (benchmarks/README.md).  Under the
            dynamical prior the variances start near 0.1 (or near the number given).
        init_noise_fraction: initial noise variance as a fraction of the (standardised) variance.
        time_kernel: the kernel over time stamps for the dynamical prior (default RBF whose
            length-scale starts at a tenth of the time span).
        transform_max_iter: L-BFGS steps per row when inferring latents of new rows.
        random_state: seed (initialisation of Z, Monte Carlo psi-statistics, sampling).
        progress: show a progress bar with the bound.
        checkpoint: a file path: the model is saved there (:meth:`save`) after an iteration at
            most every ``checkpoint_interval`` seconds and when the run ends or is interrupted
            (Ctrl-C), so a killed process loses at most that much work;
            ``gplvm.load(path).resume()`` finishes the run.  With ``optimizer='lbfgs'`` or
            ``'adam'`` the file holds the optax state (and Adam's PRNG key), and the resumed
            run gives exactly the parameters, history and predictions of an uninterrupted one.
            SciPy's L-BFGS-B (``'lbfgsb'``) keeps its curvature memory inside Fortran, where it
            cannot be saved: resuming restarts it from the checkpointed parameters (the same
            optimum in general, not the same iterates).  A file written mid-run has
            ``interrupted_`` set.
        checkpoint_interval: seconds between checkpoint writes (0: after every iteration).
        inference: ``'collapsed'`` (the default: q(U) integrated out, every row at every
            step) or ``'svi'``: stochastic variational inference (Hensman, Fusi & Lawrence
            2013; q(U) = N(m_d, S) kept explicit, whitened, S shared by the columns) by Adam
            over minibatches of ``batch_size`` rows, ``max_iter`` epochs at ``learning_rate``.
            Y may then be a NumPy memmap (``np.load(path, mmap_mode='r')``), an h5py
            dataset, or an AnnData opened with ``anndata.read_h5ad(path, backed='r')`` or its
            ``X`` (dense or CSR), read a batch at a time.  Iid latent prior only.  A
            ``checkpoint`` is written between minibatch steps and ``resume()`` replays the
            rest of the run exactly (``resume(Y)`` with data read from disk, which the file
            does not hold); a checkpoint file's ``elbo_`` is NaN (the bound over all rows is
            computed when the run ends or is interrupted).  See
            :mod:`gplvm.models.gplvm_family.variants.svi.svi_fit`.
        batch_size: rows per minibatch with ``inference='svi'`` (``None``: min(256, N)).
        devices: ``None`` (the default: one device, as always), an int k (the first k of
            ``jax.devices()``), a list of ``jax.Device`` or a :class:`jax.sharding.Mesh`:
            the collapsed bound's sums over rows (ψ0, Ψ1ᵀY, Ψ2, Σ y², the KL of q(X)) are
            computed by each device over its own block of rows and added
            (:mod:`gplvm.inference.sharding`); Y is split by rows, padded to a multiple of
            the device count with rows of weight 0.  The bound equals the one-device bound
            up to the order of the additions.  q(X)'s parameters, Z, the kernel and the
            optimiser's state are not split.  With ``inference='svi'`` each minibatch's rows
            are split (ψ0, Ψ1ᵀY, Ψ2, Σ y², the rows' KL per device, added): the same
            minibatches and steps as on one device, up to round-off.  Not available (a
            ``ValueError`` says so before any computation) with ``times=``; ``checkpoint``
            needs devices=<a count> (the file holds the resume point without the rows on the
            mesh, which ``resume()`` splits again).  Monte Carlo Ψ-statistics draw the same
            per row on any split.
            ``save`` records None or a count, not a list of devices or a mesh (they belong
            to the running process): ``set_params(devices=None)`` before saving such a
            model.  See docs/scaling.md.

    Attributes:
        X_mean_, X_var_ (N, Q); Z_ (M, Q); kernel_; noise_var_ (original units, per column);
        relevance_ (Q,) inverse squared length-scales; n_components_ (Q of the fit);
        active_components_ (the dimensions with relevance ≥ 10⁻³ of the largest);
        dropped_columns_ (constant or never-observed columns kept out of the fit and put back
        on output: their constant with variance 0 and ``noise_var_`` 0, or NaN;
        docs/contract.md); history_ (bound per iteration, all
        restarts); n_iter_; converged_; elbo_ (the final bound, standardised units);
        time_kernel_ (dynamical prior only); jitter_ (added to Kuu's diagonal); fitted_ (the
        :class:`~gplvm.models.gplvm_family.fitted.FittedGPLVM` that every verb reads).
        With ``inference='svi'``: history_ holds the mean minibatch estimate of the bound per
        epoch, elbo_ the bound over all rows at the end, n_iter_ the epochs, converged_ False
        (a fixed number of epochs), and every verb (transform, impute, score, predict,
        sample) reads the learnt q(U), not the collapsed optimum.
    """

    #: the fitted value, what a file holds (docs/contract.md): the family's, and, set by SVI
    #: fits only, the rows that new rows start from when the data were read from disk
    #: (``_start_index`` into them, ``_start_Y`` their values, as the data are not kept; None
    #: for data in memory)
    _fitted_fields = (*FAMILY_FITTED, "_start_index", "_start_Y")
    _optional_fields = (*FAMILY_OPTIONAL, "_start_index", "_start_Y")

    #: one rule per constructor argument (:mod:`gplvm._params`)
    _parameter_constraints = {**GPLVM_FAMILY, "optimizer": choice("lbfgs", "lbfgsb", "adam"),
        "inference": choice("collapsed", "svi"),
        "batch_size": optional(POSITIVE_INT, "256"),
        "learning_rate": POSITIVE, "devices": DEVICES}

    def __init__(self, n_components: int = 2, n_inducing: int = 30,
                 kernel: AbstractKernel | None = None, psi_rule=None, standardize: bool = True,
                 max_iter: int = 2000, optimizer: str = "lbfgs", learning_rate: float = 0.01,
                 init_X_var: Optional[float] = None, init_noise_fraction: float = 0.01,
                 time_kernel: AbstractKernel | None = None, transform_max_iter: int = 300,
                 random_state=0, progress: bool = True, checkpoint=None,
                 checkpoint_interval: float = 60.0, inference: str = "collapsed",
                 batch_size: Optional[int] = None, devices=None):
        self.n_components = n_components
        self.n_inducing = n_inducing
        self.kernel = kernel
        self.psi_rule = psi_rule
        self.standardize = standardize
        self.max_iter = max_iter
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.init_X_var = init_X_var
        self.init_noise_fraction = init_noise_fraction
        self.time_kernel = time_kernel
        self.transform_max_iter = transform_max_iter
        self.random_state = random_state
        self.progress = progress
        self.checkpoint = checkpoint
        self.checkpoint_interval = checkpoint_interval
        self.inference = inference
        self.batch_size = batch_size
        self.devices = devices

    # ------------------------------------------------------------------ fit
    def fit(self, Y, y=None, *, times=None, groups=None):
        """Maximise the collapsed bound over q(X), Z and the hyper-parameters.

        Args:
            Y: (N, D) data; NaN marks a missing entry (left out of the bound).
            y: ignored (scikit-learn's unsupervised convention).
            times: (N,) time stamps for the dynamical prior (each latent dimension a GP in t).
            groups: (N,) sequence labels: independent sequences (block-diagonal time prior).
        """
        del y
        self._check_devices(times)
        if self.inference == "svi":
            return self._fit_svi(Y, times, groups)
        Y, times = self._validate_common(Y, times, groups)
        Y_mean, Y_std = self._standardisation(Y)     # (D,): the kept-out columns coded in them
        Ys = columns.standardise_kept(Y, Y_mean, Y_std)
        u, problem = self._initial(Ys, times, groups, as_key(self.random_state))
        self.times_, self.groups_ = times, groups
        self._train_Y = Y
        for svi_start in ("_start_Y", "_start_index"):  # an earlier SVI fit's start rows
            vars(self).pop(svi_start, None)
        forget_rows(self)                                 # and the rows it read
        self.n_features_in_ = Y.shape[1]
        # what resume() needs to go on: the start, the histories of the runs before the last
        # jitter restart and, once stopped, the optimiser's state
        self._fit_state_ = CollapsedFitState(u, problem, Y_mean, Y_std)
        return self._run()

    def resume(self, Y=None):
        """Finish an interrupted (or checkpointed) fit from its stored state: the result equals
        an uninterrupted fit's bit for bit (``checkpoint`` says when it cannot).

        Typical use: ``gplvm.load(path).resume()`` after a run with ``checkpoint=path`` was
        killed, or ``model.resume()`` after Ctrl-C.  A finished fit is returned unchanged.

        Args:
            Y: an SVI fit of data read from disk (a memmap, an h5py dataset, a backed AnnData):
                the same data again, which a checkpoint does not hold (in the process that was
                interrupted they are still known).  Otherwise leave it None: an in-memory Y is
                kept with the model.
        """
        check_is_fitted(self, "fitted_")
        run = getattr(self, "_fit_state_", None)
        if isinstance(run, SviFitState):
            return self._run_svi(self._svi_rows(run, Y))
        return super().resume(Y)        # which refuses Y: this fit keeps its data

    def _set_fitted(self, u, problem, Y_mean, Y_std):
        kept = columns.kept_columns(Y_std)
        summary = fam.fitted_from(u, problem, Y_mean[kept], Y_std[kept])
        if on_mesh(problem):                # devices=: the fitted values off the mesh
            u, summary = sharding.to_default_device((u, summary))
        self.fitted_ = columns.put_back(summary.fitted, Y_mean, Y_std)
        self.params_ = u
        self._problem = off_mesh(problem)  # rows on a mesh are not saved, nor kept on it
        self.X_mean_, self.X_var_ = summary.X_mean, summary.X_var
        self.elbo_ = summary.bound
        self.jitter_ = problem.jitter

    @classmethod
    def _upgrade_fitted(cls, fitted: dict, format_version: int, params: dict | None = None) -> dict:
        """Attributes of a file of an older format, as today's (:mod:`gplvm.io.legacy`)."""
        return upgrade_bgplvm(fitted, format_version)

    # ------------------------------------------------------------------ fitted values
    @property
    def kernel_(self):
        check_is_fitted(self, "fitted_")
        return self.fitted_.kernel

    @property
    def noise_var_(self):
        """Noise variance per column, original units."""
        check_is_fitted(self, "fitted_")
        return float(self.fitted_.map.noise_var) * self.fitted_.Y_std**2

    @property
    def time_kernel_(self):
        check_is_fitted(self, "fitted_")
        latent = getattr(self._problem, "latent", None)
        return latent.fitted_time_kernel(self.params_) if isinstance(
            latent, DynamicalLatent) else None

    # ------------------------------------------------------------------ hooks of AbstractGPLVM
    def _start_reference(self):
        """Training rows (original units) and their latents, to start new rows from."""
        if getattr(self, "_start_Y", None) is not None:
            return self._start_Y, self.X_mean_[self._start_index]
        return super()._start_reference()

    @in_model_precision
    def _infer_new(self, Ys):
        """q(x*) of each standardised row, each row optimised on its own with the model fixed
        (seed 003 eqs. 36–37)."""
        X_start, X_var_start = self._start_new(Ys)
        return infer_latents(self.fitted_, Ys, X_start, X_var_start, self.transform_max_iter)

    @in_model_precision
    def _predict_fitted(self, X, return_var):
        return fam.predict(self.fitted_, X, return_var)

    @in_model_precision
    def _expected_y(self, X_mean, X_var):
        """E[y*] = ψ1(q(x*)) K_uu⁻¹ ū_d, averaged over the latents' uncertainty."""
        return fam.expected_y(self.fitted_, X_mean, X_var)

    @in_model_precision
    def _sample_y(self, X, key_f, key_noise):
        """f ~ q(f | X) jointly over the rows, then Gaussian noise."""
        return fam.sample(self.fitted_, X, key_f, key_noise)

    def predict_times(self, t_new, sequence: int = 0, return_var: bool = False):
        """Latent trajectory and Y at new times of one training sequence (dynamical prior;
        seed 003 eq. 35).  Returns (X_mean, X_var, Y_mean[, Y_var])."""
        check_is_fitted(self, "fitted_")
        if not isinstance(getattr(self._problem, "latent", None), DynamicalLatent):
            raise ValueError("predict_times needs a model fitted with times= (dynamical prior)")
        X_mean, X_var = self._problem.latent.predict(self.params_, t_new, sequence)
        out = (np.asarray(X_mean), np.asarray(X_var),
               fam.expected_y(self.fitted_, X_mean, X_var))
        if return_var:
            out = out + (self.predict(np.asarray(X_mean), return_var=True)[1],)
        return out
