"""Figure of the theorem check: measured residual vs the nominal bound per layer, and the exponent (seaborn)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr

from san.core.plotting import PALETTE, figsize


def _scale_label(scale: float) -> str:
    """A weight scale in words: ``"scale 10^4"``, not ``"scale 10000.0"``."""
    exponent = np.log10(scale)
    return f"scale $10^{{{exponent:.0f}}}$" if np.isclose(exponent, round(exponent)) else f"scale {scale:g}"


def _scale_styles(scales: np.ndarray) -> dict[str, dict]:
    """One colour and marker per weight scale, the same in both panels."""
    return {
        _scale_label(s): {"color": PALETTE[i % len(PALETTE)], "marker": "osD^v<>p"[i % 8]} for i, s in enumerate(scales)
    }


def plot_theorem(ds: xr.Dataset) -> plt.Figure:
    """Theorem 2.2 against its measurements, on the theorem's own setting only (no LayerNorm: the theorem excludes
    it; its pairs are judged in their own table). Left: measured :math:`\\|res(X_l)\\|_{1,\\infty}` against the nominal
    one-layer bound :math:`(4H\\beta_l/\\sqrt{d_{qk}})\\, r_{l-1}^3` per layer pair (log-log; pairs at the float64 floor
    excluded), with the line where they are equal. Right: :math:`\\log s_l / \\log s_{l-1}` against
    :math:`s_{l-1}` (the theorem: at least 3 as :math:`s \\to 0`). A colour and marker per weight scale in both.
    Bottom: the distributions of :math:`\\log_{10}\\gamma` (:func:`plot_gamma`)."""
    theorem = ds.sel(layernorm=0)
    valid = theorem["verdict"].isin([0, 1, -1])
    df = (
        xr.Dataset({"measured": theorem["residual"].where(valid), "bound": theorem["bound"].where(valid)})
        .to_dataframe()
        .reset_index()
        .dropna()
    )
    scales = np.unique(ds["scale"].values)
    styles = _scale_styles(scales)
    df["weights"] = df["scale"].map(_scale_label)
    fig = plt.figure(figsize=figsize(2, 2, aspect=0.75), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[1.0, 0.6])
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
    ax = axes[0]
    for label, part in df.groupby("weights", sort=False):
        ax.scatter(part["bound"], part["measured"], s=14, alpha=0.8, label=label, **styles[label])
    if len(df):
        lim = [np.nanmin(df[["bound", "measured"]].values), np.nanmax(df[["bound", "measured"]].values)]
        ax.plot(lim, lim, color="black", lw=0.8, ls="--", label="measured = bound")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.margins(0.05)
    ax.set_xlabel(r"bound $(4H\beta_l/\sqrt{d_{qk}})\,r_{l-1}^3$")
    ax.set_ylabel(r"measured $\|res(X_l)\|_{1,\infty}$")
    ax.set_title("residual against the bound")
    s_prev = np.sqrt(4 * theorem["beta"].shift(layer=-1) / np.sqrt(theorem["d_qk"])) * theorem["residual"]
    s_prev = s_prev.isel(layer=slice(0, -1)).rename(layer="layer_pair")
    s_prev = s_prev.assign_coords(layer_pair=ds["layer_pair"].values)
    ef = xr.Dataset({"s": s_prev, "exponent": theorem["exponent_scaled"].where(theorem["near_limit"] > -1)})
    pair_valid = valid.isel(layer=slice(1, None)).rename(layer="layer_pair")
    ef = ef.where(pair_valid.assign_coords(layer_pair=ds["layer_pair"].values)).to_dataframe().reset_index().dropna()
    ef = ef[(ef["s"] < 0.5) & np.isfinite(ef["exponent"])]
    ef["weights"] = ef["scale"].map(_scale_label)
    for label, part in ef.groupby("weights", sort=False):
        axes[1].scatter(part["s"], part["exponent"], s=14, alpha=0.8, **styles[label])
    axes[1].axhline(3, color="black", lw=0.8, ls=":", label="theorem's limit: 3")
    axes[1].set_ylim(0, max(10.0, float(ef["exponent"].quantile(0.95)) * 1.1) if len(ef) else 10.0)
    axes[1].set_xscale("log")
    axes[1].set_xlabel(r"$s_{l-1} = \sqrt{4H\beta_l/\sqrt{d_{qk}}}\,r_{l-1}$")
    axes[1].set_ylabel(r"exponent $\log s_l / \log s_{l-1}$")
    axes[1].set_title("empirical exponent")
    plot_gamma(ds, axes[2])
    handles, labels = axes[0].get_legend_handles_labels()
    more, more_labels = axes[1].get_legend_handles_labels()
    more += axes[2].get_legend_handles_labels()[0]
    more_labels += axes[2].get_legend_handles_labels()[1]
    fig.legend(handles + more, labels + more_labels, loc="outside lower center", ncol=3, frameon=False)
    return fig


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
    theorem's sources should stay left of it, the negative controls cross it. One neutral colour: the rows name the
    sources, and the palette's colours mean the scale in the panels above."""
    df = gamma_frame(ds)
    sns.stripplot(data=df, x="log10_gamma", y="source", color="0.35", ax=ax, size=2.5, alpha=0.6)
    ax.axvline(0.0, color="black", lw=0.8, ls="-.", label=r"nominal bound, $\gamma = 1$")
    ax.set_xlabel(r"$\log_{10}\gamma$ the data need")
    ax.set_ylabel("draws")
    ax.set_title(r"the $\gamma$ each source needs (right of the line: the nominal bound fails)")
