"""The DP-GP-LVM's fitted attributes, read from its fitted value (``fitted_``, a
:class:`~.dp_fitted.FittedDPGPLVM`): the assignments of columns to atoms, the used atoms and
the column groups they make, the atoms' kernels and ARD relevance, the latent dimensions some
used atom keeps, and each column's noise variance (seed 001 §§C–D; the estimator's docstring,
``DPGPLVM``, lists them).  A mixin, so that the estimator module keeps to the estimator."""

from __future__ import annotations

import numpy as np

from gplvm.models._common import check_is_fitted
from gplvm.models.gplvm_family import columns
from gplvm.models.gplvm_family.variants.dp.atoms import atom
from gplvm.models.gplvm_family.estimator import active_dimensions, ard_relevance


class DPFittedAttributes:
    """``assignments_``, ``atoms_``, ``column_groups_``, ``n_column_groups_``, ``kernels_``,
    ``kernel_``, ``relevance_``, ``active_components_`` and ``noise_var_`` of a fitted
    ``DPGPLVM`` (it has ``fitted_``, ``truncation`` and ``n_components_``)."""

    @property
    def assignments_(self):
        """(D, T) φ: the probability that column d follows atom t (a row of zeros for a column
        kept out of the fit: it follows no atom)."""
        check_is_fitted(self, "fitted_")
        return np.asarray(self.fitted_.phi)

    @property
    def atoms_(self):
        """Indices of the used atoms, by decreasing mass Σ_d φ_dt."""
        phi = self.assignments_
        fitted = columns.kept_columns(self.fitted_.Y_std)
        used = np.unique(np.argmax(phi[fitted], axis=1))
        return used[np.argsort(-phi.sum(0)[used], kind="stable")]

    @property
    def n_column_groups_(self):
        return int(len(self.atoms_))

    @property
    def column_groups_(self):
        """(D,) each column's most probable atom, as an index into ``atoms_`` (−1 for a column
        kept out of the fit)."""
        order = np.full(self.truncation, -1, dtype=int)
        order[self.atoms_] = np.arange(self.n_column_groups_)
        groups = order[np.argmax(self.assignments_, axis=1)]
        return np.where(columns.kept_columns(self.fitted_.Y_std), groups, -1)

    @property
    def kernels_(self):
        check_is_fitted(self, "fitted_")
        return tuple(atom(self.fitted_.kernels, t) for t in range(self.truncation))

    @property
    def kernel_(self):
        """The kernels of the used atoms, in the order of ``atoms_``."""
        kernels = self.kernels_
        return tuple(kernels[t] for t in self.atoms_)

    @property
    def relevance_(self):
        """(n_column_groups_, Q) ARD weights (inverse squared length-scales) of the used atoms."""
        return np.array([ard_relevance(kernel, self.n_components_) for kernel in self.kernel_])

    @property
    def active_components_(self):
        """Indices of the latent dimensions some used atom keeps (relevance at least 10⁻³ of
        that atom's largest, :func:`~.estimator.active_dimensions`), by decreasing largest
        relevance over the used atoms."""
        relevance = self.relevance_
        active = np.unique(np.concatenate([active_dimensions(r) for r in relevance]))
        return active[np.argsort(-relevance.max(0)[active], kind="stable")]

    @property
    def noise_var_(self):
        """(D,) Σ_t φ_dt σ²_t in original units."""
        check_is_fitted(self, "fitted_")
        noise = np.asarray(self.fitted_.maps.noise_var)
        return self.assignments_ @ noise * self.fitted_.Y_std**2
