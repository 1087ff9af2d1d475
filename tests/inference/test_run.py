"""The one run loop (gplvm.inference.run): steps, keys, resumption, Ctrl-C, checkpoints, stop."""

from __future__ import annotations

import os
import signal
import time

import jax
import numpy as np
import pytest

import gplvm  # noqa: F401  (float64)
from gplvm.inference.run import CheckpointTimer, Hooks, Progress, atomic, run


def _walk(key, state):
    """A random walk: the state is (position, steps so far)."""
    x, n = state
    x = x + float(jax.random.normal(key))
    return (x, n + 1), {"x": x}


def test_steps_are_taken_in_order_with_their_infos():
    def count(key, state):
        assert key is None                       # no key given: deterministic steps
        return state + 1, {"after": state + 1}

    out = run(count, 0, 5)
    assert out.state == 5 and out.n_done == 5 and not out.interrupted and not out.stopped
    assert [info["after"] for info in out.infos] == [1, 2, 3, 4, 5]


def test_a_resumed_run_takes_the_uninterrupted_runs_steps():
    # step i gets fold_in(key, i) whatever the start: [0, 3) then [3, 7) is [0, 7)
    key = jax.random.PRNGKey(1)
    whole = run(_walk, (0.0, 0), 7, key=key)
    first = run(_walk, (0.0, 0), 3, key=key)
    second = run(_walk, first.state, 7, key=key, start=first.n_done)
    assert second.state == whole.state and second.n_done == 7
    assert [i["x"] for i in first.infos + second.infos] == [i["x"] for i in whole.infos]


def test_ctrl_c_in_a_step_keeps_the_state_before_it():
    def step(key, state):
        if state == 3:
            raise KeyboardInterrupt
        return state + 1, None

    out = run(step, 0, 10)
    assert out.interrupted and out.state == 3 and out.n_done == 3
    with pytest.raises(KeyboardInterrupt):
        run(step, 0, 10, interrupt="raise")
    with pytest.raises(ValueError, match="interrupt="):
        run(step, 0, 10, interrupt="ignore")


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler, as in an interactive session (a background job, like the
    test runner's lanes, starts with SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_during_a_commit_waits_until_it_is_whole(python_sigint):
    # SIGINT delivered between the two writes of a commit: both are made, then the run stops
    box = {"a": 0, "b": 0}

    def commit(state, new):
        box["a"] = new
        if new == 2:
            os.kill(os.getpid(), signal.SIGINT)
        box["b"] = new
        return new

    out = run(lambda key, s: (s + 1, None), 0, 10, hooks=Hooks(commit=commit))
    assert out.interrupted and out.state == 2 == box["a"] == box["b"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # restored


def test_atomic_raises_a_held_ctrl_c_at_its_end_and_leaves_an_ignored_one_ignored(
        python_sigint):
    written = []
    with pytest.raises(KeyboardInterrupt):
        with atomic():
            os.kill(os.getpid(), signal.SIGINT)
            written.append("after the signal")
    assert written == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with atomic():
        os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_atomic_leaves_a_users_handler_alone():
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with atomic():
            os.kill(os.getpid(), signal.SIGINT)
        assert seen == [signal.SIGINT]            # the user's handler ran; nothing raised
    finally:
        signal.signal(signal.SIGINT, previous)


def test_checkpoints_every_step_at_interval_zero_and_not_before_the_interval():
    written = []
    run(lambda key, s: (s + 1, None), 0, 4,
        hooks=Hooks(checkpoint=CheckpointTimer(written.append, 0.0)))
    assert written == [1, 2, 3, 4]
    later = []
    run(lambda key, s: (s + 1, None), 0, 4,
        hooks=Hooks(checkpoint=CheckpointTimer(later.append, 3600.0)))
    assert later == []
    timer = CheckpointTimer(None, 0.0)            # no writer: never due
    assert not timer.due()


def test_checkpoint_builds_the_state_only_when_due():
    built = []
    timer = CheckpointTimer(built.append, 3600.0)
    timer.after_step(lambda: pytest.fail("built although no write was due"))
    timer.interval = 0.0
    timer.after_step(lambda: "state")
    assert built == ["state"]


def test_stop_ends_the_run_after_the_step_that_meets_it():
    out = run(lambda key, s: (s + 1, {"s": s + 1}), 0, 100,
              hooks=Hooks(stop=lambda s, info: s >= 4))
    assert out.stopped and out.state == 4 and len(out.infos) == 4


def test_progress_bar_counts_the_steps_and_times_the_compile(capsys):
    bar = Progress(5, "walk", enabled=True)
    with bar.compiling():               # a stand-in for XLA: at least 0.06 s on any machine
        assert bar.bar.desc.startswith("walk (compiling)")
        time.sleep(0.06)
    assert bar.bar.desc.rstrip(": ") == "walk" and bar.compile_s >= 0.06
    out = run(_walk, (0.0, 0), 5, key=jax.random.PRNGKey(0), hooks=Hooks(progress=bar))
    assert bar.bar.n == 5 and "x" in bar.bar.postfix and "compiled" in bar.bar.postfix
    bar.close()
    assert "walk" in capsys.readouterr().err
    assert np.isfinite(out.state[0])
