"""One optimisation loop for every variational and type-II maximum-likelihood fit (STYLE.md 2).

:func:`minimise` minimises a deterministic or stochastic objective over a pytree of
unconstrained parameters with one of three methods:

* ``"lbfgs"``: ``optax.lbfgs`` with its zoom line search, the whole step compiled;
* ``"lbfgsb"``: SciPy's L-BFGS-B (Byrd et al. 1995; Zhu et al. 1997) driving a compiled
  value-and-gradient of the objective.  Its Moré–Thuente line search accepts the unit step
  almost always (about 1.05 evaluations per iteration on the oil-flow Bayesian GPLVM, against
  up to 7 for the zoom search on long runs; ``benchmarks/bgplvm_time_to_quality.py``);
* ``"adam"``: ``optax.adam`` for stochastic objectives (minibatches, reparameterised samples).

The objective is compiled once per shape (ahead of time, shown as its own "compiling" phase
of the progress bar and returned as ``compile_s``).  Each iteration is a step
``step(key, state) -> (state, info)`` over a typed state (:class:`_Iterate`) taken by the one
run loop, :func:`gplvm.inference.run.run`, which commits it, moves the bar
(:class:`~gplvm.inference.run.Progress`) and times the checkpoints
(:class:`~gplvm.inference.run.CheckpointTimer`); SciPy's L-BFGS-B, whose iterations live
inside a Fortran routine, commits each iterate it reports the same way
(:class:`_SciPyIterations`).  The steps check convergence and keep the last finite iterate,
so that

* a non-finite objective or gradient mid-run (a failed Cholesky gives NaN in JAX, an overflow
  gives inf) rejects the step that led there: the run rolls back to the last iterate at which
  the objective was evaluated finite, stops, and says at which iteration with a
  ``RuntimeWarning``; non-finite parameters never reach ``callback`` (a checkpoint) nor the
  result.  A caller with a remedy (a larger jitter) restarts from the returned parameters;
* an objective or gradient that is already non-finite at the starting parameters raises
  :class:`NonFiniteObjectiveError`: there is no finite point to keep;
* Ctrl-C (``KeyboardInterrupt``) stops the run and returns the work done so far, flagged
  ``interrupted=True``, instead of losing it: the iteration in progress is dropped, and one
  being committed is completed first (:func:`gplvm.inference.run.atomic`);
* ``checkpoint`` receives an :class:`OptimState` (parameters, optax state, PRNG key, history)
  at most every ``checkpoint_interval`` seconds, the result carries the last one, and
  ``start=`` continues a run from it, bit for bit for the optax methods (estimators'
  ``checkpoint=path`` and ``resume()``, issue 16).

What a call says often (the objective, its data, the method, the iterations, the bar) are
:func:`minimise`'s own arguments; the rest (Adam's step size, the stopping test's tolerance and
patience, an explicit optax transformation, the PRNG key, the callback, the state to continue
from and the checkpoint with its interval) is one :class:`OptimOptions`, so that
``minimise(fun, u, args=(problem,), n_iter=200, desc="BayesianGPLVM")`` reads as it runs.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize

from gplvm.inference.run import CheckpointTimer, Hooks, Progress, RunResult, run
from gplvm.registry import register

METHODS = ("lbfgs", "lbfgsb", "adam")


@register("gplvm.state.OptimState")
class OptimState(NamedTuple):
    """Where a run stands after an iteration: all that resuming it bit for bit needs.

    ``params`` are the parameters the next iteration starts from, ``opt_leaves`` the leaves of
    the optax state (``jax.tree_util.tree_leaves``; the tree is rebuilt from ``init(params)``,
    so the file holds arrays only; empty for ``"lbfgsb"``, whose SciPy state cannot be kept),
    ``key`` the PRNG key the next iteration splits, ``history`` the objective at each iteration
    so far and ``quiet`` how many consecutive iterations have met the stopping test.
    """

    params: Any
    opt_leaves: tuple
    key: Any
    history: np.ndarray
    quiet: int


class OptimOptions(NamedTuple):
    """:func:`minimise`'s less common arguments; every field has the default of a plain run.

    Attributes:
        learning_rate: Adam's step size (ignored by the L-BFGS methods, which line-search).
        tol, patience: the L-BFGS methods stop when the relative change of the objective stays
            below ``tol`` for ``patience`` consecutive iterations; Adam runs all ``n_iter``
            (its objective is noisy).
        optimizer: an explicit optax transformation overriding the default of ``"lbfgs"`` or
            ``"adam"``.
        key: a ``jax.random`` key for stochastic objectives (default ``PRNGKey(0)``).
        callback: called as ``callback(i, params, value)`` after each iteration, with the
            updated parameters and the objective before the update.
        start: an :class:`OptimState` (a result's ``state``, or one given to ``checkpoint``) to
            continue from instead of ``params``: its history counts towards ``n_iter``.  With
            ``"lbfgs"`` or ``"adam"`` (and the same ``fun``, ``args``, ``optimizer`` and
            ``n_iter``) the continued run is bit for bit the uninterrupted one: the optax state,
            the PRNG key and the stopping test's count are restored.  SciPy's L-BFGS-B keeps
            its curvature memory and line-search state inside a Fortran routine that cannot be
            saved, so ``"lbfgsb"`` restarts from the state's parameters with an empty memory:
            the same optimum in general, not the same iterates.
        checkpoint: called as ``checkpoint(state)`` with the :class:`OptimState` after an
            iteration, at most every ``checkpoint_interval`` seconds (every iteration when 0),
            so that a killed process loses at most that much work.
        checkpoint_interval: seconds between calls of ``checkpoint``.
    """

    learning_rate: float = 0.01
    tol: float = 1e-9
    patience: int = 10
    optimizer: Optional[optax.GradientTransformation] = None
    key: Optional[jax.Array] = None
    callback: Optional[Callable[[int, Any, float], None]] = None
    start: Optional[OptimState] = None
    checkpoint: Optional[Callable[[OptimState], None]] = None
    checkpoint_interval: float = 60.0


class OptimResult(NamedTuple):
    params: Any
    history: np.ndarray   # objective per iteration (the minimised value)
    n_iter: int
    converged: bool
    interrupted: bool
    compile_s: float = 0.0   # seconds spent compiling in this call (0 when cached)
    state: Optional[OptimState] = None   # to resume from (None when no iteration was done)


class NonFiniteObjectiveError(ValueError, FloatingPointError):
    """The objective (or its gradient) is NaN or infinite at the starting parameters.

    A ``ValueError`` (it almost always comes from the data or the initial values: an entry of
    1e300, a zero variance) and a ``FloatingPointError``.  ``params`` holds the starting
    parameters, ``what`` says whether the objective or its gradient was non-finite, and
    ``result`` is the run's :class:`OptimResult` (no iterations, the starting parameters), for a
    caller with a remedy (a larger jitter) that restarts instead of giving up.
    """

    def __init__(self, message: str, params: Any = None, what: str = "objective",
                 compile_s: float = 0.0):
        super().__init__(message)
        self.params, self.what = params, what
        self.result = OptimResult(params, np.empty(0), 0, False, False, compile_s)


def _make_lbfgs_step(fun, optimizer):
    @jax.jit
    def step(params, state, key, args):
        del key

        def value_fn(p):
            return fun(p, *args)

        value, grad = optax.value_and_grad_from_state(value_fn)(params, state=state)
        updates, state = optimizer.update(grad, state, params, value=value, grad=grad,
                                          value_fn=value_fn)
        new_params = optax.apply_updates(params, updates)
        step_ok = _all_finite(new_params) & ~_line_search_found_nothing(state)
        return new_params, state, value, _all_finite(grad), step_ok

    return step


def _line_search_found_nothing(state) -> jax.Array:
    """Whether optax's zoom line search met only non-finite values (or slopes) along the
    direction.

    It rejects non-finite trial points itself, and when no finite one is left it falls back on
    a step of size 0 with the sufficient-decrease error of a NaN, +inf (optax
    ``linesearch.py``): the run would then repeat the same point until it looked converged.
    False for an optimiser without a zoom line search.
    """
    is_ls = lambda x: isinstance(x, optax.ScaleByZoomLinesearchState)  # noqa: E731
    found = [ls for ls in jax.tree_util.tree_leaves(state, is_leaf=is_ls) if is_ls(ls)]
    if not found:
        return jnp.asarray(False)
    return jnp.any(jnp.stack([(ls.learning_rate == 0) & jnp.isinf(ls.info.decrease_error)
                              for ls in found]))


def _make_stochastic_step(fun, optimizer):
    @jax.jit
    def step(params, state, key, args):
        value, grad = jax.value_and_grad(fun)(params, key, *args)
        updates, state = optimizer.update(grad, state, params)
        new_params = optax.apply_updates(params, updates)
        return new_params, state, value, _all_finite(grad), _all_finite(new_params)

    return step


def _all_finite(tree) -> jax.Array:
    """Whether every entry of every leaf of ``tree`` is finite (one boolean, computed in XLA
    beside the step so that checking costs no extra pass over the parameters)."""
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in leaves])) if leaves \
        else jnp.asarray(True)


_STEPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _strong(tree):
    """Drop weak types: optax's ``init`` returns weakly typed scalars that its ``update`` returns
    strongly typed, which would otherwise make the jitted step compile twice."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=jnp.asarray(x).dtype), tree)


def _jitted(fun, method, learning_rate, optimizer):
    """The jitted functions of ``fun`` for ``method``, cached so that every fit of one
    objective (restarts, refits of data of the same shapes) compiles once."""
    cache_key = (method, learning_rate, id(optimizer) if optimizer is not None else None)
    per_fun = _STEPS.setdefault(fun, {})
    if cache_key not in per_fun:
        if method == "lbfgsb":
            per_fun[cache_key] = (jax.jit(lambda params, args: jax.value_and_grad(fun)(
                params, *args)),)
        else:
            if optimizer is None:
                optimizer = optax.lbfgs() if method == "lbfgs" else optax.adam(learning_rate)
            make = _make_lbfgs_step if method == "lbfgs" else _make_stochastic_step
            init = jax.jit(lambda params, opt=optimizer: _strong(opt.init(params)))
            per_fun[cache_key] = (make(fun, optimizer), init)
    return per_fun[cache_key]


def _compile(jitted, *example):
    """``jitted`` compiled ahead of time for arguments like ``example`` (JAX keeps the result,
    so a second call with the same shapes costs nothing)."""
    return jitted.lower(*example).compile()


def _converging(history, tol):
    """Whether the last relative change of the objective is below ``tol``."""
    if len(history) < 2:
        return False
    return abs(history[-2] - history[-1]) / max(1.0, abs(history[-1])) < tol


class _Iterate(NamedTuple):
    """Where a run stands between two iterations: the state of the steps that
    :func:`gplvm.inference.run.run` takes, saved as an :class:`OptimState` (:func:`_snapshot`).

    ``opt_state`` is the optax state, or the leaves of a saved one until the optax phase
    rebuilds the tree from ``init(params)`` (``()``: none, as for SciPy's L-BFGS-B, whose
    memory stays inside its Fortran routine); ``key`` is None until the optax phase sets it.
    """

    params: Any             # the parameters the next iteration starts from
    opt_state: Any
    key: Any                # the PRNG key the next iteration splits
    history: tuple          # the objective at the start of each iteration so far
    quiet: int              # consecutive iterations that met the stopping test
    evaluated: Any          # the parameters of history[-1]: where Ctrl-C or a fault rolls back
    value: float = np.nan   # the objective at ``params``, where known (SciPy's iterates)


def _starting(params, start: Optional[OptimState]) -> _Iterate:
    """The state before the first iteration: at ``params``, or where ``start`` stopped."""
    if start is None:
        return _Iterate(params, (), None, (), 0, params)
    return _Iterate(params, tuple(start.opt_leaves), start.key,
                    tuple(float(v) for v in start.history), start.quiet, params)


def _snapshot(state: _Iterate) -> Optional[OptimState]:
    """The :class:`OptimState` of ``state`` (None before the first iteration)."""
    if not state.history:
        return None
    leaves = tuple(np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(state.opt_state))
    return OptimState(jax.tree_util.tree_map(jnp.asarray, state.params), leaves,
                      None if state.key is None else jnp.asarray(state.key),
                      np.asarray(state.history, dtype=float), int(state.quiet))


def restored_opt_state(template, opt_leaves):
    """The optax state of ``template``'s tree with the checkpointed leaves, each of its
    template's dtype (a file keeps dtypes; this guards against a weakly typed leaf, which would
    not match the compiled step)."""
    leaves, treedef = jax.tree_util.tree_flatten(template)
    if len(leaves) != len(opt_leaves):
        raise ValueError(f"the checkpoint holds {len(opt_leaves)} optimiser-state arrays but "
                         f"this optimiser has {len(leaves)}; resume with the method and "
                         f"optimizer the checkpoint was written with")
    return treedef.unflatten([jnp.asarray(saved, dtype=jnp.asarray(leaf).dtype)
                              for leaf, saved in zip(leaves, opt_leaves)])


class _NonFinite(Exception):
    """A non-finite objective, gradient or step: the step is rejected and the run stops.

    ``what`` says which; ``value`` is the objective at the rejected step's start when it was
    finite (the history keeps it), else None; ``at_start``: at the starting parameters, where
    there is no finite point to keep (:class:`NonFiniteObjectiveError`).
    """

    def __init__(self, what: str, value: Optional[float] = None, at_start: bool = False):
        super().__init__(what)
        self.what, self.value, self.at_start = what, value, at_start


class _Settings(NamedTuple):
    """What :func:`minimise` was asked to do (its arguments that the phases read; Adam's
    learning rate, the optax optimizer, the stopping test's tol and patience and the callback
    are those of ``options``)."""

    fun: Callable
    args: tuple
    method: str
    n_iter: int
    options: OptimOptions


class _Fit:
    """One call of :func:`minimise`: its settings and callback, the one bar, the one
    checkpoint timer, and ``last``, the last committed state, kept here so that a fault or a
    Ctrl-C raised inside a step (or inside SciPy) cannot lose it."""

    def __init__(self, settings: _Settings, progress: Progress, timer: CheckpointTimer,
                 state: _Iterate):
        self.settings, self.callback = settings, settings.options.callback
        self.progress, self.timer, self.last = progress, timer, state

    def steps(self, step, state: _Iterate, n: int) -> RunResult:
        """``step`` from ``state`` until ``n`` iterations in all (``state.history``'s
        included), through :func:`gplvm.inference.run.run`: each committed with Ctrl-C held
        back, then the bar, the checkpoint (when due), ``callback`` and the stopping test.  A
        Ctrl-C or a :class:`_NonFinite` ends the steps by propagating; ``last`` holds the
        state to keep."""
        return run(step, state, n, start=len(state.history),
                   hooks=Hooks(self.progress, self.timer, self._stop, self._commit),
                   interrupt="raise")

    def _commit(self, old: _Iterate, new: _Iterate) -> _Iterate:
        self.last = new
        return new

    def _stop(self, state: _Iterate, info) -> bool:
        """After a committed iteration: ``callback(i, params, value)``, then whether the
        stopping test is met (never for Adam, whose objective is noisy)."""
        if self.callback is not None:
            self.callback(len(state.history) - 1, state.params, state.history[-1])
        return self.settings.method != "adam" and state.quiet >= self.settings.options.patience


def _shown(value: float) -> dict:
    """The bar's postfix after an iteration that started at objective ``value``."""
    return {"objective": f"{value:.6g}"}


def _optax_step(compiled, args: tuple, stochastic: bool, tol: float):
    """The compiled optax update as a step ``step(key, state) -> (state, info)`` of
    :func:`gplvm.inference.run.run`.  It splits the key the state carries (run() is called
    with ``key=None``), so the keys are those of every earlier version, and rejects the step,
    raising :class:`_NonFinite`, when the objective at ``state.params``, its gradient or the
    new parameters are non-finite."""
    def step(key, state: _Iterate):
        del key
        key, sub = jax.random.split(state.key)
        params, opt_state, value, grad_ok, step_ok = compiled(state.params, state.opt_state,
                                                              sub, args)
        value, at_start = float(value), not state.history   # the objective at state.params
        if not np.isfinite(value):      # reject: keep the iterate before state.params
            raise _NonFinite(f"the objective is {value}", at_start=at_start)
        if not (bool(grad_ok) and bool(step_ok)):   # reject the step; state.params is kept
            raise _NonFinite("the gradient is non-finite" if not bool(grad_ok) else
                             "no trial step of the line search is finite", value, at_start)
        history = state.history + (value,)
        quiet = state.quiet if stochastic else (
            state.quiet + 1 if _converging(history, tol) else 0)
        return _Iterate(params, opt_state, key, history, quiet, state.params), _shown(value)

    return step


def _optax_phase(fit: _Fit, state: _Iterate, method: str) -> bool:
    """Optax's ``method`` from ``state`` (its ``opt_state`` the leaves to restore, or ``()``
    for ``init(params)``) until ``n_iter`` iterations in all; whether the stopping test was
    met."""
    s = fit.settings
    step, init = _jitted(s.fun, method, s.options.learning_rate, s.options.optimizer)
    with fit.progress.compiling():
        init = _compile(init, state.params)
        opt_state = init(state.params)
        if state.opt_state:
            opt_state = restored_opt_state(opt_state, state.opt_state)
        step = _compile(step, state.params, opt_state, state.key, s.args)
    stochastic = method == "adam"
    if not stochastic and state.quiet >= s.options.patience:   # resumed just as the test was met
        return True
    return fit.steps(_optax_step(step, s.args, stochastic, s.options.tol),
                     state._replace(opt_state=opt_state), s.n_iter).stopped


class _FlatObjective:
    """A pytree of parameters as one float64 vector (SciPy's view) and the compiled
    value-and-gradient of ``fun`` on it; a non-finite value or gradient raises ``_NonFinite``."""

    def __init__(self, value_and_grad, params, args):
        leaves, self.treedef = jax.tree_util.tree_flatten(params)
        self.shapes = [np.shape(leaf) for leaf in leaves]
        self.dtypes = [np.asarray(leaf).dtype for leaf in leaves]
        self.splits = np.cumsum([int(np.prod(s)) for s in self.shapes])[:-1]
        self.x0 = np.concatenate([np.ravel(np.asarray(leaf, dtype=float)) for leaf in leaves])
        self.value_and_grad, self.args = value_and_grad, args

    def tree(self, x):
        return self.treedef.unflatten([p.reshape(s).astype(d, copy=False) for p, s, d in
                                       zip(np.split(x, self.splits), self.shapes, self.dtypes)])

    def __call__(self, x):
        value, grad = self.value_and_grad(self.tree(x), self.args)
        value = float(value)
        grad = np.concatenate([np.ravel(g) for g in jax.tree_util.tree_leaves(grad)])
        if not np.isfinite(value):
            raise _NonFinite(f"the objective is {value}")
        if not np.all(np.isfinite(grad)):
            raise _NonFinite("the gradient is non-finite")
        return value, grad.astype(float)


def _line_search_failed(result) -> bool:
    """Whether SciPy's L-BFGS-B stopped because its line search found no decrease.

    With ``ftol = gtol = 0`` SciPy stops for three reasons besides its iteration limits:
    ``ABNORMAL_TERMINATION_IN_LNSRCH`` (status 2: no step passed the sufficient-decrease test
    within 20 evaluations), a projected gradient that is exactly zero (status 0: a stationary
    point), and "relative reduction of f <= 0" (status 0 with a non-zero gradient).  The last
    means the line search ended on a warning (Moré & Thuente's interval shrank to rounding
    level) and SciPy took that step although it did not lower the objective: the same failure
    as the first, and not a stationary point.
    """
    if result.status == 2:
        return True
    return result.status == 0 and bool(np.any(np.asarray(result.jac) != 0))


class _SciPyIterations:
    """SciPy's L-BFGS-B on the run loop (the adapter).  Its iterations cannot be steps: their
    curvature memory and line search live inside a Fortran routine, which calls back after
    each.  This callback commits each reported iterate as a one-step
    :func:`gplvm.inference.run.run` (:meth:`_Fit.steps`), so that it is committed, shown,
    checkpointed, called back and tested like an optax iteration, under the same Ctrl-C rule;
    the stopping test ends SciPy's run by ``StopIteration``.  ``state.value`` is the objective
    at ``state.params``."""

    def __init__(self, fit: _Fit, flat: _FlatObjective, state: _Iterate):
        self.fit, self.flat, self.state, self.stopped = fit, flat, state, False

    def __call__(self, intermediate_result):
        done = self.fit.steps(functools.partial(self._step, intermediate_result), self.state,
                              len(self.state.history) + 1)
        self.state = done.state
        if done.stopped:
            self.stopped = True
            raise StopIteration

    def _step(self, reported, key, state: _Iterate):
        """The iterate SciPy ``reported`` as the step from ``state``: the objective at the
        start of the iteration joins the history; the stopping test compares it with the
        objective at the new iterate."""
        del key
        value, params = float(reported.fun), self.flat.tree(np.array(reported.x))
        quiet = state.quiet + 1 if _converging((state.value, value),
                                                self.fit.settings.options.tol) \
            else 0
        return (_Iterate(params, (), None, state.history + (state.value,), quiet, params, value),
                _shown(state.value))


def _lowered(before: _Iterate, after: _Iterate) -> bool:
    """Whether SciPy's iterates from ``before`` to ``after`` lowered the objective below
    ``before.value`` (the history from ``before`` on holds the objective at each of them but
    the last, whose objective is ``after.value``)."""
    return min(after.history[len(before.history):] + (after.value,)) < before.value


def _lbfgsb_phase(fit: _Fit, state: _Iterate) -> str:
    """SciPy's L-BFGS-B from ``state`` on the flattened parameters with a compiled
    value-and-gradient: ``"converged"``, ``"ended"`` or ``"stalled"``.

    Our stopping rule (relative change below ``tol`` for ``patience`` iterations) replaces
    SciPy's (``ftol = gtol = 0``), so both L-BFGS methods mean the same by ``converged``.  When
    the line search finds no decrease (:func:`_line_search_failed`), the run restarts from the
    same point with its curvature memory cleared; a second failure, without lowering the
    objective, marks the run ``"stalled"``: the objective is noisier than the
    sufficient-decrease test can resolve (on oil flow, the collapsed bound near nearly
    coincident inducing inputs changes by ~0.04 nats between points 1e-10 apart), and
    :func:`minimise` continues with optax's L-BFGS, whose approximate Wolfe conditions still
    make progress there.
    """
    s = fit.settings
    (value_and_grad,) = _jitted(s.fun, "lbfgsb", None, None)
    with fit.progress.compiling():
        flat = _FlatObjective(_compile(value_and_grad, state.params, s.args), state.params,
                              s.args)
    try:
        value = flat(flat.x0)[0]
    except _NonFinite as err:
        raise _NonFinite(err.what, at_start=True) from None
    iterations = _SciPyIterations(fit, flat, state._replace(quiet=0, value=value))
    x = flat.x0
    for attempt in range(s.n_iter):   # attempt > 0: after a failed line search
        before = iterations.state
        room = s.n_iter - len(before.history)
        result = scipy.optimize.minimize(
            flat, x, jac=True, method="L-BFGS-B", callback=iterations,
            options={"maxiter": room, "maxfun": 100 * room + 100, "ftol": 0.0, "gtol": 0.0})
        x = np.array(result.x)
        if iterations.stopped or len(iterations.state.history) >= s.n_iter:
            return "converged" if iterations.stopped else "ended"
        if not _line_search_failed(result):
            return "converged" if result.status == 0 else "ended"
        if attempt > 0 and not _lowered(before, iterations.state):
            return "stalled"
    return "ended"


def minimise(fun: Callable, params, *, args: tuple = (), method: str = "lbfgs",
             n_iter: int = 1000, progress: bool = True, desc: str = "fit",
             options: OptimOptions = OptimOptions()) -> OptimResult:
    """Minimise ``fun`` over a pytree of parameters.

    Args:
        fun: ``fun(params, *args) -> scalar`` for ``method="lbfgs"`` or ``"lbfgsb"``;
            ``fun(params, key, *args) -> scalar`` (a stochastic estimate) for ``method="adam"``.
            Pass data through ``args`` (pytrees, traced) rather than closing over it: the
            compiled functions are cached per ``fun``, so a module-level ``fun`` compiles once
            per shape for every fit.
        params: initial unconstrained parameters (any pytree of float arrays).
        args: the further arguments of ``fun``.
        method: ``"lbfgs"`` (optax), ``"lbfgsb"`` (SciPy's L-BFGS-B) or ``"adam"``.
        n_iter: the most iterations.
        progress: show a tqdm progress bar: a timed "compiling" phase, then the iterations
            with the current objective.
        desc: the bar's label, and the run's name in warnings.
        options: the rest (:class:`OptimOptions`: Adam's learning rate, the stopping test's
            ``tol`` and ``patience``, an explicit optax ``optimizer``, the PRNG ``key``, a
            per-iteration ``callback``, the ``start`` state to continue from, and the
            ``checkpoint`` with its ``checkpoint_interval``), e.g.
            ``options=OptimOptions(learning_rate=0.05, callback=print)``.

    Returns:
        :class:`OptimResult` with the final (or last finite) parameters, the history (the
        objective at the start of each iteration), the seconds spent compiling and ``state``,
        the :class:`OptimState` after the last completed iteration (after Ctrl-C: resuming
        from it continues exactly where the run stopped).

    Raises:
        NonFiniteObjectiveError: the objective or its gradient is non-finite at ``params``.

    Warns:
        RuntimeWarning: the objective or its gradient became non-finite at an iteration (named
            in the message); the result holds the last iterate at which it was finite.
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r}; use 'lbfgs' or 'lbfgsb' (deterministic "
                         f"objectives) or 'adam' (stochastic objectives)")
    o = options
    if o.optimizer is not None and method == "lbfgsb":
        raise ValueError("OptimOptions(optimizer=...) sets an optax transformation; use "
                         "method='lbfgs' or 'adam' with it, not 'lbfgsb'")
    start, checkpoint, key = o.start, o.checkpoint, o.key
    state = _starting(_strong(params if start is None else start.params), start)
    timer = CheckpointTimer(None if checkpoint is None else
                            lambda state: checkpoint(_snapshot(state)), o.checkpoint_interval)
    fit = _Fit(_Settings(fun, args, method, n_iter, o),
               Progress(n_iter, desc, progress, initial=len(state.history)), timer, state)
    end, interrupted, fault = None, False, None
    try:
        end = _lbfgsb_phase(fit, state) if method == "lbfgsb" else "optax"
        if end in ("optax", "stalled"):
            # a stalled L-BFGS-B goes on from its point with optax's L-BFGS, freshly started
            begin = fit.last if end == "optax" else fit.last._replace(opt_state=(), key=None,
                                                                      quiet=0)
            if begin.key is None:
                begin = begin._replace(key=jax.random.PRNGKey(0) if key is None else key)
            end = "converged" if _optax_phase(fit, begin, "lbfgs" if end == "stalled"
                                              else method) else "ended"
    except KeyboardInterrupt:     # the iteration in progress is dropped; fit.last is kept
        interrupted = True
        warnings.warn(f"{desc}: interrupted after {len(fit.last.history)} iterations; "
                      f"keeping the parameters reached so far", RuntimeWarning, stacklevel=2)
    except _NonFinite as err:
        fault = err
    finally:
        fit.progress.close()
    return _finish(fit, end == "converged" and not interrupted and fault is None, interrupted,
                   fault, desc)


def _finish(fit: _Fit, converged: bool, interrupted: bool, fault: Optional[_NonFinite],
            desc: str) -> OptimResult:
    """The result of :func:`minimise` from the last committed state: its parameters after a
    completed run, else the last ones where the objective was evaluated finite."""
    state = fit.last
    history, kept = state.history, state.evaluated if interrupted else state.params
    if fault is not None and fault.at_start:
        raise NonFiniteObjectiveError(
            f"{desc}: {fault.what} at the starting parameters, so there is no finite point to "
            f"start from or keep; look for non-finite or extreme values (e.g. 1e300) in the "
            f"data and for invalid initial values",
            jax.tree_util.tree_map(jnp.asarray, state.params),
            "gradient" if "gradient" in fault.what else "objective", fit.progress.compile_s)
    if fault is not None:
        warnings.warn(f"{desc}: non-finite objective or gradient at iteration {len(history)} "
                      f"({fault.what}); the step was rejected and the run stopped at the last "
                      f"parameters where the objective was finite", RuntimeWarning,
                      stacklevel=3)
        if fault.value is None:         # not finite at state.params: back to the one before
            kept = state.evaluated
        else:                           # finite at state.params, which are kept
            history = history + (fault.value,)
    return OptimResult(jax.tree_util.tree_map(jnp.asarray, kept), np.asarray(history),
                       len(history), converged, interrupted, fit.progress.compile_s,
                       _snapshot(state))
