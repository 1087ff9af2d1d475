"""Psi-statistics of a Matérn 3/2 kernel at Q = 5: our unscented rule against GPy's fallback.

The issue 4 acceptance case: μ, Z ~ N(0, I), S ~ U(0.01, 0.25)·ℓ², N = 40, M = 20, Q = 5, ARD
Matérn 3/2 with ℓ = 1, σ² = 1.  The reference is a 10⁶-draw-per-point Monte Carlo estimate (with
its own standard error).  GPy has closed forms only for RBF and Linear kernels; every other kernel
falls back to ``PSICOMP_GH`` (GPy/kern/src/psi_comp/gaussherm.py), which evaluates the kernel at
``μ_n + t_i √S_n`` for 11 scalar Gauss–Hermite nodes t_i — the *same* t_i in every dimension, i.e.
a 1-D rule along the diagonal line through μ_n, not a Q-dimensional one.  Its error therefore
grows with Q.  As a check that both libraries compute the same quantities, GPy's closed-form RBF
statistics (``PSICOMP_RBF``) are compared with ours on the same inputs.

GPy runs in its own virtual environment, ``benchmarks/.venvs/gpy``, created on first use
(``pip install GPy==1.15.0``; 1.13.2 with numpy<2 as a fallback).  Run::

    .venv/bin/python benchmarks/psi_statistics_vs_gpy.py [--draws 1000000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import gplvm  # noqa: F401  (float64)
from gplvm.expectations import Analytic, GaussHermite, MonteCarlo, Unscented, psi_statistics
from gplvm.kernels import RBF, Matern32

HERE = Path(__file__).resolve().parent
GPY_VENV = HERE / ".venvs" / "gpy"
GPY_CANDIDATES = (["GPy==1.15.0"], ["GPy==1.13.2", "numpy<2"])
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")

GPY_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import GPy
    from GPy.core.parameterization.variational import NormalPosterior
    d = np.load(sys.argv[1])
    mu, S, Z, ell = d["mu"], d["S"], d["Z"], d["ell"]
    qX = NormalPosterior(mu, S)
    out = {"version": GPy.__version__, "numpy": np.__version__}
    for name, kern in [("matern32", GPy.kern.Matern32(mu.shape[1], variance=1.0,
                                                      lengthscale=ell, ARD=True)),
                       ("rbf", GPy.kern.RBF(mu.shape[1], variance=1.0, lengthscale=ell,
                                            ARD=True))]:
        t = time.perf_counter()
        psi0 = kern.psi0(Z, qX).sum(); psi1 = kern.psi1(Z, qX); psi2 = kern.psi2(Z, qX)
        out[name] = {"psicomp": type(kern.psicomp).__name__, "psi0": float(psi0),
                     "psi1": psi1.tolist(), "psi2": psi2.tolist(),
                     "seconds": time.perf_counter() - t}
    print(json.dumps(out))
""")


def ensure_gpy_venv() -> Path:
    """The GPy interpreter, creating ``benchmarks/.venvs/gpy`` on first use."""
    python = GPY_VENV / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import GPy"],
                                          capture_output=True).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", GPY_VENV], check=True)
    for spec in GPY_CANDIDATES:
        done = subprocess.run([python, "-m", "pip", "install", "-q", *spec])
        if done.returncode == 0:
            return python
        print(f"pip install {' '.join(spec)} failed; trying the next candidate", file=sys.stderr)
    raise RuntimeError("could not install GPy into benchmarks/.venvs/gpy; install it there by hand "
                       "(benchmarks/.venvs/gpy/bin/pip install GPy) and rerun")


def run_gpy(python: Path, inputs: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "inputs.npz"
        np.savez(path, **inputs)
        done = subprocess.run([python, "-c", GPY_SCRIPT, path], capture_output=True, text=True,
                              check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def mc_reference(kernel, Z, mu, S, n_draws, key, chunk=50_000):
    """Per-point Monte Carlo moments: estimates and standard errors of psi0, psi1, psi2."""
    n_chunks, Q, M = n_draws // chunk, mu.shape[1], Z.shape[0]

    @jax.jit
    def moments(kernel, Z, mu, S, key):
        def one_point(args):
            m, s, kp = args

            def body(acc, kc):
                X = m + jnp.sqrt(s) * jax.random.normal(kc, (chunk, Q))
                K, d = kernel(X, Z), kernel.diag(X)
                inc = (d.sum(), (d * d).sum(), K.sum(0), (K * K).sum(0), K.T @ K,
                       (K * K).T @ (K * K))
                return jax.tree_util.tree_map(jnp.add, acc, inc), None

            acc0 = (0.0, 0.0, jnp.zeros(M), jnp.zeros(M), jnp.zeros((M, M)), jnp.zeros((M, M)))
            acc, _ = jax.lax.scan(body, acc0, jax.random.split(kp, n_chunks))
            return jax.tree_util.tree_map(lambda a: a / (n_chunks * chunk), acc)

        return jax.lax.map(one_point, (mu, S, jax.random.split(key, mu.shape[0])))

    T = n_chunks * chunk
    d1, d2, k1, k2, kk, kk2 = (np.asarray(a) for a in moments(kernel, Z, mu, S, key))
    est = (d1.sum(), k1, kk.sum(0))
    se = (np.sqrt(max(np.sum(d2 - d1**2), 0.0) / T), np.sqrt(np.maximum(k2 - k1**2, 0) / T),
          np.sqrt(np.maximum(kk2 - kk**2, 0).sum(0) / T))
    return est, se


def rel(a, ref) -> float:
    """Relative Frobenius error ‖a − ref‖ / ‖ref‖."""
    return float(np.linalg.norm(np.asarray(a) - ref) / np.linalg.norm(ref))


def timed(fn, *args):
    jax.block_until_ready(fn(*args))          # compile
    t = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - t


def make_inputs(seed, var_range=(0.01, 0.25), N=40, M=20, Q=5):
    """μ, Z ~ N(0, I), S ~ U(var_range)·ℓ² with ℓ = 1 (the issue 4 acceptance case)."""
    rng = np.random.default_rng(seed)
    ell = np.ones(Q)
    return {"mu": rng.normal(size=(N, Q)), "Z": rng.normal(size=(M, Q)),
            "S": rng.uniform(*var_range, size=(N, Q)) * ell**2, "ell": ell}


def compare(inputs, gpy_python, draws, key):
    """Rows (label, nodes per point, psi0/psi1/psi2 relative errors, seconds) for one case."""
    mu, Z, S = (jnp.asarray(inputs[k]) for k in ("mu", "Z", "S"))
    Q = mu.shape[1]
    kernel = Matern32(lengthscale=jnp.asarray(inputs["ell"]), variance=1.0)
    t = time.perf_counter()
    (ref0, ref1, ref2), (se0, se1, se2) = mc_reference(kernel, Z, mu, S, draws, key)
    t_ref = time.perf_counter() - t
    gpy = run_gpy(gpy_python, inputs)

    stats = jax.jit(lambda k, Z, mu, S, rule: psi_statistics(k, Z, mu, S, rule))
    rows = []
    for label, rule, nodes in [
        ("ours: unscented (seed 004 §B.1)", Unscented(), 2 * Q),
        ("ours: Gauss–Hermite 3^Q grid", GaussHermite(n_points=3), 3**Q),
        ("ours: Monte Carlo, 2Q draws", MonteCarlo(n_samples=2 * Q,
                                                   key=jax.random.PRNGKey(7)), 2 * Q),
    ]:
        (p0, p1, p2), sec = timed(stats, kernel, Z, mu, S, rule)
        rows.append((label, nodes, abs(float(p0) - ref0) / ref0, rel(p1, ref1), rel(p2, ref2),
                     sec))
    g = gpy["matern32"]
    rows.append(("GPy 1-D Gauss–Hermite fallback", 11, abs(g["psi0"] - ref0) / ref0,
                 rel(g["psi1"], ref1), rel(g["psi2"], ref2), g["seconds"]))
    rows.append((f"MC reference: std. error ({draws:.0e} draws)", draws,
                 float(se0) / ref0, float(np.linalg.norm(se1) / np.linalg.norm(ref1)),
                 float(np.linalg.norm(se2) / np.linalg.norm(ref2)), t_ref))
    return rows, gpy


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10**6, help="MC draws per point (reference)")
    parser.add_argument("--sweep-draws", type=int, default=10**5,
                        help="MC draws per point for the variance sweep (0 skips it)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    print("# psi-statistics, Matérn 3/2 ARD, N = 40, M = 20, Q = 5, ℓ = 1, σ² = 1, "
          f"S ~ U(0.01, 0.25)·ℓ², seed {args.seed}")
    print(f"# machine: {platform.machine()}, {os.cpu_count()} logical CPUs, "
          f"python {platform.python_version()}, jax {jax.__version__} on "
          f"{jax.devices()[0].platform}")
    print("# threads: " + ", ".join(f"{v}={os.environ.get(v, '(unset)')}" for v in THREAD_VARS))
    python = ensure_gpy_venv()
    inputs = make_inputs(args.seed)
    rows, gpy = compare(inputs, python, args.draws, jax.random.PRNGKey(args.seed + 1))
    print(f"# GPy {gpy['version']} (numpy {gpy['numpy']}) in {GPY_VENV.relative_to(HERE.parent)}"
          f"; its Matérn psicomp: {gpy['matern32']['psicomp']}")
    print()
    print(f"{'method':<44} {'nodes/pt':>9} {'psi0 err':>9} {'psi1 err':>9} {'psi2 err':>9}"
          f" {'ms':>8}")
    for label, nodes, e0, e1, e2, sec in rows:
        print(f"{label:<44} {nodes:>9} {e0:>9.2%} {e1:>9.2%} {e2:>9.2%} {1e3 * sec:>8.2f}")
    print("(errors: relative Frobenius distance to the Monte Carlo reference; ms: one "
          "evaluation after compilation, GPy's first call)")

    # both libraries' closed-form RBF statistics on the same inputs
    mu, Z, S = (jnp.asarray(inputs[k]) for k in ("mu", "Z", "S"))
    rbf = RBF(lengthscale=jnp.asarray(inputs["ell"]), variance=1.0)
    a0, a1, a2 = psi_statistics(rbf, Z, mu, S, rule=Analytic())
    r = gpy["rbf"]
    print(f"\nclosed-form RBF, ours vs GPy {r['psicomp']}: relative differences psi0 "
          f"{abs(float(a0) - r['psi0']) / r['psi0']:.1e}, psi1 {rel(a1, np.array(r['psi1'])):.1e},"
          f" psi2 {rel(a2, np.array(r['psi2'])):.1e}")

    if args.sweep_draws:
        # both quadratures lose accuracy as S grows relative to ℓ²; the line rule loses faster
        print(f"\nvariance sweep (same μ, Z; reference {args.sweep_draws:.0e} draws; "
              "psi1 / psi2 relative errors):")
        print(f"{'S / ℓ² range':<14} {'unscented':>15} {'GH 3^Q':>15} {'GPy fallback':>15}")
        for var_range in [(0.01, 0.25), (0.25, 1.0), (1.0, 2.0)]:
            rows, _ = compare(make_inputs(args.seed, var_range), python, args.sweep_draws,
                              jax.random.PRNGKey(args.seed + 2))
            cells = [f"{e1:6.1%} / {e2:6.1%}" for _, _, _, e1, e2, _ in (rows[0], rows[1], rows[3])]
            print(f"{str(var_range):<14} " + " ".join(f"{c:>15}" for c in cells))


if __name__ == "__main__":
    main()
