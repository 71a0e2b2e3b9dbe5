"""The Markdown of the documents' generated tables: numbers as the tables print them, a table, the summary keys a
table reads, and a positive control's cell. Every wing's ``tables`` module builds its tables with these
(:mod:`san.report.readme` writes, publishes and checks them)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


class MissingKey(KeyError):
    """A key that a table needs is missing from the run's summary (the summary changed, or the run is partial)."""

    def __str__(self) -> str:
        return str(self.args[0])


def lookup(summary: Mapping[str, Any], dotted: str, table: str) -> Any:
    """``summary[a][b]...`` for ``dotted`` = ``"a.b..."``; a missing key raises :class:`MissingKey` naming the key,
    the table that needs it and what to do."""
    node: Any = summary
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise MissingKey(
                f"summary.json has no key '{dotted}' (missing: '{part}'), which the README table '{table}' needs: "
                f"rerun the workflow's summary, or update the table's wing (its tables module) if the summary's keys "
                f"changed"
            )
        node = node[part]
    return node


def fmt(x: Any, digits: int = 2) -> str:
    """A number as the tables print it: ``digits`` significant digits, scientific below 0.01; NaN and None as '-'."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, (bool, int)):
        return str(x)
    return f"{x:.{digits - 1}e}" if 0 < abs(x) < 1e-2 else f"{x:.{digits}g}"


def markdown(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def control_cell(control: Mapping[str, Any]) -> str:
    """A positive control's cell (:func:`san.core.verdicts.control`): its wrong reference, whether it failed as it
    must, and the power (the largest wrongness at which the check still passes) where computed."""
    must = {True: "fails as it must", False: "does NOT fail: no power"}.get(
        control.get("fails_as_it_must"), "not judged"
    )
    power = "" if control.get("power") is None else f"; passes up to {fmt(control['power'])}"
    return f"{control['reference']}: {must}{power}"
