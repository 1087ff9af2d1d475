"""The graph of gplvm's own imports, read from the source with ``ast`` (nothing is imported).

An edge ``a → b`` means: importing module ``a`` executes module ``b`` (or reads a name from
package ``b``'s ``__init__``).  Only imports executed when the module is first imported count:
those at module level and in class bodies, including inside ``if``/``try``/``with`` blocks,
but not those inside functions (run later, on call) nor under ``if TYPE_CHECKING:``.

How an import is resolved, for a statement in module ``m``:

* ``import a.b.c`` and ``from a.b.c import x`` execute ``a``, ``a.b`` and ``a.b.c``; a package
  that contains ``m`` (an ancestor) is skipped, because it is already being imported when
  ``m`` runs and merely naming it reads nothing from it.
* ``from a.b import c`` where ``a/b/c.py`` (or ``a/b/c/``) exists also executes ``a.b.c``;
  where ``c`` is not a module it is a name read from ``a/b/__init__.py``, so ``a.b`` is an
  edge even when it is an ancestor of ``m`` (the classic circular-import hazard).
* Relative imports (``from . import x``, ``from ..y import z``) are resolved against ``m``.

Run from the repository root: ``python scripts/import_graph.py > docs/import_graph.md`` prints
the package-level graph (``gplvm.kernels``, ``gplvm.models``, ``gplvm.io``, ...) as a Mermaid
diagram in a short Markdown page.  ``tests/project/test_import_structure.py`` uses the module-level
graph to check that there is no import cycle and that :mod:`gplvm.io` reaches no model.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = "gplvm"

Graph = dict[str, dict[str, int]]      # module → {module it executes: line of the import}


def module_names(src: Path = SRC, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` under ``src``: dotted name → file (``__init__`` for a
    package)."""
    names = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def import_graph(src: Path = SRC, package: str = PACKAGE) -> Graph:
    """The module-level graph of ``package``'s imports of itself (see the module docstring)."""
    modules = module_names(src, package)
    graph: Graph = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: dict[str, int] = {}
        for node in _executed_imports(tree.body):
            for target in _targets(node, name, is_package, modules):
                if target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def _executed_imports(body: list[ast.stmt]):
    """Import statements run when a module with this body is imported."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _executed_imports(node.body)
            yield from _executed_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(h.body for h in node.handlers)):
                yield from _executed_imports(block)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _executed_imports(node.body)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node, module: str, is_package: bool, modules) -> set[str]:
    """The gplvm modules one import statement executes (or reads names from)."""
    if isinstance(node, ast.Import):
        return {t for alias in node.names for t in _executed(alias.name, module, modules)}
    base = _absolute(node, module, is_package)
    targets = _executed(base, module, modules)
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:
            targets |= _executed(submodule, module, modules)
        elif base in modules:
            targets.add(base)       # a name defined by base's __init__: read from it now
    return targets


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _executed(dotted: str, module: str, modules) -> set[str]:
    """``dotted`` and the packages above it that importing it runs, less ``module``'s own
    ancestors (already running); only gplvm's modules."""
    parts = dotted.split(".")
    prefixes = (".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {p for p in prefixes if p in modules and not module.startswith(p + ".")}


def find_cycle(graph: Graph) -> list[str] | None:
    """One cycle of ``graph`` as ``[m0, m1, ..., m0]``, or None when it has none."""
    state: dict[str, int] = {}          # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def describe_cycle(graph: Graph, cycle: list[str], modules: dict[str, Path]) -> str:
    """``a (src/.../a.py:3) → b (src/.../b.py:7) → a``: each step with the line importing the
    next."""
    def where(name: str) -> Path:
        path = modules[name]
        return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path

    steps = [f"{a} ({where(a)}:{graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
    return " → ".join(steps + [cycle[-1]])


def reachable(graph: Graph, start: str) -> set[str]:
    """Every module that importing ``start`` executes, ``start`` excluded."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), {}):
            if nxt not in seen and nxt != start:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def package_graph(graph: Graph, depth: int = 2) -> dict[str, set[str]]:
    """``graph`` with each module merged into its first ``depth`` name parts
    (``gplvm.models.rflvm.spec`` → ``gplvm.models``); edges within one part are dropped."""
    def part(name: str) -> str:
        return ".".join(name.split(".")[:depth])

    merged: dict[str, set[str]] = {}
    for a, edges in graph.items():
        merged.setdefault(part(a), set()).update(part(b) for b in edges if part(b) != part(a))
    return merged


def mermaid(packages: dict[str, set[str]]) -> str:
    """A Mermaid flowchart of a package graph (arrow: the upper package imports the lower)."""
    ids = {name: f"n{i}" for i, name in enumerate(sorted(packages))}
    lines = ["```mermaid", "graph TD"]
    lines += [f'    {ids[name]}["{name}"]' for name in sorted(packages)]
    lines += [f"    {ids[a]} --> {ids[b]}" for a in sorted(packages) for b in sorted(packages[a])]
    return "\n".join(lines + ["```"])


def main() -> None:
    graph = import_graph()
    cycle = find_cycle(graph)
    print("# gplvm's import graph\n")
    print("An arrow A --> B: importing package or module A executes B (module-level imports "
          "parsed with `ast`; imports inside functions do not count).")
    print("Regenerate with `python scripts/import_graph.py > docs/import_graph.md`; "
          "`tests/project/test_import_structure.py` checks the module-level graph has no cycle.\n")
    print(mermaid(package_graph(graph)))
    if cycle:
        print(f"\nModule-level cycle: {describe_cycle(graph, cycle, module_names())}")


if __name__ == "__main__":
    main()
