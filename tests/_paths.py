"""Where the test suite's files are, for tests in any folder of ``tests/`` (which mirrors the
package layout of ``src/gplvm``; see README.md, "Tests").

``pyproject.toml`` puts ``tests/`` on ``sys.path`` (``[tool.pytest.ini_options] pythonpath``),
so every test imports this module, and the helpers beside it (``_format5``, ``_rflvm_tiny``),
by their plain names wherever the test file sits.
"""

from __future__ import annotations

from pathlib import Path

#: the folder ``tests/``
TESTS = Path(__file__).resolve().parent
#: the repository's root
REPO = TESTS.parent
#: saved files the tests read (model files of older formats, ...): ``tests/data``
DATA = TESTS / "data"
#: one model file per estimator written by the code of commit 311bb9a (format 1)
LEGACY = DATA / "legacy_v1"
