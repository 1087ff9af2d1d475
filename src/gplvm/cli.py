"""Command line: ``gplvm demo`` runs the README's demo job on data bundled with scikit-learn."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def _demo(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split

    from gplvm.data import load_digits
    from gplvm.models import BayesianGLM

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = load_digits(digits=[3, 5])
    X, y = data.Y, (np.asarray(data.labels) == 5).astype(float)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=args.seed)
    print(f"[gplvm demo] BayesianGLM (Bernoulli, random Fourier features of an RBF kernel) on "
          f"scikit-learn's digits, 3 vs 5: {len(y_train)} training and {len(y_test)} test images")
    start = time.perf_counter()
    model = BayesianGLM(likelihood="bernoulli", n_iter=args.n_iter, random_state=args.seed,
                        progress=not args.quiet).fit(X_train, y_train)
    seconds = time.perf_counter() - start
    p = model.predict_proba(X_test)[:, 1]
    error = float(np.mean((p > 0.5) != y_test))
    loss = float(log_loss(y_test, p, labels=[0, 1]))
    summary = {"model": "BayesianGLM", "likelihood": "bernoulli", "data": "digits 3 vs 5",
               "n_train": int(len(y_train)), "n_test": int(len(y_test)),
               "test_error": error, "log_loss": loss, "fit_seconds": seconds,
               "lengthscale": float(np.asarray(model.features_.kernel.lengthscale).mean()),
               "seed": args.seed}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    np.savetxt(out / "predictive_probabilities.csv", np.column_stack([y_test, p]),
               delimiter=",", header="y_true,p_five", comments="")
    fig, ax = plt.subplots(figsize=(7, 3.5))
    order = np.argsort(p)
    colors = np.where(y_test[order] == 1, "tab:orange", "tab:blue")
    ax.scatter(np.arange(len(p)), p[order], c=colors, s=12)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("test image (sorted by predicted probability)")
    ax.set_ylabel("P(digit is 5)")
    ax.set_title(f"BayesianGLM, digits 3 (blue) vs 5 (orange): error {100 * error:.2f}%, "
                 f"log-loss {loss:.3f}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "predictive_probabilities.png", dpi=120)
    print(f"[gplvm demo] test error {100 * error:.2f}%  log-loss {loss:.4f}  "
          f"(fit {seconds:.1f} s)")
    print(f"[gplvm demo] wrote {out / 'summary.json'}, {out / 'predictive_probabilities.png'} "
          f"and {out / 'predictive_probabilities.csv'}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gplvm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="fit a model on scikit-learn's digits and write results")
    demo.add_argument("--out", default=os.environ.get("GPLVM_RESULTS", "results/demo"),
                      help="folder for the summary, plot and predictions (default results/demo)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--n-iter", type=int, default=3000, help="optimiser steps")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    return 2  # pragma: no cover
