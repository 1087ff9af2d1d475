"""Issue 33's rules on the shape of the code, checked from the source (no import):

1. no function in ``src/gplvm`` takes more than :data:`MAX_PARAMETERS` parameters (``self``/``cls``
   not counted, ``*args`` and ``**kwargs`` one each), estimator constructors excepted;
2. no estimator module is longer than :data:`MAX_ESTIMATOR_LINES` lines;
3. no benchmark, example or script imports a private module of gplvm (a dotted name with a
   part starting with ``_``).

    .venv/bin/python scripts/structure_audit.py        # prints each breach; exit status 1 if any

``tests/test_structure_rules.py`` runs the same checks.
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
PRIVATE_IMPORT = re.compile(r"^\s*(?:from|import)\s+(gplvm(?:\.\w+)*\._\w+)", re.M)


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


def private_imports(folders=tuple(ROOT / f for f in CONSUMERS)) -> list[str]:
    """``path:line module`` of every import of a private gplvm module outside the library."""
    found = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.py")):
            text = path.read_text()
            for match in PRIVATE_IMPORT.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{_shown(path)}:{line} {match.group(1)}")
    return found


def main() -> int:
    breaches = {"functions over 8 parameters": wide_functions(),
                "estimator modules over 300 lines": long_estimator_modules(),
                "private gplvm modules imported by benchmarks, examples or scripts":
                    private_imports()}
    for what, items in breaches.items():
        print(f"{what}: {len(items)}")
        for item in items:
            print(f"  {item}")
    return 1 if any(breaches.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
