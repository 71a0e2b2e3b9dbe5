"""The pretrained phenomena's figure: models x claims, each cell coloured by the claim's verdict on that model alone
(holds, fails, no power, not judged, n/a) and labelled with its statistic and caveat markers,
from results/phenomena/table.nc."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from san.claims.caveats import MARKERS, ORDER
from san.core.markdown import fmt
from san.core.plotting import DOUBLE_IN
from san.phenomena.spec import CELL_STATES

#: one colour per state of :data:`~san.phenomena.spec.CELL_STATES`: holds, fails, no power, not judged, n/a
COLOURS = ("#4c9a5a", "#c4473a", "#e0a030", "#b8b8b8", "#f2f2f2")


def phenomena_figure(ds: xr.Dataset) -> plt.Figure:
    """A grid of models (rows, with their kind) by claims (columns, their short labels): each cell's colour is its
    verdict, its text the statistic (none where the claim is not judged or not about that kind of model)."""
    models, labels = list(map(str, ds["model"].values)), list(map(str, ds["label"].values))
    codes = np.asarray(ds["verdict"].transpose("model", "claim").values, dtype=int)
    fig, ax = plt.subplots(figsize=(DOUBLE_IN, 0.5 + 0.4 * len(models)))
    ax.imshow(codes, cmap=ListedColormap(COLOURS), vmin=-0.5, vmax=len(COLOURS) - 0.5, aspect="auto")
    values = ds["value"].transpose("model", "claim").values
    marks = ds["caveats"].transpose("model", "claim").values if "caveats" in ds else np.full(codes.shape, "")
    for i, j in np.ndindex(codes.shape):
        text = fmt(float(values[i, j])) if np.isfinite(values[i, j]) else ""
        text = f"{text} [{marks[i, j]}]".strip() if marks[i, j] else text
        if text:
            ax.text(j, i, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    kinds = list(map(str, ds["kind"].values))
    ax.set_yticks(range(len(models)), [f"{m} ({k})" for m, k in zip(models, kinds, strict=True)])
    ax.grid(False)
    handles = [Patch(facecolor=c, edgecolor="0.5", label=s) for s, c in zip(CELL_STATES, COLOURS, strict=True)]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), bbox_to_anchor=(0.5, 1.0), frameon=False)
    shown = sorted({m for cell in marks.ravel() for m in str(cell).split(", ") if m})
    if shown:
        legend = "; ".join(f"{m}: {MARKERS[m]}" for m in ORDER if m in shown)
        fig.text(0.01, -0.02, f"caveats: {legend}", fontsize=6, ha="left", va="top", wrap=True)
    return fig
