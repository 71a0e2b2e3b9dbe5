"""Figure of the theorem check: measured residual vs the nominal bound per layer, and the exponent (seaborn)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr

from san.core.plotting import figsize, legend_outside, save


def plot_theorem(ds: xr.Dataset, paths: Sequence[str | Path], dpi: int = 150) -> None:
    """Left: measured ``res`` vs the nominal one-layer bound per layer (no LayerNorm, d_qk = max; log scale; pairs
    at the float64 floor excluded). Right: ``log s_l / log s_{l-1}`` against ``s_{l-1}`` (the theorem: >= 3 as
    ``s -> 0``). Bottom: the distributions of ``log10 gamma`` (:func:`plot_gamma`)."""
    valid = ds["verdict"].isin([0, 1, -1])
    df = (
        xr.Dataset({"measured": ds["residual"].where(valid), "bound": ds["bound"].where(valid)})
        .to_dataframe()
        .reset_index()
        .dropna()
    )
    fig = plt.figure(figsize=figsize(2, 2, aspect=0.8))
    grid = fig.add_gridspec(2, 2, height_ratios=[1.0, 0.6])
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
    ax = axes[0]
    sns.scatterplot(
        data=df,
        x="bound",
        y="measured",
        hue="scale",
        style="layernorm",
        palette="viridis",
        hue_norm=plt.matplotlib.colors.LogNorm(),
        ax=ax,
        s=18,
    )
    lim = [np.nanmin(df[["bound", "measured"]].values), np.nanmax(df[["bound", "measured"]].values)]
    ax.plot(lim, lim, color="black", lw=0.8, ls="--", label="measured = bound")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nominal bound (4 H beta / sqrt(d_qk)) r_{l-1}^3")
    ax.set_ylabel("measured ||res(X_l)||_{1,inf}")
    legend_outside(ax)
    s_prev = (np.sqrt(4 * ds["beta"].shift(layer=-1) / np.sqrt(ds["d_qk"])) * ds["residual"]).isel(layer=slice(0, -1))
    s_prev = s_prev.rename(layer="layer_pair").assign_coords(layer_pair=ds["layer_pair"].values)
    ef = xr.Dataset({"s": s_prev, "exponent": ds["exponent_scaled"].where(ds["near_limit"] > -1)})
    ef = (
        ef.where(
            valid.isel(layer=slice(1, None))
            .rename(layer="layer_pair")
            .assign_coords(layer_pair=ds["layer_pair"].values)
        )
        .to_dataframe()
        .reset_index()
        .dropna()
    )
    ef = ef[(ef["s"] < 0.5) & np.isfinite(ef["exponent"])]
    sns.scatterplot(data=ef, x="s", y="exponent", hue="layernorm", style="input", ax=axes[1], s=18)
    axes[1].axhline(3, color="black", lw=0.8, ls="--")
    axes[1].set_ylim(0, max(10.0, float(ef["exponent"].quantile(0.95))) if len(ef) else 10.0)
    axes[1].set_xscale("log")
    axes[1].set_xlabel("s_{l-1} = sqrt(4 H beta / sqrt(d_qk)) r_{l-1}")
    axes[1].set_ylabel("log s_l / log s_{l-1}")
    plot_gamma(ds, axes[2])
    fig.tight_layout()
    save(fig, paths, dpi=dpi)


def gamma_frame(ds: xr.Dataset) -> pd.DataFrame:
    """``log10 gamma`` per source: the random-weight pairs without LayerNorm above the float floor, the adversarial
    search's draws, and each negative control's draws (long format: ``source``, ``log10_gamma``)."""
    valid = ds["verdict"].isin([0, 1, -1]).sel(layernorm=0)
    parts = {"random weights": ds["log10_gamma_required"].sel(layernorm=0).where(valid).values.ravel()}
    if "log10_gamma_adversarial" in ds:
        parts["adversarial"] = ds["log10_gamma_adversarial"].values
        for c in ds["control"].values:
            parts[f"control: {c}"] = ds["log10_gamma_control"].sel(control=c).values
    frames = [pd.DataFrame({"source": k, "log10_gamma": v[np.isfinite(v)]}) for k, v in parts.items()]
    return pd.concat(frames, ignore_index=True)


def plot_gamma(ds: xr.Dataset, ax: plt.Axes) -> None:
    """Strip plot of the ``log10 gamma`` the data need, per source, with the nominal ``gamma = 1`` (dashed): the
    theorem's sources should stay left of it, the negative controls cross it."""
    df = gamma_frame(ds)
    sns.stripplot(data=df, x="log10_gamma", y="source", hue="source", ax=ax, size=2.5, alpha=0.6, legend=False)
    ax.axvline(0.0, color="black", lw=0.8, ls="--")
    ax.set_xlabel("log10 gamma needed")
    ax.set_ylabel("")
