"""The models ``gplvm fit`` knows, and how its flags become constructor arguments.

One table maps each short name to an estimator's stable registry name; another maps each model
flag to the constructor parameter it sets.  A flag applies to every model whose constructor has
that parameter (``get_params``), so a new estimator joins the command line by one line in
:data:`MODELS` and needs no code of its own.
"""

from __future__ import annotations

import argparse
import inspect

import numpy as np

#: short name -> (stable registry name, what the model is for)
MODELS = {
    "bgplvm": ("gplvm.BayesianGPLVM", "real-valued data, collapsed variational bound"),
    "rflvm": ("gplvm.RFLVM", "counts, binary or real data (any likelihood), MCMC"),
    "dpgplvm": ("gplvm.DPGPLVM", "real data whose columns follow different functions"),
    "structured": ("gplvm.StructuredGPLVM", "images (--image-shape H,W or a 3-D .npy)"),
}

#: flag (argparse dest) -> constructor parameter
FLAGS = {
    "components": "n_components",
    "likelihood": "likelihood",
    "inducing": "n_inducing",
    "features": "n_features",
    "iterations": "max_iter",
    "sweeps": "n_iter",
    "burn_in": "burn_in",
    "chains": "n_chains",
    "sampler": "sampler",
    "inference": "inference",
    "kernel": "kernel",
    "seed": "random_state",
}

#: --kernel names -> gplvm.kernels class names (ARD: one length-scale per latent dimension)
KERNELS = {"rbf": "RBF", "matern12": "Matern12", "matern32": "Matern32",
           "matern52": "Matern52"}


def estimator_class(name: str):
    """The estimator class of a short name."""
    from gplvm.registry import lookup

    return lookup(MODELS[name][0])


def _kernel_parameter(params: dict) -> str | None:
    """The constructor parameter holding the (latent) kernel, if the model has one."""
    return next((p for p in ("kernel", "latent_kernel") if p in params), None)


def build(name: str, args) -> object:
    """An unfitted estimator ``name`` with the flags of ``args`` that were given; without
    ``--components``, ``n_components='auto'`` for the models that take it (:func:`components`).

    Raises:
        ValueError: a flag was given that the model has no parameter for, or a value it
            cannot take from the command line.
    """
    cls = estimator_class(name)
    params = cls().get_params(deep=False)
    settings = {}
    Q = components(name, cls, getattr(args, "components", None))
    if Q is not None:
        settings["n_components"] = Q
    for flag, parameter in FLAGS.items():
        value = getattr(args, flag, None)
        if value is None or flag == "components":
            continue
        if flag == "kernel":
            parameter = _kernel_parameter(params)
            value = _kernel(value, params.get("n_components", 2) if Q is None else Q, name)
        if parameter not in params:
            option = "--" + flag.replace("_", "-")
            raise ValueError(f"{option} is not a setting of {name} ({cls.__name__}); its "
                             f"settings: {', '.join(_options(params))}")
        settings[parameter] = value
    if "n_iter" in settings and "burn_in" in params and "burn_in" not in settings:
        settings["burn_in"] = settings["n_iter"] // 2       # half the sweeps as burn-in
    if "progress" in params:
        settings["progress"] = not args.quiet
    return cls(**settings)


def components_value(text: str):
    """``--components``: ``auto`` or a positive integer (argparse ``type``)."""
    if text == "auto":
        return text
    try:
        Q = int(text)
    except ValueError:
        Q = 0
    if Q < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'auto' nor a positive integer")
    return Q


def takes_auto(cls) -> bool:
    """Whether the estimator ``cls`` takes ``n_components='auto'`` (its parameter rule,
    ``cls._parameter_constraints``): the GPLVM family, where ARD switches off the unused
    dimensions."""
    rule = getattr(cls, "_parameter_constraints", {}).get("n_components")
    return rule is not None and rule.problem("auto", None) is None


def components(name: str, cls, given):
    """``n_components`` of model ``name`` from ``--components`` (``given``; None when absent):
    the value given, else ``'auto'`` where the model takes it (Q = min(10, columns, rows − 1)
    and ARD keeps the dimensions the data use), else None (the model's default)."""
    auto = takes_auto(cls)
    if given is None:
        return "auto" if auto else None
    if given == "auto" and not auto:
        default = cls().get_params(deep=False).get("n_components")
        raise ValueError(f"--components auto applies to the GPLVM family (bgplvm, dpgplvm, "
                         f"structured), whose ARD kernel switches off unused dimensions; "
                         f"{name} needs an integer: give --components Q (its default is "
                         f"{default})")
    return given


def _options(params: dict) -> list[str]:
    names = {v: k for k, v in FLAGS.items()}
    found = ["--" + names[p].replace("_", "-") for p in params if p in names]
    if _kernel_parameter(params):
        found.append("--kernel")
    return found


def _kernel(name: str, n_components, model: str):
    """The ARD kernel ``--kernel name`` with one length-scale per latent dimension, which
    needs Q before the fit: with ``--components auto`` (Q known only once the data's columns
    are) it is refused rather than guessed."""
    import gplvm.kernels as kernels

    if name not in KERNELS:
        raise ValueError(f"--kernel {name!r} is unknown; choose one of {', '.join(KERNELS)}")
    if n_components == "auto":
        raise ValueError(f"--kernel {name} has one length-scale per latent dimension, so it "
                         f"needs an integer Q: give --components Q with it, or leave --kernel "
                         f"out for --components auto ({model}'s default), which uses the "
                         f"model's own ARD RBF kernel")
    return getattr(kernels, KERNELS[name])(lengthscale=np.ones(int(n_components)))


def fit_arguments(model, **extras) -> dict:
    """The keyword arguments of ``model.fit`` for the extras given (``times``, ``offset``,
    ``n_trials``, ...; ``None`` for those not given).

    Raises:
        ValueError: an extra was given that the model's ``fit`` does not take.
    """
    return call_arguments(model, "fit", **extras)


def call_arguments(model, method: str, **extras) -> dict:
    """The keyword arguments of ``model.<method>`` for the extras given (``None`` for those not
    given), each checked against the method's signature.

    Raises:
        ValueError: an extra was given that the method does not take.
    """
    accepted = inspect.signature(getattr(model, method)).parameters
    out = {}
    for key, value in extras.items():
        if value is None:
            continue
        if key not in accepted:
            raise ValueError(f"--{FIT_FLAGS.get(key, key)} does not apply to "
                             f"{type(model).__name__}: its {method} takes no {key}")
        out[key] = value
    return out


#: fit keyword -> the flag that gives it
FIT_FLAGS = {"n_trials": "trials"}
