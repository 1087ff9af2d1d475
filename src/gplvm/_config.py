"""Process-wide configuration applied once at ``import gplvm`` (DESIGN.md, "Numbers and numerics").

Three settings, made before JAX's first computation (``gplvm`` imports this
module before anything else; the public names are in :mod:`gplvm.config`; the precision may
also be switched later):

* **float64 by default, float32 on request** (issue 16, item 6).  The collapsed bounds,
  Woodbury identities and Cholesky factors used throughout lose several digits in float32, so
  float64 is the default.  A GPU user who wants float32's speed and memory sets
  ``GPLVM_PRECISION=float32`` in the environment, calls ``gplvm.config.set_precision("float32")``
  or fits inside ``with gplvm.config.precision("float32"):``.  The switch is JAX's
  ``jax_enable_x64`` flag, which JAX's jit caches key on, so a function compiled in one
  precision is compiled again (not reused) in the other; arrays created in one precision keep
  their dtype.  In float32 the jitter policy of :mod:`gplvm.linalg` starts at sqrt(eps) of
  float32 (3.5e-4 of the mean diagonal) instead of float64's 1.5e-8, and that is also the least
  jitter any Cholesky factor gets (:func:`gplvm.linalg.jitter_floor`).  The tested
  tolerances (``tests/models/test_float32.py``): the collapsed bound and its gradient within
  eps·(1 + βNσ_f²) of float64's (the bound on the condition number of the matrix the bound factorises; ≈ 5e-4 on
  the test's data), a short fit's bound within 0.5% of float64's, Bayesian linear regression's
  predictions within 10·eps·cond(A).  The limit: with noise far below the signal (β‖Ψ2‖ large)
  float32's round-off makes that matrix indefinite, the bound turns non-finite and the fit stops
  early with a warning; use float64 there.  The Pólya-gamma and CRT samplers (the RFLVM's
  Bernoulli, binomial, negative-binomial and multinomial likelihoods) run in float64 only and
  raise a ValueError in float32 mode; the Gaussian and Poisson RFLVM run in either.
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

import contextlib
import importlib.util
import logging
import os
from typing import Iterator, Optional

import jax
import numpy as np

logger = logging.getLogger("gplvm")

PRECISION_ENV = "GPLVM_PRECISION"
PRECISIONS = ("float64", "float32")
CACHE_ENV = "GPLVM_COMPILATION_CACHE"
DEVICES_ENV = "GPLVM_CPU_DEVICES"
CACHE_MAX_BYTES = 2 * 1024**3
_OFF = {"0", "false", "no", "off"}



def _checked(precision, where: str) -> str:
    if not isinstance(precision, str) or precision.strip().lower() not in PRECISIONS:
        raise ValueError(f"{where}={precision!r} is not a precision gplvm computes in; pass "
                         f"'float64' (the default) or 'float32' (faster on GPUs, about 7 "
                         f"significant digits)")
    return precision.strip().lower()


def set_precision(precision: str) -> None:
    """Compute in ``'float64'`` (the default) or ``'float32'`` from now on in this process.

    Arrays and fitted models made before keep their dtype; fit again after switching.  Toggles
    JAX's ``jax_enable_x64`` (so it applies to every JAX computation of the process).

    Raises:
        ValueError: ``precision`` is neither ``'float64'`` nor ``'float32'``.
    """
    jax.config.update("jax_enable_x64", _checked(precision, "precision") == "float64")


def get_precision() -> str:
    """``'float64'`` or ``'float32'``: the precision computations run in now."""
    return "float64" if jax.config.jax_enable_x64 else "float32"


def float_dtype() -> np.dtype:
    """NumPy's dtype of the precision computed in (for host arrays that join fitted models)."""
    return np.dtype(np.float64 if jax.config.jax_enable_x64 else np.float32)


@contextlib.contextmanager
def precision(precision: str) -> Iterator[None]:
    """``with gplvm.config.precision("float32"): model.fit(Y)`` computes in ``precision``
    inside the block and restores the previous precision on the way out (an error included)."""
    before = get_precision()
    set_precision(precision)
    try:
        yield
    finally:
        set_precision(before)


set_precision(_checked(os.environ.get(PRECISION_ENV, "float64"), PRECISION_ENV))


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


#: XLA's options for gplvm's MCMC blocks compiled for CPU devices
#: (:func:`gplvm.inference.mcmc._exported.compile_lowered`); empty: XLA's defaults.
_CPU_COMPILER_OPTIONS: dict = {}


def cpu_compiler_options() -> dict:
    """A copy of the XLA options gplvm's MCMC blocks are compiled with on CPU ({}: XLA's)."""
    return dict(_CPU_COMPILER_OPTIONS)


def set_cpu_fusion_emitters(enabled: bool) -> None:
    """Compile later MCMC blocks on CPU with XLA's newer fusion emitters (``True``, the
    default: XLA's own setting) or without them (``False``).

    Without them an RFLVM block compiles in 55–90% of the CPU time, with less peak memory
    (``benchmarks/rflvm_compile.py --emitters off``; at 1000 × 1000 every likelihood but the
    negative binomial's Gibbs block under 15 s), and sweeps at about the same speed
    (``benchmarks/cpu_emitters.py``; issue 30 item 4).  The price is bit-for-bit
    reproducibility across programs: the older emitters round the same computation differently
    in different fusions, so draws then depend in their last bits (and, through a chain's
    chaos, beyond) on the block size and the number of devices, which the default compile
    does not (``tests/inference/mcmc/test_mcmc_driver.py``).  Same seed, same settings, same
    machine still give the same draws.  A block compiled before keeps its setting.
    """
    _CPU_COMPILER_OPTIONS.clear()
    if not enabled:
        _CPU_COMPILER_OPTIONS["xla_cpu_use_fusion_emitters"] = False


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
