"""Figures and the table of the path-effectiveness experiment (the paper's Fig. 4), drawn with seaborn.

Only the ``.nc`` results are read: restyling never reruns training or evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
import xarray as xr  # noqa: E402

from san.core.plotting import COLUMN_IN, figsize  # noqa: E402
from san.paths.spec import TASK_TITLES  # noqa: E402


def _task(ds: xr.Dataset) -> str:
    return str(ds.attrs.get("task", "task"))


def task_title(ds: xr.Dataset, titles: Mapping[str, str] | None = None) -> str:
    """Panel title of a task's results: ``titles[name]`` if given, else the task's title (a variant: followed by
    its name, e.g. "Sorting (sorting_10k)")."""
    name = _task(ds)
    if titles and titles.get(name):
        return titles[name]
    if name in TASK_TITLES:
        return TASK_TITLES[name]
    kind = str(ds.attrs.get("task_kind", name))
    return f"{TASK_TITLES.get(kind, kind)} ({name})"


def summary_table(datasets: Sequence[xr.Dataset]) -> pd.DataFrame:
    """One row per task: full-model and chance accuracy, then the mean accuracy over repeats for every
    (number of paths, path length) as columns ``acc_n{n_paths}_k{k}``."""
    rows = []
    for ds in datasets:
        row: dict[str, float | str] = {
            "task": _task(ds),
            "full_model": float(ds["full_model_accuracy"]),
            "chance": float(ds["chance_accuracy"]),
        }
        mean = ds["accuracy"].mean("repeat")
        for n in ds["n_paths"].values:
            for k in ds["path_length"].values:
                row[f"acc_n{int(n)}_k{int(k)}"] = float(mean.sel(n_paths=n, path_length=k))
        rows.append(row)
    return pd.DataFrame(rows).set_index("task")


def _repeats_errorbar(ax: plt.Axes, acc: xr.DataArray, x, color, label: str, marker: str, lw: float) -> None:
    """Accuracy by path length, mean +- std over the repeats of the sampled path sets."""
    ax.errorbar(
        x, acc.mean("repeat"), yerr=acc.std("repeat"), marker=marker, markersize=3.5, capsize=2.5, lw=lw,
        color=color, label=label,
    )  # fmt: skip


def path_effectiveness_figure(datasets: Sequence[xr.Dataset], titles: Mapping[str, str] | None = None) -> plt.Figure:
    """Fig. 4 layout: one panel per task; for each number of paths the mean +- std over repeats of the accuracy of
    path sets of each length, with the full model and the chance level as horizontal lines. ``titles``: panel
    titles by task name (see :func:`task_title`)."""
    fig, axes = plt.subplots(1, len(datasets), figsize=figsize(len(datasets), aspect=0.9), squeeze=False)
    palette = sns.color_palette("colorblind")
    for ax, ds in zip(axes[0], datasets, strict=True):
        n_values = [int(n) for n in ds["n_paths"].values]
        k = ds["path_length"].values
        offsets = np.linspace(-0.08, 0.08, len(n_values)) if len(n_values) > 1 else [0.0]
        for i, (n, dx) in enumerate(zip(n_values, offsets, strict=True)):
            _repeats_errorbar(ax, ds["accuracy"].sel(n_paths=n), k + dx, palette[i], f"{n} paths", "o", 1.3)
        ax.axhline(float(ds["full_model_accuracy"]), color="black", lw=1.2, label="entire model")
        ax.axhline(float(ds["chance_accuracy"]), color="grey", lw=1.2, ls="--", label="input-blind predictor")
        ax.set_title(task_title(ds, titles))
        ax.set_xlabel("path length")
        ax.set_xticks(k)
        ax.set_ylabel("token accuracy" if ax is axes[0][0] else "")
    handles, labels = axes[0][0].get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: (not labels[i].endswith("paths"), i))  # path sets first
    fig.tight_layout()
    fig.legend(
        [handles[i] for i in order],
        [labels[i] for i in order],
        loc="lower center",
        ncol=min(len(labels), 4),
        bbox_to_anchor=(0.5, 1.0),
        frameon=False,
    )
    return fig


def path_length_distribution_figure(ds: xr.Dataset) -> plt.Figure:
    """Share of paths of each length, ``C(L,k) H^k / (H+1)^L``, per architecture, on a log path-length axis
    (lengths from 1; the length-0 path's share ``(H+1)^-L`` is negligible for every listed architecture).

    One column wide; the legend below the panel names each architecture with its ``layers x heads`` in two columns
    (line style: solid for the paper's architectures, dashed for the configured model, dotted for the paths task).
    """
    fig, ax = plt.subplots(figsize=figsize(width=COLUMN_IN, aspect=0.7))
    names = list(ds["architecture"].values)
    palette = sns.color_palette("tab20" if len(names) > 10 else "tab10", len(names))
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
    fig.tight_layout()
    fig.legend(
        *ax.get_legend_handles_labels(),
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
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


def path_decomposition_figure(
    exact_datasets: Sequence[xr.Dataset],
    sampled_datasets: Sequence[xr.Dataset] = (),
    titles: Mapping[str, str] | None = None,
) -> plt.Figure:
    """Exact path-length decomposition, one column per task (:mod:`san.paths.decomposition`).

    Top: the norm share ``||Y_k|| / sum_j ||Y_j||`` of each path length, trained and initial weights as bars, with
    the share of paths of that length ``C(L,k) H^k / (H+1)^L`` as markers. Bottom: token accuracy of the truncated
    expansion ``C + sum_{k<=K} Y_k`` (trained) and of single lengths ``C + Y_k``, over the sampled protocol's
    accuracy of sets of the largest number of paths of length k (mean +- std over repeats; the task's
    ``sampled_datasets`` entry, matched by task name, if given), with the full model and the input-blind predictor
    as horizontal lines.
    """
    from san.paths.spec import path_length_shares

    sampled = {_task(ds): ds for ds in sampled_datasets}
    n = len(exact_datasets)
    fig, axes = plt.subplots(2, n, figsize=figsize(n, 2, aspect=0.8 if n > 1 else 0.7), squeeze=False, sharex="col")
    palette = sns.color_palette("colorblind")
    for col, ds in enumerate(exact_datasets):
        top, bottom = axes[0][col], axes[1][col]
        k = ds["path_length"].values
        share = ds["norm_share"].to_dataframe().reset_index()
        sns.barplot(
            share,
            x="path_length",
            y="norm_share",
            hue="state",
            hue_order=["trained", "init"],
            palette=[palette[0], palette[7]],
            ax=top,
            legend=col == 0,
        )
        top.plot(
            k,
            path_length_shares(int(ds.attrs["n_layers"]), int(ds.attrs["n_heads"])),
            "k.",
            ms=6,
            label="share of paths",
        )
        top.set_title(task_title(ds, titles))
        top.set_xlabel("")
        top.set_ylabel("norm share" if col == 0 else "")
        # barplot puts categories at 0..L, the same positions as the path lengths
        trained = ds.sel(state="trained")
        bottom.plot(
            k, trained["truncated_accuracy"], "o-", color=palette[0], lw=1.5, ms=4, label="exact: paths of length ≤ K"
        )
        bottom.plot(
            k,
            trained["single_length_accuracy"],
            "s--",
            color=palette[2],
            lw=1.2,
            ms=3.5,
            label="exact: paths of length k only",
        )
        if _task(ds) in sampled:
            sds = sampled[_task(ds)]
            n_paths = int(sds["n_paths"].max())
            acc = sds["accuracy"].sel(n_paths=n_paths)
            label = f"sampled: {n_paths} paths of length k"
            _repeats_errorbar(bottom, acc, acc["path_length"], palette[1], label, "^", 1.0)
        bottom.axhline(float(trained["full_accuracy"]), color="black", lw=1.2, label="entire model")
        if "chance_accuracy" in ds:
            bottom.axhline(float(ds["chance_accuracy"]), color="grey", lw=1.2, ls="--", label="input-blind predictor")
        bottom.set_xticks(k, [str(int(v)) for v in k])
        bottom.set_xlabel("path length k (K)")
        bottom.set_ylabel("token accuracy" if col == 0 else "")
    handles, labels = [], []
    for ax in (axes[0][0], axes[1][0]):
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    if axes[0][0].get_legend() is not None:
        axes[0][0].get_legend().remove()
    fig.tight_layout()
    fig.legend(handles, labels, loc="lower center", ncol=4 if n > 1 else 2, bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig
