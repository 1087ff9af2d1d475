"""Time of the structured GPLVM's missing-pixel term and its gradient (issue 32's review).

Run (single-threaded XLA and OpenBLAS, set when unset and printed):

    .venv/bin/python benchmarks/kronecker_missing_grad.py [--images 500] [--side 8]
        [--inducing 30] [--components 5] [--repeats 20]

The term of :mod:`gplvm.objectives.kronecker_missing` for ``--images`` images of side × side
pixels (a third of the (image, pixel) entries missing) under an RBF latent kernel with
``--inducing`` inducing points and a Matérn-3/2 kernel on each pixel axis: the median wall
time of the value alone and of value and gradient with respect to the latent length-scales,
the spatial length-scales and the noise (compiled before timing).  Run it at two commits to
compare them (``PYTHONPATH=<checkout>/src`` picks the checkout).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import gplvm  # noqa: E402
from gplvm.expectations import psi_statistics  # noqa: E402
from gplvm.kernels import RBF, Matern32  # noqa: E402
from gplvm.objectives import kronecker  # noqa: E402
from gplvm.objectives.kronecker_missing import missing_term  # noqa: E402


def median_time(fn, args, repeats: int) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--side", type=int, default=8)
    parser.add_argument("--inducing", type=int, default=30)
    parser.add_argument("--components", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    n, Q, m = args.images, args.components, args.inducing
    X_mean, X_var = rng.normal(size=(n, Q)), rng.uniform(0.05, 0.3, size=(n, Q))
    Z = rng.normal(size=(m, Q))
    axis = np.arange(args.side, dtype=float)
    counts = jnp.asarray((rng.random((n, args.side**2)) < 1 / 3).astype(float))

    def term(u):
        latent = RBF(lengthscale=jnp.exp(u["ell"]), variance=1.3)
        psi0, psi1, psi2 = psi_statistics(latent, Z, X_mean, X_var)
        factors = [kronecker.latent_factor(psi0, psi1, psi2, latent(Z))]
        factors += kronecker.spatial_factors(
            [Matern32(lengthscale=jnp.exp(u["sp"][0])), Matern32(lengthscale=jnp.exp(u["sp"][1]))],
            [axis, axis])
        return missing_term(factors, counts, jnp.exp(u["noise"]))

    u = dict(ell=jnp.zeros(Q), sp=jnp.log(jnp.array([1.4, 2.1])), noise=jnp.log(0.3))
    value = median_time(jax.jit(term), (u,), args.repeats)
    grad = median_time(jax.jit(jax.value_and_grad(term)), (u,), args.repeats)
    print(f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}; gplvm from {os.path.dirname(gplvm.__file__)}")
    print("| images | pixels | inducing | Q | value ms | value and gradient ms | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {n} | {args.side}×{args.side} | {m} | {Q} | {1e3 * value:.1f} | "
          f"{1e3 * grad:.1f} | {grad / value:.1f} |")


if __name__ == "__main__":
    main()
