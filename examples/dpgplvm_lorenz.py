"""DP-GP-LVM (Lawrence, Ek & Campbell, ICML 2019; seed 001) on the Lorenz attractor.

Noisy channels are non-linear functions of the 3-D Lorenz trajectory
(``gplvm.data.make_lorenz``); a second block of channels is a function of time alone.  The
DP-GP-LVM groups the columns by the latent dimensions they use: the figure shows the latent
trajectory coloured by time, which latent dimensions each column uses, and each column's group.

    python examples/dpgplvm_lorenz.py [--fast] [--out results/examples]
"""

import argparse
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from gplvm import DPGPLVM, plot
from gplvm.data import make_lorenz

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--fast", action="store_true", 
                    help="40 rows, 10 iterations, no per-column phase")
parser.add_argument("--out", default="results/examples")
args = parser.parse_args()

N = 40 if args.fast else 400
data = make_lorenz(n_samples=N, n_outputs=6 if args.fast else 30)
rng = np.random.default_rng(1)
t = np.linspace(-1, 1, N)
clock = np.column_stack([np.sin(3 * t + p) for p in rng.uniform(0, np.pi, 5)])
Y = np.hstack([data.Y, clock + 0.1 * rng.normal(size=clock.shape)])

model = DPGPLVM(n_components=4, n_inducing=8 if args.fast else 30,
                max_iter=10 if args.fast else 2000, n_init_steps=0 if args.fast else 300,
                progress=not args.fast).fit(Y)

fig = Figure(figsize=(12, 4.5), layout="constrained")
axes = fig.subplots(1, 3, width_ratios=[3, 1, 1])
plot.latent(model, labels=np.where(t < 0, "first half", "second half"), ax=axes[0])
plot.factors(model, ax=axes[1])
plot.assignments(model, ax=axes[2])
Path(args.out).mkdir(parents=True, exist_ok=True)
fig.savefig(Path(args.out) / "dpgplvm_lorenz.png", dpi=110)
print(f"{model.n_column_groups_} column groups; wrote {Path(args.out) / 'dpgplvm_lorenz.png'}")
