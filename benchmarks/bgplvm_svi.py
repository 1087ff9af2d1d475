"""The stochastic variational Bayesian GPLVM (issue 18, item 1): ``inference='svi'``.

Parts (``--parts``, default ``oil``):

* ``oil``      oil flow (1000 x 12), Q = 10, M = 30, batch 100: leave-one-out 1-NN errors in
               the two most relevant latent dimensions (largest inverse squared
               length-scales), per seed and the median, the metric of
               benchmarks/reproduce/bgplvm_oil.py (the collapsed model gets 2).
* ``scaling``  synthetic GPLVM data (Q = 2, D = 50) written to a ``.npy`` memmap, N from
               ``--sizes``: seconds per epoch, peak resident memory (``resource.getrusage``)
               and the Procrustes R^2 of the fitted latent against the truth.

Run single-threaded, as the figures in benchmarks/README.md were::

    OPENBLAS_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false \\
        .venv/bin/python benchmarks/bgplvm_svi.py [--seeds 0 1 2 3 4] [--epochs 1000] [--natural-step 0.1]
    ... --parts scaling --sizes 10000 100000 1000000 --batch-size 1000 [--steps 2000] [--folder /tmp]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import numpy as np
from scipy.linalg import orthogonal_procrustes

import gplvm
from gplvm.data.loaders import load_oil_flow
from gplvm.metrics import loo_1nn_errors
from gplvm.models.gplvm_family.variants.svi import svi_fit, svi_init
from gplvm.random import as_key


def oil_part(seeds, epochs, learning_rate, batch_size):
    data = load_oil_flow()
    Y, labels = data.Y, np.asarray(data.labels)
    errors = []
    for seed in seeds:
        start = time.perf_counter()
        model = gplvm.BayesianGPLVM(n_components=10, n_inducing=30, inference="svi",
                                    batch_size=batch_size, max_iter=epochs,
                                    learning_rate=learning_rate, random_state=seed,
                                    progress=False).fit(Y)
        top = np.argsort(-model.relevance_)[:2]
        errors.append(loo_1nn_errors(model.X_mean_[:, top], labels))
        print(f"  seed {seed}: 1-NN errors {errors[-1]:3d}/1000, bound {model.elbo_:10.2f}, "
              f"{model.n_iter_} epochs, {time.perf_counter() - start:6.1f} s", flush=True)
    print(f"oil flow, svi (Q=10, M=30, batch {batch_size}, {epochs} epochs, learning rate "
          f"{learning_rate}, natural step {svi_fit.NATURAL_STEP}): median 1-NN errors {np.median(errors):.1f} (per seed {errors})",
          flush=True)


def synthetic(N, D, seed, path, lengthscale=2.0):
    """Y = f(X) + noise (sd 0.1), f a draw from an RBF GP of unit variance and the given
    length-scale (200 random Fourier features approximate it) on a 2-D latent X ~ N(0, I),
    written to ``path`` as a .npy file 10⁴ rows at a time.  With length-scale 1 the map folds
    the latent so much that even the collapsed model recovers it only up to a warp (Procrustes
    R² 0.63 on 2000 rows, the SVI fit 0.61); with 2 both reach 0.98."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(2, 200)) / lengthscale
    b = rng.uniform(0, 2 * np.pi, 200)
    A = rng.normal(size=(200, D)) * np.sqrt(2.0 / 200)
    X = rng.normal(size=(N, 2))
    Y = np.lib.format.open_memmap(path, mode="w+", dtype=float, shape=(N, D))
    for start in range(0, N, 10_000):
        x = X[start:start + 10_000]
        Y[start:start + len(x)] = np.cos(x @ W + b) @ A + 0.1 * rng.normal(size=(len(x), D))
    Y.flush()
    del Y
    return X


def procrustes_r2(X_true, X_fit):
    """R^2 of the best rotation (and scale, shift) of the fitted latent onto the truth."""
    A, B = X_true - X_true.mean(0), X_fit - X_fit.mean(0)
    R, scale = orthogonal_procrustes(B, A)
    resid = A - B @ R * (scale / np.sum(B**2))
    return 1.0 - np.sum(resid**2) / np.sum(A**2)


def start_r2(model_args, Y, X_true):
    """(seconds, Procrustes R²) of the SVI start alone: the PCA latents every unvisited row keeps
    (:func:`gplvm.models.gplvm_family.variants.svi.svi_init.initial_state`), so the table
    shows what the
    epochs add to them."""
    start = time.perf_counter()
    est = gplvm.BayesianGPLVM(**model_args)
    rows_of, _, _ = svi_init.svi_data(est, Y, None, None)
    state = svi_init.initial_state(est, rows_of, Y.shape[0], as_key(est.random_state))
    return time.perf_counter() - start, procrustes_r2(X_true, state.X_mean)


def scaling_part(sizes, steps, batch_size, learning_rate, folder):
    """Each size runs ceil(steps·B/N) epochs (at least one), so every fit takes about the same
    number of Adam steps; s/epoch is the whole fit's wall time (start and final bound included)
    over its epochs, CPU s/epoch the process's CPU time likewise (the figure to read on a shared
    machine, where wall time depends on the load); peak RSS is the process's so far (sizes ascending; it counts the memmap's pages
    the process has touched, up to the file's N·D·8 bytes)."""
    print(f"scaling: D=50, Q=2, M=30, batch {batch_size}, about {steps} steps per fit, "
          f"learning rate {learning_rate}, memmaps under {folder}")
    print(f"{'N':>9} {'epochs':>7} {'fit s':>8} {'s/epoch':>8} {'CPU s/epoch':>12} "
          f"{'peak RSS MB':>12} {'start s':>8} {'R2 start':>9} {'R2 fit':>7}", flush=True)
    for N in sizes:
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            path = os.path.join(tmp, "Y.npy")
            X = synthetic(N, 50, 0, path)
            Y = np.load(path, mmap_mode="r")
            epochs = max(1, -(-steps * batch_size // N))
            args = dict(n_components=2, n_inducing=30, inference="svi", batch_size=batch_size,
                        max_iter=epochs, learning_rate=learning_rate, random_state=0,
                        progress=False)
            init_s, init_r2 = start_r2(args, Y, X)
            start, cpu = time.perf_counter(), time.process_time()
            model = gplvm.BayesianGPLVM(**args).fit(Y)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{N:>9} {epochs:>7} {seconds:>8.1f} {seconds / epochs:>8.2f} "
                  f"{cpu / epochs:>12.2f} {peak:>12.0f} "
                  f"{init_s:>8.1f} {init_r2:>9.3f} {procrustes_r2(X, model.X_mean_):>7.3f}",
                  flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["oil"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--natural-step", type=float, default=svi_fit.NATURAL_STEP,
                        help="natural-gradient step on q(U) per minibatch (0: Adam only)")
    parser.add_argument("--steps", type=int, default=2000, help="scaling: steps per fit")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--folder", default=tempfile.gettempdir(),
                        help="scaling: where the memmaps are written (N·D·8 bytes each)")
    args = parser.parse_args()
    svi_fit.NATURAL_STEP = args.natural_step
    print("threads:", {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "XLA_FLAGS")},
          "cpus:", os.cpu_count(), "gplvm", gplvm.__version__, flush=True)
    if "oil" in args.parts:
        oil_part(args.seeds, args.epochs, args.learning_rate, args.batch_size)
    if "scaling" in args.parts:
        scaling_part(args.sizes, args.steps, args.batch_size, args.learning_rate,
                     args.folder)


if __name__ == "__main__":
    main()
