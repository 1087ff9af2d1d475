"""A new Axes on a Figure that pyplot does not know about."""

from __future__ import annotations


def new_axes(ax=None, figsize=(5.5, 4.5)):
    """``ax`` itself, or the Axes of a new :class:`~matplotlib.figure.Figure` that is not
    registered with pyplot (so no global figure list grows and no display is needed)."""
    if ax is not None:
        return ax
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, layout="constrained").add_subplot()


def require(model, attribute: str, what: str):
    """``model.<attribute>``, or a ValueError naming the models that have it."""
    value = getattr(model, attribute, None)
    if value is None:
        raise ValueError(f"{what} needs a fitted model with {attribute}; "
                         f"{type(model).__name__} has none (fit it first, or use a model "
                         f"that has it)")
    return value


def column_names(model, D: int, columns=None) -> list[str]:
    """The names of the D output columns: ``columns`` if given, else the model's
    ``feature_names_in_`` (``gplvm fit`` stores the data file's header there), else
    ``column 0`` … ``column D-1``."""
    names = columns if columns is not None else getattr(model, "feature_names_in_", None)
    if names is not None and len(names) == D:
        return [str(name) for name in names]
    return [f"column {d}" for d in range(D)]


def legend_outside(ax, **kwargs):
    """A legend to the right of the Axes, outside the data area (a constrained-layout figure
    makes room for it), so it never covers a point."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                     fontsize=7, **kwargs)
