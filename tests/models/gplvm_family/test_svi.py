"""The stochastic variational Bayesian GPLVM (issue 18, item 1): ``inference='svi'``.

Truths checked: the minibatch bound with B = N against a dense reference written here (NumPy
kernel, Gauss–Hermite expectation over each q(x_n), the GP conditional written out); at the
closed-form optimal q(U) the uncollapsed bound equals the collapsed bound (Titsias 2009 —
the collapsed bound is the uncollapsed one maximised over q(U)); the N/B-scaled minibatch
estimate is unbiased (its mean over 10⁴ random minibatches within 4 standard errors); a short
fit recovers a planted latent; save/load; memmap input; bad arguments.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplvm
from gplvm.data.minibatch import RowSource, scan_columns
from gplvm.expectations import psi_statistics
from gplvm.kernels import RBF
from gplvm.models.gplvm_family.bound import Problem, bound_and_parts
from gplvm.models.gplvm_family.latent import IidLatent
from gplvm.models.gplvm_family.route import DenseRoute
from gplvm.models.gplvm_family.variants.svi.svi_bound import SviSetup, minibatch_bound
from gplvm.objectives import svi
from gplvm.objectives.collapsed import group_columns
from gplvm.transforms import inverse_softplus

from _format5 import as_format5

N, D, Q, M = 24, 5, 2, 6
LENGTHSCALE, VARIANCE, NOISE = np.array([0.9, 1.4]), 1.3, 0.2


def _problem(seed=0, missing=True):
    """Data (NaN = missing), q(X), Z, whitened q(U) with a generic mean and covariance."""
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(N, D))
    if missing:
        Y[rng.random((N, D)) < 0.2] = np.nan
        Y[:, 0] = rng.normal(size=N)          # one column complete, so a column has all rows
    X_mean = rng.normal(size=(N, Q))
    X_var = rng.uniform(0.05, 0.5, size=(N, Q))
    Z = rng.normal(size=(M, Q))
    a = rng.normal(size=(M, D))
    L = np.tril(0.3 * rng.normal(size=(M, M)), -1) + np.diag(rng.uniform(0.3, 1.0, M))
    return Y, X_mean, X_var, Z, a, L


def _kernel():
    return RBF(lengthscale=jnp.asarray(LENGTHSCALE), variance=VARIANCE)


def _params(X_mean, X_var, Z, a, L):
    g = {"Z": jnp.asarray(Z), "kernel": _kernel().unconstrained(),
         "noise_var": inverse_softplus(jnp.asarray(NOISE)), "a": jnp.asarray(a),
         "L": svi.raw_from_chol(jnp.asarray(L))}
    xl = {"X_mean": jnp.asarray(X_mean), "X_var": inverse_softplus(jnp.asarray(X_var))}
    return g, xl


def _svi_bound(Y, X_mean, X_var, Z, a, L, rule="analytic", scale=1.0):
    g, xl = _params(X_mean, X_var, Z, a, L)
    observed = jnp.asarray(~np.isnan(Y), dtype=float) if np.isnan(Y).any() else None
    setup = SviSetup(_kernel(), gplvm.expectations.resolve_rule(rule), 0.0)
    return float(minibatch_bound(g, xl, jnp.asarray(np.nan_to_num(Y)), observed, scale, setup))


# ------------------------------------------------------------------ dense reference (NumPy)
def _rbf(A, B):
    d2 = (((A[:, None, :] - B[None, :, :]) / LENGTHSCALE) ** 2).sum(-1)
    return VARIANCE * np.exp(-0.5 * d2)


def _reference_bound(Y, X_mean, X_var, Z, a, L):
    """Σ_n E_q(x_n) E_q(f_n)[log N(y_n | f_n, σ²)] − KL(q(U)‖p(U)) − KL(q(X)‖p(X)), with
    q(u_d) = N(L_u a_d, L_u L Lᵀ L_uᵀ): for fixed x the GP conditional gives f_nd Gaussian with
    mean k_nᵀK⁻¹m_d and variance k_nn − k_nᵀK⁻¹k_n + k_nᵀK⁻¹SK⁻¹k_n; the expectation over x
    is a 30 × 30 Gauss–Hermite grid per row (error far below 1e-10 for this smooth kernel)."""
    Kuu = _rbf(Z, Z)
    Lu = np.linalg.cholesky(Kuu)
    m, S = Lu @ a, Lu @ L @ L.T @ Lu.T
    Kinv = np.linalg.inv(Kuu)
    t, w = np.polynomial.hermite_e.hermegauss(30)
    nodes = np.stack(np.meshgrid(t, t, indexing="ij"), -1).reshape(-1, 2)
    weights = np.outer(w, w).ravel() / (2 * np.pi)
    total = 0.0
    for n in range(N):
        x = X_mean[n] + np.sqrt(X_var[n]) * nodes                     # (P, Q)
        k = _rbf(x, Z)                                                  # (P, M)
        mean = k @ Kinv @ m                                             # (P, D)
        var = VARIANCE - np.sum(k @ Kinv * k, 1) + np.sum(k @ Kinv @ S @ Kinv * k, 1)
        for d in np.flatnonzero(~np.isnan(Y[n])):
            ell = (-0.5 * np.log(2 * np.pi * NOISE)
                   - 0.5 * ((Y[n, d] - mean[:, d]) ** 2 + var) / NOISE)
            total += weights @ ell
    kl_u = sum(0.5 * (np.trace(Kinv @ S) + m[:, d] @ Kinv @ m[:, d] - M
                      + np.linalg.slogdet(Kuu)[1] - np.linalg.slogdet(S)[1]) for d in range(D))
    kl_x = 0.5 * np.sum(X_mean**2 + X_var - np.log(X_var) - 1.0)
    return total - kl_u - kl_x


@pytest.mark.parametrize("missing", [False, True])
def test_full_batch_bound_equals_dense_reference(missing):
    Y, X_mean, X_var, Z, a, L = _problem(missing=missing)
    reference = _reference_bound(Y, X_mean, X_var, Z, a, L)
    assert _svi_bound(Y, X_mean, X_var, Z, a, L) == pytest.approx(reference, rel=1e-9)


def test_optimal_q_u_gives_the_collapsed_bound():
    """Closed form S = K(K + βΨ2)⁻¹K, m = βK(K + βΨ2)⁻¹Ψ1ᵀY (complete data), whitened;
    the collapsed bound is the uncollapsed bound at this q(U), and it is the maximum."""
    Y, X_mean, X_var, Z, _, _ = _problem(missing=False)
    _, psi1, psi2 = (np.asarray(p) for p in psi_statistics(_kernel(), Z, X_mean, X_var))
    K = _rbf(Z, Z)
    beta = 1.0 / NOISE
    inner = np.linalg.inv(K + beta * psi2)
    S, m = K @ inner @ K, beta * K @ inner @ psi1.T @ Y
    Lu = np.linalg.cholesky(K)
    a = np.linalg.solve(Lu, m)
    Sw = np.linalg.solve(Lu, np.linalg.solve(Lu, S).T)
    L = np.linalg.cholesky(0.5 * (Sw + Sw.T))
    uncollapsed = _svi_bound(Y, X_mean, X_var, Z, a, L)
    problem = Problem(jnp.asarray(Y), group_columns(Y), IidLatent(), _kernel(), None,
                      DenseRoute(), 0.0)
    u = {"Z": jnp.asarray(Z), "kernel": _kernel().unconstrained(),
         "noise_var": inverse_softplus(jnp.asarray(NOISE)), "X_mean": jnp.asarray(X_mean),
         "X_var": inverse_softplus(jnp.asarray(X_var))}
    collapsed = float(bound_and_parts(u, problem)[0])
    assert uncollapsed == pytest.approx(collapsed, rel=1e-8)
    # the library's own closed form (its starting q(U)) is this one
    a_lib, L_lib = svi.optimal_whitened_q_u(psi1, psi2, K, Y, NOISE)
    np.testing.assert_allclose(a_lib, a, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(L_lib, L, rtol=1e-7, atol=1e-9)
    # a natural-gradient step of size 1 on all rows lands on it from anywhere
    _, _, _, _, a0, L0 = _problem(seed=5, missing=False)
    a_nat, L_nat = svi.natural_step(svi.WhitenedQ(jnp.asarray(a0), jnp.asarray(L0)), psi1,
                                    psi2, Y, svi.Hyper(K, NOISE), 1.0, 1.0)
    np.testing.assert_allclose(a_nat, a, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(L_nat, L, rtol=1e-7, atol=1e-9)
    rng = np.random.default_rng(1)
    assert _svi_bound(Y, X_mean, X_var, Z, a + 0.05 * rng.normal(size=a.shape), L) < collapsed


def test_minibatch_estimate_is_unbiased():
    """Mean of the N/B-scaled estimate over 10⁴ uniformly random B-subsets (missing entries
    included, Gauss–Hermite Ψ-statistics) within 4 standard errors of the full bound."""
    Y, X_mean, X_var, Z, a, L = _problem(seed=2)
    B, n_batches = 6, 10_000
    rule = gplvm.expectations.GaussHermite(n_points=4)
    full = _svi_bound(Y, X_mean, X_var, Z, a, L, rule=rule)
    g, xl = _params(X_mean, X_var, Z, a, L)
    Y0, observed = jnp.asarray(np.nan_to_num(Y)), jnp.asarray(~np.isnan(Y), dtype=float)
    setup = SviSetup(_kernel(), rule, 0.0)
    rng = np.random.default_rng(3)
    index = jnp.asarray(np.argsort(rng.random((n_batches, N)), axis=1)[:, :B])

    def estimate(idx):
        rows = jax.tree_util.tree_map(lambda x: x[idx], xl)
        return minibatch_bound(g, rows, Y0[idx], observed[idx], N / B, setup)

    values = np.asarray(jax.jit(jax.vmap(estimate))(index))
    se = values.std(ddof=1) / np.sqrt(n_batches)
    assert abs(values.mean() - full) < 4 * se
    assert se < 0.05 * abs(full)          # the test has power: minibatches do differ


def _planted(n=160, seed=0):
    """A 2-D latent mapped smoothly into 8 columns with noise sd 0.05."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    W = rng.normal(size=(6, 8))
    F = np.column_stack([np.sin(X), np.cos(X), X]) @ W
    return F + 0.05 * rng.normal(size=F.shape), X


def _model(**kw):
    args = {"n_components": 2, "n_inducing": 10, "inference": "svi", "batch_size": 40,
            "max_iter": 80, "learning_rate": 0.05, "progress": False, **kw}
    return gplvm.BayesianGPLVM(**args)


def _fit(Y, **kw):
    return _model(**kw).fit(Y)


def _affine_r2(X_true, X_fit):
    """R² of the best affine map from the fitted latent to the truth."""
    A = np.column_stack([X_fit, np.ones(len(X_fit))])
    resid = X_true - A @ np.linalg.lstsq(A, X_true, rcond=None)[0]
    return 1 - resid.var(0).sum() / X_true.var(0).sum()


@pytest.fixture(scope="module")
def planted_fit():
    Y, X = _planted()
    return _fit(Y), Y, X


def test_short_fit_improves_the_bound_and_recovers_the_latent(planted_fit):
    model, Y, X = planted_fit
    assert model.history_[-1] > model.history_[0] + 0.1 * abs(model.history_[0])
    assert model.elbo_ > model.history_[0] + 0.1 * abs(model.history_[0])
    assert _affine_r2(X, model.X_mean_) > 0.9
    # the fitted non-linear map explains the data far better than the best linear map from
    # two dimensions (PCA with two components)
    Yc = Y - Y.mean(0)
    U, s, Vt = np.linalg.svd(Yc, full_matrices=False)
    pca_resid = Yc - (U[:, :2] * s[:2]) @ Vt[:2]
    assert (Y - model.predict(model.X_mean_)).std() < 0.5 * pca_resid.std()


def test_same_seed_same_fit_and_save_load(planted_fit, tmp_path):
    model, Y, _ = planted_fit
    again = _fit(Y)
    np.testing.assert_array_equal(again.X_mean_, model.X_mean_)
    assert again.elbo_ == model.elbo_
    model.save(tmp_path / "svi.npz")
    loaded = gplvm.load(tmp_path / "svi.npz")
    assert loaded.inference == "svi" and loaded.batch_size == 40
    X_new = model.transform(Y[:4])
    np.testing.assert_array_equal(loaded.transform(Y[:4]), X_new)
    np.testing.assert_array_equal(loaded.predict(X_new), model.predict(X_new))
    # a new row's latent lands near the fitted latent of the same (training) row
    assert np.max(np.abs(X_new - model.X_mean_[:4])) < 0.2 * model.X_mean_.std()
    Y_missing = Y[:4].copy()
    Y_missing[:, 0] = np.nan
    filled = loaded.impute(Y_missing)[:, 0]
    assert np.max(np.abs(filled - Y[:4, 0])) < 0.2 * Y[:, 0].std()
    assert loaded.sample(3)[0].shape == (3, Y.shape[1])


def test_memmap_input_gives_the_in_memory_fit(planted_fit, tmp_path):
    _, Y, _ = planted_fit
    np.save(tmp_path / "Y.npy", Y)
    mapped = np.load(tmp_path / "Y.npy", mmap_mode="r")
    from_memory, from_disk = _fit(Y, max_iter=3), _fit(mapped, max_iter=3)
    # same rows in the same order; only the streamed column moments differ by round-off
    np.testing.assert_allclose(from_disk.X_mean_, from_memory.X_mean_, rtol=1e-7, atol=1e-9)
    assert from_disk._train_Y is None             # the memmap is not kept
    np.testing.assert_allclose(from_disk.transform(Y[:4]), from_memory.transform(Y[:4]),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw, match", [
    ({"batch_size": 81}, "batch_size=81 exceeds the 80 rows"),
    ({"batch_size": 0}, "batch_size=0"),
    ({"batch_size": 2.5}, "batch_size=2.5"),
    ({"inference": "sgd"}, "inference='sgd'"),
    ({"inference": None}, "inference=None"),
])
def test_bad_arguments_are_refused(kw, match):
    Y, _ = _planted(n=80)
    with pytest.raises(ValueError, match=match):
        _fit(Y, **kw)


def test_svi_refuses_the_dynamical_prior():
    Y, _ = _planted(n=80)
    with pytest.raises(ValueError, match="iid latent prior only"):
        gplvm.BayesianGPLVM(inference="svi", progress=False).fit(Y, times=np.arange(80.0))


def test_scan_columns_over_chunks_gives_numpys_moments():
    rng = np.random.default_rng(5)
    Y = 1e3 + rng.normal(size=(50, 4)) * [1.0, 2.0, 0.5, 3.0]   # a large shift: the scan
    Y[rng.random(Y.shape) < 0.2] = np.nan                      # centres before squaring
    Y[:, 0] = rng.normal(size=50)
    scan = scan_columns(RowSource(Y), chunk_rows=7)             # 8 chunks, the last of 1 row
    np.testing.assert_allclose(scan.mean, np.nanmean(Y, axis=0), rtol=1e-13)
    np.testing.assert_allclose(scan.std, np.nanstd(Y, axis=0), rtol=1e-9)
    assert scan.has_missing


def test_backed_h5ad_gives_the_memmap_fit_bit_for_bit(planted_fit, tmp_path):
    import anndata                  # in the test extra (pyproject.toml)
    from scipy import sparse

    import gplvm.anndata

    _, Y, _ = planted_fit
    np.save(tmp_path / "Y.npy", Y)
    reference = _fit(np.load(tmp_path / "Y.npy", mmap_mode="r"), max_iter=3)
    anndata.AnnData(Y).write_h5ad(tmp_path / "dense.h5ad")
    anndata.AnnData(sparse.csr_matrix(Y)).write_h5ad(tmp_path / "csr.h5ad")
    for name in ("dense", "csr"):
        backed = anndata.read_h5ad(tmp_path / f"{name}.h5ad", backed="r")
        for Y_disk in (backed, backed.X):
            model = _fit(Y_disk, max_iter=3)
            np.testing.assert_array_equal(model.X_mean_, reference.X_mean_)
            assert model.elbo_ == reference.elbo_ and model._train_Y is None
    backed = anndata.read_h5ad(tmp_path / "dense.h5ad", backed="r")
    model = gplvm.anndata.fit(backed, _model(max_iter=3))
    np.testing.assert_array_equal(backed.obsm["X_gplvm"], reference.X_mean_)
    anndata.AnnData(sparse.csc_matrix(Y)).write_h5ad(tmp_path / "csc.h5ad")
    with pytest.raises(ValueError, match="CSC .* write X as CSR"):
        _fit(anndata.read_h5ad(tmp_path / "csc.h5ad", backed="r"))
    with pytest.raises(ValueError, match="in-memory AnnData; give its matrix"):
        _fit(anndata.AnnData(Y))


def test_checkpoint_kill_or_ctrl_c_then_resume_equals_one_run(planted_fit, tmp_path,
                                                             monkeypatch):
    """A run interrupted mid-epoch (Ctrl-C in the process, or killed: the file of an earlier
    step) and resumed replays the uninterrupted run's steps on the same numbers: the same
    latents, parameters, history and bound, bit for bit.  Data read from disk must be passed
    to resume(Y) when the process that read them is gone."""
    from gplvm.models.gplvm_family.variants.svi import svi_fit

    _, Y, _ = planted_fit
    epochs = 3                                     # 160 rows in batches of 40: 4 steps each
    one = _fit(Y, max_iter=epochs)
    real_step, calls, path = svi_fit._step, [0], tmp_path / "run.npz"

    def step_then_stop(*args, **kwargs):          # Ctrl-C before the 8th step (epoch 2)
        calls[0] += 1
        if calls[0] == 6:                         # a killed process leaves this file behind
            (tmp_path / "killed.npz").write_bytes(path.read_bytes())
        if calls[0] == 8:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    np.save(tmp_path / "Y.npy", Y)
    on_disk = np.load(tmp_path / "Y.npy", mmap_mode="r")
    disk_one = _fit(on_disk, max_iter=epochs)
    monkeypatch.setattr(svi_fit, "_step", step_then_stop)
    stopped = _fit(Y, max_iter=epochs, checkpoint=path, checkpoint_interval=0)
    monkeypatch.setattr(svi_fit, "_step", real_step)
    assert stopped.interrupted_ and len(stopped.history_) == 1 and np.isfinite(stopped.elbo_)
    killed = gplvm.load(tmp_path / "killed.npz")
    assert killed.interrupted_ and np.isnan(killed.elbo_)       # written mid-run
    as_format5(tmp_path / "killed.npz", tmp_path / "format5.npz")  # run state: ``_resume_``
    old = gplvm.load(tmp_path / "format5.npz")
    for model in (stopped, gplvm.load(path), killed, old):   # Ctrl-C in this process, files
        model.resume()
        assert not model.interrupted_ and not hasattr(model, "_fit_state_")
        np.testing.assert_array_equal(model.X_mean_, one.X_mean_)
        np.testing.assert_array_equal(model.X_var_, one.X_var_)
        np.testing.assert_array_equal(model.history_, one.history_)
        assert model.elbo_ == one.elbo_
        for a, b in zip(jax.tree_util.tree_leaves(model.params_),
                        jax.tree_util.tree_leaves(one.params_), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not gplvm.load(path).interrupted_                     # the finished run's file
    # data on disk: a checkpoint does not hold them
    calls[0] = 0
    monkeypatch.setattr(svi_fit, "_step", step_then_stop)
    _fit(on_disk, max_iter=epochs, checkpoint=path, checkpoint_interval=0)
    monkeypatch.setattr(svi_fit, "_step", real_step)
    with pytest.raises(ValueError, match="read its rows from disk.*resume\\(Y\\)"):
        gplvm.load(path).resume()
    with pytest.raises(ValueError, match="shape"):
        gplvm.load(path).resume(Y[:-1])
    # other data of the same shape (issue 31): the same values times 7, a memmap of other
    # numbers, one changed entry of a kept row -- refused, the checkpoint left as it was
    other = np.lib.format.open_memmap(tmp_path / "other.npy", mode="w+", dtype=float,
                                      shape=Y.shape)
    other[:] = Y[::-1]
    other.flush()
    changed = np.array(Y, copy=True)
    changed[0, 0] = 1.0 if np.isnan(changed[0, 0]) else changed[0, 0] + 1.0
    for wrong in (np.asarray(Y) * 7, other, changed):
        with pytest.raises(ValueError, match="Y is not the data this fit read"):
            gplvm.load(path).resume(wrong)
    resumed = gplvm.load(path).resume(on_disk)
    np.testing.assert_array_equal(resumed.X_mean_, disk_one.X_mean_)
    assert resumed.elbo_ == disk_one.elbo_


# (Ctrl-C while a step's results are written: tests/inference/test_run.py, atomic())


def test_an_error_inside_a_step_leaves_the_run_where_its_last_step_ended(planted_fit, tmp_path,
                                                                          monkeypatch):
    """An exception other than Ctrl-C raised inside a step (the 7th, in epoch 2) propagates,
    and the model holds the run state of the 6 committed steps (its host arrays and its
    counters agree): resume() from it gives the uninterrupted run bit for bit."""
    from gplvm.models.gplvm_family.variants.svi import svi_fit

    _, Y, _ = planted_fit
    one = _fit(Y, max_iter=3)                      # 160 rows in batches of 40: 4 steps each
    real_step, calls = svi_fit._step, [0]

    def failing(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 7:
            raise RuntimeError("a fault inside the step")
        return real_step(*args, **kwargs)

    model = _model(max_iter=3, checkpoint=tmp_path / "run.npz", checkpoint_interval=0)
    monkeypatch.setattr(svi_fit, "_step", failing)
    with pytest.raises(RuntimeError, match="a fault inside the step"):
        model.fit(Y)
    monkeypatch.setattr(svi_fit, "_step", real_step)
    state = model._fit_state_
    assert (state.n_step, len(state.history), state.step_in_epoch) == (6, 1, 2)
    model.resume()
    np.testing.assert_array_equal(model.X_mean_, one.X_mean_)
    np.testing.assert_array_equal(model.history_, one.history_)
    assert model.elbo_ == one.elbo_
