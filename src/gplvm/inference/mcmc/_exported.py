"""Blocks kept across processes as exported StableHLO, so a second process skips tracing.

JAX's persistent compilation cache (:mod:`gplvm._config`) saves XLA's compile of a block, but
its key is the lowered program, so every new process still traces the sweep in Python and
lowers it before it can look the entry up: 3.4 s of the RFLVM's negative-binomial block on
congress109, against 1.9 s to read its programs from the cache (issue 14,
``benchmarks/compile_cache.py``).  Here the block is exported once
(:func:`jax.export.export`: traced and lowered to StableHLO, serialised) and, in later
processes, deserialised and called: lowering that call is a few milliseconds, and its compile is
a hit in the persistent cache.  A process that exports also runs the exported program, so the
first and later processes compile and run the same program: the draws are the same whichever
process made the file (tested in ``tests/inference/mcmc/test_mcmc_driver.py``).

A file's name is a SHA-256 of everything that fixes the program: the caller's ``export_key``
(which must describe the sweep and the ``record``/``trace`` functions completely — the RFLVM
passes its static :class:`~gplvm.models.rflvm.spec.RFLVMSpec`), the block's own settings, the
argument shapes, dtypes and shardings, the devices, the JAX version and a digest of gplvm's own
source files, so an edited or upgraded library never reads a stale program.  Files live in
``gplvm-blocks/`` inside the persistent cache's folder and only while that cache is on; at most
:data:`MAX_FILES` are kept (least recently used go first).  Any failure (no ``flatbuffers``, an
unreadable or truncated file, a program JAX cannot export) falls back to compiling in-process.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import pickle
import tempfile
from pathlib import Path
from typing import Callable, Optional

import jax

from gplvm._config import cpu_compiler_options

logger = logging.getLogger("gplvm")

MAX_FILES = 256
FOLDER = "gplvm-blocks"


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 of every ``.py`` file of the installed ``gplvm`` package (paths and contents)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def folder() -> Optional[Path]:
    """Where exported blocks are kept: ``gplvm-blocks`` in the persistent compilation cache's
    folder, or None when that cache is off or JAX cannot serialise (no ``flatbuffers``)."""
    base = jax.config.jax_compilation_cache_dir
    if not base or not jax.config.jax_enable_compilation_cache:
        return None
    if importlib.util.find_spec("flatbuffers") is None:
        return None
    return Path(base) / FOLDER


def file_key(export_key, settings, tree, leaves) -> str:
    """The SHA-256 naming one exported block (see the module docstring)."""
    devices = jax.devices()
    config = jax.config  # the settings that change a traced program's numbers
    parts = (repr(export_key), repr(settings), repr(tree),
             repr([(x.shape, str(x.dtype), repr(x.sharding)) for x in leaves]),
             jax.__version__, jax.lib.__version__, jax.default_backend(), len(devices),
             devices[0].device_kind, config.jax_enable_x64, config.jax_threefry_partitionable,
             str(config.jax_default_prng_impl), str(config.jax_default_matmul_precision),
             source_digest())
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _read(path: Path):
    from jax import export

    blob, out_tree = pickle.loads(path.read_bytes())
    try:
        os.utime(path)  # recently used
    except OSError:     # a read-only cache folder is still good to read
        pass
    return export.deserialize(blob), out_tree


def _write(path: Path, exported, out_tree) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = pickle.dumps((exported.serialize(), out_tree))
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one
    except BaseException:
        os.unlink(tmp)
        raise
    _evict(path.parent)


def _evict(where: Path) -> None:
    files = sorted(where.glob("*.bin"), key=lambda p: p.stat().st_mtime)
    for old in files[:max(len(files) - MAX_FILES, 0)]:
        old.unlink(missing_ok=True)


def _export(jitted: Callable, tree, leaves):
    """Export ``jitted`` as a function of the flat argument leaves (its pytrees, NamedTuple
    states included, need no serialisation rules); the output's tree structure comes back
    beside it, pickled with the file."""
    from jax import export

    out = {}

    def flat(*xs):
        leaves_out, out["tree"] = jax.tree_util.tree_flatten(
            jitted(*jax.tree_util.tree_unflatten(tree, xs)))
        return leaves_out

    shardings = [x.sharding for x in leaves]
    exported = export.export(jax.jit(flat, in_shardings=shardings))(*leaves)
    return exported, out["tree"]


def compile_lowered(lowered, leaves):
    """``lowered.compile()``, with the CPU options set by
    :func:`gplvm.config.set_cpu_fusion_emitters` (none by default) when every argument lives on
    CPU devices; without them if this jaxlib refuses an option (then XLA's default compile)."""
    options = cpu_compiler_options()
    platforms = {d.platform for x in leaves
                 for d in getattr(getattr(x, "sharding", None), "device_set", ())}
    if options and (platforms or {jax.default_backend()}) == {"cpu"}:
        try:
            return lowered.compile(compiler_options=options)
        except Exception as err:  # noqa: BLE001 -- an option this jaxlib does not know
            logger.info("gplvm: compiling without %s (%s)", options, err)
    return lowered.compile()


def compile_exported(jitted: Callable, args, export_key, settings) -> Optional[Callable]:
    """The compiled block for ``args``, through an exported file (read, or written now); None
    when exporting is off or fails (the caller compiles ``jitted`` itself)."""
    where = folder()
    if where is None or export_key is None:
        return None
    leaves, tree = jax.tree_util.tree_flatten(args)
    try:
        path = where / f"{file_key(export_key, settings, tree, leaves)}.bin"
    except Exception as err:  # noqa: BLE001 -- e.g. gplvm's sources unreadable
        logger.info("gplvm: no exported block (%s)", err)
        return None
    try:
        exported, out_tree = _read(path) if path.exists() else (None, None)
    except Exception as err:  # noqa: BLE001 -- a damaged file is rebuilt
        logger.info("gplvm: exported block %s unreadable (%s); exporting again", path, err)
        exported = None
    loaded = exported is not None
    try:
        if exported is None:
            exported, out_tree = _export(jitted, tree, leaves)
            try:
                _write(path, exported, out_tree)
            except OSError as err:  # the program is still good for this process
                logger.info("gplvm: exported block not saved (%s)", err)
        compiled = compile_lowered(jax.jit(exported.call).lower(*leaves), leaves)
    except Exception as err:  # noqa: BLE001 -- fall back to compiling in-process
        logger.info("gplvm: block not exported (%s: %s); compiling it in-process",
                    type(err).__name__, err)
        if loaded:  # a file that does not compile would fail every later process too
            path.unlink(missing_ok=True)
        return None

    def program(*call_args):
        return jax.tree_util.tree_unflatten(out_tree,
                                            compiled(*jax.tree_util.tree_leaves(call_args)))

    return program
