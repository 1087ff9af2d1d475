"""MCMC: pure transition kernels, one chain driver, alignment and diagnostics (seed 000, §3.1).

* :mod:`.elliptical_slice` — batched elliptical slice sampling over independent blocks;
* :func:`metropolis_hastings_prior` — MH accept/reject with the prior as proposal (eq. 22);
* :mod:`.driver` — :func:`run_chains`, the only loop over sweeps (``lax.scan``) and chains
  (``vmap``);
* :mod:`.align` — orthogonal Procrustes alignment of latent draws;
* :mod:`.diagnostics` — ArviZ ``InferenceData`` and rotation-invariant summaries.
"""

from gplvm.inference.mcmc._metropolis import metropolis_hastings_prior
from gplvm.inference.mcmc.align import (align_samples, generalised_procrustes,
                                        posterior_mean_aligned, procrustes_rotation)
from gplvm.inference.mcmc.diagnostics import (pairwise_distance_summary, random_row_pairs,
                                              split_rhat, summary_rhat_ess, to_inference_data)
from gplvm.inference.mcmc.driver import (ChainResult, concat_results, default_thin_heavy,
                                         run_chains)
from gplvm.inference.mcmc.elliptical_slice import (ESSInfo, ESSState, elliptical_slice,
                                                   elliptical_slice_gaussian)

__all__ = [
    "ChainResult", "ESSInfo", "ESSState", "align_samples", "concat_results",
    "default_thin_heavy", "elliptical_slice", "elliptical_slice_gaussian",
    "generalised_procrustes", "metropolis_hastings_prior", "pairwise_distance_summary",
    "posterior_mean_aligned", "procrustes_rotation", "random_row_pairs", "run_chains",
    "split_rhat",
    "summary_rhat_ess", "to_inference_data",
]
