"""The DP-GP-LVM bound (seed 001 §A, §D) against independent references.

* Data term: with one atom and every column assigned to it, the Bayesian GPLVM's bound; with two
  atoms and hard assignments, the sum of two Bayesian GPLVM bounds on the column subsets (q(X)'s
  KL counted once).  Both references are :func:`bound_and_parts`, the Bayesian GPLVM's own
  bound, built on the same parameters.
* Gradients of the whole bound against central finite differences.
* Each DP term (eqs. 42–47) against a Monte Carlo estimate of the expectation that defines it,
  from NumPy/SciPy draws of Beta, Gamma and categorical variables (tolerance: 5 Monte Carlo
  standard errors), and the entropies also against scipy.stats' closed forms.
* The coordinate updates of φ, (a, b), (w1, w2) are stationary points of the bound (zero
  gradient, the simplex constraint on φ through its Lagrangian) and never lower it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from gplvm.expectations import Analytic
from gplvm.kernels import RBF
from gplvm.models.gplvm_family.variants.dp import atoms, dp
from gplvm.models.gplvm_family.bound import Problem, bound_and_parts_jit
from gplvm.models.gplvm_family.latent import IidLatent
from gplvm.models.gplvm_family.route import DenseRoute
from gplvm.objectives import collapsed
from gplvm.transforms import inverse_softplus

N, D, Q, M = 18, 6, 2, 5


def _data(missing=True, seed=0):
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(N, D))
    if missing:
        Y[3, 1] = Y[7, 4] = np.nan
    return Y


def _problem(Y):
    kernel = RBF(lengthscale=jnp.ones(Q), variance=1.0)
    return Problem(jnp.asarray(np.nan_to_num(Y)), collapsed.group_columns(Y), IidLatent(), kernel,
                   Analytic(), DenseRoute(), 0.0)


def _shared(seed=1):
    rng = np.random.default_rng(seed)
    return {"Z": jnp.asarray(rng.normal(size=(M, Q))),
            "X_mean": jnp.asarray(rng.normal(size=(N, Q))),
            "X_var": inverse_softplus(jnp.asarray(rng.uniform(0.05, 0.5, (N, Q))))}


def _atom(ell, var, noise):
    return (RBF(lengthscale=jnp.asarray(ell), variance=var).unconstrained(),
            inverse_softplus(jnp.asarray(noise)))


def _bgplvm_bound(shared, kernel_u, noise_u, problem):
    u = dict(shared, kernel=kernel_u, noise_var=noise_u)
    return float(bound_and_parts_jit(u, problem)[0])


def test_one_atom_equals_the_bayesian_gplvm_bound():
    Y = _data(missing=True)
    problem, shared = _problem(Y), _shared()
    kernel_u, noise_u = _atom([0.8, 1.7], 1.3, 0.2)
    reference = _bgplvm_bound(shared, kernel_u, noise_u, problem)
    u = dict(shared, kernel=atoms.stack_atoms([kernel_u]), noise_var=noise_u[None])
    terms = atoms.atom_terms_jit(u, problem, jnp.ones((D, 1)), atoms.AtomPrior())
    ours = float(jnp.sum(terms.values) - terms.kl)
    assert abs(ours - reference) <= 1e-9 * abs(reference)


def test_two_atoms_with_hard_assignments_sum_two_bayesian_gplvm_bounds():
    Y = _data(missing=True)
    problem, shared = _problem(Y), _shared()
    first, second = _atom([0.8, 1.7], 1.3, 0.2), _atom([2.5, 0.6], 0.7, 0.05)
    cols = [np.array([0, 2, 3]), np.array([1, 4, 5])]
    references = []
    for (kernel_u, noise_u), c in zip((first, second), cols):
        sub = _problem(Y[:, c])
        references.append(_bgplvm_bound(shared, kernel_u, noise_u, sub))
    phi = np.zeros((D, 2))
    phi[cols[0], 0] = phi[cols[1], 1] = 1.0
    u = dict(shared, kernel=atoms.stack_atoms([first[0], second[0]]),
             noise_var=jnp.stack([first[1], second[1]]))
    terms = atoms.atom_terms_jit(u, problem, jnp.asarray(phi), atoms.AtomPrior())
    kl = float(terms.kl)
    ours = float(jnp.sum(terms.values)) - kl
    reference = sum(references) + kl          # each subset bound subtracted the KL once
    assert abs(ours - reference) <= 1e-9 * abs(reference)
    # per atom as well: Σ_{d ∈ c_t} F_d(θ_t) is the subset bound's data term
    for t in range(2):
        assert abs(float(terms.values[t]) - (references[t] + kl)) <= 1e-9 * abs(references[t])


def _random_state(T=4, seed=3):
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(T, 0.7), size=D)
    return dp.DPState(jnp.asarray(phi), jnp.asarray(rng.uniform(0.5, 4.0, T - 1)),
                      jnp.asarray(rng.uniform(0.5, 4.0, T - 1)), jnp.asarray(2.7),
                      jnp.asarray(1.6))


def _full_problem(T=3):
    Y = _data(missing=True)
    problem, shared = _problem(Y), _shared()
    rng = np.random.default_rng(5)
    pairs = [_atom(rng.uniform(0.5, 2.0, Q), rng.uniform(0.5, 2.0), rng.uniform(0.05, 0.5))
             for _ in range(T)]
    u = dict(shared, kernel=atoms.stack_atoms([p[0] for p in pairs]),
             noise_var=jnp.stack([p[1] for p in pairs]))
    return u, problem


def test_gradient_of_the_bound_matches_finite_differences():
    u, problem = _full_problem(T=3)
    state = _random_state(T=3)
    prior, dp_prior = atoms.AtomPrior(1.5, 1.0, 2.0), dp.DPPrior(2.0, 0.5)

    f = jax.jit(lambda p: atoms.elbo(p, problem, state, prior, dp_prior))
    grad = jax.jit(jax.grad(f))(u)
    leaves, tree = jax.tree_util.tree_flatten(u)
    rng = np.random.default_rng(7)
    for _ in range(4):
        direction = [jnp.asarray(rng.normal(size=np.shape(x))) for x in leaves]
        step = jax.tree_util.tree_unflatten(tree, direction)
        h = 1e-5
        plus = jax.tree_util.tree_map(lambda x, d: x + h * d, u, step)
        minus = jax.tree_util.tree_map(lambda x, d: x - h * d, u, step)
        fd = (float(f(plus)) - float(f(minus))) / (2 * h)
        analytic = sum(float(jnp.vdot(g, d)) for g, d in
                       zip(jax.tree_util.tree_leaves(grad), direction))
        assert abs(fd - analytic) <= 1e-5 * max(1.0, abs(analytic))


# ------------------------------------------------------------------ DP terms vs Monte Carlo
S = 200_000


def _draws(state, seed=11):
    rng = np.random.default_rng(seed)
    a, b = np.asarray(state.a), np.asarray(state.b)
    v = rng.beta(a, b, size=(S, len(a)))
    alpha = rng.gamma(float(state.w1), 1.0 / float(state.w2), size=S)
    return rng, v, alpha


def _check_mc(samples, exact):
    se = np.std(samples) / np.sqrt(len(samples))
    assert abs(np.mean(samples) - float(exact)) <= 5 * se + 1e-12


def test_expected_log_p_z_against_monte_carlo():
    state = _random_state()
    rng, v, _ = _draws(state)
    T = state.phi.shape[1]
    v_full = np.concatenate([v, np.ones((S, 1))], axis=1)           # v_T = 1
    log_pi = np.log(v_full) + np.concatenate(
        [np.zeros((S, 1)), np.cumsum(np.log1p(-v_full[:, :-1]), axis=1)], axis=1)
    phi = np.asarray(state.phi)
    u = rng.random((S, D, 1))
    z = np.minimum((u > np.cumsum(phi, axis=1)[None]).sum(-1), T - 1)   # (S, D) categorical draws
    samples = np.take_along_axis(log_pi, z, axis=1).sum(1)
    _check_mc(samples, dp.expected_log_p_z(state))


def test_expected_log_p_v_against_monte_carlo():
    state = _random_state()
    _, v, alpha = _draws(state)
    samples = stats.beta.logpdf(v, 1.0, alpha[:, None]).sum(1)     # T − 1 sticks only
    _check_mc(samples, dp.expected_log_p_v(state))


def test_expected_log_p_alpha_against_monte_carlo():
    state, prior = _random_state(), dp.DPPrior(2.0, 0.5)
    _, _, alpha = _draws(state)
    samples = stats.gamma.logpdf(alpha, prior.s1, scale=1.0 / prior.s2)
    _check_mc(samples, dp.expected_log_p_alpha(state, prior))


def test_entropy_of_v_against_monte_carlo_and_scipy():
    state = _random_state()
    _, v, _ = _draws(state)
    a, b = np.asarray(state.a), np.asarray(state.b)
    _check_mc(-stats.beta.logpdf(v, a, b).sum(1), dp.entropy_v(state))
    np.testing.assert_allclose(float(dp.entropy_v(state)), stats.beta.entropy(a, b).sum(),
                               rtol=1e-10)


def test_entropy_of_z_against_monte_carlo():
    state = _random_state()
    rng = np.random.default_rng(13)
    phi = np.asarray(state.phi)
    z = np.stack([rng.choice(phi.shape[1], size=S, p=p) for p in phi], axis=1)   # (S, D)
    samples = -np.log(phi[np.arange(D), z]).sum(1)
    _check_mc(samples, dp.entropy_z(state))


def test_entropy_of_alpha_against_monte_carlo_and_scipy():
    state = _random_state()
    _, _, alpha = _draws(state)
    w1, w2 = float(state.w1), float(state.w2)
    _check_mc(-stats.gamma.logpdf(alpha, w1, scale=1.0 / w2), dp.entropy_alpha(state))
    np.testing.assert_allclose(float(dp.entropy_alpha(state)),
                               stats.gamma.entropy(w1, scale=1.0 / w2), rtol=1e-10)


# ------------------------------------------------------------------ coordinate updates
def _dp_bound(state, prior, F):
    """The bound as a function of the DP parameters: Σ_t Σ_d φ_dt F_dt + DP terms."""
    return jnp.sum(state.phi * F) + dp.dp_terms(state, prior)


def test_coordinate_updates_are_stationary_points_and_never_lower_the_bound():
    rng = np.random.default_rng(17)
    state, prior = _random_state(T=5), dp.DPPrior(2.0, 0.5)
    F = jnp.asarray(rng.normal(scale=3.0, size=(D, 5)))
    before = float(_dp_bound(state, prior, F))
    s1 = dp.update_phi(F, state)
    s2 = dp.update_v(s1)
    s3 = dp.update_alpha(s2, prior)
    values = [before] + [float(_dp_bound(s, prior, F)) for s in (s1, s2, s3)]
    assert np.all(np.diff(values) >= -1e-10)
    g_phi, g_ab, g_w = _stationarity_gradients(s1, s2, s3, prior, F)
    # φ: ∂L/∂φ_dt = λ_d for every t (the Lagrangian of Σ_t φ_dt = 1)
    np.testing.assert_allclose(g_phi - g_phi[:, :1], 0.0, atol=1e-9)
    # (a, b): zero gradient given E[α]; (w1, w2): zero gradient given q(V)
    np.testing.assert_allclose(g_ab, 0.0, atol=1e-9)
    np.testing.assert_allclose(g_w, 0.0, atol=1e-9)


@jax.jit
def _stationarity_gradients(s1, s2, s3, prior, F):
    """∂L/∂φ at s1, ∂L/∂(a, b) at s2, ∂L/∂(w1, w2) at s3 (one compiled program)."""
    g_phi = jax.grad(lambda p: _dp_bound(s1._replace(phi=p), prior, F))(s1.phi)
    g_ab = jax.grad(lambda ab: _dp_bound(s2._replace(a=ab[0], b=ab[1]), prior, F))(
        jnp.stack([s2.a, s2.b]))
    g_w = jax.grad(lambda w: _dp_bound(s3._replace(w1=w[0], w2=w[1]), prior, F))(
        jnp.stack([s3.w1, s3.w2]))
    return g_phi, g_ab, g_w
