"""Checkpoint and resume of the optimisation-based estimators (issue 16 item 4): Ctrl-C or a kill
loses at most ``checkpoint_interval`` seconds, and resuming gives bit for bit the result of an
uninterrupted run with the same seed.

Why bit for bit is the right test: a resumed run replays the same compiled step on the same
parameters, optax state and PRNG key, so every floating-point operation is the one the
uninterrupted run does; any difference (a lost Adam moment, a fresh L-BFGS memory, a re-split
key, a reset stopping count) changes the iterates, which ``assert_array_equal`` catches.
"""

from __future__ import annotations

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import gplvm
from gplvm.inference.optimise import OptimOptions, minimise
from gplvm.models.gplvm_family import collapsed_run as bgplvm_module  # its optimiser runs
from gplvm.models import _blr_fit
from gplvm.models import glm as glm_module
from gplvm.models import structured as structured_module
from gplvm.models.gplvm_family.variants.dp import dp_fit
from _format5 import as_format5

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning", "ignore:.*interrupted:RuntimeWarning")

K = 6       # the iteration after which a run is stopped


class Killed(BaseException):
    """A process killed mid-fit: nothing catches it, nothing is saved on the way out."""


def _bgplvm_case():
    Y = np.random.default_rng(0).normal(size=(30, 5))
    kw = dict(n_components=2, n_inducing=5, max_iter=15, optimizer="lbfgs", random_state=0,
              progress=False)
    return gplvm.BayesianGPLVM, kw, (Y,), bgplvm_module


def _glm_case():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    kw = dict(n_features=10, n_mixture=2, n_iter=15, batch_size=20, random_state=0,
              progress=False)
    return gplvm.BayesianGLM, kw, (X, y), glm_module


def _structured_case():
    images = np.random.default_rng(0).normal(size=(12, 4, 4))
    kw = dict(n_components=2, n_inducing=4, max_iter=15, random_state=0, progress=False)
    return gplvm.StructuredGPLVM, kw, (images,), structured_module


CASES = {"BayesianGPLVM": _bgplvm_case, "BayesianGLM": _glm_case,
         "StructuredGPLVM": _structured_case}


def _stop_at(monkeypatch, module, exc):
    """Make the estimator's optimiser raise ``exc`` from its callback after iteration K."""
    real = module.minimise

    def callback(i, params, value):
        if i == K:
            raise exc

    monkeypatch.setattr(module, "minimise", lambda *a, options, **kw: real(
        *a, options=options._replace(callback=callback), **kw))
    return lambda: monkeypatch.setattr(module, "minimise", real)


def _outputs(model, data):
    """Everything a fit determines: parameters, history and predictions."""
    if isinstance(model, gplvm.BayesianGPLVM):
        leaves = jax.tree_util.tree_leaves(model.params_)
        return [*leaves, model.history_, model.X_mean_, model.X_var_,
                model.predict(model.X_mean_[:4], return_var=True)[1],
                model.predict(model.X_mean_[:4])]
    if isinstance(model, (gplvm.StructuredGPLVM, gplvm.DPGPLVM)):
        # the fitted state every prediction is computed from, and the DP's q(z), q(V), q(α)
        state = (model.params_, model.fitted_, getattr(model, "dp_state_", None))
        return [*jax.tree_util.tree_leaves(state), model.history_, model.X_mean_,
                model.X_var_, model.elbo_, getattr(model, "n_merges_", 0)]
    return [model.weights_mean_, model.weights_var_, model.prior_var_, model.history_,
            *model.predict(data[0][:4], return_std=True)]


def _assert_same(a, b, data):
    for x, y in zip(_outputs(a, data), _outputs(b, data), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert a.n_iter_ == b.n_iter_ and a.converged_ == b.converged_
    assert not a.interrupted_ and not b.interrupted_


@pytest.mark.parametrize("name", CASES)
def test_ctrl_c_then_resume_equals_one_run(monkeypatch, tmp_path, name):
    cls, kw, data, module = CASES[name]()
    full = cls(**kw).fit(*data)
    assert full.n_iter_ > K + 1        # the stop falls inside the run
    restore = _stop_at(monkeypatch, module, KeyboardInterrupt)
    path = tmp_path / "part.npz"        # written on Ctrl-C (the interval is never reached)
    part = cls(**kw, checkpoint=path, checkpoint_interval=3600).fit(*data)
    restore()
    assert part.interrupted_ and part.n_iter_ == K + 1
    as_format5(path, tmp_path / "format5.npz")     # its run state a dict ``_resume_``
    old = gplvm.load(tmp_path / "format5.npz")
    assert type(old._fit_state_) is type(part._fit_state_) and "_resume_" not in vars(old)
    _assert_same(gplvm.load(path).resume(), full, data)
    _assert_same(old.resume(), full, data)
    _assert_same(part.resume(), full, data)
    assert full.resume() is full       # finished: nothing to resume


@pytest.mark.parametrize("name", CASES)
def test_killed_run_loses_at_most_the_interval(monkeypatch, tmp_path, name):
    """checkpoint_interval=0 writes after every iteration: a run killed after iteration K
    leaves a file holding K + 1 iterations, which resumes to the uninterrupted result; with an
    interval longer than the run nothing is written before the end."""
    cls, kw, data, module = CASES[name]()
    full = cls(**kw).fit(*data)
    path, never = tmp_path / "run.npz", tmp_path / "never.npz"
    restore = _stop_at(monkeypatch, module, Killed())
    with pytest.raises(Killed):
        cls(**kw, checkpoint=path, checkpoint_interval=0).fit(*data)
    with pytest.raises(Killed):
        cls(**kw, checkpoint=never, checkpoint_interval=3600).fit(*data)
    restore()
    assert not never.exists()
    saved = gplvm.load(path)
    assert saved.interrupted_ and saved.n_iter_ == K + 1
    np.testing.assert_array_equal(saved.history_, full.history_[:K + 1])
    resumed = saved.resume()
    _assert_same(resumed, full, data)
    _assert_same(gplvm.load(path), full, data)      # the finished run's file


# ------------------------------------------------------------ DPGPLVM: checkpoints between sweeps
def _dp_case(**extra):
    Y = np.random.default_rng(1).normal(size=(20, 6))
    kw = dict(n_components=2, n_inducing=4, truncation=3, init="random", max_iter=40,
              n_warmup=3, steps_per_update=3, merge_every=2, merge_steps=3, random_state=0,
              progress=False, **extra)
    return kw, Y


def _dp_stop_after(monkeypatch, n_steps, exc):
    """Raise ``exc`` from dp_fit's L-BFGS callback after ``n_steps`` gradient steps in all
    (over every L-BFGS run of the fit: warm-up, sweeps and merge refinements)."""
    real, count = dp_fit.minimise, [0]

    def callback(i, params, value):
        count[0] += 1
        if count[0] == n_steps:
            raise exc

    monkeypatch.setattr(dp_fit, "minimise", lambda *a, options=OptimOptions(), **kw: real(
        *a, options=options._replace(callback=callback), **kw))
    return lambda: monkeypatch.setattr(dp_fit, "minimise", real) or count[0]


@pytest.mark.parametrize("n_init", [1, 2])
def test_dpgplvm_ctrl_c_or_kill_then_resume_equals_one_run(monkeypatch, tmp_path, n_init):
    """A DP-GP-LVM stopped mid-sweep (Ctrl-C, or a kill that saves nothing on the way out)
    resumes from the last sweep boundary to the uninterrupted result; with n_init=2 the stop
    falls in the second start, after the first has finished."""
    kw, Y = _dp_case(n_init=n_init)
    counting = _dp_stop_after(monkeypatch, -1, Killed())     # counts the steps, never stops
    full = gplvm.DPGPLVM(**kw).fit(Y)
    n_full = counting()
    per_start = full.n_iter_ if n_init == 1 else gplvm.DPGPLVM(**{**kw, "n_init": 1}).fit(
        Y).n_iter_
    stop = (per_start if n_init == 2 else 0) + 11      # inside the second (or only) start
    assert full.n_iter_ > 11 + 6 or n_init == 2        # the stop falls inside the run
    restore = _dp_stop_after(monkeypatch, stop, KeyboardInterrupt)
    path = tmp_path / "part.npz"
    part = gplvm.DPGPLVM(**kw, checkpoint=path, checkpoint_interval=3600).fit(Y)
    restore()
    assert part.interrupted_ and part._fit_state_.start == n_init - 1   # in the last start
    as_format5(path, tmp_path / "format5.npz")     # its run state a dict ``_resume_``
    _assert_same(gplvm.load(tmp_path / "format5.npz").resume(), full, Y)
    _assert_same(gplvm.load(path).resume(), full, Y)
    _assert_same(part.resume(), full, Y)
    killed = tmp_path / "killed.npz"
    restore = _dp_stop_after(monkeypatch, stop, Killed())
    with pytest.raises(Killed):
        gplvm.DPGPLVM(**kw, checkpoint=killed, checkpoint_interval=0).fit(Y)
    restore()
    saved = gplvm.load(killed)
    assert saved.interrupted_ and saved.n_iter_ < 11     # written at the last sweep boundary
    counting = _dp_stop_after(monkeypatch, -1, Killed())     # counts, never stops
    _assert_same(saved.resume(), full, Y)
    assert counting() < n_full              # it went on from the file, not from the start
    _assert_same(gplvm.load(killed), full, Y)      # the finished run's file


# ------------------------------------------ BayesianLinearRegression: L-BFGS restarts, resumed
def _blr_case():
    """Three L-BFGS runs of 15 iterations each; the second wins (so a resume that skipped a
    restart, or took the wrong best, would change the fitted values)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    kw = dict(n_features=10, n_restarts=2, max_iter=15, random_state=1)
    return kw, X, y


def _blr_runs(monkeypatch, runs, stop=None, exc=KeyboardInterrupt):
    """Record (desc, history, the iterations this call ran) of every L-BFGS run of the
    restarts in ``runs``; raise ``exc`` from the callback of the run ``stop[0]`` ("BLR fit 2":
    the second) after iteration ``stop[1]``."""
    real = minimise         # gplvm.inference's, not an earlier spy

    def spy(*a, desc, options, **kw):
        done = []

        def callback(i, params, value):
            done.append(i)
            if (desc, i) == stop:
                raise exc

        res = real(*a, desc=desc, options=options._replace(callback=callback), **kw)
        runs.append((desc, res.history, len(done)))
        return res

    monkeypatch.setattr(_blr_fit, "minimise", spy)


def _assert_blr_same(a, b, X):
    for x, y in zip([*a.weights_posterior(), a.prior_var_, a.noise_var_, a.history_,
                     a.log_marginal_likelihood_, *a.predict(X[:4], return_std=True)],
                    [*b.weights_posterior(), b.prior_var_, b.noise_var_, b.history_,
                     b.log_marginal_likelihood_, *b.predict(X[:4], return_std=True)],
                    strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert (a.n_iter_, a.converged_) == (b.n_iter_, b.converged_)
    assert not a.interrupted_ and not b.interrupted_


@pytest.mark.parametrize("restart", [0, 1, 2])
def test_blr_ctrl_c_then_resume_equals_one_run(monkeypatch, tmp_path, restart):
    """Ctrl-C after iteration K of the first, second (the winner) or last L-BFGS run: the
    resumed fit continues that run and runs the restarts after it, exactly as the
    uninterrupted fit runs them (the sequence of runs is checked, not only the winner)."""
    kw, X, y = _blr_case()
    full_runs, part_runs, resumed_runs = [], [], []
    _blr_runs(monkeypatch, full_runs)
    full = gplvm.BayesianLinearRegression(**kw).fit(X, y)
    assert [(len(h), n) for _, h, n in full_runs] == [(15, 15)] * 3
    np.testing.assert_array_equal(full.history_, full_runs[1][1])     # the second wins
    desc = f"BLR fit {restart + 1}"
    _blr_runs(monkeypatch, part_runs, stop=(desc, K))
    path = tmp_path / "part.npz"        # written on Ctrl-C (the interval is never reached)
    part = gplvm.BayesianLinearRegression(**kw, checkpoint=path,
                                          checkpoint_interval=3600).fit(X, y)
    assert part.interrupted_ and part._fit_state_.restart == restart
    assert [run[0] for run in part_runs] == [run[0] for run in full_runs[:restart + 1]]
    np.testing.assert_array_equal(part_runs[-1][1], full_runs[restart][1][:K + 1])
    with pytest.raises(ValueError, match="keeps its data"):
        part.resume(X)
    _blr_runs(monkeypatch, resumed_runs)
    loaded = gplvm.load(path)
    assert type(loaded._fit_state_) is type(part._fit_state_)
    _assert_blr_same(loaded.resume(), full, X)
    # the stopped run, from where it stopped (not from its start), and the runs after it
    assert [n for *_, n in resumed_runs] == [15 - (K + 1)] + [15] * (2 - restart)
    for (d, h, _), (d_full, h_full, _) in zip(resumed_runs, full_runs[restart:], strict=True):
        assert d == d_full
        np.testing.assert_array_equal(h, h_full)
    _assert_blr_same(part.resume(), full, X)
    _assert_blr_same(gplvm.load(path), full, X)     # the finished fit's file
    assert "_fit_state_" not in vars(gplvm.load(path))
    assert full.resume() is full       # finished: nothing to resume


def test_a_supervised_resume_warns_as_its_fit_does(monkeypatch):
    """resume() gives the fit's ConvergenceWarning when the finished run has not settled (here:
    every L-BFGS run stops at its 15 iterations), once: a finished fit's resume() warns no more
    (the BLR's; the GLM's is the same SupervisedResume)."""
    kw, X, y = _blr_case()
    with pytest.warns(ConvergenceWarning, match="max_iter=15"):
        gplvm.BayesianLinearRegression(**kw).fit(X, y)
    _blr_runs(monkeypatch, [], stop=("BLR fit 3", K))
    part = gplvm.BayesianLinearRegression(**kw).fit(X, y)
    _blr_runs(monkeypatch, [])
    with pytest.warns(ConvergenceWarning, match="max_iter=15"):
        part.resume()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        part.resume()                   # finished: nothing run, nothing to warn about


def test_blr_ctrl_c_in_its_only_run_at_a_non_finite_value_is_a_clear_error(monkeypatch):
    """Ctrl-C in the first L-BFGS run where eq. 14 is non-finite leaves no run to show: the
    fit says so (it crashed on the missing run)."""
    kw, X, y = _blr_case()
    _blr_runs(monkeypatch, [], stop=("BLR fit 1", K))
    monkeypatch.setattr(_blr_fit, "neg_lml_jit", lambda *a: np.nan)
    with pytest.raises(RuntimeError, match="non-finite marginal likelihood"):
        gplvm.BayesianLinearRegression(**kw).fit(X, y)


def test_blr_killed_run_resumes_from_its_last_checkpoint(monkeypatch, tmp_path):
    """checkpoint_interval=0: a fit killed after iteration K of its second run leaves a file
    holding the first run (finished) and K + 1 iterations of the second; it resumes to the
    uninterrupted fit.  A fit killed mid-run with a long interval leaves no file."""
    kw, X, y = _blr_case()
    full = gplvm.BayesianLinearRegression(**kw).fit(X, y)
    path, never = tmp_path / "run.npz", tmp_path / "never.npz"
    _blr_runs(monkeypatch, [], stop=("BLR fit 2", K), exc=Killed())
    with pytest.raises(Killed):
        gplvm.BayesianLinearRegression(**kw, checkpoint=path, checkpoint_interval=0).fit(X, y)
    with pytest.raises(Killed):
        gplvm.BayesianLinearRegression(**kw, checkpoint=never,
                                       checkpoint_interval=3600).fit(X, y)
    assert not never.exists()
    saved = gplvm.load(path)
    state = saved._fit_state_
    assert saved.interrupted_ and state.restart == 1 and len(state.state.history) == K + 1
    assert state.best.n_iter == 15
    resumed_runs = []
    _blr_runs(monkeypatch, resumed_runs)
    _assert_blr_same(saved.resume(), full, X)
    assert [(d, n) for d, _, n in resumed_runs] == [("BLR fit 2", 15 - (K + 1)),
                                                    ("BLR fit 3", 15)]


def _rosenbrock(p):
    return (1.0 - p["x"]) ** 2 + 100.0 * (p["y"] - p["x"] ** 2) ** 2


def _noisy_rosenbrock(p, key):
    return _rosenbrock(p) + 0.01 * jax.random.normal(key)


@pytest.mark.parametrize("method", ["lbfgs", "adam"])
def test_minimise_continues_bit_for_bit_from_any_checkpoint(method):
    """Every state handed to ``checkpoint`` continues to the uninterrupted run exactly, the
    one taken as the stopping test is met included (the run then stops at once)."""
    start = {"x": jnp.asarray(-1.2), "y": jnp.asarray(1.0)}
    fun = _noisy_rosenbrock if method == "adam" else _rosenbrock
    opts = dict(method=method, n_iter=60, progress=False)
    step = OptimOptions(learning_rate=0.05, patience=3)
    states = []
    full = minimise(fun, start, options=step._replace(checkpoint=states.append,
                                                      checkpoint_interval=0), **opts)
    assert len(states) == full.n_iter
    for state in states[::7] + states[-1:]:
        again = minimise(fun, start, options=step._replace(start=state), **opts)
        np.testing.assert_array_equal(again.history, full.history)
        assert again.converged == full.converged and again.n_iter == full.n_iter
        for name in start:
            assert float(again.params[name]) == float(full.params[name])


def test_lbfgsb_resumes_from_the_checkpointed_parameters(monkeypatch):
    """SciPy's L-BFGS-B memory cannot be saved: resume() restarts it from the parameters of the
    interrupted run, keeps the history so far and stays within max_iter."""
    cls, kw, data, module = _bgplvm_case()
    kw = {**kw, "optimizer": "lbfgsb"}
    full = cls(**kw).fit(*data)
    restore = _stop_at(monkeypatch, module, KeyboardInterrupt)
    part = cls(**kw).fit(*data)
    restore()
    assert part.interrupted_ and part.n_iter_ == K + 1
    resumed = part.resume()
    assert not resumed.interrupted_ and K + 1 < resumed.n_iter_ <= kw["max_iter"]
    np.testing.assert_array_equal(resumed.history_[:K + 1], full.history_[:K + 1])
    assert np.all(np.isfinite(resumed.history_)) and np.all(np.isfinite(resumed.X_mean_))


HOLD_LOCK = """
import sys
from gplvm.models._checkpoint import checkpoint_lock
with checkpoint_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()        # until the test closes our standard input
"""


@pytest.mark.parametrize("name", ["BayesianGLM"])
def test_a_checkpoint_written_by_another_process_is_refused_naming_it(tmp_path, name):
    """Two fits given one ``checkpoint=`` would write it in turn (and a resume could continue
    the other run): while another process holds the file, a fit is refused before it starts,
    naming that process; once it has ended (its lock goes with it), the same fit runs."""
    import subprocess
    import sys

    from gplvm.models._checkpoint import CheckpointInUseError

    cls, kw, data, _ = CASES[name]()
    path = tmp_path / "run.gplvm"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CheckpointInUseError, match=f"another process \\(pid {holder.pid}\\)"):
            cls(**kw, checkpoint=str(path)).fit(*data)
        assert not path.exists()
    finally:
        holder.stdin.close()
        holder.wait()
    cls(**kw, checkpoint=str(path)).fit(*data)
    assert gplvm.load(path).n_iter_ >= 1


def test_temporary_files_of_killed_savers_are_removed_by_the_next_save(tmp_path):
    """A saver killed mid-write leaves ``.<name>.<pid>-<hex>.tmp``; the next save of that name
    removes those of processes that no longer exist and keeps a live writer's."""
    import subprocess
    import sys

    cls, kw, data, _ = CASES["BayesianGLM"]()
    model = cls(**kw).fit(*data)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".model.gplvm.{dead}-0badf00d.tmp"
    live = tmp_path / f".model.gplvm.{os.getpid()}-feedf00d.tmp"
    other = tmp_path / f".other.gplvm.{dead}-0badf00d.tmp"
    for path in (stale, live, other):
        path.write_bytes(b"partial")
    model.save(tmp_path / "model.gplvm")
    assert not stale.exists() and live.exists() and other.exists()
    assert gplvm.load(tmp_path / "model.gplvm").n_iter_ == model.n_iter_


def test_every_checkpointing_fit_runs_holding_its_checkpoint():
    """Every estimator with ``checkpoint=`` runs its fit through ``holding_checkpoint`` (the
    lock the test above exercises on one of them)."""
    from gplvm.models import bgplvm, dpgplvm, glm, rflvm, structured

    from gplvm.models import linear_regression

    runs = [bgplvm.BayesianGPLVM._run, bgplvm.BayesianGPLVM._run_svi, dpgplvm.DPGPLVM._run,
            glm.BayesianGLM._run, rflvm.RFLVM._run, structured.StructuredGPLVM._run,
            linear_regression.BayesianLinearRegression._run]
    for run in runs:
        assert getattr(run, "__wrapped__", None) is not None, run.__qualname__
    for cls in (gplvm.BayesianGPLVM, gplvm.DPGPLVM, gplvm.BayesianGLM, gplvm.RFLVM,
                gplvm.StructuredGPLVM, gplvm.BayesianLinearRegression):
        assert "checkpoint" in cls().get_params()


def test_every_resume_has_one_signature_and_refuses_data_a_fit_keeps(tmp_path):
    """resume(Y=None) on every estimator with a long fit (issue 33); Y is data only a fit that
    read them from disk needs (BayesianGPLVM's SVI on a memmap), refused elsewhere."""
    import inspect

    classes = (gplvm.BayesianGPLVM, gplvm.DPGPLVM, gplvm.BayesianGLM, gplvm.RFLVM,
               gplvm.StructuredGPLVM, gplvm.BayesianLinearRegression)
    signatures = {str(inspect.signature(cls.resume)) for cls in classes}
    assert signatures == {"(self, Y=None)"}, signatures
    cls, kw, args, _ = CASES["BayesianGLM"]()
    model = cls(**kw).fit(*args)
    with pytest.raises(ValueError, match="keeps its data"):
        model.resume(args[0])
    assert model.resume() is model                       # finished: returned unchanged
