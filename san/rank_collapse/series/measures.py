"""The pretrained-phenomena measures of a training series per checkpoint: one number per seed and revision from the
per-layer measures of :data:`san.measures.phenomena.PHENOMENA` of the unmodified model (torch-free).

Sun et al. (COLM 2024, Sec. 2) place massive activations in the layers after an abrupt rise, and Queipo-de-Llano et
al. (2025, Fig. 1) the first token's norm spike and the matrix-entropy valley in the same layers; along training the
question is when (or whether) they appear at all, so each checkpoint is summarised over its layers: the largest
massive ratio, the largest first-token norm ratio, the lowest (the valley) or the mean matrix entropy.
"""

from __future__ import annotations

from typing import Literal

import xarray as xr

from san.rank_collapse.series.spec import UNMODIFIED

#: the reductions over the layers (layer 0, the first block's input, to the last block's output)
Over = Literal["max", "min", "mean"]


def has_unmodified(ds: xr.Dataset) -> bool:
    """Whether the series' result holds the unmodified model (:data:`~san.rank_collapse.series.spec.UNMODIFIED`),
    whose measures the series reports (``rank_collapse.variants`` may leave it out)."""
    return UNMODIFIED in ds["variant"].values


def over_layers(ds: xr.Dataset, name: str, over: Over) -> xr.DataArray:
    """The unmodified model's per-layer measure ``name`` (mean over the input sequences) reduced over the layers by
    ``over``: dims ``seed``, ``revision``. ``ds``: :func:`san.rank_collapse.series.experiment.run_series`' or
    :func:`~san.rank_collapse.series.experiment.run_hub_series`' result."""
    if name not in ds:
        raise KeyError(f"the series' result has no variable {name!r} (san.measures.phenomena.PHENOMENA): rerun its job")
    curve = ds[name].sel(variant=UNMODIFIED).mean("sample")
    return getattr(curve, over)("layer")
