"""Issue 33's rules on the shape of the code (scripts/structure_audit.py): no function over 8
parameters but estimator constructors, no estimator module over 300 lines, no private gplvm
module imported by benchmarks, examples or scripts.  Each check is also shown to catch a
breach, so that it cannot pass by finding nothing."""

from __future__ import annotations

import importlib.util

from _paths import REPO

SCRIPT = REPO / "scripts" / "structure_audit.py"
spec = importlib.util.spec_from_file_location("structure_audit", SCRIPT)
audit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(audit)


def test_the_library_keeps_the_rules():
    assert audit.wide_functions() == []
    assert audit.long_estimator_modules() == []
    assert audit.private_imports() == []


def test_each_check_finds_a_planted_breach(tmp_path):
    (tmp_path / "wide.py").write_text(
        "def f(a, b, c, d, e, f, g, h, i):\n    pass\n\n"
        "class C:\n    def __init__(self, a, b, c, d, e, f, g, h, i):\n        pass\n"
        "    def m(self, a, b, c, d, e, f, g, h):\n        pass\n")
    assert [w.split()[1:] for w in audit.wide_functions(tmp_path)] == [["f", "(9", "parameters)"]]
    body = "\n".join(["x = 1"] * 301)
    (tmp_path / "est.py").write_text(f'@register("gplvm.X", estimator=True)\nclass X:\n    pass\n'
                                     f"{body}\n")
    assert len(audit.long_estimator_modules(tmp_path)) == 1
    (tmp_path / "bench.py").write_text("import numpy\nfrom gplvm._random import as_key\n"
                                       "from gplvm.random import as_key\n")
    found = audit.private_imports((tmp_path,))
    assert len(found) == 1 and found[0].endswith(":2 gplvm._random")
