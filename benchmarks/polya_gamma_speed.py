"""Draw rate of ``gplvm.samplers.polya_gamma`` on this machine, for a few (b, c).

Run: ``.venv/bin/python benchmarks/polya_gamma_speed.py [--n 1000000] [--repeats 5]``.
Prints the thread settings, devices and load first, because XLA on CPU may use several threads
and timings mean little without them.  Each rate is ``n`` over the best of ``repeats`` jitted
calls with fresh keys, after a first call that compiles (its time is shown separately), both
per wall-clock second and per CPU second of this process (the latter is less disturbed by other
processes on a shared machine, but counts every thread XLA uses).
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp

import gplvm  # noqa: F401  (float64)
from gplvm.samplers import polya_gamma
from gplvm.samplers.polya_gamma import MAX_EXACT_B
from gplvm.samplers.polya_gamma_series import MAX_C_ONE_TAIL

CASES = [(1.0, 0.0), (1.0, 2.0), (1.0, 3.0), (1.0, 10.0), (1.0, 200.0), (2.0, 1.0),
         (8.0, 1.0), (0.3, 1.0), (2.5, 1.0), (40.0, 10.0), (1000.0, 1.0), (2500.7, 200.0)]


def _rates(b: float, c: float, n: int, repeats: int) -> tuple[float, float, float]:
    """(first-call seconds, draws per wall second, draws per CPU second of this process).

    b and c are passed as (n,) arrays, as a Gibbs sweep would (N x D of them); as Python
    constants XLA would fold the regime choice and the per-element set-up into the program.
    """
    draw = jax.jit(polya_gamma)
    bs, cs = jnp.full((n,), b), jnp.full((n,), c)
    start = time.perf_counter()
    draw(jax.random.key(0), bs, cs).block_until_ready()
    first = time.perf_counter() - start
    wall = cpu = float("inf")
    for r in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        draw(jax.random.key(r + 1), bs, cs).block_until_ready()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return first, n / wall, n / cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="draws per call")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for var in ("XLA_FLAGS", "OMP_NUM_THREADS", "JAX_PLATFORMS"):
        print(f"{var}={os.environ.get(var, '(unset)')}")
    print(f"os.cpu_count()={os.cpu_count()}  sched_getaffinity={len(os.sched_getaffinity(0))}")
    print(f"jax {jax.__version__}  devices={jax.devices()}  x64={jax.config.jax_enable_x64}")
    print(f"os.getloadavg()={os.getloadavg()}  (other processes compete for the same cores)")
    print(f"\n{'b':>8} {'c':>8} {'regime':>16} {'first call s':>13} {'draws/s (wall)':>15} "
          f"{'draws/CPU-s':>12}")
    for b, c in CASES:
        regime = ("exact (Devroye)" if b == int(b) and b <= MAX_EXACT_B else
                  "series, 1 tail" if abs(c) <= MAX_C_ONE_TAIL else "series, blocks")
        first, wall, cpu = _rates(b, c, args.n, args.repeats)
        print(f"{b:8g} {c:8g} {regime:>16} {first:13.1f} {wall:15,.0f} {cpu:12,.0f}", flush=True)


if __name__ == "__main__":
    main()
