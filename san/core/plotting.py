"""Shared figure style and output for every experiment's seaborn figures.

Figure functions only read xarray datasets (the ``.nc`` results); restyling never reruns compute.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402


def apply_style(figures: dict[str, Any]) -> None:
    """Apply the config's seaborn style and context."""
    sns.set_theme(style=figures.get("style", "whitegrid"), context=figures.get("context", "paper"))


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
