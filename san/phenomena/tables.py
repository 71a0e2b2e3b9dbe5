"""The pretrained phenomena's table of README.md and docs/: models x claims, from a run's summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.claims import caveats
from san.claims.drift import WITHIN_DRIFT
from san.core.markdown import fmt, lookup, markdown
from san.phenomena.drift import TABLE_MEASURES
from san.phenomena.spec import NOT_APPLICABLE


def cell_text(cell: Mapping[str, Any]) -> str:
    """A models x claims cell as the table prints it: the verdict on that model alone, its statistic and its caveat
    markers (:mod:`san.claims.caveats`)."""
    if cell["verdict"] == NOT_APPLICABLE:
        return NOT_APPLICABLE
    text = cell["verdict"] if cell.get("value") is None else f"{cell['verdict']}: {fmt(cell['value'])}"
    marks = caveats.marks(cell.get("caveats"))
    return f"{text} [{marks}]" if marks else text


def phenomena_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """Which phenomenon each pretrained model shows: per model (and its kind), each claim's verdict on that model
    alone (its check against its random-init twin or near-miss theory), its statistic and its caveat markers,
    explained under the table; the claims' tests, controls and powers are their rows in the verdict table."""
    name = "phenomena"
    if summary.get("phenomena") is None:  # a run without text models or image encoders, or before the wing
        return "No pretrained phenomena in this run.\n"
    labels = lookup(summary, "phenomena.claims", name)
    kinds = lookup(summary, "phenomena.models", name)
    rows = []
    for model, cells in lookup(summary, "phenomena.table", name).items():
        rows.append([model, kinds[model], *(cell_text(cells[key]) for key in labels)])
    cells = [c for by_claim in summary["phenomena"]["table"].values() for c in by_claim.values()]
    legend = caveats.legend(cells=cells, models=summary["phenomena"].get("caveats") or {})
    return markdown(["model", "kind", *labels.values()], rows) + legend + drift_legend(summary["phenomena"])


def drift_legend(section: Mapping[str, Any]) -> str:
    """The line under the table on the quantisation control (san.phenomena.drift): the models it was run on and
    what "within quantisation drift" means; empty for a run without it."""
    measured = section.get("quantisation_models") or []
    if not measured:
        return ""
    table = section["table"]
    crossed = sorted(m for m, cells in table.items() if any(c["verdict"] == WITHIN_DRIFT for c in cells.values()))
    return (f"\nQuantisation control (`phenomena.quantisation`): the weights of {', '.join(measured)} requantised; "
            f"{WITHIN_DRIFT}: requantising moves the cell's statistic across its threshold"
            f"{' (' + ', '.join(crossed) + ')' if crossed else ' (no cell)'}; the drift of every measure and row: "
            f"docs/results/quantisation.md.\n")  # fmt: skip


def claims_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """The wing's claims as their records declare them (:class:`san.claims.record.Claim`, carried by each row): key,
    statement and source, scope (and what a run needs to judge it), test, near-miss control with why a careful reader
    could hold it, and the placebo where the control is one."""
    name = "phenomena_claims"
    if summary.get("phenomena") is None:
        return "No pretrained phenomena in this run.\n"
    rows = []
    for r in lookup(summary, "phenomena.verdicts", name):
        scope = r.get("scope") or {}
        kinds = ", ".join(scope.get("architectures", []))
        parts = (f"{kinds}s" if kinds else "", scope.get("sizes", ""), scope.get("training", ""))
        where = ", ".join(x for x in parts if x and x != "any") or "as the test says"
        needs = f"; {scope['needs']}" if scope.get("needs") and not scope.get("covered", True) else ""
        near = r.get("near_miss") or {}
        control = f"{near.get('reference', r['positive_control']['reference'])}: {near.get('why', '')}".rstrip(": ")
        placebo = f" (a placebo: {r['placebo']})" if r.get("placebo") else ""
        rows.append([f"`{r['key']}`", f"{r['statement']} ({r['source']})", f"{where}{needs}", r["test"],
                     f"{control} (`{r['positive_control']['key']}`){placebo}"])  # fmt: skip
    return markdown(["key", "statement (source)", "scope", "test", "near-miss control"], rows)


def quantisation_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """The drift quantisation alone causes (the quantisation control, :func:`san.phenomena.drift.measure_table`): per
    model with the control, its weights (quantised or float) and each requantised copy, for each measure of the
    unmodified model the largest relative drift over the layers and its layer; then the verdict rows on quantised
    weights with their margin and its drift."""
    name = "quantisation"
    section = summary.get("phenomena") or {}
    controls = section.get("quantisation") or {}
    if not controls:
        return "No quantisation control in this run (`phenomena.quantisation.models`).\n"
    labels = dict(TABLE_MEASURES)
    weights = section.get("caveats") or {}
    rows = []
    for model, copies in lookup(summary, "phenomena.quantisation", name).items():
        source = weights.get(model, {}).get(caveats.QUANTISED, "float32")
        for copy, measures in copies.items():
            rows.append([model, source, copy, *(_relative(measures.get(m)) for m in labels)])
    header = ["model", "its weights", "requantised to", *labels.values()]
    measured = [r for r in summary.get("verdicts", {}).get("scientific", []) if r.get("drift") is not None]
    verdicts = [[f"`{r['claim']}`", r["verdict"], fmt(r.get("margin")), fmt(r["drift"])] for r in measured]
    below = ("\nEach cell: the largest relative change over the layers of the measure's mean over the inputs "
             "(text sequences or images; the unmodified model), at its layer; none: the model has no such "
             "measure. The verdict rows on these models, with how far requantising one model at a time moves "
             "their margin (a margin no larger prints \"within quantisation drift\"):"
             "\n\n")  # fmt: skip
    table = markdown(["row", "verdict", "margin", "drift of the margin"], verdicts) if verdicts else "none\n"
    return markdown(header, rows) + below + table


def _relative(entry: Mapping[str, Any] | None) -> str:
    """A drift table cell: the relative drift in percent at its layer; "none" without a number."""
    if not entry or entry.get("relative") is None:
        return "none"
    return f"{100 * entry['relative']:.2g}% (layer {entry['layer']})"


#: the wing's tables, by block name
TABLES = {"phenomena": phenomena_table, "phenomena_claims": claims_table, "quantisation": quantisation_table}
