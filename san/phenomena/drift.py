"""The quantisation control of the models x claims cells and the verdict rows (torch-free): how far requantising a
model's weights alone moves each claim's statistic on that model, and the cells whose statistic it could move across
the threshold.

The pretrained decoders of the offline run are GGUF dequantisations (4-bit blocks), and what the phenomena claims
measure, outliers above all, is what quantisation distorts. The control: the model's weights requantised to the
block types of ``phenomena.quantisation.kinds`` (:func:`san.rank_collapse.quantisation.quantisation_control`: the
rank-collapse measures of the weights and of each copy, one result), each copy judged as if it were the pretrained
model (its random-init twin kept), and per claim the largest change of the cell's statistic over the copies. A cell
whose statistic lies within that drift of its threshold prints "within quantisation drift"
(:func:`san.claims.drift.crosses`), never holds or fails. The same for the claims' verdict rows: each copy judged in
place of the model's weights, the row's margin moves by the row's ``drift``; a margin no larger prints "within
quantisation drift" (:func:`san.claims.drift.against_drift`). And per measure the drift itself, the published drift
table (:func:`measure_table`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims.drift import AVERAGED, as_pretrained, crosses, measure_drift
from san.phenomena.spec import PRETRAINED, UNMODIFIED

__all__ = ["apply_drift", "cell_drift", "measure_table"]

#: the judge of one model's cells: (model -> result) -> (model -> claim -> cell), the wing's judge_all on text models
Judge = Callable[[Mapping[str, xr.Dataset]], Mapping[str, Mapping[str, Mapping[str, Any]]]]
#: the measures of the drift table (:func:`measure_table`), on the unmodified model, by variable: their labels
TABLE_MEASURES = {
    "residual_ratio": "relative residual",
    "massive_ratio": "massive ratio",
    "token_norm_ratio": "token-norm ratio",
    "first_token_norm_ratio": "first-token norm ratio",
    "sigma1_share": "sigma_1^2 share",
    "matrix_entropy": "matrix entropy",
    "first_token_attention": "first-token attention",
}


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
    threshold (:func:`san.claims.drift.crosses`). Cells of other models get no drift (None)."""
    for model, cells in table.items():
        for claim, cell in cells.items():
            drift = drifts.get(model, {}).get(claim)
            cell["drift"] = drift
            cell["verdict"] = crosses(cell["verdict"], cell.get("value"), cell.get("threshold"), drift)


def measure_table(control: xr.Dataset) -> dict[str, dict[str, dict[str, float | int | None]]]:
    """The drift table of one model's quantisation control: per copy and measure of :data:`TABLE_MEASURES` on the
    unmodified model, the largest relative drift over the layers (``|mean(copy) - mean(weights)| / |mean(weights)|``,
    :func:`san.claims.drift.measure_drift`), its layer and its absolute drift; None where no layer has a number."""
    drift = measure_drift(control)
    out: dict[str, dict[str, dict[str, float | int | None]]] = {}
    for copy in map(str, drift["copy"].values):
        out[copy] = {}
        for name in TABLE_MEASURES:
            if name not in drift:
                continue
            over = [d for d in control[name].dims if d in AVERAGED]
            reference = abs(control[name].sel(weights=PRETRAINED, variant=UNMODIFIED).mean(over))
            absolute = drift[name].sel(copy=copy, variant=UNMODIFIED)
            relative = (absolute / reference.where(reference > 0)).values
            if not np.isfinite(relative).any():
                out[copy][name] = {"relative": None, "layer": None, "absolute": None}
                continue
            i = int(np.nanargmax(relative))
            out[copy][name] = {"relative": float(relative[i]), "layer": int(drift["layer"].values[i]),
                               "absolute": float(absolute.values[i])}  # fmt: skip
    return out
