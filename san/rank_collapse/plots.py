"""Figures of the rank-collapse experiment (the paper's Fig. 2 and its appendix figure), drawn with seaborn."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from san.core.plotting import COLUMN_IN, DOUBLE_IN, figsize, legend_below  # noqa: E402
from san.rank_collapse.spec import METRICS, VARIANTS  # noqa: E402

RATIO_LABEL = r"$\|res(X_l)\|_{1,\infty} / \|X_l\|_{1,\infty}$"
METRIC_TITLES = {
    "residual_ratio": RATIO_LABEL,
    "residual_ratio_no_first": RATIO_LABEL + " without token 1",
    "residual_ratio_frobenius": r"$\|res(X_l)\|_F / \|X_l\|_F$",
}


def _variant_lines(ax: plt.Axes, ds: xr.Dataset, log_scale: bool, legend: bool) -> None:
    """One weights' relative residual per layer on ``ax``: per variant the mean over sequences, +-1 std band.

    On a log axis exact zeros are clipped to the smallest positive double, so that a collapse to 0 stays visible.
    """
    df = ds["residual_ratio"].to_dataframe().reset_index()
    order = [v for v in VARIANTS if v in set(df["variant"])]
    if log_scale:
        df = df.assign(residual_ratio=df["residual_ratio"].clip(lower=1e-300))
    sns.lineplot(
        data=df, x="layer", y="residual_ratio", hue="variant", hue_order=order, errorbar="sd", marker="o",
        markersize=3, ax=ax, legend=legend,
    )  # fmt: skip
    if log_scale:
        ax.set_yscale("log")


def rank_collapse_figure(ds: xr.Dataset, model: str, log_scale: bool = False) -> plt.Figure:
    """Fig. 2 layout: one panel per weights; per variant the mean relative residual over sequences, +-1 std band.

    With ``log_scale`` the y axis is logarithmic, which shows the doubly exponential decay in float64.
    """
    weights = list(ds["weights"].values)
    fig, axes = plt.subplots(1, len(weights), figsize=figsize(len(weights), aspect=0.75), sharey=True, squeeze=False)
    for ax, w in zip(axes[0], weights, strict=True):
        _variant_lines(ax, ds.sel(weights=w), log_scale, legend=ax is axes[0][-1])
        ax.set_title(f"{model} ({w})")
        ax.set_xlabel("layer")
        ax.set_ylabel(RATIO_LABEL)
    fig.tight_layout()
    legend_below(fig, axes[0][-1])
    return fig


def overview_rows(datasets: Mapping[str, xr.Dataset], max_cols: int) -> tuple[list[tuple[str, list[str]]], int]:
    """The overview's rows and column count: per weights (init, pretrained, ...) the models that have them, wrapped
    into rows of at most ``max_cols`` panels, so that no panel is left without data. Columns: enough for the
    longest weights' models in as few rows as possible, spread evenly (nine models in five columns: 5 + 4)."""
    weights = list(dict.fromkeys(str(w) for ds in datasets.values() for w in ds["weights"].values))
    groups = {w: [m for m, ds in datasets.items() if w in set(map(str, ds["weights"].values))] for w in weights}
    longest = max(len(models) for models in groups.values())
    n_cols = -(-longest // -(-longest // max_cols))
    rows = [(w, models[i : i + n_cols]) for w, models in groups.items() for i in range(0, len(models), n_cols)]
    return rows, n_cols


def rank_collapse_overview_figure(
    datasets: Mapping[str, xr.Dataset], log_scale: bool = True, max_cols: int = 5
) -> plt.Figure:
    """The paper's Fig. 2 as one figure at a two-column page's width: a panel per model and weights, the models at
    initialisation first and, in rows of their own, those with pretrained weights; in each panel the four variants
    (SAN, SAN+MLP, SAN+skip, transformer) as mean +-1 std over sequences of the relative residual per layer, on a
    shared log y axis (``log_scale``). Rows hold at most ``max_cols`` panels (:func:`overview_rows`); the legend
    takes a free slot of the grid, or goes below it."""
    rows, n_cols = overview_rows(datasets, max_cols)
    fig, axes = plt.subplots(
        len(rows), n_cols, figsize=figsize(n_cols, len(rows), aspect=0.78), sharey=True,
        squeeze=False, layout="constrained",
    )  # fmt: skip
    fig.get_layout_engine().set(h_pad=0.02, w_pad=0.02, hspace=0.04, wspace=0.02)
    legend_ax, free = None, []
    for (w, models), row in zip(rows, axes, strict=True):
        for j, ax in enumerate(row):
            if j >= len(models):
                free.append(ax)
                continue
            _variant_lines(ax, datasets[models[j]].sel(weights=w), log_scale, legend=legend_ax is None)
            legend_ax = legend_ax or ax
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
            ax.set_title(models[j], fontsize="x-small", pad=2)
            ax.set_xlabel("")
            ax.set_ylabel(w if j == 0 else "", fontsize="small")
            ax.tick_params(labelsize="x-small", pad=1)
    fig.supxlabel("layer", fontsize="small")
    fig.supylabel(RATIO_LABEL, fontsize="small")
    _place_legend(fig, legend_ax, free)
    return fig


def _place_legend(fig: plt.Figure, ax: plt.Axes | None, free: list[plt.Axes]) -> None:
    """Move ``ax``'s legend into the first free panel slot (hiding the other free slots), or below the figure."""
    for slot in free[1:]:
        slot.set_visible(False)
    legend = None if ax is None else ax.get_legend()
    if legend is None or not free:
        if free:
            free[0].set_visible(False)
        if ax is not None:
            legend_below(fig, ax)
        return
    handles, labels = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
    legend.remove()
    free[0].axis("off")
    free[0].legend(handles, labels, loc="center", frameon=False, fontsize="small")


def attention_products_figure(ds: xr.Dataset, model: str) -> plt.Figure:
    """Box plot over path depth of the rank-1 residual of attention products (log y), one box per weights."""
    df = ds["rank1_residual"].to_dataframe().reset_index()
    df["rank1_residual"] = df["rank1_residual"].clip(lower=1e-300)
    width = COLUMN_IN if ds.sizes["depth"] * ds.sizes["weights"] <= 10 else DOUBLE_IN
    fig, ax = plt.subplots(figsize=figsize(width=width, aspect=0.75 if width == COLUMN_IN else 0.45))
    sns.boxplot(data=df, x="depth", y="rank1_residual", hue="weights", log_scale=True, fliersize=1.5, ax=ax)
    ax.set_xlabel("path length (number of attention matrices multiplied)")
    ax.set_ylabel(r"$\|P - P_1\|_F / \|P\|_F$")
    ax.set_title(f"{model}: chained attention along random paths")
    fig.tight_layout()
    return fig


def pretrained_collapse_figure(
    datasets: Mapping[str, xr.Dataset], variants: tuple[str, ...] = ("SAN", "transformer")
) -> plt.Figure:
    """Every pretrained model side by side: per model (colour) the mean over sequences of ``variants`` (line style)
    against the layer normalised to depth ``l / L`` in 0..1 (so a 6-layer and a 30-layer model share the axis), one
    panel per token-uniformity measure (:data:`METRICS`: the paper's ratio, the same without the first token, the
    Frobenius ratio), log y; exact zeros are clipped to the smallest positive double."""
    frames = []
    for model, ds in datasets.items():
        if "pretrained" not in set(map(str, ds["weights"].values)):
            continue
        sel = ds.sel(weights="pretrained", variant=[v for v in variants if v in ds["variant"]])
        depth = int(sel["layer"].max())
        for metric in METRICS:
            if metric not in sel:
                continue
            df = sel[metric].mean("sample").to_dataframe(name="ratio").reset_index()
            frames.append(df.assign(model=model, metric=metric, depth=df["layer"] / depth))
    if not frames:
        raise ValueError("no model has pretrained weights: nothing to draw")
    df = pd.concat(frames, ignore_index=True)
    df["ratio"] = df["ratio"].clip(lower=1e-300)
    metrics = [m for m in METRICS if m in set(df["metric"])]
    fig, axes = plt.subplots(1, len(metrics), figsize=figsize(len(metrics), aspect=1.0), sharey=True, squeeze=False)
    dashes = {v: "" if i == 0 else (4, 1.5) for i, v in enumerate(variants)}
    for ax, metric in zip(axes[0], metrics, strict=True):
        sns.lineplot(
            data=df[df["metric"] == metric], x="depth", y="ratio", hue="model", style="variant", style_order=variants,
            dashes=dashes, ax=ax, legend=ax is axes[0][-1],
        )  # fmt: skip
        ax.set_yscale("log")
        ax.set_xlabel("layer / depth")
        ax.set_ylabel("")
        ax.set_title(METRIC_TITLES[metric], fontsize="small")
    axes[0][0].set_ylabel("relative residual, pretrained")
    fig.tight_layout()
    legend_below(fig, axes[0][-1], ncol=4)
    return fig
