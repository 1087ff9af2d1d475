"""How a benchmark reaches inside a fit it measures: wrap one library function for a block.

Some figures need what a fit passes to an inner function (the optimiser's start, the MCMC
driver's timings).  Patching ``module.name`` by hand fails silently when the library stops
calling that name there (a move, a rename): the benchmark then prints figures of an untouched
fit.  :func:`wrapped` restores the function on leaving and raises if the block never called it.

    from _hooks import wrapped
    with wrapped(collapsed_run, "minimise", lambda real: spy_on(real)):
        model.fit(Y)
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable


@contextmanager
def wrapped(module, name: str, wrapper: Callable[[Callable], Callable]):
    """Within the block ``module.<name>`` is ``wrapper(real)``; restored on leaving.

    Raises:
        RuntimeError: the block ended normally without one call of ``module.<name>``.
    """
    real = getattr(module, name)
    inner, calls = wrapper(real), [0]

    def counted(*args, **kwargs):
        calls[0] += 1
        return inner(*args, **kwargs)

    setattr(module, name, counted)
    try:
        yield
        if not calls[0]:
            raise RuntimeError(f"{module.__name__}.{name} was never called inside the block: "
                               f"the library no longer calls it there, so this benchmark's "
                               f"figure would be of an unwrapped fit; update the benchmark")
    finally:
        setattr(module, name, real)


@contextmanager
def driver_timings():
    """Within the block, every ``RFLVM.fit`` fills the dict yielded with the MCMC driver's
    timings (``run_chains(report=Report(timings=...))``: compile_s, sweep_s, calls, ...).
    gplvm is imported here, not at the top, so that a script can set up JAX first."""
    import gplvm.models.rflvm.run as rflvm_module

    timings = {}
    with wrapped(rflvm_module, "run_chains", lambda real: lambda *a, report, **kw: real(
            *a, report=report._replace(timings=timings), **kw)):
        yield timings
