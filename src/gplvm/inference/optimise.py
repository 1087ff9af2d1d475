"""One optimisation loop for every variational and type-II maximum-likelihood fit (STYLE.md 2).

:func:`minimise` runs an optax ``GradientTransformation`` on a pytree of unconstrained
parameters: ``optax.lbfgs`` (with its zoom line search) for deterministic objectives and
``optax.adam`` for stochastic ones (minibatches, reparameterised samples).  The step is compiled
once; the Python loop around it only moves the progress bar, checks convergence, and keeps the
best finite iterate so that

* a non-finite objective stops the run and returns the last finite parameters (with a warning),
* Ctrl-C (``KeyboardInterrupt``) stops the run and returns the work done so far, flagged
  ``interrupted=True``, instead of losing it.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm


class OptimResult(NamedTuple):
    params: Any
    history: np.ndarray   # objective per iteration (the minimised value)
    n_iter: int
    converged: bool
    interrupted: bool


def _make_lbfgs_step(fun, optimizer):
    @jax.jit
    def step(params, state, key, args):
        del key

        def value_fn(p):
            return fun(p, *args)

        value, grad = optax.value_and_grad_from_state(value_fn)(params, state=state)
        updates, state = optimizer.update(grad, state, params, value=value, grad=grad,
                                          value_fn=value_fn)
        return optax.apply_updates(params, updates), state, value

    return step


def _make_stochastic_step(fun, optimizer):
    @jax.jit
    def step(params, state, key, args):
        value, grad = jax.value_and_grad(fun)(params, key, *args)
        updates, state = optimizer.update(grad, state, params)
        return optax.apply_updates(params, updates), state, value

    return step


_STEPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _strong(tree):
    """Drop weak types: optax's ``init`` returns weakly typed scalars that its ``update`` returns
    strongly typed, which would otherwise make the jitted step compile twice."""
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=jnp.asarray(x).dtype), tree)


def _compiled_step(fun, method, learning_rate, optimizer):
    """The jitted step for ``fun``, cached so restarts of one objective compile once."""
    cache_key = (method, learning_rate, id(optimizer) if optimizer is not None else None)
    per_fun = _STEPS.setdefault(fun, {})
    if cache_key not in per_fun:
        if optimizer is None:
            optimizer = optax.lbfgs() if method == "lbfgs" else optax.adam(learning_rate)
        make = _make_lbfgs_step if method == "lbfgs" else _make_stochastic_step
        init = jax.jit(lambda params, opt=optimizer: _strong(opt.init(params)))
        per_fun[cache_key] = (make(fun, optimizer), init)
    return per_fun[cache_key]


def minimise(fun: Callable, params, *, method: str = "lbfgs", n_iter: int = 1000,
             learning_rate: float = 0.01, tol: float = 1e-9, patience: int = 10,
             key: Optional[jax.Array] = None, progress: bool = True, desc: str = "fit",
             optimizer: Optional[optax.GradientTransformation] = None,
             args: tuple = (),
             callback: Optional[Callable[[int, Any, float], None]] = None) -> OptimResult:
    """Minimise ``fun`` over a pytree of parameters.

    Args:
        fun: ``fun(params, *args) -> scalar`` for ``method="lbfgs"``;
            ``fun(params, key, *args) -> scalar`` (a stochastic estimate) for ``method="adam"``.
            Pass data through ``args`` (pytrees, traced) rather than closing over it: the
            compiled step is cached per ``fun``, so a module-level ``fun`` compiles once per
            shape for every fit.
        params: initial unconstrained parameters (any pytree of float arrays).
        method: ``"lbfgs"`` or ``"adam"``.
        n_iter: the most iterations.
        learning_rate: Adam's step size (ignored by L-BFGS, which line-searches).
        tol: L-BFGS stops when the relative change of the objective stays below ``tol`` for
            ``patience`` consecutive iterations; Adam runs all ``n_iter`` (its objective is noisy).
        key: a ``jax.random`` key for stochastic objectives.
        progress: show a tqdm progress bar with the current objective.
        optimizer: an explicit optax transformation overriding ``method``'s default.
        callback: called as ``callback(i, params, value)`` after each iteration (checkpointing).

    Returns:
        :class:`OptimResult` with the final (or best finite) parameters and the history.
    """
    if method not in ("lbfgs", "adam"):
        raise ValueError(f"method={method!r}; use 'lbfgs' (deterministic objectives) or 'adam' "
                         f"(stochastic objectives)")
    stochastic = method == "adam"
    step, init = _compiled_step(fun, method, learning_rate, optimizer)
    key = jax.random.PRNGKey(0) if key is None else key
    params = _strong(params)
    state = init(params)
    history: list[float] = []
    last_good, converged, interrupted, quiet = params, False, False, 0
    bar = tqdm(total=n_iter, desc=desc, disable=not progress, leave=False, dynamic_ncols=True)
    try:
        for i in range(n_iter):
            key, sub = jax.random.split(key)
            new_params, state, value = step(params, state, sub, args)
            value = float(value)  # the objective at `params` (before this update)
            if not np.isfinite(value):
                warnings.warn(f"{desc}: the objective became non-finite at iteration {i}; "
                              f"returning the last finite parameters", RuntimeWarning,
                              stacklevel=2)
                params = last_good
                break
            last_good = params
            history.append(value)
            params = new_params
            if callback is not None:
                callback(i, params, value)
            if i % 10 == 0 or i == n_iter - 1:
                bar.set_postfix(objective=f"{value:.6g}", refresh=False)
            bar.update(1)
            if not stochastic and len(history) > 1:
                change = abs(history[-2] - history[-1]) / max(1.0, abs(history[-1]))
                quiet = quiet + 1 if change < tol else 0
                if quiet >= patience:
                    converged = True
                    break
    except KeyboardInterrupt:
        interrupted = True
        params = last_good
        warnings.warn(f"{desc}: interrupted after {len(history)} iterations; keeping the "
                      f"parameters reached so far", RuntimeWarning, stacklevel=2)
    finally:
        bar.close()
    params = jax.tree_util.tree_map(jnp.asarray, params)
    return OptimResult(params, np.asarray(history), len(history), converged, interrupted)
