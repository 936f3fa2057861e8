"""Saving figures: :func:`save` writes a figure (or a ``(fig, ax)`` pair) as a PNG."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg

from dualgpu.errors import DualgpuError

if TYPE_CHECKING:  # matplotlib loads on first use
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["save"]


def save(fig: Figure | Axes | tuple[Any, Any], path: str | os.PathLike[str],
         dpi: int = 150) -> Path:
    """Return the path written: ``fig`` saved as a PNG (parent folders are created).

    Parameters
    ----------
    fig : Figure, Axes, or the ``(fig, ax)`` pair the plotting functions return
    path : str or Path
        Where to write; ``.png`` is appended when there is no suffix. Another suffix that
        matplotlib knows (``.pdf``, ``.svg``) selects that format.
    dpi : int
        Pixels per inch.

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    DualgpuError
        When ``fig`` is not a matplotlib Figure or Axes (or the ``(fig, ax)`` pair).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from dualgpu import plot
    >>> path = plot.save(plot.jacobian_heatmap(np.eye(3)), Path(tempfile.mkdtemp()) / "J")
    >>> path.name
    'J.png'
    """
    if isinstance(fig, tuple):
        fig = fig[0]
    if not hasattr(fig, "savefig"):
        if hasattr(fig, "get_figure"):
            fig = fig.get_figure()
        else:
            raise DualgpuError(
                f"save needs a matplotlib Figure (or the (fig, ax) pair the plotting functions "
                f"return); got {type(fig).__name__}."
            )
    path = Path(path)
    if not path.suffix:
        path = path.with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    if getattr(fig, "canvas", None) is None or type(fig.canvas).__name__ == "FigureCanvasBase":
        FigureCanvasAgg(fig)
    fig.savefig(path, dpi=dpi)
    return path
