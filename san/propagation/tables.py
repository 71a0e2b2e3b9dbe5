"""The signal-propagation wing's table of README.md and docs/, from a run's summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.core.markdown import MissingKey, control_cell, lookup, markdown

#: the keys of each propagation verdict row that the table prints
KEYS = ("source", "statement", "form", "verdict", "detail")


def propagation_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """The follow-up literature's statements at initialisation: per claim, its verdict here (with its positive
    control) and the measured numbers behind it."""
    rows = []
    for i, claim in enumerate(lookup(summary, "propagation.verdicts", "propagation")):
        missing = [c for c in KEYS if c not in claim]
        if missing:
            raise MissingKey(f"summary.json 'propagation.verdicts' row {i} has no {missing}, which the README "
                             f"table 'propagation' needs")  # fmt: skip
        control = control_cell(claim["positive_control"]) if "positive_control" in claim else ""
        rows.append([claim["source"], claim["statement"], claim["form"], claim["verdict"], control, claim["detail"]])
    return markdown(["source", "statement", "form", "verdict here", "positive control", "measured"], rows)


#: the wing's tables, by block name
TABLES = {"propagation": propagation_table}
