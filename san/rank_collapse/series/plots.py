"""The training-dynamics figure: rank collapse, the pretrained phenomena (massive activations, the first token's norm,
the matrix entropy) and the first-token sink along a checkpoint series."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.ticker import LogLocator, NullFormatter  # noqa: E402

from san.core.plotting import figsize, legend_of_panels, variant_style  # noqa: E402
from san.measures.sink import sink_share  # noqa: E402
from san.rank_collapse.plots import RATIO_LABEL  # noqa: E402
from san.rank_collapse.series.measures import Over, has_unmodified, over_layers  # noqa: E402
from san.rank_collapse.series.spec import UNMODIFIED  # noqa: E402
from san.rank_collapse.spec import DRAWN, drawn_layers  # noqa: E402


def _band(ax: plt.Axes, steps: np.ndarray, values: xr.DataArray, label: str, color: str) -> None:
    """The mean over seeds of ``values`` (dims ``seed``, ``revision``) against ``steps``, with the seeds' range."""
    mean, low, high = values.mean("seed"), values.min("seed"), values.max("seed")
    ax.plot(steps, mean, marker="o", markersize=2.5, label=label, color=color)
    ax.fill_between(steps, low, high, alpha=0.25, color=color, linewidth=0)


def _step_axis(ax: plt.Axes) -> None:
    """The training step on a log axis with step 0 at its left edge (linear between 0 and 1)."""
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlim(left=0)
    ax.set_xlabel("training step")


def _mark_duplicates(axes: list[plt.Axes], ds: xr.Dataset) -> None:
    """A dotted vertical line at every revision that serves an earlier revision's weights (``duplicate_of``): its
    points repeat that revision's, analysed once."""
    if "duplicate_of" not in ds.coords:
        return
    steps = [float(s) for s, d in zip(ds["step"].values, ds["duplicate_of"].values, strict=True) if str(d)]
    for ax in axes:
        for i, step in enumerate(steps):
            label = "duplicate weights" if ax is axes[-1] and i == 0 else None
            ax.axvline(step, color="grey", linestyle=":", linewidth=0.8, label=label)


#: the phenomena panels: the measure, its reduction over the layers, the panel's title, its y label and its scale
#: ("ratio": log y spanning at least 1 to 10, so that a ratio near 1 reads as no outlier; "share": 0 to 1)
PHENOMENA_PANELS: tuple[tuple[str, Over, str, str, str], ...] = (
    ("massive_ratio", "max", "massive activations", "largest / median\nactivation (largest layer)", "ratio"),
    ("first_token_norm_ratio", "max", "first token's norm", "first-token / median\nnorm (largest layer)", "ratio"),
    ("matrix_entropy", "min", "compression valley", "normalised matrix\nentropy (lowest layer)", "share"),
)


def _residual_row(fig: plt.Figure, cell: Any, ds: xr.Dataset, model: str, colors: dict[str, str]) -> list[plt.Axes]:
    """The relative residual (mean over the sequences; log y) of the drawn variants at the first, middle and last
    layer, one panel each, in the grid ``cell``."""
    layers = drawn_layers(int(ds["layer"].max()))
    axes = [fig.add_subplot(a) for a in cell.subgridspec(1, len(layers))]
    ratio = ds["residual_ratio"].mean("sample").clip(min=1e-300)
    drawn = ratio.sel(variant=[v for v in DRAWN if v in ds["variant"]], layer=layers)
    # one y range holding every drawn curve and band of the row (the panels share it)
    low, high = float(drawn.min()), float(drawn.max())
    for ax, layer in zip(axes, layers, strict=True):
        for v in [v for v in DRAWN if v in ds["variant"]]:
            _band(ax, ds["step"].values, ratio.sel(variant=v, layer=layer), v, colors[v])
        ax.set_yscale("log")
        ax.set_ylim(low / 2, high * 2)
        ax.yaxis.set_major_locator(LogLocator(numticks=6))
        _step_axis(ax)
        ax.set_title(f"layer {layer}", fontsize="small")
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel("relative residual\n" + RATIO_LABEL if ax is axes[0] else "", fontsize="small")
        if ax is not axes[0]:
            ax.sharey(axes[0])
            ax.tick_params(labelleft=False)
    return axes


def _phenomena_row(
    fig: plt.Figure, cell: Any, steps: np.ndarray, curves: list[xr.DataArray], color: str
) -> list[plt.Axes]:
    """The unmodified model's pretrained phenomena per checkpoint, ``curves`` in the order of
    :data:`PHENOMENA_PANELS` (dims ``seed``, ``revision``), one panel each, in the grid ``cell``."""
    axes = [fig.add_subplot(a) for a in cell.subgridspec(1, len(PHENOMENA_PANELS), wspace=0.3)]
    for ax, (_, _, title, label, scale), curve in zip(axes, PHENOMENA_PANELS, curves, strict=True):
        _band(ax, steps, curve, UNMODIFIED, color)
        if scale == "ratio":
            ax.set_yscale("log")
            low, high = ax.get_ylim()
            ax.set_ylim(min(low, 1.0), max(high, 10.0))
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        else:
            ax.set_ylim(-0.02, 1.02)
        _step_axis(ax)
        ax.set_title(title, fontsize="small")
        ax.set_ylabel(label, fontsize="x-small")
    return axes


def training_dynamics_figure(ds: xr.Dataset, model: str, share_threshold: float) -> plt.Figure:
    """Top row: the relative residual (mean over the input sequences; log y) of SAN, SAN+skip and the transformer at
    the first, middle and last layer against the training step, the mean over seeds with the seeds' range as a band.
    Middle row (where the transformer variant was analysed): its pretrained phenomena, each reduced over the layers
    (:data:`PHENOMENA_PANELS`): the largest massive ratio (Sun et al. 2024) and first-token norm ratio
    (Queipo-de-Llano et al. 2025), log y, and the lowest normalised matrix entropy (their compression valley).
    Bottom: the share of sink heads (mean attention on the first token above ``share_threshold``) averaged over the
    blocks, per variant; a revision serving an earlier one's weights is marked by a dotted line. ``ds``:
    :func:`san.rank_collapse.series.experiment.run_series`' or
    :func:`~san.rank_collapse.series.experiment.run_hub_series`' result."""
    ds = ds.isel(revision=np.argsort(ds["step"].values))
    variants = [v for v in DRAWN if v in ds["variant"]]
    colors = {v: variant_style(v)["color"] for v in DRAWN}
    # each measure reduced over the layers (san.rank_collapse.series.measures), read before the figure is drawn
    curves = [over_layers(ds, name, over) for name, over, *_ in PHENOMENA_PANELS] if has_unmodified(ds) else []
    n_layers = len(drawn_layers(int(ds["layer"].max())))
    fig = plt.figure(figsize=figsize(3, 3, aspect=0.85) if curves else figsize(n_layers, 2, aspect=0.9))
    fig.suptitle(f"Training dynamics of {model}" + (f"; middle row: the {UNMODIFIED} variant" if curves else ""),
                 fontsize="small")  # fmt: skip
    grid = fig.add_gridspec(3 if curves else 2, 1)
    top = _residual_row(fig, grid[0], ds, model, colors)
    middle = _phenomena_row(fig, grid[1], ds["step"].values, curves, colors[UNMODIFIED]) if curves else []
    bottom = fig.add_subplot(grid[-1])
    share = sink_share(ds["first_token_attention"], share_threshold).mean("layer", skipna=True)
    for v in variants:
        _band(bottom, ds["step"].values, share.sel(variant=v), v, colors[v])
    _step_axis(bottom)
    for ax in [*middle, bottom]:
        ax.set_xlim(top[0].get_xlim())  # the same step axis as the residual panels
    bottom.set_ylim(-0.02, 1.02)
    bottom.set_ylabel(f"share of heads with attention\non the first token $> {share_threshold:g}$", fontsize="small")
    none = " (no sink head at any step)" if float(share.max()) == 0 else ""
    bottom.set_title(f"attention sinks, mean over the blocks{none}", fontsize="small")
    _mark_duplicates([*top, *middle, bottom], ds)
    legend_of_panels(fig, [*top, bottom], ncol=4)
    return fig
