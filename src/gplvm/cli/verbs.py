"""``gplvm transform|impute|sample|info MODEL ...``: the verbs of a saved model.

Each reads a ``model.npz`` written by ``gplvm fit`` (or ``model.save``) and writes a CSV to
``--out`` or standard output.  The model file (``feature_names_in_``) and the ``summary.json``
of its ``gplvm fit`` folder say which columns of a data file are the model's (checked, and
reordered when only their order differs); the summary also says which were annotations set
aside, and how the fit's rows were
offset: ``transform`` and ``impute`` give DATA's rows the offsets of the same kind, library
sizes against the mean total of the fit's rows, so that ``gplvm transform MODEL DATA`` is
``model.transform(Y, offset=library_size_offset(Y, mean_total))`` exactly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from gplvm.cli import output
from gplvm.cli.fit import add_data_options, annotation_names, offsets, read_table
from gplvm.cli.models import call_arguments
from gplvm.io.readers import DataFileError
from gplvm.summary import latent_columns, model_summary


def add_parsers(sub) -> None:
    for verb, text in (("transform", "latent means and spread of the rows of a data file"),
                       ("impute", "the data file with its missing entries filled in")):
        parser = sub.add_parser(verb, help=text)
        parser.add_argument("model", help="a model.npz file")
        parser.add_argument("data", help="a .csv, .tsv, .txt, .npy, .npz or .h5ad file")
        parser.add_argument("--out", help="a CSV file (default: standard output)")
        parser.add_argument("--offset", help="per-row offsets of count models: 'libsize' or an "
                                             "annotation column or file (default: as the fit, "
                                             "from the summary.json beside MODEL)")
        add_data_options(parser)
    sample = sub.add_parser("sample", help="data drawn from the fitted generative model")
    sample.add_argument("model", help="a model.npz file")
    sample.add_argument("-n", "--n-samples", type=int, default=10, help="rows to draw")
    sample.add_argument("--seed", type=int, default=None, help="random_state of the draws")
    sample.add_argument("--out", help="a CSV file (default: standard output)")
    info = sub.add_parser("info", help="what a saved model is and how its fit went")
    info.add_argument("model", help="a model.npz file")


def load_model(path):
    """A saved model, with a one-line error for a file that is not one."""
    import gplvm

    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"{path}: no such model file")
    try:
        return gplvm.load(path)
    except Exception as err:  # noqa: BLE001 (any reading failure is a bad file)
        raise DataFileError(f"{path.name} is not a gplvm model file ({err})") from None


def _summary(model_path) -> dict:
    """The summary.json beside ``model_path`` (the fit that wrote it), or {} without one."""
    try:
        summary = json.loads(Path(model_path).with_name("summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def _saved(model_path, key):
    """``data[key]`` of the summary.json beside ``model_path``, as a list, or None."""
    try:
        return list(_summary(model_path)["data"][key])
    except (KeyError, TypeError):
        return None


def saved_columns(model_path, model=None) -> list[str] | None:
    """The column names of the fit that wrote ``model_path``: from the summary.json beside it,
    else from the model file itself (``feature_names_in_``, which ``gplvm fit`` stores)."""
    names = _saved(model_path, "columns")
    if names is None and getattr(model, "feature_names_in_", None) is not None:
        names = [str(name) for name in model.feature_names_in_]
    return names


def model_rows(model, table, model_path) -> np.ndarray:
    """The data's rows with the model's columns (checked, and reordered by name)."""
    D = int(model.n_features_in_)
    Y = table.Y.reshape(table.Y.shape[0], -1)
    names = saved_columns(model_path, model)
    unnamed = table.columns == [str(j) for j in range(len(table.columns))]
    if names is not None and not unnamed and table.columns != names:
        absent = [c for c in names if c not in table.columns]
        extra = [c for c in table.columns if c not in names]
        if absent or extra or len(table.columns) != len(names):
            raise DataFileError(
                f"{Path(table.path).name}: its columns differ from the model's (missing: "
                f"{', '.join(absent[:5]) or 'none'}; not in the model: "
                f"{', '.join(extra[:5]) or 'none'}); give the columns the model was fitted on")
        Y = Y[:, [table.columns.index(c) for c in names]]
    if Y.shape[1] != D:
        raise DataFileError(f"{Path(table.path).name} has {Y.shape[1]} columns but the model "
                            f"was fitted on {D}; give rows with the model's columns")
    row_shape = _saved(model_path, "row_shape")
    return Y.reshape(len(Y), *row_shape) if row_shape and len(row_shape) > 1 else Y


def run(args) -> int:
    if getattr(args, "out", None):         # before any work: never write over an input
        output.check_not_input(args.out, [args.model, getattr(args, "data", None),
                                           getattr(args, "offset", None)])
    model = load_model(args.model)
    if args.command != "info" and not callable(getattr(model, args.command, None)):
        verbs = [v for v in ("transform", "impute", "sample", "predict", "score")
                 if callable(getattr(model, v, None))]
        raise DataFileError(f"{Path(args.model).name} holds a {type(model).__name__}, which "
                            f"has no {args.command}; its verbs are {', '.join(verbs)} (gplvm "
                            f"{args.command} takes a latent-variable model: BayesianGPLVM, "
                            f"RFLVM, DPGPLVM, StructuredGPLVM; use the Python API for "
                            f"predict and score)")
    if args.command == "info":
        print(output.dump_json(model_summary(model)), end="")
        return 0
    if args.command == "sample":
        Y, X = model.sample(args.n_samples, random_state=args.seed)
        Y = np.asarray(Y).reshape(len(X), -1)                  # images as rows of pixels
        names = saved_columns(args.model, model) or [f"y{j}" for j in range(np.shape(Y)[1])]
        columns = [*names, *(f"x{q}" for q in range(np.shape(X)[1]))]
        output.write_csv(args.out, range(len(Y)), columns, np.column_stack([Y, X]),
                         index_name="draw")
        return 0
    table = read_table(args, annotation_names(*(_saved(args.model, "annotations") or ()),
                                              args.offset),
                       required=annotation_names(args.offset))     # the fit's may be absent
    Y = model_rows(model, table, args.model)
    extras = call_arguments(model, args.command, offset=new_row_offsets(args, table, Y))
    if args.command == "transform":
        X_mean, X_var = model.transform(Y, return_var=True, **extras)
        header, values = latent_columns(model, np.asarray(X_mean), np.asarray(X_var))
        output.write_csv(args.out, table.row_ids, header, values)
    else:
        names = saved_columns(args.model, model) or table.columns
        output.write_csv(args.out, table.row_ids, names,
                         model.impute(Y, **extras).reshape(len(Y), -1))
    if args.out:
        print(f"[gplvm] wrote {args.out}", file=sys.stderr)
    return 0


def new_row_offsets(args, table, Y):
    """The offsets of DATA's rows ``Y`` (the model's columns): ``--offset`` if given, else of
    the fit's kind (summary.json); library sizes are taken against the fit's mean total."""
    record = _summary(args.model).get("offset")
    record = record if isinstance(record, dict) else {}
    spec = args.offset
    if spec is None and record:
        if record.get("kind") != "libsize":
            raise DataFileError(f"the model was fitted with offsets from "
                                f"{record.get('source')!r}; give DATA's rows theirs with "
                                f"--offset COLUMN|FILE")
        spec = "libsize"
    if spec == "libsize" and record.get("kind") != "libsize":
        raise DataFileError("--offset libsize needs the mean library size of the fit's rows, "
                            "which the summary.json beside MODEL keeps for a fit with --offset "
                            "libsize; give --offset COLUMN|FILE instead")
    return offsets(spec, table, Y, record.get("mean_library_size"))
