"""One Bayesian GPLVM objective+gradient and one RFLVM sweep on every device kind JAX sees
(issue 18, item 4): CPU always, a GPU where one is lent.

Run (one process per precision; the precision is fixed before JAX's first computation)::

    .venv/bin/python benchmarks/device_compare.py [--precision float64|float32]
        [--bound-rows 100000] [--sweep-rows 10000] [--sweep-cols 1000] [--repeats 5]

The code path is the library's own, unchanged: the estimator's starting values and problem
(``BayesianGPLVM._initial``, the collapsed bound of :mod:`gplvm.models.gplvm_family.bound`
under ``jax.jit(jax.value_and_grad(...))``), and one sweep of the RFLVM's Gibbs sampler
(:func:`gplvm.models.rflvm.sweep.sweep`, Poisson likelihood, M = 100 features, Q = 2, one
chain, from a PCA start after ``--warm`` sweeps), its inputs placed on each device with
``jax.device_put``.  Data: the bound on N rows of a smooth 2-D latent map into D = 50 columns
(noise sd 0.1), Q = 2, M = 30 inducing points; the sweep on Poisson counts of a planted 2-D
latent (rates exp(f), f a random-feature map scaled to a mean count of about 3).  Printed:
the device (its ``device_kind``), the precision, compile seconds and the median of
``--repeats`` timed calls; the thread settings.  On CPU the XLA client's threads run as the
environment sets them (the script sets none; pass ``XLA_FLAGS`` and ``OPENBLAS_NUM_THREADS``
to pin them; both are printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", choices=("float64", "float32"), default="float64")
    p.add_argument("--bound-rows", type=int, default=100_000)
    p.add_argument("--sweep-rows", type=int, default=10_000)
    p.add_argument("--sweep-cols", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warm", type=int, default=3, help="RFLVM sweeps before timing")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def _timed(fn, args, repeats: int):
    """(compile + first call seconds, median seconds of ``repeats`` later calls)."""
    import jax
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return first, statistics.median(times)


def bound_task(n_rows: int, seed: int):
    """(function, arguments) of one objective+gradient of the collapsed bound."""
    import jax
    import numpy as np

    import gplvm
    from gplvm.models.gplvm_family import bound as core
    from gplvm.random import as_key
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 2))
    Y = np.sin(X @ rng.normal(size=(2, 50))) + 0.1 * rng.normal(size=(n_rows, 50))
    est = gplvm.BayesianGPLVM(n_components=2, n_inducing=30, progress=False)
    Ys = (Y - Y.mean(0)) / Y.std(0)
    u, problem = est._initial(Ys, None, None, as_key(seed))
    return jax.jit(jax.value_and_grad(core.negative_bound)), (u, problem)


def sweep_task(n_rows: int, n_cols: int, seed: int, warm: int):
    """(function, arguments) of one RFLVM Gibbs sweep (Poisson, one chain)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from gplvm.kernels import RBF
    from gplvm.models.rflvm import sweep as sw
    from gplvm.models.rflvm.init import init_state, prepare_data
    from gplvm.models.rflvm.spec import RFLVMSpec
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 2))
    W = rng.normal(size=(2, 25))
    F = np.hstack([np.sin(X @ W), np.cos(X @ W)]) @ rng.normal(size=(50, n_cols)) * 0.15
    Y = rng.poisson(3.0 * np.exp(F - F.mean())).astype(float)
    spec = RFLVMSpec(likelihood="poisson", n_components=2, n_freq=50, n_outputs=n_cols,
                     intercept=True, map_sweeps=1)
    data = prepare_data(spec, Y, None, None, RBF(lengthscale=1.0), None)
    Z = np.log1p(Y) - np.log1p(Y).mean(0)
    U, s, _ = np.linalg.svd(Z, full_matrices=False)
    X0 = jnp.asarray(U[:, :2] * s[:2] / (U[:, :2] * s[:2]).std(0))
    state = init_state(jax.random.PRNGKey(seed), spec, data, X0, 0.1, 20)
    one = jax.jit(lambda key, st, d: sw.sweep(key, st, spec, d, jnp.zeros(1)))
    for i in range(warm):
        state = one(jax.random.PRNGKey(100 + i), state, data)
    return one, (jax.random.PRNGKey(7), state, data)


def main(argv=None) -> list[dict]:
    args = _parse(argv)
    os.environ["GPLVM_PRECISION"] = args.precision      # read when gplvm is imported
    import jax
    import gplvm  # noqa: F401
    kinds = []
    for platform in ("cpu", "gpu"):
        try:
            kinds.append(jax.devices(platform)[0])
        except RuntimeError:                           # no such backend in this process
            pass
    print(f"jax {jax.__version__}  precision {args.precision}  XLA_FLAGS="
          f"{os.environ.get('XLA_FLAGS')}  OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS')}  devices: "
          + ", ".join(f"{d.platform}:{d.device_kind}" for d in kinds), flush=True)
    tasks = {f"bound+grad N={args.bound_rows} D=50 M=30": bound_task(args.bound_rows,
                                                                         args.seed),
             f"RFLVM sweep N={args.sweep_rows} D={args.sweep_cols} M=100":
                 sweep_task(args.sweep_rows, args.sweep_cols, args.seed, args.warm)}
    rows = []
    print(f"{'task':>40} {'device':>28} {'compile+1st s':>14} {'median ms':>10}")
    for device in kinds:
        for name, (fn, fn_args) in tasks.items():
            placed = jax.device_put(fn_args, device)
            first, median = _timed(fn, placed, args.repeats)
            label = f"{device.platform}:{device.device_kind}"
            rows.append({"task": name, "device": label, "precision": args.precision,
                         "first_s": first, "median_ms": 1e3 * median})
            print(f"{name:>40} {label[:28]:>28} {first:14.2f} {1e3 * median:10.1f}",
                  flush=True)
    if len(kinds) == 1:
        print("no GPU in this process: the GPU rows need a machine with one (issue 18, item 4)")
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
