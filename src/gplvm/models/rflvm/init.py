"""Preparing the data and the initial chain states of the RFLVM sampler: the prepared data
(:func:`prepare_data`), the initial latents (:func:`initial_latents`), the inducing times of
the dynamic prior (:func:`inducing_times`), the chains' starting states
(:func:`initial_states`) and the per-chain copies of the data (:func:`per_chain`)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import gammaln

from gplvm._config import float_dtype
from gplvm._pytree import to_device
from gplvm.inference.mcmc._block import Block
from gplvm.likelihoods import LIKELIHOODS, likelihood_class
from gplvm.models.rflvm.dispersion import crt_layout
from gplvm.models.rflvm.joint import init_tuning
from gplvm.models.rflvm.spec import RFLVMData, RFLVMSpec, RFLVMState
from gplvm.samplers.dp_mixture import default_niw_prior, dp_init

Array = jax.Array


def intercept_centre(kind: str, Y: np.ndarray, offset: np.ndarray, trials: np.ndarray
                     ) -> np.ndarray:
    """Empirical centre of each column's intercept prior: the link of the column's mean rate
    (the likelihood's :meth:`~gplvm.likelihoods.AbstractLikelihood.intercept_centre`).

    Raw counts (e.g. bridge traffic, 151 to 8873 a day) sit many prior standard deviations away
    from an N(0, 1) intercept; centring the prior at the column's empirical log-mean (logit of
    the mean proportion for the logistic family) puts ψ on the data's scale from the first
    sweep.  The prior variance around that centre is ``RFLVMSpec.intercept_prior_var``.
    Negative binomial: the centre is that of the log-mean c_j + log r_j (ψ = log(mean / r)
    under the logit link), so the prior says nothing about r; see :func:`nb_prior_mean`.
    """
    return likelihood_class(kind).intercept_centre(Y, offset, trials)


def prepare_data(spec: RFLVMSpec, Y: np.ndarray, offset, trials, kernel, times) -> RFLVMData:
    """NaN-free device arrays for the sampler (``Y`` already validated)."""
    N, J = Y.shape
    D = spec.n_outputs
    obs = ~np.isnan(Y)
    offset = np.zeros((N, 1)) if offset is None else np.asarray(offset, float).reshape(N, 1)
    if spec.family.row_density:       # a row is observed as a whole; trials: its total
        row_obs = obs.all(1, keepdims=True)
        observed = np.broadcast_to(row_obs, (N, D)).astype(float)
        trials_arr = np.broadcast_to(np.where(row_obs, np.nansum(Y, 1, keepdims=True), 1.0),
                                     (N, D)).copy()
    else:
        observed = obs.astype(float)
        trials_arr = np.broadcast_to(np.asarray(1.0 if trials is None else trials, float),
                                     (N, D)).copy()
    P = spec.n_weights
    mean = np.zeros((P, D))
    prec = np.full(P, 1.0 / spec.beta_prior_var)
    if spec.intercept:
        mean[-1] = intercept_centre(spec.likelihood, Y, offset, trials_arr)
        prec[-1] = 1.0 / spec.intercept_prior_var
    t = np.zeros(N) if times is None else np.asarray(times, float)
    return RFLVMData(**to_device(dict(Y=np.where(obs, Y, 0.0), observed=observed, offset=offset,
                                      trials=trials_arr, beta_prior_mean=mean,
                                      beta_prior_prec=prec, time=t)),
                     kernel=kernel, **count_layouts(spec.likelihood, Y, obs))


def layout_fields(kind: str) -> tuple:
    """The fields of :class:`.spec.RFLVMData` that :func:`count_layouts` fills for the
    likelihood registered as ``kind`` (its ``count_layouts``; () for a name not registered)."""
    cls = LIKELIHOODS.get(kind)
    return tuple(cls.count_layouts) if cls is not None else ()


def count_layouts(kind: str, Y: np.ndarray, observed: np.ndarray) -> dict:
    """The fields of :class:`.spec.RFLVMData` laid out once from the counts (host NumPy in,
    device arrays out): ``nonzero``, ``customers`` and ``log_factorial`` (None where the
    likelihood has no use for them).  ``Y`` may hold anything where ``observed`` is False."""
    layouts = dict(nonzero=None, customers=None, log_factorial=None)
    fields = likelihood_class(kind).count_layouts
    if not fields:
        return layouts
    Y = np.asarray(Y, float)
    rows, cols = np.nonzero(observed & (np.where(observed, Y, 0.0) > 0))
    y = Y[rows, cols]
    layouts.update(nonzero=to_device((y, cols.astype(np.int32))),
                   log_factorial=to_device(np.sum(gammaln(y + 1.0))))
    if "customers" in fields:
        layouts["customers"] = crt_layout(y, cols)
    return layouts


def nb_prior_mean(spec: RFLVMSpec, data: RFLVMData, dispersion: Array) -> Array:
    """β's prior mean given r: the negative binomial's intercepts c_j = m_j − log r_j.

    The prior is put on the log-mean m_j = c_j + log r_j, m_j ~ N(log ȳ_j, v), independent
    of r_j ~ Ga(a0, h); given r_j that is c_j ~ N(log ȳ_j − log r_j, v).  A prior centred on
    c_j itself would be an informative prior on r_j (the data fix c_j + log r_j).
    """
    if not spec.dispersed or not spec.intercept:
        return data.beta_prior_mean
    return data.beta_prior_mean.at[-1].add(-jnp.log(dispersion))


def init_state(key: Array, spec: RFLVMSpec, data: RFLVMData, X0: Array, jitter: float,
               n_clusters: int) -> RFLVMState:
    """One chain's start: X0 plus N(0, jitter²) noise, W from the kernel's spectral density."""
    k_x, k_w, k_dp = jax.random.split(key, 3)
    N, Q = X0.shape
    X = X0 + jitter * jax.random.normal(k_x, X0.shape, X0.dtype)
    W = data.kernel.sample_frequencies(k_w, spec.n_freq, Q)
    # the DP's slots start at their posteriors' centres, not at draws: the start compiles to a
    # small program (issue 30, item 4), and the first sweep's DP update draws them
    dp = (dp_init(k_dp, W, default_niw_prior(Q), n_clusters=n_clusters, draw_params=False)
          if spec.learn_kernel else None)
    D = spec.n_outputs
    dtype = X.dtype
    # Strong dtypes throughout (jnp.full of a Python float is weakly typed): the state after a
    # sweep must have the types of the state before it, or a jitted loop compiles twice.
    r0 = jnp.full(D, spec.initial_dispersion if spec.dispersed else 1.0, dtype)
    span = jnp.maximum(jnp.max(data.time) - jnp.min(data.time), 1e-12)
    noise_var = jnp.full(D, 0.1 if spec.collapsed else 1.0, dtype)
    return RFLVMState(
        X=X, W=W, beta=nb_prior_mean(spec, data, r0), noise_var=noise_var,
        dispersion=r0, dispersion_rate=jnp.ones(()), dp=dp, Y_fill=data.Y,
        time_params=jnp.array([jnp.log(0.1 * span), 0.0]), log_lik=jnp.zeros(()),
        accept_W=jnp.full((), jnp.nan if spec.frequencies == "fixed" else 0.0, dtype),
        n_sweeps=jnp.zeros((), jnp.int32),
        n_proposals_X=jnp.full((), jnp.nan, dtype), n_proposals_beta=jnp.full((), jnp.nan, dtype),
        tuning=init_tuning(spec, data, dtype) if spec.sampler == "nuts" else None)


def initial_states(keys: Array, spec: RFLVMSpec, data: RFLVMData, X0: Array, jitter: float,
                   n_clusters: int) -> RFLVMState:
    """Every chain's start (:func:`init_state` per key, a leading chain axis) as ONE compiled
    program, kept across processes like the sampler's block (:mod:`gplvm.inference.mcmc.
    _exported`).  Run op by op, the start (NIW and DP draws, frequencies) dispatched ~170 small
    programs, each lowered and read from the persistent cache in every new process: about a
    second of a second fit's start-up (issue 14, ``benchmarks/compile_cache.py``)."""
    # arrays with strong dtypes throughout (a kernel's parameters may be Python floats)
    args = to_device((keys, data, X0))
    program, _ = _initial_states_block(spec, float(jitter), int(n_clusters)).compile(*args)
    return program(*args)


@functools.lru_cache(maxsize=8)
def _initial_states_block(spec: RFLVMSpec, jitter: float, n_clusters: int) -> Block:
    def states(keys, data, X0):
        out = jax.vmap(lambda k: init_state(k, spec, data, X0, jitter, n_clusters))(keys)
        if spec.frequencies == "fixed":          # chain 0's W for every chain
            out = out._replace(W=jnp.broadcast_to(out.W[0], out.W.shape))
        return out
    return Block(jax.jit(states), export_key=spec.export_key("start "),
                 settings=(jitter, n_clusters))


def initial_latents(Ys: np.ndarray, kind: str, key: Array, n_components: int, init: str,
                    offset=None) -> Array:
    """(N, Q) initial latents: ``init='random'`` N(0, I) draws; ``'pca'`` (the paper's code)
    the first Q principal components of the standardised data (NaN filled by column means;
    count likelihoods: of log(1 + counts per unit of exposure), variance-stabilised), scaled to
    unit variance, the N(0, I) prior's scale."""
    Q = int(n_components)
    if init == "random":
        return jax.random.normal(key, (Ys.shape[0], Q))
    Z = np.where(np.isnan(Ys), np.nanmean(Ys, axis=0), Ys)
    if likelihood_class(kind).is_count:
        if offset is not None:               # counts per unit of exposure exp(offset)
            Z = Z * np.exp(-(np.asarray(offset, float) - np.mean(offset))).reshape(-1, 1)
        Z = np.log1p(np.maximum(Z, 0.0))     # PCA of log counts (variance-stabilised)
    Z = Z - Z.mean(0)
    U, s, _ = np.linalg.svd(Z, full_matrices=False)
    X0 = U[:, :Q] * s[:Q]
    X0 = X0 / np.maximum(X0.std(0), 1e-12)   # unit variance, the N(0, I) prior's scale
    return to_device(X0)


def inducing_times(times, n: int) -> Array:
    """The dynamic prior's inducing times: ``n`` (at most the distinct times) evenly spaced
    over the range of ``times``; a placeholder (1,) zero for the iid prior (``times=None``)."""
    if times is None:
        return to_device(np.zeros(1, float_dtype()))
    t = np.asarray(times, float)
    return jnp.linspace(t.min(), t.max(), int(min(n, len(np.unique(t)))))


def per_chain(tree, n_chains: int):
    """Copies of ``tree``'s arrays along a leading chain axis, made on the host (on the device
    each leaf shape would compile a broadcast, again in every new process)."""
    return jax.tree_util.tree_map(
        lambda x: np.broadcast_to(np.asarray(to_device(x)), (n_chains,) + np.shape(x)), tree)
