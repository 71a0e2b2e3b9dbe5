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

TASK_TITLES = {"sorting": "Sorting", "convex_hull": "Convex hull", "memorization": "Memorization"}


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


def path_effectiveness_figure(datasets: Sequence[xr.Dataset], titles: Mapping[str, str] | None = None) -> plt.Figure:
    """Fig. 4 layout: one panel per task; for each number of paths the mean +- std over repeats of the accuracy of
    path sets of each length, with the full model and the chance level as horizontal lines. ``titles``: panel
    titles by task name (see :func:`task_title`)."""
    fig, axes = plt.subplots(1, len(datasets), figsize=(3.4 * len(datasets), 3.0), squeeze=False)
    palette = sns.color_palette("colorblind")
    for ax, ds in zip(axes[0], datasets, strict=True):
        n_values = [int(n) for n in ds["n_paths"].values]
        k = ds["path_length"].values
        offsets = np.linspace(-0.08, 0.08, len(n_values)) if len(n_values) > 1 else [0.0]
        for i, (n, dx) in enumerate(zip(n_values, offsets, strict=True)):
            acc = ds["accuracy"].sel(n_paths=n)
            ax.errorbar(
                k + dx,
                acc.mean("repeat"),
                yerr=acc.std("repeat"),
                marker="o",
                markersize=3.5,
                capsize=2.5,
                lw=1.3,
                color=palette[i],
                label=f"{n} paths",
            )
        ax.axhline(float(ds["full_model_accuracy"]), color="black", lw=1.2, label="entire model")
        ax.axhline(float(ds["chance_accuracy"]), color="grey", lw=1.2, ls="--", label="input-blind predictor")
        ax.set_title(task_title(ds, titles))
        ax.set_xlabel("path length")
        ax.set_xticks(k)
        ax.set_ylabel("token accuracy" if ax is axes[0][0] else "")
    handles, labels = axes[0][0].get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: (not labels[i].endswith("paths"), i))  # path sets first
    fig.legend(
        [handles[i] for i in order],
        [labels[i] for i in order],
        loc="upper center",
        ncol=len(labels),
        bbox_to_anchor=(0.5, 1.08),
        frameon=False,
    )
    fig.tight_layout()
    return fig


def path_length_distribution_figure(ds: xr.Dataset) -> plt.Figure:
    """Share of paths of each length, ``C(L,k) H^k / (H+1)^L``, per architecture, on a log path-length axis
    (lengths from 1; the length-0 path's share ``(H+1)^-L`` is negligible for every listed architecture)."""
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
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
            label=f"{name} (L={int(arch['n_layers'])}, H={int(arch['n_heads'])})",
        )
    ax.set_xscale("log")
    ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500) if t <= int(ds["path_length"].max())]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("path length")
    ax.set_ylabel("share of paths")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig
