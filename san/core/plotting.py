"""Shared figure style and output for every experiment's seaborn figures.

Figure functions only read xarray datasets (the ``.nc`` results); restyling never reruns compute. Figures are sized
for a journal page: :data:`COLUMN_IN` (one column) or :data:`DOUBLE_IN` (the full text width) wide, via
:func:`figsize`; PDFs embed TrueType fonts (``pdf.fonttype 42``), which journals and editors accept as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

COLUMN_IN = 3.5
"""Width of a one-column figure in inches (two-column journal layouts such as ICML: 3.25-3.5 in)."""
DOUBLE_IN = 7.2
"""Width of a figure spanning both columns in inches (text width of a two-column page: 6.75-7.2 in)."""

# Fonts embedded as TrueType (42) instead of Type 3 outlines, in PDF and PostScript output.
FONT_RC = {"pdf.fonttype": 42, "ps.fonttype": 42}


def apply_style(figures: dict[str, Any]) -> None:
    """Apply the config's seaborn style and context, and embed TrueType fonts in PDF/PS output."""
    sns.set_theme(style=figures.get("style", "whitegrid"), context=figures.get("context", "paper"))
    matplotlib.rcParams.update(FONT_RC)


def figsize(
    n_cols: int = 1, n_rows: int = 1, *, width: float | None = None, aspect: float = 0.8, max_height: float = 9.0
) -> tuple[float, float]:
    """Figure size ``(width, height)`` in inches for a grid of ``n_rows`` x ``n_cols`` panels.

    ``width`` defaults to :data:`COLUMN_IN` for a single panel and :data:`DOUBLE_IN` for several; each panel is
    ``aspect`` times as high as it is wide, and the height is capped at ``max_height`` (a journal page).
    """
    if width is None:
        width = COLUMN_IN if n_cols == 1 else DOUBLE_IN
    height = min(max_height, n_rows * aspect * width / n_cols)
    return width, height


def save(fig: plt.Figure, paths: Sequence[str | Path], dpi: int = 150) -> None:
    """Write ``fig`` to every path (format from the suffix) and close it."""
    for path in paths:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def legend_outside(ax: plt.Axes) -> None:
    """Move ``ax``'s legend (if any) to the right of the panel, without a title."""
    if ax.get_legend() is not None:
        ax.get_legend().set_title("")
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1.0))


def legend_below(fig: plt.Figure, ax: plt.Axes, ncol: int | None = None) -> None:
    """Replace ``ax``'s legend (if any) by one figure legend centred below the panels, in ``ncol`` columns (default:
    one row), so that the figure keeps its page width."""
    legend = ax.get_legend()
    if legend is None:
        return
    handles, labels = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
    legend.remove()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol or len(labels), frameon=False)
