"""MCMC: pure transition kernels, one chain driver, alignment and diagnostics (seed 000, §3.1).

Kernels in the ``init`` / ``step`` form with ``State`` / ``Info`` named tuples (STYLE.md 1):

* elliptical slice sampling — :func:`ess_init`, :func:`ess_step` (:class:`ESSState`,
  :class:`ESSInfo`; :mod:`.elliptical_slice`, batched over independent blocks);
* Metropolis–Hastings — :func:`mh_init`, :func:`mh_step`, :func:`mh_accept_reject`
  (:class:`MHState`, :class:`MHInfo`; prior, symmetric or general proposals).

Around them:

* :mod:`.driver` — :func:`run_chains`, the only loop over sweeps (``lax.scan``) and chains
  (``vmap``), each call of its compiled block a step of :func:`gplvm.inference.run.run`;
  what it takes in groups: :class:`Sweeps`, :class:`Keep`, :class:`Execution`, :class:`Report`;
* :func:`placement` — how :func:`run_chains` lays C chains out over the devices (one chain per
  device, ``d`` at a time; :class:`Placement`, whose ``describe()`` says so in words);
* :mod:`.align` — orthogonal Procrustes alignment of latent draws;
* :mod:`.diagnostics` — ArviZ ``InferenceData``, split R-hat and rotation-invariant summaries.
"""

from gplvm.inference.mcmc._devices import Placement, placement
from gplvm.inference.mcmc._metropolis import MHInfo, MHState
from gplvm.inference.mcmc._metropolis import accept_reject as mh_accept_reject
from gplvm.inference.mcmc._metropolis import init as mh_init
from gplvm.inference.mcmc._metropolis import step as mh_step
from gplvm.inference.mcmc.align import (align_samples, generalised_procrustes,
                                        posterior_mean_aligned, procrustes_rotation)
from gplvm.inference.mcmc.diagnostics import (pairwise_distance_summary, random_row_pairs,
                                              split_rhat, summary_rhat_ess, to_inference_data)
from gplvm.inference.mcmc.driver import (ChainResult, Execution, Keep, Report, Sweeps,
                                         concat_results, default_thin_heavy, run_chains)
from gplvm.inference.mcmc.elliptical_slice import (ESSInfo, ESSState, elliptical_slice,
                                                   elliptical_slice_gaussian)
from gplvm.inference.mcmc.elliptical_slice import init as ess_init
from gplvm.inference.mcmc.elliptical_slice import step as ess_step

__all__ = [
    "ChainResult", "ESSInfo", "ESSState", "Execution", "Keep", "MHInfo", "MHState", "Placement",
    "Report", "Sweeps", "align_samples", "concat_results", "default_thin_heavy", "elliptical_slice",
    "elliptical_slice_gaussian",
    "ess_init", "ess_step", "generalised_procrustes", "mh_accept_reject", "mh_init", "mh_step",
    "pairwise_distance_summary", "placement", "posterior_mean_aligned", "procrustes_rotation",
    "random_row_pairs", "run_chains", "split_rhat", "summary_rhat_ess", "to_inference_data",
]
