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
