"""How fast the RFLVM's chains converge: split R-hat, bulk ESS and ESS per CPU-second (issue 30).

Run (single-threaded XLA and OpenBLAS; the script sets both when they are unset and prints the
settings with the table):

    .venv/bin/python benchmarks/rflvm_convergence.py [--datasets scurve,bridges]
        [--samplers gibbs,nuts,map,numpyro] [--sweeps gibbs=2000,nuts=400,numpyro=1000]
        [--chains 4] [--seed 0] [--learn-kernel] [--features 100]

``--samplers nuts-no-gauge`` is ``sampler='nuts'`` with (X, W) *not* taken modulo rotations
(``gplvm.models.rflvm.gauge.applies`` patched off for that fit; run it alone, with
``GPLVM_COMPILATION_CACHE=0``, which the script requires): the ablation of the gauge;
``nuts-depth10`` is ``sampler='nuts'`` with trees of up to 2¹⁰ − 1 leapfrog steps (the
library's cap is 2⁸ − 1); ``nuts-accept0.6`` has dual averaging aim at a mean acceptance
of 0.6 instead of Stan's 0.8 (run with ``GPLVM_COMPILATION_CACHE=0``, which the script
requires for it).
``--samplers map`` fits ``RFLVM(inference='map')`` (each chain's mode, no sweeps: no R-hat or
ESS).  The last column is the affine R² of the mean latents to the planted ones (S-curve only,
:func:`gplvm.metrics.affine_r2`).

For each data set and sampler, one fit of ``RFLVM(sampler=...)`` with ``--chains`` chains
(half the sweeps burn-in) from the same PCA start, then, over the kept sweeps, ArviZ's
rank-normalised split R-hat and bulk ESS (Vehtari et al. 2021) of

* the log-likelihood trace (every kept sweep), and
* distances between 20 fixed pairs of rows (:func:`gplvm.inference.mcmc.
  pairwise_distance_summary`): statistics of X that no rotation changes, so a sampler cannot
  look converged by mixing over the rotation alone (max R-hat and median ESS over the pairs).

CPU seconds are the process's (all threads) for the fit, compilation excluded: a first fit of
the same shapes and sampler compiles the programs, and the timed fit reuses them.  That first
fit's CPU seconds are printed beside as "first fit": they are *not* the compile time alone —
the first fit runs 2 × min(50, sweeps/2) sweeps of every chain and, for NUTS, the mode search
besides compiling (on the S-curve NUTS: 80.7 CPU s of which 13.6 compiling;
``benchmarks/rflvm_compile.py`` measures the compile alone, per program).  ESS per CPU-second divides the bulk ESS by
those seconds.  ``scurve``: the Poisson S-curve of seed 000 §4 (N = 300, J = 50);
``bridges``: the Poisson bridges counts from ``../shared/data`` (skipped with a message when
absent); ``bridges-nb``: the same counts under the negative binomial.  The frequencies' prior is the fixed RBF's (``learn_kernel=False``) unless
``--learn-kernel`` (the DP mixture): the issue's comparison holds W's prior fixed so that the
blocks that differ are the ones compared.

The peer: ``numpyro`` is NumPyro's NUTS (its default window adaptation, diagonal mass, tree
depth 10, chains one after the other) on the same Poisson model — X ~ N(0, I), W ~ N(0, I),
β with gplvm's prior, the same feature map — from the same per-chain starts that
``RFLVM(sampler='nuts')`` builds before its mode search (``_numpyro_rflvm.py``, run in
``benchmarks/.venvs/numpyro``, created on first use); ``numpyro-fixed-w`` holds W at chain 0's
draw for every chain (issue 30's NumPyro row).  Its sweeps are half warm-up, half draws; ESS
of its distances is over all its draws (gplvm's over its stored draws, at most 200 over the
chains: ``RFLVM(max_stored=200)``).  Its CPU seconds exclude compilation as gplvm's do (a run
of 2 + 2 iterations first; see ``_numpyro_rflvm.py``).  The last column is the mean number of
leapfrog steps per kept draw (NUTS only).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import gplvm  # noqa: E402
from gplvm.inference.mcmc import pairwise_distance_summary  # noqa: E402
from gplvm.metrics import affine_r2  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # _peer_venvs


def load(name: str):
    """(Y, description, true latents or None) or None when the data set is not available."""
    if name == "scurve":
        from gplvm.data import make_s_curve
        data = make_s_curve("poisson", n_samples=300, n_outputs=50, random_state=0)
        return data.Y, "Poisson S-curve, N = 300, J = 50", data.X
    if name in ("bridges", "bridges-nb"):
        from gplvm.data import load_bridges
        try:
            data = load_bridges()
        except (FileNotFoundError, OSError) as err:
            print(f"[skip] {name}: {err}")
            return None
        kind = "NB" if name == "bridges-nb" else "Poisson"
        return (data.Y, f"bridges, {kind}, N = {data.Y.shape[0]}, J = {data.Y.shape[1]}",
                None)
    raise SystemExit(f"unknown data set {name!r} (scurve, bridges, bridges-nb)")


#: the likelihood of each data set (``bridges-nb``: the bridges counts, negative binomial)
LIKELIHOODS = {"bridges-nb": "negative_binomial"}


def diagnostics(model) -> dict:
    """Split R-hat and bulk ESS of the log-likelihood and of 20 latent distances."""
    kept = model.history_[:, model.burn_in:]
    dist = np.asarray(pairwise_distance_summary(model.X_samples_, n_pairs=20))
    return _ess_rhat(kept, dist)


def fit(Y, sampler: str, n_iter: int, args) -> tuple:
    """``sampler`` 'gibbs', 'nuts' or 'map' (``RFLVM(inference='map')``: no sweeps)."""
    kwargs = dict(likelihood=getattr(args, "likelihood", "poisson"), n_features=args.features, n_chains=args.chains,
                  learn_kernel=args.learn_kernel, progress=False, random_state=args.seed,
                  block_size=min(50, n_iter // 2))
    if sampler == "map":
        kwargs.update(inference="map", block_size=1)
        n_iter = 4
    else:
        kwargs.update(sampler=sampler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.process_time()
        gplvm.RFLVM(n_iter=2 * kwargs["block_size"], burn_in=kwargs["block_size"],
                    **kwargs).fit(Y)                               # compiles the blocks
        compile_cpu = time.process_time() - t0
        t0, w0 = time.process_time(), time.perf_counter()
        model = gplvm.RFLVM(n_iter=n_iter, burn_in=n_iter // 2, **kwargs).fit(Y)
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    return model, cpu, wall, compile_cpu


def fit_ablated(Y, sampler: str, n_iter: int, args) -> tuple:
    """:func:`fit`, with ``nuts-no-gauge`` run as ``nuts`` with the gauge off and
    ``nuts-depth<k>`` as ``nuts`` with trees of at most 2^k − 1 leapfrog steps (the spec's
    ``max_doublings``; the library's is 8), ``nuts-accept<a>`` as ``nuts`` with dual
    averaging's target acceptance a (the library's is Stan's 0.8; run it with
    ``GPLVM_COMPILATION_CACHE=0``: the constant is not part of the cached block's key)."""
    if sampler.startswith("nuts-depth"):
        from dataclasses import replace

        from gplvm.models.rflvm.run import RFLVMRun

        depth, spec = int(sampler[len("nuts-depth"):]), RFLVMRun._spec
        RFLVMRun._spec = lambda self, *a: replace(spec(self, *a), max_doublings=depth)
        try:
            return fit(Y, "nuts", n_iter, args)
        finally:
            RFLVMRun._spec = spec
    if sampler.startswith("nuts-accept"):
        from gplvm.inference.mcmc import nuts

        target, nuts.TARGET_ACCEPT = nuts.TARGET_ACCEPT, float(sampler[len("nuts-accept"):])
        try:
            return fit(Y, "nuts", n_iter, args)
        finally:
            nuts.TARGET_ACCEPT = target
    if sampler != "nuts-no-gauge":
        return fit(Y, sampler, n_iter, args)
    from gplvm.models.rflvm import gauge

    applies = gauge.applies
    gauge.applies = lambda spec, data: False
    try:
        return fit(Y, "nuts", n_iter, args)
    finally:
        gauge.applies = applies


def check_patched_target(samplers: list) -> None:
    """``nuts-accept<a>`` and ``nuts-no-gauge`` patch what the sweep reads when it is traced
    (the target acceptance, ``gauge.applies``), which is in no cache's key: each needs the
    persistent cache off (or a program exported by an earlier process is read back) and no
    other NUTS fit in the same process (whose traced sweep and compiled block of the same spec
    would be reused; checked: a 'nuts' fit then a patched one gave identical draws)."""
    patched = [s for s in samplers if s.startswith("nuts-accept") or s == "nuts-no-gauge"]
    if not patched:
        return
    if os.environ.get("GPLVM_COMPILATION_CACHE") != "0":
        raise SystemExit(f"{patched[0]}: set GPLVM_COMPILATION_CACHE=0 (what it patches is not "
                         f"in the cached block's key)")
    if len([s for s in samplers if s.startswith("nuts")]) > 1:
        raise SystemExit(f"{patched[0]}: run it alone among the NUTS samplers (one process "
                         f"reuses a NUTS block traced without the patch)")


def _ess_rhat(ll: np.ndarray, dist: np.ndarray) -> dict:
    """Split R-hat and bulk ESS (ArviZ, rank-normalised) of a (C, S) log-likelihood trace and
    (C, S, P) distances, as :func:`diagnostics` reports them."""
    import arviz as az

    ll_ds, dd = az.convert_to_dataset(ll[:, :, None]), az.convert_to_dataset(dist)
    rhat_d = az.rhat(dd, method="rank").to_array().values.ravel()
    ess_d = az.ess(dd, method="bulk").to_array().values.ravel()
    return {"rhat_ll": float(az.rhat(ll_ds, method="rank").to_array().values.max()),
            "ess_ll": float(az.ess(ll_ds, method="bulk").to_array().values.min()),
            "rhat_dist": float(np.max(rhat_d)), "ess_dist": float(np.median(ess_d))}


def chain_starts(Y, args, n_chains: int):
    """(spec, data, states): the Poisson block and each chain's start exactly as
    ``RFLVM(sampler='nuts', learn_kernel=False)`` builds them before its mode search (same
    seed, PCA start, jitter, W draws, β at its prior mean; a leading chain axis on states)."""
    import jax

    from gplvm.random import as_key
    from gplvm.kernels import RBF
    from gplvm.models.rflvm.init import initial_latents, initial_states, prepare_data

    model = gplvm.RFLVM(likelihood="poisson", n_features=args.features, n_chains=n_chains,
                        learn_kernel=False, sampler="nuts", random_state=args.seed)
    spec = model._spec("poisson", Y.shape[1], False)
    data = prepare_data(spec, Y, None, None, RBF(lengthscale=1.0), None)
    key_init, _ = jax.random.split(as_key(args.seed))
    X0 = initial_latents(Y, "poisson", key_init, model.n_components, model.init, None)
    states = initial_states(jax.random.split(key_init, n_chains), spec, data, X0, 0.1,
                            model.n_clusters)
    return spec, data, states


def numpyro_inputs(Y, args) -> dict:
    """The Poisson model's prior and each chain's start (:func:`chain_starts`), for
    ``_numpyro_rflvm.py``."""
    _, data, states = chain_starts(Y, args, args.chains)
    return {"Y": Y, "offset": np.asarray(data.offset), "W0": np.asarray(states.W),
            "beta_mean": np.asarray(data.beta_prior_mean),
            "beta_prec": np.asarray(data.beta_prior_prec), "X0": np.asarray(states.X),
            "beta0": np.asarray(states.beta)}


def fit_numpyro(Y, n_iter: int, args, fixed_w: bool):
    """NumPyro NUTS in its own virtual environment (``_peer_venvs.py``): n_iter/2 warm-up and
    n_iter/2 draws per chain; W sampled under the RBF's N(0, I) spectral density, as gplvm's
    model has it, or held at one draw for all chains (``fixed_w``).  None when NumPyro cannot
    be installed."""
    import subprocess
    import tempfile
    from pathlib import Path

    from _peer_venvs import ensure_venv

    python = ensure_venv("numpyro")
    if python is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        inputs = numpyro_inputs(Y, args)
        inputs["settings"] = np.array([n_iter // 2, n_iter // 2, args.seed,
                                       0.0 if fixed_w else 1.0])
        np.savez(Path(tmp) / "in.npz", **inputs)
        w0 = time.perf_counter()
        subprocess.run([str(python), str(Path(__file__).with_name("_numpyro_rflvm.py")),
                        str(Path(tmp) / "in.npz"), str(Path(tmp) / "out.npz")], check=True,
                       env={**os.environ, "JAX_PLATFORMS": "cpu"})
        wall = time.perf_counter() - w0
        out = dict(np.load(Path(tmp) / "out.npz"))
    dist = np.asarray(pairwise_distance_summary(out["X"], n_pairs=20))
    d = _ess_rhat(out["log_lik"], dist)
    d["leapfrog"] = float(np.mean(out["n_leapfrog"]))
    return d, float(out["cpu_s"]), wall, float(out["compile_s"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="scurve")
    parser.add_argument("--samplers", default="gibbs,nuts")
    parser.add_argument("--sweeps", default="gibbs=2000,nuts=400,numpyro=1000,numpyro-fixed-w=1000",
                        help="sweeps per chain per sampler, half of them burn-in")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learn-kernel", action="store_true")
    args = parser.parse_args(argv)
    sweeps = dict((k, int(v)) for k, v in (s.split("=") for s in args.sweeps.split(",")))
    check_patched_target(args.samplers.split(","))
    print(f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}; {os.cpu_count()} CPUs; "
          f"gplvm {gplvm.__version__}; {args.chains} chains, M = {args.features}, "
          f"{'DP kernel' if args.learn_kernel else 'frequencies from a fixed RBF'}")
    header = ("| data | sampler | sweeps × chains | CPU s (first fit) | wall s | R-hat log-lik | "
              "R-hat dist (max) | ESS log-lik | ESS dist (median) | ESS/CPU-s log-lik | "
              "ESS/CPU-s dist | leapfrogs per draw | affine R² to truth |")
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for name in args.datasets.split(","):
        loaded = load(name)
        if loaded is None:
            continue
        Y, description, truth = loaded
        args.likelihood = LIKELIHOODS.get(name, "poisson")
        for sampler in args.samplers.split(","):
            n_iter = sweeps.get(sampler, sweeps.get(sampler.split("-")[0], 0))
            if sampler.startswith("numpyro"):
                if name != "scurve":
                    print(f"[skip] {sampler} on {name}: the peer model is the Poisson one "
                          f"without offsets")
                    continue
                got = fit_numpyro(Y, n_iter, args, fixed_w=sampler == "numpyro-fixed-w")
                if got is None:
                    continue
                d, cpu, wall, compile_cpu = got
                r2 = float("nan")        # the peer's draws stay in its own process
            else:
                model, cpu, wall, compile_cpu = fit_ablated(Y, sampler, n_iter, args)
                d = (diagnostics(model) if sampler != "map" else
                     dict.fromkeys(("rhat_ll", "rhat_dist", "ess_ll", "ess_dist"), float("nan")))
                r2 = (float("nan") if truth is None
                      else affine_r2(model.X_mean_, truth))
                if sampler.startswith("nuts"):
                    d["leapfrog"] = float(np.mean(
                        model.sampler_info_["n_leapfrog"][:, model.burn_in:]))
            print(f"| {description} | {sampler} | {n_iter} × {args.chains} | {cpu:.1f} "
                  f"({compile_cpu:.1f}) | {wall:.1f} | {d['rhat_ll']:.3f} | {d['rhat_dist']:.3f} "
                  f"| {d['ess_ll']:.0f} | {d['ess_dist']:.0f} | {d['ess_ll'] / cpu:.2f} | "
                  f"{d['ess_dist'] / cpu:.2f} | {d.get('leapfrog', float('nan')):.0f} | "
                  f"{r2:.3f} |",
                  flush=True)
            if sampler == "map":
                found = model.mode_start_
                print(f"# map on {name}: log-density at each chain's mode "
                      f"{np.array2string(found['log_density'], precision=1)}, L-BFGS iterations "
                      f"{found['n_iterations'].tolist()}, largest |gradient| left "
                      f"{float(np.max(found['max_gradient'])):.2g}, in Laplace sds "
                      f"{float(np.max(found['max_scaled_gradient'])):.2g} (converged_ "
                      f"{model.converged_})", flush=True)


if __name__ == "__main__":
    main()
