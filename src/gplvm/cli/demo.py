"""``gplvm demo``: the README's demo job on data bundled with scikit-learn: a Bayesian GPLVM
embedding of the digits (``--model glm``: revrand's GLM on 3 vs 5; ``--model rflvm``: a binomial
RFLVM sampled by MCMC, pixel intensities as counts out of 16)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def add_parser(sub) -> None:
    """The ``demo`` sub-command's arguments."""
    demo = sub.add_parser("demo", help="fit a model on scikit-learn's digits and write results")
    demo.add_argument("--out", default=os.environ.get("GPLVM_RESULTS", "results/demo"),
                      help="folder for the summary, plot and predictions (default results/demo)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--model", choices=("bgplvm", "glm", "rflvm"), default="bgplvm",
                      help="bgplvm: Bayesian GPLVM embedding of all digits (default); glm: "
                           "BayesianGLM classifying 3 vs 5; rflvm: binomial RFLVM by MCMC")
    demo.add_argument("--n-iter", type=int, default=None,
                      help="optimiser steps or sweeps (default 400 for bgplvm, 200 sweeps "
                           "for rflvm, the model default for glm)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    """Run the demo ``args.model`` chose."""
    demos = {"bgplvm": _demo_bgplvm, "glm": _demo_glm, "rflvm": _demo_rflvm}
    return demos[args.model](args)


def _demo_glm(args) -> int:
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
    fit_kwargs = {} if args.n_iter is None else {"n_iter": args.n_iter}
    data = load_digits(digits=[3, 5])
    X, y = data.Y, (np.asarray(data.labels) == 5).astype(float)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=args.seed)
    print(f"[gplvm demo] BayesianGLM (Bernoulli, random Fourier features of an RBF kernel) on "
          f"scikit-learn's digits, 3 vs 5: {len(y_train)} training and {len(y_test)} test images")
    start = time.perf_counter()
    model = BayesianGLM(likelihood="bernoulli", random_state=args.seed, **fit_kwargs,
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


def _digits(args):
    """The output folder (made), and scikit-learn's digits without their 3 border pixels that
    are always 0 (nothing to model there): (out, Y, labels)."""
    import numpy as np

    from gplvm.data import load_digits

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = load_digits()
    keep = data.Y.std(0) > 0
    return out, data.Y[:, keep], np.asarray(data.labels)


def _demo_bgplvm(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from gplvm import BayesianGPLVM
    from gplvm.baselines import PCA
    from gplvm.metrics import knn_accuracy

    out, Y, labels = _digits(args)
    Q, n_iter = 5, args.n_iter or 400
    print(f"[gplvm demo] Bayesian GPLVM (ARD RBF, Q={Q}, 30 inducing inputs) on scikit-learn's "
          f"digits: {Y.shape[0]} images of {Y.shape[1]} pixels, {n_iter} L-BFGS steps")
    start = time.perf_counter()
    model = BayesianGPLVM(n_components=Q, n_inducing=30, max_iter=n_iter,
                          random_state=args.seed, progress=not args.quiet).fit(Y)
    seconds = time.perf_counter() - start
    rel = model.relevance_
    order = np.argsort(-rel)
    X2 = model.X_mean_[:, order[:2]]
    acc = knn_accuracy(model.X_mean_, labels, random_state=args.seed)
    acc2 = knn_accuracy(X2, labels, random_state=args.seed)
    acc_pca = knn_accuracy(PCA(Q).fit_transform(Y), labels, random_state=args.seed)
    summary = {"model": "BayesianGPLVM", "data": "scikit-learn digits (1797 x 61)",
               "n_components": Q, "n_inducing": 30, "iterations": int(model.n_iter_),
               "bound": model.elbo_, "fit_seconds": seconds,
               "relevance": rel.tolist(), "knn_accuracy_latent": acc,
               "knn_accuracy_top2": acc2, "knn_accuracy_pca_same_dim": acc_pca,
               "noise_var_mean": float(np.mean(model.noise_var_)), "seed": args.seed}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    np.savetxt(out / "embedding.csv", np.column_stack([labels, model.X_mean_, model.X_var_]),
               delimiter=",", comments="", header=",".join(
                   ["digit"] + [f"x{q}" for q in range(Q)] + [f"var{q}" for q in range(Q)]))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    sc = axes[0].scatter(X2[:, 0], X2[:, 1], c=labels, cmap="tab10", s=6)
    axes[0].legend(*sc.legend_elements(), title="digit", fontsize=7, loc="best", ncol=2)
    axes[0].set_xlabel(f"latent dimension {order[0]}")
    axes[0].set_ylabel(f"latent dimension {order[1]}")
    axes[0].set_title(f"q(X) means, two most relevant dimensions (1-NN accuracy {acc2:.3f})",
                      fontsize=9)
    axes[1].bar(np.arange(Q), rel / rel.max(), color="tab:blue")
    axes[1].set_xlabel("latent dimension")
    axes[1].set_ylabel("relevance 1/ℓ² (relative to the largest)")
    axes[1].set_title("ARD relevance", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "latent_space.png", dpi=120)
    print(f"[gplvm demo] 5-fold 1-NN accuracy: latent space {acc:.3f} (two most relevant "
          f"dimensions {acc2:.3f}; PCA with {Q} components {acc_pca:.3f}); fit {seconds:.1f} s")
    print(f"[gplvm demo] wrote {out / 'summary.json'}, {out / 'latent_space.png'} and "
          f"{out / 'embedding.csv'}")
    return 0


def _demo_rflvm(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from gplvm import RFLVM
    from gplvm.baselines import PCA
    from gplvm.metrics import knn_accuracy

    out, Y, labels = _digits(args)
    n_iter, n_chains = args.n_iter or 200, 2
    print(f"[gplvm demo] RFLVM (binomial, 16 trials per pixel, Q=2, M=100 random features, "
          f"DP-mixture kernel) on scikit-learn's digits: {Y.shape[0]} images of {Y.shape[1]} "
          f"pixels, {n_chains} chains of {n_iter} Gibbs sweeps (half burn-in)")
    start = time.perf_counter()
    model = RFLVM(n_components=2, likelihood="binomial", n_iter=n_iter, burn_in=n_iter // 2,
                  sampler="gibbs", n_chains=n_chains, random_state=args.seed, progress=not args.quiet)
    model.fit(Y, n_trials=16)
    seconds = time.perf_counter() - start
    acc = knn_accuracy(model.X_mean_, labels, random_state=args.seed)
    acc_pca = knn_accuracy(PCA(2).fit_transform(Y), labels, random_state=args.seed)
    summary = {"model": "RFLVM", "likelihood": "binomial (16 trials)",
               "data": f"scikit-learn digits ({Y.shape[0]} x {Y.shape[1]})", "n_components": 2,
               "sweeps": int(model.n_iter_), "chains": n_chains, "fit_seconds": seconds,
               "knn_accuracy_latent": acc, "knn_accuracy_pca_2": acc_pca,
               "split_rhat_log_lik_below_1.1": bool(model.converged_),
               "frequency_acceptance": model.accept_rate_, "seed": args.seed}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    np.savetxt(out / "embedding.csv",
               np.column_stack([labels, model.X_mean_, np.sqrt(model.X_var_)]), delimiter=",",
               comments="", header="digit,x0,x1,sd0,sd1")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    draws = model.X_samples_[:, -20:].reshape(-1, model.X_mean_.shape[0], 2)
    axes[0].scatter(draws[..., 0].ravel(), draws[..., 1].ravel(),
                    c=np.tile(labels, len(draws)), cmap="tab10", s=1, alpha=0.08)
    sc = axes[0].scatter(model.X_mean_[:, 0], model.X_mean_[:, 1], c=labels, cmap="tab10", s=5)
    axes[0].legend(*sc.legend_elements(), title="digit", fontsize=7, loc="best", ncol=2)
    axes[0].set_title(f"posterior mean latents and 20 aligned draws per chain "
                      f"(1-NN accuracy {acc:.3f})", fontsize=9)
    for c, trace in enumerate(model.history_):
        axes[1].plot(trace, lw=0.8, label=f"chain {c}")
    axes[1].axvline(model.burn_in, color="grey", ls=":", lw=0.8)
    axes[1].set_xlabel("sweep")
    axes[1].set_ylabel("log-likelihood")
    axes[1].set_title("trace (dotted: end of burn-in)", fontsize=9)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "latent_space.png", dpi=120)
    print(f"[gplvm demo] 5-fold 1-NN accuracy: latent space {acc:.3f} (PCA, 2 components "
          f"{acc_pca:.3f}); split R-hat of the log-likelihood below 1.1: {model.converged_}; "
          f"fit {seconds:.1f} s")
    print(f"[gplvm demo] wrote {out / 'summary.json'}, {out / 'latent_space.png'} and "
          f"{out / 'embedding.csv'}")
    return 0
