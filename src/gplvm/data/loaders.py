"""Loaders for the real data sets used by the papers, read from a local folder.

Nothing is downloaded. Every loader takes ``path=None``: the data set's own folder (or, where it
has one main file, that file); by default ``default_data_dir() / <folder>``, where
:func:`default_data_dir` is ``$GPLVM_DATA_DIR`` if set, else ``<repo>/../shared/data``.
A missing file raises ``FileNotFoundError`` that names the expected path and the variable.

Every loader returns a :class:`Dataset` with ``Y`` as float64 (N, D), one row per sample.
The folder layouts, shapes and provenance are those of the README in each folder.

Licences vary and several data sets have none stated (see each loader's docstring); they are
for research use with citation, and none of them ships with the package.
"""

from __future__ import annotations

import csv
import datetime
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.io

from gplvm.typing import Bool, Float, Int, Real, Shaped

#: Where a loader reads from: the data set's folder or file; None for the default folder.
PathLike = str | os.PathLike | None
#: Digit classes to keep (0..9), or None for all.
Digits = Sequence[int] | Int[np.ndarray, " k"] | None

__all__ = ["Dataset", "DATA_DIR_ENV", "default_data_dir", "load_oil_flow", "load_frey_faces",
           "load_cmu_mocap_walkjog", "load_congress109", "load_bridges", "load_mesc",
           "load_yale_faces", "load_usps", "load_usps_twos", "load_newsgroups",
           "load_hippocampus", "load_digits", "load_montreal_bikes", "load_spam",
           "load_fx_exchange_rates"]

DATA_DIR_ENV = "GPLVM_DATA_DIR"


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded data set.

    Attributes:
        Y: data matrix, float64 (N, D).
        name: short identifier (the folder name).
        description: one paragraph: what a row and a column are, units, source.
        labels: class of each row (N,), if the data set has classes.
        label_names: name of each class, indexed by label value where labels are 0-based.
        times: time stamp of each row (N,), for sequences.
        groups: sequence / trial id of each row (N,), where rows come from several sequences.
        feature_names: name of each column (D,), if known.
        extras: anything else (held-out test arrays, image shapes, side information), read-only.
    """

    Y: Float[np.ndarray, "N D"]
    name: str
    description: str
    labels: Shaped[np.ndarray, " N"] | None = None
    label_names: tuple[str, ...] | None = None
    times: Real[np.ndarray, " N"] | None = None
    groups: Shaped[np.ndarray, " N"] | None = None
    feature_names: tuple[str, ...] | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))

    @property
    def shape(self) -> tuple[int, int]:
        return self.Y.shape


# ----------------------------------------------------------------------------------- paths


def default_data_dir() -> Path:
    """The folder holding one sub-folder per data set.

    ``$GPLVM_DATA_DIR`` if set, else ``<repo>/../shared/data`` (the repository root being
    three levels above this file's package folder: ``<repo>/src/gplvm/data/loaders.py``).
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[3].parent / "shared" / "data"


def _file(path: PathLike, folder: str, filename: str) -> Path:
    """Resolve ``path`` (a folder, a file, or None for the default folder) to a file."""
    base = default_data_dir() / folder if path is None else Path(path).expanduser()
    target = base if base.is_file() else base / filename
    if not target.is_file():
        raise FileNotFoundError(
            f"{folder}: expected the file {target}. Pass path=<the folder holding {filename}>, "
            f"or set {DATA_DIR_ENV} to the folder that contains {folder}/")
    return target


def _loadmat(file: Path) -> dict:
    try:
        return scipy.io.loadmat(file)
    except NotImplementedError as err:  # MATLAB v7.3 files are HDF5
        raise ValueError(f"{file} is a MATLAB v7.3 (HDF5) file, which scipy.io cannot read; "
                         f"re-save it with MATLAB's save(..., '-v7') or read it with h5py") from err


def _strings(cell) -> tuple[str, ...]:
    """MATLAB cell array of strings -> tuple of str (first string of nested cells)."""
    out = []
    for item in np.asarray(cell, dtype=object).ravel():
        while isinstance(item, np.ndarray) and item.dtype == object:
            item = item.ravel()[0]
        out.append(str(np.asarray(item).ravel()[0]) if np.size(item) else "")
    return tuple(out)


def _one_hot_to_labels(onehot: Real[np.ndarray, "N K"], what: str) -> Int[np.ndarray, " N"]:
    onehot = np.asarray(onehot)
    if not np.all(onehot.sum(axis=1) == 1):
        raise ValueError(f"{what}: label matrix is not one-hot (row sums differ from 1)")
    return np.argmax(onehot, axis=1)


# --------------------------------------------------------------------------------- loaders


def load_oil_flow(path: PathLike = None, subset: str = "train") -> Dataset:
    """Oil flow (Bishop & James 1993): 1000 x 12 gamma-densitometry readings, 3 flow regimes.

    The Bayesian GPLVM benchmark (Titsias & Lawrence 2010; seed 004 and 001) uses the training
    set ``DataTrn`` with its labels for colouring and nearest-neighbour error counts.

    Args:
        path: the ``oil_flow`` folder (with ``DataTrn.txt`` etc.).
        subset: ``"train"`` (DataTrn), ``"validation"`` (DataVdn) or ``"test"`` (DataTst).

    Returns:
        ``Y`` (1000, 12); ``labels`` 0 homogeneous / 1 annular / 2 stratified (train counts
        343/316/341, from the one-hot ``*Lbls.txt``); ``extras["fractions"]`` (1000, 2) phase
        fractions. Licence: none stated; research use, cite Bishop & James (1993).
    """
    stems = {"train": "DataTrn", "validation": "DataVdn", "test": "DataTst"}
    if subset not in stems:
        raise ValueError(f"subset={subset!r}; choose one of {tuple(stems)}")
    stem = stems[subset]
    data_file = _file(path, "oil_flow", f"{stem}.txt")
    Y, base = np.loadtxt(data_file), data_file.parent
    labels = _one_hot_to_labels(np.loadtxt(_file(base, "oil_flow", f"{stem}Lbls.txt")), "oil")
    fractions = np.loadtxt(_file(base, "oil_flow", f"{stem}Frctns.txt"))
    return Dataset(Y, "oil_flow", "Three-phase oil pipe flow: 12 dual-energy gamma densitometry "
                   f"beam readings per sample ({stem}); classes = flow regime.", labels=labels,
                   label_names=("homogeneous", "annular", "stratified"),
                   extras={"fractions": fractions})


def load_frey_faces(path: PathLike = None) -> Dataset:
    """Frey faces: 1965 frames of one face, 28 x 20 greyscale pixels (seed 003's imputation data).

    Args:
        path: the ``frey_faces`` folder or ``frey_rawface.mat`` (variable ``ff``, 560 x 1965).

    Returns:
        ``Y`` (1965, 560) pixel intensities 0..255 (observed range 8..238); image i is
        ``Y[i].reshape(28, 20)`` (row-major); ``times`` = frame index 0..1964 (the frames are
        consecutive video frames); ``extras["image_shape"] = (28, 20)``. Licence: none stated
        (Roweis's data page); cite Frey / Roweis.
    """
    ff = _loadmat(_file(path, "frey_faces", "frey_rawface.mat"))["ff"]
    Y = ff.T.astype(float)
    return Dataset(Y, "frey_faces", "Brendan Frey's face video: one row per frame, 560 = 28x20 "
                   "pixels (row-major), intensities 0-255.", times=np.arange(len(Y), dtype=float),
                   extras={"image_shape": (28, 20)})


_CMU35_TRAIN = (*range(1, 18), *range(19, 27), 28, *range(30, 35))   # lvmLoadData 'cmu35WalkJog'
_CMU35_TEST = (18, 29)
_CMU35_JOG = set(range(17, 27))                                      # CMU index: 35_17..35_26


def _cmu_rows(onehot: np.ndarray, trials, fps: float = 30.0):
    seq = _one_hot_to_labels(onehot, "cmu_mocap_35_walkjog")
    if np.any(np.diff(seq) < 0):
        raise ValueError("cmu_mocap_35_walkjog: sequences are not stored contiguously")
    groups = np.asarray(trials)[seq]
    times = np.concatenate([np.arange(np.sum(seq == s)) for s in np.unique(seq)]) / fps
    labels = np.isin(groups, list(_CMU35_JOG)).astype(int)
    return groups, times, labels


def load_cmu_mocap_walkjog(path: PathLike = None) -> Dataset:
    """CMU motion capture, subject 35, walking and jogging (Lawrence's GPmat ``cmu35WalkJog``).

    31 training trials (35_01..35_34 without 18, 27, 29) and 2 test trials (18, 29), every 4th
    frame of the 120 fps capture (30 fps), 62 Acclaim channels (root position and joint angles
    in degrees). Used by the Bayesian GPLVM / VGPDS papers and, as "CMU", seed 000 Table 3.

    Args:
        path: the ``cmu_mocap_35_walkjog`` folder or ``cmu35WalkJog.mat``.

    Returns:
        ``Y`` (2644, 62); ``groups`` = CMU trial number of each row; ``times`` = seconds since
        the trial's first kept frame; ``labels`` 0 walk / 1 jog (trials 17-26 are the jogs in
        the CMU index; their ~40-frame length agrees); ``extras``: ``Y_test`` (169, 62),
        ``groups_test``, ``times_test``, ``labels_test``. Licence: CMU mocap terms (free for
        research; acknowledge mocap.cs.cmu.edu and NSF EIA-0196217; no resale).
    """
    d = _loadmat(_file(path, "cmu_mocap_35_walkjog", "cmu35WalkJog.mat"))
    groups, times, labels = _cmu_rows(d["lbls"], _CMU35_TRAIN)
    g_test, t_test, l_test = _cmu_rows(d["lblstest"], _CMU35_TEST)
    return Dataset(np.asarray(d["Y"], dtype=float), "cmu_mocap_35_walkjog",
                   "CMU mocap subject 35, 31 walk/jog trials at 30 fps; 62 Acclaim channels "
                   "(root translation and joint angles, degrees).", labels=labels,
                   label_names=("walk", "jog"), times=times, groups=groups,
                   extras={"Y_test": np.asarray(d["Ytest"], dtype=float), "groups_test": g_test,
                           "times_test": t_test, "labels_test": l_test, "fps": 30.0})


def load_congress109(path: PathLike = None) -> Dataset:
    """Phrase counts of the 109th US Congress (529 members x 1000 phrases), seed 000 Table 1.

    Rows are sorted by member name and the party is joined by name, as in the RFLVM reference
    code (which sorts both files by name).

    Args:
        path: the ``congress109`` folder (``congress109.csv`` and ``congress109members.csv``).

    Returns:
        ``Y`` (529, 1000) counts 0..631 (about 91% zeros); ``labels`` 0 Republican / 1
        Democrat or independent (the reference's ``0 if R else 1``; R 285, D 242, I 2);
        ``feature_names`` the phrases; ``extras``: ``names``, ``party``, ``state``, ``chamber``.
        Licence: none stated (J. Scott's teaching data, from Gentzkow & Shapiro).
    """
    counts_file = _file(path, "congress109", "congress109.csv")
    with open(counts_file, newline="") as fh:
        rows = list(csv.reader(fh))
    base = counts_file.parent
    with open(_file(base, "congress109", "congress109members.csv"), newline="") as fh:
        members = {r["name"]: r for r in csv.DictReader(fh)}
    rows_by_name = sorted(rows[1:], key=lambda r: r[0])
    names = [r[0] for r in rows_by_name]
    missing = [n for n in names if n not in members]
    if missing:
        raise ValueError(f"congress109: the members file lacks {len(missing)} names, "
                         f"e.g. {missing[:3]}")
    Y = np.array([r[1:] for r in rows_by_name], dtype=float)
    party = np.array([members[n]["party"] for n in names])
    extras = {"names": np.array(names), "party": party,
              "state": np.array([members[n]["state"] for n in names]),
              "chamber": np.array([members[n]["chamber"] for n in names])}
    return Dataset(Y, "congress109", "Counts of 1000 phrases in each member's speeches in the "
                   "Congressional Record, 109th Congress.", labels=(party != "R").astype(int),
                   label_names=("R", "D or I"), feature_names=tuple(rows[0][1:]), extras=extras)


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickle plain NumPy arrays in containers, and refuse every other global.

    ``bridges.npy`` is a pickled dict of arrays; ``np.load(allow_pickle=True)`` would execute
    whatever the pickle names, so only NumPy's array reconstruction is allowed here.
    """

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"),
                ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")
        if name == "_reconstruct":
            return np.ndarray.__reduce__(np.zeros(1))[0]   # NumPy's own _reconstruct
        return getattr(np, name)


def _load_pickled_npy(file: Path):
    """Read a ``.npy`` file whose payload is a pickled object, with the safe unpickler."""
    with open(file, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        _, _, dtype = read_header(fh)
        if dtype != object:
            fh.seek(0)
            return np.lib.format.read_array(fh, allow_pickle=False)
        return _NumpyOnlyUnpickler(fh).load()


def load_bridges(path: PathLike = None) -> Dataset:
    """Daily bicycle counts on four NYC East River bridges (214 days), seed 000 Table 1.

    Args:
        path: the ``rflvm_bridges`` folder or ``bridges.npy`` (a pickled dict ``Y``, ``labels``,
            read with a loader that only rebuilds NumPy arrays).

    Returns:
        ``Y`` (214, 4) counts 151..8873; ``labels`` (214,) binary, undocumented upstream (they
        follow a 2-zeros / 5-ones weekly pattern: plausibly weekend 0 / weekday 1); ``times``
        = day index. Licence: NYC Open Data (free public use).
    """
    d = _load_pickled_npy(_file(path, "rflvm_bridges", "bridges.npy"))
    d = d[()] if isinstance(d, np.ndarray) else d
    return Dataset(np.asarray(d["Y"], dtype=float), "rflvm_bridges",
                   "Daily cyclist counts on four NYC East River bridges (NYC Open Data), as "
                   "in the RFLVM repository; column order not documented upstream.",
                   labels=np.asarray(d["labels"], dtype=int),
                   times=np.arange(len(d["Y"]), dtype=float))


def load_mesc(path: PathLike = None) -> Dataset:
    """Mouse embryo single-cell qPCR (Guo et al. 2010): 429 cells x 48 genes, 8 stages.

    Args:
        path: the ``mesc_guo2010_qpcr`` folder or ``mESC.mat``.

    Returns:
        ``Y`` (429, 48) qPCR values 10.04..38 (28 is the detection limit; not counts);
        ``labels`` 0..7 in the order of ``label_names`` (2-cell ... EPI); ``feature_names`` the
        genes. Licence: vargplvm repository BSD-3; data from Guo et al. (2010) supplement.
    """
    d = _loadmat(_file(path, "mesc_guo2010_qpcr", "mESC.mat"))
    return Dataset(np.asarray(d["Y"], dtype=float), "mesc_guo2010_qpcr",
                   "Single-cell qPCR of 48 genes in mouse embryo cells from the zygote to the "
                   "blastocyst (Guo et al. 2010).",
                   labels=_one_hot_to_labels(d["labels"], "mesc"),
                   label_names=_strings(d["label_names"]),
                   feature_names=_strings(d["gene_names"]))


def load_yale_faces(path: PathLike = None) -> Dataset:
    """Yale faces at 32 x 32 (D. Cai's version): 165 images, 15 subjects x 11, seed 000 Table 1.

    Args:
        path: the ``yale_faces_32x32`` folder or ``Yale_32x32.mat``.

    Returns:
        ``Y`` (165, 1024) intensities 0..255; image i is ``Y[i].reshape(32, 32).T``
        (column-major, ``extras["image_order"] = "F"``); ``labels`` subject id 1..15 as stored.
        Licence: Yale Face Database, research use with citation (Belhumeur et al. 1997).
    """
    d = _loadmat(_file(path, "yale_faces_32x32", "Yale_32x32.mat"))
    return Dataset(np.asarray(d["fea"], dtype=float), "yale_faces_32x32",
                   "Yale face database downsampled to 32x32 pixels (column-major).",
                   labels=np.asarray(d["gnd"], dtype=int).ravel(),
                   extras={"image_shape": (32, 32), "image_order": "F"})


def load_usps(path: PathLike = None, digits: Digits = None) -> Dataset:
    """USPS handwritten digits, the 2007-image test set of GPmat, 16 x 16 pixels.

    Args:
        path: the ``usps_twos_gpmat`` folder or ``usps_test.mat``.
        digits: keep only these digit classes (e.g. ``[0, 1, 2]``); None keeps all.

    Returns:
        ``Y`` (2007, 256) in [-0.9375, 0.9375]; image i is ``Y[i].reshape(16, 16)``
        (row-major); ``labels`` the digit 0..9. Licence: none stated (classic benchmark).
    """
    d = _loadmat(_file(path, "usps_twos_gpmat", "usps_test.mat"))
    Y, labels = np.asarray(d["ALL_DATA"], dtype=float), np.asarray(d["ALL_T"], dtype=int).ravel()
    keep = _digit_mask(labels, digits)
    return Dataset(Y[keep], "usps_test", "USPS zip-code digits (test set), 16x16 greyscale "
                   "scaled to [-1, 1], row-major.", labels=labels[keep],
                   extras={"image_shape": (16, 16)})


def load_usps_twos(path: PathLike = None) -> Dataset:
    """700 binary 8 x 8 images of the digit 2 (GPmat ``twos``; Lawrence 2005).

    Args:
        path: the ``usps_twos_gpmat`` folder or ``twos.mat``.

    Returns:
        ``Y`` (700, 64) in {0, 1} (GPmat's ``lvmLoadData`` maps it to ``2Y - 1``); image i is
        ``Y[i].reshape(8, 8)``: row-major by visual check, although the folder README says
        ``.T``. Licence: none stated; GPmat BSD-3.
    """
    d = _loadmat(_file(path, "usps_twos_gpmat", "twos.mat"))
    return Dataset(np.asarray(d["a"], dtype=float), "usps_twos",
                   "Binary 8x8 images of handwritten twos.", extras={"image_shape": (8, 8)})


def _digit_mask(labels: Int[np.ndarray, " N"], digits: Digits) -> Bool[np.ndarray, " N"]:
    if digits is None:
        return np.ones(len(labels), dtype=bool)
    digits = np.atleast_1d(np.asarray(digits))
    unknown = np.setdiff1d(digits, np.arange(10))
    if unknown.size:
        raise ValueError(f"digits {unknown.tolist()} are not digit classes 0..9")
    return np.isin(labels, digits)


def load_newsgroups(path: PathLike = None, subset: str = "train", n_words: int | None = None
                    ) -> Dataset:
    """20 Newsgroups bag of words (B. Marlin's 1000-word version), stand-in for seed 000's.

    Args:
        path: the ``newsgroups20_pmtk`` folder or ``20news_w1000.mat``.
        subset: ``"train"`` (11256 documents), ``"test"`` (7489) or ``"all"`` (both, stacked).
        n_words: keep the first ``n_words`` columns (the columns are sorted by mutual
            information with the class); None keeps 1000. Documents may then have no words.

    Returns:
        ``Y`` (N, n_words) word counts (dense float64; max 302); ``labels`` 0..19 (newsgroup);
        ``label_names``; ``feature_names`` the first spelling of each stemmed word.
        Licence: none formal (K. Lang / J. Rennie); pmtkdata has no licence file.
    """
    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset={subset!r}; choose 'train', 'test' or 'all'")
    d = _loadmat(_file(path, "newsgroups20_pmtk", "20news_w1000.mat"))
    parts = ("train", "test") if subset == "all" else (subset,)
    W = np.vstack([d[f"{p}W"].toarray() for p in parts])
    C = np.vstack([d[f"{p}C"].toarray() for p in parts])
    if n_words is not None:
        if not 1 <= n_words <= W.shape[1]:
            raise ValueError(f"n_words={n_words} must be between 1 and {W.shape[1]}")
        W = W[:, :n_words]
    vocab = _strings(d["vocab"])[: W.shape[1]]
    return Dataset(W, "newsgroups20", "20 Newsgroups postings as counts of the 1000 words most "
                   "informative of the newsgroup (stemmed).", labels=_one_hot_to_labels(C, "news"),
                   label_names=_strings(d["class_names"]), feature_names=vocab)


def load_hippocampus(path: PathLike = None) -> Dataset:
    """Hippocampal spike counts with the animal's 2-D position (Bayesian-RFLVM repository).

    Args:
        path: the ``hippocampus_spikes_rflvm`` folder or ``hip_data.mat``.

    Returns:
        ``Y`` (858, 30) spike counts per time bin (0..56); ``times`` = bin index;
        ``extras["position"]`` (858, 2) the true position (a W-shaped maze trajectory), the
        latent to compare against. Licence and provenance: none stated upstream.
    """
    d = _loadmat(_file(path, "hippocampus_spikes_rflvm", "hip_data.mat"))
    Y = np.asarray(d["spks"], dtype=float)
    return Dataset(Y, "hippocampus_spikes", "Spike counts of 30 hippocampal neurons in 858 time "
                   "bins while the animal ran a W-shaped track.",
                   times=np.arange(len(Y), dtype=float),
                   extras={"position": np.asarray(d["xpos"], dtype=float)})


def load_montreal_bikes(path: PathLike = None) -> Dataset:
    """Daily cyclist counts on Montreal bike paths in 2012, stand-in for seed 000's "Montreal".

    The folder's ``bikes.csv`` (pandas-cookbook copy of the city's open data) has 310 days
    (1 January to 5 November 2012) and 9 counters, two of them entirely empty
    ('Brébeuf', 'St-Urbain'), which are dropped.  The paper used another extract (the Kaggle
    "montreal-bike-lanes" file, year and stations unstated); see the folder README.

    Args:
        path: the ``montreal_bikes_2012`` folder or ``bikes.csv`` (';'-separated, latin-1,
            dd/mm/YYYY dates).

    Returns:
        ``Y`` (310, 7) daily counts (integers as float64); ``labels`` 0 weekend (Saturday,
        Sunday) / 1 weekday, the pattern of the bridges labels (seed 000's Montreal labels are
        not documented); ``times`` = day index; ``feature_names`` the 7 counters;
        ``extras["dates"]`` the dates as ``datetime.date``. Licence: Montreal open data,
        CC BY 4.0.
    """
    file = _file(path, "montreal_bikes_2012", "bikes.csv")
    with open(file, newline="", encoding="latin-1") as fh:
        rows = list(csv.reader(fh, delimiter=";"))
    header = rows[0]
    body = [r + [""] * (len(header) - len(r)) for r in rows[1:] if r]   # later rows drop ';'
    keep = [j for j in range(1, len(header)) if any(r[j].strip() for r in body)]
    if any(not r[j].strip() for r in body for j in keep):
        raise ValueError(f"{file}: a kept counter has missing days; this loader expects the "
                         f"2012 file with two entirely empty counters")
    dates = tuple(datetime.datetime.strptime(r[0], "%d/%m/%Y").date() for r in body)
    Y = np.array([[float(r[j]) for j in keep] for r in body])
    weekday = np.array([d.weekday() < 5 for d in dates], dtype=int)
    return Dataset(Y, "montreal_bikes_2012", "Daily cyclist counts on 7 Montreal bike-path "
                   "counters, 1 Jan - 5 Nov 2012 (city open data).", labels=weekday,
                   label_names=("weekend", "weekday"), times=np.arange(len(Y), dtype=float),
                   feature_names=tuple(header[j] for j in keep), extras={"dates": dates})


#: Spambase columns 49-54 (char_freq_*), and the last three (capital-run statistics).
_SPAM_WORDS, _SPAM_CHARS = 48, 6


def load_spam(path: PathLike = None) -> Dataset:
    """Spambase (Hopkins et al., UCI; the ESL copy): 4601 e-mails x 57 features, spam or not.

    Stand-in for seed 000's "Spam": the RFLVM reference loader reads an SMS-spam count matrix
    (``spam_small.npy``) that is not available.  Spambase's features are *not* counts: columns
    0-47 are 100 x (occurrences of a word) / (words in the e-mail), columns 48-53 the same for
    6 characters (per character), column 54 the mean length of runs of capitals, and
    columns 55-56 (the longest run, the total number of capitals) are integers.

    Args:
        path: the ``spam_esl`` folder or ``spam.data`` (space-separated, 58 columns, the last
            the class).

    Returns:
        ``Y`` (4601, 57) the features as stored; ``labels`` 1 spam (1813) / 0 not;
        ``extras``: ``n_words`` = 48, ``n_chars`` = 6 (the column groups above).
        Licence: UCI ML Repository, CC BY 4.0.
    """
    data = np.loadtxt(_file(path, "spam_esl", "spam.data"))
    if data.ndim != 2 or data.shape[1] != 58:
        raise ValueError(f"spam.data: expected 58 columns (57 features and the class), got "
                         f"shape {data.shape}")
    return Dataset(data[:, :-1], "spam_esl", "Spambase: word and character frequencies (per "
                   "cent) and capital-run statistics of 4601 e-mails.",
                   labels=data[:, -1].astype(int), label_names=("email", "spam"),
                   extras={"n_words": _SPAM_WORDS, "n_chars": _SPAM_CHARS})


#: PACIFIC exchange-rate files by period (the multi-year ones are saved HTML pages).
_FX_FILES = {"2007": ("fxdata2007.csv",),
             "2003-2013": ("fxdata03-06.csv", "fxdata07-10.csv", "fxdata11-13.csv")}
#: Julian day number of 1 January 1970 (the files' first column is the Julian day).
_JULIAN_1970 = 2440588


def _fx_rows(file: Path) -> tuple[list[str], list[list[str]]]:
    """Header and data rows of one PACIFIC CSV; HTML wrapping and the copyright line skipped."""
    with open(file, newline="", encoding="utf-8") as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.startswith(('"Jul.Day"', *"0123456789"))]
    rows = list(csv.reader(lines))
    if not rows or rows[0][0] != "Jul.Day":
        raise ValueError(f"{file}: no 'Jul.Day' header line; expected a PACIFIC Exchange Rate "
                         f"Service CSV (folder fx_exchange_rates)")
    return rows[0], rows[1:]


def load_fx_exchange_rates(path: PathLike = None, period: str = "2007") -> Dataset:
    """Daily exchange rates against the US dollar (PACIFIC Exchange Rate Service, UBC).

    Stand-in for seed 000's "Forex" (Table 3), whose Kaggle file (22 currencies per dollar,
    2000-2019) is not available.  Columns: 3 precious metals (XAU, XAG, XPT per USD) and 10
    currencies (CAD, EUR, JPY, GBP, CHF, AUD, HKD, NZD, KRW, MXN per USD); one row per trading
    day.  The 2007 file is the one of Alvarez et al. / COGP (folder README); values are as
    stored, unstandardised.

    Args:
        path: the ``fx_exchange_rates`` folder.
        period: ``"2007"`` (251 trading days) or ``"2003-2013"`` (the three multi-year files
            joined; ``fxdata11-13.csv`` starts in January 2010, so its days already read from
            ``fxdata07-10.csv`` are skipped).

    Returns:
        ``Y`` (days, 13), NaN where the file has no value (only metal columns have gaps);
        ``feature_names`` e.g. ``"CAD/USD"``; ``times`` = calendar days since the first row;
        ``extras``: ``dates`` (``datetime.date``), ``currencies`` (indices of the 10 currency
        columns), ``metals`` (indices of the 3 metal columns). Licence: PACIFIC service, free
        for academic and non-commercial use.
    """
    if period not in _FX_FILES:
        raise ValueError(f"period={period!r} is not one of {sorted(_FX_FILES)}")
    folder = default_data_dir() / "fx_exchange_rates" if path is None else Path(path)
    header, body = None, []
    for name in _FX_FILES[period]:
        head, rows = _fx_rows(_file(folder, "fx_exchange_rates", name))
        if header is not None and head != header:
            raise ValueError(f"{name}: columns {head} differ from {header}")
        last = int(body[-1][0]) if body else -1
        header, body = head, body + [r for r in rows if int(r[0]) > last]   # 11-13 starts in 2010
    julian = np.array([int(r[0]) for r in body])
    if np.any(np.diff(julian) <= 0):
        raise ValueError(f"fx_exchange_rates {period}: days are not strictly increasing")
    Y = np.array([[float(v) if v.strip() else np.nan for v in r[3:]] for r in body])
    names = tuple(header[3:])
    metals = tuple(j for j, n in enumerate(names) if n[:3] in ("XAU", "XAG", "XPT"))
    dates = tuple(datetime.date.fromordinal(datetime.date(1970, 1, 1).toordinal() + j -
                                            _JULIAN_1970) for j in julian)
    return Dataset(Y, "fx_exchange_rates", f"Daily exchange rates per US dollar of 10 currencies "
                   f"and 3 precious metals, {period} (PACIFIC Exchange Rate Service).",
                   times=(julian - julian[0]).astype(float), feature_names=names,
                   extras={"dates": dates, "metals": metals,
                           "currencies": tuple(j for j in range(len(names)) if j not in metals)})


def load_digits(digits: Digits = None) -> Dataset:
    """scikit-learn's bundled 8 x 8 handwritten digits (UCI optdigits test set); no path needed.

    Args:
        digits: keep only these digit classes (e.g. ``[0, 1, 2]``); None keeps all ten.

    Returns:
        ``Y`` (1797, 64) (fewer rows with ``digits``), integer pixel counts 0..16, image i is
        ``Y[i].reshape(8, 8)``; ``labels`` the digit. Licence: CC BY 4.0 (UCI).
    """
    from sklearn.datasets import load_digits as _sk_load_digits

    bunch = _sk_load_digits()
    keep = _digit_mask(bunch.target, digits)
    return Dataset(np.asarray(bunch.data, dtype=float)[keep], "digits",
                   "UCI optical digits, 8x8 images of counts 0-16 (scikit-learn bundle).",
                   labels=np.asarray(bunch.target)[keep], extras={"image_shape": (8, 8)})
