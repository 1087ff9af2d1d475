"""Bayesian GPLVM (Titsias & Lawrence 2010; seeds 001, 004) on scikit-learn's handwritten digits.

Each 8 x 8 image is a row of 64 pixel intensities; the model finds a 5-D latent space whose
ARD relevances switch off the dimensions it does not need.  The figure shows the images in the
two most relevant dimensions, coloured by digit, with their posterior ±2 sd ellipses, and the
relevance of every dimension.

    python examples/bgplvm_digits.py [--fast] [--out results/examples]
"""

import argparse
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from gplvm import BayesianGPLVM, plot
from gplvm.data import load_digits

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--fast", action="store_true", help="150 images, 15 iterations")
parser.add_argument("--out", default="results/examples")
args = parser.parse_args()

data = load_digits(digits=[0, 1, 2, 3, 4])
Y, labels = data.Y, np.asarray(data.labels)
if args.fast:
    Y, labels = Y[:150], labels[:150]
Y = Y[:, Y.std(0) > 0]                                # pixels that are 0 in every image

model = BayesianGPLVM(n_components=5, n_inducing=10 if args.fast else 40,
                      max_iter=15 if args.fast else 1000, progress=not args.fast).fit(Y)

fig = Figure(figsize=(11, 4.5), layout="constrained")
left, right = fig.subplots(1, 2, width_ratios=[2, 1])
plot.latent(model, labels=labels, ax=left)
plot.relevance(model, ax=right)
Path(args.out).mkdir(parents=True, exist_ok=True)
fig.savefig(Path(args.out) / "bgplvm_digits.png", dpi=110)
print(f"bound {model.elbo_:.1f} after {model.n_iter_} iterations; wrote "
      f"{Path(args.out) / 'bgplvm_digits.png'}")
