"""Figures of the propagation sweeps (seaborn), read from the ``results/propagation/<sweep>.nc`` datasets only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr

from san.core.plotting import DOUBLE_IN, figsize, legend_outside, save
from san.propagation.results import fixed_params, predicted_critical_beta
from san.propagation.spec import PARAMS


def _at_largest(ds: xr.Dataset, keep: Sequence[str]) -> xr.Dataset:
    """Select the last (largest) value of every grid dimension not in ``keep`` (and not layer/seed); a dimension of
    ``keep`` that the sweep fixed instead of sweeping comes back with its one fixed value, so every panel layout
    works for any grid of the config."""
    fixed = {**PARAMS, **fixed_params(ds)}
    missing = {d: [fixed[d]] for d in keep if d not in ds.dims}
    ds = ds.expand_dims(missing) if missing else ds
    sel = {d: ds[d].values[-1] for d in ds.dims if d not in (*keep, "layer", "seed")}
    return ds.sel(sel)


def _facet_height(ds: xr.Dataset, col: str, aspect: float, most: float) -> float:
    """Panel height of a seaborn grid with a column per value of ``col`` so that the row spans :data:`DOUBLE_IN`."""
    return min(most, DOUBLE_IN / (ds.sizes.get(col, 1) * aspect))


def _frame(da: xr.DataArray, name: str) -> pd.DataFrame:
    return da.to_dataframe(name=name).reset_index()


def plot_depth(ds: xr.Dataset, paths: Sequence[str | Path]) -> None:
    """Cosine against depth, a panel per residual scaling (rows) x normalisation (columns), a colour per beta, at
    the largest width and sequence length; dashed: the Giorlandino & Goldt recursion (post-LN)."""
    sub = _at_largest(ds, ("residual", "norm", "beta"))
    df = _frame(sub["cosine"], "cosine")
    df["beta"] = df["beta"].map(lambda b: f"beta={b:g}")
    g = sns.relplot(
        data=df, x="layer", y="cosine", hue="beta", row="residual", col="norm", kind="line",
        errorbar=("pi", 100), height=_facet_height(sub, "norm", 1.4, 2.2), aspect=1.4,
        facet_kws={"margin_titles": True},
    )  # fmt: skip
    for (res, norm), ax in g.axes_dict.items():
        for i, beta in enumerate(sub["beta"].values):
            curve = sub["theory_cosine"].sel(residual=res, norm=norm, beta=beta)
            if np.isfinite(curve).any():
                ax.plot(sub["layer"], curve, ls="--", color=sns.color_palette()[i], lw=1)
        ax.set_ylim(-0.05, 1.05)
    size = ", ".join(f"{k}={ds[k].values[-1]}" for k in ("width", "seq_len") if k in ds.dims)
    g.figure.suptitle(f"token cosine vs depth ({size}); dashed: G&G recursion", y=1.02)
    save(g.figure, paths)


def plot_qk_variance(ds: xr.Dataset, paths: Sequence[str | Path]) -> None:
    """Last-layer cosine and attention participation against beta (log x), a colour per sequence length T:
    simulation (mean, min-max over seeds), dashed the recursion at the same finite T, dotted the infinite-T
    recursion; the vertical line is the infinite-T critical beta* at this depth (largest T)."""
    depth = int(ds.sizes["layer"] - 1)
    if "seq_len" not in ds.dims:
        ds = ds.expand_dims(seq_len=[int({**PARAMS, **fixed_params(ds)}["seq_len"])])
    last = ds.isel(layer=-1)
    palette = dict(zip(ds.seq_len.values, sns.color_palette(n_colors=ds.sizes["seq_len"]), strict=True))
    fig, axes = plt.subplots(1, 2, figsize=figsize(2, aspect=0.7))
    for ax, var, curves in (
        (axes[0], "cosine", ("finite_cosine", "theory_cosine")),
        (axes[1], "attention_overlap", ("finite_recursion_overlap", "recursion_overlap")),
    ):
        df = _frame(last[var], var)
        sns.lineplot(data=df, x="beta", y=var, hue="seq_len", palette=palette, errorbar=("pi", 100), marker="o", ax=ax)
        for seq_len, colour in palette.items():
            for curve, ls in zip(curves, ("--", ":"), strict=True):
                if curve in last:
                    ax.plot(ds.beta, last[curve].sel(seq_len=seq_len), ls=ls, color=colour, lw=1)
    crit = predicted_critical_beta(ds.isel(seq_len=-1))
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xticks(ds.beta.values, [f"{b:g}" for b in ds.beta.values])
        ax.minorticks_off()
        if np.isfinite(crit):
            ax.axvline(crit, color="r", lw=0.8, label="infinite-T beta*")
    axes[0].set_ylabel(f"cosine at layer {depth}")
    axes[1].set_ylabel(f"mean sum_j A_ij^2 at layer {depth}")
    legend_outside(axes[1])
    axes[0].get_legend().remove()
    save(fig, paths)


def plot_masks(ds: xr.Dataset, paths: Sequence[str | Path]) -> None:
    """Wu et al.'s Fig. 2 at random init: against depth on log-log axes, a colour per mask (complete, causal, sliding,
    one-directional sliding), a column per normalisation; top row mu(X) = ||X - 1 mean^T||_F as the paper defines
    it (absolute: it also falls when the token norms shrink), bottom row the scale-free relative residual (falls only
    when the tokens become equal); line style: the input kind where the sweep varies it."""
    style = "input" if "input" in ds.dims else None
    sub = _at_largest(ds.isel(layer=slice(1, None)), ("mask", "norm") + ((style,) if style else ()))
    frames = []
    for var, label in (("mu", "mu(X)"), ("relative_residual", "relative residual")):
        if var in sub:
            df = _frame(sub[var], "value")
            df["quantity"] = label
            frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    g = sns.relplot(
        data=df, x="layer", y="value", hue="mask", style=style, col="norm", row="quantity", kind="line",
        errorbar=("pi", 100), height=_facet_height(sub, "norm", 1.2, 3.0), aspect=1.2,
        facet_kws={"sharey": "row", "margin_titles": True},
    )  # fmt: skip
    for ax in g.axes.flat:
        ax.set_xscale("log")
        ax.set_yscale("log")
    save(g.figure, paths)


def plot_sequence_length(ds: xr.Dataset, paths: Sequence[str | Path]) -> None:
    """Stable rank after the last layer against T, A versus A - 11^T/T, a panel per residual x norm (Mind the Gap)."""
    last = _at_largest(ds.isel(layer=-1), ("seq_len", "centred", "residual", "norm"))
    df = _frame(last["stable_rank"], "stable rank")
    df["attention"] = df["centred"].map({0: "A", 1: "A - 11^T/T"})
    g = sns.relplot(
        data=df, x="seq_len", y="stable rank", hue="attention", row="residual", col="norm", kind="line",
        marker="o", errorbar=("pi", 100), height=_facet_height(last, "norm", 1.3, 2.4), aspect=1.3,
        facet_kws={"margin_titles": True},
    )  # fmt: skip
    for ax in g.axes.flat:
        ax.set_yscale("log")
    g.figure.suptitle(f"stable rank after {int(ds.sizes['layer'] - 1)} layers (d = T)", y=1.02)
    save(g.figure, paths)


PLOTS = {
    "depth": plot_depth,
    "qk_variance": plot_qk_variance,
    "masks": plot_masks,
    "sequence_length": plot_sequence_length,
}
