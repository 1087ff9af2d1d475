"""Random-feature latent variable model (Zhang, Gundersen & Engelhardt, JMLR 2023; seed 000)
on Poisson counts.

The data are counts drawn through a GP from a 2-D S-shaped latent curve (the paper's S-curve,
``gplvm.data.make_s_curve``).  The RFLVM samples the latent points by MCMC; the figure shows
the posterior mean latents with a cloud of posterior draws, coloured by position along the
curve, and the log-likelihood trace of each chain with its split R-hat.

    python examples/rflvm_s_curve.py [--fast] [--out results/examples]
"""

import argparse
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from gplvm import RFLVM, plot
from gplvm.data import make_s_curve

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--fast", action="store_true",
                    help="40 rows, 2 chains of 10 sweeps, fixed kernel")
parser.add_argument("--out", default="results/examples")
args = parser.parse_args()

data = make_s_curve("poisson", n_samples=40 if args.fast else 500,
                    n_outputs=10 if args.fast else 100)
sweeps = 10 if args.fast else 1000
model = RFLVM(n_components=2, likelihood="poisson", n_features=10 if args.fast else 100,
              n_iter=sweeps, burn_in=sweeps // 2, n_chains=2, block_size=5 if args.fast else 50,
              learn_kernel=not args.fast,       # --fast: a fixed RBF kernel, 13 s less compiling
              progress=not args.fast).fit(data.Y)

position = np.digitize(np.arange(len(data.Y)), np.linspace(0, len(data.Y), 5)[1:-1])
fig = Figure(figsize=(11, 4.5), layout="constrained")
left, right = fig.subplots(1, 2, width_ratios=[3, 2])
plot.latent(model, labels=np.array([f"part {p + 1}" for p in position]), ax=left)
plot.trace(model, ax=right)
Path(args.out).mkdir(parents=True, exist_ok=True)
fig.savefig(Path(args.out) / "rflvm_s_curve.png", dpi=110)
print(f"{model.n_iter_} sweeps, converged (split R-hat < 1.1): {model.converged_}; wrote "
      f"{Path(args.out) / 'rflvm_s_curve.png'}")
