"""What NUTS's adaptation gives with a short burn-in (issue 30; why ``burn_in`` < 20 warns).

The NUTS block adapts its step size and diagonal mass matrix over the burn-in and fixes the
step size at the burn-in's end (:mod:`gplvm.inference.mcmc.nuts`).  For each burn-in B and
seed, one chain of ``RFLVM(sampler='nuts')`` (the default model: Poisson, DP kernel) on the
Poisson S-curve (N = 300, J = 50, M = 100) runs B + 20 sweeps; the table gives the step size
the adaptation ended at and the mean acceptance statistic and leapfrog steps of the 20 sweeps
after it.  An acceptance near 0 is a chain that does not move.

    .venv/bin/python benchmarks/rflvm_short_burn_in.py [--burn-ins 10,20,30,50,100] [--seeds 0,1]

Single-threaded XLA and OpenBLAS (set when unset, printed).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import argparse  # noqa: E402
import warnings  # noqa: E402

import gplvm  # noqa: E402
from gplvm.data import make_s_curve  # noqa: E402

#: sweeps after the burn-in whose acceptance and tree sizes are averaged
AFTER = 20


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--burn-ins", default="10,20,30,50,100")
    p.add_argument("--seeds", default="0,1")
    args = p.parse_args(argv)
    print(f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']}")
    Y = make_s_curve("poisson", n_samples=300, n_outputs=50, random_state=0).Y
    print("| burn-in | seed | step size at the burn-in's end | mean acceptance after | "
          "leapfrog steps per draw after |")
    print("| --- | --- | --- | --- | --- |")
    for burn_in in (int(b) for b in args.burn_ins.split(",")):
        for seed in (int(s) for s in args.seeds.split(",")):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")     # the short burn-in's own warning
                model = gplvm.RFLVM(likelihood="poisson", sampler="nuts", n_iter=burn_in + AFTER,
                                    burn_in=burn_in, n_chains=1, random_state=seed,
                                    progress=False, block_size=10).fit(Y)
            info = model.sampler_info_
            print(f"| {burn_in} | {seed} | {float(info['step_size'][0, -1]):.4f} | "
                  f"{float(info['accept_nuts'][0, burn_in:].mean()):.3f} | "
                  f"{float(info['n_leapfrog'][0, burn_in:].mean()):.1f} |", flush=True)


if __name__ == "__main__":
    main()
