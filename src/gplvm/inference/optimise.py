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
of the progress bar and returned as ``compile_s``); the Python loop around it moves the bar,
checks convergence and keeps the last finite iterate, so that

* a non-finite objective or gradient mid-run (a failed Cholesky gives NaN in JAX, an overflow
  gives inf) rejects the step that led there: the run rolls back to the last iterate at which
  the objective was evaluated finite, stops, and says at which iteration with a
  ``RuntimeWarning``; non-finite parameters never reach ``callback`` (a checkpoint) nor the
  result.  A caller with a remedy (a larger jitter) restarts from the returned parameters;
* an objective or gradient that is already non-finite at the starting parameters raises
  :class:`NonFiniteObjectiveError`: there is no finite point to keep;
* Ctrl-C (``KeyboardInterrupt``) stops the run and returns the work done so far, flagged
  ``interrupted=True``, instead of losing it;
* ``checkpoint`` receives an :class:`OptimState` (parameters, optax state, PRNG key, history)
  at most every ``checkpoint_interval`` seconds, the result carries the last one, and
  ``start=`` continues a run from it, bit for bit for the optax methods (estimators'
  ``checkpoint=path`` and ``resume()``, issue 16).
"""

from __future__ import annotations

import threading
import time
import warnings
import weakref
from contextlib import contextmanager
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize
from tqdm.auto import tqdm

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


class _Bar:
    """The progress bar: a timed "compiling" phase, then one tick per iteration."""

    def __init__(self, n_iter, desc, progress):
        self.desc = desc
        self.tqdm = tqdm(total=n_iter, desc=desc, disable=not progress, leave=False,
                         dynamic_ncols=True)
        self.compile_s = 0.0

    @contextmanager
    def compiling(self):
        """Show "<desc> (compiling)" with its elapsed time, refreshed while XLA compiles."""
        self.tqdm.set_description(f"{self.desc} (compiling)")
        done = threading.Event()
        ticker = threading.Thread(target=self._tick_while, args=(done,), daemon=True)
        start = time.perf_counter()
        if not self.tqdm.disable:
            ticker.start()
        try:
            yield
        finally:
            done.set()
            if ticker.is_alive():
                ticker.join()
            self.compile_s += time.perf_counter() - start
            self.tqdm.set_description(self.desc)
            if self.tqdm.n == 0:
                self.tqdm.reset()   # the iteration rate then counts iterations only
            if self.compile_s >= 0.05:
                self.tqdm.set_postfix(compiled=f"{self.compile_s:.1f}s")

    def _tick_while(self, done):
        while not done.wait(0.25):
            self.tqdm.refresh()

    def iteration(self, i, value, last):
        if i % 10 == 0 or last:
            postfix = {"objective": f"{value:.6g}"}
            if self.compile_s >= 0.05:
                postfix["compiled"] = f"{self.compile_s:.1f}s"
            self.tqdm.set_postfix(postfix, refresh=False)
        self.tqdm.update(1)


def _converging(history, tol):
    """Whether the last relative change of the objective is below ``tol``."""
    if len(history) < 2:
        return False
    return abs(history[-2] - history[-1]) / max(1.0, abs(history[-1])) < tol


def _optax_loop(fun, params, method, n_iter, learning_rate, tol, patience, key, optimizer,
                args, callback, bar, out, opt_leaves=(), quiet=0):
    """Run the compiled optax step from ``params`` until ``n_iter`` iterations in all (those in
    ``out["history"]`` included); fills ``out`` (params, history, converged, the state to
    resume from) as it goes.  ``opt_leaves`` (non-empty) restore a checkpointed optax state
    in place of ``init(params)``, and ``quiet`` the count of the stopping test."""
    step, init = _jitted(fun, method, learning_rate, optimizer)
    with bar.compiling():
        init = _compile(init, params)
        state = init(params)
        if opt_leaves:
            state = restored_opt_state(state, opt_leaves)
        step = _compile(step, params, state, key, args)
    stochastic = method == "adam"
    if not stochastic and quiet >= patience:    # resumed just as the stopping test was met
        out["converged"] = True
        return
    for i in range(len(out["history"]), n_iter):
        key, sub = jax.random.split(key)
        new_params, new_state, value, grad_ok, step_ok = step(params, state, sub, args)
        value = float(value)  # the objective at `params` (before this update)
        if not np.isfinite(value):      # reject: keep the iterate before `params`
            _fault(out, i, f"the objective is {value}", params)
            return
        out["history"].append(value)
        out["last_good"] = params       # evaluated finite: the iterate a fault rolls back to
        if not (bool(grad_ok) and bool(step_ok)):   # reject the step; `params` is kept
            _fault(out, i, "the gradient is non-finite" if not bool(grad_ok) else
                   "no trial step of the line search is finite", params)
            return
        params, state = new_params, new_state
        out["params"] = params
        if not stochastic:
            quiet = quiet + 1 if _converging(out["history"], tol) else 0
        out["resume"] = (params, state, key, i + 1, quiet)   # one assignment: consistent
        out["saver"].after_iteration(out)
        if callback is not None:
            callback(i, params, value)
        bar.iteration(i, value, i == n_iter - 1)
        if not stochastic and quiet >= patience:
            out["converged"] = True
            return


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


def _snapshot(out) -> Optional[OptimState]:
    """The :class:`OptimState` of the last completed iteration (None before the first)."""
    if out["resume"] is None:
        return None
    params, state, key, n, quiet = out["resume"]
    leaves = tuple(np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(state))
    return OptimState(jax.tree_util.tree_map(jnp.asarray, params), leaves,
                      None if key is None else jnp.asarray(key),
                      np.asarray(out["history"][:n], dtype=float), int(quiet))


class _Saver:
    """Calls ``checkpoint(state)`` after an iteration at most every ``interval`` seconds
    (every iteration when 0); ``None`` makes it do nothing."""

    def __init__(self, checkpoint, interval):
        self.checkpoint, self.interval = checkpoint, float(interval)
        self.last = time.monotonic()

    def after_iteration(self, out):
        if self.checkpoint is None or time.monotonic() - self.last < self.interval:
            return
        self.checkpoint(_snapshot(out))
        self.last = time.monotonic()


def _fault(out, i, what, params):
    """Record a non-finite objective, gradient or step at iteration ``i``: the run stops and
    returns ``out["last_good"]``; at the starting parameters (``i == 0``) it raises instead."""
    out["non_finite"] = (i, what)
    if i == 0:
        out["at_start"] = params


class _NonFinite(Exception):
    """A non-finite value or gradient of the flattened objective; ``what`` says which."""


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


def _lbfgsb_loop(fun, params, n_iter, tol, patience, args, callback, bar, out):
    """SciPy's L-BFGS-B on the flattened parameters with a compiled value-and-gradient.

    Our stopping rule (relative change below ``tol`` for ``patience`` iterations) replaces
    SciPy's (``ftol = gtol = 0``), so both L-BFGS methods mean the same by ``converged``.  When
    the line search finds no decrease (:func:`_line_search_failed`), the run restarts from the
    same point with its curvature memory cleared; a second failure, without lowering the
    objective, marks the run ``stalled``: the objective is noisier than the
    sufficient-decrease test can resolve (on oil flow, the collapsed bound near nearly
    coincident inducing inputs changes by ~0.04 nats between points 1e-10 apart), and
    :func:`minimise` continues with optax's L-BFGS, whose approximate Wolfe conditions still
    make progress there.
    """
    (value_and_grad,) = _jitted(fun, "lbfgsb", None, None)
    with bar.compiling():
        flat = _FlatObjective(_compile(value_and_grad, params, args), params, args)
    values, quiet = [], [0]   # the objective at each accepted iterate; a one-cell counter

    def on_iteration(intermediate_result):
        i = len(out["history"])
        out["history"].append(values[-1])   # the objective at the start of this iteration
        values.append(float(intermediate_result.fun))
        out["params"] = out["last_good"] = flat.tree(np.array(intermediate_result.x))
        quiet[0] = quiet[0] + 1 if _converging(values, tol) else 0
        out["resume"] = (out["params"], (), None, i + 1, quiet[0])
        out["saver"].after_iteration(out)
        if callback is not None:
            callback(i, out["params"], values[-2])
        bar.iteration(i, values[-2], i == n_iter - 1)
        if quiet[0] >= patience:
            out["converged"] = True
            raise StopIteration

    x = flat.x0
    try:
        values.append(flat(x)[0])
    except _NonFinite as err:
        _fault(out, 0, str(err), params)
        return
    try:
        for attempt in range(n_iter):   # attempt > 0: after a failed line search
            start, start_values = len(out["history"]), len(values)
            result = scipy.optimize.minimize(
                flat, x, jac=True, method="L-BFGS-B", callback=on_iteration,
                options={"maxiter": n_iter - start, "maxfun": 100 * (n_iter - start) + 100,
                         "ftol": 0.0, "gtol": 0.0})
            x = np.array(result.x)
            if out["converged"] or len(out["history"]) >= n_iter:
                return
            if not _line_search_failed(result):
                out["converged"] = result.status == 0
                return
            if attempt > 0 and not min(values[start_values:], default=np.inf) < values[
                    start_values - 1]:
                out["stalled"] = True
                return
    except _NonFinite as err:       # at a trial point of the line search: not accepted
        out["non_finite"] = (len(out["history"]), str(err))


def minimise(fun: Callable, params, *, method: str = "lbfgs", n_iter: int = 1000,
             learning_rate: float = 0.01, tol: float = 1e-9, patience: int = 10,
             key: Optional[jax.Array] = None, progress: bool = True, desc: str = "fit",
             optimizer: Optional[optax.GradientTransformation] = None,
             args: tuple = (),
             callback: Optional[Callable[[int, Any, float], None]] = None,
             start: Optional[OptimState] = None,
             checkpoint: Optional[Callable[[OptimState], None]] = None,
             checkpoint_interval: float = 60.0) -> OptimResult:
    """Minimise ``fun`` over a pytree of parameters.

    Args:
        fun: ``fun(params, *args) -> scalar`` for ``method="lbfgs"`` or ``"lbfgsb"``;
            ``fun(params, key, *args) -> scalar`` (a stochastic estimate) for ``method="adam"``.
            Pass data through ``args`` (pytrees, traced) rather than closing over it: the
            compiled functions are cached per ``fun``, so a module-level ``fun`` compiles once
            per shape for every fit.
        params: initial unconstrained parameters (any pytree of float arrays).
        method: ``"lbfgs"`` (optax), ``"lbfgsb"`` (SciPy's L-BFGS-B) or ``"adam"``.
        n_iter: the most iterations.
        learning_rate: Adam's step size (ignored by the L-BFGS methods, which line-search).
        tol: the L-BFGS methods stop when the relative change of the objective stays below
            ``tol`` for ``patience`` consecutive iterations; Adam runs all ``n_iter`` (its
            objective is noisy).
        key: a ``jax.random`` key for stochastic objectives.
        progress: show a tqdm progress bar: a timed "compiling" phase, then the iterations
            with the current objective.
        optimizer: an explicit optax transformation overriding the default of ``"lbfgs"`` or
            ``"adam"``.
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
    if optimizer is not None and method == "lbfgsb":
        raise ValueError("optimizer= sets an optax transformation; use method='lbfgs' or "
                         "'adam' with it, not 'lbfgsb'")
    params = _strong(params if start is None else start.params)
    history = [] if start is None else [float(v) for v in start.history]
    out = {"params": params, "last_good": params, "history": history, "converged": False,
           "non_finite": None, "stalled": False, "at_start": None,
           "saver": _Saver(checkpoint, checkpoint_interval),
           "resume": None if start is None else (params, tuple(start.opt_leaves), start.key,
                                                  len(history), start.quiet)}
    interrupted = False
    bar = _Bar(n_iter, desc, progress)
    try:
        if method == "lbfgsb":
            _lbfgsb_loop(fun, params, n_iter, tol, patience, args, callback, bar, out)
        if method != "lbfgsb" or out["stalled"]:
            resumed = start is not None and not out["stalled"]
            if resumed and start.key is not None:
                key = start.key
            key = jax.random.PRNGKey(0) if key is None else key
            _optax_loop(fun, out["params"], "lbfgs" if out["stalled"] else method, n_iter,
                        learning_rate, tol, patience, key, optimizer, args, callback, bar, out,
                        start.opt_leaves if resumed else (), start.quiet if resumed else 0)
    except KeyboardInterrupt:
        interrupted = True
        warnings.warn(f"{desc}: interrupted after {len(out['history'])} iterations; keeping "
                      f"the parameters reached so far", RuntimeWarning, stacklevel=2)
    finally:
        bar.tqdm.close()
    if out["at_start"] is not None:
        what = out["non_finite"][1]
        raise NonFiniteObjectiveError(
            f"{desc}: {what} at the starting parameters, so there is no finite point to "
            f"start from or keep; look for non-finite or extreme values (e.g. 1e300) in the "
            f"data and for invalid initial values", jax.tree_util.tree_map(jnp.asarray, out[
                "at_start"]), "gradient" if "gradient" in what else "objective", bar.compile_s)
    if out["non_finite"] is not None:
        i, what = out["non_finite"]
        warnings.warn(f"{desc}: non-finite objective or gradient at iteration {i} ({what}); "
                      f"the step was rejected and the run stopped at the last parameters "
                      f"where the objective was finite", RuntimeWarning, stacklevel=2)
    kept = out["last_good"] if interrupted or out["non_finite"] is not None else out["params"]
    params = jax.tree_util.tree_map(jnp.asarray, kept)
    return OptimResult(params, np.asarray(out["history"]), len(out["history"]),
                       bool(out["converged"]), interrupted, bar.compile_s, _snapshot(out))
