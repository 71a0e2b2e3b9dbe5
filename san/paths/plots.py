"""Figures of the path-effectiveness experiment (the paper's Fig. 4), drawn with seaborn.

Only the ``.nc`` results are read: restyling never reruns training or evaluation.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from san.core.plotting import COLUMN_IN, PALETTE, figsize, legend_of_panels  # noqa: E402
from san.paths.table import seed_band, task_name, task_title  # noqa: E402


def _band_line(ax: plt.Axes, acc: xr.DataArray, x, color, label: str, marker: str, lw: float, ls: str = "-") -> None:
    """A curve over path length: the mean over seeds (and repeats, if any) with the seeds' range as a band (each
    seed's mean over the repeats, lowest to highest)."""
    per_seed = acc.mean("repeat") if "repeat" in acc.dims else acc
    mean, low, high = seed_band(per_seed)
    ax.plot(x, mean, marker=marker, markersize=3.5, lw=lw, ls=ls, color=color, label=label)
    ax.fill_between(x, low, high, color=color, alpha=0.3, lw=0)


def _level(ax: plt.Axes, da: xr.DataArray, color: str, ls: str, label: str) -> None:
    """A horizontal level: the mean over seeds, the seeds' range as a band."""
    mean, low, high = seed_band(da)
    ax.axhline(float(mean), color=color, lw=1.2, ls=ls, label=label)
    if float(high) > float(low):
        ax.axhspan(float(low), float(high), color=color, alpha=0.12, lw=0)


def path_effectiveness_figure(datasets: Sequence[xr.Dataset], titles: Mapping[str, str] | None = None) -> plt.Figure:
    """Fig. 4 layout: one panel per task; for each number of paths the accuracy of path sets of each length, mean
    over seeds and repeats with the seeds' range (lowest to highest seed's mean over repeats) as a band, and the full
    model (mean, seeds' range) and the chance level as horizontal lines. ``titles``: panel titles by task name (see
    :func:`task_title`)."""
    fig, axes = plt.subplots(1, len(datasets), figsize=figsize(len(datasets), aspect=1.9), squeeze=False, sharey=True,
                             layout="constrained")  # fmt: skip
    palette = PALETTE
    # the bands' legend entry (every band is the seeds' range of its curve, in the curve's colour)
    axes[0][0].fill_between([np.nan], [np.nan], [np.nan], color="0.5", alpha=0.3, lw=0, label="band: the seeds' range")
    for ax, ds in zip(axes[0], datasets, strict=True):
        n_values = [int(n) for n in ds["n_paths"].values]
        k = ds["path_length"].values
        offsets = np.linspace(-0.08, 0.08, len(n_values)) if len(n_values) > 1 else [0.0]
        for i, (n, dx) in enumerate(zip(n_values, offsets, strict=True)):
            _band_line(ax, ds["accuracy"].sel(n_paths=n), k + dx, palette[i], f"{n} paths", "o", 1.3)
        _level(ax, ds["full_model_accuracy"], "black", "-", "full model")
        _level(ax, ds["chance_accuracy"], "grey", "--", "input-blind predictor")
        ax.set_title(_wrapped(task_title(ds, titles)), fontsize="small")
        ax.set_xlabel("path length $k$")
        ax.set_xticks(k)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.set_ylabel("token accuracy" if ax is axes[0][0] else "")
    legend_of_panels(fig, list(axes[0]), ncol=4)
    return fig


def _wrapped(title: str, width: int = 22) -> str:
    """A panel title broken into lines of about ``width`` characters, so that it stays within its panel."""
    return "\n".join(textwrap.wrap(title, width)) or title


def path_length_distribution_figure(ds: xr.Dataset) -> plt.Figure:
    """Share of paths of each length, ``C(L,k) H^k / (H+1)^L``, per architecture, on a log path-length axis
    (lengths from 1; the length-0 path's share ``(H+1)^-L`` is negligible for every listed architecture).

    One column wide; the legend below the panel names each architecture with its ``layers x heads`` in two columns
    (line style: solid for the paper's architectures, dashed for the configured model, dotted for the paths task).
    """
    fig, ax = plt.subplots(figsize=figsize(width=COLUMN_IN, aspect=0.7), layout="constrained")
    names = list(ds["architecture"].values)
    palette = [PALETTE[i % len(PALETTE)] for i in range(len(names))]
    styles = {"paper": "-", "config model": "--", "paths task": ":"}
    for color, name in zip(palette, names, strict=True):
        share = ds["share"].sel(architecture=name)
        share = share.where(share["path_length"] >= 1).dropna("path_length")
        arch = ds.sel(architecture=name)
        ax.plot(
            share["path_length"],
            share,
            color=color,
            ls=styles.get(str(arch["source"].values), "-"),
            lw=1.4,
            label=f"{name} {int(arch['n_layers'])}\u00d7{int(arch['n_heads'])}",
        )
    ax.set_xscale("log")
    ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500) if t <= int(ds["path_length"].max())]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("path length")
    ax.set_ylabel("share of paths")
    fig.legend(
        *ax.get_legend_handles_labels(),
        loc="outside lower center",
        ncol=2,
        fontsize="x-small",
        handlelength=1.8,
        columnspacing=1.0,
        labelspacing=0.3,
        frameon=False,
        title="architecture, layers \u00d7 heads",
        title_fontsize="x-small",
    )
    return fig


def _norm_share_panel(top: plt.Axes, ds: xr.Dataset, palette: list, first: bool) -> None:
    """Norm share by path length, trained and initial weights as bars (mean over seeds, the seeds' range as error
    bars), with the share of paths of each length as dots."""
    from san.paths.spec import path_length_shares

    k = ds["path_length"].values
    share = ds["norm_share"].to_dataframe().reset_index()
    sns.barplot(
        share,
        x="path_length",
        y="norm_share",
        hue="state",
        hue_order=["trained", "init"],
        palette=[palette[0], palette[5]],
        ax=top,
        legend=first,
        errorbar=("pi", 100) if "seed" in share else None,
    )
    top.plot(
        k,
        path_length_shares(int(ds.attrs["n_layers"]), int(ds.attrs["n_heads"])),
        "k.",
        ms=6,
        label="share of paths",
    )
    top.set_xlabel("")
    top.set_ylabel("share\n(norm; paths)" if first else "")


def path_decomposition_figure(
    exact_datasets: Sequence[xr.Dataset],
    sampled_datasets: Sequence[xr.Dataset] = (),
    titles: Mapping[str, str] | None = None,
) -> plt.Figure:
    """Exact path-length decomposition, one column per task (:mod:`san.paths.decomposition`).

    Top: the norm share ``||Y_k|| / sum_j ||Y_j||`` of each path length, trained and initial weights as bars, with
    the share of paths of that length ``C(L,k) H^k / (H+1)^L`` as markers. Bottom: token accuracy of the truncated
    expansion ``C + sum_{k<=K} Y_k`` (trained) and of single lengths ``C + Y_k``, over the sampled protocol's
    accuracy of sets of the largest number of paths of length k (the task's ``sampled_datasets`` entry, matched by
    task name, if given), with the full model and the input-blind predictor as horizontal lines. Every quantity is
    the mean over seeds; bars carry the seeds' range as error bars, curves and levels as bands.
    """

    sampled = {task_name(ds): ds for ds in sampled_datasets}
    n = len(exact_datasets)
    fig, axes = plt.subplots(2, n, figsize=figsize(n, 2, aspect=0.8 if n > 1 else 0.7), squeeze=False, sharex="col",
                             sharey="row", layout="constrained")  # fmt: skip
    palette = PALETTE
    for col, ds in enumerate(exact_datasets):
        top, bottom = axes[0][col], axes[1][col]
        k = ds["path_length"].values
        _norm_share_panel(top, ds, palette, col == 0)
        top.set_title(_wrapped(task_title(ds, titles)), fontsize="small")
        # barplot puts categories at 0..L, the same positions as the path lengths
        trained = ds.sel(state="trained")
        _band_line(bottom, trained["truncated_accuracy"], k, palette[0], "exact: all paths up to length $k$", "o", 1.5)
        _band_line(
            bottom, trained["single_length_accuracy"], k, palette[2], "exact: paths of length $k$ only", "s", 1.2, "--"
        )
        if task_name(ds) in sampled:
            sds = sampled[task_name(ds)]
            n_paths = int(sds["n_paths"].max())
            acc = sds["accuracy"].sel(n_paths=n_paths)
            label = f"sampled: {n_paths} paths of length $k$"
            _band_line(bottom, acc, acc["path_length"].values, palette[1], label, "^", 1.0)
        _level(bottom, trained["full_accuracy"], "black", "-", "full model")
        if "chance_accuracy" in ds:
            _level(bottom, ds["chance_accuracy"], "grey", "--", "input-blind predictor")
        bottom.set_xticks(k, [str(int(v)) for v in k])
        bottom.set_xlabel("path length $k$")
        bottom.set_ylabel("token\naccuracy" if col == 0 else "")
    legend_of_panels(fig, [axes[0][0], axes[1][0]], ncol=3 if n > 1 else 2, fontsize="small")
    return fig
