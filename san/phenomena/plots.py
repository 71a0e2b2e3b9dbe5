"""The pretrained phenomena's figure: models x claims, each cell coloured by the claim's verdict on that model alone
(holds, fails, no power, not judged, n/a) and labelled with its statistic and caveat markers,
from results/phenomena/table.nc."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch, Rectangle

from san.claims.caveats import MARKERS, ORDER
from san.core.markdown import fmt
from san.core.plotting import DOUBLE_IN, OKABE_ITO
from san.phenomena.spec import CELL_STATES, NOT_APPLICABLE, STATISTICS

#: one colour per state of :data:`~san.phenomena.spec.CELL_STATES` (holds, fails, no power, not judged, n/a, within
#: quantisation drift), from Okabe & Ito's colour-blind-safe palette; "n/a" (the claim is not about that kind of
#: model) is hatched
COLOURS = (OKABE_ITO["bluish green"], OKABE_ITO["vermillion"], OKABE_ITO["yellow"], "#BBBBBB", "#FFFFFF",
           OKABE_ITO["sky blue"])  # fmt: skip
NOT_JUDGED_STATES = (3, 4)
"""The states of a cell without a verdict (not judged, n/a): a model with only these is left out of the grid."""


def phenomena_figure(ds: xr.Dataset) -> plt.Figure:
    """A grid of the models with at least one judged claim (rows, with their kind) by claims (columns, their short
    labels): each cell's colour is the claim's verdict on that model alone, its text the claim's statistic on it
    (none where the claim is not judged); "n/a" cells (the claim is not about that kind of model) hatched. The
    models left out (every cell not judged or n/a) are named under the grid."""
    codes_all = np.asarray(ds["verdict"].transpose("model", "claim").values, dtype=int)
    judged = ~np.isin(codes_all, NOT_JUDGED_STATES).all(axis=1)
    left_out = [str(m) for m, keep in zip(ds["model"].values, judged, strict=True) if not keep]
    ds = ds.isel(model=np.flatnonzero(judged)) if judged.any() else ds
    models, labels = list(map(str, ds["model"].values)), list(map(str, ds["label"].values))
    codes = np.asarray(ds["verdict"].transpose("model", "claim").values, dtype=int)
    fig, ax = plt.subplots(figsize=(DOUBLE_IN, 2.6 + 0.5 * len(models)), layout="constrained")
    ax.imshow(codes, cmap=ListedColormap(COLOURS), vmin=-0.5, vmax=len(COLOURS) - 0.5, aspect="auto")
    values = ds["value"].transpose("model", "claim").values
    marks = ds["caveats"].transpose("model", "claim").values if "caveats" in ds else np.full(codes.shape, "")
    for i, j in np.ndindex(codes.shape):
        if codes[i, j] == CELL_STATES.index(NOT_APPLICABLE):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.75", lw=0))
        text = fmt(float(values[i, j])) if np.isfinite(values[i, j]) else ""
        text = f"{text}\n[{marks[i, j]}]".strip() if marks[i, j] else text
        if text:
            ax.text(j, i, text, ha="center", va="center", fontsize=7)
    keys = list(map(str, ds["claim"].values))
    ticks = ["\n".join(textwrap.wrap(lab, 13) + textwrap.wrap(f"({STATISTICS[k]})" if k in STATISTICS else "", 13))
             for lab, k in zip(labels, keys, strict=True)]  # fmt: skip
    ax.set_xticks(range(len(labels)), ticks, fontsize="x-small")
    kinds = list(map(str, ds["kind"].values))
    ax.set_yticks(range(len(models)), [f"{m} ({k})" for m, k in zip(models, kinds, strict=True)], fontsize="x-small")
    ax.set_xticks(np.arange(len(labels) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(models) + 1) - 0.5, minor=True)
    ax.grid(False)
    ax.grid(which="minor", color="white", lw=1.5)
    ax.tick_params(which="minor", length=0)
    notes = []
    if left_out:
        notes.append("left out, no claim judged: " + ", ".join(left_out))
    shown = sorted({m for cell in marks.ravel() for m in str(cell).split(", ") if m})
    if shown:
        notes.append("caveats: " + "; ".join(f"{m}: {MARKERS[m]}" for m in ORDER if m in shown))
    note = "\n".join(line for n in notes for line in textwrap.wrap(n, 80))
    ax.set_xlabel("claim (its statistic: the number in its cells)" + (f"\n{note}" if note else ""),
                  fontsize="small")  # fmt: skip
    ax.set_ylabel("pretrained model (kind)", fontsize="small")
    ax.set_title("The pretrained phenomena: each claim judged on each model alone", fontsize="small")
    present = sorted(set(codes.ravel().tolist()))
    handles = [Patch(facecolor=COLOURS[c], edgecolor="0.5", label=CELL_STATES[c], hatch="///" if c == 4 else None)
               for c in present]  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False, fontsize="small")
    return fig
