"""NumPyro NUTS on the RFLVM's Poisson (or negative binomial) block: the peer of
``rflvm_convergence.py`` (issue 30).  Runs in ``benchmarks/.venvs/numpyro`` (``_peer_venvs.py``),
never imports gplvm.

    python _numpyro_rflvm.py IN.npz OUT.npz

IN holds ``Y`` (N, J) counts, ``offset`` (N, 1), ``W0`` (C, M/2, Q) each chain's frequencies,
``beta_mean`` (P, J) and ``beta_prec`` (P,) β's prior (intercept row last, centred on the
column's log-mean as gplvm centres it), ``X0`` (C, N, Q) each chain's start, ``beta0`` (C, P, J),
and ``settings`` = [warm-up, samples, seed, w_sd, budget].  The model is gplvm's: X ~ N(0, I),
β_pj ~ N(mean_pj, 1/prec_p), y_nj ~ Poisson(exp(ψ_nj)), ψ = [√(2/M)·sin(XWᵀ), √(2/M)·cos(XWᵀ), 1]β
+ offset, and either W ~ N(0, w_sd² I) (w_sd > 0: the RBF kernel's spectral density, W
sampled as gplvm samples it) or W held at chain 0's W0 for every chain (w_sd = 0: the model of
issue 30's NumPyro row) — the parametrisation a user of a generic PPL would write (β centred),
NUTS with NumPyro's default window adaptation (diagonal mass), the chains one after the other.

The negative binomial, when IN also holds ``nb_prior`` = (a0, b0, g0), ``r0`` (C, J) and ``h0``
(C,) (each chain's dispersions and their prior's rate): gplvm's eq. 29 with its intercept prior,
h ~ Ga(b0, rate g0), r_j ~ Ga(a0, rate h), the intercept β_Pj ~ N(mean_Pj − log r_j, 1/prec_P)
(the prior on the log-mean c_j + log r_j, ``gplvm.models.rflvm.init.nb_prior_mean``), and
y_nj ~ NB(r_j, logits ψ_nj) (mean r_j e^ψ, ``NegativeBinomialLogits``); NumPyro samples log r
and log h.

OUT holds ``log_lik`` (C, S) (Σ log p(y | ψ) with log y! included, as gplvm's trace),
``X`` (C, S, N, Q), ``n_leapfrog`` (C, S), ``compile_s`` (process CPU seconds of a run of
2 + 2 iterations per chain: about the compilation) and ``cpu_s`` (those of the timed run less
``compile_s``, since every MCMC object compiles its kernel again).

With a budget (process CPU seconds, > 0) there is no separate compile run (``compile_s`` NaN,
``cpu_s`` the whole run's, compilation included): the warm-up runs whole, then the draws come in
chunks of ~1/20 of ``samples`` per chain, continuing each chain from where the last chunk left
it, until ``samples`` draws or the budget is spent, whichever first; S is the draws made.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from jax.scipy.special import gammaln  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402

jax.config.update("jax_enable_x64", True)


def design(X, W):
    XW = X @ W.T
    Phi = jnp.concatenate([jnp.sin(XW), jnp.cos(XW)], axis=-1) / jnp.sqrt(W.shape[0])
    return jnp.concatenate([Phi, jnp.ones((X.shape[0], 1))], axis=-1)


def model(Y, offset, W, beta_mean, beta_sd, N, Q, w_sd, nb=None):
    X = numpyro.sample("X", dist.Normal(0.0, 1.0).expand([N, Q]).to_event(2))
    if w_sd > 0:
        W = numpyro.sample("W", dist.Normal(0.0, w_sd).expand(list(W.shape)).to_event(2))
    r = None
    if nb is not None:
        a0, b0, g0 = nb
        h = numpyro.sample("h", dist.Gamma(b0, g0))
        r = numpyro.sample("r", dist.Gamma(a0, h).expand([Y.shape[1]]).to_event(1))
        beta_mean = beta_mean.at[-1].add(-jnp.log(r))
    beta = numpyro.sample("beta", dist.Normal(beta_mean, beta_sd[:, None]).to_event(2))
    psi = design(X, W) @ beta + offset
    numpyro.sample("Y", observation(psi, r), obs=Y)


def observation(psi, r=None):
    if r is None:
        return dist.Poisson(jnp.exp(psi)).to_event(2)
    return dist.NegativeBinomialLogits(r, psi).to_event(2)


def log_lik(Y, offset, W, X, beta, r=None):
    psi = design(X, W) @ beta + offset
    if r is not None:
        return observation(psi, r).log_prob(Y)
    return jnp.sum(Y * psi - jnp.exp(psi) - gammaln(Y + 1.0))


def run(d, n_warmup, n_samples, seed, w_sd):
    """All chains by one MCMC (``chain_method='sequential'``: one compiled kernel, the chains
    one after the other)."""
    n_chains = d["X0"].shape[0]
    kernel = NUTS(model, max_tree_depth=10)
    mcmc = MCMC(kernel, num_warmup=n_warmup, num_samples=n_samples, num_chains=n_chains,
                chain_method="sequential", progress_bar=False)
    W = d["W0"][0]
    args = (jnp.asarray(d["Y"]), jnp.asarray(d["offset"]), jnp.asarray(W),
            jnp.asarray(d["beta_mean"]), jnp.asarray(d["beta_prec"]) ** -0.5,
            d["Y"].shape[0], W.shape[1], w_sd,
            tuple(float(v) for v in d["nb_prior"]) if "nb_prior" in d else None)
    init = {"X": jnp.asarray(d["X0"]), "beta": jnp.asarray(d["beta0"])}
    if "nb_prior" in d:       # init_params are unconstrained values: log r, log h
        init.update(r=jnp.log(d["r0"]), h=jnp.log(d["h0"]))
    if w_sd > 0:
        init["W"] = jnp.asarray(d["W0"])
    mcmc.run(jax.random.PRNGKey(seed), *args, init_params=init, extra_fields=("num_steps",))
    return mcmc, args


def run_budgeted(d, n_warmup, n_samples, seed, w_sd, budget):
    """:func:`run`'s chains within ``budget`` CPU seconds of this process, counted from the
    call (module docstring): (draws, n_leapfrog, args)."""
    t0 = time.process_time()
    chunk = max(n_samples // 20, 1)
    mcmc, args = run(d, n_warmup, chunk, seed, w_sd)        # warm-up and the first chunk
    parts = [(mcmc.get_samples(group_by_chain=True),
              mcmc.get_extra_fields(group_by_chain=True)["num_steps"])]
    while chunk * len(parts) < n_samples and time.process_time() - t0 < budget:
        mcmc.post_warmup_state = mcmc.last_state
        mcmc.run(mcmc.post_warmup_state.rng_key, *args, extra_fields=("num_steps",))
        parts.append((mcmc.get_samples(group_by_chain=True),
                      mcmc.get_extra_fields(group_by_chain=True)["num_steps"]))
    draws = {k: jnp.concatenate([p[0][k] for p in parts], axis=1) for k in parts[0][0]}
    return draws, jnp.concatenate([p[1] for p in parts], axis=1), args


def main(path_in, path_out):
    d = dict(np.load(path_in))
    n_warmup, n_samples, seed = (int(v) for v in d["settings"][:3])
    w_sd, budget = float(d["settings"][3]), float(d["settings"][4])
    t0 = time.process_time()
    if budget > 0:
        draws, steps, args = run_budgeted(d, n_warmup, n_samples, seed, w_sd, budget)
        compile_s, cpu_s = float("nan"), time.process_time() - t0
    else:
        run(d, 2, 2, seed, w_sd)             # ~ the compilation (and 4 iterations per chain)
        compile_s = time.process_time() - t0
        t0 = time.process_time()
        mcmc, args = run(d, n_warmup, n_samples, seed, w_sd)
        cpu_s = time.process_time() - t0 - compile_s    # the timed run compiles again
        draws = mcmc.get_samples(group_by_chain=True)
        steps = mcmc.get_extra_fields(group_by_chain=True)["num_steps"]
    C, n_samples = d["X0"].shape[0], draws["X"].shape[1]
    Ws = draws["W"] if w_sd > 0 else jnp.broadcast_to(args[2], (C, n_samples) + args[2].shape)
    rs = draws["r"] if "r" in draws else jnp.zeros(draws["X"].shape[:2])     # (unused)
    ll = jax.vmap(jax.vmap(lambda x, w, b, r: log_lik(
        args[0], args[1], w, x, b, r if "r" in draws else None)))(draws["X"], Ws, draws["beta"], rs)
    np.savez(path_out, X=np.asarray(draws["X"]), log_lik=np.asarray(ll),
             n_leapfrog=np.asarray(steps), cpu_s=cpu_s, compile_s=compile_s)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
