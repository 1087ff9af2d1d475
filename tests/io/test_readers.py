"""Data files read by ``gplvm fit`` (gplvm.io.readers, issue 15 item 1): the numbers, row ids,
column names and annotations read back are the ones written here; every malformed file gives a
one-line DataFileError naming the file and the fix.  ``.h5ad`` files are written with h5py in
AnnData's documented on-disk layout (encoding-type attributes, anndata >= 0.8)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from gplvm.io.readers import DataFileError, TextOptions, as_times, read_annotation, read_data

Y = np.array([[1.5, -2.0, 3.25], [0.0, np.nan, 7.0], [np.nan, 4.5, -1e-3], [2.0, 1.0, 0.5]])


def _csv(Y, ids=None, names=None, sep=",", missing=""):
    lines = [] if names is None else [sep.join(([""] if ids is not None else []) + names)]
    for i, row in enumerate(Y):
        cells = [missing if np.isnan(v) else repr(float(v)) for v in row]
        lines.append(sep.join(([ids[i]] if ids is not None else []) + cells))
    return "\n".join(lines) + "\n"


def _same(a, b):
    np.testing.assert_array_equal(a, b)        # NaN in the same places, numbers exactly


def test_csv_with_header_index_and_empty_cells(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(_csv(Y, ids=["a", "b", "c", "d"], names=["g1", "g2", "g3"]))
    table = read_data(path)
    _same(table.Y, Y)
    assert table.row_ids == ["a", "b", "c", "d"]
    assert table.columns == ["g1", "g2", "g3"]
    assert table.missing_fraction == 2 / 12


def test_numeric_index_detected_by_its_empty_header_cell(tmp_path):
    """pandas' to_csv writes an empty first header cell over a numeric index."""
    path = tmp_path / "d.csv"
    path.write_text(_csv(Y, ids=["10", "11", "12", "13"], names=["g1", "g2", "g3"]))
    table = read_data(path)
    assert table.row_ids == ["10", "11", "12", "13"]
    _same(table.Y, Y)


def test_headerless_tsv_and_a_missing_token(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text(_csv(Y, sep="\t", missing="-999"))
    table = read_data(path, text=TextOptions(missing=("-999",)))
    _same(table.Y, Y)
    assert table.row_ids == ["0", "1", "2", "3"] and table.columns == ["0", "1", "2"]
    no_header = TextOptions(header=False)
    assert np.isnan(read_data(path, text=no_header).Y).sum() == 0     # -999 is a number then


def test_whitespace_txt_and_flags_overriding_detection(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("x y\n1 2\n3 4\n")
    _same(read_data(path).Y, [[1, 2], [3, 4]])
    table = read_data(path, text=TextOptions(header=True, index_col=True))
    assert table.row_ids == ["1", "3"] and table.columns == ["y"]
    _same(table.Y, [[2], [4]])


def test_annotation_columns_are_set_aside(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("cell,g1,stage,t\nc1,1.0,2C,0.5\nc2,,4C,1.5\nc3,3.0,2C,2.5\n")
    table = read_data(path, text=TextOptions(annotations=("stage", "t")))
    _same(table.Y, [[1.0], [np.nan], [3.0]])
    assert table.columns == ["g1"]
    assert list(read_annotation("stage", table, "labels")) == ["2C", "4C", "2C"]
    _same(as_times(read_annotation("t", table, "times")), [0.5, 1.5, 2.5])


def test_annotations_from_a_file(tmp_path):
    data = tmp_path / "d.npy"
    np.save(data, np.nan_to_num(Y))
    table = read_data(data)
    labels = tmp_path / "labels.csv"
    labels.write_text("stage\nA\nB\nA\nC\n")            # a header line, one value per row
    assert list(read_annotation(str(labels), table, "labels")) == ["A", "B", "A", "C"]
    labels.write_text("A\nB\n")
    with pytest.raises(DataFileError, match="2 values but the data has 4 rows"):
        read_annotation(str(labels), table, "labels")
    with pytest.raises(DataFileError, match="d.npy has no annotation columns: give a file"):
        read_annotation("stage", table, "labels")


def test_a_misspelt_annotation_column_is_named_with_the_columns_there_are(tmp_path):
    """Issue 32: ``--labels Cultivar`` on a column 'cultivar' is reported as a missing column
    (with the columns and the close match), not as the real column's non-numeric cells; on a
    headerless table the message says that its columns are numbered."""
    path = tmp_path / "wine.csv"
    path.write_text("alcohol,ash,cultivar\n13.2,2.4,a\n12.1,2.0,b\n")
    with pytest.raises(DataFileError) as err:
        read_data(path, text=TextOptions(annotations=("Cultivar",), required=("Cultivar",)))
    assert str(err.value) == ("no column 'Cultivar' in wine.csv, and no file of that name (did "
                              "you mean 'cultivar'?); its columns are: alcohol, ash, cultivar")
    path.write_text("13.2,2.4\n12.1,2.0\n")
    with pytest.raises(DataFileError, match="no header row, so its columns are numbered: 0, 1$"):
        read_data(path, text=TextOptions(annotations=("Cultivar",), required=("Cultivar",)))
    # a number names one
    table = read_data(path, text=TextOptions(annotations=("1",), required=("1",)))
    assert table.columns == ["0"] and list(table.obs["1"]) == ["2.4", "2.0"]


def test_npy_and_npz(tmp_path):
    np.save(tmp_path / "d.npy", Y)
    table = read_data(tmp_path / "d.npy")
    _same(table.Y, Y)
    assert table.row_ids == ["0", "1", "2", "3"] and table.columns == ["0", "1", "2"]
    np.savez(tmp_path / "one.npz", counts=Y)
    _same(read_data(tmp_path / "one.npz").Y, Y)
    np.savez(tmp_path / "two.npz", counts=Y, other=np.ones((2, 2)))
    _same(read_data(tmp_path / "two.npz", key="counts").Y, Y)


def _write_h5ad(path, X, obs_names, var_names, stage, layer=None, sparse=False):
    """A minimal .h5ad in AnnData's on-disk format: X dense or CSR, obs with a string index and
    a categorical column, var with a string index, optionally one layer."""
    from scipy import sparse as sp

    strings = h5py.string_dtype()
    with h5py.File(path, "w") as f:
        f.attrs["encoding-type"], f.attrs["encoding-version"] = "anndata", "0.1.0"
        if sparse:
            csr = sp.csr_matrix(X)
            g = f.create_group("X")
            g.attrs["encoding-type"], g.attrs["encoding-version"] = "csr_matrix", "0.1.0"
            g.attrs["shape"] = X.shape
            g["data"], g["indices"], g["indptr"] = csr.data, csr.indices, csr.indptr
        else:
            f["X"] = X
        for name, index, columns in (("obs", obs_names, {"stage": stage}),
                                     ("var", var_names, {})):
            g = f.create_group(name)
            g.attrs["encoding-type"], g.attrs["encoding-version"] = "dataframe", "0.2.0"
            g.attrs["_index"] = "_index"
            g.attrs["column-order"] = np.array(list(columns), dtype=object).astype(strings) \
                if columns else np.array([], dtype="S")
            g.create_dataset("_index", data=np.array(index, dtype=object), dtype=strings)
            for col, values in columns.items():
                cats, codes = np.unique(values, return_inverse=True)
                c = g.create_group(col)
                c.attrs["encoding-type"], c.attrs["encoding-version"] = "categorical", "0.2.0"
                c.attrs["ordered"] = False
                c.create_dataset("categories", data=cats.astype(object), dtype=strings)
                c["codes"] = codes.astype(np.int8)
        if layer is not None:
            f.create_group("layers")["counts"] = layer


@pytest.mark.parametrize("sparse", [False, True])
def test_h5ad_dense_or_sparse_with_categorical_obs(tmp_path, sparse):
    X = np.array([[0.0, 3.0, 0.0], [1.0, 0.0, 2.0]])
    path = tmp_path / "d.h5ad"
    _write_h5ad(path, X, ["cell1", "cell2"], ["g1", "g2", "g3"], ["4C", "2C"],
                layer=X * 10, sparse=sparse)
    table = read_data(path)
    _same(table.Y, X)                           # absent sparse entries are zeros, not missing
    assert table.row_ids == ["cell1", "cell2"] and table.columns == ["g1", "g2", "g3"]
    assert list(read_annotation("stage", table, "labels")) == ["4C", "2C"]
    _same(read_data(path, layer="counts").Y, X * 10)
    with pytest.raises(DataFileError, match="no layer 'raw'; its layers: counts"):
        read_data(path, layer="raw")


BAD = {
    "ragged.csv": ("a,b,c\n1,2,3\n4,5\n", "line 3 has 2 cells but line 1 has 3"),
    "words.csv": ("a,b\n1,2\n3,abc\n", "line 3, column 'b' has the non-numeric cell 'abc'"),
    "empty.csv": ("\n\n", "is empty"),
    "header_only.csv": ("a,b\n", "a header but no data rows"),
    "d.xlsx": ("1,2\n", "unknown extension '.xlsx'"),
    "binary.csv": (b"\xff\xfe\x00\x81", "not a UTF-8 text file"),
    "broken.npy": ("not numpy", "not a valid .npy file"),
    "broken.h5ad": ("not hdf5", "not an HDF5"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_text_files_give_one_line(tmp_path, name):
    content, message = BAD[name]
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(DataFileError, match=message) as err:
        read_data(path)
    assert "\n" not in str(err.value) and name in str(err.value)


def test_bad_arrays_give_one_line(tmp_path):
    np.save(tmp_path / "vector.npy", np.arange(3.0))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "strings.npy", np.array([["a", "b"]]))
    np.save(tmp_path / "nothing.npy", np.zeros((0, 3)))
    np.savez(tmp_path / "two.npz", a=np.ones((2, 2)), b=np.ones((2, 2)))
    cases = {"vector.npy": ("1-D array", {}), "objects.npy": ("Python objects", {}),
             "strings.npy": ("numeric array", {}), "nothing.npy": ("is empty", {}),
             "two.npz": ("holds 2 arrays \\(a, b\\); choose one with --key", {}),
             "two.npz ": ("has no array 'c'; its arrays are a, b", {"key": "c"})}
    for name, (message, kwargs) in cases.items():
        with pytest.raises(DataFileError, match=message) as err:
            read_data(tmp_path / name.strip(), **kwargs)
        assert "\n" not in str(err.value)
    with pytest.raises(DataFileError, match="no such file"):
        read_data(tmp_path / "absent.csv")


def test_a_semicolon_table_with_decimal_commas(tmp_path):
    """Spreadsheets in many locales write ';' between cells and ',' as the decimal mark: read
    as such with ``--delimiter ';'`` (1,5 is 1.5; ids stay as written); read with the CSV's
    default ',' it fails with a message that names ``--delimiter ';'``."""
    path = tmp_path / "eu.csv"
    path.write_text("id;g1;g2\nr1;1,5;-0,25\nr2;3;4,5e2\nr3;;7\n")
    table = read_data(path, text=TextOptions(delimiter=";"))
    _same(table.Y, [[1.5, -0.25], [3.0, 450.0], [np.nan, 7.0]])
    assert table.row_ids == ["r1", "r2", "r3"] and table.columns == ["g1", "g2"]
    with pytest.raises(DataFileError, match="pass --delimiter ';'"):
        read_data(path)
    tsv_as_csv = tmp_path / "t.csv"
    tsv_as_csv.write_text("g1\tg2\n1\t2\n3\t4\n")
    with pytest.raises(DataFileError, match=r"pass --delimiter '\\t'"):
        read_data(tsv_as_csv)


@pytest.mark.parametrize("delimiter, accepted", [(";;", None), ("", None), ("\n", None),
                                                 ("\\t", "\t"), ("tab", "\t"), ("|", "|")])
def test_delimiter_is_one_character(tmp_path, delimiter, accepted):
    path = tmp_path / "d.txt"
    path.write_text(_csv(Y[:2], sep=accepted or ","))
    if accepted is None:
        with pytest.raises(DataFileError, match="--delimiter .*give the one character"):
            read_data(path, text=TextOptions(delimiter=delimiter))
    else:
        _same(read_data(path, text=TextOptions(delimiter=delimiter)).Y, Y[:2])


def test_a_folder_or_a_truncated_archive_is_named_as_such(tmp_path):
    folder = tmp_path / "data.csv"
    folder.mkdir()
    with pytest.raises(DataFileError, match="data.csv is a folder; give a data file"):
        read_data(folder)
    np.savez(tmp_path / "full.npz", Y=np.ones((50, 4)))
    data = (tmp_path / "full.npz").read_bytes()
    for cut in (len(data) // 2, len(data) - 30):
        (tmp_path / "cut.npz").write_bytes(data[:cut])
        with pytest.raises(DataFileError, match="cut.npz is not a valid .npz file.*cut short"):
            read_data(tmp_path / "cut.npz")


def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    """Columns are matched by name (a model's columns, reordered files): two columns of one
    name would both map to the first, so such a header is refused naming them (issue 31)."""
    path = tmp_path / "dup.csv"
    path.write_text("id,g1,g2,g1\nr1,1,2,3\nr2,4,5,6\n")
    with pytest.raises(DataFileError, match=r"names column 'g1' 2 times \(columns 2, 4\)"):
        read_data(path)
