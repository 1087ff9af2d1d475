"""How often the joint frequency-and-weights move is accepted on a real posterior (issue 30).

Fits ``RFLVM()``'s inference (NUTS, the DP kernel) on a data set of ``rflvm_convergence.py``
for ``--sweeps`` sweeps, then applies passes of
:func:`gplvm.models.rflvm.frequency_weights.update_frequency_weights` to each chain's last
state, with every frequency proposed from its prior, then with every one a walk step, and
prints the acceptance rate of each kind, overall and by the frequency's weight norm
‖β_m‖ (the third of the frequencies with the smallest, the middle, the largest), where the
move is meant to help: a feature with small weights leaves its frequency to the prior.

    .venv/bin/python benchmarks/rflvm_frequency_weights.py [--datasets scurve,bridges] [--sweeps 300]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import gplvm  # noqa: E402
import gplvm.models.rflvm.frequency_weights as FW  # noqa: E402
from gplvm.models.rflvm.features import design  # noqa: E402
from gplvm.models.rflvm.init import nb_prior_mean  # noqa: E402
from gplvm.models.rflvm.sweep import prior_W  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rflvm_convergence import LIKELIHOODS, load  # noqa: E402


def acceptance(model, passes: int, prior_fraction: float, seed: int) -> np.ndarray:
    """(chains, passes, M/2) accepted flags of the move at each chain's last state."""
    FW.PRIOR_FRACTION = prior_fraction
    state_all = jax.tree_util.tree_map(jnp.asarray, model._result_.state)
    spec = model._spec_
    out = []
    for c in range(model.n_chains):
        state, data, _ = jax.tree_util.tree_map(lambda a: a[c], state_all)
        prior = prior_W(jax.random.PRNGKey(seed + c), spec, data, state)
        Phi = design(state.X, state.W, spec.intercept)
        weights = FW.Weights(state.beta, nb_prior_mean(spec, data, state.dispersion),
                             data.beta_prior_prec, Phi, Phi @ state.beta)

        @jax.jit
        def one(key):
            """Which frequencies one pass from the chain's state moved (accepted)."""
            W, _, _ = FW.update_frequency_weights(key, prior, state.X, state.W,
                                                  spec.likelihood, data, weights,
                                                  state.noise_var, state.dispersion)
            return jnp.any(W != state.W, axis=1)

        out.append([np.asarray(one(jax.random.PRNGKey(1000 * seed + 10 * c + p)))
                    for p in range(passes)])
    return np.asarray(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="scurve")
    parser.add_argument("--sweeps", type=int, default=300)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}; gplvm {gplvm.__version__}; RFLVM() inference "
          f"(NUTS, DP kernel), {args.sweeps} sweeps × 4 chains, then {args.passes} passes of "
          f"the move at each chain's last state")
    print("| data | proposal | accepted, all | smallest ‖β_m‖ third | middle | largest |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.datasets.split(","):
        data = load(name)
        if data is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = gplvm.RFLVM(n_iter=args.sweeps, burn_in=args.sweeps // 2,
                                likelihood=LIKELIHOODS.get(name, "poisson"), progress=False,
                                random_state=args.seed).fit(data.Y, offset=data.offset)
        beta = np.asarray(model._result_.state[0].beta)          # (chains, P, D)
        n_freq = model._spec_.n_freq
        norm = np.sqrt(np.sum(beta[:, :n_freq] ** 2 + beta[:, n_freq:2 * n_freq] ** 2, -1))
        thirds = np.argsort(np.argsort(norm, axis=1), axis=1) * 3 // n_freq   # (chains, M/2)
        for label, fraction in (("prior draw", 1.0), ("walk step", 0.0)):
            acc = acceptance(model, args.passes, fraction, args.seed)       # (C, passes, M/2)
            by = [acc.transpose(0, 2, 1)[thirds == k].mean() for k in range(3)]
            print(f"| {name} | {label} | {acc.mean():.3f} | {by[0]:.3f} | {by[1]:.3f} | "
                  f"{by[2]:.3f} |", flush=True)


if __name__ == "__main__":
    main()
