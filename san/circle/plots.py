"""Figures of the circle experiment (the paper's Fig. 3), drawn with seaborn from ``results/circle.nc``.

- :func:`trajectory_figure`: the paper's grid (rows: variants, columns: hidden dimension) of the two trajectories of
  the recurrent rollout over the two training sequences drawn lightly in the background;
- :func:`distance_figure`: distance between the two tokens against the recurrent step, mean and spread over seeds;
- :func:`loss_figure`: training loss per epoch, mean and spread over seeds.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
import xarray as xr  # noqa: E402

from san.core.plotting import PALETTE, figsize, legend_below, legend_of_panels, variant_palette  # noqa: E402


def _variant_label(ds: xr.Dataset, variant: str) -> str:
    """Variant name with its switches, e.g. ``SAN+skip (layer skip, step skip)``."""
    on = [k.replace("_", " ") for k in ("layer_skip", "step_skip", "mlp") if int(ds[k].sel(variant=variant))]
    return f"{variant} ({', '.join(on) if on else 'pure attention'})"


def _trajectory_panel(ax: plt.Axes, ds: xr.Dataset, traj: xr.DataArray, colors: list) -> None:
    """One panel of :func:`trajectory_figure`: the two training sequences in light grey, and each token's rollout
    ``traj`` ``(step, token, coord)`` with its start (o) and end (x)."""
    seq = ds["sequence"]
    for tok in range(seq.sizes["token"]):
        s = seq.sel(token=tok)
        ax.plot(s.sel(coord="x"), s.sel(coord="y"), color="0.8", lw=3, solid_capstyle="round", zorder=1)
    for tok in range(traj.sizes["token"]):
        t = traj.sel(token=tok)
        x, y = t.sel(coord="x").values, t.sel(coord="y").values
        ax.plot(x, y, "-", color=colors[tok], lw=0.8, marker=".", ms=2, zorder=2, label=f"token {tok + 1}")
        ax.plot(x[0], y[0], "o", color=colors[tok], ms=5, mec="k", mew=0.5, zorder=3)
        ax.plot(x[-1], y[-1], "X", color=colors[tok], ms=6, mec="k", mew=0.5, zorder=3)


def trajectory_figure(ds: xr.Dataset, seed: int | None = None, axis_limit: float | None = 0.6) -> plt.Figure:
    """The paper's Fig. 3 grid for one ``seed`` (default: the first): per variant (row) and hidden dim (column),
    the two tokens' trajectories of the recurrent rollout, over the two training sequences in light grey; each panel's
    title names the token distance at the last step.

    ``axis_limit`` is the smallest half-width of every panel around the centre, widened to hold every trajectory of
    the seed (none leaves its panel); ``None`` fits each panel to its data.
    """
    seed = int(ds.seed.values[0]) if seed is None else int(seed)
    variants, dims = list(ds.variant.values), list(ds.hidden_dim.values)
    colors = [PALETTE[0], PALETTE[1]]
    fig, axes = plt.subplots(
        len(variants), len(dims), figsize=figsize(len(dims), len(variants), aspect=1.0), squeeze=False, sharex=True,
        sharey=True, layout="constrained",
    )  # fmt: skip
    last = int(ds.step.values[-1])
    extent = float(np.nanmax(np.abs(ds["trajectory"].sel(seed=seed).values))) * 1.08
    limit = None if axis_limit is None else max(float(axis_limit), extent)
    for i, v in enumerate(variants):
        for j, d in enumerate(dims):
            ax = axes[i][j]
            _trajectory_panel(ax, ds, ds["trajectory"].sel(variant=v, hidden_dim=d, seed=seed), colors)
            dist = float(ds["token_distance"].sel(variant=v, hidden_dim=d, seed=seed, step=last))
            if limit is not None:
                ax.set_xlim(-limit, limit)
                ax.set_ylim(-limit, limit)
            ax.set_aspect("equal", adjustable="box")
            ax.set_title(f"{_variant_label(ds, v)}\nhidden dim {int(d)}, distance {dist:.2g}", fontsize="x-small")
            ax.set_xlabel("first coordinate" if i == len(variants) - 1 else "")
            ax.set_ylabel("second coordinate" if j == 0 else "")
    legend_of_panels(fig, [axes[0][0]], ncol=2)
    fig.suptitle(f"Recurrent rollout of the trained layer, seed {seed}: o start, x step {last} (distance: between the "
                 f"two tokens at step {last})", fontsize="small")  # fmt: skip
    return fig


def _clipped_frame(da: xr.DataArray, floor: float, name: str) -> pd.DataFrame:
    """Long frame of ``max(da, floor)`` (column ``name``) with the array's coordinates as columns: the floor keeps
    exact zeros on a log axis."""
    return da.clip(min=floor).rename(name).to_dataframe().reset_index()


def distance_figure(ds: xr.Dataset, collapse_threshold: float | None = None) -> plt.Figure:
    """Token distance relative to its start, ``d_t / d_0``, against the recurrent step: one panel per hidden dim,
    one line per variant, mean and +-1 std over seeds computed in log10 space (a geometric mean), over thin lines
    of the single seeds.

    Values are clipped below at the float64 machine epsilon (exact collapse, distance 0, is drawn there); the
    dashed line is the collapse threshold of the table.
    """
    rel = ds["token_distance"] / ds["token_distance"].sel(step=0)
    floor = float(np.finfo(np.float64).eps)
    df = _clipped_frame(rel, floor, "distance")
    dims = list(ds.hidden_dim.values)
    order = [str(v) for v in ds.variant.values]
    fig, axes = plt.subplots(1, len(dims), figsize=figsize(len(dims), aspect=0.9), sharey=True, squeeze=False)
    for ax, d in zip(axes[0], dims, strict=True):
        ax.set_yscale("log")  # set first: seaborn then aggregates over seeds in log space (a geometric mean)
        lines = {"data": df[df["hidden_dim"] == d], "x": "step", "y": "distance", "hue": "variant", "hue_order": order}
        # every seed, thin: collapse is often all-or-nothing per seed; then mean and std over seeds
        lines["palette"] = variant_palette(order)
        sns.lineplot(**lines, units="seed", estimator=None, lw=0.5, alpha=0.35, ax=ax, legend=False)
        sns.lineplot(**lines, errorbar="sd", ax=ax, legend=ax is axes[0][-1], style="variant", markers=True,
                     markevery=max(1, int(df["step"].max()) // 10))  # fmt: skip
        if collapse_threshold is not None:
            ax.axhline(collapse_threshold, color="0.4", ls="--", lw=0.8)
        ax.axhline(floor, color="0.7", ls=":", lw=0.8)
        ax.set_title(f"hidden dim {int(d)}")
        ax.set_xlabel("recurrent step t")
        ax.set_ylabel(r"token distance $d_t / d_0$" if ax is axes[0][0] else "")
    fig.tight_layout()
    legend_below(fig, axes[0][-1])
    return fig


def loss_figure(ds: xr.Dataset) -> plt.Figure:
    """Training loss per epoch (summed squared error per example): one panel per hidden dim, one line per variant,
    mean and +-1 std over seeds in log10 space; the loss before training is drawn at epoch 0, and the dashed line
    is the loss of the copy predictor ``X_{t+1} = X_t`` that a model must beat to have learnt the step."""
    loss = xr.concat([ds["init_loss"].expand_dims(epoch=[0]), ds["loss"]], dim="epoch")
    df = _clipped_frame(loss, float(np.finfo(np.float64).tiny), "loss")
    dims = list(ds.hidden_dim.values)
    order = [str(v) for v in ds.variant.values]
    fig, axes = plt.subplots(1, len(dims), figsize=figsize(len(dims), aspect=0.9), sharey=True, squeeze=False)
    for ax, d in zip(axes[0], dims, strict=True):
        ax.set_yscale("log")  # set first: seaborn then aggregates over seeds in log space (a geometric mean)
        sns.lineplot(
            data=df[df["hidden_dim"] == d],
            x="epoch",
            y="loss",
            hue="variant",
            hue_order=order,
            palette=variant_palette(order),
            style="variant",
            markers=True,
            errorbar="sd",
            ax=ax,
            legend=ax is axes[0][-1],
        )
        if "copy_loss" in ds:
            ax.axhline(float(ds["copy_loss"]), color="0.4", ls="--", lw=0.8)
        ax.set_title(f"hidden dim {int(d)}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("training loss per example" if ax is axes[0][0] else "")
    fig.tight_layout()
    legend_below(fig, axes[0][-1])
    return fig
