"""Why the RFLVM's NUTS trees reach their depth limit: the curvature of the block at its mode (issue 30).

Run (single-threaded XLA and OpenBLAS, set when unset and printed):

    .venv/bin/python benchmarks/rflvm_curvature.py [--datasets scurve,bridges]
        [--iterations 5000] [--features 100] [--seed 0]

For each data set, chain 0's NUTS block (:mod:`gplvm.models.rflvm.joint`: X, W modulo
rotations, whitened β) as a 4-chain ``RFLVM(likelihood='poisson', sampler='nuts',
learn_kernel=False)`` builds it, its mode searched by L-BFGS from the PCA start (``--iterations``), and the dense
Hessian H of the negative log-density there (``jax.hessian``).  NUTS with a diagonal mass
matrix sees H scaled by its diagonal, D^(-1/2) H D^(-1/2); its step size is bounded by the
largest eigenvalue and a trajectory must cross the widest direction, 1/√(smallest), so
√(λ_max/λ_min+) is the order of the leapfrog steps a U-turn needs.  The table gives the
spectrum with three preconditioners — the diagonal; plus one dense frame for every column of
the weights (the mean over columns of their Laplace blocks, Cholesky-whitened); plus each
column's own block — and, for the directions of the eight smallest positive eigenvalues,
how much of each lies on X, on W and on the weights z.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import sys  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import gplvm  # noqa: E402
from gplvm.models.rflvm import joint, map_start  # noqa: E402
from gplvm.models.rflvm.sweep import prior_W  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rflvm_convergence import chain_starts, load  # noqa: E402


def block_at_mode(Y, args):
    """(spec, data, mode search, log-density, chain 0's start, W's log prior) of chain 0 of
    a 4-chain ``RFLVM(sampler='nuts')`` fit (:func:`rflvm_convergence.chain_starts`)."""
    spec, data, states = chain_starts(np.asarray(Y, dtype=float), args, 4)
    state = jax.tree_util.tree_map(lambda a: a[0], states)
    log_prior_W = prior_W(jax.random.PRNGKey(1), spec, data, state).total
    fn = joint.log_density(spec, data, state.W, state.noise_var, state.dispersion_rate, None,
                           log_prior_W)
    search = jax.jit(lambda p: map_start.find_mode(fn, p, args.iterations))(
        joint.to_position(spec, data, state))
    return spec, data, search, fn, state, log_prior_W


def blocks_at_mode(args):
    """(description, :func:`block_at_mode`'s tuple) for each of ``args.datasets`` that is
    available."""
    for name in args.datasets.split(","):
        loaded = load(name)
        if loaded is not None:
            yield loaded[1], block_at_mode(loaded[0], args)


#: blackjax NUTS's tree cap in the block scripts (2^8 − 1 = 255 leapfrog steps, the library's)
MAX_DOUBLINGS = 8


def window_adapt(fn, start, key, n_steps: int):
    """blackjax window adaptation (Stan's: step size and diagonal mass) of NUTS on ``fn`` from
    ``start``: (state, parameters for :func:`nuts_draws`).  Shared by ``rflvm_whitened.py``,
    ``rflvm_chees.py`` and ``rflvm_lowrank.py``."""
    import blackjax

    warm = blackjax.window_adaptation(blackjax.nuts, fn, max_num_doublings=MAX_DOUBLINGS)
    (state, params), _ = warm.run(key, start, num_steps=n_steps)
    return state, {k: v for k, v in params.items() if k != "max_num_doublings"}


def nuts_draws(fn, params, state, keys, observe):
    """(observe(position), leapfrog steps) of one NUTS draw per key after
    :func:`window_adapt` (a ``lax.scan``; jit it, or call it inside a jitted function)."""
    import blackjax

    step = blackjax.nuts(fn, **params, max_num_doublings=MAX_DOUBLINGS).step

    def body(s, k):
        s, info = step(k, s)
        return s, (observe(s.position), info.num_integration_steps)

    return jax.lax.scan(body, state, keys)[1]


def spectrum(A) -> str:
    e = np.linalg.eigvalsh(A)
    positive = e[e > 1e-6]
    return (f"{e.min():.3g} | {positive.min():.3g} | {e.max():.3g} | "
            f"{np.sqrt(e.max() / positive.min()):.0f} | {np.sum(e <= 1e-6)}")


def block_arguments(parser, datasets: str, iterations: int):
    """The block's data sets, mode-search iterations, features and seed (shared with
    ``rflvm_whitened.py``)."""
    parser.add_argument("--datasets", default=datasets)
    parser.add_argument("--iterations", type=int, default=iterations)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def settings(args) -> str:
    """The header line: thread settings, version, M, kernel, seed."""
    return (f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
            f"XLA_FLAGS={os.environ['XLA_FLAGS']}; gplvm {gplvm.__version__}; M = "
            f"{args.features}, fixed RBF, seed {args.seed}")


def main(argv=None):
    parser = block_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]),
                             "scurve", 5000)
    args = parser.parse_args(argv)
    print(settings(args))
    for description, (spec, data, search, fn, _, _) in blocks_at_mode(args):
        H = np.asarray(-jax.hessian(fn)(search.position))
        N, Q = data.Y.shape[0], spec.n_components
        P, D = spec.n_weights, spec.n_outputs
        n_x, n_w = N * Q, joint.n_frequency_coords(spec, data)
        print(f"\n## {description}: mode after {int(search.n_iterations)} L-BFGS iterations, "
              f"log-density {float(search.log_density):.1f}, largest |gradient| "
              f"{float(search.max_gradient):.2g}; {H.shape[0]} coordinates")
        print("| preconditioner | λ min | λ min > 0 | λ max | √(λ max / λ min>0) | λ ≤ 1e-6 |")
        print("| --- | --- | --- | --- | --- | --- |")
        scale = 1.0 / np.sqrt(np.maximum(np.diag(H), 1e-8))
        diagonal = H * np.outer(scale, scale)
        print(f"| diagonal | {spectrum(diagonal)} |")
        columns = [n_x + n_w + np.arange(P) * D + j for j in range(D)]
        mean_block = sum(H[np.ix_(c, c)] for c in columns) / D
        for label, frame in (("one frame for every column of z", lambda c: mean_block),
                             ("each column's own frame", lambda c: H[np.ix_(c, c)])):
            T = np.diag(scale)
            for c in columns:
                T[np.ix_(c, c)] = np.linalg.inv(np.linalg.cholesky(frame(c))).T
            S = T.T @ H @ T
            d = np.sqrt(np.diag(S))
            print(f"| diagonal + {label} | {spectrum(S / np.outer(d, d))} |")
        e, V = np.linalg.eigh(diagonal)
        print("\n| eigenvalue (diagonal) | share on X | share on W | share on z |")
        print("| --- | --- | --- | --- |")
        for k in np.flatnonzero(e > 1e-6)[:8]:
            v = V[:, k] ** 2
            print(f"| {e[k]:.3g} | {v[:n_x].sum():.2f} | {v[n_x:n_x + n_w].sum():.2f} | "
                  f"{v[n_x + n_w:].sum():.2f} |")


if __name__ == "__main__":
    main()
