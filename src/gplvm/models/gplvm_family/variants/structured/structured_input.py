"""Images in, images out: the layouts the structured GPLVM accepts, checked before any
computation (issue 13).

* ``(n_images, height, width[, channels])`` with ``grid=None``: pixels at integer coordinates
  (row, column), numbered row-major; the spatial kernel is a product over the two axes (the
  Kronecker *product grid* of seed 003 §2.2, X⁽ˢ⁾ = X⁽ˢ'¹⁾ × X⁽ˢ'²⁾), or one kernel over the 2-D
  coordinates when a single ``spatial_kernel`` is given.
* the same with ``grid=(rows, cols)``: the axes' coordinates.
* ``(n_images, n_pixels[, channels])`` with ``grid`` an (n_pixels, d_s) array of pixel
  coordinates: one spatial factor over them.

The model's columns are the pixels, pixel-major with the channels last.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplvm._validation import check_new_values
from gplvm.registry import register


@register("gplvm.state.ImageLayout")
class ImageLayout(NamedTuple):
    """How the images are laid out: ``tail`` the shape of one image as given, ``coords`` the
    coordinates per spatial factor, ``axes`` the product grid's axes (None for a point grid)."""

    tail: tuple
    coords: tuple
    axes: tuple | None
    n_channels: int

    @property
    def n_pixels(self) -> int:
        return int(np.prod([len(c) for c in self.coords]))

    def flatten(self, Y, name: str = "Y") -> np.ndarray:
        """Images of this layout as (n, n_pixels·D) rows; a ValueError names a shape mismatch."""
        Y = np.asarray(Y, dtype=float)
        if Y.shape[1:] != tuple(self.tail):
            raise ValueError(f"{name} has images of shape {Y.shape[1:]} but the model was "
                             f"fitted on images of shape {tuple(self.tail)}")
        return Y.reshape(Y.shape[0], -1)

    def new_coords(self, grid):
        """Coordinates per factor and one image's output shape at a new ``grid``."""
        extra = tuple(self.tail[-1:]) if _has_channels(self) else ()
        if self.axes is not None:
            axes = _axes(grid, len(self.axes), "grid")
            shape = tuple(len(a) for a in axes) + extra
            if len(self.coords) == len(self.axes):
                return axes, shape
            return (_mesh(axes),), shape
        points = _points(grid, self.coords[0].shape[1], "grid")
        return (points,), (len(points),) + extra


def _has_channels(layout: ImageLayout) -> bool:
    image_dims = 2 if layout.axes is not None else 1
    return len(layout.tail) > image_dims


def _axes(grid, n_axes, name):
    if not isinstance(grid, tuple) or len(grid) != n_axes:
        raise ValueError(f"{name} must be a tuple of {n_axes} 1-D coordinate arrays (rows, "
                         f"columns) for images; got {type(grid).__name__}")
    axes = tuple(np.asarray(a, dtype=float).ravel() for a in grid)
    for a in axes:
        if len(a) < 1 or not np.all(np.isfinite(a)):
            raise ValueError(f"{name}: every axis needs at least one finite coordinate")
        check_new_values(a, name)
    return axes


def _points(grid, d_s, name):
    points = np.asarray(grid, dtype=float)
    points = points[:, None] if points.ndim == 1 else points
    if points.ndim != 2 or (d_s is not None and points.shape[1] != d_s):
        raise ValueError(f"{name} must be an (n_pixels, {d_s or 'd_s'}) array of pixel "
                         f"coordinates; got shape {np.shape(grid)}")
    if not np.all(np.isfinite(points)):
        raise ValueError(f"{name} has non-finite coordinates")
    check_new_values(points, name)
    return points


def _mesh(axes):
    """The pixels of a product grid as (n_1·n_2, 2) coordinates, row-major."""
    return np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(axes))


def image_layout(Y: np.ndarray, grid, product: bool) -> ImageLayout:
    """The layout of training images ``Y`` (already an array) with ``grid`` (module docstring);
    ``product``: one spatial factor per axis (else one over all pixel coordinates)."""
    if grid is None or isinstance(grid, tuple):
        if Y.ndim not in (3, 4):
            raise ValueError(f"Y has shape {Y.shape}: give images as (n_images, height, "
                             f"width[, channels]), or (n_images, n_pixels) with grid= an "
                             f"(n_pixels, d_s) array of pixel coordinates")
        axes = (tuple(np.arange(n, dtype=float) for n in Y.shape[1:3]) if grid is None
                else _axes(grid, 2, "grid"))
        if tuple(len(a) for a in axes) != Y.shape[1:3]:
            raise ValueError(f"grid has axes of lengths {[len(a) for a in axes]} but the images "
                             f"are {Y.shape[1]} x {Y.shape[2]} pixels")
        coords = axes if product else (_mesh(axes),)
        return ImageLayout(Y.shape[1:], coords, axes, Y.shape[3] if Y.ndim == 4 else 1)
    if Y.ndim not in (2, 3):
        raise ValueError(f"Y has shape {Y.shape}; with grid= pixel coordinates give "
                         f"(n_images, n_pixels[, channels])")
    points = _points(grid, None, "grid")
    if points.shape[0] != Y.shape[1]:
        raise ValueError(f"grid has {points.shape[0]} pixel coordinates but Y has {Y.shape[1]} "
                         f"pixels per image; give one coordinate row per pixel")
    return ImageLayout(Y.shape[1:], (points,), None, Y.shape[2] if Y.ndim == 3 else 1)
