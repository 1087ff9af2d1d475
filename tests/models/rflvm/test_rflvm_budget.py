"""``RFLVM(max_time=...)``: the wall-time budget of ``n_iter='auto'`` (issue 30, item 3: "or
until a time/sweep budget runs out, in which case warn with the figures")."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import gplvm

#: a tiny Gibbs fit whose ESS target no run can reach: only the budgets end it
KW = dict(sampler="gibbs", n_components=1, n_features=10, n_iter="auto", burn_in=20,
          ess_target=10**6, max_iter=10**4, n_chains=2, learn_kernel=False, progress=False,
          block_size=20, random_state=1)


def _counts(n=30):
    rng = np.random.default_rng(0)
    t = np.linspace(-2, 2, n)
    return rng.poisson(np.exp(np.stack([np.sin(t + j) for j in range(5)], axis=1))).astype(
        float)


def test_max_time_stops_within_the_round_in_which_it_runs_out(tmp_path):
    """A budget spent before the first call of the sweeps (compiling takes longer than 1 ms):
    the driver stops after that call, which is always one sweep, in the middle of the first
    round (burn-in 20 + 100 sweeps); the fit warns with the figures and the settings to
    change, is neither converged nor interrupted, and resume() gives it another budget (one
    more call).  Resumed to the end of the round, also after a save and load, the chains are
    those of an unstopped fixed-length run of that many sweeps."""
    with pytest.warns(ConvergenceWarning, match=r"max_time=0\.001 s: \d+ s of wall time, 1 "
                                                r"sweeps per chain \(.*raise "
                                                r"max_time, or resume\(\)"):
        model = gplvm.RFLVM(max_time=1e-3, **KW).fit(_counts())
    assert model.n_iter_ == 1 and not model.converged_ and not model.interrupted_
    assert model.history_.shape == (2, 1)
    model.save(tmp_path / "fit.npz")
    loaded = gplvm.load(tmp_path / "fit.npz")
    assert loaded.max_time == 1e-3
    with pytest.warns(ConvergenceWarning, match="2 sweeps per chain"):
        loaded.resume()
    assert loaded.n_iter_ == 2 and not loaded.converged_
    loaded.max_time, loaded.max_iter = None, 120       # the rest of the round, unstopped
    with pytest.warns(ConvergenceWarning, match=r"max_iter=120 sweeps per chain"):
        loaded.resume()
    assert loaded.n_iter_ == 120
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fixed = gplvm.RFLVM(**{**KW, "n_iter": 120}).fit(_counts())
    np.testing.assert_array_equal(loaded.history_, fixed.history_)
    np.testing.assert_array_equal(loaded.X_samples_, fixed.X_samples_)


def test_no_budget_runs_to_max_iter():
    """max_time=None (the default) leaves max_iter as the only budget, whose warning it
    keeps."""
    assert gplvm.RFLVM().max_time is None
    with pytest.warns(ConvergenceWarning, match=r"max_iter=220 sweeps per chain"):
        model = gplvm.RFLVM(**{**KW, "max_iter": 220}).fit(_counts())
    assert model.n_iter_ == 220 and not model.converged_


@pytest.mark.parametrize("bad", [-1.0, 0, float("nan"), float("inf"), "300", True, [300]])
def test_bad_max_time_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="max_time"):
        gplvm.RFLVM(**{**KW, "max_time": bad}).fit(_counts())


def test_a_stop_mid_round_is_not_judged_converged_and_resume_judges_at_the_round_end(
        monkeypatch):
    """The rule of n_iter='auto' is applied at round ends only: with the figures made to
    pass it (has_converged patched True) and the driver stopping after 40 sweeps as its
    deadline does (a call never crosses a block's end, so the stop lands on 40 exactly; 20
    draws kept after the burn-in of 20), the fit is not converged and says so; resume() runs
    to the round's end (120), is converged there, and its chains are those of an unstopped
    run, which stops there too."""
    from gplvm.inference.mcmc import driver
    from gplvm.models.rflvm import run

    stop_by = driver._stop_by
    monkeypatch.setattr(run, "has_converged", lambda figures, target: True)
    monkeypatch.setattr(driver, "_stop_by", lambda finished, deadline: (
        lambda chains, info: finished(chains, info) or chains.done >= 40))
    with pytest.warns(ConvergenceWarning, match=r"max_time=3600 s: .* 40 sweeps per chain"):
        model = gplvm.RFLVM(**{**KW, "max_time": 3600.0}).fit(_counts())
    assert model.n_iter_ == 40 and model.X_samples_.shape[1] == 20
    assert not model.converged_ and not model.interrupted_
    monkeypatch.setattr(driver, "_stop_by", stop_by)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model.resume()
    assert model.n_iter_ == 120 and model.converged_
    unstopped = gplvm.RFLVM(**{**KW, "max_time": 3600.0}).fit(_counts())
    assert unstopped.n_iter_ == 120 and unstopped.converged_
    np.testing.assert_array_equal(model.history_, unstopped.history_)


def test_a_stop_in_burn_in_says_the_model_holds_last_states():
    """A budget spent before the burn-in ends: the warning says the model holds each chain's
    last state, not posterior draws."""
    with pytest.warns(ConvergenceWarning, match="still in burn-in: the model holds each "
                                                "chain's last state, not posterior draws"):
        model = gplvm.RFLVM(**{**KW, "max_time": 1e-3}).fit(_counts())
    assert model.n_iter_ == 1
