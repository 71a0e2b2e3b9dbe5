"""The models x claims table as data (torch-free): results/phenomena/table.nc (netCDF, described variables) and
results/phenomena/table.csv (one line per model and claim), built from summary.json's ``phenomena`` section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from san.claims import caveats
from san.core.storage import describe
from san.phenomena.spec import CELL_STATES, VARIABLES

#: the numbers of a cell, stored as float (NaN where the cell has none)
NUMBERS = ("value", "threshold", "control_value", "power", "drift")


def _number(x: Any) -> float:
    return float("nan") if x is None else float(x)


def _numbers(cell: Mapping[str, Any]) -> dict[str, float]:
    """A cell's :data:`NUMBERS` (a cell of a run before the quantisation control has no drift: NaN)."""
    return {k: _number(cell.get(k)) for k in NUMBERS}


def table_dataset(section: Mapping[str, Any]) -> xr.Dataset:
    """The ``phenomena`` section's table (model -> claim -> cell) as a dataset with dims ``(model, claim)``: the
    verdict as a flag (:data:`~san.phenomena.spec.CELL_STATES`), the numbers of :data:`NUMBERS` and the note; the
    models' kinds and the claims' labels as coordinates."""
    models, claims = list(section["table"]), list(section["claims"])
    cells = [[section["table"][m][c] for c in claims] for m in models]
    data = {k: (("model", "claim"), np.array([[_numbers(x)[k] for x in row] for row in cells])) for k in NUMBERS}
    verdicts = np.array([[CELL_STATES.index(x["verdict"]) for x in row] for row in cells], dtype=np.int8)
    ds = xr.Dataset(
        {**data, "verdict": (("model", "claim"), verdicts),
         "note": (("model", "claim"), np.array([[x["note"] for x in row] for row in cells], dtype=str)),
         "caveats": (("model", "claim"), np.array([[caveats.marks(x.get("caveats")) for x in row] for row in cells],
                                                  dtype=str))},
        coords={"model": ("model", models), "claim": ("claim", claims),
                "kind": ("model", [section["models"][m] for m in models]),
                "label": ("claim", [section["claims"][c] for c in claims])},
        attrs={"title": "san: which phenomenon each pretrained model shows (models x claims)",
               "references": "Sun et al. 2024; Queipo-de-Llano et al. 2025; Barbero et al. 2025; Darcet et al. 2024; "
               "Bach et al. 2025; Dong et al. 2021"},
    )  # fmt: skip
    ds["verdict"].attrs.update(
        flag_values=np.arange(len(CELL_STATES), dtype=np.int8),
        flag_meanings=" ".join(s.replace(" ", "_").replace("/", "") for s in CELL_STATES),
    )
    return describe(ds, VARIABLES)


def table_frame(ds: xr.Dataset) -> pd.DataFrame:
    """The dataset of :func:`table_dataset` as one line per model and claim, the verdict in words."""
    rows = []
    for model in map(str, ds["model"].values):
        for claim in map(str, ds["claim"].values):
            x = ds.sel(model=model, claim=claim)
            rows.append({"model": model, "kind": str(x["kind"].values), "claim": claim, "label": str(x["label"].values),
                         "verdict": CELL_STATES[int(x["verdict"])],
                         **{k: float(x[k]) for k in NUMBERS}, "caveats": str(x["caveats"].values),
                         "note": str(x["note"].values)})  # fmt: skip
    return pd.DataFrame(rows)
