"""Loaders: each real data set has the shapes its README states (shared_data), path handling,
error messages, and the pickle-free reading of ``bridges.npy``."""

import os
import pickle

import numpy as np
import pytest

from gplvm.data import loaders
from gplvm.data.loaders import DATA_DIR_ENV, default_data_dir

shared = pytest.mark.shared_data


def test_default_data_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert default_data_dir() == tmp_path
    monkeypatch.delenv(DATA_DIR_ENV)
    assert default_data_dir().parts[-2:] == ("shared", "data")


def test_missing_file_names_the_path_and_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=DATA_DIR_ENV) as err:
        loaders.load_oil_flow()
    assert str(tmp_path / "oil_flow" / "DataTrn.txt") in str(err.value)


def test_bridges_npy_is_read_without_unpickling_arbitrary_objects(tmp_path):
    Y = np.arange(12).reshape(6, 2)
    np.save(tmp_path / "bridges.npy", np.array({"Y": Y, "labels": np.array([0, 1] * 3)}),
            allow_pickle=True)
    d = loaders.load_bridges(tmp_path)
    np.testing.assert_array_equal(d.Y, Y)
    assert d.Y.dtype == np.float64 and d.labels.tolist() == [0, 1] * 3

    class Evil:
        def __reduce__(self):
            return (os.getcwd, ())
    np.save(tmp_path / "evil.npy", np.array({"Y": Evil()}), allow_pickle=True)
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        loaders.load_bridges(tmp_path / "evil.npy")


def test_load_digits_is_bundled():
    d = loaders.load_digits()
    assert d.Y.shape == (1797, 64) and d.Y.min() == 0 and d.Y.max() == 16
    d = loaders.load_digits(digits=[0, 1])
    assert set(np.unique(d.labels)) == {0, 1} and len(d.Y) == len(d.labels)
    with pytest.raises(ValueError, match="digit"):
        loaders.load_digits(digits=[11])


@shared
def test_oil_flow():
    d = loaders.load_oil_flow()
    assert d.Y.shape == (1000, 12) and d.extras["fractions"].shape == (1000, 2)
    np.testing.assert_array_equal(np.bincount(d.labels), [343, 316, 341])
    assert loaders.load_oil_flow(subset="test").Y.shape == (1000, 12)
    with pytest.raises(ValueError, match="subset"):
        loaders.load_oil_flow(subset="dev")


@shared
def test_frey_faces():
    d = loaders.load_frey_faces()
    assert d.Y.shape == (1965, 560) and d.Y.min() == 8 and d.Y.max() == 238


@shared
def test_cmu_mocap_walkjog():
    d = loaders.load_cmu_mocap_walkjog()
    assert d.Y.shape == (2644, 62) and d.extras["Y_test"].shape == (169, 62)
    trials = [*range(1, 18), *range(19, 27), 28, *range(30, 35)]
    np.testing.assert_array_equal(np.unique(d.groups), trials)
    np.testing.assert_array_equal(np.unique(d.extras["groups_test"]), [18, 29])
    assert d.times[0] == 0 and d.times[1] == pytest.approx(1 / 30)
    assert set(d.groups[d.labels == 1]) == {17, *range(19, 27)}


@shared
def test_congress109():
    d = loaders.load_congress109()
    assert d.Y.shape == (529, 1000) and len(d.feature_names) == 1000
    assert d.Y.min() == 0 and d.Y.max() == 631 and np.all(d.Y == np.round(d.Y))
    assert np.sum(d.labels == 0) == 285  # Republicans; D 242 + I 2 are label 1
    assert list(d.extras["names"]) == sorted(d.extras["names"])


@shared
def test_bridges():
    d = loaders.load_bridges()
    assert d.Y.shape == (214, 4) and d.Y.min() == 151 and d.Y.max() == 8873
    assert d.labels.shape == (214,) and set(np.unique(d.labels)) == {0, 1}


@shared
def test_mesc():
    d = loaders.load_mesc()
    assert d.Y.shape == (429, 48) and len(d.feature_names) == 48
    np.testing.assert_array_equal(np.bincount(d.labels), [19, 23, 44, 75, 156, 49, 45, 18])
    assert d.label_names[0] == "2-cell stage" and d.label_names[-1] == "EPI"


@shared
def test_yale_faces():
    d = loaders.load_yale_faces()
    assert d.Y.shape == (165, 1024)
    np.testing.assert_array_equal(np.bincount(d.labels)[1:], [11] * 15)


@shared
def test_usps():
    d = loaders.load_usps()
    assert d.Y.shape == (2007, 256) and d.Y.min() == -0.9375 and d.Y.max() == 0.9375
    assert set(np.unique(d.labels)) == set(range(10))
    assert set(np.unique(loaders.load_usps(digits=[3]).labels)) == {3}
    twos = loaders.load_usps_twos()
    assert twos.Y.shape == (700, 64) and set(np.unique(twos.Y)) == {0.0, 1.0}


@shared
def test_newsgroups():
    d = loaders.load_newsgroups(n_words=100)
    assert d.Y.shape == (11256, 100) and len(d.feature_names) == 100
    assert d.Y.max() <= 302 and np.all(d.Y == np.round(d.Y))
    assert len(d.label_names) == 20 and set(np.unique(d.labels)) == set(range(20))
    assert loaders.load_newsgroups(subset="test").Y.shape == (7489, 1000)


@shared
def test_hippocampus():
    d = loaders.load_hippocampus()
    assert d.Y.shape == (858, 30) and d.extras["position"].shape == (858, 2)
    assert d.Y.min() == 0 and np.all(d.Y == np.round(d.Y))


@shared
def test_a_file_path_is_accepted_in_place_of_the_folder():
    path = default_data_dir() / "mesc_guo2010_qpcr" / "mESC.mat"
    assert loaders.load_mesc(path).Y.shape == (429, 48)


@shared
def test_montreal_bikes():
    import datetime
    d = loaders.load_montreal_bikes()
    # README: 310 days x 9 counters, two entirely empty ('Brébeuf', 'St-Urbain') -> 7 kept
    assert d.Y.shape == (310, 7) and d.Y.dtype == np.float64
    assert d.Y.min() >= 0 and np.all(d.Y == np.round(d.Y))          # counts stay counts
    assert not any("beuf" in n or "Urbain" in n for n in d.feature_names)
    days = [datetime.date(2012, 1, 1) + datetime.timedelta(k) for k in range(310)]
    assert list(d.extras["dates"]) == days                          # consecutive 2012 days
    weekend = [day.weekday() >= 5 for day in days]                  # the calendar, not the file
    np.testing.assert_array_equal(d.labels, 1 - np.array(weekend, dtype=int))


@shared
def test_spam():
    d = loaders.load_spam()
    # README: 4601 e-mails x 57 features + label; 48 word %, 6 char %, 3 capital-run statistics
    assert d.Y.shape == (4601, 57) and d.Y.dtype == np.float64
    assert d.extras["n_words"] + d.extras["n_chars"] + 3 == 57
    assert np.all(d.Y[:, :54] <= 100) and d.Y.min() >= 0            # percentages
    assert np.all(d.Y[:, 55:] == np.round(d.Y[:, 55:]))             # run length, total: integers
    assert np.sum(d.labels == 1) == 1813 and set(np.unique(d.labels)) == {0, 1}  # UCI: 1813 spam
    ymat = loaders._loadmat(default_data_dir() / "spam_esl" / "spamData.mat")
    stacked = np.vstack([ymat["Xtrain"], ymat["Xtest"]])            # the ESL split, same rows

    def rows_sorted(A):
        return A[np.lexsort(A.T[::-1])]
    np.testing.assert_array_equal(rows_sorted(stacked), rows_sorted(d.Y))


@shared
def test_fx_exchange_rates():
    import csv
    import datetime
    d = loaders.load_fx_exchange_rates()
    # README: 2007, about 250 trading days, 3 metals + 10 currencies per USD
    assert d.Y.shape == (251, 13) and d.Y.dtype == np.float64
    assert d.feature_names[:3] == ("XAU/USD", "XAG/USD", "XPT/USD")
    assert len(d.extras["currencies"]) == 10 and d.extras["metals"] == (0, 1, 2)
    assert not np.isnan(d.Y[:, 3:]).any() and np.isnan(d.Y[:, :3]).any()   # gaps: metals only
    with open(default_data_dir() / "fx_exchange_rates" / "fxdata2007.csv") as fh:
        text = [r[1] for r in csv.reader(fh)][1:]
    dates = [datetime.datetime.strptime(t, "%Y/%m/%d").date() for t in text]
    assert list(d.extras["dates"]) == dates          # the loader reads Julian days, not these
    assert d.times[0] == 0 and d.times[-1] == (dates[-1] - dates[0]).days
    assert all(x.weekday() < 5 for x in dates)       # trading days
    assert 100 < np.median(d.Y[:, 5]) < 130          # JPY per USD in 2007
    years = loaders.load_fx_exchange_rates(period="2003-2013")
    assert years.extras["dates"][0] == datetime.date(2003, 1, 2)
    assert years.extras["dates"][-1] == datetime.date(2013, 12, 31)
    assert np.all(np.diff(years.times) > 0)          # the 2010 overlap read once
    in_2007 = [k for k, x in enumerate(years.extras["dates"]) if x.year == 2007]
    np.testing.assert_allclose(years.Y[in_2007], d.Y, rtol=1e-3)   # same rates, other rounding
    with pytest.raises(ValueError, match="period"):
        loaders.load_fx_exchange_rates(period="2020")
