"""summary.json: every wing's claims (:data:`san.experiments.WINGS`), each judged on its own results
(:func:`wing_summary`, ``results/summary/<wing>.json``) and gathered with the verdict table (:func:`gather`)
(torch-free).

Every wing's claims module answers one contract: ``check_config(report)`` (cross-checks of config ``report`` that
its schema cannot express, before any compute) and ``claims(inputs, params) -> {section: {...} | None}``, each
section listing its verdict rows (:func:`san.claims.verdicts.row`) under ``verdicts``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from san import experiments
from san.claims import caveats
from san.claims import verdicts as V
from san.report.published import FORMAT


def _threshold_keys(sections: Mapping[str, Any]) -> Iterator[str]:
    """Every config key a row or models x claims cell of ``sections`` names as its threshold (or its note)."""
    for section in sections.values():
        if not isinstance(section, Mapping):
            continue
        for row in section.get("verdicts", []):
            yield from filter(None, [(row.get("threshold") or {}).get("key"), *row.get("threshold_keys", [])])
        for cells in (section.get("table") or {}).values():
            yield from filter(None, (cell.get("threshold_key") for cell in cells.values()))


def wing_summary(name: str, inputs: Mapping[str, list[str]], params: Mapping[str, Any]) -> dict[str, Any]:
    """Wing ``name``'s sections of summary.json: its cross-checks of ``params['report']`` (the sections of config
    ``report`` it reads, :func:`san.experiments.report_slice`), its ``claims(inputs, params)``, and the caveats of
    every row and models x claims cell (:func:`san.claims.caveats.annotate`: from the facts of
    ``params['model_entries']``, config ``models``, and the thresholds' history in its report sections). A row whose
    threshold lies in a report section the wing does not declare is an error naming it: its history would go unread."""
    wing = experiments.named(name)
    report = params["report"]
    wing.claims.check_config(report)
    sections = wing.claims.claims(inputs, params)
    undeclared = sorted({k for k in _threshold_keys(sections) if k.split(".")[1] not in report})
    if undeclared:
        raise ValueError(f"wing {name!r} judges thresholds {undeclared} outside the report sections it reads "
                         f"{list(wing.report)}: add their sections to its `report` in san/experiments.py")  # fmt: skip
    caveats.annotate(sections, params.get("model_entries") or {}, report)
    return sections


def gather(wings: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """summary.json's sections from every wing's (:func:`wing_summary`, by wing name), in the order of the wings, and
    the verdict table (``verdicts``: the rows split by kind, :func:`san.claims.verdicts.collect`); a wing missing from
    ``wings`` is an error naming it."""
    missing = [w.name for w in experiments.WINGS if w.name not in wings]
    if missing:
        raise KeyError(f"no summary of the wing(s) {missing}")
    sections: dict[str, Any] = {}
    for w in experiments.WINGS:
        sections.update(wings[w.name])
    sections["format"] = FORMAT
    sections["verdicts"] = V.collect(sections)
    return sections


def summary(inputs: Mapping[str, list[str]], params: Mapping[str, Any]) -> dict[str, Any]:
    """Every wing's sections, each judged on what it reads of ``inputs`` and ``params``
    (:func:`san.experiments.wing_inputs`, :func:`wing_summary`), gathered (:func:`gather`): what the workflow's
    ``wing_summary`` and ``summary`` jobs write, in one call."""
    return gather(
        {w.name: wing_summary(w.name, *experiments.wing_inputs(w.name, inputs, params)) for w in experiments.WINGS}
    )
