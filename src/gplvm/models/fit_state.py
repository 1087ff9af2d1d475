"""The typed run state of each estimator fitted by a run that can be stopped and resumed
(issue 33, item 2: "typed state").

An estimator's ``fit`` sets ``_fit_state_`` to one of these registered NamedTuples, its run
goes on from it (and replaces it with ``_replace`` as it advances), and a finished run drops
it; ``resume()`` continues from it (:class:`gplvm.models._checkpoint.ResumableMixin`).  A
saved file holds it in its own ``fit_state`` entry (:mod:`gplvm.io.model_file`, format 6),
through the registered name below, so its fields are the file format of a run in progress:

=====================================  ====================================================
estimator                              fit state
=====================================  ====================================================
``BayesianGPLVM`` (collapsed)          :class:`CollapsedFitState`
``BayesianGPLVM(inference='svi')``     :class:`SviFitState`
``StructuredGPLVM``                    :class:`StructuredFitState`
``DPGPLVM``                            :class:`DPFitState`
``BayesianGLM``                        :class:`GLMFitState`
``BayesianLinearRegression``           :class:`BLRFitState` (its best run a :class:`BLRRun`)
=====================================  ====================================================

Files of format 5 and below kept the same values in a dict ``_resume_`` (keys the field names
below; the SVI run under ``_resume_["svi"]``), which :func:`gplvm.io.legacy.typed_fit_state`
turns into these.  Every type is a NamedTuple, hence a JAX pytree.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gplvm.registry import register

__all__ = ["BLRFitState", "BLRRun", "CollapsedFitState", "DPFitState", "GLMFitState",
           "StructuredFitState", "SviFitState"]


@register("gplvm.state.CollapsedFitState")
class CollapsedFitState(NamedTuple):
    """``BayesianGPLVM``'s collapsed fit (:class:`.gplvm_family.collapsed_run.CollapsedRun`)."""

    u: Any              # the start of the current rung: unconstrained parameters (a dict)
    problem: Any        # its GPLVMProblem, without rows on a mesh (``sharded_route.off_mesh``)
    Y_mean: Any         # (D,) the columns' standardisation (kept-out columns coded in it)
    Y_std: Any
    earlier: tuple = ()  # the bound histories of the rungs before a jitter restart
    state: Any = None   # the optimiser's OptimState once stopped; None before the first step


@register("gplvm.state.StructuredFitState")
class StructuredFitState(NamedTuple):
    """``StructuredGPLVM``'s fit: the start and, once stopped, the optimiser's state."""

    u: Any
    problem: Any
    Y_mean: Any
    Y_std: Any
    state: Any = None


@register("gplvm.state.DPFitState")
class DPFitState(NamedTuple):
    """``DPGPLVM``'s starts (:class:`.variants.dp.dp_starts.DPStarts`)."""

    Ys: Any             # (N, D) standardised data, the kept-out columns as in ``columns``
    Y_mean: Any
    Y_std: Any
    start: int = 0      # the start in progress (0-based)
    at: Any = None      # its last dp_fit.Sweep; None before its first
    best: Any = None    # the best finished start's dp_fit.FitResult; None before one ends


@register("gplvm.state.SviFitState")
class SviFitState(NamedTuple):
    """``BayesianGPLVM(inference='svi')``'s run: the fields of
    :func:`.variants.svi.svi_fit.start_run`'s resume point (its docstring says what each is;
    the run updates its host arrays and lists in place)."""

    g: Any
    g_state: Any
    X_mean: Any
    X_var_raw: Any
    local_state: Any
    setup: Any
    batch_size: int
    rng: Any
    step_in_epoch: int
    epoch_values: list
    epoch_ok: list
    history: list
    n_step: int
    n_bad: int
    Y_mean: Any
    Y_std: Any
    has_missing: bool


@register("gplvm.state.GLMFitState")
class GLMFitState(NamedTuple):
    """``BayesianGLM``'s Adam run: its start, key, data (fit's units) and, once stopped, its
    OptimState."""

    u0: Any
    key: Any
    features: Any
    likelihood: Any
    X: Any
    y: Any
    state: Any = None


@register("gplvm.state.BLRRun")
class BLRRun(NamedTuple):
    """A finished L-BFGS run of ``BayesianLinearRegression``: −eq. 14 at its parameters (what
    the restarts compare), the unconstrained parameters, the history, iterations, convergence."""

    value: float
    params: Any
    history: Any
    n_iter: int
    converged: bool


@register("gplvm.state.BLRFitState")
class BLRFitState(NamedTuple):
    """``BayesianLinearRegression``'s L-BFGS restarts (:func:`.._blr_fit.restarts`): the first
    start, the key of the others (run r > 0 starts from ``u0`` perturbed with
    ``fold_in(key, r)``), the feature map before fitting, the data (fit's units), the run in
    progress with its OptimState once stopped, and the best finished run."""

    u0: Any
    key: Any
    features: Any
    X: Any
    y: Any
    restart: int = 0    # the run in progress (0: the one from u0)
    state: Any = None   # its OptimState once stopped; None before its first iteration
    best: Any = None    # the best finished run (BLRRun); None before one ends
