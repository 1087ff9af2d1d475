"""Random-variate generators used by the samplers: Pólya-gamma draws (seed 000, eq. 27), the
Dirichlet-process mixture on the frequencies (eqs. 22–25) and Chinese-restaurant-table draws
for the negative-binomial dispersion (eqs. 29–31)."""

from gplvm.samplers.crt import chinese_restaurant_table, sample_nb_dispersion
from gplvm.samplers.dp_mixture import (DPMixtureState, NIWPrior, default_niw_prior, dp_init,
                                       dp_update, log_prior_frequencies, n_clusters,
                                       propose_frequencies, sample_assignments,
                                       sample_cluster_params, sample_concentration)
from gplvm.samplers.polya_gamma import polya_gamma
from gplvm.samplers.polya_gamma_devroye import polya_gamma_one

__all__ = ["DPMixtureState", "NIWPrior", "chinese_restaurant_table", "default_niw_prior",
           "dp_init", "dp_update", "log_prior_frequencies", "n_clusters", "polya_gamma",
           "polya_gamma_one", "propose_frequencies", "sample_assignments",
           "sample_cluster_params", "sample_concentration", "sample_nb_dispersion"]
