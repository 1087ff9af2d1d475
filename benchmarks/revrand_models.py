"""revrand's two models side by side with scikit-learn and revrand 1.0.0 itself (issue 3, item 4).

Run: ``.venv/bin/python benchmarks/revrand_models.py [--splits 10] [--threads 1] [--no-revrand]``.

Two tasks, the same splits for every model:

* **regression**, scikit-learn's diabetes data (442 × 10, y standardised), 70/30 random splits:
  ``BayesianLinearRegression`` and ``BayesianGLM(likelihood="gaussian")`` (defaults),
  ``RBFSampler`` + ``BayesianRidge`` (400 features, γ from the median distance),
  ``GaussianProcessRegressor`` (C·RBF + White, type-II ML) and revrand's
  ``StandardLinearModel`` / ``GeneralizedLinearModel`` (``RandomRBF`` with 200 bases = 400
  features).  Scores: R² and the mean negative log predictive density (NLPD) of the held-out y.
* **classification**, digits 3 vs 5 (scikit-learn's ``load_digits``, pixels 0..16), stratified
  70/30 splits: ``BayesianGLM(likelihood="bernoulli")`` (defaults), ``RBFSampler`` +
  ``LogisticRegression``, plain ``LogisticRegression`` on the pixels,
  ``GaussianProcessClassifier`` and revrand's ``GeneralizedLinearModel(Bernoulli())``.  Scores:
  error rate and log-loss.

Fit times are wall-clock seconds on this machine with the thread settings printed at the top
(set here, before NumPy/JAX load, so that no library oversubscribes the cores).  Our models
compile their objective on the first split; ``first`` is that fit, ``median`` the median over
all splits (compiled code reused).

revrand 1.0.0 lives in ``benchmarks/.venvs/revrand`` (made on first use by this script with
``pip install revrand==1.0.0``) and runs in a subprocess on the same splits.  It installs on
Python 3.11, but it calls ``numpy.asscalar``, removed in NumPy 1.23, and no NumPy older than
that has wheels for Python 3.11, so the worker restores it as ``np.asarray(a).item()`` (what
the removed function did) before importing revrand.
"""

from __future__ import annotations

import os
import sys


def _threads_from_argv(default: str = "1") -> str:
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return default


# Thread settings first: they only take effect before NumPy, SciPy and XLA start.
THREADS = _threads_from_argv()
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = THREADS
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen="
                           + ("false" if THREADS == "1" else "true")
                           + f" intra_op_parallelism_threads={THREADS}").strip()

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
REVRAND_VENV = HERE / ".venvs" / "revrand"
N_FEATURES = 400


# --------------------------------------------------------------------------- data and splits

def _tasks(n_splits: int):
    from sklearn.datasets import load_diabetes, load_digits
    from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

    X, y = load_diabetes(return_X_y=True)
    y = (y - y.mean()) / y.std()
    reg = [(tr, te) for tr, te in
           ShuffleSplit(n_splits=n_splits, test_size=0.3, random_state=0).split(X)]
    digits = load_digits()
    keep = (digits.target == 3) | (digits.target == 5)
    Xd, yd = digits.data[keep], (digits.target[keep] == 5).astype(float)
    cls = [(tr, te) for tr, te in
           StratifiedShuffleSplit(n_splits=n_splits, test_size=0.3, random_state=0).split(Xd, yd)]
    return {"regression": (X, y, reg), "classification": (Xd, yd, cls)}


def _median_lengthscale(X):
    from gplvm.kernels.lengthscale import median_distance
    return median_distance(X)


# --------------------------------------------------------------------------- scores

def _regression_scores(y, mean, sd):
    from scipy.stats import norm
    r2 = 1 - np.sum((y - mean) ** 2) / np.sum((y - y.mean()) ** 2)
    return {"r2": float(r2), "nlpd": float(-np.mean(norm.logpdf(y, mean, sd)))}


def _classification_scores(y, p):
    from sklearn.metrics import log_loss
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return {"error": float(np.mean((p > 0.5) != y)), "log_loss": float(log_loss(y, p))}


# --------------------------------------------------------------------------- our and sklearn models

def _regressors(X):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import BayesianRidge

    from gplvm import BayesianGLM, BayesianLinearRegression

    ell = _median_lengthscale(X)

    def blr(seed):
        return BayesianLinearRegression(random_state=seed)

    def glm(seed):
        return BayesianGLM("gaussian", progress=False, random_state=seed)

    def rff_ridge(seed):
        return _Pipeline(RBFSampler(gamma=0.5 / ell**2, n_components=N_FEATURES,
                                    random_state=seed), BayesianRidge())

    def gpr(seed):
        kernel = ConstantKernel() * RBF(ell) + WhiteKernel(0.1)
        return GaussianProcessRegressor(kernel, n_restarts_optimizer=2, random_state=seed)

    return {"gplvm BayesianLinearRegression": blr, "gplvm BayesianGLM (gaussian)": glm,
            "sklearn RBFSampler + BayesianRidge": rff_ridge,
            "sklearn GaussianProcessRegressor": gpr}


def _classifiers(X):
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import LogisticRegression

    from gplvm import BayesianGLM

    ell = _median_lengthscale(X)

    def glm(seed):
        return BayesianGLM("bernoulli", progress=False, random_state=seed)

    def rff_logistic(seed):
        return _Pipeline(RBFSampler(gamma=0.5 / ell**2, n_components=N_FEATURES,
                                    random_state=seed), LogisticRegression(max_iter=5000))

    def logistic(seed):
        return _Pipeline(None, LogisticRegression(max_iter=5000))

    def gpc(seed):
        return GaussianProcessClassifier(ConstantKernel() * RBF(ell), random_state=seed)

    return {"gplvm BayesianGLM (bernoulli)": glm,
            "sklearn RBFSampler + LogisticRegression": rff_logistic,
            "sklearn LogisticRegression (pixels)": logistic,
            "sklearn GaussianProcessClassifier": gpc}


class _Pipeline:
    """Fixed random features (or none) followed by an estimator."""

    def __init__(self, features, estimator):
        self.features, self.estimator = features, estimator

    def _map(self, X, fit=False):
        if self.features is None:
            return X
        return self.features.fit_transform(X) if fit else self.features.transform(X)

    def fit(self, X, y):
        self.estimator.fit(self._map(X, fit=True), y)
        return self

    def predict(self, X, return_std=False):
        return self.estimator.predict(self._map(X), return_std=return_std)

    def predict_proba(self, X):
        return self.estimator.predict_proba(self._map(X))


def _run_ours(task, X, y, splits, factories):
    rows = {}
    for name, make in factories.items():
        scores, times = [], []
        for i, (tr, te) in enumerate(splits):
            model = make(i)
            start = time.perf_counter()
            model.fit(X[tr], y[tr])
            times.append(time.perf_counter() - start)
            if task == "regression":
                mean, sd = model.predict(X[te], return_std=True)
                scores.append(_regression_scores(y[te], mean, sd))
            else:
                scores.append(_classification_scores(y[te], model.predict_proba(X[te])[:, 1]))
            print(f"  {name:42s} split {i}: {scores[-1]}  {times[-1]:.2f}s", file=sys.stderr,
                  flush=True)
        rows[name] = _summarise(scores, times)
    return rows


def _summarise(scores, times):
    keys = scores[0].keys()
    out = {k: float(np.mean([s[k] for s in scores])) for k in keys}
    out.update({f"{k}_sd": float(np.std([s[k] for s in scores])) for k in keys})
    out.update(first_s=float(times[0]), median_s=float(np.median(times)), n=len(scores))
    return out


# --------------------------------------------------------------------------- revrand (subprocess)

_WORKER = r'''
import json, sys, time
import numpy as np
if not hasattr(np, "asscalar"):          # removed in NumPy 1.23; revrand 1.0.0 still calls it
    np.asscalar = lambda a: np.asarray(a).item()
from scipy.stats import norm
from sklearn.metrics import log_loss
from revrand import StandardLinearModel, GeneralizedLinearModel
from revrand.basis_functions import RandomRBF
from revrand.btypes import Parameter, Positive
from revrand.likelihoods import Bernoulli, Gaussian

data = np.load(sys.argv[1])
task, ell, nbases = str(data["task"]), float(data["ell"]), int(data["nbases"])
X, y = data["X"], data["y"]
rows = {}
for i in range(int(data["n_splits"])):
    tr, te = data[f"train{i}"], data[f"test{i}"]
    basis = RandomRBF(nbases=nbases, Xdim=X.shape[1], lenscale=Parameter(ell, Positive()),
                      random_state=i)
    models = ({"revrand StandardLinearModel": lambda: StandardLinearModel(basis, random_state=i),
               "revrand GeneralizedLinearModel (gaussian)":
                   lambda: GeneralizedLinearModel(Gaussian(), basis, random_state=i)}
              if task == "regression" else
              {"revrand GeneralizedLinearModel (bernoulli)":
                   lambda: GeneralizedLinearModel(Bernoulli(), basis, random_state=i)})
    for name, make in models.items():
        model = make()
        start = time.perf_counter()
        model.fit(X[tr], y[tr])
        seconds = time.perf_counter() - start
        if task == "regression":
            mean, var = model.predict_moments(X[te])
            r2 = 1 - np.sum((y[te] - mean) ** 2) / np.sum((y[te] - y[te].mean()) ** 2)
            score = {"r2": float(r2),
                     "nlpd": float(-np.mean(norm.logpdf(y[te], mean, np.sqrt(var))))}
        else:
            p = np.clip(model.predict_moments(X[te])[0], 1e-12, 1 - 1e-12)
            score = {"error": float(np.mean((p > 0.5) != y[te])),
                     "log_loss": float(log_loss(y[te], p))}
        rows.setdefault(name, []).append((score, seconds))
        print(f"  {name:42s} split {i}: {score}  {seconds:.2f}s", file=sys.stderr, flush=True)
print(json.dumps(rows))
'''


def _revrand_python() -> tuple[Path | None, str]:
    """benchmarks/.venvs/revrand's interpreter, created on first use; or (None, why not)."""
    python = REVRAND_VENV / "bin" / "python"
    probe = "import numpy as np; np.asscalar = getattr(np, 'asscalar', None); import revrand"
    if python.exists() and subprocess.run([python, "-c", probe],
                                          capture_output=True).returncode == 0:
        return python, "present"
    print(f"# creating {REVRAND_VENV} with pip install revrand==1.0.0 (once)", file=sys.stderr,
          flush=True)
    made = subprocess.run([sys.executable, "-m", "venv", "--clear", REVRAND_VENV],
                          capture_output=True, text=True)
    if made.returncode != 0:
        return None, f"python -m venv failed: {made.stderr.strip()[-500:]}"
    pip = subprocess.run([python, "-m", "pip", "install", "-q", "revrand==1.0.0"],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        return None, f"pip install revrand==1.0.0 failed: {pip.stderr.strip()[-800:]}"
    check = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    if check.returncode != 0:
        return None, f"revrand installed but does not import: {check.stderr.strip()[-500:]}"
    return python, "installed now"


def _run_revrand(python, task, X, y, splits):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.npz"
        arrays = {f"train{i}": tr for i, (tr, _) in enumerate(splits)}
        arrays.update({f"test{i}": te for i, (_, te) in enumerate(splits)})
        np.savez(path, X=X, y=y, task=task, ell=_median_lengthscale(X), nbases=N_FEATURES // 2,
                 n_splits=len(splits), **arrays)
        worker = Path(tmp) / "worker.py"
        worker.write_text(_WORKER)
        done = subprocess.run([python, worker, path], stdout=subprocess.PIPE, text=True,
                              env=os.environ.copy())
        if done.returncode != 0:
            return {}, f"the revrand worker failed (exit {done.returncode}); see stderr above"
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: _summarise([s for s, _ in runs], [t for _, t in runs])
            for name, runs in rows.items()}, "ran"


# --------------------------------------------------------------------------- acceptance figures

def _acceptance() -> dict:
    """The issue's acceptance measurements (the test suite asserts the same thresholds)."""
    import jax
    import jax.numpy as jnp
    from scipy import stats
    from sklearn.datasets import load_diabetes
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF as SkRBF
    from sklearn.gaussian_process.kernels import ConstantKernel

    from gplvm import BayesianGLM, BayesianLinearRegression
    from gplvm.features import Bias, Concat, RandomFourierFeatures
    from gplvm.kernels import RBF
    from gplvm.objectives import linear_model as lm

    out = {}
    # 1. eq. 14 against a dense Gaussian, and its gradient against central differences
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    eps = jax.random.normal(jax.random.PRNGKey(0), (15, 2))

    def lml(log_theta, n):
        noise, p1, p2, l1, l2 = jnp.exp(log_theta)
        fm = Concat(maps=(RandomFourierFeatures(RBF(jnp.stack([l1, l2]), 1.0), eps),
                          Bias(in_dim=2)))
        prior = jnp.concatenate([jnp.full(30, p1), jnp.full(1, p2)])
        return lm.log_marginal_likelihood(fm(X[:n]), jnp.asarray(y[:n]), prior, noise)

    theta = jnp.log(jnp.array([0.05, 0.8, 2.0, 0.7, 1.3]))
    for n, route in ((40, "primal"), (20, "dual")):
        noise, p1, p2 = 0.05, 0.8, 2.0
        fm = Concat(maps=(RandomFourierFeatures(RBF(jnp.array([0.7, 1.3]), 1.0), eps),
                          Bias(in_dim=2)))
        Phi = np.asarray(fm(X[:n]))
        cov = (Phi * np.r_[np.full(30, p1), p2]) @ Phi.T + noise * np.eye(n)
        dense = stats.multivariate_normal(np.zeros(n), cov).logpdf(y[:n])
        value = jax.jit(lml, static_argnums=1)
        grad = np.asarray(jax.jit(jax.grad(lml), static_argnums=1)(theta, n))
        h = 1e-5
        fd = np.array([(float(value(theta.at[i].add(h), n)) - float(value(theta.at[i].add(-h), n)))
                       / (2 * h) for i in range(theta.size)])
        out[f"lml_{route}"] = {"abs_diff_vs_scipy": abs(float(value(theta, n)) - dense),
                               "max_rel_grad_err_vs_fd":
                                   float(np.max(np.abs(grad - fd) / np.maximum(1, np.abs(fd))))}
    # 2. M = 2000 random features against exact GP regression, median over 5 feature seeds
    X1 = np.random.default_rng(0).uniform(-3, 3, size=(200, 1))
    y1 = np.sin(2 * X1[:, 0]) + 0.3 * np.random.default_rng(0).normal(size=200)
    Xd, yd = load_diabetes(return_X_y=True)
    yd = (yd - yd.mean()) / yd.std()
    cases = {"synthetic_1d": (X1, y1, np.linspace(-3, 3, 101)[:, None], 1.0, 0.5, 0.09),
             "diabetes": (Xd[:300], yd[:300], Xd[300:], 1.25, 0.3, 0.47)}
    for name, (Xt, yt, Xs, amp, ell, noise) in cases.items():
        kernel = ConstantKernel(amp, "fixed") * SkRBF(ell, "fixed")
        gp = GaussianProcessRegressor(kernel, alpha=noise, optimizer=None).fit(Xt, yt).predict(Xs)
        res = []
        for seed in range(5):
            fm = RandomFourierFeatures.create(RBF(lengthscale=ell, variance=1.0), 2000,
                                              Xt.shape[1], jax.random.PRNGKey(seed))
            blr = BayesianLinearRegression(features=fm, prior_var=amp, noise_var=noise,
                                           optimize=False, standardize=False).fit(Xt, yt)
            d = (blr.predict(Xs) - gp) / np.std(yt)
            res.append((np.sqrt(np.mean(d**2)), np.max(np.abs(d))))
        rms, largest = np.median(res, axis=0)
        out[f"gp_agreement_{name}"] = {"rms_sd": float(rms), "max_sd": float(largest)}
    # 3. 90% intervals on 1000 held-out points against the true model's own coverage
    rng = np.random.default_rng(42)
    Xg = rng.uniform(-3, 3, size=(2000, 1))
    yg = np.sin(2 * Xg[:, 0]) + 0.5 * Xg[:, 0] + 0.2 * rng.normal(size=2000)
    lo, hi = BayesianLinearRegression(n_features=100, n_restarts=1, max_iter=200).fit(
        Xg[:1000], yg[:1000]).predict_interval(Xg[1000:])
    band = 3 * np.sqrt(0.09 / 1000)
    covered = float(np.mean((yg[1000:] >= lo) & (yg[1000:] <= hi)))
    out["coverage_blr_gaussian"] = {"covered": covered, "true_model": 0.9, "3se": float(band)}
    rng = np.random.default_rng(4)
    Xs = rng.uniform(-3, 3, size=(1500, 1))
    yg = np.sin(2 * Xs[:, 0]) + 0.3 * rng.normal(size=1500)
    lo, hi = BayesianGLM("gaussian", n_features=100, progress=False).fit(
        Xs[:500], yg[:500]).predict_interval(Xs[500:])
    out["coverage_glm_gaussian"] = {"covered": float(np.mean((yg[500:] >= lo) & (yg[500:] <= hi))),
                                    "true_model": 0.9, "3se": float(band)}
    rate = np.exp(1.0 + np.sin(2 * Xs[:, 0]))
    yp = rng.poisson(rate).astype(float)
    lo, hi = BayesianGLM("poisson", n_features=100, progress=False).fit(
        Xs[:500], yp[:500]).predict_interval(Xs[500:])
    true = stats.poisson(rate[500:])
    c = true.cdf(true.ppf(0.95)) - true.cdf(true.ppf(0.05) - 1)
    out["coverage_glm_poisson"] = {"covered": float(np.mean((yp[500:] >= lo) & (yp[500:] <= hi))),
                                   "true_model": float(np.mean(c)),
                                   "3se": float(3 * np.sqrt(np.sum(c * (1 - c))) / len(c))}
    # 4. planted Poisson weights on known features [x, 1]
    from gplvm.features import AbstractFeatureMap
    from gplvm.pytree import pytree_dataclass, static_field

    @pytree_dataclass
    class Identity(AbstractFeatureMap):
        in_dim: int = static_field(default=1)
        n_features = property(lambda self: self.in_dim)
        input_dim = property(lambda self: self.in_dim)
        __call__ = lambda self, X: self._check_input(X)  # noqa: E731
        unconstrained = lambda self: {}  # noqa: E731
        from_unconstrained = lambda self, u: self  # noqa: E731

    rng = np.random.default_rng(3)
    Xp = rng.normal(size=(2000, 3))
    w = np.array([0.4, -0.3, 0.2, 0.5])
    Phi = np.column_stack([Xp, np.ones(2000)])
    yp = rng.poisson(np.exp(Phi @ w)).astype(float)
    model = BayesianGLM("poisson", features=Concat.of([Identity(3), Bias(in_dim=3)]),
                        progress=False).fit(Xp, yp)
    se = np.sqrt(np.diag(np.linalg.inv(Phi.T @ (np.exp(Phi @ w)[:, None] * Phi))))
    mean = model.weights_mean_.mean(axis=0)
    out["poisson_planted_weights"] = {"truth": w.tolist(), "posterior_mean": mean.tolist(),
                                      "se_at_truth": se.tolist(),
                                      "max_abs_err_in_se": float(np.max(np.abs(mean - w) / se))}
    return out


# --------------------------------------------------------------------------- report

def _table(task, rows):
    keys = ("r2", "nlpd") if task == "regression" else ("error", "log_loss")
    head = f"| model | {keys[0]} | {keys[1]} | fit s (first) | fit s (median) |"
    lines = [head, "|" + " --- |" * 5]
    for name, r in rows.items():
        lines.append(f"| {name} | {r[keys[0]]:.4f} ± {r[keys[0] + '_sd']:.4f} | "
                     f"{r[keys[1]]:.4f} ± {r[keys[1] + '_sd']:.4f} | {r['first_s']:.2f} | "
                     f"{r['median_s']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--threads", default="1",
                        help="threads for BLAS/OpenMP and XLA (read before imports)")
    parser.add_argument("--no-revrand", action="store_true", help="skip revrand 1.0.0")
    parser.add_argument("--tasks", default="regression,classification",
                        help="comma-separated: regression, classification, acceptance")
    parser.add_argument("--out", default=str(HERE / "results" / "revrand_models.json"))
    args = parser.parse_args()

    import jax

    import gplvm
    print("# thread settings")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS",
                "JAX_PLATFORMS"):
        print(f"#   {var}={os.environ.get(var, '(unset)')}")
    print(f"#   os.cpu_count()={os.cpu_count()}  affinity={len(os.sched_getaffinity(0))}")
    print(f"#   gplvm {gplvm.__version__}, jax {jax.__version__} on {jax.devices()}")

    python, status = (None, "skipped (--no-revrand)") if args.no_revrand else _revrand_python()
    print(f"# revrand 1.0.0: {status}" + (f" ({python})" if python else ""))
    results = {"threads": THREADS, "revrand": status}
    if "acceptance" in args.tasks.split(","):
        results["acceptance"] = _acceptance()
        print("\n## acceptance figures\n" + json.dumps(results["acceptance"], indent=2),
              flush=True)
    for task, (X, y, splits) in _tasks(args.splits).items():
        if task not in args.tasks.split(","):
            continue
        print(f"\n## {task}: {'diabetes' if task == 'regression' else 'digits 3 vs 5'}, "
              f"{len(splits)} splits of {len(splits[0][0])} training / {len(splits[0][1])} test")
        factories = _regressors(X) if task == "regression" else _classifiers(X)
        rows = _run_ours(task, X, y, splits, factories)
        if python is not None:
            extra, how = _run_revrand(python, task, X, y, splits)
            rows.update(extra)
            if not extra:
                print(f"# revrand: {how}")
        print(_table(task, rows), flush=True)
        results[task] = rows
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"\n# results written to {args.out}")


if __name__ == "__main__":
    main()
