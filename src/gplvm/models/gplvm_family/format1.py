"""Reading Bayesian GPLVM files of format 1 (gplvm before issue 11).

Format-1 files kept the bound's data and settings in ``_static`` (Y0, column groups, sequence
layout, jitter), the map at the optimal q(U) in ``_fixed``, and the time-kernel template, rule
and standardisation as separate attributes.  Today these are one :class:`Problem` and one
:class:`FittedGPLVM`; the values are the same numbers, so a converted model predicts exactly
as it did.
"""

from __future__ import annotations

import jax.numpy as jnp

from gplvm.models.gplvm_family.bound import Problem
from gplvm.models.gplvm_family.fitted import FittedGPLVM
from gplvm.models.gplvm_family.latent import DynamicalLatent, IidLatent
from gplvm.models.gplvm_family.route import DenseRoute
from gplvm.objectives.new_rows import FittedMap

#: format-1 attributes that today's estimator derives instead of storing
_DERIVED = ("Z_", "kernel_", "noise_var_", "noise_var_std_", "time_kernel_", "Y_mean_",
            "Y_std_", "rule_", "_static", "_fixed", "_time_template")


def upgrade_format1(fitted: dict) -> dict:
    """Today's fitted attributes from a format-1 file's."""
    static, fixed = fitted["_static"], fitted["_fixed"]
    rule, kernel = fitted["rule_"], fitted["kernel_"]
    if static.layout is None:
        latent = IidLatent()
    else:
        latent = DynamicalLatent(static.layout, fitted["_time_template"], static.Y0.shape[0])
    out = {k: v for k, v in fitted.items() if k not in _DERIVED}
    out["_problem"] = Problem(static.Y0, static.groups, latent, kernel, rule, DenseRoute(),
                              static.jitter)
    out["fitted_"] = FittedGPLVM(kernel, jnp.asarray(fitted["Z_"]), FittedMap(*fixed), rule,
                                 fitted["Y_mean_"], fitted["Y_std_"])
    return out
