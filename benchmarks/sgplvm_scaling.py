"""Cost of the structured GPLVM's bound-plus-gradient against the number of pixel observations.

Issue 13 ("Scale"): with a fixed spatial inducing grid (m_s = 10 × 10 here) the bound of seed 003
eqs. 13–28 costs O(n_ξ n_s m_s^{1/2}·…) — linear in the pixels n_s at fixed n_ξ — and fits in
memory up to 10⁷ observations; with the inducing inputs at the pixels (m_s = n_s, no Nyström
error) the per-axis eigendecompositions make it grow faster.

Synthetic video: n_ξ frames of a smooth field (a Gaussian blob whose position moves with time,
plus noise) on square-ish grids with n_ξ·n_s from 10³ to 10⁷.  For each size the model is set
up by ``StructuredGPLVM(..., max_iter=1).fit`` (Q = 5, m_ξ = n_ξ), then one
``jax.jit(jax.value_and_grad(negative_bound))`` at the fitted parameters is timed (median of
``--repeats`` calls after the compiling one).  Memory: XLA's own account of the compiled
bound-plus-gradient (arguments + temporaries, ``compiled.memory_analysis()``), and the process's
peak resident set size after the size ran (``ru_maxrss``; monotone, so it bounds everything so
far).  Printed: ms per call, ns per observation (flat when linear), MiB.

    OPENBLAS_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false \\
        .venv/bin/python benchmarks/sgplvm_scaling.py

Flags: ``--sizes`` (total observations, default 1e3 … 1e7), ``--frames`` (n_ξ, 10),
``--pixel-route-max`` (largest size also run with inducing at the pixels, 1e6), ``--repeats``.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import gplvm  # noqa: E402
from gplvm.models.gplvm_family.bound import negative_bound  # noqa: E402


def grid_shape(n_pixels: int) -> tuple[int, int]:
    """A 9:16 grid with about n_pixels pixels (video-like)."""
    rows = max(int(round(np.sqrt(n_pixels * 9 / 16))), 2)
    return rows, max(int(round(n_pixels / rows)), 2)


def video(frames: int, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """Frames of a blob moving on a circle, plus 1% noise: (frames, rows, cols)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 2 * np.pi, frames, endpoint=False)
    r, c = np.linspace(0, 1, rows)[:, None], np.linspace(0, 1, cols)[None, :]
    out = np.empty((frames, rows, cols))
    for i, ti in enumerate(t):
        out[i] = np.exp(-((r - 0.5 - 0.25 * np.sin(ti)) ** 2
                          + (c - 0.5 - 0.25 * np.cos(ti)) ** 2) / 0.02)
    return out + 0.01 * rng.normal(size=out.shape)


def measure(Y, fixed_grid: bool, repeats: int):
    rows, cols = Y.shape[1:]
    inducing = (np.linspace(0, rows - 1, 10), np.linspace(0, cols - 1, 10)) if fixed_grid \
        else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = gplvm.StructuredGPLVM(n_components=5, n_inducing=len(Y), max_iter=1,
                                      spatial_inducing=inducing, progress=False,
                                      random_state=0).fit(Y)
    f = jax.jit(jax.value_and_grad(negative_bound))
    u, problem = model.params_, model._problem
    compiled = f.lower(u, problem).compile()
    mem = compiled.memory_analysis()
    mib = (mem.argument_size_in_bytes + mem.temp_size_in_bytes
           + mem.output_size_in_bytes) / 2**20 if mem is not None else float("nan")
    jax.block_until_ready(f(u, problem))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(u, problem))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3, mib


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e3, 1e4, 1e5, 1e6, 1e7])
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--pixel-route-max", type=float, default=1e6)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("threads: OPENBLAS_NUM_THREADS=%s XLA_FLAGS=%s; jax %s" % (
        os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("XLA_FLAGS"), jax.__version__))
    print(f"{'observations':>12} {'grid':>11} {'route':>16} {'ms f+g':>9} {'ns/obs':>8} "
          f"{'XLA MiB':>8} {'peak RSS MiB':>12}")
    for size in args.sizes:
        rows, cols = grid_shape(int(size / args.frames))
        Y = video(args.frames, rows, cols)
        n_obs = Y.size
        routes = [("fixed 10x10 grid", True)]
        if size <= args.pixel_route_max:
            routes.append(("at the pixels", False))
        for name, fixed in routes:
            ms, mib = measure(Y, fixed, args.repeats)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{n_obs:12,d} {rows:>5}x{cols:<5} {name:>16} {ms:9.2f} "
                  f"{ms * 1e6 / n_obs:8.1f} {mib:8.1f} {rss:12.0f}", flush=True)


if __name__ == "__main__":
    main()
