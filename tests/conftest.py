"""Test configuration: shape checks, float64, and deselection of tests that need ../shared/data.

The shape annotations of the building blocks (STYLE.md 7, :mod:`gplvm.typing`) are checked in
every test run: jaxtyping's import hook, installed here before anything imports gplvm,
decorates every function and dataclass of the :data:`TYPECHECKED` packages with
``jaxtyped(typechecker=beartype)``.  (jaxtyping's pytest option ``--jaxtyping-packages`` would
do the same, but its parser cannot take a configured checker together with several packages.)
``tests/test_typing.py`` fails if the hook is not active.

Tests marked ``shared_data`` read real datasets from the folder ``../shared/data`` beside the
checkout (or ``$GPLVM_DATA_DIR``).  CI always has it; elsewhere those tests are deselected with a
message saying why, and the rest of the suite still runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Before NumPy/SciPy load OpenBLAS (see scripts/_venv.sh): one BLAS thread under XLA's pool.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The suite is bound by XLA compilation (thousands of small programs, each run a few times),
# and most of a CPU compile is LLVM optimising the generated code.  The tests compile with
# LLVM's optimisation off (XLA's own HLO passes, which decide fusion and numerics, still run):
# measured on tests/models/gplvm_family/test_dpgplvm.py, 149 -> 96 CPU-s.  What the tests
# assert (closed forms, tolerances, same seed same draws within one configuration) does not
# depend on it; benchmarks and users keep XLA's default.  An explicit level in XLA_FLAGS wins (subprocesses inherit it).
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_backend_optimization_level=0").strip()

import pytest  # noqa: E402
from jaxtyping import install_import_hook  # noqa: E402

#: The packages whose annotations are checked at run time in the tests.
TYPECHECKED = ("gplvm.kernels", "gplvm.features", "gplvm.expectations", "gplvm.likelihoods",
               "gplvm.samplers", "gplvm.data", "gplvm.metrics", "gplvm.baselines")
#: beartype with PEP 484's numeric tower (an int is accepted where a float is annotated, a float
#: where a complex is), as static type checkers read the annotations.
TYPECHECKER = "beartype.beartype(conf=beartype.BeartypeConf(is_pep484_tower=True))"

if any(name in sys.modules for name in TYPECHECKED):  # pragma: no cover - misconfiguration
    raise RuntimeError(f"gplvm was imported before tests/conftest.py could install the "
                       f"jaxtyping import hook; its annotations would go unchecked "
                       f"({sorted(n for n in TYPECHECKED if n in sys.modules)})")
install_import_hook(TYPECHECKED, TYPECHECKER)

import gplvm  # noqa: F401,E402  (float64 on)

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    env = os.environ.get("GPLVM_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data"


#: Node ids of the tests marked ``slow`` (over ~3 s on a quiet 2-core machine, measured by
#: scripts/slow_tests.py): ``-m "not slow"`` is the fast loop.
SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def slow_tests() -> set:
    return {ln.strip() for ln in SLOW_LIST.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")}


@pytest.hookimpl(tryfirst=True)     # before -m reads the markers
def pytest_collection_modifyitems(config, items):
    slow = slow_tests()
    for item in items:
        if item.nodeid in slow or item.nodeid.split("[")[0] in slow:   # a case, or all
            item.add_marker(pytest.mark.slow)
    if shared_data_dir().is_dir():
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("shared_data") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
        config._gplvm_deselected = len(drop)


def pytest_report_header(config):
    if not shared_data_dir().is_dir():
        return (f"gplvm: {shared_data_dir()} not found; tests marked 'shared_data' (real "
                f"datasets) are deselected. Set GPLVM_DATA_DIR or put ../shared beside the repo.")
    return f"gplvm: real datasets from {shared_data_dir()}"


def memory_mappings() -> tuple[int, int] | None:
    """(this process's memory mappings, the kernel's limit vm.max_map_count), where Linux says.

    Every XLA executable compiled on the CPU keeps ~3 mappings (code, constants, data) for as
    long as JAX caches it: one pytest process over many test files can reach the limit, and
    XLA then aborts inside a compile (scripts/test.sh runs the files in groups for this)."""
    try:
        with open("/proc/self/maps") as maps:
            count = sum(1 for _ in maps)
        with open("/proc/sys/vm/max_map_count") as limit:
            return count, int(limit.read())
    except (OSError, ValueError):
        return None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    n = getattr(config, "_gplvm_deselected", 0)
    if n:
        terminalreporter.write_line(
            f"gplvm: {n} tests needing ../shared/data were deselected because "
            f"{shared_data_dir()} does not exist", yellow=True)
    mappings = memory_mappings()
    if mappings is not None:
        count, limit = mappings
        terminalreporter.write_line(
            f"gplvm: this process ends with {count:,} memory mappings of the {limit:,} the "
            f"kernel allows ({100 * count / limit:.0f}%)", yellow=count > 0.6 * limit)


@pytest.fixture
def forbid_computation(monkeypatch):
    """``forbid(module, *names)``: replace ``module.<name>`` by a function that fails the test,
    so a bad-input test proves the ValueError came before any computation started."""
    def fail(*args, **kwargs):
        raise AssertionError("computation started before validation")

    def forbid(module, *names):
        for name in names:
            monkeypatch.setattr(module, name, fail)

    return forbid
