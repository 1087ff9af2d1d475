"""Process-wide configuration applied once at ``import gplvm`` (DESIGN.md, "Numbers and numerics").

Three settings, each of which JAX reads only before its first computation (``gplvm`` imports this
module before anything else):

* **float64.**  The collapsed bounds, Woodbury identities and Cholesky factors used throughout
  lose several digits in float32.
* **A persistent compilation cache**, on by default, in :func:`default_cache_dir`
  (``$XDG_CACHE_HOME/gplvm/jax`` or ``~/.cache/gplvm/jax``; JAX's own
  ``JAX_COMPILATION_CACHE_DIR`` wins when set).  A second process fitting the same model on data
  of the same shapes loads XLA's compiled programs from there instead of compiling them again
  (issue 14: the negative-binomial RFLVM compiles for ~20 s, a Bayesian GPLVM fit for ~7 s).
  Every program is cached, however quick to compile (JAX's default keeps only those above 1 s;
  a fit compiles dozens of programs of 0.01–0.3 s each, ~12 kB per entry).  Opt out with the
  environment variable ``GPLVM_COMPILATION_CACHE=0`` or :func:`disable_compilation_cache`; a
  folder that cannot be created or written leaves the cache off without an error.  Concurrent
  processes may share the folder: an entry read while another process writes it fails its
  checksum and is compiled again (JAX then warns); with the ``filelock`` package installed, reads
  and writes are locked and the folder is kept under :data:`CACHE_MAX_BYTES` (least recently used
  entries go first).  The cache is trusted code: keep it private to the user (JAX's warning on
  ``set_cache_dir``).
* **One CPU device per core** (``jax_num_cpu_devices``), so that
  :func:`gplvm.inference.mcmc.run_chains` runs chains on several cores at once (one chain per
  device, :mod:`gplvm.inference.mcmc._devices`).  Single-device programs are unaffected.  Set
  ``GPLVM_CPU_DEVICES=1`` to keep one device; JAX's ``JAX_NUM_CPU_DEVICES`` or
  ``--xla_force_host_platform_device_count`` in ``XLA_FLAGS`` are respected as they are; nothing
  changes when JAX was already initialised before ``import gplvm``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from typing import Optional

import jax

logger = logging.getLogger("gplvm")

CACHE_ENV = "GPLVM_COMPILATION_CACHE"
DEVICES_ENV = "GPLVM_CPU_DEVICES"
CACHE_MAX_BYTES = 2 * 1024**3
_OFF = {"0", "false", "no", "off"}

jax.config.update("jax_enable_x64", True)


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/gplvm/jax``, or ``~/.cache/gplvm/jax`` when that variable is unset."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gplvm", "jax")


def _writable_dir(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def enable_compilation_cache(path: Optional[str] = None) -> Optional[str]:
    """Keep XLA's compiled programs in ``path`` across processes (the default at import).

    Args:
        path: the folder; defaults to JAX's configured one, else :func:`default_cache_dir`.

    Returns:
        The folder in use, or None when it cannot be created or written (the cache stays off).
        Takes effect for the compilations after JAX's first use of the cache.
    """
    path = str(path or jax.config.jax_compilation_cache_dir or default_cache_dir())
    if not _writable_dir(path):
        logger.info("gplvm: compilation cache off, %s is not a writable folder", path)
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_enable_compilation_cache", True)
    # Cache every program: ours compile in 0.01-0.3 s each, below JAX's default 1 s threshold.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # no size floor
    if importlib.util.find_spec("filelock") is not None:
        # JAX locks the folder (reads and writes) only when it may evict entries
        jax.config.update("jax_compilation_cache_max_size", CACHE_MAX_BYTES)
    return path


def disable_compilation_cache() -> None:
    """Compile everything afresh in this process (before its first compilation; or set
    ``GPLVM_COMPILATION_CACHE=0`` in the environment)."""
    jax.config.update("jax_enable_compilation_cache", False)
    try:  # JAX decides once per process whether the cache is used; make it decide again
        from jax._src import compilation_cache
        compilation_cache.reset_cache()
    except (ImportError, AttributeError):
        pass


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _configure_cpu_devices() -> None:
    """One CPU device per usable core (or ``GPLVM_CPU_DEVICES``) unless the user chose."""
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return
    try:
        if jax.config.jax_num_cpu_devices != -1:   # JAX_NUM_CPU_DEVICES or an earlier update
            return
        wanted = os.environ.get(DEVICES_ENV, "").strip()
        n = int(wanted) if wanted else _usable_cores()
        if n > 1:
            jax.config.update("jax_num_cpu_devices", n)
    except (AttributeError, RuntimeError, ValueError) as err:
        # an older JAX, a backend initialised before ``import gplvm``, a malformed setting
        logger.info("gplvm: keeping JAX's CPU devices (%s)", err)


if os.environ.get(CACHE_ENV, "1").strip().lower() not in _OFF:
    enable_compilation_cache()
_configure_cpu_devices()
