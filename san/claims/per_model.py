"""One claim judged over the models it applies to (torch-free): its scientific row (:func:`san.claims.verdicts.check`
over every judged model) and, per model, the same check on that model alone (a cell of the models x claims table,
Fig. "models x claims" of the phenomena wing; any wing that judges a claim model by model uses it).

A claim is a :class:`san.claims.record.Claim` (the one record of every wing's claims); each model gives either
its statistic as a function of the wrong reference's parameter ``s`` (:data:`Statistic`) or the reason it cannot be
judged. A universal claim's statistic is the model that clears least (:func:`san.claims.verdicts.worst`), an
existential claim's the one that clears most (:func:`best`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from san.claims import verdicts as V
from san.claims.record import Claim, item

__all__ = [
    "Claim",
    "Judged",
    "NOT_APPLICABLE",
    "Statistic",
    "best",
    "cell",
    "judge",
    "layers_text",
    "not_about",
    "sensitivity",
    "unjudged_cell",
]

#: a cell of a model that a claim is not about
NOT_APPLICABLE = "n/a"

Statistic = Callable[[float], V.Measure]
"""A model's test statistic against the reference moved to parameter ``s`` (``wrong.right``: the claim's own)."""


def best(measures: Iterable[V.Measure], threshold: V.Threshold) -> V.Measure:
    """An existential claim's measure over its items: the item that clears ``threshold`` most, resting on every
    judged item; no evidence (NaN) without one."""
    judged = [m for m in measures if m.evidence > 0 and np.isfinite(m.value)]
    if not judged:
        return V.Measure(float("nan"), 0.0, 0)
    top = max(judged, key=threshold.margin)
    return V.Measure(top.value, top.se, sum(m.evidence for m in judged), top.item)


def cell(row: Mapping[str, Any], kind: str, note: str = "") -> dict[str, Any]:
    """A models x claims cell from a model's own row: its printed verdict, statistic with its standard error and
    margin, threshold (value and config key), the statistic under the control with its margin and the power, and a
    ``note`` (what else the reader needs: a token, a layer). What :mod:`san.report.published` re-derives the cell's
    verdict from."""
    pc = row["positive_control"]
    return {"kind": kind, "verdict": row["verdict"], "value": row["value"], "se": row.get("se"),
            "margin": row.get("margin"), "threshold": row["threshold"]["value"],
            "threshold_key": row["threshold"]["key"], "control_value": pc.get("measured_value"),
            "control_se": pc.get("measured_se"), "control_margin": pc.get("margin"), "power": pc.get("power"),
            "note": note}  # fmt: skip


def unjudged_cell(kind: str, verdict: str, note: str) -> dict[str, Any]:
    """A cell without a check: ``not judged`` (the claim applies, the data cannot decide it) or ``n/a``."""
    return {"kind": kind, "verdict": verdict, "value": None, "se": None, "margin": None, "threshold": None,
            "threshold_key": None, "control_value": None, "control_se": None, "control_margin": None, "power": None,
            "note": note}  # fmt: skip


@dataclass(frozen=True)
class Judged:
    """One model's share of a claim: its kind, its statistic (None: not judged, for ``reason``), a ``note`` and
    whether another reasonable definition of the claim's events would give this model another verdict
    (``sensitive``: the note's sensitivity reading says which)."""

    kind: str
    statistic: Statistic | None
    reason: str = ""
    note: str = ""
    sensitive: bool = False


def judge(claim: Claim, models: Mapping[str, Judged], kinds: Mapping[str, str], detail: str, label: str
          ) -> dict[str, Any]:  # fmt: skip
    """The claim judged over ``models`` (those it applies to; every other model of ``kinds``, model -> kind, gets an
    ``n/a`` cell that names the claim by its short ``label``): ``row`` (its scientific row over the judged models,
    the worst or, for an existential claim, the best of them; not judged without one, with ``detail`` saying why)
    and ``cells`` (per model, the same check on that model alone)."""
    judged = {name: m.statistic for name, m in models.items() if m.statistic is not None}
    combine = best if claim.form == V.EXISTENTIAL else V.worst

    def statistic(s: float) -> V.Measure:
        return combine([f(s) for f in judged.values()], claim.threshold)

    cells = {}
    for name, kind in kinds.items():
        m = models.get(name)
        if m is None:
            cells[name] = not_about(label, kind)
        elif m.statistic is None:
            cells[name] = unjudged_cell(kind, V.NOT_JUDGED, m.reason)
        else:
            cells[name] = {**cell(claim.judge(m.statistic, m.note), kind, m.note), "sensitive": m.sensitive}
    unjudged = "; ".join(f"{name}: not judged ({m.reason})" for name, m in models.items() if m.statistic is None)
    full = "; ".join(part for part in (detail, unjudged) if part) or "no model this claim is about"
    rested = [item(name, cells[name]["value"], verdict=cells[name]["verdict"]) for name in models if name in cells]
    row = claim.judge(statistic, full, rested)
    row["sensitive"] = sorted(name for name, m in models.items() if m.statistic is not None and m.sensitive)
    return {"row": row, "cells": cells}


def not_about(label: str, kind: str) -> dict[str, Any]:
    """The ``n/a`` cell of a model of ``kind`` that the claim named ``label`` is not about."""
    return unjudged_cell(kind, NOT_APPLICABLE, f"{label}: not a claim about {kind}s")


def layers_text(layers: Iterable[int]) -> str:
    """Layer indices as a detail prints them."""
    items = [str(int(la)) for la in layers]
    return ", ".join(items) if items else "none"


def sensitivity(readings: Iterable[str], verdicts: Iterable[bool]) -> tuple[str, bool]:
    """A row detail's sensitivity reading: the claim's events read under each definition (``readings``, in words)
    with whether each definition's reading passes (``verdicts``), a warning where they differ; and whether they do
    (the model's verdict is decided by the definition: :attr:`Judged.sensitive`)."""
    sensitive = len(set(verdicts)) > 1
    decided = "; the verdict depends on the definition" if sensitive else ""
    return f"sensitivity ({'; '.join(readings)}){decided}", sensitive
