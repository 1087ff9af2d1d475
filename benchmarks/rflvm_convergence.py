"""How fast the RFLVM's chains converge: split R-hat, bulk ESS and ESS per CPU-second (issue 30).

Run (single-threaded XLA and OpenBLAS; the script sets both when they are unset and prints the
settings with the table):

    .venv/bin/python benchmarks/rflvm_convergence.py [--datasets scurve,bridges]
        [--samplers gibbs,nuts,map,numpyro] [--sweeps gibbs=2000,nuts=400,numpyro=1000]
        [--chains 4] [--seed 0] [--learn-kernel] [--features 100]
    GPLVM_COMPILATION_CACHE=0 .venv/bin/python benchmarks/rflvm_convergence.py \
        --datasets scurve,bridges,bridges-nb,congress109,scurve784 --samplers gibbs-auto,nuts-auto
        [--budget 300] [--hard-stop 360] [--sweeps gibbs-auto=1000,nuts-auto=200]
    .venv/bin/python benchmarks/rflvm_convergence.py --datasets scurve,bridges,congress109 \
        --samplers numpyro-fixed-w --peer-budget 600 --sweeps numpyro-fixed-w@congress109=100

**Run until converged** (issue 30, items 3 and 6): ``gibbs-auto`` / ``nuts-auto`` fit
``RFLVM(n_iter='auto', max_time=--budget, sampler='gibbs'/'nuts')`` once, with the sweeps
of ``--sweeps`` as the burn-in (rounds of max(burn-in, 100) sweeps), from a cold start: the
CPU and wall seconds are the whole fit's, compilation and mode search included (set
``GPLVM_COMPILATION_CACHE=0`` so that no earlier process's compiled programs are read).  The
library checks its budget after each call of the compiled sweeps (~2 s per round of chains;
after each round before cabe6b0); a fit still sampling at ``--hard-stop`` seconds
(1.2 × budget) is stopped by the library's Ctrl-C path, which keeps the calls finished before
it (the call then running is discarded, its seconds counted), and diagnosed on the draws it
has (:func:`fit_auto`).  ``--clock cpu`` puts the budget on the
process's CPU seconds instead (budget × ``--cores``), for a machine loaded by other jobs.  Column "converged": the library's rule
and how the run ended (max_time, max_iter, the hard stop); for the fixed-length samplers the
same rule on this table's figures.  ``--sweeps sampler@dataset=n`` sets one data set's.

**Item 6 in one run**: a suffix ``+dp`` learns the DP kernel for one auto sampler, so the
library's default (``nuts-auto+dp``: ``RFLVM()``'s inference, burn-in 200), the old default's
sampler (``gibbs-auto+dp``), the same model with W held (``nuts-fixed-w-auto``, fixed RBF) and
NumPyro on that model and W (``numpyro-fixed-w``) share one invocation:

    GPLVM_COMPILATION_CACHE=0 .venv/bin/python benchmarks/rflvm_convergence.py --clock cpu \
        --datasets scurve --samplers nuts-auto+dp,gibbs-auto+dp,nuts-fixed-w-auto,numpyro-fixed-w \
        --sweeps nuts-fixed-w-auto=200 --peer-budget 600

``gibbs-fixed-w-auto`` is the Gibbs sweep on the model with W held (burn-in 1000), for the
ratio against the Gibbs sampler on the same model and W.  ``+niw`` (with ``+dp``) integrates
the DP components out of the NUTS block (``RFLVM(dp_components='integrated')``, the default
since it was measured), ``+drawn`` conditions the block on them as drawn (the default before).

Data sets besides the S-curve and bridges: ``congress109`` (the phrase counts of
:func:`gplvm.data.load_congress109`, 529 × 1000, Poisson with each member's centred log total
count as the row offset, as RESULTS.md Table 1 fits it) and ``scurve784`` (the Poisson S-curve
at 1000 × 784, ``rflvm_profile.py``'s).  Column "1-NN": :func:`gplvm.metrics.knn_accuracy` of
the posterior mean latents (1-NN, shuffled 5-fold, seed ``--seed``: Table 1's protocol) against
the data set's labels (bridges: its labels; congress109: party), "–" without labels.

``--samplers nuts-no-gauge`` is ``sampler='nuts'`` with (X, W) *not* taken modulo rotations
(``gplvm.models.rflvm.gauge.applies`` patched off for that fit; run it alone, with
``GPLVM_COMPILATION_CACHE=0``, which the script requires): the ablation of the gauge;
``nuts-depth10`` is ``sampler='nuts'`` with trees of up to 2¹⁰ − 1 leapfrog steps (the
library's cap is 2⁸ − 1); ``nuts-accept0.6`` has dual averaging aim at a mean acceptance
of 0.6 instead of Stan's 0.8 (run with ``GPLVM_COMPILATION_CACHE=0``, which the script
requires for it).  ``nuts-w-own`` takes W out of the NUTS position (X, z and log r given W;
W by its Metropolis step given β and the joint scale move only: ``joint.has_frequencies``
patched off, same requirements as ``nuts-no-gauge``; ``nuts-w-own-auto`` the same run until
converged).  ``nuts-fixed-w`` samples another
model, ``RFLVM(sampler='nuts', frequencies='fixed')``: chain 0's draw of W from the RBF's
spectral density for every chain, never moved (X, z given W by NUTS: the model NumPyro's
``numpyro-fixed-w`` row samples, with chain 0's W of an ordinary start, another draw).
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
of 2 + 2 iterations first; see ``_numpyro_rflvm.py``); with ``--peer-budget`` s > 0 they
include it (no separate run), and after its whole warm-up the peer draws in chunks until its
draws or the budget are spent ("draws + warm-up" in the sweeps column).  The peer runs on the
Poisson data sets (offsets included) and on ``bridges-nb`` (gplvm's negative binomial: its
dispersion prior and intercept centring, ``_numpyro_rflvm.py``).  Its 1-NN and R²
use the mean of its draws over all chains with W fixed (one frame), chain 0's with W sampled.
Column "leapfrogs per draw": the mean number of leapfrog steps per kept draw (NUTS only).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from typing import NamedTuple, Optional  # noqa: E402

import numpy as np  # noqa: E402

import gplvm  # noqa: E402
from gplvm.inference.mcmc import pairwise_distance_summary  # noqa: E402
from gplvm.metrics import affine_r2, knn_accuracy  # noqa: E402
from gplvm.models.rflvm.convergence import convergence_figures, has_converged  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # _peer_venvs


class Data(NamedTuple):
    """A data set: the counts, words for the table, the planted latents (S-curves), the class
    labels the 1-NN accuracy scores (bridges, congress109) and the rows' offsets (congress109)."""

    Y: np.ndarray
    description: str
    truth: Optional[np.ndarray] = None
    labels: Optional[np.ndarray] = None
    offset: Optional[np.ndarray] = None


def load(name: str) -> Optional[Data]:
    """The data set ``name``, or None (with a message) when its files are not available."""
    from gplvm.data import load_bridges, load_congress109, make_s_curve

    if name in ("scurve", "scurve784"):
        N, J = (300, 50) if name == "scurve" else (1000, 784)
        data = make_s_curve("poisson", n_samples=N, n_outputs=J, random_state=0)
        return Data(data.Y, f"Poisson S-curve, N = {N}, J = {J}", data.X)
    if name not in ("bridges", "bridges-nb", "congress109"):
        raise SystemExit(f"unknown data set {name!r} (scurve, scurve784, bridges, bridges-nb, "
                         f"congress109)")
    try:
        data = load_congress109() if name == "congress109" else load_bridges()
    except (FileNotFoundError, OSError) as err:
        print(f"[skip] {name}: {err}")
        return None
    N, J = data.Y.shape
    if name == "congress109":
        # RESULTS.md Table 1's congress rows (benchmarks/reproduce/rflvm_table1.py, config
        # offset=log_total): each member's log total count, centred, as the row's offset
        log_total = np.log(np.maximum(data.Y.sum(axis=1), 1.0))
        return Data(data.Y, f"congress109, Poisson with offsets, N = {N}, J = {J}",
                    labels=data.labels, offset=log_total - log_total.mean())
    kind = "NB" if name == "bridges-nb" else "Poisson"
    return Data(data.Y, f"bridges, {kind}, N = {N}, J = {J}", labels=data.labels)


#: the likelihood of each data set (``bridges-nb``: the bridges counts, negative binomial)
LIKELIHOODS = {"bridges-nb": "negative_binomial"}


def diagnostics(model) -> tuple:
    """Split R-hat and bulk ESS of the log-likelihood and of 20 latent distances, and those
    distances (chains, kept sweeps, 20)."""
    kept = model.history_[:, model.burn_in:]
    dist = np.asarray(pairwise_distance_summary(model.X_samples_, n_pairs=20))
    return _ess_rhat(kept, dist), dist


def fit(Y, sampler: str, n_iter: int, args) -> tuple:
    """``sampler`` 'gibbs', 'nuts' or 'map' (``RFLVM(inference='map')``: no sweeps), or
    'nuts-fixed-w' (``RFLVM(sampler='nuts', frequencies='fixed')``)."""
    kwargs = dict(likelihood=args.likelihood, n_features=args.features, n_chains=args.chains,
                  learn_kernel=args.learn_kernel, progress=False, random_state=args.seed,
                  block_size=min(50, n_iter // 2))
    if sampler == "nuts-fixed-w":
        sampler = "nuts"
        kwargs.update(frequencies="fixed")
    if sampler == "map":
        kwargs.update(inference="map", block_size=1)
        n_iter = 4
    else:
        kwargs.update(sampler=sampler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.process_time()
        gplvm.RFLVM(n_iter=2 * kwargs["block_size"], burn_in=kwargs["block_size"],
                    **kwargs).fit(Y, offset=args.offset)          # compiles the blocks
        compile_cpu = time.process_time() - t0
        t0, w0 = time.process_time(), time.perf_counter()
        model = gplvm.RFLVM(n_iter=n_iter, burn_in=n_iter // 2, **kwargs).fit(
            Y, offset=args.offset)
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
    if sampler == "nuts-w-own":
        with w_out_of_position(True):
            return fit(Y, "nuts", n_iter, args)
    if sampler != "nuts-no-gauge":
        return fit(Y, sampler, n_iter, args)
    from gplvm.models.rflvm import gauge

    applies = gauge.applies
    gauge.applies = lambda spec, data: False
    try:
        return fit(Y, "nuts", n_iter, args)
    finally:
        gauge.applies = applies


@contextlib.contextmanager
def w_out_of_position(active: bool):
    """``nuts-w-own``: W out of the NUTS position (``joint.has_frequencies`` and the mode
    search's copy patched off, so the gauge too) while the block is traced; nothing when not
    ``active``."""
    from gplvm.models.rflvm import gauge, joint, map_start

    saved = joint.has_frequencies, map_start.has_frequencies, gauge.applies
    if active:
        joint.has_frequencies = map_start.has_frequencies = lambda spec, data: False
        gauge.applies = lambda spec, data: False
    try:
        yield
    finally:
        joint.has_frequencies, map_start.has_frequencies, gauge.applies = saved


def check_patched_target(samplers: list) -> None:
    """``nuts-accept<a>``, ``nuts-no-gauge`` and ``nuts-w-own`` (also as ``nuts-w-own-auto``)
    patch what the sweep reads when it is traced (the target acceptance, ``gauge.applies``,
    ``joint.has_frequencies``), which is in no cache's key: each needs the
    persistent cache off (or a program exported by an earlier process is read back) and no
    other NUTS fit in the same process (whose traced sweep and compiled block of the same spec
    would be reused; checked: a 'nuts' fit then a patched one gave identical draws)."""
    patched = [s for s in samplers
               if s.startswith("nuts-accept") or s.split("+")[0] in (
                   "nuts-no-gauge", "nuts-w-own", "nuts-w-own-auto")]
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


def chain_starts(Y, args, n_chains: int, offset=None, kind: str = "poisson"):
    """(spec, data, states): the ``kind`` block and each chain's start exactly as
    ``RFLVM(sampler='nuts', learn_kernel=False)`` builds them before its mode search (same
    seed, PCA start, jitter, W draws, β at its prior mean; a leading chain axis on states),
    given the rows' ``offset`` (or none)."""
    import jax

    from gplvm.random import as_key
    from gplvm.kernels import RBF
    from gplvm.models.rflvm.init import initial_latents, initial_states, prepare_data

    model = gplvm.RFLVM(likelihood=kind, n_features=args.features, n_chains=n_chains,
                        learn_kernel=False, sampler="nuts", random_state=args.seed)
    spec = model._spec(kind, Y.shape[1], False)
    data = prepare_data(spec, Y, offset, None, RBF(lengthscale=1.0), None)
    key_init, _ = jax.random.split(as_key(args.seed))
    X0 = initial_latents(Y, kind, key_init, model.n_components, model.init, offset)
    states = initial_states(jax.random.split(key_init, n_chains), spec, data, X0, 0.1,
                            model.n_clusters)
    return spec, data, states


def numpyro_inputs(Y, args) -> dict:
    """The model's prior and each chain's start (:func:`chain_starts`), for
    ``_numpyro_rflvm.py``; the negative binomial's dispersion prior and starts besides."""
    spec, data, states = chain_starts(Y, args, args.chains, args.offset, args.likelihood)
    inputs = {"Y": Y, "offset": np.asarray(data.offset), "W0": np.asarray(states.W),
              "beta_mean": np.asarray(data.beta_prior_mean),
              "beta_prec": np.asarray(data.beta_prior_prec), "X0": np.asarray(states.X),
              "beta0": np.asarray(states.beta)}
    if args.likelihood == "negative_binomial":
        inputs.update(nb_prior=np.asarray(spec.dispersion_prior, float),
                      r0=np.asarray(states.dispersion), h0=np.asarray(states.dispersion_rate))
    return inputs


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
                                       0.0 if fixed_w else 1.0, args.peer_budget])
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
    d["draws"] = int(out["X"].shape[1])
    d["converged"] = _converged(out["log_lik"], out["X"])
    # the posterior mean of X: over every chain with W fixed (one frame), chain 0's otherwise
    d["X_mean"] = out["X"].mean(axis=(0, 1)) if fixed_w else out["X"][0].mean(axis=0)
    return d, float(out["cpu_s"]), wall, float(out["compile_s"])


def fit_auto(Y, sampler: str, burn_in: int, args) -> tuple:
    """``gibbs-auto`` / ``nuts-auto`` (/ ``nuts-fixed-w-auto``, ``gibbs-fixed-w-auto``: with
    ``frequencies='fixed'``;
    a suffix ``+dp``, e.g. ``nuts-auto+dp``, learns the DP kernel for this sampler alone,
    as ``--learn-kernel`` does for all, so that one run can hold the default ``nuts-auto+dp``
    beside ``nuts-fixed-w-auto``, which needs the fixed RBF; with ``+dp``, ``+drawn`` sets
    ``dp_components='drawn'``, otherwise the library's default ``'integrated'``): one fit of ``RFLVM(n_iter='auto', burn_in=burn_in,
    max_iter=args.max_iter)``, timed whole (mode search, compilation and every round), with
    nothing of this sampler and shape run before in this process (set
    ``GPLVM_COMPILATION_CACHE=0`` so that no earlier process's programs are read either).

    ``--clock wall``: ``max_time=args.budget``, which the library checks after each call, and
    a fit still sampling ``args.hard_stop`` wall seconds after its start is stopped there.
    ``--clock cpu`` (for a machine loaded by other jobs, where wall seconds measure the load):
    no ``max_time``; the fit is stopped when this process has used ``args.budget × --cores``
    CPU seconds, what a quiet machine of that many cores gives in ``budget`` wall seconds.  A
    stop is the library's own Ctrl-C path (a SIGINT, sent only while the driver runs blocks): the
    calls finished before it are kept and diagnosed; the call then running is discarded, its
    seconds counted (about 2 s per round of chains).
    Returns (model or None, CPU s, wall s, how it ended)."""
    cpu_clock = args.clock == "cpu"
    suffixes = sampler.split("+")[1:]
    learn_kernel = args.learn_kernel or "dp" in suffixes
    base = sampler.split("+")[0][:-len("-auto")]
    fixed = base in ("nuts-fixed-w", "gibbs-fixed-w")   # RFLVM(frequencies='fixed'), see fit()
    own = base == "nuts-w-own"                  # W out of the NUTS position, see fit_ablated
    model = gplvm.RFLVM(n_iter="auto", burn_in=burn_in, max_iter=args.max_iter,
                        max_time=None if cpu_clock else args.budget,
                        sampler=base.split("-")[0] if fixed or own else base,
                        likelihood=args.likelihood,
                        frequencies="fixed" if fixed else "sampled",
                        n_features=args.features, n_chains=args.chains,
                        learn_kernel=learn_kernel, progress=False,
                        dp_components=("integrated" if "niw" in suffixes else
                                       "drawn" if "drawn" in suffixes else "integrated"),
                        random_state=args.seed, block_size=min(args.auto_block, burn_in))
    limit = args.budget * args.cores if cpu_clock else args.hard_stop
    unit = "CPU s" if cpu_clock else "s"
    t0, w0, escaped = time.process_time(), time.perf_counter(), False
    sent, done = threading.Event(), threading.Event()

    def stop(signum, frame):
        while frame is not None and not sent.is_set():   # inside the driver's loop?
            if frame.f_code.co_name == "run" and frame.f_code.co_filename.endswith(
                    os.path.join("inference", "run.py")):
                sent.set()
                os.kill(os.getpid(), signal.SIGINT)
                return
            frame = frame.f_back            # not sampling now: the watcher asks again in 1 s

    def watch():
        clock, start = ((time.process_time, t0) if cpu_clock else (time.perf_counter, w0))
        while not done.wait(1.0) and not sent.is_set():
            if clock() - start >= limit:
                os.kill(os.getpid(), signal.SIGALRM)

    # a background job of a non-interactive shell starts with SIGINT ignored, which would
    # swallow the stop: give it Python's own handler (the one the library's Ctrl-C path reads)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous = signal.signal(signal.SIGALRM, stop)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with warnings.catch_warnings(), w_out_of_position(own):
        warnings.simplefilter("ignore")
        try:
            model.fit(Y, offset=args.offset)
        except KeyboardInterrupt:
            escaped = True
        finally:
            done.set()
            watcher.join()
            signal.signal(signal.SIGALRM, previous)
            signal.signal(signal.SIGINT, previous_int)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    if not hasattr(model, "n_iter_") or escaped:
        return None, cpu, wall, f"stopped at {limit:.0f} {unit} before any sampling ended"
    if model.converged_:
        ended = "yes"
    elif model.interrupted_:
        ended = f"no (stopped at {limit:.0f} {unit})"
    else:
        ended = "no (max_iter)" if model.n_iter_ >= args.max_iter else "no (max_time)"
    return model, cpu, wall, ended


#: each sampler's sweeps per chain unless ``--sweeps`` gives others
DEFAULT_SWEEPS = ("gibbs=2000,nuts=400,numpyro=1000,numpyro-fixed-w=1000,gibbs-auto=1000,"
                  "nuts-auto=200,gibbs-fixed-w-auto=1000")


def _sweeps(spec: str) -> dict:
    """``--sweeps``: sampler=n, or sampler@dataset=n for one data set."""
    return dict((k, int(v)) for k, v in (item.split("=") for item in spec.split(",")))


def _cell(value, fmt: str) -> str:
    return "–" if value is None or not np.isfinite(value) else format(value, fmt)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="scurve")
    parser.add_argument("--samplers", default="gibbs,nuts")
    parser.add_argument("--sweeps", default="",
                        help="sweeps per chain per sampler, half of them burn-in (the auto "
                        "samplers: the burn-in); sampler@dataset=n for one data set; on top "
                        f"of {DEFAULT_SWEEPS}")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learn-kernel", action="store_true")
    parser.add_argument("--budget", type=float, default=300.0,
                        help="auto samplers: RFLVM(max_time=...), wall seconds")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="auto samplers: 'cpu' stops a fit at budget × cores CPU seconds "
                        "instead (fit_auto)")
    parser.add_argument("--cores", type=int, default=os.cpu_count(),
                        help="--clock cpu: the cores whose budget wall seconds it stands for")
    parser.add_argument("--hard-stop", type=float, default=None,
                        help="auto samplers: wall seconds after which a fit is stopped mid-round "
                        "(default 1.2 × budget)")
    parser.add_argument("--max-iter", type=int, default=100000,
                        help="auto samplers: RFLVM(max_iter=...)")
    parser.add_argument("--auto-block", type=int, default=50,
                        help="auto samplers: RFLVM(block_size=...), at most the burn-in")
    parser.add_argument("--trace-out", default=None,
                        help="a folder: each library row's log-likelihood trace (chains, "
                        "sweeps, burn-in included) and kept distances saved there as "
                        "DATA_SAMPLER.npz")
    parser.add_argument("--peer-budget", type=float, default=0.0,
                        help="NumPyro: CPU seconds for the whole run, compilation included "
                        "(0: no budget, compilation excluded)")
    args = parser.parse_args(argv)
    args.hard_stop = args.hard_stop or 1.2 * args.budget
    sweeps = {**_sweeps(DEFAULT_SWEEPS), **(_sweeps(args.sweeps) if args.sweeps else {})}
    check_patched_target(args.samplers.split(","))
    print(f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}; {os.cpu_count()} CPUs; "
          f"GPLVM_COMPILATION_CACHE={os.environ.get('GPLVM_COMPILATION_CACHE', '(unset: on)')}; "
          f"gplvm {gplvm.__version__}; {args.chains} chains, M = {args.features}, "
          f"{'DP kernel' if args.learn_kernel else 'frequencies from a fixed RBF'}; auto: "
          + (f"stopped at {args.budget * args.cores:g} CPU s (no max_time)"
             if args.clock == "cpu" else
             f"max_time={args.budget:g} s, stopped at {args.hard_stop:g} s")
          + f", max_iter={args.max_iter}; NumPyro budget {args.peer_budget:g} CPU s; "
          f"load {os.getloadavg()[0]:.2f}")
    header = ("| data | sampler | sweeps × chains | converged | CPU s (first fit) | wall s | "
              "R-hat log-lik | R-hat dist (max) | ESS log-lik | ESS dist (median) | "
              "ESS/CPU-s log-lik | ESS/CPU-s dist | leapfrogs per draw | 1-NN | "
              "affine R² to truth |")
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for name in args.datasets.split(","):
        data = load(name)
        if data is None:
            continue
        Y, truth = data.Y, data.truth
        args.likelihood = LIKELIHOODS.get(name, "poisson")
        args.offset = data.offset
        for sampler in args.samplers.split(","):
            base = sampler.split("+")[0]          # "+dp": the DP kernel for this sampler
            n_iter = sweeps.get(f"{sampler}@{name}", sweeps.get(f"{base}@{name}", sweeps.get(
                base, sweeps.get(base.split("-")[0], 0))))
            row = run_row(Y, data, name, sampler, n_iter, args)
            if row is None:
                continue
            d, cpu, wall, first, converged, X_mean, done = row
            knn = (None if data.labels is None or X_mean is None else
                   knn_accuracy(X_mean, data.labels, n_splits=5, random_state=args.seed))
            r2 = None if truth is None or X_mean is None else affine_r2(X_mean, truth)
            print(f"| {data.description} | {sampler} | {done} × {args.chains} | {converged} | "
                  f"{cpu:.1f} ({_cell(first, '.1f')}) | {wall:.1f} | "
                  f"{_cell(d['rhat_ll'], '.3f')} | {_cell(d['rhat_dist'], '.3f')} | "
                  f"{_cell(d['ess_ll'], '.0f')} | {_cell(d['ess_dist'], '.0f')} | "
                  f"{_cell(d['ess_ll'] / cpu, '.2f')} | {_cell(d['ess_dist'] / cpu, '.2f')} | "
                  f"{_cell(d.get('leapfrog'), '.0f')} | {_cell(knn, '.3f')} | "
                  f"{_cell(r2, '.3f')} |", flush=True)


_NO_FIGURES = dict.fromkeys(("rhat_ll", "rhat_dist", "ess_ll", "ess_dist"), float("nan"))


def run_row(Y, data: Data, name: str, sampler: str, n_iter: int, args):
    """One row: (figures, CPU s, wall s, first fit's CPU s or None, converged, posterior mean
    of X or None, sweeps per chain), or None when the row is skipped."""
    if sampler.startswith("numpyro"):
        if args.likelihood not in ("poisson", "negative_binomial"):
            print(f"[skip] {sampler} on {name}: the peer has the Poisson and NB models only")
            return None
        got = fit_numpyro(Y, n_iter, args, fixed_w=sampler == "numpyro-fixed-w")
        if got is None:
            return None
        d, cpu, wall, compile_cpu = got
        return (d, cpu, wall, compile_cpu, d["converged"], d["X_mean"],
                f"{d['draws']} + {n_iter // 2}")
    if sampler.split("+")[0].endswith("-auto"):
        model, cpu, wall, ended = fit_auto(Y, sampler, n_iter, args)
        if model is None:
            return _NO_FIGURES, cpu, wall, None, f"no ({ended})", None, "–"
        d, dist = diagnostics(model)
        print(f"# {sampler} on {name}: the library's figures {model.convergence_}",
              flush=True)
        _print_chains(sampler, name, model.history_[:, model.burn_in:])
        _save_trace(args, name, sampler, model, dist)
        if sampler.startswith("nuts"):
            d["leapfrog"] = float(np.mean(model.sampler_info_["n_leapfrog"][:, model.burn_in:]))
        return d, cpu, wall, None, ended, model.X_mean_, model.n_iter_
    model, cpu, wall, compile_cpu = fit_ablated(Y, sampler, n_iter, args)
    d, dist = diagnostics(model) if sampler != "map" else (dict(_NO_FIGURES), None)
    if sampler.startswith("nuts"):
        d["leapfrog"] = float(np.mean(model.sampler_info_["n_leapfrog"][:, model.burn_in:]))
    if sampler == "map":
        found = model.mode_start_
        print(f"# map on {name}: log-density at each chain's mode "
              f"{np.array2string(found['log_density'], precision=1)}, L-BFGS iterations "
              f"{found['n_iterations'].tolist()}, largest |gradient| left "
              f"{float(np.max(found['max_gradient'])):.2g}, in Laplace sds "
              f"{float(np.max(found['max_scaled_gradient'])):.2g} (converged_ "
              f"{model.converged_})", flush=True)
    if sampler != "map":
        _print_chains(sampler, name, model.history_[:, model.burn_in:])
        _save_trace(args, name, sampler, model, dist)
    converged = ("–" if sampler == "map" else
                 _converged(model.history_[:, model.burn_in:], model.X_samples_))
    return d, cpu, wall, compile_cpu, converged, model.X_mean_, n_iter


def _print_chains(sampler: str, name: str, kept) -> None:
    """Each chain's mean kept log-likelihood and the split R-hat of its own halves, and the
    library's verdict on separate modes (:func:`gplvm.models.rflvm.convergence.
    separate_modes`)."""
    from gplvm.models.rflvm.convergence import own_rhats, separate_modes

    kept = np.asarray(kept, dtype=float)
    if kept.shape[1] < 8:
        return
    means = np.array2string(kept.mean(axis=1), precision=1)
    sds = np.array2string(kept.std(axis=1, ddof=1), precision=1)
    own = np.array2string(own_rhats(kept), precision=3)
    quarters = np.array2string(np.stack([q.mean(axis=1) for q in
                                         np.array_split(kept, 4, axis=1)], axis=1),
                               precision=1).replace("\n", "")
    print(f"# {sampler} on {name}: chains' mean log-lik {means}, sd {sds}, each chain's own "
          f"split R-hat {own}, means by quarter of the kept sweeps {quarters}; separate "
          f"modes: {separate_modes(kept)}", flush=True)


def _save_trace(args, name: str, sampler: str, model, dist) -> None:
    """``--trace-out``: the fit's whole log-likelihood trace, its burn-in and the kept draws'
    distances of :func:`diagnostics`' 20 row pairs (``dist``: chains, kept sweeps, 20), to
    look at later."""
    if args.trace_out is None:
        return
    os.makedirs(args.trace_out, exist_ok=True)
    np.savez(os.path.join(args.trace_out, f"{name}_{sampler}.npz"),
             log_lik=np.asarray(model.history_), burn_in=int(model.burn_in), distances=dist)


def _converged(log_lik, X_draws) -> str:
    """The library's rule (:func:`gplvm.models.rflvm.convergence.has_converged`: R-hat ≤ 1.01
    and ESS ≥ 400 for the kept log-likelihood (chains, S) and every latent distance of the
    kept draws (chains, S, N, Q), the smallest ESS over the pairs), as ``converged_`` of an
    ``n_iter='auto'`` fit decides it."""
    return "yes" if has_converged(convergence_figures(log_lik, X_draws), 400) else "no"


if __name__ == "__main__":
    main()
