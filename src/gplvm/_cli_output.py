"""What the command line writes: CSV tables with row ids (floats written so they read back
exactly), the summary of a fit, and output folders that appear complete or not at all."""

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


def latent_columns(model, X_mean, X_var):
    """(header, values) of latent means and their spread: variances for variational models,
    posterior standard deviations for sampled ones (a model with ``X_samples_``)."""
    Q = X_mean.shape[1]
    sampled = getattr(model, "X_samples_", None) is not None
    spread = np.sqrt(X_var) if sampled else X_var
    names = [f"x{q}" for q in range(Q)] + [f"{'sd' if sampled else 'var'}{q}" for q in range(Q)]
    return names, np.column_stack([X_mean, spread])


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


def json_value(value):
    """A JSON-safe form of a constructor argument or fitted value (objects by ``repr``)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return repr(value)


def model_summary(model) -> dict:
    """The fitted model's common attributes: class, settings, objective, iterations,
    convergence (with the split R-hat of sampled models) and relevance."""
    from gplvm.plot._diagnostics import is_map_fit, kept_trace, split_rhat_of
    from gplvm.registry import name_of

    out = {"class": name_of(type(model)),
           "params": {k: json_value(v) for k, v in model.get_params(deep=False).items()},
           "n_features_in": int(model.n_features_in_)}
    if getattr(model, "n_components", None) is not None:      # latent-variable models
        out.update(latent_dimensions(model))
    dropped = getattr(model, "dropped_columns_", None)
    if dropped is not None:
        out["dropped_columns"] = column_names(model, dropped)
    if getattr(model, "elbo_", None) is not None:
        out["bound"] = float(model.elbo_)
    kept = kept_trace(model)
    if kept is not None:
        out["log_likelihood"] = float(np.mean(kept)) if kept.size else float("nan")
        rhat = split_rhat_of(model)
        if rhat is not None:
            out["rhat"] = rhat
    for key, attribute, kind in (("n_iter", "n_iter_", int), ("converged", "converged_", bool),
                                 ("interrupted", "interrupted_", bool)):
        if getattr(model, attribute, None) is not None:
            out[key] = kind(getattr(model, attribute))
    if is_map_fit(model):          # the RFLVM's MAP restarts, in place of chain diagnostics
        out["modes"] = {k: np.asarray(v, dtype=float).tolist()
                        for k, v in model.mode_start_.items()}
    elif getattr(model, "convergence_", None) is not None:     # the RFLVM's R-hat and ESS
        out["convergence"] = {k: float(v) for k, v in model.convergence_.items()}
    if getattr(model, "relevance_", None) is not None:
        out["relevance"] = np.asarray(model.relevance_, dtype=float).tolist()
    return out


def latent_dimensions(model) -> dict:
    """``n_components``, the Q of the fit (``n_components_``: ``'auto'`` resolved), and
    ``active_components``, the dimensions ARD keeps by decreasing relevance, where the model
    says (``active_components_``)."""
    out = {"n_components": int(getattr(model, "n_components_", None) or model.n_components)}
    active = getattr(model, "active_components_", None)
    if active is not None:
        out["active_components"] = [int(q) for q in active]
    return out


def column_names(model, indices) -> list:
    """The names of the data columns ``indices`` (``feature_names_in_``, which ``gplvm fit``
    stores in the model file), or the indices themselves for a model without names."""
    names = getattr(model, "feature_names_in_", None)
    return [str(names[j]) if names is not None else int(j) for j in np.asarray(indices)]


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
