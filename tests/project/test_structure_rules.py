"""Issue 33's rules on the shape of the code (scripts/structure_audit.py): no function over 8
parameters but estimator constructors, no estimator module over 300 lines, no private gplvm
module imported by benchmarks, examples or scripts, nor by tests of another package than the
one their folder mirrors.  Each check is also shown
to catch a breach, so that it cannot pass by finding nothing."""

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
    assert audit.private_imports_in_tests() == []


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
    (tmp_path / "other.py").write_text("from gplvm.models import _checkpoint, bgplvm\n")
    assert [f.split()[1] for f in audit.private_imports((tmp_path,))] == [
        "gplvm._random", "gplvm.models._checkpoint"]     # a private module named after import


def test_tests_import_private_modules_only_of_the_package_their_folder_mirrors(tmp_path):
    tests = tmp_path / "tests"
    files = {
        # its own package's private modules, at any depth: allowed
        "samplers/test_a.py": "from gplvm.samplers._niw import x\nimport gplvm.samplers\n",
        "models/rflvm/test_b.py": "from gplvm.models import _checkpoint\n",
        # another package's, or gplvm's own: breaches
        "plot/test_c.py": "from gplvm.models._dp_plot import f\n",
        "models/test_d.py": "def t():\n    from gplvm._random import as_key\n",
        # the top-level modules' tests: gplvm._x, nothing deeper
        "test_e.py": "from gplvm._pytree import replace\nfrom gplvm.plot import _columns\n",
        # tests/datasets mirrors gplvm.data; tests/project imports public modules only
        "datasets/test_f.py": "from gplvm.data._x import y\nfrom gplvm.io._x import y\n",
        "project/test_g.py": "from gplvm.random import as_key\nimport gplvm._config\n",
        # saved files are not checked
        "data/make.py": "from gplvm._random import as_key\n",
    }
    for name, text in files.items():
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text(text)
    found = audit.private_imports_in_tests(tests)
    assert [f.split(":")[0].removeprefix(f"{tests}/") + " " + f.split()[1] for f in found] == [
        "datasets/test_f.py gplvm.io._x", "models/test_d.py gplvm._random",
        "plot/test_c.py gplvm.models._dp_plot", "project/test_g.py gplvm._config",
        "test_e.py gplvm.plot._columns"]
    assert found[1].endswith(":2 gplvm._random")         # the line, inside a function
