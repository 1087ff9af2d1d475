"""The chain driver: bookkeeping (burn-in, thinning, heavy draws, trace), reproducibility across
block sizes and resumption, one compilation per run, and Ctrl-C keeping finished work."""

from __future__ import annotations

import gc
import weakref
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gplvm.inference.mcmc import (ChainResult, Execution, Keep, Report, Sweeps, _calls,
                                  _devices, concat_results, default_thin_heavy,
                                  elliptical_slice_gaussian, run_chains)
from gplvm.inference.run import CheckpointTimer

C = 3


def counting_sweep(key, state):
    """A random walk plus a sweep counter: ``n`` is the number of sweeps done."""
    return {"x": state["x"] + jax.random.normal(key, state["x"].shape), "n": state["n"] + 1}


def _init():
    return {"x": jnp.zeros((C, 2)), "n": jnp.zeros((C,), jnp.int32)}


def _record(s):
    return s["n"]


def _heavy(s):
    return {"x": s["x"], "n": s["n"]}


def _trace(s):
    return {"n": s["n"], "sum": jnp.sum(s["x"])}


def _run(n_iter=23, burn_in=5, thin=3, block_size=10, key=1, sweep=counting_sweep, *,
         thin_heavy=None, record=_record, record_heavy=_heavy, trace=_trace, progress=False,
         timings=None, export_key=None, checkpoint=None):
    return run_chains(jax.random.PRNGKey(key), _init(), sweep,
                      Sweeps(n_iter, burn_in=burn_in, thin=thin, thin_heavy=thin_heavy),
                      Keep(record, record_heavy, trace),
                      execution=Execution(block_size=block_size, export_key=export_key),
                      report=Report(progress=progress, timings=timings), checkpoint=checkpoint)


def _at_block_ends(write):
    """A checkpoint timer that writes at every block end (interval 0)."""
    return CheckpointTimer(write, 0)


def test_shapes_burn_in_thinning_and_trace():
    """n_iter=23, burn_in=5, thin=3, thin_heavy=6: kept states are those after sweeps
    8, 11, ..., 23 (light) and 11, 17, 23 (heavy); the trace has all 23 sweeps."""
    res = _run(thin_heavy=6)
    assert isinstance(res, ChainResult) and res.n_done == 23 and not res.interrupted
    np.testing.assert_array_equal(res.draws, np.tile([8, 11, 14, 17, 20, 23], (C, 1)))
    np.testing.assert_array_equal(res.heavy["n"], np.tile([11, 17, 23], (C, 1)))
    assert res.heavy["x"].shape == (C, 3, 2) and res.thin_heavy == 6
    np.testing.assert_array_equal(res.trace["n"], np.tile(np.arange(1, 24), (C, 1)))
    assert res.trace["sum"].shape == (C, 23)
    np.testing.assert_array_equal(res.state["n"], [23] * C)
    # the heavy draw after sweep 23 is the final state
    np.testing.assert_array_equal(res.heavy["x"][:, -1], res.state["x"])


@pytest.mark.parametrize("n_iter,burn_in,thin", [(1000, 0, 1), (1001, 0, 1), (5000, 1000, 3),
                                                 (150, 50, 1), (20000, 0, 7)])
def test_default_heavy_thinning_keeps_at_most_200(n_iter, burn_in, thin):
    """The default thin_heavy is a multiple of thin keeping between 100 and 200 heavy draws
    (all of them when there are at most 200 light draws)."""
    t = default_thin_heavy(n_iter, burn_in, thin)
    n_light = (n_iter - burn_in) // thin
    n_heavy = (n_iter - burn_in) // t
    assert t % thin == 0 and n_heavy <= 200
    assert n_heavy == n_light if n_light <= 200 else n_heavy > 100


def test_default_heavy_thinning_in_a_run():
    res = _run(n_iter=1000, burn_in=0, thin=1, block_size=250, record=None, trace=None)
    assert res.thin_heavy == 5 and res.heavy["n"].shape == (C, 200)
    np.testing.assert_array_equal(res.heavy["n"][0], np.arange(5, 1001, 5))
    assert res.draws is None and res.trace is None


def test_same_key_same_chains_whatever_the_block_size_and_devices(monkeypatch):
    """Keys are derived per sweep index and chain index, and every device runs one chain, so
    block sizes 1, 7 and 23 (one block), on all devices (C = 3 chains on 2 CPU devices: two
    rounds, the second padded) or on one, give identical draws, traces and final states, and a
    fourth chain leaves the first three as they were; different keys and different chains
    differ.  Bit for bit is the claim: a block is a loop over the same one-chain sweep, whose
    compiled body is the same program whatever the block size or device."""
    timings = {}
    runs = [_run(block_size=7, timings=timings)]
    assert timings["devices"] == min(C, len(jax.devices()))
    # a fourth chain changes neither the first three nor (with as many devices) the program
    more = run_chains(jax.random.PRNGKey(1), {"x": jnp.zeros((C + 1, 2)),
                                              "n": jnp.zeros((C + 1,), jnp.int32)},
                      counting_sweep, Sweeps(23, burn_in=5, thin=3),
                      Keep(_record, _heavy, _trace), execution=Execution(block_size=7),
                      report=Report(progress=False, timings=timings))
    np.testing.assert_array_equal(more.heavy["x"][:C], runs[0].heavy["x"])
    assert timings["compile_s"] == 0 or len(jax.devices()) > C   # else: one more device
    monkeypatch.setattr(_devices, "chain_devices", lambda: jax.devices()[:1])
    runs += [_run(block_size=b, timings=timings) for b in (1, 23)]
    assert timings["devices"] == 1 and timings["rounds"] == C
    for r in runs[1:]:
        np.testing.assert_array_equal(r.heavy["x"], runs[0].heavy["x"])
        np.testing.assert_array_equal(r.trace["sum"], runs[0].trace["sum"])
        np.testing.assert_array_equal(r.state["x"], runs[0].state["x"])
    x = runs[0].heavy["x"]
    assert not np.allclose(x[0], x[1]) and not np.allclose(x[1], x[2])
    assert not np.allclose(_run(key=2, block_size=23).heavy["x"], x)


@pytest.mark.parametrize("n,seconds,done,expected", [
    (1, 0.3, 1, 6),        # 0.3 s a sweep: 6 sweeps fill the 2 s target
    (1, 5.0, 1, 1),        # slower than the target: one sweep per block
    (1, 1e-5, 1, 49),      # fast: up to the next multiple of block_size (50)
    (10, 0.1, 45, 5),      # never across the end of a block
    (20, 0.0, 50, 50)])    # unmeasurably fast: a whole block
def test_block_lengths_keep_the_bar_moving(n, seconds, done, expected):
    """After a call of n sweeps that took ``seconds`` (``done`` sweeps into the run), the next
    runs about CALL_SECONDS (2 s) of sweeps, at least one, and stops at the end of the block
    (the next multiple of block_size)."""
    assert _calls.CALL_SECONDS == 2.0
    assert _calls._next_length(n, seconds, done, block_size=50) == expected


def test_one_compilation_for_all_blocks_including_a_partial_last_block():
    """n_iter=25 with block_size=10: blocks of 10, 10 and 5 sweeps (the checkpoint timer is
    asked after each), run in calls of 1 sweep first and then up to the end of each block, all through one
    compiled program: the sweep is traced once, exactly 25 sweeps are applied, and a second
    run of the same sweep traces nothing (its compiled block is reused)."""
    n_traces = []

    def sweep(key, state):
        n_traces.append(1)  # runs at trace time only
        return counting_sweep(key, state)

    timings, ends = {}, []
    res = run_chains(jax.random.PRNGKey(0), _init(), sweep, Sweeps(25), Keep(trace=_trace),
                     execution=Execution(block_size=10),
                     report=Report(progress=False, timings=timings),
                     checkpoint=_at_block_ends(lambda partial: ends.append(partial.n_done)))
    assert ends == [10, 20, 25]
    assert res.n_done == 25 and res.trace["n"].shape == (C, 25)
    np.testing.assert_array_equal(res.state["n"], [25] * C)
    assert len(n_traces) == 1 and timings["compile_s"] > 0
    assert sum(call[0] for call in timings["calls"]) == 25 and timings["calls"][0][0] == 1
    run_chains(jax.random.PRNGKey(1), _init(), sweep, Sweeps(25), Keep(trace=_trace),
               execution=Execution(block_size=10), report=Report(progress=False,
                                                                 timings=timings))
    assert len(n_traces) == 1 and timings["compile_s"] == 0


def test_exported_block_is_read_by_a_later_process_without_tracing(monkeypatch, tmp_path):
    """With an ``export_key``, the first run writes the block as an exported file; a run with a
    new sweep object under the same key (what a second process sees: no compiled block in
    memory) loads it and never calls the sweep's Python body, and both give exactly the draws
    of the plain in-process compile.  A damaged file is rebuilt, not trusted."""
    from gplvm.inference.mcmc import _exported

    monkeypatch.setattr(_exported, "folder", lambda: tmp_path)
    n_traces = []

    def make_sweep():
        def sweep(key, state):
            n_traces.append(1)  # runs at trace time only
            return counting_sweep(key, state)
        return sweep

    plain = _run(n_iter=12, block_size=5)
    first = _run(n_iter=12, block_size=5, sweep=make_sweep(), export_key="walk")
    files = list(tmp_path.glob("*.bin"))
    assert len(files) == 1 and len(n_traces) == 1
    second = _run(n_iter=12, block_size=5, sweep=make_sweep(), export_key="walk")
    assert len(n_traces) == 1  # loaded, not traced
    for res in (first, second):
        np.testing.assert_array_equal(res.heavy["x"], plain.heavy["x"])
        np.testing.assert_array_equal(res.trace["sum"], plain.trace["sum"])
    files[0].write_bytes(b"truncated")
    third = _run(n_iter=12, block_size=5, sweep=make_sweep(), export_key="walk")
    assert len(n_traces) == 2
    np.testing.assert_array_equal(third.heavy["x"], plain.heavy["x"])
    # another key, block size or random-bit scheme is another program: a new file each
    _run(n_iter=12, block_size=5, sweep=make_sweep(), export_key="walk2")
    _run(n_iter=12, block_size=4, sweep=make_sweep(), export_key="walk")
    with jax.threefry_partitionable(not jax.config.jax_threefry_partitionable):
        _run(n_iter=12, block_size=5, sweep=make_sweep(), export_key="walk")
    assert len(list(tmp_path.glob("*.bin"))) == 4 and len(n_traces) == 5


def test_compiled_block_cache_does_not_keep_the_sweep_alive():
    """The cache is keyed weakly on the sweep and the cached block refers to it weakly: a sweep
    closing over data is freed once the caller drops it."""
    data = jnp.ones(2)

    def make_sweep():
        def sweep(key, state):
            return {"x": state["x"] + data, "n": state["n"] + 1}
        return sweep

    sweep = make_sweep()
    run_chains(jax.random.PRNGKey(0), _init(), sweep, Sweeps(3), Keep(_record),
               report=Report(progress=False))
    ref = weakref.ref(sweep)
    del sweep
    gc.collect()
    assert ref() is None


def test_interrupt_keeps_finished_blocks(capsys):
    """A KeyboardInterrupt raised once 20 sweeps are done (from the checkpoint write, as Ctrl-C
    would between blocks) returns 20 sweeps: a warning, interrupted=True, and draws/trace/state equal
    to the first 20 sweeps of an uninterrupted run.  The progress bar (stderr) shows the
    compilation as its own phase and prints its time."""
    full = _run(n_iter=50, burn_in=5, thin=3, block_size=10, thin_heavy=6)

    def stop(partial):
        if partial.n_done >= 20:
            raise KeyboardInterrupt

    with pytest.warns(RuntimeWarning, match="interrupted after 20 of 50"):
        part = _run(n_iter=50, burn_in=5, thin=3, block_size=10, thin_heavy=6,
                    checkpoint=_at_block_ends(stop), progress=True)
    assert part.interrupted and part.n_done == 20
    err = capsys.readouterr().err
    assert "MCMC (compiling)" in err and "MCMC: compiled" in err
    np.testing.assert_array_equal(part.draws, full.draws[:, :5])   # sweeps 8, 11, ..., 20
    np.testing.assert_array_equal(part.heavy["x"], full.heavy["x"][:, :2])  # sweeps 11, 17
    np.testing.assert_array_equal(part.trace["sum"], full.trace["sum"][:, :20])
    np.testing.assert_array_equal(part.state["n"], [20] * C)
    np.testing.assert_allclose(part.state["x"].sum(-1), full.trace["sum"][:, 19], rtol=1e-14)


def test_interrupt_during_a_call_discards_that_call(monkeypatch):
    """Ctrl-C while a call of the block computes (here: as the last round of the third call
    comes to the host, the earlier rounds already there) discards the whole call
    (gplvm.inference.run's rule): the result is the two calls before it (1 sweep, then as
    many as the machine's pace asks, here up to the end of the first block), equal to the
    start of an uninterrupted run, and the timings count those two calls only."""
    full = _run(n_iter=50, thin_heavy=6)
    rounds, real, gets = _devices.placement(C).rounds, jax.device_get, [0]

    def device_get(tree):
        gets[0] += 1
        if gets[0] == 3 * rounds:
            raise KeyboardInterrupt
        return real(tree)

    monkeypatch.setattr(_calls.jax, "device_get", device_get)
    timings = {}
    with pytest.warns(RuntimeWarning, match="interrupted after"):
        part = _run(n_iter=50, thin_heavy=6, timings=timings)
    monkeypatch.undo()
    calls, n = [call[0] for call in timings["calls"]], part.n_done
    assert part.interrupted and len(calls) == 2 and calls[0] == 1 and n == sum(calls) <= 10
    np.testing.assert_array_equal(part.draws, full.draws[:, :max(0, (n - 5) // 3)])
    np.testing.assert_array_equal(part.trace["sum"], full.trace["sum"][:, :n])
    np.testing.assert_array_equal(part.state["n"], [n] * C)


def test_checkpoint_timer_writes_at_block_ends_when_due():
    """The checkpoint timer is asked at block ends only and writes when its interval has
    passed: an hour's interval writes nothing; an error raised by a write is not Ctrl-C and
    propagates."""
    writes = []
    _run(n_iter=25, checkpoint=CheckpointTimer(writes.append, 3600.0))
    assert writes == []

    def fail(partial):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        _run(n_iter=25, checkpoint=_at_block_ends(fail))


def _assert_joined_equals(first: ChainResult, rest: ChainResult, full: ChainResult) -> None:
    """A run and its resumption, joined by concat_results, are the whole run, bit for bit."""
    joined = concat_results(first, rest)
    assert joined.n_done == full.n_done and not joined.interrupted
    np.testing.assert_array_equal(joined.draws, full.draws)
    np.testing.assert_array_equal(joined.heavy["x"], full.heavy["x"])
    np.testing.assert_array_equal(joined.trace["sum"], full.trace["sum"])
    np.testing.assert_array_equal(joined.state["x"], full.state["x"])


def test_resume_from_an_interrupted_run_equals_one_run():
    """Sweeps [0, 20) and then [20, 50) with start=20 (another block size) give, joined by
    concat_results, exactly the draws, trace and final state of one 50-sweep run."""
    full = _run(n_iter=50, burn_in=5, thin=3, block_size=10, thin_heavy=6)
    first = _run(n_iter=20, burn_in=5, thin=3, block_size=10, thin_heavy=6)
    rest = run_chains(jax.random.PRNGKey(1), first.state, counting_sweep,
                      Sweeps(50, burn_in=5, thin=3, thin_heavy=6, start=first.n_done),
                      Keep(_record, _heavy, _trace), execution=Execution(block_size=7),
                      report=Report(progress=False))
    _assert_joined_equals(first, rest, full)


def test_a_passed_deadline_stops_after_the_first_call_and_the_rest_resumes_it():
    """A deadline already passed when the run starts: the run stops after its first call,
    which is one sweep, without a warning and not marked interrupted; resumed from there with
    a deadline an hour away, joined by concat_results, it equals one 50-sweep run exactly."""
    import time
    import warnings

    full = _run(n_iter=50, burn_in=5, thin=3, block_size=10, thin_heavy=6)
    keep, sweeps = Keep(_record, _heavy, _trace), Sweeps(50, burn_in=5, thin=3, thin_heavy=6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = run_chains(jax.random.PRNGKey(1), _init(), counting_sweep, sweeps, keep,
                           execution=Execution(block_size=10,
                                               deadline=time.perf_counter() - 1.0),
                           report=Report(progress=False))
    assert first.n_done == 1 and not first.interrupted
    np.testing.assert_array_equal(first.state["n"], [1] * C)
    rest = run_chains(jax.random.PRNGKey(1), first.state, counting_sweep,
                      sweeps._replace(start=1), keep,
                      execution=Execution(block_size=10, deadline=time.perf_counter() + 3600.0),
                      report=Report(progress=False))
    _assert_joined_equals(first, rest, full)


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="burn_in < n_iter"):
        _run(n_iter=10, burn_in=10)
    with pytest.raises(ValueError, match="leading \\(chain\\) sizes"):
        run_chains(jax.random.PRNGKey(0), {"x": jnp.zeros((3, 2)), "n": jnp.zeros(4)},
                   counting_sweep, Sweeps(5), report=Report(progress=False))
    with pytest.raises(ValueError, match="structure and shapes"):
        run_chains(jax.random.PRNGKey(0), _init(), lambda k, s: s["x"], Sweeps(5),
                   report=Report(progress=False))


class _ESSState(NamedTuple):
    f: jax.Array        # (B, 1): B = 2 independent 1-D blocks
    log_lik: jax.Array  # (B,)


Y_OBS = jnp.array([1.0, -2.0])


def _log_lik(f):
    return -((Y_OBS - f[:, 0]) ** 2)  # N(y | f, 1/2): posterior N(2y/3, 1/3) under N(0, 1)


def _ess_sweep(key, state):
    f, ll, _ = elliptical_slice_gaussian(key, state.f, state.log_lik, _log_lik)
    return _ESSState(f, ll)


def test_driver_runs_elliptical_slice_sweeps_to_the_posterior():
    """ESS (a while_loop) inside the driver's loop: 100 chains, 300 sweeps, burn-in
    100, thin 20 (10 draws a chain; the lag-20 autocorrelation of these 1-D chains is
    negligible, so the 1000 draws per block are treated as independent): the mean is within
    4.5 SE and the variance within 5 SE of the exact N(2y/3, 1/3)."""
    f0 = jnp.zeros((100, 2, 1))
    init = _ESSState(f0, jax.vmap(_log_lik)(f0))
    res = run_chains(jax.random.PRNGKey(5), init, _ess_sweep,
                     Sweeps(300, burn_in=100, thin=20),
                     Keep(record=lambda s: s.f[:, 0], trace=lambda s: jnp.sum(s.log_lik)),
                     report=Report(progress=False))
    draws = res.draws.reshape(-1, 2)
    n = draws.shape[0]
    assert n == 1000 and res.trace.shape == (100, 300)
    z = (draws.mean(0) - 2 * np.asarray(Y_OBS) / 3) / np.sqrt(1 / 3 / n)
    zv = (draws.var(0) - 1 / 3) / (1 / 3 * np.sqrt(2 / n))
    assert np.max(np.abs(z)) < 4.5 and np.max(np.abs(zv)) < 5.0, (z, zv)


def test_vectorized_chains_equal_chains_run_one_after_the_other():
    """vmap over chains (vectorize=True) and lax.map (the default) run the same chains, here
    with a data-dependent loop (a per-chain number of random-walk steps) and branch."""
    def sweep(key, state):
        k_n, k_x = jax.random.split(key)
        n = jax.random.randint(k_n, (), 1, 5)
        x = jax.lax.fori_loop(0, n, lambda i, x: x + jax.random.normal(
            jax.random.fold_in(k_x, i), x.shape), state["x"])
        x = jax.lax.cond(state["n"] % 2 == 0, lambda: x, lambda: -x)
        return {"x": x, "n": state["n"] + 1}

    runs = [run_chains(jax.random.PRNGKey(4), _init(), sweep, Sweeps(6), Keep(trace=_trace),
                       execution=Execution(vectorize=v), report=Report(progress=False))
            for v in (False, True)]
    np.testing.assert_allclose(runs[0].state["x"], runs[1].state["x"], rtol=1e-12)
    np.testing.assert_allclose(runs[0].trace["sum"], runs[1].trace["sum"], rtol=1e-12)
    assert not np.allclose(runs[0].state["x"][0], runs[0].state["x"][1])


def test_cpu_fusion_emitters_off_changes_only_rounding():
    """gplvm.config.set_cpu_fusion_emitters(False) compiles the block with XLA's older CPU
    emitters: the option reaches the compile (a new program, not the cached one) and the draws
    are the default compile's up to rounding (a random walk of 23 steps: 1e-12 relative); the
    default is XLA's own setting, no options."""
    from gplvm.config import cpu_compiler_options, set_cpu_fusion_emitters

    assert cpu_compiler_options() == {}
    default = _run(block_size=10)
    timings = {}
    set_cpu_fusion_emitters(False)
    try:
        assert cpu_compiler_options() == {"xla_cpu_use_fusion_emitters": False}
        older = _run(block_size=10, timings=timings)
    finally:
        set_cpu_fusion_emitters(True)
    assert cpu_compiler_options() == {}
    assert timings["compile_s"] > 0                      # compiled again, not reused
    np.testing.assert_allclose(older.heavy["x"], default.heavy["x"], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(older.draws, default.draws)

