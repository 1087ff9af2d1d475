"""gplvm.plot (issue 15, item 2): each function reads only a model's common attributes, so the
models here are stand-ins holding those attributes with known values (variational: X_mean_,
X_var_; sampled: X_samples_, a (chains, sweeps) history_, burn_in; grouped columns:
assignments_, atoms_, one relevance_ row per group), and a real RFLVM fit saved in
tests/data/legacy_v1.  Plots are checked by their properties (points, labels, colours, bar
heights, images), never by stored pixels.  Real fitted Bayesian GPLVMs are drawn by
tests/cli/test_cli.py and, on oil flow with its three classes, tests/test_anndata.py."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import warnings  # noqa: E402

from _paths import LEGACY  # noqa: E402

import arviz  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import EllipseCollection  # noqa: E402

import gplvm  # noqa: E402
from gplvm import plot  # noqa: E402

RNG = np.random.default_rng(0)
N, Q = 12, 3


class StandIn:
    """A fitted model as far as the plots can tell: the attributes given, and get_params."""

    def __init__(self, params=None, **attributes):
        self._params = params or {}
        self.__dict__.update(attributes)

    def get_params(self, deep=False):
        return dict(self._params)


def variational():
    return StandIn(X_mean_=RNG.normal(size=(N, Q)), X_var_=RNG.uniform(0.01, 0.2, (N, Q)),
                   relevance_=np.array([0.2, 3.0, 1.0]), history_=np.cumsum(RNG.random(40)))


def _means(ax):
    return [c for c in ax.collections if c.get_gid() == "means"]


def _outside(legend, ax) -> bool:
    """Whether the drawn legend lies wholly to the right of the Axes' data area."""
    ax.figure.draw_without_rendering()
    return legend.get_window_extent().x0 >= ax.get_window_extent().x1


def test_latent_variational_two_most_relevant_dims_labels_and_ellipses():
    model = variational()
    labels = np.array(["b", "a", "c"] * 4)
    ax = plot.latent(model, labels=labels, label_name="cultivar")
    # relevance_ [0.2, 3.0, 1.0]: dimension 1 on x, then 2; each axis says why
    assert ax.get_xlabel() == "latent dimension 1\nmost relevant, 1/ℓ² = 3"
    assert ax.get_ylabel() == "latent dimension 2\n2nd most relevant, 1/ℓ² = 1"
    assert "coloured by cultivar" in ax.get_title()
    legend = ax.get_legend()
    assert legend.get_title().get_text() == "cultivar" and _outside(legend, ax)
    assert [t.get_text() for t in legend.get_texts()] == [
        "a", "b", "c", "shaded ellipses:\n±2 sd of q(x_n)"]
    means = _means(ax)
    for name, coll in zip("abc", means):
        np.testing.assert_array_equal(coll.get_offsets(), model.X_mean_[labels == name][:, [1, 2]])
    colours = {tuple(c.get_facecolor()[0]) for c in means}
    assert len(colours) == 3                          # one colour per label
    ellipses = [c for c in ax.collections if isinstance(c, EllipseCollection)]
    assert len(ellipses) == 1 and ellipses[0].get_gid() == "uncertainty"
    np.testing.assert_array_equal(ellipses[0].get_offsets(), model.X_mean_[:, [1, 2]])
    np.testing.assert_array_equal(ellipses[0].get_widths(), 2 * 2 * np.sqrt(model.X_var_[:, 1]))


def test_latent_sampled_model_draws_a_cloud_of_posterior_draws():
    chains, draws = 2, 30
    samples = RNG.normal(size=(chains, draws, N, 2))
    model = StandIn(X_mean_=samples.mean((0, 1)), X_var_=samples.var((0, 1)),
                    X_samples_=samples, relevance_=np.array([1.0, 2.0]))
    ax = plot.latent(model, dims=(0, 1), n_draws=20)
    cloud = [c for c in ax.collections if c.get_gid() == "posterior draws"]
    assert len(cloud) == 1
    expected = samples[:, -20:].reshape(-1, N, 2).reshape(-1, 2)
    np.testing.assert_array_equal(cloud[0].get_offsets(), expected)
    assert not any(isinstance(c, EllipseCollection) for c in ax.collections)
    assert sum(len(c.get_offsets()) for c in _means(ax)) == N
    assert ax.get_legend().get_texts()[-1].get_text() == (
        "faint dots: last 20 draws\nof each of 2 chains\nper row (aligned frame)")


def test_latent_of_a_real_rflvm_fit_draws_its_posterior_draws(tmp_path):
    """A Poisson RFLVM sampled by MCMC (1 chain, 8 kept draws of 30 rows; make_files.py there):
    the cloud holds the last n_draws aligned draws of every row, means one point per row."""
    model = gplvm.load(LEGACY / "rflvm.gplvm")
    samples = np.asarray(model.X_samples_)
    chains, draws, n, _ = samples.shape
    labels = np.arange(n) % 3
    order = list(np.argsort(-model.relevance_))     # by default the more relevant on x
    for n_draws, kept, dims in ((5, 5, [1, 0]), (100, draws, None)):
        ax = plot.latent(model, labels=labels, dims=dims, n_draws=n_draws)
        cloud = [c for c in ax.collections if c.get_gid() == "posterior draws"][0]
        expected = samples[:, draws - kept:][..., dims or order].reshape(-1, 2)
        np.testing.assert_array_equal(cloud.get_offsets(), expected)
        assert len(cloud.get_offsets()) == chains * kept * n
    assert not any(isinstance(c, EllipseCollection) for c in ax.collections)
    means = _means(ax)
    assert sum(len(c.get_offsets()) for c in means) == n
    assert len({tuple(c.get_facecolor()[0]) for c in means}) == 3
    # the RFLVM's relevance is its mean squared frequency, and the axes say so
    assert ax.get_xlabel() == (f"latent dimension {order[0]}\nmost relevant, "
                               f"E[ω²] = {model.relevance_[order[0]]:.3g}")
    assert ax.get_ylabel().startswith(f"latent dimension {order[1]}\n2nd most relevant")
    assert plot.relevance(model).get_ylabel().startswith("relevance E[ω²]")
    ax.figure.savefig(tmp_path / "rflvm.png")
    assert (tmp_path / "rflvm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_touch_no_pyplot_state_and_write_without_display(tmp_path):
    before = plt.get_fignums()
    model = variational()
    axes = [plot.latent(model), plot.relevance(model), plot.trace(model)]
    assert plt.get_fignums() == before
    for k, ax in enumerate(axes):
        ax.figure.savefig(tmp_path / f"{k}.png")
        assert (tmp_path / f"{k}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_latent_rejects_bad_labels_and_dims():
    model = variational()
    with pytest.raises(ValueError, match="one label per training row"):
        plot.latent(model, labels=np.zeros(N + 1))
    with pytest.raises(ValueError, match="dims"):
        plot.latent(model, dims=(0, Q))


def test_relevance_bars_are_the_relevances_one_group_per_row():
    model = variational()
    ax = plot.relevance(model)
    np.testing.assert_array_equal([p.get_height() for p in ax.patches], model.relevance_)
    assert ax.get_ylabel().startswith("relevance 1/ℓ²")       # as the demo's axis says
    grouped = StandIn(relevance_=np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 4.0]]))
    ax = plot.relevance(grouped)
    np.testing.assert_array_equal([p.get_height() for p in ax.patches],
                                  grouped.relevance_.ravel())
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["group 0", "group 1"]


def test_trace_bound_per_iteration_on_a_range_that_shows_the_late_iterations():
    """40 iterations, the first far below: the y-range fits iterations 5-40 (the last 90%),
    the inset shows them all."""
    model = variational()
    model.history_[0] = -1e4
    ax = plot.trace(model)
    lines = ax.get_lines()
    assert len(lines) == 1
    np.testing.assert_array_equal(lines[0].get_ydata(), model.history_)
    late = model.history_[4:]
    low, high = ax.get_ylim()
    assert high - low == pytest.approx(1.1 * np.ptp(late)) and low < late.min()
    (inset,) = ax.child_axes
    np.testing.assert_array_equal(inset.get_lines()[0].get_ydata(), model.history_)
    assert "iterations 5–40" in ax.get_title()


def test_trace_per_chain_with_arviz_split_rhat_of_the_kept_sweeps():
    history = RNG.normal(size=(3, 60)) + np.array([[0.0], [0.3], [0.6]])
    model = StandIn(params={"burn_in": 20}, history_=history)
    ax = plot.trace(model)
    chains = [line for line in ax.get_lines() if line.get_label().startswith("chain")]
    assert len(chains) == 3
    for line, chain in zip(chains, history):
        np.testing.assert_array_equal(line.get_ydata(), chain)
    rhat = float(arviz.rhat(history[:, 20:], method="split"))
    assert f"split R-hat {rhat:.3f}" in ax.get_title()


class Imputer(StandIn):
    """impute: column means of the observed entries; predict: variance 0.25 everywhere."""

    def impute(self, Y):
        return np.where(np.isnan(Y), np.nanmean(Y, axis=0), Y)

    def predict(self, X, return_var=False):
        mean = np.zeros((len(X), 4))
        return (mean, np.full((len(X), 4), 0.25)) if return_var else mean


def test_imputation_z_scores_of_named_columns_with_two_sd_bars():
    """Each value is a z-score of its column's observed entries; bars ± 2 sd, sd = 0.5 in
    units of the column; the columns named by feature_names_in_."""
    Y = RNG.normal(size=(10, 4)) * np.array([1.0, 10.0, 100.0, 1000.0])
    Y[[0, 3, 3, 7], [1, 0, 2, 3]] = np.nan
    model = Imputer(feature_names_in_=np.array(["a", "b", "c", "d"], dtype=object))
    mean, sd = np.nanmean(Y, axis=0), np.nanstd(Y, axis=0, ddof=1)
    cols = np.nonzero(np.isnan(Y))[1]
    for truth in (None, RNG.normal(size=(10, 4))):
        ax = plot.imputation(model, Y, X=np.zeros((10, 2)), truth=truth)
        points = [line for line in ax.get_lines() if line.get_gid() == "imputed"][0]
        imputed = points.get_xdata() if truth is None else points.get_ydata()
        np.testing.assert_allclose(imputed, ((model.impute(Y) - mean) / sd)[np.isnan(Y)])
        bars = [c for c in ax.collections if c.get_gid() == "intervals"][0]
        axis = 0 if truth is None else 1
        lengths = [seg[1, axis] - seg[0, axis] for seg in bars.get_segments()]
        np.testing.assert_allclose(lengths, 4 * 0.5 / sd[cols])
        if truth is None:
            assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c", "d"]
            np.testing.assert_array_equal(np.floor(points.get_ydata()), cols)
        else:
            np.testing.assert_allclose(points.get_xdata(), ((truth - mean) / sd)[np.isnan(Y)])
        assert _outside(ax.get_legend(), ax)
    ax = plot.imputation(model, Y, X=np.zeros((10, 2)), filled=np.zeros_like(Y))  # no impute
    points = [line for line in ax.get_lines() if line.get_gid() == "imputed"][0]
    np.testing.assert_allclose(points.get_xdata(), (-mean / sd)[cols])
    with pytest.raises(ValueError, match="no missing"):
        plot.imputation(model, np.ones((3, 4)))


def grouped_model():
    phi = np.array([[0.9, 0.0, 0.1], [0.2, 0.0, 0.8], [0.5, 0.0, 0.5], [0.0, 0.0, 1.0]])
    relevance = np.array([[4.0, 1.0], [0.5, 2.0]])     # rows: used atoms 2 then 0
    return StandIn(assignments_=phi, atoms_=np.array([2, 0]), relevance_=relevance)


def test_factors_and_assignments_images():
    model = grouped_model()
    image = plot.assignments(model).get_images()[0].get_array()
    np.testing.assert_array_equal(image, model.assignments_[:, [2, 0]])
    expected = np.empty((4, 2))
    for d in range(4):
        for q in range(2):
            expected[d, q] = (model.assignments_[d, 2] * 4.0 + model.assignments_[d, 0] * 0.5
                              if q == 0 else
                              model.assignments_[d, 2] * 1.0 + model.assignments_[d, 0] * 2.0)
        expected[d] /= expected[d].max()
    np.testing.assert_allclose(plot.factors(model).get_images()[0].get_array(), expected,
                               rtol=1e-15)
    with pytest.raises(ValueError, match="assignments_"):
        plot.factors(variational())
    # latent plots rank dimensions by relevance averaged over columns: expected columns per
    # used group 2.4 (atom 2) and 1.6 (atom 0), so (2.4·4 + 1.6·0.5)/4 = 2.6, (2.4 + 3.2)/4 = 1.4
    model.X_mean_ = RNG.normal(size=(5, 2))
    ax = plot.latent(model, dims=(1, 0))
    assert ax.get_xlabel().endswith("\n2nd most relevant, 1/ℓ² (mean over columns) = 1.4")
    assert ax.get_ylabel().endswith("\nmost relevant, 1/ℓ² (mean over columns) = 2.6")


def test_imputed_images_show_the_rows_with_most_missing_pixels_observed_and_imputed():
    """Images are drawn as pictures (issue 32, item 4): the rows with the most missing pixels,
    observed above with exactly the NaN pixels masked, the given imputation below."""
    rng = np.random.default_rng(0)
    Y = rng.uniform(size=(5, 4, 3))
    Y[3, :2, :] = np.nan                 # 6 missing: the most
    Y[1, 0, 0] = np.nan                  # 1 missing
    filled = np.where(np.isnan(Y), -1.0, Y)
    axes = plot.imputed_images(Y, filled, n_images=4)
    assert axes.shape == (2, 2)          # only two rows have a missing pixel
    top, bottom = axes[0, 0].images[0].get_array(), axes[1, 0].images[0].get_array()
    np.testing.assert_array_equal(np.ma.getmaskarray(top), np.isnan(Y[3]))
    np.testing.assert_array_equal(np.asarray(bottom), filled[3])
    assert "row 3" in axes[0, 0].get_title() and "row 1" in axes[0, 1].get_title()
    with pytest.raises(ValueError, match="no missing"):
        plot.imputed_images(np.ones((2, 3, 3)), np.ones((2, 3, 3)))


def test_column_relevance_of_a_column_in_no_group_is_zero_without_a_warning():
    """A DP-GP-LVM column kept out of the fit (issue 32) follows no group (its assignment row
    is 0): its relevance row is 0, not 0/0."""
    from types import SimpleNamespace

    from gplvm.plot._columns import column_relevance

    model = SimpleNamespace(assignments_=np.array([[1.0, 0.0], [0.0, 0.0], [0.25, 0.75]]),
                            relevance_=np.array([[2.0, 1.0], [1.0, 4.0]]),
                            atoms_=np.array([0, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = column_relevance(model)
    np.testing.assert_allclose(got, [[1.0, 0.5], [0.0, 0.0], [1.25 / 3.25, 1.0]])


def test_dp_factorisation_plot_shades_a_column_in_no_group_zero():
    """``DPGPLVM.plot_factorisation`` shades by the same relevance as ``plot.factors``: a
    column kept out of the fit is a row of zeros, not NaN (its own copy divided 0/0)."""
    from types import SimpleNamespace

    model = SimpleNamespace(assignments_=np.array([[1.0, 0.0], [0.0, 0.0]]),
                            relevance_=np.array([[2.0, 1.0], [1.0, 4.0]]),
                            atoms_=np.array([0, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = gplvm.DPGPLVM.plot_factorisation(model)
    np.testing.assert_allclose(ax.get_images()[0].get_array(), [[1.0, 0.5], [0.0, 0.0]])
    plt.close("all")
