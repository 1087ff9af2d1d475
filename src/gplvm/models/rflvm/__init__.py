"""The random-feature latent variable model (seed 000, §3): the estimator and its functional
core, one public package.

The estimator :class:`gplvm.RFLVM` (:mod:`.estimator`, with its run in :mod:`.run` and its
verbs after fitting in :mod:`.verbs`, mixins) is a thin layer over these modules:

* :mod:`.spec` — the static model description, the data container and the per-chain state;
* :mod:`.features` — the design matrix [φ_W(X), 1] (eq. 18 plus a per-column intercept);
* :mod:`.weights` — updates of the weights β (Gaussian collapsed and conjugate draws, Pólya-gamma
  Gibbs for the logistic family) and of the noise parameters; :mod:`.weights_ess` — elliptical
  slice on β (Poisson, negative binomial, and any likelihood the library does not ship);
* :mod:`.loglik` — the log-likelihood in ψ, from the likelihood objects of
  :mod:`gplvm.likelihoods`: no module here branches on a likelihood's name
  (docs/contract.md, "Adding a likelihood");
* :mod:`.dispersion` — the negative binomial's dispersion (CRT and mean-preserving moves);
* :mod:`.frequencies` — Metropolis–Hastings on the frequencies W with the prior as proposal (eq. 22);
* :mod:`.latents` — elliptical slice on the rows of X (static prior) or the columns of X (GP prior
  over time, §3.1);
* :mod:`.sweep` — one Gibbs sweep, composing the above;
* :mod:`.predict` — posterior-predictive quantities from retained draws, new-row latents;
* :mod:`.init` — the prepared data and the chains' starting states;
* :mod:`.checks` — validation of the estimator's inputs;
* :mod:`.inference_data` — the ArviZ export;
* :mod:`.legacy` — attributes of files saved by earlier versions.

The transition kernels themselves (elliptical slice, Metropolis–Hastings) are the ``init`` /
``step`` kernels of :mod:`gplvm.inference.mcmc`.
"""

from gplvm.models.rflvm.estimator import RFLVM

__all__ = ["RFLVM"]
