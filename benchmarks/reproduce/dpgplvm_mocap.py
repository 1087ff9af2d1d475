"""Seed 001 §G, "Resolving ambiguities on CMU MoCap": subject 35 walking with its legs shifted.

Data: one walking trial of CMU subject 35 (``../shared/data/cmu_mocap_35_walkjog``, 30 fps), its
root translation and constant channels dropped; the leg channels (femur, tibia, foot, toes of
both legs: Acclaim channels 6–19 in GPmat's ASF order) of a copy are shifted half a gait cycle
(the period from the autocorrelation of the left femur's flexion) relative to the upper body, and
the copy is concatenated with the unshifted walk (:func:`gplvm.models._dp_data.walk_ambiguity`),
so each upper-body pose appears with two leg configurations.

Measured:

1. Factorisation: the DP-GP-LVM fitted to all rows; a group is a *leg group* when most of its
   columns are leg channels, else an *upper-body group*; the claim is that some latent dimension
   has ARD weight above 5% of its group's largest in a leg group and below 5% in every
   upper-body group.
2. Missing data (§G protocol, :mod:`gplvm.models.gplvm_family.missing_block`): per seed, rows
   permuted, 20% of them test rows with a third of the channels (permuted one at a time, the
   data having no (x, y) pairs) removed; the DP-GP-LVM and the Bayesian GPLVM (same Q, M,
   iterations) fitted on the training rows; the log-likelihood of the true missing values
   under each model's predictive mean and variance at q(x*).  The claim: the DP-GP-LVM's is
   higher, over 10 seeds.

Run (single-threaded; about an hour of CPU):
    OPENBLAS_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false \\
        .venv/bin/python benchmarks/reproduce/dpgplvm_mocap.py --seeds 0 1 2 3 4 5 6 7 8 9
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

ROOT_TRANSLATION = np.arange(0, 3)


def ambiguity_set(trial: int):
    from gplvm.data.loaders import load_cmu_mocap_walkjog
    from gplvm.models._dp_data import CMU35_LEG_CHANNELS as LEG_CHANNELS
    from gplvm.models._dp_data import gait_period, walk_ambiguity

    data = load_cmu_mocap_walkjog()
    walk = data.Y[data.groups == trial]
    keep = np.ones(walk.shape[1], dtype=bool)
    keep[ROOT_TRANSLATION] = False
    keep &= walk.std(0) > 1e-8
    legs = np.isin(np.arange(walk.shape[1]), LEG_CHANNELS)
    period = gait_period(walk[:, LEG_CHANNELS[0]])
    shift = period // 2
    return walk_ambiguity(walk[:, keep], legs[keep], shift), period, shift


def leg_dimension(model, legs):
    """Latent dimensions active (> 5% of the group's largest ARD weight) in a leg group and in
    no upper-body group."""
    rel = model.relevance_ / model.relevance_.max(axis=1, keepdims=True)
    active = rel > 0.05
    leg_groups = [g for g in range(model.n_groups_)
                  if legs[model.groups_ == g].mean() > 0.5]
    upper = [g for g in range(model.n_groups_) if g not in leg_groups]
    used_by_legs = active[leg_groups].any(0) if leg_groups else np.zeros(rel.shape[1], bool)
    used_by_upper = active[upper].any(0) if upper else np.zeros(rel.shape[1], bool)
    return np.flatnonzero(used_by_legs & ~used_by_upper), leg_groups, upper


def main():
    import gplvm
    from gplvm.models.dpgplvm import missing_data_log_likelihood
    from gplvm.models.gplvm_family.missing_block import missing_block_split

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trial", type=int, default=8)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--n-components", type=int, default=6)
    parser.add_argument("--n-inducing", type=int, default=25)
    parser.add_argument("--truncation", type=int, default=10)
    parser.add_argument("--max-iter", type=int, default=2000)
    parser.add_argument("--skip-factorisation", action="store_true")
    args = parser.parse_args()
    print(f"threads: OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')} "
          f"XLA_FLAGS={os.environ.get('XLA_FLAGS')}")
    amb, period, shift = ambiguity_set(args.trial)
    N, D = amb.Y.shape
    print(f"trial 35_{args.trial:02d}: gait period {period} frames, legs shifted {shift}; "
          f"N={N} D={D} ({amb.legs.sum()} leg channels) Q={args.n_components} "
          f"M={args.n_inducing} T={args.truncation} max_iter={args.max_iter}")
    settings = dict(n_components=args.n_components, n_inducing=args.n_inducing,
                    max_iter=args.max_iter, progress=False)
    warnings.simplefilter("ignore")
    if not args.skip_factorisation:
        start = time.process_time()
        model = gplvm.DPGPLVM(truncation=args.truncation, **settings).fit(amb.Y)
        dims, leg_groups, upper = leg_dimension(model, amb.legs)
        rel = model.relevance_ / model.relevance_.max(axis=1, keepdims=True)
        print(f"factorisation: {model.n_groups_} groups, leg groups {leg_groups}, "
              f"cpu {time.process_time() - start:.0f}s")
        for g in range(model.n_groups_):
            print(f"  group {g}: {np.sum(model.groups_ == g)} columns "
                  f"({amb.legs[model.groups_ == g].sum()} legs)  ARD/max "
                  f"{np.array2string(rel[g], precision=3, suppress_small=True)}")
        print(f"latent dimensions used by a leg group and by no upper-body group: "
              f"{dims.tolist()} -> {'yes' if len(dims) else 'no'}")
    n_test, n_missing = N // 5, D // 3
    wins, rows = 0, []
    for seed in args.seeds:
        split = missing_block_split(amb.Y, n_test=n_test, n_missing=n_missing,
                                    random_state=seed, pair=1)
        scores = {}
        for name, make in (("DPGPLVM", lambda: gplvm.DPGPLVM(truncation=args.truncation,
                                                             random_state=seed, **settings)),
                           ("BayesianGPLVM", lambda: gplvm.BayesianGPLVM(random_state=seed,
                                                                         **settings))):
            model = make().fit(split.Y_train)
            scores[name] = missing_data_log_likelihood(model, split.Y_test, split.Y_truth)[0]
        wins += scores["DPGPLVM"] > scores["BayesianGPLVM"]
        rows.append((scores["DPGPLVM"], scores["BayesianGPLVM"]))
        print(f"seed {seed}: missing-block log-likelihood DPGPLVM {scores['DPGPLVM']:.1f}  "
              f"BayesianGPLVM {scores['BayesianGPLVM']:.1f}", flush=True)
    rows = np.array(rows)
    print(f"{n_test} test rows x {n_missing} missing channels; DPGPLVM higher in {wins} of "
          f"{len(args.seeds)} seeds; mean {rows[:, 0].mean():.1f} vs {rows[:, 1].mean():.1f}; "
          f"median {np.median(rows[:, 0]):.1f} vs {np.median(rows[:, 1]):.1f}")


if __name__ == "__main__":
    main()
