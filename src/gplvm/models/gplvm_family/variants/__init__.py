"""The GPLVM family's variants (issue 33, "the GPLVM family as a core plus variants/"): what a
model adds to the core (:mod:`gplvm.models.gplvm_family`: latent priors, the bound, the dense
and Kronecker routes, the fitted value, new rows, the collapsed run and its jitter ladder).

* :mod:`.dp` — the DP-GP-LVM (seed 001): atoms, the DP's coordinate updates, its fit by
  sweeps and merges, its fitted value, starts and attributes, the §G missing-block score;
* :mod:`.svi` — the stochastic variational Bayesian GPLVM (Hensman et al. 2013): its bound,
  start, minibatch run and the estimator's side of it;
* :mod:`.structured` — the structured GPLVM on images (seed 003): image layouts and checks,
  the fitted value's predictions at any grid, the image verbs.
"""
