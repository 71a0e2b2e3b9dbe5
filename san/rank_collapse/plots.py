"""Figures of the rank-collapse experiment (the paper's Fig. 2 and its appendix figure), drawn with seaborn."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogLocator, MaxNLocator  # noqa: E402

from san.claims.caveats import gguf_type  # noqa: E402
from san.core.plotting import COLUMN_IN, DOUBLE_IN, PALETTE, VARIANT_STYLE, figsize, variant_style  # noqa: E402
from san.models.folders import result_family  # noqa: E402
from san.models.spec import CAUSAL  # noqa: E402
from san.rank_collapse.spec import METRICS, VARIANTS  # noqa: E402

RATIO_LABEL = r"$\|res(X_l)\|_{1,\infty} / \|X_l\|_{1,\infty}$"
METRIC_TITLES = {
    "residual_ratio": RATIO_LABEL,
    "residual_ratio_no_first": RATIO_LABEL + "\n" + r"without the first token $x_0$",
    "residual_ratio_frobenius": r"$\|res(X_l)\|_F / \|X_l\|_F$",
}


def _variant_lines(ax: plt.Axes, ds: xr.Dataset, log_scale: bool, legend: bool = True) -> None:
    """One weights' relative residual per layer on ``ax``: per variant the mean over sequences as a line with the
    variant's fixed colour, marker and dash pattern (:data:`san.core.plotting.VARIANT_STYLE`, so a variant lying on
    another stays visible), and +-1 std over sequences as a band.

    On a log axis exact zeros are clipped to the smallest positive double, so that a collapse to 0 stays visible,
    and the band's lower edge is cut a decade below the mean (a spread larger than the mean would reach zero, which a
    log axis cannot show, and stretch every shared axis to the smallest double).
    """
    ratio = ds["residual_ratio"]
    if log_scale:
        ratio = ratio.clip(min=1e-300)
    layers = ratio["layer"].values
    others = [d for d in ratio.dims if d not in ("variant", "layer")]
    for variant in [v for v in VARIANTS if v in set(map(str, ratio["variant"].values))]:
        one = ratio.sel(variant=variant)
        mean, std = one.mean(others), one.std(others)
        style = variant_style(variant)
        ax.plot(layers, mean, label=variant if legend else None, lw=1.2, markevery=max(1, len(layers) // 12), **style)
        low = xr.ufuncs.maximum(mean - std, mean / 10) if log_scale else mean - std
        ax.fill_between(layers, low, mean + std, color=style["color"], alpha=0.15, lw=0)
    if log_scale:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, numticks=6))


def rank_collapse_figure(ds: xr.Dataset, model: str, log_scale: bool = False) -> plt.Figure:
    """Fig. 2 layout: one panel per weights; per variant the mean relative residual over sequences, +-1 std band.

    With ``log_scale`` the y axis is logarithmic, which shows the doubly exponential decay in float64.
    """
    weights = list(ds["weights"].values)
    fig, axes = plt.subplots(1, len(weights), figsize=figsize(len(weights), aspect=0.75), sharey=True, squeeze=False,
                             layout="constrained")  # fmt: skip
    for ax, w in zip(axes[0], weights, strict=True):
        _variant_lines(ax, ds.sel(weights=w), log_scale, legend=ax is axes[0][0])
        ax.set_title(f"{model}, {w} weights")
        ax.set_xlabel("layer $l$")
        ax.set_ylabel(RATIO_LABEL if ax is axes[0][0] else "")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.legend(loc="outside lower center", ncol=4, frameon=False)
    return fig


def quantisation(ds: xr.Dataset, weights: str = "pretrained") -> str:
    """The GGUF type of ``weights`` of a result whose manifest names a GGUF file (``Q4_K_M``), else ""."""
    import json

    try:
        manifest = json.loads(ds.attrs.get("manifests", "{}")).get(weights) or {}
    except (TypeError, ValueError):
        return ""
    name = manifest.get("gguf_file") or ""
    return gguf_type(name) if name else ""


def panel_title(model: str, ds: xr.Dataset, weights: str) -> str:
    """An overview panel's title: the model, then its weights, a decoder's kind and a GGUF type where they apply."""
    parts = [weights]
    if "config" in ds.attrs and result_family(ds.attrs) in CAUSAL:  # a result records its family
        parts.append("decoder")
    if weights == "pretrained" and quantisation(ds):
        parts.append(quantisation(ds))
    return f"{model}\n({', '.join(parts)})"


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
            if legend_ax is None:
                ax.legend()
            legend_ax = legend_ax or ax
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
            ax.set_title(panel_title(models[j], datasets[models[j]], w), fontsize="xx-small", pad=2)
            ax.set_xlabel("")
            ax.set_ylabel("")
            ax.tick_params(labelsize="x-small", pad=1)
    fig.supxlabel("layer $l$ (each model to its own depth)", fontsize="small")
    fig.supylabel("relative residual " + RATIO_LABEL, fontsize="small")
    _place_legend(fig, legend_ax, free)
    return fig


def _place_legend(fig: plt.Figure, ax: plt.Axes | None, free: list[plt.Axes]) -> None:
    """Move ``ax``'s legend into the first free panel slot (hiding the other free slots), or above the figure (below
    it the shared x label sits)."""
    for slot in free[1:]:
        slot.set_visible(False)
    legend = None if ax is None else ax.get_legend()
    if legend is None or not free:
        if free:
            free[0].set_visible(False)
        if ax is not None:
            handles, labels = ax.get_legend_handles_labels()
            if legend is not None:
                legend.remove()
            fig.legend(handles, labels, loc="outside upper center", ncol=len(labels), frameon=False, fontsize="small")
        return
    handles, labels = ax.get_legend_handles_labels()
    legend.remove()
    free[0].axis("off")
    free[0].legend(handles, labels, loc="center", frameon=False, fontsize="small")


def attention_products_figure(ds: xr.Dataset, model: str) -> plt.Figure:
    """Box plot over path depth of the rank-1 residual of attention products (log y), one box per weights."""
    df = ds["rank1_residual"].to_dataframe().reset_index()
    df["rank1_residual"] = df["rank1_residual"].clip(lower=1e-300)
    width = COLUMN_IN if ds.sizes["depth"] * ds.sizes["weights"] <= 10 else DOUBLE_IN
    fig, ax = plt.subplots(figsize=figsize(width=width, aspect=0.75 if width == COLUMN_IN else 0.45),
                           layout="constrained")  # fmt: skip
    weights = list(dict.fromkeys(df["weights"]))
    sns.boxplot(data=df, x="depth", y="rank1_residual", hue="weights", log_scale=True, fliersize=1.5, ax=ax,
                palette=dict(zip(weights, PALETTE, strict=False)))  # fmt: skip
    ax.set_xlabel("path length (attention matrices multiplied)")
    ax.set_ylabel(r"rank-1 residual $\|P - P_1\|_F / \|P\|_F$")
    ax.set_title(f"{model}: chained attention", fontsize="small")
    sns.move_legend(ax, "best", title="weights", frameon=False)
    return fig


def pretrained_collapse_figure(
    datasets: Mapping[str, xr.Dataset], variants: tuple[str, ...] = ("SAN", "transformer")
) -> plt.Figure:
    """Every pretrained model side by side: per model (colour) the mean over sequences of ``variants`` (line style)
    against the layer normalised to depth ``l / L`` in 0..1 (so a 6-layer and a 30-layer model share the axis), one
    panel per token-uniformity measure (:data:`METRICS`: the paper's ratio, the same without the first token, the
    Frobenius ratio), log y; exact zeros are clipped to the smallest positive double. A model whose pretrained weights
    are a GGUF dequantisation is labelled with its GGUF type (:func:`quantisation`)."""
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
    fig, axes = plt.subplots(1, len(metrics), figsize=figsize(len(metrics), aspect=1.0), sharey=True, squeeze=False,
                             layout="constrained")  # fmt: skip
    models = list(dict.fromkeys(df["model"]))
    colours = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    dashes = {v: VARIANT_STYLE.get(v, {"ls": "-"})["ls"] for v in variants}
    for ax, metric in zip(axes[0], metrics, strict=True):
        part = df[df["metric"] == metric]
        for (model, variant), line in part.groupby(["model", "variant"], sort=False):
            ax.plot(line["depth"], line["ratio"], color=colours[model], ls=dashes[variant], lw=1.2)
        ax.set_yscale("log")
        ax.set_xlabel("relative depth $l / L$")
        ax.set_ylabel("")
        ax.set_title(METRIC_TITLES[metric], fontsize="small")
    axes[0][0].set_ylabel("ratio, pretrained")
    left_out = [v for v in VARIANTS if v not in variants]
    drawn = " and ".join(variants)
    fig.suptitle(f"Pretrained weights: the {drawn} variants" + (f" ({', '.join(left_out)}: Fig. 2 overview)"
                 if left_out else "") + "\n(Q...): the GGUF quantisation type of dequantised weights",
                 fontsize="small")  # fmt: skip
    handles = [Line2D([], [], color=colours[m], lw=1.5) for m in models]
    handles += [Line2D([], [], color="0.3", ls=dashes[v], lw=1.2) for v in variants]
    names = {m: f"{m} ({quantisation(datasets[m])})" if quantisation(datasets[m]) else m for m in models}
    labels = [names[m] for m in models] + [f"{v} variant" for v in variants]
    fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), frameon=False, fontsize="small")
    return fig
