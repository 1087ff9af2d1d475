"""Seconds per evaluation of the sharded collapsed bound plus gradient, by rows and devices.

Issue 18 (item 2): the collapsed Bayesian GPLVM bound's sums over rows
(:mod:`gplvm.models.gplvm_family.sharded_bound`) split over 1, 2 and 4 CPU devices.  JAX fixes
its device count when it starts, so each device count runs in its own subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=d``; each subprocess builds a random problem
(N rows, D = 20 columns with 1% missing, Q = 2, M = 30 inducing points, the RBF kernel's closed
form), shards it, compiles ``bound_and_grad`` once and times ``--repeats`` further calls
(median).  Memory: the subprocess's peak resident set size (``ru_maxrss``), and XLA's account of
the compiled program's arguments + temporaries on one device (``memory_analysis``).

A forced host device is a share of the CPU, not a core: with fewer cores than devices (the
machine's core count and thread settings are printed beside the table) more devices cannot be
faster, and the table measures the cost of splitting instead.

``--fit`` instead times a whole ``BayesianGPLVM(devices=d).fit`` (the estimator's switch; L-BFGS,
``--iters`` iterations, the same random problem): the first fit (compilation included), a
second identical fit (compiled), the bound reached (the same for every d, to round-off) and the
peak resident set size.

``--rflvm`` instead checks item 2's chain claim on the full RFLVM: a Gaussian RFLVM with 4 chains
fitted with 4 devices (``XLA_FLAGS=--xla_force_host_platform_device_count=4``) and with one
(``GPLVM_CPU_DEVICES=1``) in two subprocesses; the draws of X must be identical bit for bit.
(tests/inference/test_sharding.py checks the same of 4 elliptical slice chains: the RFLVM's
sweep takes ~30 s to compile, twice, too long for the suite.)

``--rflvm-rows`` times the other RFLVM layout, one chain split by rows
(``RFLVM(devices=d)``, :func:`gplvm.inference.mcmc.run_chains` with a row mesh): per
(rows, d), a subprocess with d forced CPU devices fits one Poisson chain (D = ``--cols``
columns of counts around a 2-D latent, M = 100, X sampled from the first sweep) with
``devices=None`` and with ``devices=d``, each twice (the second fit is compiled); printed: the
seconds per sweep of the second fits, the compile seconds (first minus second), the largest
difference between the two layouts' latent draws (round-off in the sums over rows, amplified
by the sweeps) and the peak resident set size.

    OPENBLAS_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false \\
        .venv/bin/python benchmarks/sharding_scaling.py [--rows 2000 8000 32000] [--fit] [--rflvm]
        [--rflvm-rows --rows 1000 --cols 200 --sweeps 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

CHILD = r"""
import json, resource, sys, time
import numpy as np
import jax, jax.numpy as jnp
from gplvm.inference import sharding
from gplvm.kernels import RBF
from gplvm.models.gplvm_family import sharded_bound
from gplvm.models.gplvm_family.sharded_data import shard_data

n_rows, repeats = int(sys.argv[1]), int(sys.argv[2])
D, Q, M = 20, 2, 30
rng = np.random.default_rng(0)
Y = rng.normal(size=(n_rows, D))
Y[rng.random(Y.shape) < 0.01] = np.nan
params = {"kernel": RBF(lengthscale=jnp.ones(Q), variance=1.0),
          "Z": jnp.asarray(rng.normal(size=(M, Q))),
          "X_mean": jnp.asarray(rng.normal(size=(n_rows, Q))),
          "X_var": jnp.full((n_rows, Q), 0.1), "noise_var": jnp.asarray(0.5)}
mesh = sharding.make_mesh()
data = shard_data(Y, mesh)
t = time.perf_counter()
jax.block_until_ready(sharded_bound.bound_and_grad(params, data))
compile_s = time.perf_counter() - t
times = []
for _ in range(repeats):
    t = time.perf_counter()
    jax.block_until_ready(sharded_bound.bound_and_grad(params, data))
    times.append(time.perf_counter() - t)
xla_mib = None
try:
    rule = None
    lowered = sharded_bound._bound_and_grad_jit.lower(params, data, rule, 0.0)
    m = lowered.compile().memory_analysis()
    xla_mib = (m.argument_size_in_bytes + m.temp_size_in_bytes) / 2**20
except Exception:  # memory_analysis is not offered by every backend
    pass
print("JSON" + json.dumps({"devices": mesh.size, "rows": n_rows, "compile_s": compile_s,
                           "seconds": float(np.median(times)), "xla_mib": xla_mib,
                           "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

FIT_CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np
import jax
import gplvm

n_rows, iters = int(sys.argv[1]), int(sys.argv[2])
devices = len(jax.devices())     # the count forced by XLA_FLAGS
rng = np.random.default_rng(0)
X = rng.normal(size=(n_rows, 2))
Y = np.sin(X @ rng.normal(size=(2, 20))) + 0.1 * rng.normal(size=(n_rows, 20))
Y[rng.random(Y.shape) < 0.01] = np.nan
seconds = []
for _ in range(2):
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = gplvm.BayesianGPLVM(n_inducing=30, max_iter=iters, progress=False,
                                    devices=devices).fit(Y)
    seconds.append(time.perf_counter() - t)
print("JSON" + json.dumps({"devices": devices, "rows": n_rows, "first_s": seconds[0],
                           "second_s": seconds[1], "n_iter": model.n_iter_,
                           "bound": model.elbo_,
                           "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

RFLVM_CHILD = r"""
import sys, time
import numpy as np
import jax
import gplvm
Y = np.random.default_rng(0).normal(size=(12, 3))
t = time.perf_counter()
model = gplvm.RFLVM(likelihood="gaussian", n_components=1, n_features=4, n_iter=4, burn_in=2,
                    sampler="gibbs", n_chains=4, progress=False, random_state=0).fit(Y)
np.savez(sys.argv[1], X=model.X_samples_, history=model.history_)
print(f"{len(jax.devices())} device(s): fit in {time.perf_counter() - t:.1f} s")
"""


RFLVM_ROWS_CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np
import jax
import gplvm
warnings.simplefilter("ignore")
n_rows, n_cols, sweeps, d = map(int, sys.argv[1:5])
rng = np.random.default_rng(0)
X = rng.normal(size=(n_rows, 2))
Y = rng.poisson(np.exp(0.5 * np.sin(X @ rng.normal(size=(2, n_cols))) + 1.0)).astype(float)
out = {"devices": d, "rows": n_rows}
draws = {}
for label, devices in (("one", None), ("rows", d)):
    model = gplvm.RFLVM(likelihood="poisson", n_features=100, n_iter=sweeps, burn_in=sweeps // 2,
                        n_chains=1, map_sweeps=0, progress=False, random_state=0,
                        sampler="gibbs", devices=devices)
    seconds = []
    for _ in range(2):
        t = time.perf_counter()
        model.fit(Y)
        seconds.append(time.perf_counter() - t)
    out[label] = {"sweep_s": seconds[1] / sweeps, "compile_s": seconds[0] - seconds[1]}
    draws[label] = np.asarray(model.X_samples_)
out["max_dX"] = float(np.max(np.abs(draws["one"] - draws["rows"])))
out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("JSON" + json.dumps(out))
"""


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_NUM_CPU_DEVICES", "GPLVM_CPU_DEVICES")}
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if "xla_force_host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    for key, value in extra.items():
        env[key] = (env[key] + " " + value).strip() if key == "XLA_FLAGS" else value
    return env


def _devices_env(d: int) -> dict:
    return _env(XLA_FLAGS=f"--xla_force_host_platform_device_count={d}")


def measure(rows: int, devices: int, repeats: int, child: str = CHILD, extra=()) -> dict:
    """One child (``CHILD``, ``FIT_CHILD`` or ``RFLVM_ROWS_CHILD``) on ``devices`` forced CPU
    devices."""
    proc = subprocess.run([sys.executable, "-c", child, str(rows), str(repeats)]
                          + [str(e) for e in extra],
                          capture_output=True, text=True, env=_devices_env(devices))
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("JSON"))
    return json.loads(line[4:])


def settings() -> str:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return (f"usable cores: {cores}; OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}"
            f"; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; load average "
            f"{os.getloadavg()[0]:.1f}")


def table(rows_list, devices_list, arg: int, fit: bool) -> None:
    """One subprocess per (rows, devices): the bound-and-gradient table, or with ``fit`` the
    whole-fit table; ``arg`` is the repeats or the L-BFGS iterations."""
    print(settings())
    print(f"{'rows':>8} {'devices':>7} " + (
        f"{'1st fit s':>9} {'2nd fit s':>9} {'iters':>5} {'bound':>14} " if fit else
        f"{'s/eval':>9} {'compile s':>9} {'XLA MiB/dev':>11} ") + f"{'peak RSS MiB':>12}")
    for rows in rows_list:
        for d in devices_list:
            r = measure(rows, d, arg, FIT_CHILD if fit else CHILD)
            if fit:
                cells = (f"{r['first_s']:>9.1f} {r['second_s']:>9.1f} {r['n_iter']:>5} "
                         f"{r['bound']:>14.6f}")
            else:
                xla = "-" if r["xla_mib"] is None else f"{r['xla_mib']:.1f}"
                cells = f"{r['seconds']:>9.4f} {r['compile_s']:>9.1f} {xla:>11}"
            print(f"{rows:>8} {d:>7} {cells} {r['rss_mib']:>12.0f}", flush=True)


def rflvm_rows(rows_list, devices_list, cols: int, sweeps: int) -> None:
    """The one-chain RFLVM split by rows over d devices against the same chain on one."""
    print(settings())
    print(f"{'rows':>8} {'cols':>5} {'devices':>7} {'s/sweep 1 dev':>13} "
          f"{'s/sweep split':>13} {'compile 1 s':>11} {'compile split s':>15} "
          f"{'max |dX|':>9} {'peak RSS MiB':>12}")
    for rows in rows_list:
        for d in devices_list:
            r = measure(rows, d, cols, RFLVM_ROWS_CHILD, (sweeps, d))
            print(f"{rows:>8} {cols:>5} {d:>7} {r['one']['sweep_s']:>13.3f} "
                  f"{r['rows']['sweep_s']:>13.3f} {r['one']['compile_s']:>11.1f} "
                  f"{r['rows']['compile_s']:>15.1f} {r['max_dX']:>9.1e} "
                  f"{r['rss_mib']:>12.0f}", flush=True)


def rflvm_chains() -> bool:
    print(settings())
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for name, env in (("4", _devices_env(4)), ("1", _env(GPLVM_CPU_DEVICES="1"))):
            path = os.path.join(tmp, f"d{name}.npz")
            proc = subprocess.run([sys.executable, "-c", RFLVM_CHILD, path], capture_output=True,
                                  text=True, env=env)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr[-2000:])
            print(proc.stdout.strip())
            files.append(dict(np.load(path)))
        same = all(np.array_equal(files[0][k], files[1][k]) for k in ("X", "history"))
    print(f"4 RFLVM chains, 4 devices vs 1: X draws and history identical bit for bit: {same}")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 8000, 32000])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fit", action="store_true",
                        help="time whole BayesianGPLVM(devices=d).fit calls instead")
    parser.add_argument("--iters", type=int, default=50, help="L-BFGS iterations with --fit")
    parser.add_argument("--rflvm", action="store_true",
                        help="check 4 RFLVM chains on 4 devices against 1 device instead")
    parser.add_argument("--rflvm-rows", action="store_true",
                        help="time one RFLVM chain split by rows over d devices instead")
    parser.add_argument("--cols", type=int, default=200, help="columns with --rflvm-rows")
    parser.add_argument("--sweeps", type=int, default=10, help="sweeps with --rflvm-rows")
    args = parser.parse_args()
    if args.rflvm_rows:
        rflvm_rows(args.rows, args.devices, args.cols, args.sweeps)
        return
    if args.rflvm:
        raise SystemExit(0 if rflvm_chains() else 1)
    table(args.rows, args.devices, args.iters if args.fit else args.repeats, args.fit)


if __name__ == "__main__":
    main()
