"""Figures of the rank-collapse experiments (the paper's Fig. 2 and its appendix figure), drawn with seaborn.

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
import xarray as xr  # noqa: E402

VARIANT_ORDER = ["SAN", "SAN+MLP", "SAN+skip", "transformer"]


def apply_style(figures: dict[str, Any]) -> None:
    """Apply the config's seaborn style and context."""
    sns.set_theme(style=figures.get("style", "whitegrid"), context=figures.get("context", "paper"))


def save(fig: plt.Figure, paths: Sequence[str | Path], dpi: int = 150) -> None:
    """Write ``fig`` to every path (format from the suffix) and close it."""
    for path in paths:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)


def rank_collapse_figure(ds: xr.Dataset, model: str, log_scale: bool = False) -> plt.Figure:
    """Fig. 2 layout: one panel per weights; per variant the mean relative residual over sequences, +-1 std band.

    With ``log_scale`` the y axis is logarithmic, which shows the doubly exponential decay in float64.
    """
    df = ds["residual_ratio"].to_dataframe().reset_index()
    weights = list(ds["weights"].values)
    order = [v for v in VARIANT_ORDER if v in set(df["variant"])]
    fig, axes = plt.subplots(1, len(weights), figsize=(3.6 * len(weights), 3.0), sharey=True, squeeze=False)
    for ax, w in zip(axes[0], weights, strict=True):
        sub = df[df["weights"] == w]
        if log_scale:  # the band is drawn in log space: clip exact zeros to the smallest positive double
            sub = sub.assign(residual_ratio=sub["residual_ratio"].clip(lower=1e-300))
        sns.lineplot(
            data=sub, x="layer", y="residual_ratio", hue="variant", hue_order=order, errorbar="sd", marker="o",
            markersize=3, ax=ax, legend=ax is axes[0][-1],
        )
        ax.set_title(f"{model} ({w})")
        ax.set_xlabel("layer")
        ax.set_ylabel(r"$\|res(X_l)\|_{1,\infty} / \|X_l\|_{1,\infty}$")
        if log_scale:
            ax.set_yscale("log")
    legend_outside(axes[0][-1])
    fig.tight_layout()
    return fig


def legend_outside(ax: plt.Axes) -> None:
    """Move ``ax``'s legend (if any) to the right of the panel, without a title."""
    if ax.get_legend() is not None:
        ax.get_legend().set_title("")
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1.0))


def path_products_figure(ds: xr.Dataset, model: str) -> plt.Figure:
    """Box plot over path depth of the rank-1 residual of attention products (log y), one box per weights."""
    df = ds["rank1_residual"].to_dataframe().reset_index()
    df["rank1_residual"] = df["rank1_residual"].clip(lower=1e-300)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * ds.sizes["depth"] * ds.sizes["weights"]), 3.2))
    sns.boxplot(data=df, x="depth", y="rank1_residual", hue="weights", log_scale=True, fliersize=1.5, ax=ax)
    ax.set_xlabel("path length (number of attention matrices multiplied)")
    ax.set_ylabel(r"$\|P - P_1\|_F / \|P\|_F$")
    ax.set_title(f"{model}: chained attention along random paths")
    fig.tight_layout()
    return fig
