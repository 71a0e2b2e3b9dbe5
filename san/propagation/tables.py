"""The signal-propagation wing's table of README.md and docs/, from a run's summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.claims import cells
from san.core.markdown import MissingKey, control_cell, lookup, markdown

#: the keys of each propagation verdict row that the table prints
KEYS = ("source", "statement", "form", "verdict", "detail")


def propagation_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """The follow-up literature's statements at initialisation: per claim, its verdict here with its caveat markers,
    its value, threshold and margin (each in its own column), its positive control and the measured numbers behind
    it; under the table, the caveats its markers stand for."""
    rows = []
    for i, claim in enumerate(lookup(summary, "propagation.verdicts", "propagation")):
        missing = [c for c in KEYS if c not in claim]
        if missing:
            raise MissingKey(f"summary.json 'propagation.verdicts' row {i} has no {missing}, which the README "
                             f"table 'propagation' needs")  # fmt: skip
        control = control_cell(claim["positive_control"]) if "positive_control" in claim else cells.NONE
        rows.append([claim["source"], claim["statement"], claim["form"], claim["verdict"], cells.caveat_cell(claim),
                     cells.value_cell(claim), cells.threshold_cell(claim), cells.margin_cell(claim), control,
                     claim["detail"] or cells.NONE])  # fmt: skip
    header = ["source", "statement", "form", "verdict here", "caveats", "value", "threshold", "margin",
              "positive control", "measured"]  # fmt: skip
    verdicts = lookup(summary, "propagation.verdicts", "propagation")
    return markdown(header, rows) + cells.legend(verdicts)


#: the wing's tables, by block name
TABLES = {"propagation": propagation_table}
