"""Bayesian GPLVM on oil flow: wall and CPU time to reach a given bound, ours against GPy.

Issue 14, item 4.  Three optimisers fit the same model — Titsias & Lawrence's (2010) collapsed
bound, Q = 10, M = 30, ARD RBF — to the same standardised 1000 × 12 oil-flow data from the same
initial values (ours: PCA means with unit-variance columns, q(X) variances U(0, 0.1), Z by
k-means, length-scales 1/(fraction of variance), kernel variance 1, noise 0.01):

* ``lbfgs``   ``BayesianGPLVM(optimizer="lbfgs")``: optax L-BFGS with its zoom line search;
* ``lbfgsb``  ``BayesianGPLVM(optimizer="lbfgsb")``: SciPy's L-BFGS-B driving our compiled
  value-and-gradient (``gplvm.inference.minimise(method="lbfgsb")``);
* ``GPy``     GPy 1.15 ``BayesianGPLVM.optimize("lbfgsb", max_iters=…)`` (SciPy's L-BFGS-B on
  GPy's objective; ``max_iters`` counts function evaluations), in its own virtual environment
  (``benchmarks/_peer_venvs.py``), from our initial values.

Every run records the bound against wall and CPU time (ours per iteration through ``fit``'s
``minimise`` callback, GPy per objective evaluation).  The reference value of a seed is the best
final bound over its runs at ``--max-iter``; the *time to quality* of a run is the first time
its bound is within ``gap`` nats of that reference ("not reached" when it never is).  Our times
are of warm fits (compiled functions cached); the cold start of each of our optimisers — a
``max_iter=1`` fit in a fresh process with JAX's persistent compilation cache off, so every
compilation ``fit`` needs — is measured apart, with the optimiser's own compile time
(``OptimResult.compile_s``), and added in the column ``+cold``.  GPy needs no compilation.

Threads: OpenBLAS/MKL/OpenMP one thread, ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` (a
real XLA flag; no others), and every process pinned to one logical CPU (``--no-pin`` to
disable).  Wall times on a shared machine are inflated by other jobs; CPU times much less, so
both are printed, with the load average.  Run::

    .venv/bin/python benchmarks/bgplvm_time_to_quality.py [--seeds 0 1 2] [--max-iter 2000]
        [--gaps 5 20 100] [--reps 1] [--skip-gpy] [--no-pin]
"""

from __future__ import annotations

import os
import sys

THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
os.environ.update(THREAD_ENV)


# this process and those it starts on one logical CPU: XLA's CPU runtime keeps a thread pool
# sized by the CPUs it may use, whatever the flags say
PINNED_CPU = None
if "--no-pin" not in sys.argv and hasattr(os, "sched_setaffinity"):
    PINNED_CPU = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {PINNED_CPU})

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gplvm  # noqa: E402
from _hooks import wrapped  # noqa: E402
from _peer_venvs import ensure_venv  # noqa: E402
from gplvm.data.loaders import load_oil_flow  # noqa: E402
from gplvm.metrics import loo_1nn_errors  # noqa: E402
# where BayesianGPLVM.fit calls minimise (the spies below replace it there)
from gplvm.models.gplvm_family import collapsed_run as bgplvm_module  # noqa: E402
from gplvm.models.gplvm_family.bound import negative_bound  # noqa: E402
from gplvm.transforms import softplus  # noqa: E402

Q, M = 10, 30
OURS = ("lbfgs", "lbfgsb")
FG_REPS = 33   # timed objective+gradient calls (the first 3 are warm-up)

# ---------------------------------------------------------------------------- GPy
GPY_PROGRAM = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import GPy
    d = np.load(sys.argv[1]); cfg = json.loads(sys.argv[2])
    kern = GPy.kern.RBF(d["X_mean"].shape[1], variance=float(d["variance"]),
                        lengthscale=d["lengthscale"], ARD=True)
    m = GPy.models.BayesianGPLVM(d["Y"], d["X_mean"].shape[1], X=d["X_mean"].copy(),
                                 X_variance=d["X_var"].copy(), Z=d["Z"].copy(),
                                 num_inducing=d["Z"].shape[0], kernel=kern)
    m.likelihood.variance = float(d["noise_var"])
    trace, objective = [], m._objective_grads

    def recorded(x):
        value, grad = objective(x)
        trace.append((time.perf_counter(), time.process_time(), -float(value)))
        return value, grad

    x0, cpu = m.optimizer_array.copy(), []
    for _ in range(cfg["reps"]):            # CPU time of one objective+gradient at the start
        c = time.process_time()
        objective(x0)
        cpu.append(time.process_time() - c)
    m.optimizer_array = x0
    m._objective_grads = recorded
    wall0, cpu0 = time.perf_counter(), time.process_time()
    opt = m.optimize("lbfgsb", max_iters=cfg["max_iter"])
    t = np.array(trace)
    np.savez(sys.argv[3], wall=t[:, 0] - wall0, cpu=t[:, 1] - cpu0, bound=t[:, 2],
             final=float(np.ravel(m.log_likelihood())[0]), X_mean=np.asarray(m.X.mean),
             lengthscale=np.asarray(kern.lengthscale), status=str(opt.status),
             fg_cpu=float(np.median(cpu[3:])),
             version=f"GPy {GPy.__version__}, numpy {np.__version__}")
""")


def run_gpy(python, Ys, init, max_iter):
    """GPy's fit from our initial values; its trace as a dict of arrays."""
    with tempfile.TemporaryDirectory() as tmp:
        inputs, out = Path(tmp) / "inputs.npz", Path(tmp) / "out.npz"
        np.savez(inputs, Y=Ys, **init)
        done = subprocess.run([python, "-c", GPY_PROGRAM, inputs,
                               json.dumps({"max_iter": max_iter, "reps": FG_REPS}), out],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"GPy failed:\n{done.stderr[-4000:]}")
        with np.load(out) as f:
            run = {k: (f[k].item() if f[k].ndim == 0 else f[k]) for k in f.files}
    top = np.argsort(run["lengthscale"])[:2]        # relevance 1/ℓ²: the shortest two
    run["X_mean"] = run["X_mean"][:, top]
    return run


# ---------------------------------------------------------------------------- ours
def model(seed, optimizer, max_iter):
    return gplvm.BayesianGPLVM(n_components=Q, n_inducing=M, random_state=seed,
                               optimizer=optimizer, max_iter=max_iter, progress=False)


def initial_values(Y, seed):
    """Our initial point as constrained values (what GPy is given; the arguments of a one-
    iteration ``fit`` to ``minimise``, captured), and the median CPU seconds of
    one compiled objective+gradient there."""
    seen = {}

    def spy(real):
        def minimise(fun, params, **kw):
            seen.update(params=params, problem=kw["args"][0])
            return real(fun, params, **kw)
        return minimise

    with wrapped(bgplvm_module, "minimise", spy), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(seed, "lbfgs", 1).fit(Y)
    u, kern = seen["params"], seen["problem"].kernel.from_unconstrained(seen["params"]["kernel"])
    fg = jax.jit(jax.value_and_grad(negative_bound))
    cpu = []
    for _ in range(FG_REPS):               # CPU time of one objective+gradient at the start
        c = time.process_time()
        jax.block_until_ready(fg(u, seen["problem"]))
        cpu.append(time.process_time() - c)
    init = {"X_mean": np.asarray(u["X_mean"]), "X_var": np.asarray(softplus(u["X_var"])),
            "Z": np.asarray(u["Z"]),
            "lengthscale": np.broadcast_to(np.asarray(kern.lengthscale), (Q,)).copy(),
            "variance": float(kern.variance), "noise_var": float(softplus(u["noise_var"]))}
    return float(np.median(cpu[3:])), init


def run_ours(Y, seed, optimizer, max_iter):
    """A warm fit through ``BayesianGPLVM.fit``; the bound per iteration against the wall and
    CPU seconds since ``fit`` was called (a callback passed to its ``minimise``)."""
    trace = []

    def record(i, params, value):
        trace.append((time.perf_counter(), time.process_time(), -value))

    def spy(real):
        def minimise(fun, params, *, options, **kw):
            return real(fun, params, options=options._replace(callback=record), **kw)
        return minimise

    est = model(seed, optimizer, max_iter)
    with wrapped(bgplvm_module, "minimise", spy), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wall0, cpu0 = time.perf_counter(), time.process_time()
        est.fit(Y)
    t = np.array(trace)
    top = np.argsort(-est.relevance_)[:2]
    return {"wall": t[:, 0] - wall0, "cpu": t[:, 1] - cpu0, "bound": t[:, 2],
            "final": float(est.elbo_), "X_mean": est.X_mean_[:, top], "n_iter": est.n_iter_,
            "status": "converged" if est.converged_ else "iteration limit"}


COLD_PROGRAM = textwrap.dedent("""
    import json, sys, time, warnings
    t0, c0 = time.perf_counter(), time.process_time()
    import numpy as np
    import gplvm
    from gplvm.data.loaders import load_oil_flow
    from gplvm.models.gplvm_family import collapsed_run as bgplvm_module
    cfg = json.loads(sys.argv[1])
    compile_s, real = [], bgplvm_module.minimise

    def spy(fun, params, **kw):
        result = real(fun, params, **kw)
        compile_s.append(result.compile_s)
        return result

    bgplvm_module.minimise = spy
    Y = load_oil_flow().Y
    t1, c1 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gplvm.BayesianGPLVM(n_components=cfg["Q"], n_inducing=cfg["M"], optimizer=cfg["opt"],
                            max_iter=1, random_state=cfg["seed"], progress=False).fit(Y)
    print(json.dumps({"import_s": t1 - t0, "fit_wall": time.perf_counter() - t1,
                      "fit_cpu": time.process_time() - c1, "compile_s": sum(compile_s)}))
""")


def cold_start(optimizer, seed, cache_dir=None):
    """A ``max_iter=1`` fit in a fresh process: with the persistent compilation cache off, or
    with it in ``cache_dir``."""
    if cache_dir is None:
        env = {**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "false",
               "GPLVM_COMPILATION_CACHE": "0"}
    else:
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(cache_dir),
               "GPLVM_COMPILATION_CACHE": "1"}
    done = subprocess.run([sys.executable, "-c", COLD_PROGRAM,
                           json.dumps({"opt": optimizer, "seed": seed, "Q": Q, "M": M})],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"cold start failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- summary
def time_to(run, level):
    """(wall s, CPU s, evaluations or iterations) at which the run's bound first reaches
    ``level``; None when it never does."""
    hit = np.flatnonzero(run["bound"] >= level)
    if hit.size == 0:
        return None
    i = int(hit[0])
    return run["wall"][i], run["cpu"][i], i + 1


def print_header(args):
    print(f"# Bayesian GPLVM on oil flow (1000 x 12, standardised), Q = {Q}, M = {M}, ARD RBF, "
          f"max_iter {args.max_iter}, seeds {args.seeds}, reps {args.reps}")
    print(f"# machine: {platform.machine()}, {os.cpu_count()} logical CPUs, python "
          f"{platform.python_version()}, jax {jax.__version__}, gplvm {gplvm.__version__}, "
          f"load average {os.getloadavg()[0]:.1f} (at start)")
    print("# threads: " + ", ".join(f"{k}={v}" for k, v in THREAD_ENV.items()) + "; "
          + ("not pinned (--no-pin)" if PINNED_CPU is None else
             f"every process pinned to logical CPU {PINNED_CPU} (os.sched_setaffinity)")
          + f"; persistent compilation cache in this process: "
          f"{jax.config.jax_compilation_cache_dir or 'none'} (cold starts: off)", flush=True)


def quality_levels(runs, gaps):
    """The levels timed: ``gap`` nats below the seed's reference (the best final bound over its
    runs) for each gap, and GPy's final bound (the quality of GPy's own budget)."""
    reference = max(r["final"] for rs in runs.values() for r in rs)
    levels = [(f"ref-{gap:g}", reference - gap) for gap in gaps]
    if runs.get("GPy"):
        levels.append(("GPy final", float(np.median([r["final"] for r in runs["GPy"]]))))
    return reference, levels


def summarise(seed, runs, colds, labels, levels):
    """Per run: final bound, 1-NN errors, and time to each quality level (rows of text)."""
    lines = []
    for name, rs in runs.items():
        for k, r in enumerate(rs):
            cells = []
            for _, level in levels:
                hit = time_to(r, level)
                if hit is None:
                    cells.append(f"{'not reached':>25}")
                    continue
                plus = hit[1] + (colds[name]["fit_cpu"] if name in colds else 0.0)
                cells.append(f"{hit[0]:6.1f} {hit[1]:5.1f} {hit[2]:5d} {plus:6.1f}")
            errors = loo_1nn_errors(r["X_mean"], labels)
            lines.append(f"{seed:>4} {name:<7} {k:>3} {r['final']:>9.2f} {errors:>4d} "
                         f"{r['wall'][-1]:>6.1f} {r['cpu'][-1]:>6.1f} {len(r['bound']):>5d} | "
                         + " | ".join(cells) + f"  {r['status']}")
    return lines


def ratios(runs, colds, level):
    """Median (over reps) time to ``level`` of each of ours over GPy's: CPU, CPU with our cold
    start added, and wall."""
    out = {}
    gpy = [time_to(r, level) for r in runs.get("GPy", [])]
    if not gpy or any(h is None for h in gpy):
        return out
    g_wall, g_cpu = np.median([h[0] for h in gpy]), np.median([h[1] for h in gpy])
    for name in OURS:
        hits = [time_to(r, level) for r in runs.get(name, [])]
        if hits and all(h is not None for h in hits):
            cpu = np.median([h[1] for h in hits])
            out[name] = (cpu / g_cpu, (cpu + colds[name]["fit_cpu"]) / g_cpu,
                         np.median([h[0] for h in hits]) / g_wall)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--max-iter", type=int, default=2000)
    parser.add_argument("--gaps", type=float, nargs="+", default=[5.0, 20.0, 100.0],
                        help="quality levels: nats below the reference bound")
    parser.add_argument("--reps", type=int, default=1, help="runs per optimiser and seed")
    parser.add_argument("--skip-gpy", action="store_true")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args(argv)
    print_header(args)
    python = None if args.skip_gpy else ensure_venv("gpy")
    data = load_oil_flow()
    Y, labels = np.asarray(data.Y, dtype=float), np.asarray(data.labels)
    Ys = (Y - Y.mean(0)) / Y.std(0)     # what BayesianGPLVM(standardize=True) fits
    colds = {name: cold_start(name, args.seeds[0]) for name in OURS}
    for name, c in colds.items():
        print(f"# cold start of ours ({name}), fresh process, no persistent cache: "
              f"fit(max_iter=1) {c['fit_wall']:.1f} s wall / {c['fit_cpu']:.1f} s CPU, of "
              f"which the optimiser's compilation {c['compile_s']:.1f} s wall (import "
              f"{c['import_s']:.1f} s, not counted)", flush=True)
    with tempfile.TemporaryDirectory() as cache:
        for name in OURS:   # the second process finds the first one's programs on disk
            cold_start(name, args.seeds[0], cache)
            c = cold_start(name, args.seeds[0], cache)
            print(f"# ... and with a persistent compilation cache filled by a first process: "
                  f"({name}) {c['fit_wall']:.1f} s wall / {c['fit_cpu']:.1f} s CPU", flush=True)
    for name in OURS:                   # warm the compiled functions of this process
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(args.seeds[0], name, 1).fit(Y)
    all_lines, all_ratios = [], []
    for seed in args.seeds:
        runs = {name: [] for name in OURS + (("GPy",) if python else ())}
        fg_ours, init = initial_values(Y, seed)
        for rep in range(args.reps):    # alternate the optimisers, so load hits them alike
            for name in runs:
                print(f"# seed {seed}, rep {rep}: {name} ...", file=sys.stderr, flush=True)
                runs[name].append(run_gpy(python, Ys, init, args.max_iter) if name == "GPy"
                                  else run_ours(Y, seed, name, args.max_iter))
        reference, levels = quality_levels(runs, args.gaps)
        lines = summarise(seed, runs, colds, labels, levels)
        lines.append(f"seed {seed}: reference (best final bound over the runs) {reference:.2f}; "
                     + ", ".join(f"{name} = {level:.2f}" for name, level in levels))
        if python:
            fg_gpy = runs["GPy"][0]["fg_cpu"]
            lines.append(f"seed {seed}: one objective+gradient at the start, CPU: ours "
                         f"{1e3 * fg_ours:.2f} ms, GPy {1e3 * fg_gpy:.2f} ms "
                         f"(ratio {fg_ours / fg_gpy:.3f})")
        all_lines += lines
        all_ratios += [(seed, name, ratios(runs, colds, level)) for name, level in levels]
        print("\n".join(lines), flush=True)
    print(f"\n# load average at the end {os.getloadavg()[0]:.1f}")
    heads = " | ".join(f"{name + ': wall   cpu  iter  +cold':>25}" for name, _ in levels)
    print(f"seed library rep final bnd 1-NN wall s  cpu s iters | {heads}")
    print("\n".join(all_lines))
    print("(final bnd: the bound at the end of the run, standardised data, nats; 1-NN: "
          "leave-one-out 1-NN errors of 1000 in the two most relevant latent dimensions; wall s "
          "/ cpu s: the whole run; iters: iterations (ours) or objective evaluations (GPy); "
          "per level (ref-g: g nats below the seed's reference; GPy final: GPy's final bound): "
          "wall and CPU seconds and iterations/evaluations until the bound first reached it, and "
          "CPU seconds plus the CPU seconds of our cold start without a persistent cache "
          "('+cold'; GPy's column repeats its CPU time))")
    for seed, level, r in all_ratios:
        for name, (cpu, cold, wall) in r.items():
            print(f"seed {seed}, to {level}: ours ({name}) / GPy time = {cpu:.3f} (CPU), "
                  f"{cold:.3f} (CPU, our cold start added), {wall:.3f} (wall)")
    for level in dict.fromkeys(level for _, level, _ in all_ratios):
        for name in OURS:
            got = [r[name] for _, lv, r in all_ratios if lv == level and name in r]
            if got:
                cpu, cold, wall = np.median(got, axis=0)
                print(f"median over the {len(got)} seeds where both reached {level}: ours "
                      f"({name}) / GPy = {cpu:.3f} (CPU), {cold:.3f} (CPU + cold start), "
                      f"{wall:.3f} (wall)")


if __name__ == "__main__":
    main()
