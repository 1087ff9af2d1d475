"""Issue 33's rules on the shape of the code, checked from the source (no import):

1. no function in ``src/gplvm`` takes more than :data:`MAX_PARAMETERS` parameters (``self``/``cls``
   not counted, ``*args`` and ``**kwargs`` one each), estimator constructors excepted;
2. no estimator module is longer than :data:`MAX_ESTIMATOR_LINES` lines;
3. no benchmark, example or script imports a private module of gplvm (a dotted name with a
   part starting with ``_``: ``gplvm._random``, or ``from gplvm.models import _checkpoint``);
4. no test imports a private module of a package other than the one its folder mirrors:
   ``tests/<pkg>/...`` (``tests/models/rflvm`` is ``gplvm.models.rflvm``, within ``gplvm.models``)
   may import ``gplvm.<pkg>._x`` and ``gplvm.<pkg>.<sub>._y`` but not ``gplvm._random`` or
   ``gplvm.<other>._z``; the tests of gplvm's top-level modules, in ``tests/`` itself, may import
   ``gplvm._x`` only; ``tests/project`` (the repository as a whole) only public modules;
   ``tests/datasets`` mirrors ``gplvm.data`` (``tests/data`` is saved files, not checked).

    .venv/bin/python scripts/structure_audit.py   # prints each breach; exit status 1 if any

``tests/project/test_structure_rules.py`` runs the same checks.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_PARAMETERS = 8
MAX_ESTIMATOR_LINES = 300
#: the folders whose code may not import private gplvm modules (an estimator module is one
#: with a class decorated ``@register(..., estimator=True)``)
CONSUMERS = ("benchmarks", "examples", "scripts")
#: folders of ``tests/`` not named after the package whose tests they hold (``None``: public
#: modules only)
TEST_FOLDER_PACKAGES = {"datasets": "gplvm.data", "project": None}


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _count(args: ast.arguments) -> int:
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (args.vararg is not None) + (args.kwarg is not None)


def wide_functions(src: Path = ROOT / "src" / "gplvm") -> list[str]:
    """``path:line name (n parameters)`` of every function over the limit."""
    found = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name != "__init__" and _count(node.args) > MAX_PARAMETERS:
                found.append(f"{_shown(path)}:{node.lineno} {node.name} "
                             f"({_count(node.args)} parameters)")
    return found


def long_estimator_modules(src: Path = ROOT / "src" / "gplvm") -> list[str]:
    """``path (n lines)`` of every module defining an estimator that is over the limit."""
    found = []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text()
        if re.search(r"@register\([^)]*estimator=True", text):
            n = len(text.splitlines())
            if n > MAX_ESTIMATOR_LINES:
                found.append(f"{_shown(path)} ({n} lines)")
    return found


def private_owner(module: str) -> str | None:
    """The package that a private module belongs to (the dotted name before its first part
    starting with ``_``: ``gplvm.models`` for ``gplvm.models._checkpoint``, ``gplvm`` for
    ``gplvm._random``), ``None`` for a public module (``__main__`` and the like are public)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return ".".join(parts[:i])
    return None


def _is_module(name: str, src: Path) -> bool:
    path = src.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def gplvm_imports(path: Path, src: Path = ROOT / "src" / "gplvm"):
    """``(line, module)`` of every gplvm module ``path`` imports, anywhere in the file: the
    module of ``import a.b`` and ``from a.b import c``, and ``a.b.c`` too where that is a module
    of ``src`` (``from gplvm.models import _checkpoint``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "gplvm":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "gplvm":
            yield node.lineno, node.module
            for alias in node.names:
                if _is_module(f"{node.module}.{alias.name}", src):
                    yield node.lineno, f"{node.module}.{alias.name}"


def _private(path: Path, src: Path, allowed) -> list[str]:
    found = []
    for line, module in gplvm_imports(path, src):
        owner = private_owner(module)
        entry = f"{_shown(path)}:{line} {module}"
        if owner is not None and not allowed(owner) and entry not in found:
            found.append(entry)
    return found


def private_imports(folders=tuple(ROOT / f for f in CONSUMERS),
                    src: Path = ROOT / "src" / "gplvm") -> list[str]:
    """``path:line module`` of every import of a private gplvm module outside the library."""
    found = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.py")):
            found += _private(path, src, lambda owner: False)
    return found


def mirrored_package(folder: tuple[str, ...]) -> str | None:
    """The package whose private modules the tests in ``tests/<folder...>`` may import (rule 4):
    ``gplvm.<first folder>`` (``gplvm`` for ``tests/`` itself), ``None`` for public only."""
    if not folder:
        return "gplvm"
    return TEST_FOLDER_PACKAGES.get(folder[0], f"gplvm.{folder[0]}")


def private_imports_in_tests(tests: Path = ROOT / "tests",
                         src: Path = ROOT / "src" / "gplvm") -> list[str]:
    """``path:line module`` of every private gplvm module a test (or a helper of ``tests/``)
    imports from outside the package its folder mirrors (rule 4); ``tests/data`` is skipped."""
    found = []
    for path in sorted(Path(tests).rglob("*.py")):
        folder = path.relative_to(tests).parent.parts
        if folder[:1] == ("data",):
            continue
        package = mirrored_package(folder)

        def allowed(owner, package=package):
            if package is None:
                return False
            if package == "gplvm":      # the top-level modules' tests: gplvm._x, no deeper
                return owner == "gplvm"
            return owner == package or owner.startswith(package + ".")

        found += _private(path, src, allowed)
    return found


def main() -> int:
    breaches = {"functions over 8 parameters": wide_functions(),
                "estimator modules over 300 lines": long_estimator_modules(),
                "private gplvm modules imported by benchmarks, examples or scripts":
                    private_imports(),
                "private gplvm modules imported by tests of another package":
                    private_imports_in_tests()}
    for what, items in breaches.items():
        print(f"{what}: {len(items)}")
        for item in items:
            print(f"  {item}")
    return 1 if any(breaches.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
