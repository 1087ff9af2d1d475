"""Bayesian GPLVM on oil flow: ``gplvm.BayesianGPLVM`` against GPy 1.15 and GPflow 2.11.

The issue 4 comparison (item 6).  All three fit the same model — Titsias & Lawrence's (2010)
collapsed bound, Q = 10, M = 30, an ARD RBF kernel — to the same standardised 1000 × 12 data from
the same initial values, which are ours: PCA means with unit-variance columns, q(X) variances
drawn from U(0, 0.1), Z by k-means, length-scales 1/(fraction of variance), kernel variance 1,
noise variance 0.01.  They are extracted from a ``BayesianGPLVM`` fitted for zero iterations
and written to an ``.npz`` that the peers load in their own virtual environments
(``benchmarks/_peer_venvs.py``).  Everything runs on one thread (set before jax / numpy /
TensorFlow are imported; printed) and, unless ``--no-pin``, pinned to one logical CPU.

Reported per library: the bound at the initial point (a check that the three objectives agree),
the median wall and CPU time of one objective-plus-gradient at that point (after warm-up; ours is
``jax.jit(jax.value_and_grad(negative_bound))`` with the arguments ``fit`` passes to
``minimise``), the wall time of the L-BFGS fit, iterations and function evaluations, the final
bound (the ELBO on standardised data: GPy's ``log_likelihood()``, GPflow's ``elbo()``, our
``elbo_``), our bound evaluated at the peer's optimum, leave-one-out 1-NN errors in the two most
relevant latent dimensions, and the number of dimensions with relevance 1/ℓ² above 5 % of the
largest.

The iteration budgets differ in meaning: ours counts L-BFGS iterations (optax, zoom line search),
GPflow's ``Scipy(maxiter=…)`` counts L-BFGS-B iterations, and GPy's
``optimize('lbfgsb', max_iters=…)`` passes ``maxfun=maxiter=max_iters`` to SciPy, so it stops
after that many *function evaluations*.  A diagnostic row ``ours+sp`` (``--skip-scipy`` drops
it) minimises our objective from our initial point with SciPy's L-BFGS-B, the optimiser both
peers use, so that a gap in the final bound can be put on the optimiser or on the objective.

``--gpy-own-init`` adds two rows per seed: GPy from *its own* default initialisation (what
``GPy.models.BayesianGPLVM(Y, Q, num_inducing=M)`` does after ``np.random.seed(seed)``: PCA
means scaled to unit variance, q(X) variances U(0, 0.1), Z a random subset of the means,
length-scales 1/fraction, noise variance 1) and ours from that same point with the optimiser
``fit`` uses.  It separates the effect of the initial point from that of the library.

``--kernel matern32`` fits ours with an ARD Matérn 3/2 and the unscented psi-statistic rule and
GPy with its Matérn 3/2, whose psi-statistics fall back to a 1-D Gauss–Hermite rule
(``PSICOMP_GH``); GPflow is skipped there (its quadrature for a Q-dimensional diagonal Gaussian is
a full tensor grid, H^Q points).  Run::

    .venv/bin/python benchmarks/bgplvm_vs_peers.py [--max-iter 2000] [--seeds 0 1]
        [--kernel rbf|matern32] [--skip-gpy] [--skip-gpflow] [--skip-scipy] [--reps 20]
        [--gpy-own-init]
"""

from __future__ import annotations

import os
import sys

# one thread everywhere, before numpy / jax are imported (subprocesses inherit these)
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
              "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
os.environ.update(THREAD_ENV)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _pin_to_one_cpu():
    """Restrict this process, and the peers it starts, to one logical CPU: the settings above
    keep BLAS, Eigen and TensorFlow on one thread, but XLA's CPU runtime still keeps a thread
    pool (sized by the CPUs it may use) that can run independent operations concurrently."""
    if "--no-pin" in sys.argv or not hasattr(os, "sched_setaffinity"):
        return None
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


PINNED_CPU = _pin_to_one_cpu()

import argparse  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gplvm  # noqa: E402,F401  (float64)
from _peer_venvs import ensure_venv  # noqa: E402
from gplvm.data.loaders import load_oil_flow  # noqa: E402
from gplvm.kernels import Matern32  # noqa: E402
from gplvm.metrics import loo_1nn_errors  # noqa: E402
from gplvm.models.gplvm_family import bound as core  # noqa: E402
# where BayesianGPLVM.fit calls minimise (fit_spied replaces it there)
from gplvm.models.gplvm_family import collapsed_run as bgplvm_module  # noqa: E402
from gplvm.transforms import inverse_softplus, softplus  # noqa: E402

Q, M, RELEVANT = 10, 30, 0.05

# ---------------------------------------------------------------------------- peer programs
# Each reads inputs.npz (argv[1]) and a JSON config (argv[2]) and writes out.npz (argv[3]).
_PEER_COMMON = """
    import json, sys, time
    import numpy as np
    d = np.load(sys.argv[1]); cfg = json.loads(sys.argv[2])
    Y, X0, S0, Z0, ell0 = d["Y"], d["X_mean"], d["X_var"], d["Z"], d["lengthscale"]
    q = X0.shape[1]

    def threads():
        try:
            from threadpoolctl import threadpool_info
            return "; ".join(f"{i['internal_api']}={i['num_threads']}" for i in threadpool_info())
        except ImportError:
            return "threadpoolctl not installed"

    def time_evals(f, reps, warmup=3):
        for _ in range(warmup):
            f()
        wall, cpu = [], []
        for _ in range(reps):
            t, c = time.perf_counter(), time.process_time()
            f()
            wall.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
        return np.array(wall), np.array(cpu)
"""

GPY_PROGRAM = textwrap.dedent(_PEER_COMMON) + textwrap.dedent("""
    import GPy, scipy
    if cfg.get("own_init"):
        # GPy's own defaults: PCA means scaled to unit variance, variances U(0, 0.1), Z a random
        # subset of the means, ARD RBF with length-scales 1/fraction, noise variance 1
        np.random.seed(cfg["seed"])
        m = GPy.models.BayesianGPLVM(Y, q, num_inducing=Z0.shape[0])
        kern = m.kern
        init = dict(init_X_mean=np.array(m.X.mean), init_X_var=np.array(m.X.variance),
                    init_Z=np.array(m.Z), init_lengthscale=np.array(kern.lengthscale),
                    init_variance=float(kern.variance[0]),
                    init_noise_var=float(m.likelihood.variance[0]))
    else:
        if cfg["kernel"] == "rbf":
            kern = GPy.kern.RBF(q, variance=float(d["variance"]), lengthscale=ell0, ARD=True)
        else:
            kern = GPy.kern.Matern32(q, variance=float(d["variance"]), lengthscale=ell0,
                                     ARD=True)
        m = GPy.models.BayesianGPLVM(Y, q, X=X0.copy(), X_variance=S0.copy(), Z=Z0.copy(),
                                     num_inducing=Z0.shape[0], kernel=kern)
        m.likelihood.variance = float(d["noise_var"])
        init = {}
    x0 = m.optimizer_array.copy()
    bound0 = float(np.ravel(m.log_likelihood())[0])
    wall, cpu = time_evals(lambda: m._objective_grads(x0), cfg["reps"])
    m.optimizer_array = x0
    t = time.perf_counter()
    opt = m.optimize("lbfgsb", max_iters=cfg["max_iter"])
    fit_s = time.perf_counter() - t
    np.savez(sys.argv[3], bound0=bound0, eval_wall=wall, eval_cpu=cpu, fit_s=fit_s,
             elbo=float(np.ravel(m.log_likelihood())[0]), n_iter=-1, n_evals=int(opt.funct_eval),
             status=str(opt.status), X_mean=np.asarray(m.X.mean), X_var=np.asarray(m.X.variance),
             Z=np.asarray(m.Z), lengthscale=np.asarray(kern.lengthscale),
             variance=float(kern.variance[0]), noise_var=float(m.likelihood.variance[0]),
             version=f"GPy {GPy.__version__}, numpy {np.__version__}, scipy {scipy.__version__}",
             psicomp=type(kern.psicomp).__name__, threads=threads(), **init)
""")

GPFLOW_PROGRAM = textwrap.dedent(_PEER_COMMON) + textwrap.dedent("""
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import gpflow, scipy, tensorflow_probability as tfp
    gpflow.config.set_default_float(np.float64)
    kern = gpflow.kernels.SquaredExponential(variance=float(d["variance"]), lengthscales=ell0)
    m = gpflow.models.BayesianGPLVM(Y, X_data_mean=X0, X_data_var=S0, kernel=kern,
                                    inducing_variable=Z0.copy())
    m.likelihood.variance.assign(float(d["noise_var"]))
    bound0 = float(m.elbo().numpy())
    opt, loss, variables = gpflow.optimizers.Scipy(), m.training_loss, m.trainable_variables
    x0 = opt.initial_parameters(variables).numpy()
    func = opt.eval_func(loss, variables, tf_fun_args={}, compile=True)  # the one minimize uses
    wall, cpu = time_evals(lambda: func(x0), cfg["reps"])
    t = time.perf_counter()
    res = opt.minimize(loss, variables, options=dict(maxiter=cfg["max_iter"]))
    fit_s = time.perf_counter() - t
    np.savez(sys.argv[3], bound0=bound0, eval_wall=wall, eval_cpu=cpu, fit_s=fit_s,
             elbo=float(m.elbo().numpy()), n_iter=int(res.nit), n_evals=int(res.nfev),
             status=str(res.message), X_mean=m.X_data_mean.numpy(), X_var=m.X_data_var.numpy(),
             Z=m.inducing_variable.Z.numpy(), lengthscale=kern.lengthscales.numpy(),
             variance=float(kern.variance.numpy()),
             noise_var=float(m.likelihood.variance.numpy()),
             version=(f"GPflow {gpflow.__version__}, TF {tf.__version__}, TFP {tfp.__version__}"
                      f", numpy {np.__version__}, scipy {scipy.__version__}"),
             psicomp="analytic (gpflow.expectations)",
             threads=(f"tf intra={tf.config.threading.get_intra_op_parallelism_threads()} "
                      f"inter={tf.config.threading.get_inter_op_parallelism_threads()}; "
                      + threads()))
""")


def run_peer(python: Path, program: str, inputs: Path, config: dict) -> dict:
    """Run a peer program in its venv; its ``out.npz`` as a dict (strings and scalars unboxed)."""
    import json

    out = inputs.parent / "out.npz"
    done = subprocess.run([python, "-c", program, inputs, json.dumps(config), out],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"peer failed:\n{done.stderr[-4000:]}")
    with np.load(out) as f:
        return {k: (f[k].item() if f[k].ndim == 0 else f[k]) for k in f.files}


# ---------------------------------------------------------------------------- ours
def fit_spied(model, Y, counted=None):
    """Fit, keeping what ``fit`` passes to ``minimise`` (its ``params`` and ``args``); with
    ``counted``, the objective is swapped for ``counted(fun)`` (same maths, counts calls)."""
    seen, real = {}, bgplvm_module.minimise

    def spy(fun, params, **kw):
        seen.update(fun=fun, params=params, args=kw["args"])
        return real(fun if counted is None else counted(fun), params, **kw)

    bgplvm_module.minimise = spy
    try:
        model.fit(Y)
    finally:
        bgplvm_module.minimise = real
    return seen


class EvalCounter:
    """Counts objective evaluations inside jitted L-BFGS steps (line-search trials included):
    a ``jax.debug.callback`` runs once per forward pass.  One wrapper per objective, so the
    compiled step (cached per function) is reused between the warm-up and the timed fit."""

    def __init__(self):
        self.n, self._wrapped = 0, {}

    def _tick(self):
        self.n += 1

    def __call__(self, fun):
        if fun not in self._wrapped:
            def counted(u, *args):
                jax.debug.callback(self._tick)
                return fun(u, *args)
            self._wrapped[fun] = counted
        return self._wrapped[fun]


def constrained(template, u) -> dict:
    """Our unconstrained parameters ``u`` as the constrained values the peers exchange."""
    kern = template.from_unconstrained(u["kernel"])
    return {"X_mean": np.asarray(u["X_mean"]), "X_var": np.asarray(softplus(u["X_var"])),
            "Z": np.asarray(u["Z"]),
            "lengthscale": np.broadcast_to(np.asarray(kern.lengthscale), (Q,)),
            "variance": float(kern.variance), "noise_var": float(softplus(u["noise_var"]))}


def unconstrained(template, p) -> dict:
    """The inverse of :func:`constrained`: a peer's values ``p`` as our parameter pytree."""
    kern = type(template)(lengthscale=jnp.asarray(p["lengthscale"]),
                          variance=jnp.asarray(p["variance"]))
    return {"X_mean": jnp.asarray(p["X_mean"]), "X_var": inverse_softplus(jnp.asarray(p["X_var"])),
            "Z": jnp.asarray(p["Z"]), "kernel": kern.unconstrained(),
            "noise_var": inverse_softplus(jnp.asarray(p["noise_var"]))}


def initial_values(seen) -> dict:
    """Initial values in constrained form from the captured unconstrained parameters."""
    return constrained(seen["args"][0].kernel, seen["params"])


def time_ours(seen, reps, warmup=3):
    """Median wall / CPU seconds of one jitted value-and-gradient at the initial point."""
    fg = jax.jit(jax.value_and_grad(core.negative_bound))
    u, args = seen["params"], seen["args"]
    for _ in range(warmup):
        jax.block_until_ready(fg(u, *args))
    wall, cpu = [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        jax.block_until_ready(fg(u, *args))
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return np.array(wall), np.array(cpu)


def our_bound_at(seen, p) -> float:
    """Our bound at constrained parameters ``p`` (a peer's optimum), same kernel and rule."""
    return -float(core.negative_bound_jit(unconstrained(seen["args"][0].kernel, p), *seen["args"]))


def run_ours(Y, seed, kernel_name, max_iter, reps):
    """Our fit and timings; returns (row dict, captured fit arguments)."""
    from gplvm import BayesianGPLVM

    model = BayesianGPLVM(n_components=Q, n_inducing=M, random_state=seed, progress=False,
                          max_iter=1)
    seen = fit_spied(model, Y)                    # the arguments of the first iteration
    if kernel_name == "matern32":  # same length-scales (1/fracs), unscented psi-statistics
        ell = initial_values(seen)["lengthscale"]
        model.set_params(kernel=Matern32(lengthscale=jnp.asarray(ell), variance=1.0),
                         psi_rule="unscented")
        seen = fit_spied(model, Y)
    bound0 = model.elbo_
    wall, cpu = time_ours(seen, reps)
    counter = EvalCounter()
    t = time.perf_counter()
    fit_spied(model.set_params(max_iter=1), Y, counter)   # compiles the L-BFGS step
    compile_s = time.perf_counter() - t
    counter.n = 0
    t = time.perf_counter()
    fit_spied(model.set_params(max_iter=max_iter), Y, counter)
    fit_s = time.perf_counter() - t
    row = {"bound0": bound0, "eval_wall": wall, "eval_cpu": cpu, "fit_s": fit_s,
           "compile_s": compile_s, "elbo": model.elbo_, "n_iter": model.n_iter_,
           "n_evals": counter.n, "status": "converged" if model.converged_ else "iteration limit",
           "X_mean": model.X_mean_, "X_var": model.X_var_, "Z": model.Z_,
           "lengthscale": np.broadcast_to(np.asarray(model.kernel_.lengthscale), (Q,)),
           "variance": float(model.kernel_.variance), "noise_var": float(model.fitted_.map.noise_var),
           "version": f"gplvm, jax {jax.__version__}, numpy {np.__version__}",
           "psicomp": type(model.rule_).__name__ if model.rule_ is not None else "Analytic",
           "threads": "XLA_FLAGS=" + os.environ["XLA_FLAGS"] + "; " + _our_threadpools()}
    return row, seen


def run_ours_from(seen, p, max_iter, row_ours):
    """Our objective and optimiser (the L-BFGS step ``fit`` uses) from another library's initial
    point ``p`` (constrained values, e.g. GPy's own initialisation)."""
    u = unconstrained(seen["args"][0].kernel, p)
    bound0 = our_bound_at(seen, p)
    counter = EvalCounter()
    fun = counter(core.negative_bound)
    bgplvm_module.minimise(fun, u, method="lbfgs", n_iter=1, progress=False,
                           args=seen["args"])           # compile outside the timing
    counter.n = 0
    t = time.perf_counter()
    res = bgplvm_module.minimise(fun, u, method="lbfgs", n_iter=max_iter, progress=False,
                                 args=seen["args"])
    fit_s = time.perf_counter() - t
    return {**row_ours, **constrained(seen["args"][0].kernel, res.params), "bound0": bound0,
            "fit_s": fit_s, "elbo": -float(core.negative_bound_jit(res.params, *seen["args"])),
            "n_iter": int(res.n_iter), "n_evals": counter.n,
            "status": "converged" if res.converged else "iteration limit"}


def run_ours_scipy(seen, max_iter, row_ours):
    """Diagnostic: our objective and initial point under SciPy's L-BFGS-B (the optimiser GPy and
    GPflow use), to separate the optimiser from the objective."""
    import scipy
    from jax.flatten_util import ravel_pytree

    template = seen["args"][0].kernel
    x0, unravel = ravel_pytree(seen["params"])
    fg = jax.jit(lambda x: jax.value_and_grad(core.negative_bound)(unravel(x), *seen["args"]))

    def f(x):
        value, grad = fg(jnp.asarray(x))
        return float(value), np.asarray(ravel_pytree(grad)[0], dtype=float)

    f(np.asarray(x0))                              # compile outside the timing
    t = time.perf_counter()
    res = scipy.optimize.minimize(f, np.asarray(x0), jac=True, method="L-BFGS-B",
                                  options={"maxiter": max_iter})
    fit_s = time.perf_counter() - t
    return {**row_ours, **constrained(template, unravel(jnp.asarray(res.x))), "fit_s": fit_s,
            "elbo": -float(res.fun), "n_iter": int(res.nit), "n_evals": int(res.nfev),
            "status": str(res.message), "version": f"scipy {scipy.__version__}"}


def _our_threadpools() -> str:
    try:
        from threadpoolctl import threadpool_info
        return "; ".join(f"{i['internal_api']}={i['num_threads']}" for i in threadpool_info())
    except ImportError:
        return "threadpoolctl not installed"


# ---------------------------------------------------------------------------- summary
def summarise(row, labels, seen) -> dict:
    """Median times (ms), 1-NN errors in the two most relevant dimensions, relevant-dimension
    count (relevance 1/ℓ² above 5 % of the largest) and our bound at the row's parameters."""
    relevance = 1.0 / np.asarray(row["lengthscale"], dtype=float) ** 2
    top2 = np.argsort(relevance)[::-1][:2]
    return {"ms_wall": 1e3 * np.median(row["eval_wall"]),
            "ms_cpu": 1e3 * np.median(row["eval_cpu"]),
            "errors": loo_1nn_errors(np.asarray(row["X_mean"])[:, top2], labels),
            "n_relevant": int(np.sum(relevance > RELEVANT * relevance.max())),
            "ours_at": our_bound_at(seen, row), "top2": tuple(int(i) for i in top2)}


HEADER = (f"{'seed':>4} {'library':<12} {'psi-stats':<17} {'bound@init':>11} {'ms f+g':>7} "
          f"{'cpu ms':>7} {'fit s':>7} {'iters':>6} {'f-evals':>7} {'final ELBO':>11} "
          f"{'ours@opt':>11} {'1-NN err':>8} {'dims>5%':>7} {'top-2':>6}  status")


def format_row(seed, name, row, s) -> str:
    it = "-" if row["n_iter"] < 0 else str(row["n_iter"])
    ev = "-" if row["n_evals"] < 0 else str(row["n_evals"])
    return (f"{seed:>4} {name:<12} {row['psicomp'][:17]:<17} {row['bound0']:>11.2f} "
            f"{s['ms_wall']:>7.2f} {s['ms_cpu']:>7.2f} {row['fit_s']:>7.1f} {it:>6} {ev:>7} "
            f"{row['elbo']:>11.2f} {s['ours_at']:>11.2f} {s['errors']:>8d} {s['n_relevant']:>7d} "
            f"{'%d,%d' % s['top2']:>6}  {row['status']}")


def print_header(args):
    print(f"# Bayesian GPLVM on oil flow (1000 x 12, standardised), Q = {Q}, M = {M}, kernel "
          f"{args.kernel}, max_iter {args.max_iter}, seeds {args.seeds}")
    print(f"# machine: {platform.machine()}, {os.cpu_count()} logical CPUs, python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f}")
    print("# thread settings (all processes): "
          + ", ".join(f"{k}={v}" for k, v in THREAD_ENV.items())
          + "; TensorFlow also set_intra/inter_op_parallelism_threads(1); "
          + ("not pinned (--no-pin)" if PINNED_CPU is None else
             f"all processes pinned to logical CPU {PINNED_CPU} (os.sched_setaffinity)"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-iter", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--kernel", choices=("rbf", "matern32"), default="rbf")
    parser.add_argument("--skip-gpy", action="store_true")
    parser.add_argument("--skip-gpflow", action="store_true")
    parser.add_argument("--skip-scipy", action="store_true",
                        help="skip the diagnostic row: our objective under SciPy's L-BFGS-B")
    parser.add_argument("--gpy-own-init", action="store_true",
                        help="also fit GPy from its own default initialisation (rows 'GPy-own') "
                             "and ours from that same point (rows 'ours@GPy-own'); rbf only")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin the processes to one logical CPU")
    parser.add_argument("--save", type=Path, default=None,
                        help="write each fit's parameters to SAVE/<kernel>_seed<s>_<library>.npz")
    parser.add_argument("--reps", type=int, default=20, help="timed objective+gradient calls")
    args = parser.parse_args(argv)
    if args.gpy_own_init and (args.kernel != "rbf" or args.skip_gpy):
        parser.error("--gpy-own-init needs GPy and the rbf kernel")
    print_header(args)

    pythons = {}
    if not args.skip_gpy:
        pythons["GPy"] = (ensure_venv("gpy"), GPY_PROGRAM)
    if args.kernel == "matern32":
        print("# GPflow skipped for matern32: its expectations for a non-RBF kernel use a "
              "Gauss-Hermite tensor grid over all Q = 10 dimensions")
    elif not args.skip_gpflow:
        pythons["GPflow"] = (ensure_venv("gpflow"), GPFLOW_PROGRAM)
    for name, (python, _) in list(pythons.items()):
        if python is None:
            print(f"# {name} could not be installed into benchmarks/.venvs; skipping it")
            del pythons[name]

    data = load_oil_flow()
    Y, labels = np.asarray(data.Y, dtype=float), np.asarray(data.labels)
    Ys = (Y - Y.mean(0)) / Y.std(0)   # what BayesianGPLVM(standardize=True) fits
    lines, ratios, versions, threads = [], [], {}, {}
    for seed in args.seeds:
        ours, seen = run_ours(Y, seed, args.kernel, args.max_iter, args.reps)
        results = {"ours": ours}
        if not args.skip_scipy:
            print(f"# seed {seed}: running ours under SciPy L-BFGS-B ...", file=sys.stderr,
                  flush=True)
            results["ours+sp"] = run_ours_scipy(seen, args.max_iter, ours)
        with tempfile.TemporaryDirectory() as tmp:
            inputs = Path(tmp) / "inputs.npz"
            np.savez(inputs, Y=Ys, **initial_values(seen))
            cfg = {"kernel": args.kernel, "max_iter": args.max_iter, "reps": args.reps}
            for name, (python, program) in pythons.items():
                print(f"# seed {seed}: running {name} ...", file=sys.stderr, flush=True)
                results[name] = run_peer(python, program, inputs, cfg)
            if args.gpy_own_init and "GPy" in pythons:
                print(f"# seed {seed}: running GPy from its own initialisation, then ours from "
                      "there ...", file=sys.stderr, flush=True)
                own = run_peer(pythons["GPy"][0], GPY_PROGRAM, inputs,
                               {**cfg, "own_init": True, "seed": seed})
                results["GPy-own"] = own
                start = {k[len("init_"):]: own[k] for k in own if k.startswith("init_")}
                results["ours@GPy-own"] = run_ours_from(seen, start, args.max_iter, ours)
        summaries = {name: summarise(row, labels, seen) for name, row in results.items()}
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            for name, row in results.items():
                np.savez(args.save / f"{args.kernel}_seed{seed}_{name.replace('+', '_')}.npz",
                         **row)
        for name, row in results.items():
            lines.append(format_row(seed, name, row, summaries[name]))
            versions[name], threads[name] = row["version"], row["threads"]
        for name in pythons:
            ratios.append((seed, name, summaries["ours"]["ms_wall"] / summaries[name]["ms_wall"],
                           summaries["ours"]["ms_cpu"] / summaries[name]["ms_cpu"]))
        lines.append(f"{'':>4} (ours: {ours['compile_s']:.1f} s to compile the L-BFGS step, "
                     "not in 'fit s')")

    for name in versions:
        print(f"# {name}: {versions[name]}; threads: {threads[name]}")
    print()
    print(HEADER)
    print("\n".join(lines))
    print("(bound@init, final ELBO: the collapsed bound on standardised data, nats; ms f+g / "
          "cpu ms: median wall / CPU time of one objective+gradient at the initial point over "
          f"{args.reps} calls after warm-up; ours@opt: our bound at that library's optimum; "
          "1-NN err: leave-one-out 1-NN errors of 1000 in the two most relevant dimensions "
          "(top-2); iters: ours (optax) and GPflow / ours+sp (SciPy L-BFGS-B) count L-BFGS "
          "iterations, GPy stops at max_iter function evaluations; f-evals include line-search "
          "trials; ours+sp: our objective, initial point and compiled value-and-gradient under "
          "SciPy's L-BFGS-B, a diagnostic that separates optimiser from objective)")
    for seed, name, r_wall, r_cpu in ratios:
        print(f"seed {seed}: ours / {name} time per objective+gradient = {r_wall:.3f} (wall), "
              f"{r_cpu:.3f} (CPU)")


if __name__ == "__main__":
    main()
