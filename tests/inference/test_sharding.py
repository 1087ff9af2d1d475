"""Rows split over devices and processes (issue 18): the sharded collapsed bound against the
unsharded one, chains on 4 devices against chains on 1, and a two-process jax.distributed run.

JAX fixes its device count when it starts, so everything needing several devices runs in
two subprocesses started with ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (respected
by ``gplvm._config``) that join with ``jax.distributed``: each first checks something on its own
4 devices (process 0 the sharded bound, process 1 the chains), then both run the documented
command's computation over all 8; they print JSON, which the tests read.  The
reference is the unsharded bound (``collapsed.data_term`` over ``psi_statistics`` of all rows,
minus the KL), which tests/objectives/test_bgplvm_bound.py checks against dense closed forms;
rows and devices change only the order of the additions, hence 1e-10 relative.
"""

from __future__ import annotations

import copy
import json
import os
import re
import socket
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import gplvm
from gplvm.inference import sharding
from gplvm.models.gplvm_family import sharded_bound, sharded_data

N_ROWS = 10          # not a multiple of 4: two padded rows on 4 devices, two on 2 × 2
LATE = 35            # seconds process 1 sleeps before the collective; Gloo alone allows 30
RTOL = 1e-10

SCRIPT = textwrap.dedent("""
    import json, os, time
    import jax
    # join the processes before any computation (JAX's rule); importing gplvm computes nothing
    from gplvm import distributed
    distributed.initialize()
    import jax.numpy as jnp, numpy as np
    from gplvm.distributed import demo_problem, main
    from gplvm.expectations import Analytic, MonteCarlo, psi_statistics
    from gplvm.inference import sharding
    from gplvm.models.gplvm_family import sharded_bound
    from gplvm.models.gplvm_family.sharded_data import shard_data
    from gplvm.inference.mcmc import (Keep, Report, Sweeps, _devices,
                                      elliptical_slice_gaussian, run_chains)
    from gplvm.objectives import collapsed

    params, Y = demo_problem({n})

    def unsharded(p, rule=None):
        groups = collapsed.group_columns(Y)
        psi = psi_statistics(p["kernel"], p["Z"], p["X_mean"], p["X_var"], rule=rule,
                             weights=groups.weights)
        value, _ = collapsed.data_term(psi, p["kernel"](p["Z"]),
                                       jnp.asarray(np.nan_to_num(Y)), groups, p["noise_var"])
        return value - collapsed.kl_standard_normal(p["X_mean"], p["X_var"])

    def listed(tree):
        return jax.tree_util.tree_map(lambda x: np.asarray(x).tolist(),
                                      jax.tree_util.tree_leaves(tree))

    def local_bounds():
        out = {{}}
        value, grads = jax.jit(jax.value_and_grad(unsharded))(params)
        out["reference"] = {{"bound": float(value), "grads": listed(grads)}}
        # this process's 4 devices; q(X) given padded to N_pad rows, with values in the
        # padded rows that would make any sum NaN or huge if they were read
        data = shard_data(Y, sharding.make_mesh(jax.local_devices()))
        pad = data.Y0.shape[0] - {n}
        padded = dict(params, X_mean=jnp.pad(params["X_mean"], ((0, pad), (0, 0)),
                                             constant_values=1e3),
                      X_var=jnp.pad(params["X_var"], ((0, pad), (0, 0))))
        # two chunks of rows per device: the Ψ-statistics' chunk loop runs inside shard_map
        value, grads = sharded_bound.bound_and_grad(padded, data, rule=Analytic(chunk_size=2))
        out["sharded"] = {{"bound": float(value), "rows": data.Y0.shape[0],
                          "devices": data.mesh.size,
                          "grads": listed(dict(grads, X_mean=grads["X_mean"][:{n}],
                                               X_var=grads["X_var"][:{n}])),
                          "grad_pad": np.asarray(jnp.concatenate(
                              [grads["X_mean"][{n}:], grads["X_var"][{n}:]])).tolist()}}
        # Monte Carlo Ψ-statistics: each device keys its rows' draws by their global index
        mc = MonteCarlo(n_samples=3, key=jax.random.PRNGKey(5), chunk_size=2)
        out["monte_carlo"] = {{"reference": float(unsharded(params, mc)),
                              "sharded": float(sharded_bound.bound_and_grad(
                                  padded, data, rule=mc)[0])}}
        return out

    # 4 chains of elliptical slice sweeps (the RFLVM's update of the rows of X) on 4 devices,
    # then on one
    Y_obs = jnp.array([1.0, -0.5])

    def log_lik(f):
        return -0.5 * jnp.sum((f - Y_obs) ** 2, axis=-1)

    def sweep(key, f):
        return elliptical_slice_gaussian(key, f, log_lik(f), log_lik)[0]

    def chains():
        timings = {{}}
        res = run_chains(jax.random.PRNGKey(3), jnp.zeros((4, 3, 2)), sweep,
                         Sweeps(6, burn_in=1), Keep(record=lambda f: f),
                         report=Report(progress=False, timings=timings))
        return np.asarray(res.draws), timings["devices"]

    def local_chains():
        many, d_many = chains()
        _devices.chain_devices = lambda: jax.local_devices()[:1]
        one, d_one = chains()
        moved = np.abs(np.diff(many, axis=1)).sum(axis=(2, 3)) > 0
        return {{"chains": {{"devices": [d_many, d_one],
                           "identical": bool(np.array_equal(many, one)),
                           "moved": bool(np.all(moved)),
                           "distinct": bool(not np.array_equal(many[0], many[1]))}}}}

    # the two processes check different things on their own devices, then join in the
    # documented command's computation over all 8 devices
    local = local_bounds() if jax.process_index() == 0 else local_chains()
    local["local_devices"] = len(jax.local_devices())
    print("LOCAL" + json.dumps(local), flush=True)
    # process 1 comes {late} s late to the first collective across processes, later than the
    # 30 s Gloo gives its peers to connect: gplvm.distributed.check waits at a barrier first
    distributed.synchronize("local checks done")
    time.sleep({late} if jax.process_index() == 1 else 0)
    start = time.monotonic()
    status = main(["--rows", "{n}"])
    print("WAITED" + json.dumps(time.monotonic() - start), flush=True)
    raise SystemExit(status)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _json_line(stdout: str, prefix: str = ""):
    lines = [ln for ln in stdout.splitlines()
             if ln.startswith(prefix + "{") or (prefix and ln.startswith(prefix))]
    assert len(lines) == 1, stdout
    return json.loads(lines[0][len(prefix):])


def _four_device_env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES", "GPLVM_CPU_DEVICES")}
    # the parent's LLVM optimisation level too (tests/conftest.py), so that both sides of an
    # exact comparison run code generated alike
    level = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if f.startswith("--xla_backend_optimization_level")]
    env.update(OPENBLAS_NUM_THREADS="1",
               XLA_FLAGS=" ".join(["--xla_cpu_multi_thread_eigen=false",
                                   "--xla_force_host_platform_device_count=4"] + level))
    return env


#: Seconds the subprocesses may take in all (quiet: ~60 s): only a guard against a hang, so
#: generous enough for a machine shared with other work.
SUBPROCESS_TIMEOUT = 1800


def _finish(procs) -> list:
    """Each process's (stdout, stderr), all exited with status 0."""
    try:
        outs = [p.communicate(timeout=SUBPROCESS_TIMEOUT) for p in procs]
    finally:                        # a process left waiting for a crashed peer is stopped
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    return outs


@pytest.fixture(scope="module")
def subprocesses(tmp_path_factory):
    """Every subprocess of this file at once, and meanwhile the one-device estimator fit here.

    Two jax.distributed processes on localhost, 4 CPU devices each (process 0's local checks,
    process 1's, and process 0's output of ``gplvm.distributed.main``), one process with 4
    CPU devices fitting ``BayesianGPLVM`` on its devices (:data:`FIT_SCRIPT`, its models saved
    in a temporary folder), and one running RFLVM chains split by rows over 4 devices
    (:data:`RFLVM_ROWS_SCRIPT`)."""
    env = dict(_four_device_env(), JAX_NUM_PROCESSES="2",
               JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{_free_port()}")
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT.format(n=N_ROWS, late=LATE)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(env, JAX_PROCESS_ID=str(i))) for i in range(2)]
    folder = tmp_path_factory.mktemp("fits")
    Y = _fit_data()
    np.save(folder / "Y.npy", Y)
    Y_svi = _svi_data()
    np.save(folder / "Y_svi.npy", Y_svi)
    procs.append(subprocess.Popen([sys.executable, "-c", FIT_SCRIPT, str(folder / "Y.npy"),
                                   str(folder), json.dumps(SVI_FIT), str(folder / "Y_svi.npy")],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=_four_device_env()))
    procs.append(subprocess.Popen([sys.executable, "-c", RFLVM_ROWS_SCRIPT],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=_four_device_env()))
    try:
        one = gplvm.BayesianGPLVM(**FIT).fit(Y)
        svi_one = gplvm.BayesianGPLVM(**SVI_FIT).fit(Y_svi)
    finally:
        outs = _finish(procs)
    # only process 0 prints the global result
    assert not any(ln.startswith("{") for ln in outs[1][0].splitlines())
    return {"local": (_json_line(outs[0][0], "LOCAL"), _json_line(outs[1][0], "LOCAL")),
            "global": _json_line(outs[0][0]), "fit": _json_line(outs[2][0]),
            "waited": _json_line(outs[0][0], "WAITED"),
            "rflvm_rows": _json_line(outs[3][0]), "Y": Y,
            "one": one, "svi_one": svi_one, "folder": folder}


@pytest.fixture(scope="module")
def two_processes(subprocesses):
    """Process 0's local checks, process 1's, process 0's output of
    ``gplvm.distributed.main`` and the seconds that took."""
    return (*subprocesses["local"], subprocesses["global"], subprocesses["waited"])


def _close(a, b, rtol=RTOL):
    """Relative closeness of nested lists, scaled by the largest entry of ``b``."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and np.max(np.abs(a - b)) <= rtol * np.max(np.abs(b))


def test_sharded_bound_and_gradient_equal_the_unsharded_on_four_devices(two_processes):
    """N = 10 rows with two missing entries (three column groups) over one process's 4
    devices, padded to 12 rows, the Ψ-statistics computed in chunks of 2 rows on each device:
    the bound and every gradient (kernel, Z, X_mean, X_var, σ²) to 1e-10 relative; what the
    padded rows of q(X) hold is never read (zero gradient there).  With Monte Carlo
    Ψ-statistics (3 draws per row) the sharded bound equals the unsharded one to 1e-10 too:
    each device keys its rows' draws by their global index, so every row sees the draws it
    sees in one call (3 draws differ from the analytic bound by far more than 1e-10: a device
    numbering its rows from 0 would be caught)."""
    local = two_processes[0]
    mc = local["monte_carlo"]
    assert abs(mc["sharded"] - mc["reference"]) <= RTOL * abs(mc["reference"])
    assert abs(mc["reference"] - local["reference"]["bound"]) > 1e-6 * abs(mc["reference"])
    assert local["local_devices"] == 4
    ref, got = local["reference"], local["sharded"]
    assert (got["devices"], got["rows"]) == (4, 12)
    assert abs(got["bound"] - ref["bound"]) <= RTOL * abs(ref["bound"])
    assert len(got["grads"]) == len(ref["grads"]) == 6
    for g, r in zip(got["grads"], ref["grads"]):
        assert _close(g, r), (g, r)
    assert np.array_equal(got["grad_pad"], np.zeros((4, 2)))


def test_four_chains_on_four_devices_are_the_chains_on_one(two_processes):
    """Each device runs the one-chain program (gplvm.inference.mcmc._devices): 4 chains of
    elliptical slice sweeps on 4 devices and on 1 (4 rounds) give identical draws, bit for
    bit; the chains move at every sweep and differ from each other."""
    c = two_processes[1]["chains"]
    assert c["devices"] == [4, 1]
    assert c["identical"] and c["moved"] and c["distinct"]


def test_a_process_later_than_gloos_connect_time_is_waited_for(two_processes):
    """Process 1 reaches the first collective across processes LATE = 35 s after process 0,
    more than the 30 s in which Gloo's context must connect (without the barrier of
    ``gplvm.distributed.synchronize`` process 0 fails with "Gloo context initialization
    failed ... timed out"); process 0 waits and gets the bound (the next test checks it)."""
    assert two_processes[3] >= LATE > 30
    assert two_processes[2]["processes"] == 2


def test_two_processes_reproduce_the_single_process_bound(two_processes):
    """``gplvm.distributed.main`` in two processes of 4 CPU devices each (Gloo collectives):
    the 10 rows over all 8 devices (padded to 16; six padded rows, a device holding only
    padding) give the single-process bound, and the gradients of the parameters every process
    holds whole (Z, σ², kernel), to 1e-10 relative."""
    got, ref = two_processes[2], two_processes[0]["reference"]
    assert (got["processes"], got["devices"], got["local_devices"]) == (2, 8, 4)
    assert abs(got["bound"] - ref["bound"]) <= RTOL * abs(ref["bound"])
    # leaves in pytree order (dict keys sorted): X_mean, X_var, Z, kernel (length-scales,
    # variance), noise_var
    ref_Z, ref_kernel, ref_noise = ref["grads"][2], ref["grads"][3:5], ref["grads"][5]
    assert _close(got["grad_Z"], ref_Z) and _close(got["grad_noise_var"], ref_noise)
    for g, r in zip(got["grad_kernel"], ref_kernel):
        assert _close(g, r)


def test_meshes_padding_and_row_blocks():
    """make_mesh's choices and errors; rows padded to a multiple of the device count with the
    fill value; the group weights and mask of shard_data (in this process's devices)."""
    d = len(jax.devices())
    assert sharding.make_mesh().size == d and sharding.make_mesh(1).size == 1
    assert sharding.make_mesh(jax.devices()[:1]).devices.tolist() == jax.devices()[:1]
    for bad in (0, d + 1, [], [jax.devices()[0]] * 2, ["cpu"]):
        with pytest.raises(ValueError, match="devices"):
            sharding.make_mesh(bad)
    assert [sharding.padded_rows(n, 4) for n in (0, 1, 4, 5, 10)] == [4, 4, 4, 8, 12]
    mesh = sharding.make_mesh(1)
    A = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(sharding.shard_rows(A, mesh, fill=7.0), A)
    Y = np.array([[1.0, np.nan, 2.0], [np.nan, 3.0, 4.0], [5.0, 6.0, 7.0]])
    data = sharded_data.shard_data(Y, mesh)
    np.testing.assert_array_equal(data.Y0, np.nan_to_num(Y))
    groups = data.groups
    # every column has its own pattern; weight 1 where the group's column is observed
    for col in range(3):
        np.testing.assert_array_equal(data.weights_T[:, int(groups.column_group[col])],
                                      ~np.isnan(Y[:, col]))
    np.testing.assert_array_equal(groups.n_obs[np.asarray(groups.column_group)], [2, 2, 3])
    with pytest.raises(ValueError, match="2-D"):
        sharded_data.shard_data(np.ones(3), mesh)
    with pytest.raises(ValueError, match="params lacks"):
        sharded_bound.collapsed_bound({"Z": np.ones((2, 1))}, Y, mesh)


def test_shard_data_checks_y_and_groups_columns_chunk_by_chunk():
    """scan_rows reads Y a few rows at a time: its column groups and observed counts are those
    of collapsed.group_columns (np.unique over whole columns) for scattered missing entries;
    infinite or overflowing entries and unobserved columns are refused with the row named
    in the whole of Y, and so are rows with no observed entry (as the estimators refuse them)."""
    from gplvm.objectives import collapsed
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(23, 9))
    Y[rng.random(Y.shape) < 0.15] = np.nan
    Y[:, 2] = Y[:, 3]                   # two columns with one pattern
    ref = collapsed.group_columns(Y)
    for chunk_rows in (1, 4, 23):
        column_group, n_obs = sharded_data.scan_rows(Y, chunk_rows)
        np.testing.assert_array_equal(column_group, ref.column_group)
        np.testing.assert_array_equal(n_obs, ref.n_obs)
    for bad, match in ((np.inf, r"infinite entries at \(row, column\) \(1, 4\).*rows 6 to 7"),
                       (1e200, r"overflow.*rows 6 to 7"),
                       (np.nan, r"1 rows with no observed entry \(rows 1\).*rows 6 to 7")):
        Y_bad = np.ones((9, 5))
        Y_bad[7, slice(None) if np.isnan(bad) else 4] = bad
        with pytest.raises(ValueError, match=match):
            sharded_data.scan_rows(Y_bad, chunk_rows=2)
    Y_bad = np.ones((9, 5))
    Y_bad[:, 3] = np.nan
    with pytest.raises(ValueError, match=r"1 columns with no observed entry \(columns 3\)"):
        sharded_data.shard_data(Y_bad, sharding.make_mesh(1))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_files_of_format_5_hold_a_problem_with_sharded_none():
    """Before the ShardedRoute, a fit's GPLVMProblem had a field ``sharded`` (always None in a
    file: rows on a mesh were never saved); the legacy module drops it, and anything else
    there is a damaged file."""
    from gplvm.io.legacy import object_fields
    from gplvm.models.gplvm_family.bound import Problem
    from gplvm.models.gplvm_family.sharded_route import off_mesh, on_devices, on_mesh
    Y = np.array([[1.0, np.nan], [2.0, 3.0], [0.5, -1.0]])
    model = gplvm.BayesianGPLVM(n_components=1, n_inducing=2, max_iter=2,
                                random_state=0).fit(Y)
    stored = model._problem._asdict()
    assert "sharded" not in stored
    name = "gplvm.state.GPLVMProblem"
    again = Problem(**object_fields(name, {**stored, "sharded": None}))
    assert again._asdict().keys() == stored.keys() and again.route is model._problem.route
    with pytest.raises(ValueError, match="damaged file.*sharded"):
        object_fields(name, {**stored, "sharded": object()})
    with pytest.raises(TypeError):                   # today's class has no such field
        Problem(**stored, sharded=None)
    # the route of rows on a mesh, and the problem a file holds instead
    split = on_devices(model._problem, Y, 1)
    assert on_mesh(split) and split.Y0 is None and not on_mesh(off_mesh(split))
    assert off_mesh(model._problem) is model._problem


def test_initialize_checks_its_settings_and_when_it_is_called(monkeypatch):
    """Bad process counts and ids are refused before JAX is asked; in a process whose backend
    is running (this one) joining is refused with the fix named."""
    from gplvm import distributed
    for key in distributed.ENV:
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ValueError, match="ids run from 0 to 1"):
        distributed.initialize("127.0.0.1:1", 2, 2)
    with pytest.raises(ValueError, match="at least 1"):
        distributed.initialize("127.0.0.1:1", 0, 0)
    monkeypatch.setenv("JAX_PROCESS_ID", "first")
    with pytest.raises(ValueError, match="JAX_PROCESS_ID='first' is not an integer"):
        distributed.initialize("127.0.0.1:1", 2)
    monkeypatch.setenv("JAX_PROCESS_ID", "1")
    jax.devices()
    with pytest.raises(RuntimeError, match="before any computation"):
        distributed.initialize("127.0.0.1:1", 2)


def test_the_time_out_for_other_processes_is_the_argument_else_the_environment(monkeypatch):
    """``timeout=`` wins, then GPLVM_DISTRIBUTED_TIMEOUT, then the default; a bad value is
    refused naming the setting; in one process synchronize and connect have nothing to do."""
    from gplvm import distributed
    monkeypatch.delenv(distributed.TIMEOUT_ENV, raising=False)
    assert distributed.timeout_seconds() == distributed.DEFAULT_TIMEOUT >= 300
    monkeypatch.setenv(distributed.TIMEOUT_ENV, "90")
    assert distributed.timeout_seconds() == 90 and distributed.timeout_seconds(1200.4) == 1200
    monkeypatch.setenv(distributed.TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match="GPLVM_DISTRIBUTED_TIMEOUT='soon' is not a number"):
        distributed.timeout_seconds()
    for bad in (0, -5, float("nan"), float("inf"), "60"):
        with pytest.raises(ValueError, match="at least 1"):
            distributed.timeout_seconds(bad)
    monkeypatch.setenv(distributed.TIMEOUT_ENV, "0.5")
    with pytest.raises(ValueError, match="GPLVM_DISTRIBUTED_TIMEOUT=0.5"):
        distributed.timeout_seconds()
    assert distributed.synchronize("alone", timeout=1) is None
    assert distributed.connect(timeout=1) is None


# --------------------------------------------------------------------------- the estimator
FIT_ROWS = 29        # odd: 3 padded rows on 4 devices
FIT = dict(n_components=2, n_inducing=6, optimizer="adam", learning_rate=0.02, max_iter=40,
           progress=False, random_state=3)
# the shapes of tests/models/gplvm_family/test_svi.py's fits (160 × 8, B = 40, M = 10, complete
# rows), so the one-device reference reuses their compiled programs (XLA's persistent cache)
SVI_FIT = dict(n_components=2, n_inducing=10, inference="svi", batch_size=40, max_iter=3,
               learning_rate=0.05, progress=False, random_state=3)

FIT_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    import gplvm
    from jax.sharding import Mesh

    Y, out = np.load(sys.argv[1]), sys.argv[2]
    kw = dict(n_components=2, n_inducing=6, optimizer="adam", learning_rate=0.02,
              max_iter=40, progress=False, random_state=3)
    four = gplvm.BayesianGPLVM(devices=4, **kw).fit(Y)
    # the same fit with a checkpoint, Ctrl-C after iteration 15, then resumed from its file
    import gplvm.models.gplvm_family.collapsed_run as bg   # where the fit calls minimise
    real_minimise = bg.minimise
    def stop(i, params, value):
        if i == 15:
            raise KeyboardInterrupt
    bg.minimise = lambda *a, options, **k: real_minimise(
        *a, options=options._replace(callback=stop), **k)
    part = gplvm.BayesianGPLVM(devices=4, checkpoint=out + "/part.npz", **kw).fit(Y)
    bg.minimise = real_minimise
    part_resumed = gplvm.load(out + "/part.npz").resume()
    one_resumed = gplvm.load(out + "/part.npz").set_params(devices=None).resume()
    # a user's 2 × 2 mesh: its devices in order, the program of devices=4
    grid = Mesh(np.array(jax.devices()).reshape(2, 2), ("a", "b"))
    mesh = gplvm.BayesianGPLVM(devices=grid, **kw).fit(Y)
    four.save(out + "/four.npz")
    # inference='svi': each minibatch's 40 rows split over 3 devices (two padded rows)
    svi = gplvm.BayesianGPLVM(devices=3, **json.loads(sys.argv[3])).fit(np.load(sys.argv[4]))
    svi.save(out + "/svi.npz")
    # the same SVI fit with a checkpoint, Ctrl-C before its 6th step, then resumed from the file
    from gplvm.models.gplvm_family.variants.svi import svi_fit
    real_step, calls = svi_fit._step, [0]
    def stop(*a, **k):
        calls[0] += 1
        if calls[0] == 6:
            raise KeyboardInterrupt
        return real_step(*a, **k)
    svi_fit._step = stop
    gplvm.BayesianGPLVM(devices=3, checkpoint=out + "/svi_run.npz", **json.loads(sys.argv[3])
                        ).fit(np.load(sys.argv[4]))
    svi_fit._step = real_step
    resumed = gplvm.load(out + "/svi_run.npz").resume()
    # the fitted values are back on one device: the verbs run the one-device code
    arrays = [x for x in jax.tree_util.tree_leaves((four.fitted_, four.params_, svi.fitted_,
                                                    svi.params_)) if isinstance(x, jax.Array)]
    print(json.dumps({"devices": len(jax.devices()), "kw": repr(sorted(kw.items())),
                      "one_device": bool(arrays) and all(len(x.devices()) == 1
                                                         for x in arrays),
                      "mesh_identical": bool(mesh.elbo_ == four.elbo_ and np.array_equal(
                          mesh.X_mean_, four.X_mean_)),
                      "collapsed_resumed": [bool(part.interrupted_), int(part.n_iter_),
                                            float(np.max(np.abs(part_resumed.X_mean_
                                                                - four.X_mean_))),
                                            float(abs(part_resumed.elbo_ - four.elbo_)),
                                            bool(np.array_equal(part_resumed.history_,
                                                                four.history_)),
                                            float(np.max(np.abs(one_resumed.X_mean_
                                                                - four.X_mean_)))],
                      "svi_resumed_identical": bool(
                          resumed.elbo_ == svi.elbo_ and np.array_equal(resumed.X_mean_,
                                                                        svi.X_mean_)
                          and np.array_equal(resumed.history_, svi.history_))}), flush=True)
""")


RFLVM_ROWS_SCRIPT = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    import gplvm
    from gplvm.inference.mcmc import (Execution, Keep, Report, Sweeps, _block, _devices,
                                      elliptical_slice_gaussian, run_chains)
    from gplvm.inference.sharding import make_mesh

    # not a multiple of 4 (XLA pads the row blocks to 18), and above the 32 rows below which
    # the elliptical slices do not compact the blocks still shrinking
    N = 70
    out = {"devices": len(jax.devices())}
    # the driver: 2 chains of elliptical slice sweeps of N independent rows, one chain per
    # device, then each chain split by rows over 4 devices
    Y_obs = jnp.linspace(-1.0, 1.0, N)[:, None] * jnp.array([1.0, -0.5])

    def log_lik(f):
        return -0.5 * jnp.sum((f - Y_obs) ** 2, axis=-1)

    def sweep(key, f):
        return elliptical_slice_gaussian(key, f, log_lik(f), log_lik)[0]

    def chains(mesh):
        t = {}
        res = run_chains(jax.random.PRNGKey(3), jnp.zeros((2, N, 2)), sweep,
                         Sweeps(5, burn_in=1), Keep(record=lambda f: f),
                         execution=Execution(row_mesh=mesh, n_rows=N),
                         report=Report(progress=False, timings=t))
        return np.asarray(res.draws), t["devices"]

    one, d_one = chains(None)
    split, d_split = chains(make_mesh(4))
    # the program really runs on row blocks: lower the row-mesh block as the driver built it
    place = _devices.row_placement(2, make_mesh(4), N)
    block = _block.compiled_block(sweep, place, Keep(record=lambda f: f),
                                  _block.BlockShape(4, 4, 1))
    args = (jax.random.PRNGKey(3), jnp.zeros((2, N, 2)), jnp.arange(2, dtype=jnp.int32)) + \
        tuple(jnp.int32(v) for v in (0, 4, 1, 1, 1))
    text = block.jitted.lower(*args).compile().as_text()
    out["toy"] = {"devices": [d_one, d_split], "max_diff": float(np.max(np.abs(one - split))),
                  "moved": bool(np.all(np.abs(np.diff(one, axis=1)).sum(axis=(2, 3)) > 0)),
                  "row_blocks": "f64[18,2]" in text}
    # the estimator: a Poisson RFLVM, X sampled by elliptical slice from the first sweep
    rng = np.random.default_rng(0)
    Y = rng.poisson(3.0, size=(N, 8)).astype(float)
    kw = dict(likelihood="poisson", n_features=10, n_iter=6, burn_in=3, n_chains=2,
              sampler="gibbs", map_sweeps=0, progress=False, random_state=1)
    fits = {d: gplvm.RFLVM(devices=d, **kw).fit(Y) for d in (None, 4)}
    out["rflvm"] = {name: [np.asarray(getattr(fits[d], name)).tolist() for d in (None, 4)]
                    for name in ("X_samples_", "W_samples_", "beta_samples_", "history_")}
    print(json.dumps(out), flush=True)
""")


def _fit_data() -> np.ndarray:
    """Rows drawn around a 2-D latent through a smooth map, with two missing entries (three
    column groups)."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(FIT_ROWS, 2))
    Y = np.sin(X @ rng.normal(size=(2, 5))) + 0.1 * rng.normal(size=(FIT_ROWS, 5))
    Y[3, 1] = Y[11, 4] = np.nan
    return Y


def _svi_data() -> np.ndarray:
    """160 complete rows around a 2-D latent through a smooth map (8 columns)."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(160, 2))
    return np.sin(X @ rng.normal(size=(2, 8))) + 0.05 * rng.normal(size=(160, 8))


def _leaves_close(a, b, rtol: float) -> bool:
    """Every array of two pytrees (the same structure) equal to ``rtol`` of its largest
    entry (:func:`_close`)."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(_close(x, y, rtol) for x, y in zip(la, lb))


def test_bayesian_gplvm_on_devices_fits_as_on_one(subprocesses):
    """``BayesianGPLVM(devices=4)`` (29 rows: 3 padded) and ``devices=`` a 2 × 2 mesh, with
    missing entries, in a process with 4 CPU devices,
    against ``devices=None`` here (same seed).  The sums over rows differ from the one-device
    sums only in the order of the additions (relative round-off ~1e-15), so the bound at every
    step agrees to 1e-10 relative.  Adam moves each parameter by at most about the learning
    rate (0.02) per step whatever the gradient's size, and both runs see gradients equal up to
    that round-off, so after 40 steps the latents agree to 1e-10 (round-off ~1e-15 carried
    through 40 steps, with room to spare), eight orders below one step: a sharded sum that
    dropped or doubled a row would differ by a step's worth.  The saved and loaded sharded
    model holds the unsharded model's fitted value (``fitted_``: kernel, Z, the map at the
    optimal q(U)) to the same round-off, on one device as the unsharded model's (checked in
    the fitting process), and transform, score, predict and impute read only that value (and
    q(X)), so they give the unsharded answers: predict and impute are checked here."""
    one, folder, Y = subprocesses["one"], subprocesses["folder"], subprocesses["Y"]
    fit = {k: v for k, v in subprocesses["fit"].items()
           if k not in ("svi_resumed_identical", "collapsed_resumed")}
    assert fit == {"devices": 4, "mesh_identical": True, "one_device": True,
                   "kw": repr(sorted(FIT.items()))}
    model = gplvm.load(folder / "four.npz")
    assert model.devices == 4
    assert abs(model.elbo_ - one.elbo_) <= RTOL * abs(one.elbo_)
    assert model.n_iter_ == one.n_iter_ == FIT["max_iter"]
    assert _close(model.history_, one.history_)
    np.testing.assert_allclose(model.X_mean_, one.X_mean_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(model.X_var_, one.X_var_, rtol=0, atol=1e-10)
    assert _leaves_close(model.fitted_, one.fitted_, rtol=1e-9)
    np.testing.assert_allclose(model.predict(one.X_mean_[:5]), one.predict(one.X_mean_[:5]),
                               rtol=0, atol=1e-9)
    np.testing.assert_allclose(model.impute(Y), one.impute(Y), rtol=0, atol=1e-9)


def test_svi_on_devices_fits_as_on_one(subprocesses):
    """``BayesianGPLVM(inference='svi', batch_size=40, devices=3)`` on 160 complete rows (3
    epochs of 4 minibatches: 12 steps; each minibatch's 40 rows padded to 42 on 3 devices), in
    a process with 4 CPU devices, against ``devices=None`` here (same seed: the same
    minibatches).  Each minibatch's sums over rows (ψ0, Ψ1ᵀY, Ψ2, Σ y², the rows' KL) are added
    over the devices in another order than on one device (relative round-off ~1e-15), and feed
    both the Adam step and the natural-gradient step on q(U), so, as for the collapsed fit
    above, the mean minibatch estimate of every epoch and the final bound agree to 1e-10
    relative and q(X) to 1e-10 after 12 Adam steps of at most about the learning rate (0.05)
    each: a row dropped or counted twice on some device would differ by a step's worth.  The
    saved and loaded model holds the same fitted value (q(U), Z, kernel) to 1e-9 relative.
    The same fit with a checkpoint, stopped by Ctrl-C before its 6th step (mid-epoch) and
    resumed from its file, equals the uninterrupted one on the devices bit for bit (bound,
    q(X) means, history: checked in the fitting process)."""
    assert subprocesses["fit"]["svi_resumed_identical"] is True
    one, folder = subprocesses["svi_one"], subprocesses["folder"]
    model = gplvm.load(folder / "svi.npz")
    assert model.devices == 3 and model.inference == "svi"
    assert model.n_iter_ == one.n_iter_ == SVI_FIT["max_iter"]
    assert abs(model.elbo_ - one.elbo_) <= RTOL * abs(one.elbo_)
    assert _close(model.history_, one.history_)
    np.testing.assert_allclose(model.X_mean_, one.X_mean_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(model.X_var_, one.X_var_, rtol=0, atol=1e-10)
    assert _leaves_close(model.fitted_, one.fitted_, rtol=1e-9)


def test_rflvm_chains_split_by_rows_over_four_devices_are_the_chains_on_one(subprocesses):
    """``run_chains(row_mesh=...)``: each chain's 70 rows over 4 devices (XLA's row blocks of
    18, the last padded; the compiled block holds them), the chains one after the other.  A
    sweep of independent rows gives the one-device chains to 1e-12 (the same random numbers:
    JAX's partitionable Threefry does not depend on the layout), and the chains move.  The
    estimator, ``RFLVM(devices=4)``, Poisson: latents, frequencies, weights and the
    log-likelihood trace of 2 chains × 6 sweeps equal ``devices=None``'s up to the order of
    the additions over rows, amplified through 6 sweeps of accept/reject steps: 1e-8 of each
    array's largest entry (seen: about 1e-13 to 1e-10).  (Before the β slice drew ν through
    the symmetric root of its covariance, the eigenvectors of ΦᵀΦ turned with the rounding
    and the weights differed by O(1) after one sweep.)"""
    got = subprocesses["rflvm_rows"]
    assert got["devices"] == 4
    toy = got["toy"]
    assert toy["devices"] == [2, 4] and toy["row_blocks"] and toy["moved"]
    assert toy["max_diff"] <= 1e-12
    for name, (one, split) in got["rflvm"].items():
        assert _close(split, one, 1e-8), name


def test_rflvm_devices_are_checked_before_any_computation():
    """``RFLVM(devices=...)`` takes the devices rule of the Bayesian GPLVM; a checkpoint with
    devices given as jax devices (a file records a count) is refused with the way out, before
    Y is read."""
    with pytest.raises(ValueError, match=r"devices=0.*1 to"):
        gplvm.RFLVM(devices=0).fit(None)
    with pytest.raises(ValueError, match=r"checkpoint file records the devices as a count"):
        gplvm.RFLVM(devices=jax.devices()[:1], checkpoint="model.npz").fit(None)


@pytest.mark.parametrize("devices, match", [
    (0, "1 to"), (len(jax.devices()) + 1, "1 to"), ("cpu", "a count"), (True, "a count"),
    ([], "a count"), (2.0, "a count")])
def test_bad_devices_are_refused_before_any_computation(devices, match):
    """A count outside 1..len(jax.devices()), a string, a bool, an empty list or a float:
    a ValueError naming ``devices`` before Y is even read (Y=None here would fail later)."""
    with pytest.raises(ValueError, match=rf"devices={re.escape(repr(devices))}.*{match}"):
        gplvm.BayesianGPLVM(devices=devices).fit(None)


def test_devices_with_what_is_not_sharded_yet_names_the_alternative():
    """The dynamical prior with ``devices=``, and a checkpoint with devices given as jax
    devices (a file records a count): a ValueError naming the combination and the way out,
    before Y is read."""
    with pytest.raises(ValueError, match=r"devices=1: .*times=.*devices=None"):
        gplvm.BayesianGPLVM(devices=1).fit(None, times=np.arange(6.0))
    for inference in ("collapsed", "svi"):
        with pytest.raises(ValueError, match=r"checkpoint file records the devices as a count"):
            gplvm.BayesianGPLVM(devices=jax.devices()[:1], checkpoint="model.npz",
                                inference=inference).fit(None)


def test_save_refuses_device_objects_and_says_how(subprocesses, tmp_path):
    """``devices=`` a list of jax devices (or a mesh) belongs to the process: save refuses it
    with the fix, before writing anything."""
    model = copy.copy(subprocesses["one"]).set_params(devices=jax.devices()[:1])
    with pytest.raises(TypeError, match=r"set_params\(devices=None\)"):
        model.save(tmp_path / "model.npz")
    assert not list(tmp_path.iterdir())


def test_collapsed_fit_on_devices_checkpoints_and_resumes(subprocesses):
    """``BayesianGPLVM(devices=4, checkpoint=path)`` stopped by Ctrl-C after iteration 15 of
    40 (Adam) writes a file without its mesh; loaded and resumed, the rows are split over the
    4 devices again and the run ends where the uninterrupted one does, bit for bit.  Resumed
    with ``devices=None`` the rest runs on one device: the same fit up to the order of the
    additions, so its latents agree to 1e-10 (the argument of the test above)."""
    interrupted, n_iter, dx, dbound, same_history, dx_one = \
        subprocesses["fit"]["collapsed_resumed"]
    assert interrupted and n_iter == 16
    assert dx == 0.0 and dbound == 0.0 and same_history
    assert dx_one <= 1e-10
