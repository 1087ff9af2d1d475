r"""Several processes, one mesh: :mod:`jax.distributed` driven by the environment (issue 18).

Every process runs the same program.  After :func:`initialize`, ``jax.devices()`` lists the
devices of *every* process, so a mesh from :func:`gplvm.inference.sharding.make_mesh` spans
them all, each process builds only the row blocks of its own devices
(:func:`~gplvm.inference.sharding.shard_rows`), and the ``psum`` of the collapsed bound's row
sums crosses processes (on CPU through JAX's Gloo collectives, the default of
``jax_cpu_collectives_implementation``).

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
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.inference import sharding
from gplvm.kernels import RBF

ENV = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


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


def initialize(coordinator_address: Optional[str] = None, num_processes: Optional[int] = None,
               process_id: Optional[int] = None) -> None:
    """Join the group of processes, before any JAX computation in this process.

    Arguments left None are read from ``JAX_COORDINATOR_ADDRESS`` (``host:port`` of process 0),
    ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``; what is still unset is left to JAX's cluster
    detection (SLURM, Open MPI, Kubernetes, Cloud TPU) in :func:`jax.distributed.initialize`.

    Raises:
        ValueError: on a process id outside 0..num_processes − 1, or a non-integer setting.
        RuntimeError: when JAX's backend is already running in this process (JAX can join a
            group of processes only before its first computation).
    """
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
    jax.distributed.initialize(coordinator_address, num_processes, process_id)


def demo_problem(n_rows: int = 10, n_cols: int = 3, n_components: int = 2,
                 n_inducing: int = 4, seed: int = 0):
    """A small seeded problem, the same in every process: (params, Y) for
    :func:`gplvm.inference.sharding.collapsed_bound`.  Y has two missing entries."""
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
    value, grads = sharding.bound_and_grad(params, Y, mesh)
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
