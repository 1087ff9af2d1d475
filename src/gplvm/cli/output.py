"""What the command line writes: CSV tables with row ids (floats written so they read back
exactly), the summary of a fit as JSON (its fields: :mod:`gplvm.summary`), and output folders
that appear complete or not at all."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np


def write_csv(target, row_ids, columns, values, index_name: str = "id") -> None:
    """A CSV with a header, one row id per row; floats by :func:`float_text` (exact).

    Args:
        target: a path, or ``None`` / ``'-'`` for standard output.
    """
    values = np.asarray(values, dtype=float)
    with _opened(target) as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow([index_name, *columns])
        for row_id, row in zip(row_ids, values):
            writer.writerow([row_id, *map(float_text, row.tolist())])


def float_text(v: float) -> str:
    """``repr(v)``, the shortest digits that a correctly rounded reader turns back into ``v``;
    as mantissa and exponent where that has over 17 digits with the zeros before them
    (``5.823341393245457e-04``, not ``0.0005823341393245457``): pandas' default reader keeps
    the first 17 digits, leading zeros included, and drops the rest (thousands of ulp off)."""
    text = repr(v)
    if "e" in text or len(text.lstrip("-").replace(".", "")) <= 17:
        return text
    digits = text.lstrip("-0.")      # |v| < 1 here: '-0.000582...' -> '582...', the significant
    return f"{v:.{len(digits) - 1}e}"


@contextlib.contextmanager
def _opened(target):
    if target is None or str(target) == "-":
        yield sys.stdout
    else:
        with open(target, "w", newline="", encoding="utf-8") as stream:
            yield stream


def _same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name one file (links and relative forms resolved)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def check_not_input(out, inputs, option: str = "--out") -> None:
    """Refuse an output path that is one of the command's input files (the data, the model,
    an annotation file): writing it would destroy the input."""
    for path in inputs:
        if path is not None and Path(path).is_file() and _same_file(out, path):
            raise ValueError(f"{option} {out} is the input file {path}; writing there would "
                             f"replace it: give another output path")


def foreign_files(out: Path) -> list[str]:
    """The entries of folder ``out`` that ``gplvm fit`` did not write: those not listed in
    the ``outputs`` of its summary.json (everything, when there is no such summary)."""
    try:
        written = set(json.loads((out / "summary.json").read_text())["outputs"])
    except (OSError, ValueError, KeyError, TypeError):
        written = set()
    return sorted(e.name for e in out.iterdir() if e.name not in written)


def check_free(out: Path, force: bool, inputs=()) -> None:
    """Refuse an output folder that exists and is not empty, unless ``force`` -- and even then
    one that holds an input file or anything ``gplvm fit`` did not write there (its
    summary.json lists what it wrote), since replacing the folder would delete it."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder")
    folder = out.resolve()
    for path in inputs:
        if path is not None and Path(path).exists() and (
                folder == Path(path).resolve() or folder in Path(path).resolve().parents):
            raise ValueError(f"--out {out} holds the input {path}; replacing the folder would "
                             f"delete it: give another --out folder")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ValueError(f"--out {out} exists and is not empty; pass --force to replace it "
                             f"or choose another folder")
        foreign = foreign_files(out)
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more"
                                               if len(foreign) > 5 else "")
            raise ValueError(f"--out {out} holds files gplvm fit did not write ({shown}); "
                             f"--force replaces only a folder of gplvm fit's outputs (listed in "
                             f"its summary.json): choose another folder")


@contextlib.contextmanager
def atomic_folder(out: Path, force: bool = False, inputs=()):
    """Yield a temporary folder beside ``out``; rename it to ``out`` when the block ends
    without error, remove it otherwise (so ``out`` is complete or absent)."""
    out = Path(out)
    check_free(out, force, inputs)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    except OSError as err:
        in_the_way = next((p for p in (out.parent, *out.parent.parents)
                           if p.exists() and not p.is_dir()), None)
        reason = (f"{in_the_way} is a file, not a folder" if in_the_way is not None
                  else err.strerror)
        raise OSError(err.errno, f"--out {out}: cannot write in {out.parent} "
                                 f"({reason}); choose a folder you can write to") from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)             # mkdtemp's folder is private (0700)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if out.exists():
        check_free(out, force, inputs)        # as it is now, after the fit
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def versions() -> dict:
    import jax

    from gplvm import __version__

    return {"gplvm": __version__, "jax": jax.__version__, "numpy": np.__version__,
            "python": sys.version.split()[0]}


def command_line(argv) -> str:
    return shlex.join(["gplvm", *argv])


def dump_json(obj) -> str:
    """Strict JSON (non-finite numbers written as null)."""
    import json

    def clean(value):
        if isinstance(value, float) and not np.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(obj), indent=2, allow_nan=False) + "\n"
