"""Data files in: the readers behind ``gplvm fit DATA`` (issue 15, item 1).

:func:`read_data` turns a CSV/TSV/TXT table, a ``.npy`` array, one array of a ``.npz`` archive
or an AnnData ``.h5ad`` file (:mod:`gplvm.io.h5ad`) into a :class:`Table`: the data
matrix ``Y`` (NaN marks a missing entry), one id per row, one name per column, and per-row
annotations (the ``obs`` columns of an ``.h5ad``, or table columns set aside as annotations)
usable as labels or time stamps.  A file that cannot be read raises :class:`DataFileError`, a
``ValueError`` whose message is one line naming the file, the problem and the fix (both
defined in :mod:`gplvm.io.table`).
"""

from __future__ import annotations

import csv
import difflib
import os
import re
import zipfile
import zlib
from pathlib import Path
from typing import NamedTuple, Optional

import numpy as np

from gplvm.io.h5ad import read_h5ad
from gplvm.io.table import DataFileError, Table

__all__ = ["DataFileError", "Table", "TextOptions", "read_data", "read_annotation", "as_times",
           "MISSING_TOKENS", "TABLE_SUFFIXES", "SUFFIXES"]

#: cells that mean "missing" in a text table, besides any ``missing=`` tokens
MISSING_TOKENS = ("", "NA", "NaN", "nan", "N/A")
TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".txt": None}
SUFFIXES = (*TABLE_SUFFIXES, ".npy", ".npz", ".h5ad")


class TextOptions(NamedTuple):
    """How :func:`read_data` reads a text table (``.csv``, ``.tsv``/``.tab``, ``.txt``); the
    other kinds of file ignore it.

    Attributes:
        header, index_col: ``True``/``False`` to say whether the first row is a header and the
            first column row ids; ``None`` detects them (a header has a non-numeric cell; an
            index column is non-numeric and unique, or has an empty header cell).
        delimiter: the cell separator (default by extension; ``\\t`` or ``tab`` for a tab).
        missing: extra cell values that mean "missing" (besides :data:`MISSING_TOKENS`).
        annotations: names of columns to set aside as per-row annotations (labels, time
            stamps) instead of data.
        required: those of ``annotations`` that must be a column or else an existing file
            (what the user asked for; a saved fit's annotation names may be absent from new
            data).
    """

    header: Optional[bool] = None
    index_col: Optional[bool] = None
    delimiter: Optional[str] = None
    missing: tuple = ()
    annotations: tuple = ()
    required: tuple = ()


def read_data(path, *, key=None, layer=None, text: TextOptions = TextOptions()) -> Table:
    """Read a data file by its extension.

    Args:
        path: ``.csv``, ``.tsv``/``.tab``, ``.txt`` (delimiter sniffed), ``.npy``, ``.npz`` or
            ``.h5ad``.
        key: the array of a ``.npz`` archive (needed when it holds several).
        layer: the AnnData layer to read instead of ``X``.
        text: how to read a text table (:class:`TextOptions`: header, index column,
            delimiter, missing-value tokens, annotation columns), e.g.
            ``read_data("counts.csv", text=TextOptions(missing=("-999",)))``.

    Raises:
        DataFileError: the file is absent, empty, ragged, non-numeric or of an unknown kind.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if path.is_dir():
        raise DataFileError(f"{path} is a folder; give a data file ({', '.join(SUFFIXES)})")
    if suffix not in SUFFIXES:
        raise DataFileError(f"{path.name}: unknown extension {suffix or '(none)'!r}; give a "
                            f"{', '.join(SUFFIXES)} file")
    if not path.is_file():
        raise DataFileError(f"{path}: no such file")
    delimiter = _checked_delimiter(text.delimiter)
    if suffix == ".h5ad":
        return read_h5ad(path, layer=layer)
    if suffix in (".npy", ".npz"):
        return _read_array(path, key)
    if delimiter is None:
        delimiter = TABLE_SUFFIXES[suffix]
    return _read_text(path, text._replace(delimiter=delimiter,
                                          missing=(*MISSING_TOKENS, *text.missing),
                                          annotations=tuple(text.annotations),
                                          required=tuple(text.required)))


# ----------------------------------------------------------------------------- arrays
#: what reading a cut-short or damaged .npy/.npz raises
_DAMAGED = (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError)


def _damaged(path: Path, err: BaseException) -> DataFileError:
    return DataFileError(f"{path.name} is not a valid {path.suffix} file "
                         f"({type(err).__name__}: {err}); was it cut short?")


def _read_array(path: Path, key) -> Table:
    with open(path, "rb") as stream:
        magic = stream.read(6)
    if magic != b"\x93NUMPY" and not magic.startswith(b"PK"):    # .npy header, zip archive
        raise DataFileError(f"{path.name} is not a valid {path.suffix} file (written by "
                            f"numpy.save / numpy.savez)")
    try:
        loaded = np.load(path, allow_pickle=False)
    except ValueError as err:
        if "pickle" in str(err):
            raise DataFileError(f"{path.name} holds Python objects; save a numeric array "
                                f"(numpy.save(path, Y.astype(float)))") from None
        raise DataFileError(f"{path.name} is not a valid {path.suffix} file ({err})") from None
    except _DAMAGED as err:
        raise _damaged(path, err) from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        try:
            with loaded:
                array = _npz_member(path, loaded, key)
        except DataFileError:
            raise
        except (ValueError, *_DAMAGED) as err:
            raise _damaged(path, err) from None
    else:
        array = loaded
    return _array_table(path, array)


def _npz_member(path: Path, archive, key) -> np.ndarray:
    names = list(archive.files)
    if not names:
        raise DataFileError(f"{path.name} is empty: the archive holds no array")
    if key is None:
        if len(names) > 1:
            raise DataFileError(f"{path.name} holds {len(names)} arrays ({', '.join(names)}); "
                                f"choose one with --key")
        key = names[0]
    if key not in names:
        raise DataFileError(f"{path.name} has no array {key!r}; its arrays are "
                            f"{', '.join(names)}")
    try:
        return archive[key]
    except ValueError:
        raise DataFileError(f"{path.name}[{key!r}] holds Python objects; save a numeric "
                            f"array") from None


def _array_table(path: Path, array: np.ndarray) -> Table:
    if array.dtype.kind not in "biuf":
        raise DataFileError(f"{path.name} holds an array of {array.dtype} values; give a "
                            f"numeric array")
    if array.ndim not in (2, 3, 4):
        raise DataFileError(f"{path.name} holds a {array.ndim}-D array of shape {array.shape};"
                            f" give a 2-D array, rows x columns (e.g. Y.reshape(-1, 1))")
    if array.size == 0:
        raise DataFileError(f"{path.name} is empty: its array has shape {array.shape}")
    Y = np.asarray(array, dtype=float)
    return Table(Y, [str(i) for i in range(Y.shape[0])],
                 [str(j) for j in range(int(np.prod(Y.shape[1:])))], {}, str(path))


# ----------------------------------------------------------------------------- text tables
def _checked_delimiter(delimiter):
    """``--delimiter``: one character (the escapes ``\\t`` and ``tab`` mean a tab)."""
    if delimiter is None:
        return None
    text = {"\\t": "\t", "tab": "\t", "TAB": "\t"}.get(delimiter, delimiter)
    if not isinstance(text, str) or len(text) != 1 or text in "\"\r\n":
        raise DataFileError(f"--delimiter {delimiter!r}: give the one character that separates "
                            f"cells, e.g. ',' ';' or '\\t' (a tab)")
    return text


def _read_text(path: Path, text: TextOptions) -> Table:
    """The table of ``path`` read as ``text`` says (its delimiter resolved, its missing tokens
    complete)."""
    try:
        return _parse_text(path, text)
    except DataFileError as err:
        hint = _delimiter_hint(path, text.delimiter)
        if hint is None:
            raise
        raise DataFileError(f"{err}; {hint}") from None


def _delimiter_hint(path: Path, delimiter):
    """A hint naming --delimiter when the file's first line holds a likelier separator than
    the one used (a semicolon CSV, as spreadsheets write with decimal commas), else None."""
    try:
        first = next((ln for ln in path.read_text(encoding="utf-8-sig").splitlines()
                      if ln.strip()), "")
    except (OSError, UnicodeDecodeError):
        return None
    used = delimiter if delimiter is not None else next(
        (d for d in ("\t", ",", ";") if d in first), None)
    for other, name in ((";", "';'"), ("\t", "'\\t'"), (",", "','")):
        if other != used and first.count(other) >= max(1, first.count(used or " ")):
            decimal = " (and decimal commas are read as points)" if other == ";" else ""
            return (f"its first line looks separated by {name}: pass --delimiter {name}"
                    f"{decimal}")
    return None


def _parse_text(path: Path, text: TextOptions) -> Table:
    header, index_col, _, missing, annotations, required = text
    rows, delimiter = _text_rows(path, text.delimiter)
    if delimiter == ";":     # a semicolon table writes decimal commas: 1,5 is 1.5
        rows = [(line, [_decimal_point(c) for c in cells]) for line, cells in rows]
    width = len(rows[0][1])
    for line, cells in rows:
        if len(cells) != width:
            raise DataFileError(f"{path.name}: line {line} has {len(cells)} cells but line "
                                f"{rows[0][0]} has {width}; every row needs the same number "
                                f"of cells (a ragged table)")
    if header is None:
        header = any(not _numeric(c, missing) for c in rows[0][1])
    names = ([c.strip() for c in rows[0][1]] if header
             else [str(j) for j in range(width)])
    body = rows[1:] if header else rows
    if not body:
        raise DataFileError(f"{path.name} has a header but no data rows")
    cells = np.array([c for _, c in body], dtype=object)
    lines = [line for line, _ in body]
    if index_col is None:
        index_col = names[0] not in annotations and _looks_like_index(
            names[0] if header else None, cells[:, 0], missing)
    row_ids = ([str(c).strip() for c in cells[:, 0]] if index_col
               else [str(i) for i in range(len(body))])
    first = 1 if index_col else 0
    for name in required:              # before a typo's real column fails as non-numeric
        if name not in names[first:] and not os.path.isfile(name):
            columns = ("its columns are" if header else
                       f"{path.name} has no header row, so its columns are numbered")
            raise DataFileError(f"no column {name!r} in {path.name}, and no file of that name"
                                f"{_did_you_mean(name, names[first:])}; {columns}: "
                                f"{_listed(names[first:])}")
    obs = {}
    for name in annotations:
        if name in names[first:]:
            j = names.index(name, first)
            obs[name] = np.array([str(c).strip() for c in cells[:, j]], dtype=object)
    keep = [j for j in range(first, width) if names[j] not in obs]
    if not keep:
        raise DataFileError(f"{path.name} has no data columns left")
    seen: dict = {}
    for j in range(first, width):
        seen.setdefault(names[j], []).append(j + 1)
    twice = {name: at for name, at in seen.items() if len(at) > 1}
    if header and twice:
        name, at = next(iter(twice.items()))
        raise DataFileError(f"{path.name}: the header names column {name!r} {len(at)} times "
                            f"(columns {', '.join(map(str, at))}); columns are matched by name, "
                            f"so give each column its own name")
    Y = _to_float(path, cells[:, keep], [names[j] for j in keep], lines, missing)
    return Table(Y, row_ids, [names[j] for j in keep], obs, str(path))


_DECIMAL_COMMA = re.compile(r"^\s*[-+]?\d*,\d+(?:[eE][-+]?\d+)?\s*$")


def _decimal_point(cell: str) -> str:
    """``cell`` with a decimal comma made a point (``-1,5e3`` → ``-1.5e3``); others as they are."""
    return cell.replace(",", ".") if _DECIMAL_COMMA.match(cell) else cell


def _text_rows(path: Path, delimiter) -> tuple[list[tuple[int, list[str]]], object]:
    """Non-blank rows with their line numbers, and the delimiter (``None`` sniffs it; still
    None for cells separated by runs of white space)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataFileError(f"{path.name} is not a UTF-8 text file; give a CSV/TSV table, "
                            f"or a .npy/.npz/.h5ad file with a matching extension") from None
    lines = text.splitlines()
    if delimiter is None:
        sample = next((ln for ln in lines if ln.strip()), "")
        delimiter = next((d for d in ("\t", ",", ";") if d in sample), None)
    if delimiter is None:
        parsed = [ln.split() for ln in lines]
    else:
        parsed = list(csv.reader(lines, delimiter=delimiter))
    rows = [(i + 1, cells) for i, cells in enumerate(parsed)
            if cells and any(c.strip() for c in cells)]
    if not rows:
        raise DataFileError(f"{path.name} is empty: it has no rows of data")
    return rows, delimiter


def _numeric(cell: str, missing) -> bool:
    cell = cell.strip()
    if cell in missing:
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _looks_like_index(name, column, missing) -> bool:
    """An index column: an empty header cell, or unique non-numeric values in every row."""
    if name == "":
        return True
    values = [str(c).strip() for c in column]
    return (not any(_numeric(v, missing) for v in values)
            and len(set(values)) == len(values))


def _to_float(path: Path, cells: np.ndarray, names, lines, missing) -> np.ndarray:
    stripped = np.vectorize(lambda c: c.strip(), otypes=[object])(cells)
    is_missing = np.isin(stripped, list(missing))
    filled = np.where(is_missing, "nan", stripped)
    try:
        return filled.astype(float)
    except ValueError:
        pass
    for i in range(filled.shape[0]):
        for j in range(filled.shape[1]):
            if not _numeric(filled[i, j], missing):
                raise DataFileError(
                    f"{path.name}: line {lines[i]}, column {names[j]!r} has the non-numeric "
                    f"cell {filled[i, j]!r}; fix the cell, pass --missing {filled[i, j]} if it "
                    f"marks a missing value, or --labels {names[j]} to use the column as "
                    f"labels")
    raise AssertionError("unreachable")  # pragma: no cover


# ----------------------------------------------------------------------------- annotations
def read_annotation(spec: str, table: Table, what: str) -> np.ndarray:
    """Per-row values named by ``spec``: an annotation of ``table`` (an ``.h5ad`` ``obs``
    column, a table column set aside) or a file with one value per row (a header line
    allowed), as an (N,) object array of strings or numbers.

    Raises:
        DataFileError: ``spec`` is neither, or the file's length is not one value per row.
    """
    n = len(table.row_ids)
    if spec in table.obs:
        return np.asarray(table.obs[spec])
    if not os.path.isfile(spec):
        name = Path(table.path).name or "the data"
        known = (f"its annotation columns are: {_listed(list(table.obs))}" if table.obs else
                 f"{name} has no annotation columns: give a file with one value per row")
        raise DataFileError(f"--{what} {spec!r}: no annotation column of that name in {name}, "
                            f"and no file of that name{_did_you_mean(spec, table.obs)}; {known}")
    path = Path(spec)
    if path.suffix.lower() == ".npy":
        values = np.load(path, allow_pickle=False).ravel()
    else:
        values = np.array([cells[-1].strip() for _, cells in _text_rows(path, None)[0]],
                          dtype=object)
        if len(values) == n + 1:
            values = values[1:]
    if len(values) != n:
        raise DataFileError(f"--{what} {path.name} has {len(values)} values but the data has "
                            f"{n} rows; give one value per row")
    return values


def _did_you_mean(name: str, names) -> str:
    """`` (did you mean 'x'?)`` naming the closest of ``names`` (case ignored), or ''."""
    lowered = {str(n).lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean {lowered[close[0]]!r}?)" if close else ""


def _listed(names, shown: int = 20) -> str:
    """The first ``shown`` of ``names``, comma-separated, with how many in all; or 'none'."""
    if not names:
        return "none"
    more = f", … ({len(names)} in all)" if len(names) > shown else ""
    return ", ".join(map(str, names[:shown])) + more


def as_times(values: np.ndarray, what: str = "times") -> np.ndarray:
    """Annotation values as floats (time stamps, offsets), with a one-line error when they are
    not numbers."""
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        bad = next(v for v in values if not _numeric(str(v), ()))
        raise DataFileError(f"--{what} values must be numbers; {bad!r} is not") from None
