"""The quantisation control of the models x claims cells (torch-free): how far requantising a model's weights alone
moves each claim's statistic on that model, and the cells whose statistic it could move across the threshold.

The pretrained decoders of the offline run are GGUF dequantisations (4-bit blocks), and what the phenomena claims
measure, outliers above all, is what quantisation distorts. The control: the model's weights requantised to the
block types of ``phenomena.quantisation.kinds`` (:func:`san.rank_collapse.quantisation.quantisation_control`: the
rank-collapse measures of the weights and of each copy, one result), each copy judged as if it were the pretrained
model (its random-init twin kept), and per claim the largest change of the cell's statistic over the copies. A cell
whose statistic lies within that drift of its threshold prints "within quantisation drift"
(:func:`san.core.drift.crosses`), never holds or fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core.drift import crosses
from san.phenomena.spec import INIT, PRETRAINED

__all__ = ["apply_drift", "as_pretrained", "cell_drift"]

#: the judge of one model's cells: (model -> result) -> (model -> claim -> cell), the wing's judge_all on text models
Judge = Callable[[Mapping[str, xr.Dataset]], Mapping[str, Mapping[str, Mapping[str, Any]]]]


def as_pretrained(result: xr.Dataset, control: xr.Dataset, weights: str) -> xr.Dataset:
    """``result`` (a rank-collapse result with ``init`` and ``pretrained`` weights) with its pretrained weights
    replaced by weight set ``weights`` of the quantisation control's result ``control``: what the claims would read
    had the model been that copy. Its attributes (the recorded family) are ``result``'s."""
    copy = control.sel(weights=[weights]).assign_coords(weights=[PRETRAINED])
    out = xr.concat([result.sel(weights=[INIT]), copy], dim="weights", data_vars="all", join="exact")
    out.attrs = dict(result.attrs)
    return out


def cell_drift(name: str, result: xr.Dataset, control: xr.Dataset, judge: Judge) -> dict[str, float | None]:
    """Per claim, the largest change of model ``name``'s cell statistic over the copies of the quantisation
    control's result ``control`` (its weight sets: ``pretrained``, the weights it was run on, and one per
    requantisation), each judged by ``judge`` in place of the pretrained weights against the control's own
    ``pretrained`` (the same measures, the same inputs); None where the statistic is not a number on every one."""
    sets = [str(w) for w in control["weights"].values]
    if PRETRAINED not in sets or len(sets) < 2:
        raise ValueError(f"the quantisation control of {name} needs its '{PRETRAINED}' weights and a copy, has {sets}")
    cells = {w: judge({name: as_pretrained(result, control, w)})[name] for w in sets}
    drift: dict[str, float | None] = {}
    for claim, reference in cells[PRETRAINED].items():
        values = [cells[w][claim].get("value") for w in sets]
        finite = all(v is not None and np.isfinite(v) for v in values)
        drift[claim] = max(abs(v - reference["value"]) for v in values) if finite else None
    return drift


def apply_drift(table: Mapping[str, dict[str, dict[str, Any]]], drifts: Mapping[str, Mapping[str, Any]]) -> None:
    """Record in each cell of the models x claims ``table`` (model -> claim -> cell) of the models in ``drifts``
    (model -> claim -> drift) its ``drift``, and print it "within quantisation drift" where the drift reaches its
    threshold (:func:`san.core.drift.crosses`). Cells of other models get no drift (None)."""
    for model, cells in table.items():
        for claim, cell in cells.items():
            drift = drifts.get(model, {}).get(claim)
            cell["drift"] = drift
            cell["verdict"] = crosses(cell["verdict"], cell.get("value"), cell.get("threshold"), drift)
