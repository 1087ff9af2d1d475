"""Milliseconds per step of one RFLVM Gibbs sweep, beside the floor of each step (issue 14).

Run (single-threaded; the script sets both variables itself when they are unset and prints them):

    OPENBLAS_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false \\
        .venv/bin/python benchmarks/rflvm_profile.py [--datasets congress109,bridges,scurve]
        [--likelihoods poisson,negative_binomial,...] [--repeats 7] [--warm 10] [--cpu 1]
        [--ess-sweeps 200] [--ess-burn 0] [--mixing-only] [--nb-beta slice|polya_gamma]

For each data set and likelihood the chain is first run for ``--warm`` sweeps from a PCA start
(so that the slice samplers see a state near the posterior), then every step of the sweep is
jitted on its own and
timed on that state ``--repeats`` times with fresh keys; the **median** is printed (the machine is
shared: another benchmark may hold a core, so single timings are noisy).  Steps run over a chain
axis of one, as the driver runs them: ``lax.map`` (its default) or, with ``--vmap``, ``vmap``
(its form before issue 14).  The whole sweep is timed both ways, beside the sum of the steps.

The floor of a step is a plain JAX function doing the arithmetic that step cannot avoid, at the
step's sizes, jitted and timed in the same run (medians too):

=============  ===========================================================================
step           floor
=============  ===========================================================================
pg             N·D exponential variates (a uniform and a log per entry): any PG draw needs
               at least that much randomness per entry
beta (PG)      the D Gram matrices Φᵀdiag(ω_j)Φ as one product (N × P(P+1)/2)ᵀ(N × D) plus
               D Cholesky factorisations of P × P
beta (ESS)     Φμ: one N × P × D product, then n̄ × (Poisson log-likelihood over N × D)
               with n̄ the measured mean number of ellipse points per column
dispersion     5 × (negative-binomial log-likelihood over N × D) (the CRT step and four moves)
W (given β)    M/2 × (rank-2 update of ψ, (N × 2)(2 × D), plus its log-likelihood over N × D)
W (collapsed)  M/2 × (the two new columns' products with Φ and Y, N × 2 × (M + D))
X              n̄ × (Φ(X) and Φβ, N × P × D, plus the log-likelihood over N × D), n̄ the
               measured mean number of ellipse points per row
beta+σ² (G)    ΦᵀΦ and ΦᵀY (N × M × (M + D)) and one M × M Cholesky (the step now takes
               the two products from the W pass, which has them: its ratio falls below 1)
dp             the M/2 × K Gaussian log-densities of the frequencies (K = 20 slots)
bookkeeping    Φβ (N × P × D) and the normalised log-likelihood over N × D: what the trace cost
               before it reused the X step's values (the step now adds only the terms free
               of ψ, over the nonzero counts, so its ratio falls below 1)
=============  ===========================================================================

A ratio near 1 means the step costs what its arithmetic costs; the README section
``rflvm_profile`` records the figures and the reasons where a ratio stays high.  The W floor is
one evaluation per proposal; the random-walk step of :mod:`gplvm.models.rflvm.frequencies`
also forms its metric (one N × D curvature and product per five proposals), work it does to
move.

The ``sum`` line adds the floors too (the smaller of floor and time per step): no sweep that
does the work of this one (M/2 frequency moves, the measured number of ellipse points, the
Gibbs β step's D Gram matrices) can run faster than that sum on this machine.  Where the
issue sets a per-sweep target (``TARGETS_MS``) the script says whether the sweep meets it and,
if not, whether the target is below that sum.  ``--datasets scurve784`` profiles a 1000 × 784
count matrix (the issue's five-minute fit; ``rflvm_speed.py --default-fit`` times that fit).

**Mixing of the kernel.**  After the timings the chain runs ``--ess-sweeps`` more sweeps (one
jitted scan, after ``--ess-burn`` discarded ones; 0 skips this) and the script prints the
fraction of frequency moves accepted over them and the effective sample size per 1000 sweeps
(ArviZ's bulk ESS, through :func:`gplvm.inference.mcmc.summary_rhat_ess`) of the kernel's
hyper-parameters: the mean
squared frequency mean_m ‖w_m‖² (the inverse squared length-scale of the kernel the features
estimate; invariant to rotations of X) and, under the DP mixture, its concentration α and
number of clusters K, beside the log-likelihood's.  The window starts ``--warm`` +
``--ess-burn`` sweeps from the PCA start: a chain still drifting there shows a lower ESS than
it would after a full burn-in.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import statistics  # noqa: E402
from functools import partial  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.scipy.special import gammaln  # noqa: E402

import gplvm  # noqa: E402,F401
from gplvm.kernels import RBF  # noqa: E402
from gplvm.models.rflvm import sweep as sw  # noqa: E402
from gplvm.models.rflvm.dispersion import (NBParams, mean_preserving_moves,  # noqa: E402
                                            update_dispersion_crt)
from gplvm.models.rflvm.features import design  # noqa: E402
from gplvm.models.rflvm.frequencies import (GivenBeta,  # noqa: E402
                                             update_frequencies_collapsed,
                                             update_frequencies_given_beta)
from gplvm.models.rflvm.init import init_state, nb_prior_mean, prepare_data  # noqa: E402
from gplvm.models.rflvm.spec import RFLVMSpec  # noqa: E402
from gplvm.models.rflvm.weights import (collapsed_terms,  # noqa: E402
                                         sample_beta_gaussian, sample_beta_pg, sample_noise_var)
from gplvm.models.rflvm.weights_ess import BetaPrior, sample_beta_ess  # noqa: E402
from gplvm.samplers import polya_gamma  # noqa: E402
from gplvm.samplers.dp_mixture import default_niw_prior, dp_update, n_clusters  # noqa: E402
from gplvm.inference.mcmc import summary_rhat_ess, to_inference_data  # noqa: E402

COUNT_DATA = ("congress109", "bridges")
ALL_LIKELIHOODS = ("gaussian", "poisson", "negative_binomial", "bernoulli", "binomial",
                   "multinomial")


# --- data -------------------------------------------------------------------------------------

TARGETS_MS = {("congress109", "poisson"): 80.0, ("congress109", "negative_binomial"): 400.0,
              ("scurve", "gaussian"): 15.0}
"""Issue 14's acceptance targets per sweep (one chain, one thread)."""


def load(name: str, kind: str):
    """(Y, n_trials) for a data set and likelihood, or None when the pair is not profiled.

    ``scurve784``: 1000 × 784 counts (the issue's "Poisson fit on 1000 × 784 counts", an
    MNIST-sized matrix) from :func:`gplvm.data.make_s_curve`, Poisson or negative binomial.
    """
    if name == "scurve784":
        if kind not in ("poisson", "negative_binomial"):
            return None
        from gplvm.data import make_s_curve
        return make_s_curve(kind, n_samples=1000, n_outputs=784, random_state=0).Y, None
    if name in COUNT_DATA:
        if kind not in ("poisson", "negative_binomial"):
            return None
        from gplvm.data import load_bridges, load_congress109
        return (load_congress109() if name == "congress109" else load_bridges()).Y, None
    from gplvm.data import make_s_curve
    return make_s_curve(kind, n_samples=500, n_outputs=100, random_state=0).Y, (
        10 if kind == "binomial" else None)


def _pca(Z, Q=2):
    Z = Z - Z.mean(0)
    U, s, _ = np.linalg.svd(Z, full_matrices=False)
    X0 = U[:, :Q] * s[:Q]
    return X0 / X0.std(0)


def setup(kind: str, Y: np.ndarray, n_trials, n_freq: int, nb_beta: str = "polya_gamma"):
    """Spec, data and a one-chain start (PCA latents), as the estimator builds them."""
    N, J = Y.shape
    if kind == "gaussian":
        Y = (Y - Y.mean(0)) / Y.std(0)
    D = J - 1 if kind == "multinomial" else J
    # map_sweeps > 0 as in a default fit (half the burn-in); the profiled state is past it.
    spec = RFLVMSpec(likelihood=kind, n_components=2, n_freq=n_freq, n_outputs=D,
                     intercept=kind != "gaussian", map_sweeps=1, nb_beta=nb_beta)
    data = prepare_data(spec, Y, None, n_trials, RBF(lengthscale=1.0), None)
    X0 = jnp.asarray(_pca(Y if kind == "gaussian" else np.log1p(Y)))
    return spec, data, init_state(jax.random.PRNGKey(0), spec, data, X0, 0.1, 20)


# --- timing -----------------------------------------------------------------------------------

def median_ms(fn, args_for, repeats: int) -> float:
    """Median wall ms of ``fn(*args_for(i))`` over ``repeats`` calls (after one warm call)."""
    jax.block_until_ready(fn(*args_for(-1)))
    times = []
    for i in range(repeats):
        args = args_for(i)
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def chained(f, vectorize: bool):
    """``f(key, state, data, *extra)`` for one chain, jitted as the driver runs it: under
    ``vmap`` over a chain axis of 1 (``vectorize``; the driver before issue 14) or over
    ``lax.map`` (its default since), returning the chain axis."""
    def batched(key, state, data, *extra):
        add = lambda t: jax.tree_util.tree_map(lambda x: x[None], t)
        args = (key[None], add(state), add(data)) + tuple(map(add, extra))
        if vectorize:
            return jax.vmap(f)(*args)
        return jax.lax.map(lambda a: f(*a), args)
    return jax.jit(batched)


# --- the steps of one sweep (mirroring sweep._sweep_counts / _sweep_gaussian) -----------------

def _pg_inputs(spec, data, state):
    Phi = design(state.X, state.W, spec.intercept)
    b, kappa = sw._pg_params(spec, data, state.dispersion)
    return Phi, b, kappa, Phi @ state.beta + data.offset


def _w_prior(key, spec, data, state):
    """What the W step takes as its prior: ``sweep.prior_W``, or in trees from before the
    random-walk W step (profiled for comparison) the prior draws of ``sweep.propose_W``."""
    if hasattr(sw, "prior_W"):
        return sw.prior_W(key, spec, data, state)
    return sw.propose_W(key, spec, data, state)


def make_steps(spec: RFLVMSpec):
    """{name: f(key, state, data, *extra)} for the likelihood's sweep."""
    kind = spec.likelihood
    steps = {}
    if kind == "gaussian":
        def w_step(key, state, data):
            k_w, k_prop = jax.random.split(key)
            prior = _w_prior(k_prop, spec, data, state)
            return update_frequencies_collapsed(k_w, prior, state.X, state.W, state.Y_fill,
                                                state.noise_var, spec.beta_prior_var)

        def beta_step(key, state, data, products):
            # ΦᵀΦ and ΦᵀY come from the W pass, as in the sweep
            k_s2, k_beta = jax.random.split(key)
            Y = state.Y_fill
            terms = collapsed_terms(*products, spec.beta_prior_var)
            nv = sample_noise_var(k_s2, terms, jnp.sum(Y**2, axis=0), Y.shape[0],
                                  spec.noise_prior)
            return sample_beta_gaussian(k_beta, terms, nv)

        steps["W"] = w_step
        steps["beta+noise"] = beta_step
    else:
        if spec.polya_gamma and kind != "multinomial":
            def pg_step(key, state, data):
                _, b, _, psi = _pg_inputs(spec, data, state)
                return polya_gamma(key, b, psi) * data.observed

            def beta_step(key, state, data, omega):
                Phi, _, kappa, _ = _pg_inputs(spec, data, state)
                offset = jnp.broadcast_to(data.offset, omega.shape)
                return sample_beta_pg(key, Phi, omega, kappa, offset,
                                      nb_prior_mean(spec, data, state.dispersion),
                                      data.beta_prior_prec)
            steps["pg"] = pg_step
            steps["beta"] = beta_step
        elif kind == "multinomial":
            def beta_step(key, state, data):
                Phi, b, kappa, _ = _pg_inputs(spec, data, state)
                return sw._update_weights_multinomial(key, data, state, Phi, b, kappa)
            steps["pg+beta"] = beta_step
        else:
            def beta_step(key, state, data):
                Phi = design(state.X, state.W, spec.intercept)
                nb = kind == "negative_binomial"
                prior = BetaPrior(nb_prior_mean(spec, data, state.dispersion),
                                  data.beta_prior_prec)
                return sample_beta_ess(key, Phi, state.beta, data, prior,
                                       state.dispersion if nb else None)[:2]
            steps["beta"] = beta_step
        if kind == "negative_binomial":
            def disp_step(key, state, data):
                k_r, k_move = jax.random.split(key)
                psi = design(state.X, state.W, spec.intercept) @ state.beta + data.offset
                beta = state.beta
                nb = NBParams(state.dispersion, state.dispersion_rate, beta[-1])
                r, h = update_dispersion_crt(k_r, data, psi, nb, spec.dispersion_prior,
                                             (data.beta_prior_mean[-1],
                                              data.beta_prior_prec[-1]))
                return mean_preserving_moves(k_move, data, psi, NBParams(r, h, beta[-1]),
                                             spec.dispersion_prior[0])   # as the sweep calls it
            steps["dispersion"] = disp_step

        def w_step(key, state, data):
            k_w, k_prop = jax.random.split(key)
            Phi = design(state.X, state.W, spec.intercept)
            prior = _w_prior(k_prop, spec, data, state)
            given = GivenBeta(state.beta, state.noise_var, state.dispersion, Phi,
                              Phi @ state.beta)
            return update_frequencies_given_beta(k_w, prior, state.X, state.W, kind, data,
                                                 given)
        steps["W"] = w_step

    def x_step(key, state, data):
        return sw._update_latents(key, spec, data, state, jnp.zeros(1))[0].X

    def dp_step(key, state, data):
        a, b = spec.alpha_prior
        return dp_update(key, state.W, state.dp, default_niw_prior(spec.n_components), a, b)

    def book_step(key, state, data):
        # the sweep's trace: the X step's own ψ-dependent total (passed in, free here) plus
        # the ψ-free terms, which is what the sweep computes after X (sweep.current_log_lik)
        return sw.current_log_lik(spec, data, state, state.log_lik)

    steps["X"] = x_step
    steps["dp"] = dp_step
    steps["bookkeeping"] = book_step
    return steps


# --- floors -----------------------------------------------------------------------------------

def _softplus(x):
    return jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def _ll(kind, Y, psi, r):
    """The ψ-dependent log-likelihood summed over N × D (the elementwise part of a floor)."""
    if kind == "gaussian":
        return jnp.sum((Y - psi) ** 2)
    if kind == "poisson":
        return jnp.sum(Y * psi - jnp.exp(psi))
    if kind == "negative_binomial":
        return jnp.sum(Y * psi - (Y + r) * _softplus(psi))
    return jnp.sum(Y * psi - _softplus(psi))


def make_floors(spec, data, state, info):
    """{step: (fn, args)}: the floors of the module docstring at this problem's sizes."""
    kind, n_freq = spec.likelihood, spec.n_freq
    Y = data.Y[:, :spec.n_outputs]
    N, D = Y.shape
    Phi = design(state.X, state.W, spec.intercept)
    P = Phi.shape[1]
    psi = Phi @ state.beta
    r = state.dispersion
    iu = np.triu_indices(P)
    floors = {}

    def elementwise_ll(n):
        return jax.jit(lambda psi: sum(_ll(kind, Y, psi + 1e-3 * i, r) for i in range(n))), (psi,)

    def expo(key):
        return -jnp.log(jax.random.uniform(key, (N, D), dtype=jnp.float64))
    floors["pg"] = (jax.jit(expo), "key")

    def gram(omega):
        Z = Phi[:, iu[0]] * Phi[:, iu[1]]
        G = (Z.T @ omega).T                                       # (D, P(P+1)/2)
        A = jnp.zeros((D, P, P)).at[:, iu[0], iu[1]].set(G) + jnp.eye(P)
        A = A + jnp.triu(A, 1).transpose(0, 2, 1)
        return jnp.linalg.cholesky(A)
    floors["beta_pg"] = (jax.jit(gram), (jnp.abs(psi) * 0.1 + 0.05,))

    n_beta = float(info.get("n_proposals_beta", 1.0))
    floors["beta_ess"] = (jax.jit(lambda Phi, mu: _ll(kind, Y, Phi @ mu, r) * 0.0
                                  + jnp.sum(jnp.stack([_ll(kind, Y, psi + 1e-3 * i, r)
                                                       for i in range(max(1, round(n_beta)))]))),
                          (Phi, state.beta))
    floors["dispersion"] = elementwise_ll(5)

    def w_given_beta(Xw):
        def body(m, acc):
            xw = Xw[:, m % Xw.shape[1]]
            new = jnp.stack([jnp.sin(xw), jnp.cos(xw)], axis=-1)
            return acc + _ll(kind, Y, psi + new @ state.beta[:2], r)
        return jax.lax.fori_loop(0, n_freq, body, 0.0)
    Xw = state.X @ state.W.T
    floors["W_beta"] = (jax.jit(w_given_beta), (Xw,))

    def w_collapsed(Xw):
        def body(m, acc):
            xw = Xw[:, m % Xw.shape[1]]
            new = jnp.stack([jnp.sin(xw), jnp.cos(xw)], axis=-1)
            return acc + jnp.sum(Phi.T @ new) + jnp.sum(new.T @ data.Y)
        return jax.lax.fori_loop(0, n_freq, body, 0.0)
    floors["W_collapsed"] = (jax.jit(w_collapsed), (Xw,))

    n_x = float(info.get("n_proposals_X", 1.0))

    def x_floor(X):
        total = 0.0
        for i in range(max(1, round(n_x))):
            total = total + _ll(kind, Y, design(X + 1e-3 * i, state.W, spec.intercept)
                                @ state.beta, r)
        return total
    floors["X"] = (jax.jit(x_floor), (state.X,))

    def beta_gauss(X):
        Phi_ = design(X, state.W, False)
        return jnp.linalg.cholesky(Phi_.T @ Phi_ + jnp.eye(Phi_.shape[1])), Phi_.T @ data.Y
    floors["beta+noise"] = (jax.jit(beta_gauss), (state.X,))

    def dp_floor(W):
        mu = jnp.zeros((20, W.shape[1])) + jnp.arange(20.0)[:, None]
        return jnp.sum(-0.5 * jnp.sum((W[:, None] - mu[None]) ** 2, axis=-1))
    floors["dp"] = (jax.jit(dp_floor), (state.W,))

    def book(X):
        p = design(X, state.W, spec.intercept) @ state.beta
        if kind in ("poisson", "negative_binomial"):
            return _ll(kind, Y, p, r) - jnp.sum(gammaln(Y + 1.0))
        return _ll(kind, Y, p, r)
    floors["bookkeeping"] = (jax.jit(book), (state.X,))
    return floors


FLOOR_OF = {"pg": "pg", "beta": None, "pg+beta": "beta_pg", "dispersion": "dispersion",
            "W": None, "X": "X", "dp": "dp", "bookkeeping": "bookkeeping",
            "beta+noise": "beta+noise"}


def floor_name(spec, step):
    if step == "beta":
        return "beta_pg" if spec.polya_gamma else "beta_ess"
    if step == "W":
        return "W_collapsed" if spec.likelihood == "gaussian" else "W_beta"
    return FLOOR_OF[step]


# --- mixing of the kernel -----------------------------------------------------------------------

def kernel_trace(spec, data, state, n_sweeps: int):
    """Per-sweep accept_W, log-likelihood and kernel hyper-parameters over ``n_sweeps`` sweeps
    from ``state`` (one chain, one jitted scan): a dict of (n_sweeps,) NumPy arrays."""
    def step(s, key):
        s = sw.sweep(key, s, spec, data, jnp.zeros(1))
        rec = {"accept_W": s.accept_W, "log_lik": s.log_lik,
               "mean w²": jnp.mean(jnp.sum(s.W**2, axis=1))}
        if spec.learn_kernel:
            rec["DP α"] = s.dp.alpha
            rec["DP clusters"] = n_clusters(s.dp).astype(s.W.dtype)
        return s, rec

    keys = jax.random.split(jax.random.PRNGKey(5000), n_sweeps)
    _, trace = jax.jit(lambda s, k: jax.lax.scan(step, s, k))(state, keys)
    return {name: np.asarray(v) for name, v in trace.items()}


def ess_per_1000(trace: dict) -> dict:
    """Bulk ESS per 1000 sweeps of every traced quantity but accept_W (one chain)."""
    names = [k for k in trace if k != "accept_W"]
    idata = to_inference_data({k: trace[k][None] for k in names})
    table = summary_rhat_ess(idata)
    n = len(trace["accept_W"])
    return {k: 1000.0 * float(table.loc[k, "ess_bulk"]) / n for k in names}


def print_mixing(spec, data, state, n_sweeps: int, n_burn: int) -> None:
    start = time.perf_counter()
    trace = kernel_trace(spec, data, state, n_burn + n_sweeps)
    trace = {k: v[n_burn:] for k, v in trace.items()}
    ess = ess_per_1000(trace)
    cols = "  ".join(f"{k} {v:.0f}" for k, v in ess.items())
    print(f"  mixing over {n_sweeps} sweeps after {n_burn} more "
          f"({time.perf_counter() - start:.0f} s): accept_W {trace['accept_W'].mean():.3f}; "
          f"ESS per 1000 sweeps: {cols}", flush=True)


# --- one case ---------------------------------------------------------------------------------

def profile(name, kind, Y, n_trials, args):
    spec, data, state = setup(kind, Y, n_trials, args.n_freq, args.nb_beta)
    if args.mixing_only:
        N, D = data.observed.shape
        print(f"\n{name} {kind}: N={N} D={D} M={2 * spec.n_freq}, from the PCA start")
        print_mixing(spec, data, state, args.ess_sweeps, args.ess_burn)
        return None
    one_sweep = lambda k, s, d: sw.sweep(k, s, spec, d, jnp.zeros(1))
    vsweep = chained(one_sweep, True)
    psweep = chained(one_sweep, False)
    start = time.perf_counter()
    batched = jax.block_until_ready(vsweep(jax.random.PRNGKey(0), state, data))
    compile_s = time.perf_counter() - start
    state = jax.tree_util.tree_map(lambda x: x[0], batched)
    for i in range(args.warm):
        state = jax.tree_util.tree_map(lambda x: x[0],
                                       vsweep(jax.random.PRNGKey(100 + i), state, data))
    jax.block_until_ready(state)
    info = {"n_proposals_X": float(state.n_proposals_X),
            "n_proposals_beta": float(state.n_proposals_beta)
            if np.isfinite(float(state.n_proposals_beta)) else 1.0,
            "accept_W": float(state.accept_W)}
    keys = lambda i: jax.random.PRNGKey(1000 + i)
    steps = make_steps(spec)
    floors = make_floors(spec, data, state, info)
    omega = None
    rows = []
    for step, f in steps.items():
        fn = chained(f, args.vmap)
        extra = ()
        if step == "beta" and spec.polya_gamma:
            extra = (omega,)
        if step == "beta+noise":
            extra = (products,)
        ms = median_ms(fn, lambda i: (keys(i), state, data) + extra, args.repeats)
        if step == "pg":
            omega = fn(keys(0), state, data)[0]
        if step == "W" and kind == "gaussian":
            products = jax.tree_util.tree_map(lambda x: x[0], fn(keys(0), state, data)[2])
        ffn, fargs = floors[floor_name(spec, step)]
        fl = median_ms(ffn, (lambda i: (keys(i),)) if fargs == "key" else (lambda i: fargs),
                       args.repeats)
        rows.append((step, ms, fl))
    whole_v = median_ms(vsweep, lambda i: (keys(i), state, data), args.repeats)
    whole_p = median_ms(psweep, lambda i: (keys(i), state, data), args.repeats)
    N, D = data.observed.shape
    print(f"\n{name} {kind}: N={N} D={D} M={2 * spec.n_freq}  compile {compile_s:.1f} s  "
          f"accept_W {info['accept_W']:.3f}  ellipse points/row {info['n_proposals_X']:.2f}"
          + (f"  /beta column {info['n_proposals_beta']:.2f}" if kind == "poisson" else ""))
    if spec.polya_gamma and kind != "multinomial":
        # the Pólya-gamma draws' cost depends on b per entry (polya_gamma_speed.py's regimes)
        b = np.asarray(sw._pg_params(spec, data, state.dispersion)[0])[
            np.asarray(data.observed) > 0]
        r = np.asarray(state.dispersion)
        print(f"  PG b per entry: {np.mean(b < 1):.1%} below 1 (the series with exact terms), "
              f"{np.mean((b == 1) | (b == 2)):.1%} exact b = 1 or 2, the rest series"
              + (f"; dispersion r median {np.median(r):.3g}, {np.mean(r < 1):.1%} of columns "
                 f"below 1" if kind == "negative_binomial" else ""))
    print(f"  {'step':>12} {'ms':>9} {'floor ms':>9} {'ratio':>7}")
    for step, ms, fl in rows:
        print(f"  {step:>12} {ms:9.2f} {fl:9.3f} {ms / fl:7.1f}")
    total = sum(ms for _, ms, _ in rows)
    # a step that runs below its floor (the trace, which now reuses the X step's values) needs
    # no more than its own time: the sweep's floor takes the smaller of the two per step
    floor_total = sum(min(ms, fl) for _, ms, fl in rows)
    print(f"  {'sum':>12} {total:9.2f} {floor_total:9.3f} {total / floor_total:7.1f}")
    print(f"  {'sweep vmap':>12} {whole_v:9.2f}   (one chain under vmap)")
    print(f"  {'sweep map':>12} {whole_p:9.2f}   (one chain under lax.map, the driver's "
          f"default)", flush=True)
    target = TARGETS_MS.get((name, kind))
    if target is not None:
        verdict = ("met" if whole_p <= target else
                   "not met; the steps' floors sum to more than the target, so no sweep that "
                   "does this sweep's work can meet it" if floor_total > target else
                   "not met; the floors leave room")
        print(f"  issue 14 target {target:.0f} ms per sweep: {verdict}")
    if args.beta_parts and kind in ("poisson", "negative_binomial") and not spec.polya_gamma:
        print_beta_parts(spec, data, state, args.repeats)
    if args.ess_sweeps > 0:
        print_mixing(spec, data, state, args.ess_sweeps, args.ess_burn)
    return rows, whole_v, whole_p


def print_beta_parts(spec, data, state, repeats: int) -> None:
    """``--beta-parts``: ms of each part of the elliptical-slice β step
    (:func:`gplvm.models.rflvm.weights_ess.sample_beta_ess`) on the profiled state: the
    working Gaussian, the three N × P × D products, the slice's set-up as a whole
    (:func:`~gplvm.models.rflvm.weights_ess.slice_inputs`: those two and the layout by
    column), the slice rounds (compacted, and over all columns in every round), and one
    evaluation of every column's log-target."""
    from gplvm.inference.mcmc import ess_init, ess_step
    from gplvm.models.rflvm import weights_ess as wess
    r = state.dispersion if spec.likelihood == "negative_binomial" else None
    Phi = design(state.X, state.W, spec.intercept)
    P = Phi.shape[1]
    key = jax.random.PRNGKey(3)
    args = (data, wess.BetaPrior(nb_prior_mean(spec, data, state.dispersion),
                                 data.beta_prior_prec), r)
    setup = jax.jit(lambda k, Phi, b: wess.slice_inputs(k, Phi, b, *args))
    inputs = setup(key, Phi, state.beta)

    def rounds(key, inputs, compacted=True):
        on = wess._column_ll_on(inputs.per_column, P)
        out, info = ess_step(key, ess_init(inputs.blocks, on(None)), on(None),
                             inputs.nu_blocks, log_lik_on=on if compacted else None)
        return out.position, info.n_proposals

    parts = {
        "whole step": (jax.jit(lambda k, Phi, b: wess.sample_beta_ess(k, Phi, b, *args)[0]),
                       (key, Phi, state.beta)),
        "slice set-up": (setup, (key, Phi, state.beta)),
        "  working Gaussian": (jax.jit(lambda Phi: wess.working_gaussian(Phi, *args)), (Phi,)),
        "  3 products N×P×D": (jax.jit(lambda Phi, B: Phi @ jnp.concatenate([B, B, B], axis=1)),
                               (Phi, state.beta)),
        "slice rounds": (jax.jit(rounds), (key, inputs)),
        "  (no compaction)": (jax.jit(partial(rounds, compacted=False)), (key, inputs)),
        "one log-target pass": (jax.jit(lambda blocks, pc: wess._column_ll_on(pc, P)(None)(
            blocks)), (inputs.blocks, inputs.per_column)),
    }
    print("  beta step, by part (ms):")
    for name, (fn, fn_args) in parts.items():
        print(f"  {name:>22} {median_ms(fn, lambda i: fn_args, repeats):9.2f}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="congress109,bridges,scurve")
    p.add_argument("--likelihoods", default=",".join(ALL_LIKELIHOODS))
    p.add_argument("--repeats", type=int, default=7, help="timed calls per step (median)")
    p.add_argument("--warm", type=int, default=10, help="sweeps before profiling")
    p.add_argument("--n-freq", type=int, default=50, help="M/2 (M = 100 in the paper)")
    p.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU")
    p.add_argument("--ess-sweeps", type=int, default=200,
                   help="sweeps for the acceptance and ESS of the kernel (0: skip)")
    p.add_argument("--ess-burn", type=int, default=0,
                   help="sweeps run and discarded before those (in the same scan)")
    p.add_argument("--nb-beta", default="polya_gamma", choices=("slice", "polya_gamma"),
                   help="the negative binomial's beta step (RFLVMSpec.nb_beta)")
    p.add_argument("--mixing-only", action="store_true",
                   help="skip the step timings: only the acceptance and ESS, from the start")
    p.add_argument("--vmap", action="store_true",
                   help="time the steps under vmap (the driver's form before issue 14)")
    p.add_argument("--beta-parts", action="store_true",
                   help="also time each part of the elliptical-slice beta step (Poisson, or "
                        "negative binomial with --nb-beta slice)")
    args = p.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    print(f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']} affinity={sorted(os.sched_getaffinity(0))} "
          f"jax={jax.__version__} load={os.getloadavg()}")
    print(f"times: median of {args.repeats} calls after one warm call (shared machine); steps "
          f"under {'vmap' if args.vmap else 'lax.map'} over one chain")
    for name in args.datasets.split(","):
        for kind in args.likelihoods.split(","):
            try:
                case = load(name, kind)
            except (FileNotFoundError, OSError) as err:
                print(f"\n{name}: not found ({err}); set GPLVM_DATA_DIR")
                break
            if case is not None:
                profile(name, kind, *case, args)


if __name__ == "__main__":
    main()
