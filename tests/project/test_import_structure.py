"""gplvm's import structure (issue 11): no import cycle, and ``gplvm.io`` imports no model.

The graph is read from the source by ``scripts/import_graph.py`` with ``ast`` (nothing is
imported): an edge is an import executed when a module is first imported.  The resolution rules
are first checked on a small package written here, whose graph is known by construction; then
the rules are applied to gplvm itself.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

from _paths import REPO as ROOT
from _paths import TESTS

import pytest


def _load_script():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" /
                                                  "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ig = _load_script()


@pytest.fixture(scope="module")
def graph():
    return ig.import_graph()


# ----------------------------------------------------------------------------- the rules


def _write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def toy(tmp_path):
    """A package ``p`` whose executed imports are, by Python's import rules:

    p → p.a (``from p.a import f`` runs p/a.py); p.a → p.sub (running p.sub.x first runs
    p/sub/__init__.py) and p.sub.x; p.sub.x → p.b (relative ``from ..b import g``) and
    p.sub.y (``from . import y``, y a module); p.sub.y → p.sub (``from p.sub import K``: a name
    read from the package's __init__, although p.sub is y's own package); p.b → nothing (its
    import of p.a is inside a function, the one under TYPE_CHECKING never runs).
    """
    _write_package(tmp_path, {
        "p/__init__.py": "from p.a import f\n",
        "p/a.py": "import os\nfrom p.sub.x import h\ndef f():\n    return h\n",
        "p/b.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from p.sub import x
            def g():
                from p.a import f
                return f
            """,
        "p/sub/__init__.py": "K = 1\n",
        "p/sub/x.py": "from ..b import g\nfrom . import y\nh = g\n",
        "p/sub/y.py": "try:\n    from p.sub import K\nexcept ImportError:\n    K = 0\n",
    })
    return ig.import_graph(tmp_path, "p"), ig.module_names(tmp_path, "p")


def test_executed_imports_are_resolved_as_python_runs_them(toy):
    graph, _ = toy
    assert {a: set(edges) for a, edges in graph.items()} == {
        "p": {"p.a"},
        "p.a": {"p.sub", "p.sub.x"},
        "p.b": set(),
        "p.sub": set(),
        "p.sub.x": {"p.b", "p.sub.y"},
        "p.sub.y": {"p.sub"},
    }
    assert graph["p.sub.x"] == {"p.b": 1, "p.sub.y": 2}        # the line of each import


def test_a_cycle_is_found_and_described(toy, tmp_path):
    graph, modules = toy
    assert ig.find_cycle(graph) is None
    (tmp_path / "p" / "b.py").write_text("import p.a\n")          # p.a → p.sub.x → p.b → p.a
    graph = ig.import_graph(tmp_path, "p")
    cycle = ig.find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) == {"p.a", "p.sub.x", "p.b"}
    assert all(b in graph[a] for a, b in zip(cycle, cycle[1:]))
    assert "b.py:1" in ig.describe_cycle(graph, cycle, modules)


def test_reachable_and_package_graph(toy):
    graph, _ = toy
    assert ig.reachable(graph, "p.a") == {"p.sub", "p.sub.x", "p.b", "p.sub.y"}
    assert ig.package_graph(graph) == {"p": {"p.a"}, "p.a": {"p.sub"}, "p.b": set(),
                                       "p.sub": {"p.b"}}


# ----------------------------------------------------------------------------- gplvm


def test_every_module_is_parsed(graph):
    assert {"gplvm", "gplvm.io", "gplvm.io.codec", "gplvm.io.model_file", "gplvm.registry",
            "gplvm.models"} <= set(graph)
    assert len(graph) == len(ig.module_names())


def test_no_import_cycle(graph):
    cycle = ig.find_cycle(graph)
    assert cycle is None, ("import cycle: " + ig.describe_cycle(graph, cycle, ig.module_names()))


@pytest.mark.parametrize("module", sorted(m for m in ig.module_names()
                                          if m == "gplvm.io" or m.startswith("gplvm.io.")))
def test_io_reaches_no_model(graph, module):
    models = sorted(m for m in ig.reachable(graph, module)
                    if m == "gplvm.models" or m.startswith("gplvm.models."))
    assert not models, f"{module} imports model modules {models}"
    assert "gplvm" not in ig.reachable(graph, module)    # nor the package __init__ (which does)


def test_docs_graph_is_current():
    """docs/import_graph.md is what the script prints today (regenerate it after moving
    imports: ``python scripts/import_graph.py > docs/import_graph.md``)."""
    expected = ig.mermaid(ig.package_graph(ig.import_graph()))
    assert expected in (ROOT / "docs" / "import_graph.md").read_text(encoding="utf-8")


def test_every_slow_test_listed_exists_and_every_test_file_keeps_fast_tests():
    """tests/slow_tests.txt (the ``slow`` marker, scripts/slow_tests.py) names only test
    functions that exist, so a renamed test cannot silently leave the list; and every test
    file keeps at least one test outside it, so ``-m "not slow"`` touches every module the
    suite tests."""
    import re

    from conftest import slow_tests

    defined = {path.relative_to(ROOT).as_posix():
               set(re.findall(r"^def (test_\w+)\(", path.read_text(), re.M))
               for path in TESTS.rglob("test_*.py")}
    listed: dict = {}
    for nodeid in slow_tests():
        file, _, name = nodeid.partition("::")
        name = name.split("[")[0]
        assert name in defined.get(file, ()), f"{nodeid}: no such test (update slow_tests.txt)"
        listed.setdefault(file, set()).add(name)
    for file, names in defined.items():
        assert names - listed.get(file, set()) or not names, (
            f"every test of {file} is marked slow: the fast loop would not test it")


def test_a_test_imports_other_test_modules_only_from_its_own_folder():
    """tests/ mirrors the package in folders without ``__init__.py``: pytest puts each test
    file's own folder on ``sys.path`` (and pyproject.toml puts ``tests/``, for the helpers
    beside conftest.py), so ``from test_io import ...`` works from tests/io/ but, from another
    folder, only when test_io happens to be imported already -- not in a run of that one file
    or of scripts/test.sh's group without it.  Shared code goes in a helper of tests/."""
    import ast

    folder = {path.stem: path.parent for path in TESTS.rglob("test_*.py")}
    wrong = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                if name in folder and folder[name] != path.parent:
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert wrong == []


# ----------------------------------------------------------------------------- lazy imports


def _fresh(code: str) -> str:
    """stdout of ``code`` run in a new interpreter (no module of this test process loaded)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    return run.stdout.strip().splitlines()[-1]


def test_version_and_help_load_neither_jax_nor_scikit_learn():
    """Issue 32, item 6: ``gplvm --version`` and ``--help`` answer without importing JAX or
    scikit-learn (seconds of imports); the entry point is called as the script calls it."""
    heavy = _fresh("import contextlib, io, sys\n"
                   "from gplvm.cli import main\n"
                   "for argv in (['--version'], ['--help'], ['fit', '--help']):\n"
                   "    with contextlib.redirect_stdout(io.StringIO()), "
                   "contextlib.suppress(SystemExit):\n"
                   "        main(argv)\n"
                   "print(sorted({m.split('.')[0] for m in sys.modules}\n"
                   "             & {'jax', 'jaxlib', 'sklearn', 'scipy', 'matplotlib'}))")
    assert heavy == "[]"


def test_jax_settings_are_made_whichever_module_imports_jax_first():
    """``import gplvm`` loads no JAX, yet float64 (gplvm._config) is on as soon as any module
    imports JAX -- here a building block imported directly, then JAX's own flag is read."""
    assert _fresh("import gplvm, sys\n"
                  "assert 'jax' not in sys.modules and 'gplvm._config' not in sys.modules\n"
                  "import gplvm.linalg, jax\n"
                  "print(jax.config.jax_enable_x64, 'gplvm._config' in sys.modules)") \
        == "True True"
