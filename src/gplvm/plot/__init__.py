"""Plots of a fitted model (issue 15, item 2): each function takes a fitted estimator and returns
matplotlib Axes, drawing on the ``ax`` given or on a new :class:`matplotlib.figure.Figure` that
is not registered with pyplot (no global state is touched; ``ax.figure.savefig(path)`` writes it
without a display).

Every model plugs in by its common attributes (``../shared/API.md``): ``X_mean_`` with
``X_var_`` (variational) or ``X_samples_`` (MCMC), ``relevance_``, ``history_``, ``impute`` and
``predict``; the column views read ``assignments_`` where a model has one.

* :func:`latent` — latent means, coloured by labels, with their uncertainty.
* :func:`relevance` — the relevance of each latent dimension.
* :func:`trace` — the bound per iteration, or the log-likelihood per sweep and chain.
* :func:`imputation` — imputed entries with predictive intervals, as z-scores of their
  named columns; :func:`imputed_images` — for images, observed and imputed pictures.
* :func:`factors`, :func:`assignments` — column × latent-dimension weights, column → group;
  :func:`column_relevance` — the (D, Q) array that :func:`factors` shades (also the DP-GP-LVM's
  ``plot_factorisation``), for reuse without a figure.
"""

from gplvm.plot._columns import assignments, column_relevance, factors
from gplvm.plot._diagnostics import relevance, trace
from gplvm.plot._images import imputed_images
from gplvm.plot._imputation import imputation
from gplvm.plot._latent import latent, most_relevant

__all__ = ["assignments", "column_relevance", "factors", "imputation", "imputed_images", "latent",
           "most_relevant", "relevance", "trace"]
