"""A tiny RFLVM problem shared by the tests of the mode search and the MAP fit
(tests/models/rflvm/test_rflvm_map_start.py, tests/models/rflvm/test_rflvm_map.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.kernels import RBF
from gplvm.models.rflvm.init import initial_states, prepare_data
from gplvm.models.rflvm.spec import RFLVMSpec


def tiny_rflvm(kind: str, seed: int = 0, n_rows: int = 7):
    """``n_rows`` × 4 data of ``kind`` (one entry missing), Q = 2, 3 fixed-RBF frequencies,
    ``sampler='nuts'``; one chain's initial state.

    Returns:
        (spec, data, state, Y with NaN at the missing entry).
    """
    rng = np.random.default_rng(seed)
    N, J, Q = n_rows, 4, 2
    F = rng.standard_normal((N, J))
    if kind == "gaussian":
        Y = F
    elif kind == "bernoulli":
        Y = (F > 0).astype(float)
    elif kind == "poisson":
        Y = rng.poisson(np.exp(F)).astype(float)
    else:
        Y = rng.negative_binomial(3.0, 1.0 / (1.0 + np.exp(F))).astype(float)
    Y[2, 1] = np.nan
    spec = RFLVMSpec(likelihood=kind, n_components=Q, n_freq=3, n_outputs=J,
                     intercept=kind != "gaussian", learn_kernel=False, dynamic=False,
                     beta_prior_var=1.0, intercept_prior_var=4.0, n_x_steps=1, map_sweeps=0,
                     nb_beta="polya_gamma", sampler="nuts")
    data = prepare_data(spec, Y, None, None, RBF(lengthscale=1.0), None)
    X0 = jnp.asarray(rng.standard_normal((N, Q)))
    states = initial_states(jax.random.split(jax.random.PRNGKey(seed), 1), spec, data, X0,
                            0.1, 5)
    return spec, data, jax.tree_util.tree_map(lambda a: a[0], states), Y
