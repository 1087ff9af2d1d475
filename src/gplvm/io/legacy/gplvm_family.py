"""Upgrades of the GPLVM family's and the Bayesian GLM's files (:mod:`gplvm.io.legacy`).

Format 1 (before issue 11): the Bayesian GPLVM kept the bound's data and settings in
``_static`` (Y0, column groups, sequence layout, jitter), the map at the optimal q(U) in
``_fixed``, and the time-kernel template, rule and standardisation as separate attributes;
today these are one ``Problem`` and one ``FittedGPLVM``, of the same numbers, so a converted
model predicts exactly as it did.  The Bayesian GLM never standardised y, and fitted a
Bernoulli model to 0/1 targets without ``classes_``.  Format 4 and below: the DP-GP-LVM's
sequence labels were ``sequence_groups_`` (today ``groups_``, as in every estimator of the
family; docs/contract.md, "One name per meaning").

Today's classes are looked up by their registered names, and the GLM's test of a binary
likelihood is imported while a format-1 file is loaded, so that :mod:`gplvm.io` imports no
model.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gplvm.registry import lookup

#: format-1 attributes that today's Bayesian GPLVM derives instead of storing
_DERIVED = ("Z_", "kernel_", "noise_var_", "noise_var_std_", "time_kernel_", "Y_mean_",
            "Y_std_", "rule_", "_static", "_fixed", "_time_template")


def upgrade_bgplvm(fitted: dict, format_version: int) -> dict:
    """Today's ``BayesianGPLVM`` attributes from a file of ``format_version``'s."""
    if format_version >= 2:
        return fitted
    static, fixed = fitted["_static"], fitted["_fixed"]
    rule, kernel = fitted["rule_"], fitted["kernel_"]
    if static.layout is None:
        latent = lookup("gplvm.state.IidLatent")()
    else:
        latent = lookup("gplvm.state.DynamicalLatent")(static.layout, fitted["_time_template"],
                                                       static.Y0.shape[0])
    out = {k: v for k, v in fitted.items() if k not in _DERIVED}
    out["_problem"] = lookup("gplvm.state.GPLVMProblem")(
        static.Y0, static.groups, latent, kernel, rule, lookup("gplvm.state.DenseRoute")(),
        static.jitter)
    out["fitted_"] = lookup("gplvm.state.FittedGPLVM")(
        kernel, jnp.asarray(fitted["Z_"]), lookup("gplvm.state.FittedMap")(*fixed), rule,
        fitted["Y_mean_"], fitted["Y_std_"])
    return out


def upgrade_dpgplvm(fitted: dict, format_version: int) -> dict:
    """Today's ``DPGPLVM`` attributes: ``sequence_groups_`` (format 4 and below) read as
    ``groups_``."""
    fitted = dict(fitted)
    if format_version < 5 and "sequence_groups_" in fitted:
        fitted["groups_"] = fitted.pop("sequence_groups_")
    return fitted


def upgrade_glm(fitted: dict, format_version: int) -> dict:
    """Today's ``BayesianGLM`` attributes: format 1 gets y's standardisation of that time
    (none: mean 0, sd 1) and, for a Bernoulli model, the classes 0 and 1 it was fitted to."""
    fitted = dict(fitted)
    if format_version < 2:
        # imported only while such a file is loaded: gplvm.io imports no model
        from gplvm.models._glm_predictions import is_binary
        fitted.setdefault("y_mean_", 0.0)
        fitted.setdefault("y_std_", 1.0)
        if is_binary(fitted["likelihood_"]):
            fitted.setdefault("classes_", np.array([0.0, 1.0]))
    return fitted
