"""The GPLVM family's functional core (DESIGN.md, "The GPLVM family, as it grows").

Estimators choose their pieces here instead of copying them:

* :mod:`.latent` — q(X) under the iid prior or the dynamical (GP over time) prior;
* :mod:`.bound` — the collapsed bound of an unconstrained parameter pytree, given a
  :class:`~.bound.Problem` (data, column groups and column weights, latent prior, kernel
  structure, Ψ-statistic rule, linear-algebra route, jitter);
* :mod:`.route` — the linear-algebra route: dense (:mod:`.route`), Kronecker
  (:mod:`.kron_route`), or the rows split over the devices of a mesh (:mod:`.sharded_route`,
  with the sharded bound's sums in :mod:`.sharded_bound` and its data in :mod:`.sharded_data`);
* :mod:`.fitted` — the fitted-model value and prediction, expectation and sampling from it;
* :mod:`.new_rows` — latents of new rows, each row on its own, with the model fixed;
* :mod:`.init` — initial values (PCA latents, k-means inducing inputs, q(X) variances, jitter);
* :mod:`.collapsed_run`, :mod:`.jitter_ladder` — the collapsed bound's run and its jitter policy;
* :mod:`.variants` — what a model adds to the core: the DP-GP-LVM (:mod:`.variants.dp`), the
  stochastic variational GPLVM (:mod:`.variants.svi`), the structured GPLVM
  (:mod:`.variants.structured`).
"""

from gplvm.models.gplvm_family.bound import Problem, bound_and_parts, negative_bound
from gplvm.models.gplvm_family.fitted import FittedGPLVM, fitted_from
from gplvm.models.gplvm_family.latent import DynamicalLatent, IidLatent
from gplvm.models.gplvm_family.new_rows import infer_latents
from gplvm.models.gplvm_family.route import DenseRoute

__all__ = ["DenseRoute", "DynamicalLatent", "FittedGPLVM", "IidLatent", "Problem",
           "bound_and_parts", "fitted_from", "infer_latents", "negative_bound"]
