r"""Metropolis–Hastings on the frequencies W by a preconditioned random walk (seed 000, eq. 22).

The conditional of one frequency given everything else is

.. math:: p(w_m \mid \cdot) \propto p(Y \mid X, W, \cdot)\; p(w_m),

with p(w_m) the frequency's DP component N(μ_{z_m}, Σ_{z_m}) under kernel learning, or the
fixed kernel's spectral density.  Seed 000 proposes w_m⋆ from p(w_m) itself; on real count
data the likelihood of one frequency is so much narrower than its prior that such proposals
were almost never accepted (0.08% on congress109 with a Poisson likelihood, none in 40
negative-binomial sweeps: issue 14), and the kernel did not learn.  Here each w_m, in turn,
takes one random-walk step scaled to the conditional's own width:

.. math:: w_m^\star = w_m + s\,L^{-\top}\varepsilon, \quad LL^\top = H_m = F_m + P_m,
          \quad s = 2.38/\sqrt Q,

P_m the prior's precision (the component's Σ⁻¹; −∇² log p at w = 0 for a fixed kernel) and
F_m the Fisher information of the likelihood in w_m (:func:`count_metrics`,
:func:`gaussian_metric`), and is accepted with probability

.. math:: \min\Big\{1, \frac{p(Y \mid w_m^\star, \cdot)\, p(w_m^\star)}
                           {p(Y \mid w_m, \cdot)\, p(w_m)}\Big\}

by the kernel of :mod:`gplvm.inference.mcmc`.  H_m is computed from quantities that do not
involve w_m, so the walk is symmetric (no proposal ratio), and how well H_m matches the
conditional affects the acceptance rate only, never exactness.  With β integrated out
(Gaussian) half the moves still propose a prior draw, which is accepted often enough there and
can jump between modes (:func:`update_frequencies_collapsed`).  A kernel without a
closed-form spectral density (``RationalQuadratic``) keeps seed 000's prior proposal, whose
proposal ratio cancels the prior ratio.

Frequency m owns the two columns (m, m + M/2) of Φ, so a proposal changes Φ by a rank-2 term
and every ratio is evaluated by an update, not from scratch:

* count likelihoods, β given: ψ⋆ = ψ + (φ⋆ − φ)β_{(m, m+M/2)}, O(ND) per proposal, plus
  one N × D curvature and product per ``METRIC_BLOCK`` frequencies for their F_m
  (:func:`_block_metrics`): the W pass costs about 1.3× seed 000's (CPU time, congress109
  size), for proposals that are accepted;
* Gaussian, β integrated out: the new columns' inner products with Φ, Φ⋆ and Y, formed for
  every proposal at once before the pass (O(NM² + NMD) in three products), and block
  (Schur-complement) updates of A⁻¹ = (ΦᵀΦ + I/s0)⁻¹, A⁻¹ΦᵀY and log|A| (O(M² + MD) per
  proposal) give the collapsed marginal of :mod:`.weights`, instead of a fresh O(M³ + M²D)
  factorisation per proposal.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.linalg import solve_triangular

from gplvm.inference.mcmc import MHState, mh_accept_reject
from gplvm.inference.mcmc._metropolis import gaussian_walk, optimal_walk_scale
from gplvm.models.rflvm.features import design, feature_pair, pair_index
from gplvm.models.rflvm.loglik import likelihood_object, total_log_lik
from gplvm.samplers.dp_mixture import propose_frequencies

Array = jax.Array

METRIC_BLOCK = 5
"""Frequencies whose walk metrics share one N × D curvature pass (count likelihoods)."""


class FrequencyPrior(NamedTuple):
    """p(w_m) for every m, as the W step needs it.

    Attributes:
        log_density: (m, w) ↦ log p(w_m = w) up to a constant of m; None when the kernel has
            no closed-form spectral density (then only prior draws can be proposed).
        precision: (M/2, Q, Q) P_m, the prior's curvature that enters H_m.
        draws: (M/2, Q) one independent draw from each p(w_m), for prior proposals.
        total: W ↦ log p(W) up to a constant, the prior of all frequencies at once, which the
            NUTS block and the joint scale move use: Σ_m log p(w_m) by default, or the DP
            components integrated out (:func:`gplvm.samplers._niw.niw_log_marginal`,
            ``RFLVMSpec.dp_components='integrated'``); None with ``log_density``.
    """

    log_density: Optional[Callable[[Array, Array], Array]]
    precision: Array
    draws: Array
    total: Optional[Callable[[Array], Array]] = None


def summed(log_density: Callable[[Array, Array], Array]) -> Callable[[Array], Array]:
    """W ↦ Σ_m log p(w_m) from (m, w) ↦ log p(w_m = w)."""
    return lambda W: jnp.sum(jax.vmap(log_density)(jnp.arange(W.shape[0]), W))


def frequency_prior(key: Array, dp, kernel, n_freq: int, Q: int, dtype) -> FrequencyPrior:
    """The DP components N(μ_{z_m}, Σ_{z_m}) (``dp`` not None), else the kernel's density."""
    if dp is not None:
        mean = dp.mu[dp.z]
        precision = jnp.linalg.inv(dp.Sigma)[dp.z]

        def log_density(m, w):
            diff = w - mean[m]
            return -0.5 * diff @ precision[m] @ diff

        return FrequencyPrior(log_density, precision, propose_frequencies(key, dp),
                              summed(log_density))
    draws = kernel.sample_frequencies(key, n_freq, Q).astype(dtype)
    zero = jnp.zeros((1, Q), dtype)
    try:
        kernel.log_spectral_density(zero)
    except NotImplementedError:
        return FrequencyPrior(None, jnp.zeros((n_freq, Q, Q), dtype), draws)
    log_p = lambda w: kernel.log_spectral_density(w[None])[0]
    # the curvature at the mode w = 0 of a symmetric spectral density (exact for the RBF)
    P0 = -jax.hessian(log_p)(zero[0])
    log_density = lambda m, w: log_p(w)
    return FrequencyPrior(log_density, jnp.broadcast_to(P0, (n_freq, Q, Q)), draws,
                          summed(log_density))


def _as_prior(prior, W: Array) -> FrequencyPrior:
    """A :class:`FrequencyPrior`; an (M/2, Q) array is taken as prior draws w⋆ to propose
    (seed 000's independence proposal, as for a kernel without a closed-form density)."""
    if isinstance(prior, FrequencyPrior):
        return prior
    return FrequencyPrior(None, jnp.zeros(W.shape + W.shape[-1:], W.dtype), jnp.asarray(prior))


class _Moves(NamedTuple):
    """The random numbers of one pass: logs of the accept uniforms (M/2,), walk innovations
    (M/2, Q) or None (prior proposals only), and which moves propose a prior draw (M/2,) or
    None (walks only)."""

    log_u: Array
    eps: Optional[Array]
    from_prior: Optional[Array]


def _random_numbers(key: Array, prior: FrequencyPrior, W: Array,
                    prior_fraction: float) -> _Moves:
    """Each move proposes a prior draw with probability ``prior_fraction``, else a walk step:
    a mixture of two kernels that each leave p(w_m | ·) invariant, chosen independently of the
    state, leaves it invariant too (Tierney 1994, §2.4)."""
    n_freq = W.shape[0]
    if prior.log_density is None or prior_fraction >= 1.0:
        # the uniforms straight from the key: the pass of seed 000, draw for draw
        log_u = jnp.log(jax.random.uniform(key, (n_freq,), dtype=W.dtype))
        return _Moves(log_u, None, jnp.ones(n_freq, bool))
    k_u, k_eps, k_mix = jax.random.split(key, 3)
    log_u = jnp.log(jax.random.uniform(k_u, (n_freq,), dtype=W.dtype))
    eps = jax.random.normal(k_eps, W.shape, W.dtype)
    if prior_fraction <= 0.0:
        return _Moves(log_u, eps, None)
    return _Moves(log_u, eps, jax.random.uniform(k_mix, (n_freq,)) < prior_fraction)


def _propose(prior: FrequencyPrior, moves: _Moves, m, w: Array, H: Array):
    """(w⋆, log p(w⋆) − log p(w)) for a walk step; (prior draw, 0) for a prior proposal, whose
    prior ratio cancels its proposal ratio.  Both proposals are otherwise symmetric: H does
    not depend on w_m."""
    zero = jnp.zeros((), w.dtype)
    if moves.eps is None:
        return prior.draws[m], zero
    w_walk = gaussian_walk(moves.eps[m], w, H, optimal_walk_scale(w.shape[0]))
    log_prior_ratio = prior.log_density(m, w_walk) - prior.log_density(m, w)
    if moves.from_prior is None:
        return w_walk, log_prior_ratio
    walk = ~moves.from_prior[m]
    return (jnp.where(walk, w_walk, prior.draws[m]), jnp.where(walk, log_prior_ratio, zero))


# --- count likelihoods, β given ---------------------------------------------------------------

def curvature(kind: str, Y: Array, psi: Array, trials: Array, dispersion: Array) -> Array:
    r"""−∂² log p(y | ψ)/∂ψ² per entry (N, D): the likelihood's Fisher weight in ψ.

    The likelihood's ``_fisher_weight`` (:mod:`gplvm.likelihoods`): Poisson e^ψ; binomial
    nσ(1 − σ); negative binomial (y + r)σ(1 − σ); multinomial the diagonal n p_j(1 − p_j) of
    its softmax Hessian (a proposal metric: any positive weight is exact).
    """
    ones = jnp.ones(psi.shape[-1], psi.dtype)
    return likelihood_object(kind, trials, ones, dispersion)._fisher_weight(Y, psi)


def count_metrics(X: Array, h: Array, beta_sin: Array, beta_cos: Array, n_freq: int) -> Array:
    r"""F_m = Σ_n c_nm x_n x_nᵀ for a few frequencies m at once (B, Q, Q): the phase-averaged
    Fisher information of w_m given β.

    Frequency m adds f_nj = (sin θ_n β_mj + cos θ_n β_m'j)/√(M/2), θ_n = x_nᵀw_m, to ψ_nj, so
    ∂f_nj/∂w_m = x_n (cos θ_n β_mj − sin θ_n β_m'j)/√(M/2), whose square averages over the
    phase θ_n to x_n x_nᵀ (β_mj² + β_m'j²)/M: c_nm = Σ_j h_nj (β_mj² + β_m'j²)/M, with h the
    likelihood's curvature (:func:`curvature`) and β_sin, β_cos the rows (B, D) of the B
    frequencies.
    """
    c = h @ (beta_sin**2 + beta_cos**2).T / (2 * n_freq)                  # (N, B)
    return jnp.einsum("nb,nq,nr->bqr", c, X, X)


class GivenBeta(NamedTuple):
    """What the count likelihoods' W step (:func:`update_frequencies_given_beta`) holds
    fixed besides X.

    Attributes:
        beta: (P, D) weights β.
        noise_var: (D,) σ_j² as the likelihood reads them (ones for the count likelihoods).
        dispersion: (D,) the negative binomial's r_j (ones for the other likelihoods).
        Phi: (N, P) the design [φ_W(X), 1] at the current W.
        psi: (N, D) Φβ, the linear predictor without the offset.

    ``Phi`` and ``psi`` are already formed by the sweep's weight update, so the pass does not
    recompute them; it rewrites both, column pair by column pair, as proposals are accepted.
    """

    beta: Array
    noise_var: Array
    dispersion: Array
    Phi: Array
    psi: Array


def _block_metrics(start, X: Array, kind: str, data, given: GivenBeta, n_freq: int,
                   block: int) -> Array:
    r""":func:`count_metrics` of frequencies start..start + ``block`` − 1 (fewer at the end),
    with the curvature at ψ₋B: ψ without the block's own terms.  ψ₋B does not change while the
    block's frequencies move, and none of them enters it, so each walk step in the block stays
    symmetric; one N × D curvature then serves ``block`` proposals.

    ``given`` holds β, r and the current Φ and ψ = Φβ (its ``noise_var`` is not read); ``data``
    the Y, offset, trials and observed mask of :class:`.spec.RFLVMData`."""
    beta, Phi = given.beta, given.Phi
    members = start + jnp.arange(block)
    valid = (members < n_freq)[:, None]
    members = jnp.minimum(members, n_freq - 1)
    beta_sin = jnp.where(valid, beta[members], 0.0)                      # (B, D)
    beta_cos = jnp.where(valid, beta[members + n_freq], 0.0)
    psi_out = given.psi - Phi[:, members] @ beta_sin - Phi[:, members + n_freq] @ beta_cos
    h = curvature(kind, data.Y, psi_out + data.offset, data.trials, given.dispersion)
    return count_metrics(X, h * data.observed, beta_sin, beta_cos, n_freq)


def update_frequencies_given_beta(key: Array, prior: FrequencyPrior, X: Array, W: Array,
                                  kind: str, data, given: GivenBeta,
                                  prior_fraction: float = 0.0):
    """One MH pass over the M/2 frequencies with β held fixed (count likelihoods).

    Args:
        prior: :func:`frequency_prior`, or (M/2, Q) prior draws to propose (seed 000).
        kind: the likelihood's name; data: the Y, offset, trials and observed mask of
            :class:`.spec.RFLVMData`.
        given: β, σ², r and the current Φ and Φβ (:class:`GivenBeta`).
        prior_fraction: share of the moves that propose a prior draw instead of a walk step.

    Frequencies share one curvature pass (:func:`_block_metrics`) in blocks of
    ``METRIC_BLOCK``.

    Returns:
        (W, number of accepted proposals).
    """
    block = METRIC_BLOCK
    n_freq, Q = W.shape
    beta = given.beta
    prior = _as_prior(prior, W)
    moves = _random_numbers(key, prior, W, prior_fraction)

    def ll(psi_):
        return total_log_lik(kind, data.Y, psi_ + data.offset, data.observed, data.trials,
                             given.noise_var, given.dispersion)

    def body(m, carry):
        (W, Phi, psi, ll_cur), F, n_acc = carry
        idx = pair_index(m, n_freq)
        H = prior.precision[m]
        if moves.eps is not None:
            F = lax.cond(m % block == 0, lambda: _block_metrics(
                m, X, kind, data, given._replace(Phi=Phi, psi=psi), n_freq, block),
                lambda: F)
            H = H + F[m % block]
        w_new, log_prior_ratio = _propose(prior, moves, m, W[m], H)
        new = feature_pair(X, w_new, n_freq)                      # (N, 2)
        diff, b = new - Phi[:, idx], beta[idx, :]

        def moved(psi):
            # ψ + (φ⋆ − φ)β_idx as two broadcast products, not a dot: it fuses into the
            # log-likelihood's sum, so a proposal never writes an N × D array; ψ itself is
            # rewritten only when the move is accepted (issue 14)
            return psi + diff[:, :1] * b[:1] + diff[:, 1:] * b[1:]

        ll_new = ll(moved(psi))
        current = MHState((W, Phi, psi, ll_cur), ll_cur)
        state, info = mh_accept_reject(
            moves.log_u[m], current,
            lambda: (W.at[m].set(w_new), Phi.at[:, idx].set(new), moved(psi), ll_new),
            ll_new + log_prior_ratio)
        return state.position, F, n_acc + info.accepted

    F0 = jnp.zeros((block, Q, Q), W.dtype)
    init = ((W, given.Phi, given.psi, ll(given.psi)), F0, jnp.zeros((), jnp.int32))
    (W, *_), _, n_acc = lax.fori_loop(0, n_freq, body, init)
    return W, n_acc


class _Collapsed(NamedTuple):
    """Running quantities of the collapsed pass: which frequencies hold their proposal, P = ΦᵀY,
    A⁻¹, U = A⁻¹P and log|A| (A = ΦᵀΦ + I/s0)."""

    moved: Array
    P: Array
    Ainv: Array
    U: Array
    logdet: Array


class _Proposals(NamedTuple):
    """The products of Φ⋆ (N, M), the design at every proposed frequency of a collapsed pass,
    made before the pass starts (each move changes only its own w_m, and its proposal depends
    only on w_m): G0 = ΦᵀΦ⋆ and G = Φ⋆ᵀΦ⋆ (M, M), and P = Φ⋆ᵀY (M, D)."""

    G0: Array
    G: Array
    P: Array


def _inv_logdet_2x2(A: Array):
    """Inverse and log-determinant of a symmetric positive-definite 2 × 2 matrix in closed
    form (no LAPACK call: see :func:`update_frequencies_collapsed`)."""
    det = A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0]
    inv = jnp.array([[A[1, 1], -A[0, 1]], [-A[1, 0], A[0, 0]]]) / det
    return inv, jnp.log(det)


def _block_terms(c: _Collapsed, idx: Array, props: _Proposals, s0: float):
    r"""Pieces of A, P after replacing the two columns ``idx`` of Φ by the proposal's.

    Write 1 for the other indices and 2 for ``idx``.  A₁₁ does not change, and its inverse
    follows from the current inverse: :math:`A_{11}^{-1} = (A^{-1})_{11} -
    (A^{-1})_{12}(A^{-1})_{22}^{-1}(A^{-1})_{21}` (kept as a full matrix with zero rows and
    columns at ``idx``).  With the new off-diagonal block a₁₂ and T = A₁₁⁻¹a₁₂, the Schur
    complement S = a₂₂ − a₁₂ᵀT gives

    * log|A'| = log|A₁₁| + log|S| and log|A₁₁| = log|A| + log|(A⁻¹)₂₂|;
    * p'ᵀA'⁻¹p' = p₁ᵀA₁₁⁻¹p₁ + rᵀS⁻¹r with r = p₂' − Tᵀp₁, for every column of P at once;

    all in O(M² + MD) instead of a fresh O(M³ + M²D) factorisation.  The current Φ's column j
    is the proposal's where frequency j has moved, so a₁₂ is read from G or G0.
    """
    M = c.Ainv.shape[0]
    B = c.Ainv[:, idx]                                          # (M, 2)
    C = B[idx, :]                                               # (2, 2) = (A⁻¹)₂₂
    C_inv, logdet_C = _inv_logdet_2x2(C)
    keep = jnp.ones(M, c.P.dtype).at[idx].set(0.0)              # indicator of set 1
    a12 = jnp.where(c.moved[:, None], props.G[:, idx], props.G0[:, idx]) * keep[:, None]
    a22 = props.G[idx][:, idx] + jnp.eye(2, dtype=c.P.dtype) / s0
    AinvA12 = c.Ainv @ a12
    T = AinvA12 - B @ (C_inv @ AinvA12[idx, :])                 # A₁₁⁻¹ a₁₂, zero at idx
    S = a22 - a12.T @ T
    p2 = props.P[idx, :]                                        # (2, D)
    p1 = c.P * keep[:, None]
    V = c.U - B @ c.P[idx, :]                                   # A⁻¹ p₁
    W1 = V - B @ (C_inv @ V[idx, :])                            # A₁₁⁻¹ p₁
    r = p2 - T.T @ p1
    S_inv, logdet_S = _inv_logdet_2x2(S)
    quad = jnp.sum(p1 * W1, axis=0) + jnp.sum(r * (S_inv @ r), axis=0)
    logdet = c.logdet + logdet_C + logdet_S
    return B, C_inv, T, S_inv, p2, W1, r, quad, logdet


def _accept(c: _Collapsed, idx, terms) -> _Collapsed:
    """A'⁻¹ = A₁₁⁻¹ + T̃S⁻¹T̃ᵀ with T̃ = T − E_idx, and A'⁻¹P' = A₁₁⁻¹p₁ − T̃S⁻¹r."""
    B, C_inv, T, S_inv, p2, W1, r, _, logdet = terms
    M = c.Ainv.shape[0]
    T_tilde = T - jnp.eye(M, dtype=T.dtype)[:, idx]
    Ainv = c.Ainv - B @ C_inv @ B.T + T_tilde @ S_inv @ T_tilde.T
    U = W1 - T_tilde @ (S_inv @ r)
    return _Collapsed(moved=c.moved.at[idx].set(True), P=c.P.at[idx, :].set(p2), Ainv=Ainv,
                      U=U, logdet=logdet)


def _all_proposals(prior: FrequencyPrior, moves: _Moves, W: Array, H: Array):
    """(W⋆, log p(w⋆_m) − log p(w_m) per m): :func:`_propose` for every m at once."""
    return jax.vmap(lambda m, w, H_m: _propose(prior, moves, m, w, H_m))(
        jnp.arange(W.shape[0]), W, H)


def gaussian_metric(XtX: Array, n_outputs: int, s0: float, n_freq: int) -> Array:
    r"""F = κ XᵀX with κ = D s0/(M/2): :func:`count_metrics` with h_nj = 1/σ_j² and β_mj², β_m'j²
    at their prior mean σ_j² s0 (the weights are integrated out of this step, so the metric
    cannot use their values; it does not depend on W either, so the walk is symmetric)."""
    return (n_outputs * s0 / n_freq) * XtX


def update_frequencies_collapsed(key: Array, prior: FrequencyPrior, X: Array, W: Array, Y: Array,
                                 noise_var: Array, s0: float, prior_fraction: float = 0.5):
    """One MH pass over the frequencies under the Gaussian marginal with β integrated out.

    The W-dependent part of the collapsed log-marginal (:mod:`.weights`) is
    −(D/2) log|A| + Σ_j ‖L⁻¹p_j‖²/(2σ_j²) = −(D/2) log|A| + Σ_j p_jᵀA⁻¹p_j/(2σ_j²); each
    proposal evaluates it by the block updates of :func:`_block_terms`.  A⁻¹ is formed afresh
    at the start of every pass, so rounding cannot accumulate across sweeps.

    Half the moves (``prior_fraction``) propose a prior draw, as seed 000 does: with β
    integrated out the marginal in w_m is wide enough that a fair share of them are accepted
    (7% on an S-curve, N = 500, D = 100), and they jump between the modes of a multimodal
    conditional, which a local walk cannot.

    Every proposal is made before the pass (move m changes w_m alone, and its proposal
    depends on w_m alone), so the products with Φ⋆ are three matrix products up front and the
    loop works on M × M and M × D quantities only.

    Returns:
        (W, number of accepted proposals, (ΦᵀΦ, ΦᵀY) at the new W), the products assembled
        from the pass's own for the σ² and β steps that follow (M × M selections, no new
        product).
    """
    n_freq = W.shape[0]
    D = Y.shape[1]
    prior = _as_prior(prior, W)
    moves = _random_numbers(key, prior, W, prior_fraction)
    F = gaussian_metric(X.T @ X, D, s0, n_freq)
    W_star, log_prior_ratio = _all_proposals(prior, moves, W, prior.precision + F)
    Phi = design(X, W, False)
    Phi_star = design(X, W_star, False)
    props = _Proposals(G0=Phi.T @ Phi_star, G=Phi_star.T @ Phi_star, P=Phi_star.T @ Y)
    P = Phi.T @ Y
    gram = Phi.T @ Phi
    # One Cholesky and one triangular solve, in sequence: jaxlib's CPU LAPACK kernels can
    # deadlock a 2-thread pool when two batched calls (chains under vmap) run at once.
    L = jnp.linalg.cholesky(gram + jnp.eye(Phi.shape[1], dtype=Phi.dtype) / s0)
    L_inv = solve_triangular(L, jnp.eye(L.shape[0], dtype=Phi.dtype), lower=True)
    Ainv = L_inv.T @ L_inv
    c0 = _Collapsed(moved=jnp.zeros(Phi.shape[1], bool), P=P, Ainv=Ainv, U=Ainv @ P,
                    logdet=2.0 * jnp.sum(jnp.log(jnp.diag(L))))

    def score(quad, logdet):
        return -0.5 * D * logdet + 0.5 * jnp.sum(quad / noise_var)

    def body(m, carry):
        (c, cur), n_acc = carry
        idx = pair_index(m, n_freq)
        terms = _block_terms(c, idx, props, s0)
        score_new = score(terms[7], terms[8])
        # the rank-2 update of A⁻¹ is formed only if the move is accepted
        state, info = mh_accept_reject(
            moves.log_u[m], MHState((c, cur), cur),
            lambda: (_accept(c, idx, terms), score_new),
            score_new + log_prior_ratio[m])
        return state.position, n_acc + info.accepted

    cur0 = score(jnp.sum(P * c0.U, axis=0), c0.logdet)
    init = ((c0, cur0), jnp.zeros((), jnp.int32))
    (c, _), n_acc = lax.fori_loop(0, n_freq, body, init)
    W = jnp.where(c.moved[:n_freq, None], W_star, W)
    # column j of the new Φ is Φ⋆_j where frequency j moved, else Φ_j
    a, b = c.moved[:, None], c.moved[None, :]
    gram = jnp.where(a & b, props.G, jnp.where(b, props.G0, jnp.where(a, props.G0.T, gram)))
    return W, n_acc, (gram, c.P)
