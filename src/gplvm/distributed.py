r"""Several processes, one mesh: :mod:`jax.distributed` driven by the environment (issue 18).

Every process runs the same program.  After :func:`initialize`, ``jax.devices()`` lists the
devices of *every* process, so a mesh from :func:`gplvm.inference.sharding.make_mesh` spans
them all, each process builds only the row blocks of its own devices
(:func:`~gplvm.inference.sharding.shard_rows`), and the ``psum`` of the collapsed bound's row
sums (:mod:`gplvm.models.gplvm_family.sharded_bound`) crosses processes (on CPU through JAX's
Gloo collectives, the default of ``jax_cpu_collectives_implementation``).

JAX joins processes only before its first computation; ``import gplvm`` computes nothing, so a
program imports gplvm, calls :func:`initialize`, and only then computes.  ``python -m
gplvm.distributed`` is such a program; docs/scaling.md gives the commands that start it as two
processes on one machine, under SLURM's ``srun`` or over SSH.  With ``JAX_COORDINATOR_ADDRESS``
(``host:port`` of process 0), ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID`` set::

    JAX_PROCESS_ID=1 python -m gplvm.distributed &
    JAX_PROCESS_ID=0 python -m gplvm.distributed

Process 0 prints one line of JSON: the bound of a small seeded problem
(:func:`demo_problem`) evaluated with its rows split over every device of every process, and
its gradient; ``python -m gplvm.distributed --single`` prints the one-process value.
:func:`initialize` reads the same three variables (else JAX's cluster detection: SLURM, Open
MPI, ...) for a program in which nothing has started JAX's backend yet.

**Slow starts.**  Processes rarely reach a point at the same moment: one compiles longer, or
shares its cores with other work.  JAX waits ``initialization_timeout`` for every process to
join, but Gloo gives a process only 30 s to find its peers at the first collective that
spans them, and fails with ``Gloo context initialization failed: ... timed out`` (measured:
a process 45 s late fails that way every time).  So :func:`initialize` joins with one time-out
for everything, ``timeout=`` or ``GPLVM_DISTRIBUTED_TIMEOUT`` seconds (default
:data:`DEFAULT_TIMEOUT`), then :func:`connect` holds every process at a barrier of JAX's
coordination service (which waits that long) before the first collective, so that Gloo meets
all of them at once; later collectives between the same devices wait as long as they need.
:func:`synchronize` is that barrier for a program's own use: call it between compiling and
running a program whose collectives span a new set of devices.  A process that is still
missing after the time-out gets one error naming the coordinator, the processes and the
setting to raise.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.inference import sharding
from gplvm.kernels import RBF
from gplvm.models.gplvm_family import sharded_bound
from gplvm.models.gplvm_family.sharded_data import shard_data

ENV = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
#: The environment variable that sets the seconds every wait for other processes may take.
TIMEOUT_ENV = "GPLVM_DISTRIBUTED_TIMEOUT"
#: Its default: ten minutes, enough for a process that compiles on a loaded machine.
DEFAULT_TIMEOUT = 600

_barriers = itertools.count()   # every process calls synchronize in the same order


def _env_int(name: str) -> Optional[int]:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not an integer; set it to the number of processes "
                         f"(JAX_NUM_PROCESSES) or this process's index from 0 (JAX_PROCESS_ID)"
                         ) from None


def timeout_seconds(timeout: Optional[float] = None) -> int:
    """The seconds a wait for other processes may take: ``timeout``, else
    ``GPLVM_DISTRIBUTED_TIMEOUT``, else :data:`DEFAULT_TIMEOUT` (whole seconds, at least 1)."""
    source = "timeout"
    if timeout is None:
        text = os.environ.get(TIMEOUT_ENV, "").strip()
        if not text:
            return DEFAULT_TIMEOUT
        source = TIMEOUT_ENV
        try:
            timeout = float(text)
        except ValueError:
            raise ValueError(f"{TIMEOUT_ENV}={text!r} is not a number; set it to the seconds a "
                             f"process may wait for the others (default {DEFAULT_TIMEOUT})"
                             ) from None
    if not (isinstance(timeout, (int, float)) and timeout >= 1 and timeout < 1e9):
        raise ValueError(f"{source}={timeout!r}; give the seconds a process may wait for the "
                         f"others, at least 1 (default {DEFAULT_TIMEOUT})")
    return int(round(timeout))


def _state():
    """JAX's record of the group (address, count, this process's id, the coordination client);
    public API has no accessor for the client's barrier."""
    from jax._src.distributed import global_state

    return global_state


def _where() -> str:
    """This process's place in the group, for messages."""
    state = _state()
    return (f"process {state.process_id} of {state.num_processes} (coordinator "
            f"{state.coordinator_address})")


def _too_slow(what: str, seconds: int) -> str:
    return (f"{_where()}: {what} within {seconds} s; another process may have crashed (see its "
            f"output), not have started, or be slower than that (compiling on a loaded "
            f"machine): raise the time-out with timeout= or {TIMEOUT_ENV}=seconds, in every "
            f"process")


def synchronize(name: str = "gplvm", timeout: Optional[float] = None) -> None:
    """Wait until every process of the group has called ``synchronize`` (the same number of
    times), at most :func:`timeout_seconds` (``timeout``).  Nothing to do in one process.

    Call it after compiling and before running a program whose collectives join a new set of
    devices across processes: Gloo gives the first such collective only 30 s to find every
    process, this barrier as long as you set.

    Raises:
        TimeoutError: some process did not arrive in time (the message names the coordinator,
            the processes and the setting to raise).
    """
    seconds = timeout_seconds(timeout)
    client = _state().client
    if client is None or jax.process_count() == 1:
        return
    try:
        client.wait_at_barrier(f"gplvm:{name}:{next(_barriers)}", seconds * 1000)
    except Exception as err:   # jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED, or a dead peer
        raise TimeoutError(_too_slow(f"the other processes did not reach {name!r}", seconds)
                           + f" ({str(err).splitlines()[0][:200]})") from err


def connect(timeout: Optional[float] = None) -> None:
    """Open the collectives between the processes: compile a one-number ``psum`` over every
    device of every process, :func:`synchronize`, then run it and a gather of one number per
    process (the collective JAX itself runs when an array is put on a mesh that spans
    processes, between the devices of the same local index).  Later collectives between those
    devices reuse the connections and wait for late processes as long as they need.
    :func:`initialize` calls it; nothing to do in one process."""
    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = sharding.make_mesh()
    ones = jax.make_array_from_callback(
        (mesh.size,), NamedSharding(mesh, PartitionSpec("rows")),
        lambda index: np.ones(1))
    total = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "rows"), mesh=mesh,
                                  in_specs=PartitionSpec("rows"), out_specs=PartitionSpec()))
    compiled = total.lower(ones).compile()
    synchronize("connect", timeout)
    try:
        gathered = multihost_utils.process_allgather(np.ones(1))
        value = float(np.asarray(compiled(ones).addressable_data(0))[0])
    except Exception as err:    # Gloo could not reach a peer
        raise ConnectionError(_too_slow("the collectives could not connect every process",
                                        timeout_seconds(timeout))
                              + f" ({str(err).splitlines()[0][:300]})") from err
    if value != mesh.size or np.shape(gathered) != (jax.process_count(), 1):
        raise ConnectionError(f"{_where()}: a sum of one over the {mesh.size} devices gave "
                              f"{value}; the processes do not agree on the devices")


def _warn_unless(done: threading.Event, seconds: float, message: str) -> None:
    """Print ``message`` to stderr unless ``done`` is set within ``seconds``."""
    if not done.wait(seconds):
        print(message, file=sys.stderr, flush=True)


def initialize(coordinator_address: Optional[str] = None, num_processes: Optional[int] = None,
               process_id: Optional[int] = None, *, timeout: Optional[float] = None) -> None:
    """Join the group of processes, before any JAX computation in this process, and open the
    collectives between them (:func:`connect`).

    Arguments left None are read from ``JAX_COORDINATOR_ADDRESS`` (``host:port`` of process 0),
    ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``; what is still unset is left to JAX's cluster
    detection (SLURM, Open MPI, Kubernetes, Cloud TPU) in :func:`jax.distributed.initialize`.
    ``timeout`` (else ``GPLVM_DISTRIBUTED_TIMEOUT``, else :data:`DEFAULT_TIMEOUT` seconds) bounds
    every wait for the other processes: joining, the first collective, shutting down.

    Raises:
        ValueError: on a process id outside 0..num_processes − 1, a non-integer setting or a
            time-out below 1 s.
        RuntimeError: when JAX's backend is already running in this process (JAX can join a
            group of processes only before its first computation).
        TimeoutError, ConnectionError: the other processes did not join in time, or the
            collectives could not reach them (the message names the coordinator, the
            processes and the setting to raise).
    """
    seconds = timeout_seconds(timeout)
    coordinator_address = coordinator_address or os.environ.get(ENV[0]) or None
    num_processes = _env_int(ENV[1]) if num_processes is None else num_processes
    process_id = _env_int(ENV[2]) if process_id is None else process_id
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"num_processes={num_processes}; it must be at least 1")
    if process_id is not None and process_id < 0:
        raise ValueError(f"process_id={process_id}; process ids start at 0 (process 0 is the "
                         f"coordinator)")
    if None not in (num_processes, process_id) and not 0 <= process_id < num_processes:
        raise ValueError(f"process_id={process_id} with num_processes={num_processes}; ids run "
                         f"from 0 to {num_processes - 1}")
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        raise RuntimeError("JAX's backend is already running in this process, so it can no "
                           "longer join other processes; call jax.distributed.initialize(address,"
                           " num_processes, process_id) first, before any computation "
                           "(call gplvm.distributed.initialize() first; docs/scaling.md)")
    # JAX ends the process itself (a fatal error in C++, no Python exception) when the other
    # processes have not joined by the time-out: say beforehand what to check.
    joined = threading.Event()
    threading.Thread(target=_warn_unless, daemon=True, args=(joined, 0.9 * seconds, (
        f"gplvm.distributed: process {process_id} of {num_processes} has waited "
        f"{0.9 * seconds:.0f} s for the others to join at coordinator {coordinator_address}; "
        f"JAX stops this process at {seconds} s. Check that every process runs with the same "
        f"JAX_COORDINATOR_ADDRESS and JAX_NUM_PROCESSES, or raise the time-out with timeout= "
        f"or {TIMEOUT_ENV}=seconds"))).start()
    try:
        jax.distributed.initialize(coordinator_address, num_processes, process_id,
                                   initialization_timeout=seconds,
                                   shutdown_timeout_seconds=seconds)
    except Exception as err:    # jax.errors.JaxRuntimeError and the like
        if not jax.distributed.is_initialized() and not isinstance(err, ValueError):
            raise TimeoutError(
                f"process {process_id} of {num_processes} could not join the group at "
                f"coordinator {coordinator_address} within {seconds} s; check that process 0 "
                f"runs and that every process has the same address (JAX_COORDINATOR_ADDRESS) "
                f"and count (JAX_NUM_PROCESSES), or raise the time-out with timeout= or "
                f"{TIMEOUT_ENV}=seconds ({str(err).splitlines()[0][:200]})") from err
        raise
    finally:
        joined.set()
    connect(seconds)


def demo_problem(n_rows: int = 10, n_cols: int = 3, n_components: int = 2,
                 n_inducing: int = 4, seed: int = 0):
    """A small seeded problem, the same in every process: (params, Y) for
    :func:`gplvm.models.gplvm_family.sharded_bound.collapsed_bound`.  Y has two missing
    entries."""
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(n_rows, n_cols))
    Y[1 % n_rows, 0] = np.nan
    Y[(n_rows - 3) % n_rows, n_cols - 1] = np.nan
    params = {"kernel": RBF(lengthscale=jnp.linspace(1.2, 0.8, n_components), variance=1.3),
              "Z": jnp.asarray(rng.normal(size=(n_inducing, n_components))),
              "X_mean": jnp.asarray(rng.normal(size=(n_rows, n_components))),
              "X_var": jnp.asarray(rng.uniform(0.1, 0.5, size=(n_rows, n_components))),
              "noise_var": jnp.asarray(0.3)}
    return params, Y


def _listed(tree):
    return jax.tree_util.tree_map(lambda x: np.asarray(x).tolist(), tree)


def check(n_rows: int = 10) -> dict:
    """The bound of :func:`demo_problem` with its rows over every device of every process, and
    its gradient with respect to the parameters every process holds whole (Z, the kernel's, σ²;
    the rows of X's gradient stay with the processes that own them)."""
    params, Y = demo_problem(n_rows)
    mesh = sharding.make_mesh()
    data = shard_data(Y, mesh)
    # compile, wait for every process, then run: the processes meet at the psum together
    compiled = sharded_bound.bound_and_grad_compiled(params, data)
    synchronize("check")
    value, grads = compiled(params, data)
    return {"processes": jax.process_count(), "devices": mesh.size,
            "local_devices": len(jax.local_devices()), "bound": float(value),
            "grad_Z": _listed(grads["Z"]), "grad_noise_var": _listed(grads["noise_var"]),
            "grad_kernel": _listed(jax.tree_util.tree_leaves(grads["kernel"]))}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gplvm.distributed",
        description="Evaluate a sharded collapsed bound across processes (jax.distributed); "
                    "process 0 prints JSON.  Settings: JAX_COORDINATOR_ADDRESS, "
                    "JAX_NUM_PROCESSES, JAX_PROCESS_ID (or SLURM's).")
    parser.add_argument("--rows", type=int, default=10, help="rows of the demo problem")
    parser.add_argument("--single", action="store_true",
                        help="one process, no jax.distributed (the reference)")
    args = parser.parse_args(argv)
    if not args.single and not jax.distributed.is_initialized():
        initialize()
    result = check(args.rows)
    if jax.process_index() == 0:
        print(json.dumps(result), flush=True)
    if jax.distributed.is_initialized():
        jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
