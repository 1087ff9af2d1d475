"""The stochastic variational variant of the Bayesian GPLVM (Hensman, Fusi & Lawrence 2013); see
:mod:`gplvm.models.gplvm_family.variants`."""
