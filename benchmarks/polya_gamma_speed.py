"""Draws per CPU-second of ``gplvm.samplers.polya_gamma`` per regime, before and after.

Run (single-threaded, pinned to one CPU by the script; the persistent compilation cache is off
so that compile times are real)::

    git archive <old commit> src | tar -x -C /tmp/pgbase      # optional: the code to compare
    .venv/bin/python benchmarks/polya_gamma_speed.py [--baseline /tmp/pgbase/src]
        [--n 529000] [--repeats 5] [--accuracy]

Each rate is ``n`` over the best of ``repeats`` calls with fresh keys, in CPU seconds of this
process (``time.process_time``), after a first call that compiles; with ``--baseline`` the old
and the new sampler alternate call by call on the same arrays, so that both see the same load.
The first call's CPU and wall seconds are printed as the compile time (the first case compiles
everything; later cases reuse the program when the shapes agree).  ``--baseline`` takes the
``src`` folder of an exported tree and loads its Pólya-gamma modules under another package name
(``_pg_baseline``), so both versions run in one process.

``--accuracy`` also prints two-sample Kolmogorov–Smirnov distances between 10^6 draws of the
sampler and of eq. 27 in NumPy (300 exact terms and a cumulant-matched rest), for b at the edges
of the series' classes (K b = 1/2) and a few c: the figures behind the choice of K in
``gplvm.samplers.polya_gamma_series`` (5% critical value 0.0019).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import types
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["GPLVM_COMPILATION_CACHE"] = "0"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import gplvm  # noqa: E402,F401  (float64)
from gplvm.samplers import polya_gamma  # noqa: E402

#: The modules of the Pólya-gamma sampler, in an order in which each imports only earlier ones.
_MODULES = ("_rejection", "_gamma", "_tail_sums", "polya_gamma_devroye", "polya_gamma_series",
            "polya_gamma")


def load_baseline(src: str):
    """The ``polya_gamma`` function of the tree at ``src``, as package ``_pg_baseline``."""
    folder = Path(src) / "gplvm" / "samplers"
    package = types.ModuleType("_pg_baseline")
    package.__path__ = []
    sys.modules["_pg_baseline"] = package
    for name in _MODULES:
        path = folder / f"{name}.py"
        if not path.exists():
            continue
        code = path.read_text().replace("gplvm.samplers.", "_pg_baseline.")
        module = types.ModuleType(f"_pg_baseline.{name}")
        module.__file__ = str(path)
        sys.modules[module.__name__] = module
        exec(compile(code, str(path), "exec"), module.__dict__)
        setattr(package, name, module)
    return package.polya_gamma.polya_gamma


def nb_like(rng, n: int, r: float):
    """b = y + r and c = psi for counts y ~ NB(r, mean mu) with about 90% zeros."""
    mu = r * (0.9 ** (-1.0 / r) - 1.0) * np.exp(rng.normal(0.0, 0.5, n))
    y = rng.negative_binomial(r, r / (r + mu))
    return y + r, np.log(mu / r) + rng.normal(0.0, 0.3, n), (y == 0).mean(), y.max()


def cases(n: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    c = rng.normal(0.0, 2.0, n)
    out = {"b = 1 (exact)": (np.ones(n), c), "b = 2 (exact)": (np.full(n, 2.0), c),
           "b = 3 (integer)": (np.full(n, 3.0), c), "b = 0.1 (K = 8)": (np.full(n, 0.1), c),
           "b = 0.3 (K = 2)": (np.full(n, 0.3), c), "b = 0.5 (K = 1)": (np.full(n, 0.5), c),
           "b = 2.5": (np.full(n, 2.5), c), "b = 1000.3": (np.full(n, 1000.3), c),
           "b = 2.5, |c| ~ 100": (np.full(n, 2.5), rng.normal(100.0, 30.0, n))}
    for r in (0.1, 0.5, 5.0, 50.0, 1000.0):
        b, psi, zeros, top = nb_like(rng, n, r)
        out[f"NB r = {r:g} ({zeros:.0%} y = 0, max {top})"] = (b, psi)
    return out


def timed(f, key, b, c) -> tuple[float, float]:
    start, start_cpu = time.perf_counter(), time.process_time()
    f(key, b, c).block_until_ready()
    return time.process_time() - start_cpu, time.perf_counter() - start


def compare(samplers: dict, b, c, repeats: int) -> dict[str, tuple[float, float, float]]:
    """Per sampler: (first-call CPU s, first-call wall s, best CPU s of the later calls)."""
    first = {name: timed(f, jax.random.key(0), b, c) for name, f in samplers.items()}
    best = dict.fromkeys(samplers, float("inf"))
    for r in range(repeats):
        for name, f in samplers.items():
            best[name] = min(best[name], timed(f, jax.random.key(r + 1), b, c)[0])
    return {name: (*first[name], best[name]) for name in samplers}


def speed(args) -> None:
    samplers = {"new": jax.jit(polya_gamma)}
    if args.baseline:
        samplers = {"old": jax.jit(load_baseline(args.baseline)), **samplers}
    print(f"\n{args.n} draws per call; M draws per CPU-second, best of {args.repeats}; "
          f"first call = compile + one draw (CPU s / wall s)")
    head = "".join(f"{name + ' M/s':>10}" for name in samplers)
    firsts = "".join(f"{'first ' + name:>15}" for name in samplers)
    print(f"{'regime':42}{head}" + (f"{'new/old':>9}" if args.baseline else "") + firsts)
    for label, (b, c) in cases(args.n).items():
        res = compare(samplers, jnp.asarray(b), jnp.asarray(c), args.repeats)
        rates = "".join(f"{args.n / res[name][2] / 1e6:10.2f}" for name in samplers)
        ratio = f"{res['old'][2] / res['new'][2]:9.2f}" if args.baseline else ""
        first = "".join(f"{res[name][0]:7.1f} /{res[name][1]:6.1f}" for name in samplers)
        print(f"{label:42}{rates}{ratio}{first}", flush=True)


def reference(rng, b: float, c: float, n: int, terms: int = 300) -> np.ndarray:
    """Eq. 27 with ``terms`` exact gammas and the rest replaced by one shifted gamma with its
    first three cumulants (the rest is under 1/300 of the mean; its shift, 3e-3 b of the
    mean, is far below where these tests look)."""
    a = abs(c) / (2.0 * np.pi)
    w = 1.0 / ((np.arange(1, terms + 1) - 0.5) ** 2 + a * a)
    out = np.zeros(n)
    for k0 in range(0, terms, 50):
        out += rng.standard_gamma(b, size=(n, min(50, terms - k0))) @ w[k0:k0 + 50]
    k = np.arange(terms + 1, 4_000_001) - 0.5
    s1, s2, s3 = (np.sum((k * k + a * a) ** -m) for m in (1, 2, 3))
    theta, alpha = s3 / s2, s2 ** 3 / s3 ** 2
    out += b * (s1 - s2 * s2 / s3) + theta * rng.standard_gamma(b * alpha, size=n)
    return out / (2.0 * np.pi ** 2)


def accuracy(n: int = 1_000_000) -> None:
    from scipy.stats import ks_2samp
    print(f"\nTwo-sample KS distance, {n} draws each (5% critical value "
          f"{1.36 * np.sqrt(2.0 / n):.4f})")
    rng = np.random.default_rng(1)
    draw = jax.jit(polya_gamma)
    for b in (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.02):
        line = f"b = {b:<8g}"
        for c in (0.0, 2 * np.pi, 5 * np.pi, 12 * np.pi):
            x = np.asarray(draw(jax.random.key(7), jnp.full(n, b), jnp.full(n, c)))
            line += f"  c = {c:5.1f}: {ks_2samp(x, reference(rng, b, c, n)).statistic:.4f}"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=529_000, help="draws per call")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", help="src folder of an exported older tree")
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: last)")
    parser.add_argument("--accuracy", action="store_true", help="also print KS distances")
    args = parser.parse_args()
    cpu = sorted(os.sched_getaffinity(0))[-1] if args.cpu is None else args.cpu
    os.sched_setaffinity(0, {cpu})
    for var in ("XLA_FLAGS", "OPENBLAS_NUM_THREADS", "GPLVM_COMPILATION_CACHE"):
        print(f"{var}={os.environ.get(var, '(unset)')}")
    print(f"pinned to CPU {cpu} of {os.cpu_count()}; jax {jax.__version__}, "
          f"devices {jax.devices()}, x64 {jax.config.jax_enable_x64}")
    print(f"load average {os.getloadavg()} (other processes share the cores)")
    speed(args)
    if args.accuracy:
        accuracy()


if __name__ == "__main__":
    main()
