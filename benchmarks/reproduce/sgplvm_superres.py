"""Seed 003 §3 super-resolution on Frey faces: train at 10 × 14, predict at 20 × 28.

Protocol (issue 13): the 1965 frames (28 × 20 pixels, raw 0–255) are downsampled by averaging
2 × 2 blocks to 14 × 10; a random split gives ``--n-train`` training images and ``--n-test``
held-out ones.  The structured GPLVM (Q = 30, m_ξ = min(n_ξ, 100), product Matérn 3/2 spatial
kernel, inducing inputs at the low-resolution pixels) is fitted to the low-resolution training
images with each low-resolution pixel at the centre of its block in full-resolution pixel
coordinates (rows 0.5, 2.5, …, 26.5; columns 0.5, …, 18.5).  Predictions at the 28 × 20
full-resolution pixel coordinates, conditioned on the image's own low-resolution pixels
(``predict(X, grid=(rows, cols), given=Y_low)``, seed 003 §2.2.2), are compared with the true
full-resolution images, for the training images (at their fitted E[x]) and for held-out
images (q(x*) from the low-resolution image by ``transform``), beside two classical upsamplers
of the same low-resolution images: bicubic convolution (PIL's ``Image.resize(BICUBIC)``, the
usual meaning of "bicubic") and a bicubic spline through the block centres
(``scipy.interpolate.RectBivariateSpline``, kx = ky = 3).  RMSE in raw pixel units, mean over
images.  With ``--plot PATH`` a figure of low resolution / SGPLVM / bicubic / truth.

    OPENBLAS_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false \\
        .venv/bin/python benchmarks/reproduce/sgplvm_superres.py --seeds 0 1 2 \\
        --spatial-kernel block-matern32

``--spatial-kernel block-K`` wraps each per-axis kernel K in
:class:`~gplvm.kernels.BlockAverage`: a low-resolution pixel is the mean of the field over its
2 × 2 block and a prediction at a fine pixel is the field itself; the point kernels (the
default Matérn 3/2, as seed 003 §3.2 places low-res pixels at block centres) treat a
low-resolution pixel as the field's value at the block centre.

The data are read by path (``../shared/data/frey_faces`` or ``--data``), never copied.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from scipy.interpolate import RectBivariateSpline  # noqa: E402

import gplvm  # noqa: E402
from gplvm.data import load_frey_faces  # noqa: E402
from gplvm.kernels import RBF, BlockAverage, Matern32, Matern52  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data",
                                             "frey_faces"))
SHAPE = (28, 20)
LOW_ROWS, LOW_COLS = 2.0 * np.arange(14) + 0.5, 2.0 * np.arange(10) + 0.5
HIGH_ROWS, HIGH_COLS = np.arange(28.0), np.arange(20.0)
KERNELS = {"matern32": Matern32, "matern52": Matern52, "rbf": RBF}
BASES = {"block-" + name: k for name, k in KERNELS.items()}


def downsample(images):
    """Average 2 × 2 blocks: (n, 28, 20) → (n, 14, 10)."""
    return images.reshape(len(images), 14, 2, 10, 2).mean(axis=(2, 4))


def bicubic(low):
    """PIL's bicubic convolution resize of each low-resolution image to 28 × 20."""
    return np.stack([np.asarray(Image.fromarray(img.astype(np.float32), mode="F")
                                .resize((20, 28), Image.BICUBIC), dtype=float) for img in low])


def spline(low):
    """A bicubic spline through the block centres, evaluated at the full-resolution pixels
    (outside the centres' range it extrapolates the boundary polynomials)."""
    return np.stack([RectBivariateSpline(LOW_ROWS, LOW_COLS, img, kx=3, ky=3)(HIGH_ROWS,
                                                                              HIGH_COLS)
                     for img in low])


def spatial_kernel(name):
    """None (the estimator's default, Matérn 3/2 per axis) or the named kernel per axis, started
    as the default is: length-scale a tenth of each axis's span."""
    if name == "matern32":
        return None
    base = BASES.get(name, KERNELS.get(name))
    kernels = tuple(base(lengthscale=float(np.ptp(a)) / 10.0, variance=1.0)
                    for a in (LOW_ROWS, LOW_COLS))
    if name in BASES:       # each low-res pixel: the mean of 2 fine pixels per axis
        kernels = tuple(BlockAverage(k) for k in kernels)
    return kernels


def rmse(pred, truth):
    """Mean over images of each image's RMSE."""
    return float(np.mean(np.sqrt(np.mean((pred - truth) ** 2, axis=(1, 2)))))


def plot(path, low, ours, cubic, truth, n=6):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [("low resolution (10 × 14)", low), ("SGPLVM at 20 × 28", ours),
            ("bicubic", cubic), ("truth (20 × 28)", truth)]
    fig, axes = plt.subplots(len(rows), n, figsize=(1.3 * n, 1.9 * len(rows)))
    for r, (label, images) in enumerate(rows):
        for c in range(n):
            ax = axes[r, c]
            ax.imshow(images[c], cmap="gray", vmin=0, vmax=255)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(label, fontsize=7)
    fig.suptitle("Frey faces super-resolution (held-out images)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=200)
    parser.add_argument("--n-test", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--max-iter", type=int, default=1000)
    parser.add_argument("--spatial-kernel", choices=sorted(KERNELS) + sorted(BASES),
                        default="matern32",
                        help="per-axis spatial kernel (default: the paper's Matérn 3/2); "
                             "block-K: BlockAverage(K), low-res pixels as 2 x 2 block means")
    parser.add_argument("--plot", default=None)
    parser.add_argument("--data", default=DEFAULT_DATA)
    args = parser.parse_args()
    print("threads: OPENBLAS_NUM_THREADS=%s XLA_FLAGS=%s" % (
        os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("XLA_FLAGS")))
    Y = load_frey_faces(args.data).Y.reshape(-1, *SHAPE)
    results = []
    for seed in args.seeds:
        order = np.random.default_rng(seed).permutation(len(Y))
        train = Y[order[:args.n_train]]
        test = Y[order[args.n_train:args.n_train + args.n_test]]
        t0 = time.time()
        model = gplvm.StructuredGPLVM(n_components=30, n_inducing=min(args.n_train, 100),
                                      grid=(LOW_ROWS, LOW_COLS), max_iter=args.max_iter,
                                      spatial_kernel=spatial_kernel(args.spatial_kernel),
                                      random_state=seed, progress=False).fit(downsample(train))
        fit_s = time.time() - t0
        high = (HIGH_ROWS, HIGH_COLS)
        low_train, low_test = downsample(train), downsample(test)
        ours_train = model.predict(model.X_mean_, grid=high, given=low_train)
        ours_test = model.predict(model.transform(low_test), grid=high, given=low_test)
        row = []
        for name, truth, ours in (("train", train, ours_train), ("test", test, ours_test)):
            low = downsample(truth)
            row += [rmse(ours, truth), rmse(bicubic(low), truth), rmse(spline(low), truth)]
            print(f"seed={seed} {name:<5} images {len(truth):4d}  RMSE SGPLVM {row[-3]:6.3f}  "
                  f"bicubic {row[-2]:6.3f}  bicubic spline {row[-1]:6.3f}", flush=True)
        scales = [np.round(np.asarray(getattr(k, "kernel", k).lengthscale), 3).tolist()
                  for k in model.spatial_kernel_]
        print(f"seed={seed} fit {fit_s:.1f}s  iterations {model.n_iter_}  "
              f"bound {model.elbo_:.2f}  spatial length-scales (rows, cols) {scales}",
              flush=True)
        results.append(row)
        if args.plot and seed == args.seeds[0]:
            low = downsample(test)
            plot(args.plot, np.repeat(np.repeat(low, 2, 1), 2, 2), ours_test, bicubic(low),
                 test)
    r = np.median(np.asarray(results), axis=0)
    print(f"median over {len(results)} seeds: train SGPLVM {r[0]:.3f} bicubic {r[1]:.3f} "
          f"spline {r[2]:.3f} | test SGPLVM {r[3]:.3f} bicubic {r[4]:.3f} spline {r[5]:.3f}")


if __name__ == "__main__":
    main()
