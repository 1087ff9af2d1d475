"""``gplvm fit DATA``: read a data file, fit a model, write an output folder.

The folder (``--out``, default ``<data name>-<model>``) holds ``embedding.csv`` (row ids, latent
means, variances or posterior sd), ``model.npz`` (``save``), ``summary.json``, ``imputed.csv``
when the data had missing entries, and the plots of :mod:`gplvm.plot`.  It is written in a
temporary folder beside it and renamed when complete, so a failed or interrupted run leaves no
folder that looks complete.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

from gplvm.anndata import library_size_offset, library_size_record
from gplvm.cli import models, output
from gplvm.io.readers import TextOptions, as_times, read_annotation, read_data
from gplvm.summary import latent_columns, model_summary

PLOT_DPI = 110


def add_data_options(parser) -> None:
    """Flags of every verb that reads a data file."""
    group = parser.add_argument_group("reading the data file")
    group.add_argument("--key", help=".npz: the array to read")
    group.add_argument("--layer", help=".h5ad: the layer to read instead of X")
    group.add_argument("--header", action="store_true", default=None,
                       help="CSV/TSV: the first row is a header (default: detected)")
    group.add_argument("--no-header", dest="header", action="store_false")
    group.add_argument("--index-col", action="store_true", default=None,
                       help="CSV/TSV: the first column holds row ids (default: detected)")
    group.add_argument("--no-index-col", dest="index_col", action="store_false")
    group.add_argument("--delimiter", help="CSV/TSV: the cell separator (default by extension)")
    group.add_argument("--missing", action="append", default=[],
                       help="a cell value meaning 'missing' (repeatable; empty cells, NA and "
                            "NaN always are)")


def add_parser(sub) -> None:
    fit = sub.add_parser("fit", help="fit a model to a data file and write an output folder")
    fit.add_argument("data", help="a .csv, .tsv, .txt, .npy, .npz or .h5ad file")
    fit.add_argument("--model", choices=tuple(models.MODELS), default="bgplvm",
                     help="; ".join(f"{k}: {v[1]}" for k, v in models.MODELS.items()))
    fit.add_argument("--out", help="output folder (default <data name>-<model>)")
    fit.add_argument("--force", action="store_true", help="replace an existing --out folder")
    fit.add_argument("--quiet", action="store_true", help="no progress on stderr")
    fit.add_argument("--labels", help="an annotation column or a file: colours the latent plot")
    fit.add_argument("--times", help="an annotation column or a file: time stamps of the rows "
                                     "(dynamical prior)")
    fit.add_argument("--offset", help="count models: 'libsize' (log of each row's total over "
                                      "the mean total) or an annotation column or file of "
                                      "per-row offsets of the linear predictor")
    fit.add_argument("--trials", type=int, help="binomial likelihood: trials per entry")
    fit.add_argument("--image-shape", help="structured model: H,W of each row's image")
    settings = fit.add_argument_group("model settings (each applies to the models that have it)")
    settings.add_argument("--components", "-q", type=models.components_value,
                          help="Q, the latent dimension, or 'auto' (the default of bgplvm, "
                               "dpgplvm and structured: Q = min(10, columns, rows - 1), ARD "
                               "keeps the dimensions the data use); at most the columns")
    settings.add_argument("--likelihood", help="rflvm: gaussian, poisson, bernoulli, binomial, "
                                               "negative_binomial or multinomial")
    settings.add_argument("--inducing", type=int, help="inducing inputs M")
    settings.add_argument("--features", type=int, help="rflvm: random features M")
    settings.add_argument("--iterations", type=int, help="optimiser iterations (max_iter)")
    settings.add_argument("--sweeps", type=int, help="MCMC sweeps per chain (burn-in included; "
                                                     "rflvm default: until converged)")
    settings.add_argument("--burn-in", type=int, help="MCMC sweeps discarded (default half)")
    settings.add_argument("--chains", type=int, help="MCMC chains")
    settings.add_argument("--sampler", help="rflvm: nuts (default) or gibbs (the paper's sweep)")
    settings.add_argument("--inference", help="rflvm: mcmc or map (the joint mode, one "
                                              "L-BFGS restart per chain, no sampling); "
                                              "bgplvm: collapsed or svi")
    settings.add_argument("--kernel", help=f"one of {', '.join(models.KERNELS)} (ARD)")
    settings.add_argument("--seed", type=int, help="random_state (default 0)")
    add_data_options(fit)


def read_table(args, annotations=(), required=None):
    """The data file of ``args``; ``required``: the annotations that must be found (default
    all: a misspelt column is reported as such, not as a non-numeric one)."""
    text = TextOptions(header=args.header, index_col=args.index_col, delimiter=args.delimiter,
                       missing=tuple(args.missing), annotations=tuple(annotations),
                       required=tuple(annotations if required is None else required))
    return read_data(args.data, key=args.key, layer=args.layer, text=text)


def log(args, message: str) -> None:
    if not args.quiet:
        print(f"[gplvm] {message}", file=sys.stderr, flush=True)


def run(args, argv) -> int:
    """Read, fit and write; returns the exit status (errors propagate as exceptions)."""
    out = Path(args.out or f"{Path(args.data).stem}-{args.model}")
    inputs = [args.data, *(spec for spec in (args.labels, args.times, args.offset)
                           if spec and Path(spec).exists())]
    output.check_free(out, args.force, inputs)
    table = read_table(args, annotation_names(args.labels, args.times, args.offset))
    labels = read_annotation(args.labels, table, "labels") if args.labels else None
    times = as_times(read_annotation(args.times, table, "times")) if args.times else None
    Y = _model_input(args, table.Y)
    model = models.build(args.model, args)
    fit_kwargs = models.fit_arguments(model, times=times, n_trials=args.trials,
                                      offset=offsets(args.offset, table, table.Y))
    log(args, f"{args.data}: {table.Y.shape[0]} rows x {len(table.columns)} columns, "
              f"{100 * table.missing_fraction:.1f}% missing; fitting {type(model).__name__}")
    with output.atomic_folder(out, args.force, inputs) as folder:
        start = time.perf_counter()
        notes = fit_noting_warnings(model, Y, fit_kwargs)
        seconds = time.perf_counter() - start
        written = write_results(folder, model, table, Y, labels, fit_kwargs.get("offset"),
                                label_name(args.labels))
        summary = {"command": output.command_line(argv), "model": args.model,
                   **model_summary(model), "warnings": notes,
                   "data": {"path": str(args.data), "n_rows": int(table.Y.shape[0]),
                            "n_columns": len(table.columns),
                            "missing_fraction": table.missing_fraction,
                            "columns": table.columns, "row_shape": list(Y.shape[1:]),
                            "annotations": [a for a in table.obs if a in
                                            (args.labels, args.times, args.offset)]},
                   "offset": _offset_record(args.offset, table),
                   "wall_time_s": seconds, "versions": output.versions(),
                   "outputs": sorted([*written, "summary.json"])}
        (folder / "summary.json").write_text(output.dump_json(summary))
    log(args, fitted_dimensions(summary))
    log(args, f"wrote {out}/: {', '.join(summary['outputs'])} ({seconds:.1f} s fit)")
    return 0


def fitted_dimensions(summary: dict) -> str:
    """One line on the fit's latent dimensions and the columns kept out of it, from the
    summary: 'Q = 4 (n_components='auto'); ARD keeps dimensions 0, 2; kept out of the fit:
    2 constant or empty columns (px0, px7)'."""
    setting = summary["params"].get("n_components")
    line = f"Q = {summary.get('n_components')}" + (f" (n_components={setting!r})"
                                                    if setting == "auto" else "")
    if "active_components" in summary:
        line += f"; ARD keeps dimension(s) {_listed(summary['active_components'])}"
    dropped = summary.get("dropped_columns") or []
    if dropped:
        line += (f"; kept out of the fit: {len(dropped)} constant or empty column(s) "
                 f"({_listed(dropped)})")
    return line


def _listed(values, shown: int = 10) -> str:
    text = ", ".join(map(str, values[:shown]))
    return text + (f" and {len(values) - shown} more" if len(values) > shown else "")


def fit_noting_warnings(model, Y, fit_kwargs) -> list[str]:
    """``model.fit(Y, **fit_kwargs)``; each distinct warning it raised (e.g. a
    ``ConvergenceWarning``) is printed on stderr as one line, not with the source line of the
    call, and returned for summary.json."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(Y, **fit_kwargs)
    notes = list(dict.fromkeys(f"{w.category.__name__}: {' '.join(str(w.message).split())}"
                               for w in caught))
    for note in notes:
        print(f"[gplvm] warning: {note}", file=sys.stderr, flush=True)
    return notes


def annotation_names(*specs) -> list[str]:
    """The ``--labels``/``--times``/``--offset`` values that may name a table column."""
    return [a for a in specs if a and a != "libsize"]


def offsets(spec, table, Y, mean_total=None):
    """Per-row offsets of ``--offset spec`` for the rows ``Y`` of ``table``: ``libsize`` gives
    :func:`gplvm.anndata.library_size_offset` (log of each row's total over ``mean_total``,
    default the mean total of Y's rows); otherwise an annotation column or a file."""
    if spec is None:
        return None
    if spec == "libsize":
        return library_size_offset(Y, mean_total)
    return as_times(read_annotation(spec, table, "offset"), "offset")


def _offset_record(spec, table) -> dict | None:
    """What summary.json keeps of ``--offset`` for the verbs on new rows: the mean library size
    of the fit's rows, or where the offsets came from."""
    if spec is None:
        return None
    if spec == "libsize":
        return library_size_record(table.Y)
    return {"kind": "given", "source": spec}


def _model_input(args, Y):
    """Y as the model takes it: rows x columns, or images for a model that needs them."""
    images = args.model == "structured"
    if args.image_shape:
        if not images:
            raise ValueError(f"--image-shape applies to --model structured, not {args.model}")
        try:
            H, W = (int(v) for v in args.image_shape.split(","))
        except ValueError:
            raise ValueError(f"--image-shape {args.image_shape!r}: give H,W such as 28,20") \
                from None
        if H * W != Y.shape[1]:
            raise ValueError(f"--image-shape {H},{W} has {H * W} pixels but the data has "
                             f"{Y.shape[1]} columns")
        return Y.reshape(Y.shape[0], H, W)
    if images and Y.ndim == 2:
        raise ValueError("--model structured needs images: give --image-shape H,W or a 3-D "
                         ".npy array (images x height x width)")
    if not images and Y.ndim != 2:
        raise ValueError(f"the data is a {Y.ndim}-D array; --model {args.model} needs a table "
                         f"(rows x columns): use --model structured for images")
    return Y


def label_name(labels: str | None) -> str | None:
    """What ``--labels`` names, for the plots: a file's stem, else the column's name."""
    if labels is None:
        return None
    return Path(labels).stem if Path(labels).is_file() else labels


def write_results(folder: Path, model, table, Y, labels, offset=None,
                  labels_name=None) -> list[str]:
    """embedding.csv, model.npz, imputed.csv (missing entries; ``model.impute(Y, offset=)``
    with the fit's offsets, if any) and the plots (the latent plot's colours named
    ``labels_name``); their names."""
    header, values = latent_columns(model, model.X_mean_, model.X_var_)
    output.write_csv(folder / "embedding.csv", table.row_ids, header, values)
    # the model file carries the data's column names, so that the verbs can check (and
    # reorder) a data file's columns even when the model was moved away from summary.json
    model.feature_names_in_ = np.asarray(table.columns, dtype=object)
    model.save(folder / "model.npz")
    written = ["embedding.csv", "model.npz"]
    extras = {} if offset is None else {"offset": offset}
    filled = None
    if np.isnan(Y).any():
        filled = model.impute(Y, **extras)
        output.write_csv(folder / "imputed.csv", table.row_ids, table.columns,
                         filled.reshape(len(Y), -1))
        written.append("imputed.csv")
    return written + write_plots(folder, model, Y, labels, labels_name, filled)


def write_plots(folder: Path, model, Y, labels, labels_name=None, filled=None) -> list[str]:
    """The plots of :mod:`gplvm.plot` that apply to the model (``filled``: ``model.impute(Y)``
    already computed, for the imputation plot; ``labels_name``: what the labels are); a plot
    that fails is reported on stderr and left out (the fit is not lost for it)."""
    from gplvm import plot

    jobs = {"latent.png": lambda: plot.latent(model, labels=labels, label_name=labels_name),
            "relevance.png": lambda: plot.relevance(model),
            "trace.png": lambda: plot.trace(model)}
    if filled is not None:      # the data had missing entries (write_results)
        if np.ndim(Y) == 3:     # grey images: pictures, not a strip per pixel
            jobs["imputation.png"] = lambda: plot.imputed_images(
                Y, filled, title=f"{type(model).__name__}: imputed images")[0, 0]
        else:
            jobs["imputation.png"] = lambda: plot.imputation(model, Y, X=model.X_mean_,
                                                             filled=filled)
    if getattr(model, "assignments_", None) is not None:
        jobs["factors.png"] = lambda: plot.factors(model)
        jobs["assignments.png"] = lambda: plot.assignments(model)
    written = []
    for name, draw in jobs.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                draw().figure.savefig(folder / name, dpi=PLOT_DPI)
        except Exception as err:  # noqa: BLE001 (a plot must not lose the fit)
            print(f"[gplvm] could not draw {name}: {err}", file=sys.stderr)
            continue
        written.append(name)
    return written
