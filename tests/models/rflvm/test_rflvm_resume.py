"""RFLVM checkpoints (API.md: "can checkpoint to a file and resume to exactly the result an
uninterrupted run would give"): Ctrl-C + resume(), a killed run resumed from its file, and a
model saved by gplvm before issue 11 (format 1) loaded, upgraded and still giving its outputs."""

from __future__ import annotations

import numpy as np
import pytest

import gplvm
from _paths import LEGACY as _LEGACY_FILES
from gplvm.inference.run import CheckpointTimer

LEGACY = str(_LEGACY_FILES / "rflvm")
KW = dict(sampler="gibbs", likelihood="poisson", n_features=10, n_iter=16, burn_in=8, n_chains=2,
          block_size=4, progress=False, random_state=3)


def _data():
    return np.random.default_rng(7).poisson(3.0, (30, 6)).astype(float)


def _assert_same(a, b):
    for name in ("X_samples_", "X_mean_", "history_", "W_samples_", "beta_samples_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in a.sampler_info_:
        np.testing.assert_array_equal(a.sampler_info_[name], b.sampler_info_[name], err_msg=name)
    assert a.n_iter_ == b.n_iter_ == KW["n_iter"] and not a.interrupted_


def _stop_after(monkeypatch, n_blocks, exc):
    """Raise ``exc`` at the end of block ``n_blocks`` (before that block's checkpoint write):
    the driver's checkpoint timer is wrapped in one asked at every block end."""
    import gplvm.models.rflvm.run as module
    real, calls = module.run_chains, []

    def with_stop(*args, checkpoint=None, **kwargs):
        def write(partial):
            calls.append(partial.n_done)
            if len(calls) == n_blocks:
                raise exc
            if checkpoint is not None:
                checkpoint.after_step(partial)

        return real(*args, checkpoint=CheckpointTimer(write, 0), **kwargs)

    monkeypatch.setattr(module, "run_chains", with_stop)
    return lambda: monkeypatch.setattr(module, "run_chains", real)


pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.mark.filterwarnings("ignore:.*interrupted:RuntimeWarning")
def test_ctrl_c_then_save_load_resume_equals_one_run(monkeypatch, tmp_path):
    Y = _data()
    full = gplvm.RFLVM(**KW).fit(Y)
    restore = _stop_after(monkeypatch, 3, KeyboardInterrupt)     # after 12 of 16 sweeps
    part = gplvm.RFLVM(**KW).fit(Y)
    restore()
    assert part.interrupted_ and part.n_iter_ == 12
    part.save(tmp_path / "part.npz")
    _assert_same(gplvm.load(tmp_path / "part.npz").resume(), full)
    _assert_same(part.resume(), full)
    assert full.resume() is full                                  # finished: nothing to do


def test_killed_run_resumes_from_its_checkpoint_file(monkeypatch, tmp_path):
    Y = _data()
    full = gplvm.RFLVM(**KW).fit(Y)
    path = tmp_path / "ckpt.npz"
    restore = _stop_after(monkeypatch, 3, RuntimeError("process killed"))
    with pytest.raises(RuntimeError, match="killed"):
        gplvm.RFLVM(checkpoint=path, checkpoint_interval=0.0, **KW).fit(Y)
    restore()
    saved = gplvm.load(path)              # written after block 2 (during burn-in: 8 sweeps)
    assert saved.n_iter_ == 8
    resumed = saved.resume()
    _assert_same(resumed, full)
    assert gplvm.load(path).n_iter_ == 16                         # the file is final as well


def _upgraded_legacy_model():
    """The format-1 file; gplvm.load passes its attributes through RFLVM._upgrade_fitted."""
    return gplvm.load(f"{LEGACY}.gplvm")


def test_a_format_1_file_gives_its_saved_outputs_and_runs_today(tmp_path):
    model = _upgraded_legacy_model()
    expected = np.load(f"{LEGACY}_expected.npz")
    np.testing.assert_array_equal(model.X_mean_, expected["X_mean"])
    # predict now runs in blocks of a fixed number of rows (a row's value may not depend on the
    # call's size), so its sums may be blocked differently from the whole-batch product of the
    # version that wrote the file: equal to rounding
    np.testing.assert_allclose(model.predict(expected["X"]), expected["predict"], rtol=1e-13,
                               atol=0)
    # The file predates the slice diagnostics: NaN, and the frequency acceptance it had.
    info = model.sampler_info_
    assert model._upgraded_from_format_ == 1
    assert np.all(np.isnan(info["n_proposals_X"])) and np.all(np.isnan(info["n_proposals_beta"]))
    assert info["accept_W"].shape == model.history_.shape
    assert np.all((info["accept_W"] >= 0) & (info["accept_W"] <= 1))
    # The training data are rebuilt exactly (Poisson: unstandardised) and recognised as such.
    Y = model._train_Y_
    assert model.n_features_in_ == Y.shape[1] == 6 and np.isnan(Y[0, 1])
    assert model._is_training_data(*model._prepare_new(Y))
    assert np.all(np.isfinite(model.impute(Y))) and model.transform(Y[:3]).shape == (3, 2)
    assert model.to_arviz().posterior["log_lik"].shape == (1, 8)
    # Saved again by today's code and loaded: the same outputs.
    model.save(tmp_path / "again.gplvm")
    again = gplvm.load(tmp_path / "again.gplvm")
    np.testing.assert_array_equal(again.predict(expected["X"]), model.predict(expected["X"]))
    np.testing.assert_array_equal(again.sampler_info_["accept_W"], info["accept_W"])


def test_a_format_1_fit_continues_with_todays_sampler():
    # The upgrade fills the chain states' new fields, so today's sampler continues an old
    # run from the final chain state its file holds: 4 sweeps more than it was fitted with.
    model = _upgraded_legacy_model()
    assert model.sampler == "gibbs"      # the file predates the parameter: Gibbs, as then
    model.set_params(n_iter=20)
    model.resume()
    assert model.n_iter_ == 20 and model.history_.shape == (1, 20)
    info = model.sampler_info_
    assert np.all(np.isnan(info["n_proposals_X"][:, :16]))
    assert np.all(info["n_proposals_X"][:, 16:] >= 1)
    assert np.all(np.isfinite(model.history_))
