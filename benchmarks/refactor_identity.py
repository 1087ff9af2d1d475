"""Fingerprints of fitted models through the public API, to show that a reshaping of the code
changes no result (issue 11: "at fixed parameters the bound is bit-identical before and after";
issue 33, item 5: "keep the proof").

Run it on two commits and compare the printed tables line by line::

    git worktree add /tmp/before <commit>   # then, in each checkout:
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/refactor_identity.py

Each row is a SHA-256 prefix of the exact bytes of an output (float64), so equal rows mean
bit-identical results.  Covered, each after a short run from a fixed seed:

* ``bgplvm``: the Bayesian GPLVM's bound, latents and predictions after a short L-BFGS run
  (iid and dynamical prior, with missing entries);
* ``svi``: the Bayesian GPLVM with ``inference='svi'`` (minibatches of 20 rows, 6 epochs, with
  missing entries): bound, latents, per-epoch history and predictions;
* ``structured``: the StructuredGPLVM on 20 images of 6 × 6 pixels (a smooth function of 2
  latent variables plus noise, 5% of the pixels missing): bound, latents, history,
  predictions (mean and variance), ``impute`` of the training images (and the variances) and
  ``transform`` of new images;
* ``dpgplvm``: the DP-GP-LVM's bound, latents, assignments, predictions and new-row latents;
* ``rflvm``: the RFLVM's latent draws and log-likelihood trace for every likelihood after a
  short run;
* ``rflvm-nuts``: the RFLVM with ``sampler='nuts'`` (Poisson, Gaussian) and with
  ``inference='map'`` (Poisson, Gaussian): latent draws (modes), trace and the mode search's
  summary (``mode_start_``);
* ``linear``: BayesianLinearRegression (type-II ML, one restart) and BayesianGLM (Gaussian,
  Poisson, Bernoulli) on random features: the fitted weights and hyper-parameters, the
  history, and the predictions (mean and standard deviation, quantiles, class probabilities);
* ``resume``: a BayesianGPLVM (L-BFGS and SVI), an RFLVM and a BayesianLinearRegression
  stopped part-way as Ctrl-C stops them (a ``KeyboardInterrupt`` raised from the checkpoint
  write, ``checkpoint_interval=0``), then finished both by ``model.resume()`` and by
  ``gplvm.load(checkpoint).resume()``.  Each is the set-up of an uninterrupted row above
  (``BayesianGPLVM iid``, ``BayesianGPLVM svi``, ``RFLVM poisson``,
  ``BayesianLinearRegression``), so its fingerprints equal that row's (resuming is exact); the
  first column names the iteration / sweep where the run stopped (the linear regression's,
  ``BLR``, counts the iterations of all its L-BFGS runs: 30 of the first, 10 of the second).

``--models`` picks groups; warnings (ConvergenceWarning of the short runs, the "interrupted"
RuntimeWarning of the resume rows) are silenced.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import tempfile
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import gplvm  # noqa: E402


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    return h.hexdigest()[:16]


def _bgplvm_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    Y = np.tanh(X @ rng.normal(size=(2, 8))) + 0.05 * rng.normal(size=(60, 8))
    Y[rng.random(Y.shape) < 0.05] = np.nan
    return Y


BGPLVM_KW = dict(n_components=2, n_inducing=10, max_iter=40, random_state=0, progress=False)
SVI_KW = dict(BGPLVM_KW, inference="svi", batch_size=20, max_iter=6, learning_rate=0.02)


def _bgplvm_row(name, m):
    return (name, f"{m.elbo_:.17g}", digest(m.X_mean_, m.X_var_),
            digest(m.predict(m.X_mean_[:5], return_var=True)))


def _svi_row(name, m):
    return (name, f"{m.elbo_:.17g}", digest(m.X_mean_, m.X_var_),
            digest(m.history_, m.predict(m.X_mean_[:5], return_var=True)))


def bgplvm_rows():
    Y = _bgplvm_data()
    for name, kwargs in [("iid", {}), ("dynamical", {"times": np.arange(60.0)})]:
        m = gplvm.BayesianGPLVM(**BGPLVM_KW).fit(Y, **kwargs)
        yield _bgplvm_row(f"BayesianGPLVM {name}", m)


def svi_rows():
    m = gplvm.BayesianGPLVM(**SVI_KW).fit(_bgplvm_data())
    yield _svi_row("BayesianGPLVM svi", m)


def structured_rows():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(20, 2))
    r, c = np.meshgrid(np.linspace(-1, 1, 6), np.linspace(-1, 1, 6), indexing="ij")
    images = (np.sin(2 * r[None] + X[:, :1, None]) * np.cos(1.5 * c[None] - X[:, 1:, None])
              + 0.05 * rng.normal(size=(20, 6, 6)))
    Y = images.copy()
    Y[rng.random(Y.shape) < 0.05] = np.nan
    m = gplvm.StructuredGPLVM(n_components=2, n_inducing=8, max_iter=15, transform_max_iter=20,
                              random_state=0, progress=False).fit(Y)
    new = images[:2].copy()
    new[0, :2, :3] = np.nan
    yield ("StructuredGPLVM iid", f"{m.elbo_:.17g}", digest(m.X_mean_, m.X_var_, m.history_),
           digest(m.predict(m.X_mean_[:4], return_var=True), m.impute(Y, return_var=True),
                  m.transform(new, True)))


def dpgplvm_rows():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    W = rng.normal(size=(3, 8)) * np.repeat([[1, 1, 0], [1, 0, 1]], 4, axis=0).T
    Y = np.tanh(X @ W) + 0.05 * rng.normal(size=(40, 8))
    m = gplvm.DPGPLVM(n_components=3, n_inducing=8, truncation=3, max_iter=40, n_warmup=10,
                      n_init_steps=30, transform_max_iter=20, random_state=0,
                      progress=False).fit(Y)
    Y_new = Y[:3].copy()
    Y_new[0, :2] = np.nan
    yield ("DPGPLVM iid", f"{m.elbo_:.17g}", digest(m.X_mean_, m.X_var_, m.assignments_),
           digest(m.predict(m.X_mean_[:5], return_var=True), m.transform(Y_new, True)))


def _rflvm_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2))
    F = np.tanh(X @ rng.normal(size=(2, 6)))
    return {
        "gaussian": F + 0.1 * rng.normal(size=F.shape),
        "poisson": rng.poisson(np.exp(F)).astype(float),
        "negative_binomial": rng.poisson(np.exp(F + 1)).astype(float),
        "bernoulli": (rng.random(F.shape) < 1 / (1 + np.exp(-2 * F))).astype(float),
        "binomial": (rng.random(F.shape) < 1 / (1 + np.exp(-2 * F))).astype(float),
        "multinomial": rng.poisson(np.exp(F)).astype(float) + 1,
    }


RFLVM_KW = dict(sampler="gibbs", n_features=20, n_iter=30, burn_in=10, n_chains=2, block_size=10,
                random_state=0, progress=False)


def _rflvm_row(name, m):
    return (name, f"{float(np.sum(m.history_)):.17g}", digest(m.X_samples_), digest(m.history_))


def rflvm_rows():
    for lik, Y in _rflvm_data().items():
        m = gplvm.RFLVM(likelihood=lik, **RFLVM_KW).fit(Y)
        yield _rflvm_row(f"RFLVM {lik}", m)


def rflvm_nuts_rows():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 2))
    F = np.tanh(X @ rng.normal(size=(2, 5)))
    data = {"poisson": rng.poisson(np.exp(F)).astype(float),
            "gaussian": F + 0.1 * rng.normal(size=F.shape)}
    settings = [("nuts", dict(sampler="nuts", n_iter=20, burn_in=10, block_size=10)),
                ("map", dict(inference="map"))]
    for label, kw in settings:
        for lik, Y in data.items():
            m = gplvm.RFLVM(likelihood=lik, n_features=10, n_chains=2, random_state=0,
                            progress=False, **kw).fit(Y)
            start = [m.mode_start_[k] for k in sorted(m.mode_start_)]
            yield (f"RFLVM {label} {lik}", f"{float(np.sum(m.history_)):.17g}",
                   digest(m.X_samples_), digest(m.history_, *start))


BLR_KW = dict(n_features=20, n_restarts=1, max_iter=30, random_state=0)


def _linear_data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2))
    f = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1]
    y = f + 0.1 * rng.normal(size=40)
    return rng, X, f, y


def _blr_row(name, m):
    Xq = _linear_data()[1][:5] + 0.1
    return (name, f"{m.log_marginal_likelihood_:.17g}",
            digest(*m.weights_posterior(), m.noise_var_, m.prior_var_, m.history_),
            digest(m.predict(Xq, return_std=True), m.predict_quantile(Xq, [0.1, 0.5, 0.9])))


def linear_rows():
    rng, X, f, y = _linear_data()
    Xq = X[:5] + 0.1
    yield _blr_row("BayesianLinearRegression",
                   gplvm.BayesianLinearRegression(**BLR_KW).fit(X, y))
    targets = {"gaussian": y, "poisson": rng.poisson(np.exp(f)).astype(float),
               "bernoulli": (rng.random(40) < 1 / (1 + np.exp(-2 * f))).astype(float)}
    for lik, t in targets.items():
        m = gplvm.BayesianGLM(likelihood=lik, n_features=10, n_mixture=2, n_iter=30,
                              batch_size=20, n_predict_samples=50, random_state=0,
                              progress=False).fit(X, t)
        if lik == "bernoulli":
            predicted = (m.predict_proba(Xq),)
        else:
            predicted = (*m.predict(Xq, return_std=True), m.predict_quantile(Xq, [0.1, 0.9]))
        yield (f"BayesianGLM {lik}", f"{float(m.history_[-1]):.17g}",
               digest(m.weights_mean_, m.weights_var_, m.prior_var_, m.history_),
               digest(*predicted))


@contextlib.contextmanager
def _ctrl_c_at_write(cls, k: int):
    """The k-th checkpoint write of a ``cls`` model raises KeyboardInterrupt (as Ctrl-C there
    would); the other writes go through."""
    real, own, calls = cls.save, vars(cls).get("save"), [0]

    def save(self, path):
        calls[0] += 1
        if calls[0] == k:
            raise KeyboardInterrupt
        real(self, path)

    cls.save = save
    try:
        yield
    finally:
        if own is None:
            del cls.save
        else:
            cls.save = own


def _stopped_and_resumed(cls, kw, k, fit_args, folder, name):
    """A fit stopped at its k-th checkpoint write, and two resumptions: in process and from the
    checkpoint file.  Returns (stopped model's n_iter_, resumed, resumed from the file)."""
    path = os.path.join(folder, f"{name}.npz")
    with _ctrl_c_at_write(cls, k):
        part = cls(**kw, checkpoint=path, checkpoint_interval=0.0).fit(*fit_args)
    if not part.interrupted_:
        raise RuntimeError(f"{name}: the run was not stopped at checkpoint write {k}")
    stopped = int(part.n_iter_)
    from_file = gplvm.load(path)
    return stopped, part.resume(), from_file.resume()


def resume_rows():
    Y = _bgplvm_data()
    Y_rflvm = _rflvm_data()["poisson"]
    with tempfile.TemporaryDirectory() as folder:
        cases = [
            ("BayesianGPLVM", gplvm.BayesianGPLVM, BGPLVM_KW, 10, (Y,), _bgplvm_row),
            ("BayesianGPLVM svi", gplvm.BayesianGPLVM, SVI_KW, 7, (Y,), _svi_row),
            ("RFLVM poisson", gplvm.RFLVM, dict(RFLVM_KW, likelihood="poisson"), 2,
             (Y_rflvm,), _rflvm_row),
        ]
        for name, cls, kw, k, args, row in cases:
            stopped, resumed, from_file = _stopped_and_resumed(
                cls, kw, k, args, folder, name.replace(" ", "_"))
            for how, m in (("resume", resumed), ("load+resume", from_file)):
                yield row(f"{name} {how}@{stopped}", m)
        # stopped at its 40th L-BFGS iteration in all: the 10th of its second run (restart)
        _, X, _, y = _linear_data()
        _, resumed, from_file = _stopped_and_resumed(
            gplvm.BayesianLinearRegression, BLR_KW, 40, (X, y), folder, "blr")
        for how, m in (("resume", resumed), ("load+resume", from_file)):
            yield _blr_row(f"BLR {how}@40", m)     # the full name overflows the column


ROWS = {"bgplvm": bgplvm_rows, "svi": svi_rows, "structured": structured_rows,
        "dpgplvm": dpgplvm_rows, "rflvm": rflvm_rows, "rflvm-nuts": rflvm_nuts_rows,
        "linear": linear_rows, "resume": resume_rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=list(ROWS), default=list(ROWS))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"{'model':<36}{'bound / sum log-lik':<26}{'latents / weights':<18}"
          f"{'predict / trace'}")
    for row in (r for name in args.models for r in ROWS[name]()):
        print(f"{row[0]:<36}{row[1]:<26}{row[2]:<18}{row[3]}", flush=True)


if __name__ == "__main__":
    main()
