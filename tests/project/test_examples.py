"""Every script in examples/ runs in its fast mode and writes its figure, so the examples never
rot (issue 15).  Each runs in this process (runpy) with the arguments a user would give."""

import runpy
import sys
import warnings

from _paths import REPO

import pytest

EXAMPLES = REPO / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def test_every_example_is_listed():
    assert SCRIPTS == ["bgplvm_digits.py", "dpgplvm_lorenz.py", "rflvm_s_curve.py",
                       "structured_blobs.py"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs_fast_and_writes_its_figure(script, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [script, "--fast", "--out", str(tmp_path)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # few iterations: convergence warnings
        runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    figure = tmp_path / script.replace(".py", ".png")
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"               # a PNG was written
    assert f"wrote {figure}" in capsys.readouterr().out
