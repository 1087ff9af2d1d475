"""Data: synthetic generators with a known truth, and loaders for the papers' real data sets.

* :mod:`gplvm.data.synthetic` -- :func:`make_s_curve`, :func:`make_lorenz` (seed 000, §4).
* :mod:`gplvm.data.factorised` -- the DP-GP-LVM's data (seed 001): :func:`make_factorised`
  (Figure 6's columns from functions of shared and private latent dimensions) and
  :func:`walk_ambiguity` (§G's walk with its legs shifted half a gait cycle, with
  :func:`gait_period` and :data:`CMU35_LEG_CHANNELS`).
* :mod:`gplvm.data.loaders` -- one ``load_*`` function per data set, reading local files
  (``path=None`` -> :func:`default_data_dir`), plus the bundled :func:`load_digits`.
"""

from gplvm.data.factorised import (CMU35_LEG_CHANNELS, FIGURE6_DIMENSIONS, FactorisedData,
                                   WalkAmbiguity, gait_period, make_factorised, walk_ambiguity)
from gplvm.data.loaders import (DATA_DIR_ENV, Dataset, default_data_dir, load_bridges,
                                load_cmu_mocap_walkjog, load_congress109, load_digits,
                                load_frey_faces, load_fx_exchange_rates, load_hippocampus, load_mesc,
                                load_montreal_bikes, load_newsgroups, load_oil_flow, load_spam,
                                load_usps, load_usps_twos, load_yale_faces)
from gplvm.data.synthetic import (LIKELIHOODS, MapPrior, SyntheticData, lorenz_trajectory,
                                  make_lorenz, make_s_curve)

__all__ = ["DATA_DIR_ENV", "Dataset", "default_data_dir", "load_bridges", "load_cmu_mocap_walkjog",
           "load_congress109", "load_digits", "load_frey_faces", "load_fx_exchange_rates",
           "load_hippocampus", "load_mesc",
           "load_montreal_bikes", "load_newsgroups", "load_oil_flow", "load_spam", "load_usps",
           "load_usps_twos", "load_yale_faces",
           "LIKELIHOODS", "MapPrior", "SyntheticData", "lorenz_trajectory", "make_lorenz",
           "make_s_curve",
           "CMU35_LEG_CHANNELS", "FIGURE6_DIMENSIONS", "FactorisedData", "WalkAmbiguity",
           "gait_period", "make_factorised", "walk_ambiguity"]
