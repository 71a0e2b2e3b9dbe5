"""The training-dynamics figure: rank collapse and the first-token sink along a checkpoint series."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from san.core.plotting import figsize, legend_below  # noqa: E402
from san.core.sink import sink_share  # noqa: E402
from san.rank_collapse.plots import RATIO_LABEL  # noqa: E402
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


def training_dynamics_figure(ds: xr.Dataset, model: str, share_threshold: float) -> plt.Figure:
    """Top row: the relative residual (mean over the input sequences; log y) of SAN, SAN+skip and the transformer at
    the first, middle and last layer against the training step, the mean over seeds with the seeds' range as a band.
    Bottom: the share of sink heads (mean attention on the first token above ``share_threshold``) averaged over the
    blocks, per variant; a revision serving an earlier one's weights is marked by a dotted line. ``ds``:
    :func:`san.rank_collapse.series.experiment.run_series`' or
    :func:`~san.rank_collapse.series.experiment.run_hub_series`' result."""
    order = np.argsort(ds["step"].values)
    ds = ds.isel(revision=order)
    steps = ds["step"].values
    layers = drawn_layers(int(ds["layer"].max()))
    variants = [v for v in DRAWN if v in ds["variant"]]
    colors = dict(zip(DRAWN, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    fig = plt.figure(figsize=figsize(len(layers), aspect=1.2))
    grid = fig.add_gridspec(2, len(layers))
    top = [fig.add_subplot(grid[0, i]) for i in range(len(layers))]
    ratio = ds["residual_ratio"].mean("sample").clip(min=1e-300)
    for ax, layer in zip(top, layers, strict=True):
        for v in variants:
            _band(ax, steps, ratio.sel(variant=v, layer=layer), v, colors[v])
        ax.set_yscale("log")
        _step_axis(ax)
        ax.set_title(f"{model}, layer {layer}")
        ax.set_ylabel(RATIO_LABEL if ax is top[0] else "")
    bottom = fig.add_subplot(grid[1, :])
    share = sink_share(ds["first_token_attention"], share_threshold).mean("layer", skipna=True)
    for v in variants:
        _band(bottom, steps, share.sel(variant=v), v, colors[v])
    _step_axis(bottom)
    bottom.set_xlim(top[0].get_xlim())  # the same step axis as the panels above
    bottom.set_ylim(-0.02, 1.02)
    bottom.set_ylabel(f"share of heads with\nattention on token 1 > {share_threshold:g}")
    _mark_duplicates([*top, bottom], ds)
    bottom.legend()
    fig.tight_layout()
    legend_below(fig, bottom)
    return fig
