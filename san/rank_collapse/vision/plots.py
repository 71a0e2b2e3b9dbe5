"""The image encoders' figure: per model (columns), the patch tokens' high-frequency share
``||X - 1 mean(X)||_F / ||X||_F`` per layer (top, log y: Wang et al.'s oversmoothing, the paper's relative residual
in the Frobenius norm), the same over all tokens (middle: the special tokens included) and the share of the patch
states' energy at high spatial frequencies of the patch grid (bottom: Park & Kim's spectral view), the four
variants as the mean over the photographs with a band from the smallest to the largest (positive on log axes); noise
images are left out."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import matplotlib.pyplot as plt
import xarray as xr

from san.core.plotting import figsize, legend_of_panels, variant_style

#: the rows of the figure: measure and y-axis label
ROWS = (
    ("residual_ratio_frobenius_patches", "patch tokens\n" + r"$\|X - \mathbf{1}\bar{x}^\top\|_F / \|X\|_F$", True),
    ("residual_ratio_frobenius", "all tokens\n" + r"$\|X - \mathbf{1}\bar{x}^\top\|_F / \|X\|_F$", True),
    ("spatial_high_frequency_share", "patch grid: high-\nfrequency energy share", True),
)


def vision_figure(datasets: Mapping[str, xr.Dataset]) -> plt.Figure:
    """One column per model (its first weight set, init when present), one row per measure of :data:`ROWS`: the mean
    over the photographs, their range as a band; the title says which weights, and where the pretrained weights are
    reported instead (the vision table)."""
    models = list(datasets)
    width, height = figsize(len(models), len(ROWS))
    # rows at least 2 inches high, so that each row's two-line y label stays beside its own row with many models
    height = min(9.0, max(height, 2.0 * len(ROWS) + 0.8))
    fig, axes = plt.subplots(len(ROWS), len(models), figsize=(width, height), squeeze=False, sharex="col",
                             sharey="row", layout="constrained")  # fmt: skip
    for col, model in enumerate(models):
        ds = datasets[model]
        weights = "init" if "init" in ds["weights"].values else str(ds["weights"].values[0])
        photos = [i for i in map(str, ds["image"].values) if not i.startswith("noise")]
        for row, (measure, label, log) in enumerate(ROWS):
            ax = axes[row][col]
            data = ds[measure].sel(weights=weights, image=photos)
            for name in map(str, ds["variant"].values):
                values = data.sel(variant=name)
                style = variant_style(name)
                ax.plot(ds["layer"].values, values.mean("image").values, label=name, lw=1.2, **style)
                ax.fill_between(ds["layer"].values, values.min("image").values, values.max("image").values, alpha=0.15,
                                color=style["color"], lw=0)  # fmt: skip
            if log:
                ax.set_yscale("log")
            if row == 0:
                # a title wrapped to its column's width (about 12 characters per inch of panel)
                chars = max(10, int(12 * width / len(models)))
                ax.set_title("\n".join(textwrap.wrap(f"{model} ({weights})", chars)), fontsize="small")
            ax.set_ylabel(label if col == 0 else "", fontsize="small")
            if col:
                ax.tick_params(labelleft=False)
            if row == len(ROWS) - 1:
                ax.set_xlabel("layer $l$")
    legend_of_panels(fig, [axes[0][0]], ncol=4)
    fig.suptitle("Image encoders, the four variants: mean over the photographs, their range as a band\n(pretrained "
                 "weights: the vision table of docs/rank_collapse.md and the phenomena)", fontsize="small")  # fmt: skip
    return fig
