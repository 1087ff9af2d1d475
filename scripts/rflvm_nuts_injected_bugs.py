"""Inject bugs into the RFLVM's NUTS block and show that the Geweke test catches each (issue 30).

    .venv/bin/python scripts/rflvm_nuts_injected_bugs.py [--bugs none,no_x_prior,...]
        [--kind poisson|gaussian|negative_binomial|...] [--seed 14]

Runs the whole-sweep Geweke test of tests/models/rflvm/test_rflvm_geweke.py (same simulators, sizes and
critical value) on ``sampler='nuts'`` with one bug monkeypatched into
:mod:`gplvm.models.rflvm.joint` at a time, and prints max |z| beside the critical value:

* ``none``: the unmodified block (should pass);
* ``no_x_prior``: the N(0, I) prior of X left out of the log-density;
* ``no_w_prior``: the frequencies' prior left out of the log-density (W is in the position);
* ``beta_prior_scale``: the whitened weights scaled by 1.2 (a wrong prior variance of β);
* ``tempered``: the log-density multiplied by 0.8 (a target that is not the posterior);
* ``scale_no_jacobian``: the joint scale move (:mod:`gplvm.models.rflvm.scale`) without
  the Jacobian c^{NQ − (M/2)Q} in its acceptance ratio;
* ``gauge_no_jacobian``: (X, W) modulo rotations (:mod:`gplvm.models.rflvm.gauge`) without
  the Jacobian ∏ l_ii^{Q−i+1} in the block's density;
* ``gauge_no_rotation``: the canonical point kept, no Haar rotation after the transition;
* ``components_not_redrawn`` (``--kind poisson-dp-integrated``): the DP components not drawn
  afresh after a block that had them integrated out;
* ``niw_wrong_base``: the block's integrated prior with Ψ0 = 2I in place of the NIW base's I
  (a wrong prior term in the marginal);
* ``dispersion_rate_doubled`` (``--kind negative_binomial``): the block's Ga(a0, rate h) prior of
  the dispersions read with rate 2h (a wrong prior term on log r);
* ``dp_prior_sharpened`` (``--kind poisson-dp``, with NUTS or ``--sampler gibbs``): every
  frequency's DP component density read as its 1.5th power (precisions × 1.5) where the
  sweep's steps evaluate it (:func:`gplvm.models.rflvm.sweep.prior_W`: W's Metropolis
  ratio, and the NUTS block's prior of W), while the proposals from the prior stay right.

``--q 2 --steps 2000 --kind poisson-dp-integrated --seed 31`` and ``--q 2 --steps 1500 --kind
poisson-dp --sampler gibbs --seed 32`` are the test's cases with two latent dimensions, where
Q = 1's scalars and signs become the inverse-Wishart, the gauge's triangular Jacobian and the
Haar rotation of their general form.
``--kind negative_binomial|bernoulli|binomial|multinomial`` are the test's fixed-kernel NUTS
cases of the other likelihoods (seeds 21–24 there).  ``--sampler gibbs`` runs the Gibbs sweep
instead (the test's ``poisson-dp`` case: ``--kind poisson-dp --sampler gibbs --seed 25``); the
bugs in the NUTS block's density then do not reach the sweep.

A wrong gradient is not in the list on purpose: the leapfrog map of any potential is
volume-preserving and reversible and the acceptance step uses the true log-density, so a
wrong gradient costs acceptance, not correctness; no invariance test can see it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))   # its helpers
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "models" / "rflvm"))

import test_rflvm_geweke as G  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import gplvm.models.rflvm.gauge as U  # noqa: E402
import gplvm.models.rflvm.joint as J  # noqa: E402
import gplvm.models.rflvm.sweep as S  # noqa: E402
from gplvm.models.rflvm.frequencies import summed  # noqa: E402

ORIGINAL = (J.log_density, J.from_position, S.scale_moves, U.log_jacobian, U.rotate,
            S.sample_cluster_params, S.niw_log_marginal, S.prior_W)


def _scale_moves_without_jacobian(key, X, W, log_prior_W):
    """:func:`gplvm.models.rflvm.scale.scale_moves` with the Jacobian left out."""
    def log_target(X, W):
        return -0.5 * jnp.sum(X**2) + log_prior_W(W)

    for step, k in zip((0.1, 0.03, 0.01), jax.random.split(key, 3)):
        k_c, k_u = jax.random.split(k)
        log_c = step * jax.random.normal(k_c, (), X.dtype)
        X_new, W_new = X * jnp.exp(log_c), W * jnp.exp(-log_c)
        accept = (jnp.log(jax.random.uniform(k_u, (), X.dtype))
                  < log_target(X_new, W_new) - log_target(X, W))
        X, W = jnp.where(accept, X_new, X), jnp.where(accept, W_new, W)
    return X, W, jnp.zeros((), jnp.int32)


def inject(bug: str) -> None:
    (J.log_density, J.from_position, S.scale_moves, U.log_jacobian, U.rotate,
     S.sample_cluster_params, S.niw_log_marginal, S.prior_W) = ORIGINAL
    log_density, from_position = ORIGINAL[:2]
    if bug == "no_x_prior":
        def patched(spec, data, W, noise_var, rate, Y=None, log_prior_W=None, centre=None):
            f = log_density(spec, data, W, noise_var, rate, Y, log_prior_W, centre)
            n = data.Y.shape[0] * spec.n_components
            return lambda p: f(p) + 0.5 * (p[:n] ** 2).sum()
        J.log_density = patched
    elif bug == "no_w_prior":
        def patched(spec, data, W, noise_var, rate, Y=None, log_prior_W=None, centre=None):
            return log_density(spec, data, W, noise_var, rate, Y,
                               lambda W_pos: jnp.zeros((), W_pos.dtype), centre)
        J.log_density = patched
    elif bug == "beta_prior_scale":
        def patched_from(spec, data, p, W_given=None, centre=None):
            X, W, beta, log_r = from_position(spec, data, p, W_given, centre)
            return X, W, None if beta is None else beta.at[:-1].multiply(1.2), log_r
        J.from_position = patched_from
    elif bug == "tempered":
        def patched(spec, data, W, noise_var, rate, Y=None, log_prior_W=None, centre=None):
            f = log_density(spec, data, W, noise_var, rate, Y, log_prior_W, centre)
            return lambda p: 0.8 * f(p)
        J.log_density = patched
    elif bug == "scale_no_jacobian":
        S.scale_moves = _scale_moves_without_jacobian
    elif bug == "gauge_no_jacobian":
        U.log_jacobian = lambda W: jnp.zeros((), W.dtype)
    elif bug == "gauge_no_rotation":
        U.rotate = lambda key, X, W: (X, W)
    elif bug == "components_not_redrawn":
        S.sample_cluster_params = lambda key, W, dp, prior: dp
    elif bug == "niw_wrong_base":
        niw_log_marginal = ORIGINAL[6]
        S.niw_log_marginal = lambda W, z, base, n: niw_log_marginal(
            W, z, base._replace(Psi0=2.0 * base.Psi0), n)
    elif bug == "dispersion_rate_doubled":
        def patched(spec, data, W, noise_var, rate, Y=None, log_prior_W=None, centre=None):
            return log_density(spec, data, W, noise_var, 2.0 * rate, Y, log_prior_W, centre)
        J.log_density = patched
    elif bug == "dp_prior_sharpened":
        prior_W = ORIGINAL[7]

        def patched_prior(key, spec, data, state):
            prior = prior_W(key, spec, data, state)
            if state.dp is None or spec.integrates_components:
                return prior
            sharp = lambda m, w: 1.5 * prior.log_density(m, w)   # noqa: E731
            return prior._replace(log_density=sharp, total=summed(sharp))
        S.prior_W = patched_prior
    elif bug != "none":
        raise SystemExit(f"unknown bug {bug!r}")


#: --kind: (likelihood, DP kernel, the DP components in the block), as the test's cases
CASES = {"poisson": ("poisson", False, "drawn"), "gaussian": ("gaussian", True, "drawn"),
         "poisson-dp": ("poisson", True, "drawn"),
         "poisson-dp-integrated": ("poisson", True, "integrated"),
         "gaussian-dp-integrated": ("gaussian", True, "integrated"),
         **{k: (k, False, "drawn")
            for k in ("negative_binomial", "bernoulli", "binomial", "multinomial")}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bugs",
                        default="none,no_x_prior,no_w_prior,beta_prior_scale,tempered,"
                                "scale_no_jacobian,gauge_no_jacobian,gauge_no_rotation")
    parser.add_argument("--kind", default="poisson", choices=tuple(CASES),
                        help="the Geweke test's cases: poisson (fixed kernel), gaussian (DP "
                        "kernel), poisson-dp (DP kernel; seed 17 in the test), "
                        "poisson-dp-integrated (the DP components integrated out of the "
                        "block; seed 18), gaussian-dp-integrated (seed 20), and the other "
                        "likelihoods with a fixed kernel (seeds 21-24)")
    parser.add_argument("--sampler", default="nuts", choices=("nuts", "gibbs"))
    parser.add_argument("--q", type=int, default=1,
                        help="latent dimensions; 2 is the test's test_two_latent_dimensions "
                        "(standard errors from the ESS, normal critical value)")
    parser.add_argument("--steps", type=int, default=G.N_STEPS, help="sweeps per chain")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args(argv)
    kind, learn_kernel, components = CASES[args.kind]
    for bug in args.bugs.split(","):
        inject(bug)
        rng = np.random.default_rng(args.seed)
        g_m = G.marginal_conditional(rng, kind, learn_kernel, G.N_MARGINAL, q=args.q)
        g_s = G.successive_conditional(rng, kind, learn_kernel, G.N_CHAINS, args.steps,
                                       sampler=args.sampler, dp_components=components,
                                       q=args.q)
        if args.q == 1:
            z, _ = G.geweke_z(g_m, g_s)
            crit = G.critical_value(len(z))
        else:
            z, ess = G.geweke_z_ess(g_m, g_s)
            crit = G.critical_value_normal(len(z))
            print(f"    least ESS {min(ess.values()):.0f}", flush=True)
        worst = max(z, key=lambda k: abs(z[k]))
        print(f"{args.kind:8s} {args.sampler:5s} {bug:22s} max |z| = {abs(z[worst]):7.1f} "
              f"({worst}); critical {crit:.2f}: "
              f"{'caught' if abs(z[worst]) > crit else 'passes'}", flush=True)


if __name__ == "__main__":
    main()
