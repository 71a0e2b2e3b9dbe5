"""Figures of the rank-collapse experiment (the paper's Fig. 2 and its appendix figure), drawn with seaborn."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
import xarray as xr  # noqa: E402

from san.core.plotting import legend_outside  # noqa: E402
from san.rank_collapse.spec import VARIANTS  # noqa: E402


def rank_collapse_figure(ds: xr.Dataset, model: str, log_scale: bool = False) -> plt.Figure:
    """Fig. 2 layout: one panel per weights; per variant the mean relative residual over sequences, +-1 std band.

    With ``log_scale`` the y axis is logarithmic, which shows the doubly exponential decay in float64.
    """
    df = ds["residual_ratio"].to_dataframe().reset_index()
    weights = list(ds["weights"].values)
    order = [v for v in VARIANTS if v in set(df["variant"])]
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
