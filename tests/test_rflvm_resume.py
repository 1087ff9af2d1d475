"""RFLVM checkpoints (API.md: "can checkpoint to a file and resume to exactly the result an
uninterrupted run would give"): Ctrl-C + resume(), and a killed run resumed from its file."""

from __future__ import annotations

import numpy as np
import pytest

import gplvm

KW = dict(likelihood="poisson", n_features=10, n_iter=16, burn_in=8, n_chains=2, block_size=4,
          progress=False, random_state=3)


def _data():
    return np.random.default_rng(7).poisson(3.0, (30, 6)).astype(float)


def _assert_same(a, b):
    for name in ("X_samples_", "X_mean_", "history_", "W_samples_", "beta_samples_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.n_iter_ == b.n_iter_ == KW["n_iter"] and not a.interrupted_


def _stop_after(monkeypatch, n_blocks, exc):
    import gplvm.models.rflvm as module
    real, calls = module.run_chains, []

    def callback(n_done, state):
        calls.append(n_done)
        if len(calls) == n_blocks:
            raise exc

    monkeypatch.setattr(module, "run_chains",
                        lambda *a, **kw: real(*a, **{**kw, "callback": callback}))
    return lambda: monkeypatch.setattr(module, "run_chains", real)


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
