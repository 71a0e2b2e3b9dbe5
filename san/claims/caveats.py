"""Caveats that travel with a verdict (torch-free): a short marker on every row and models x claims cell that rests on
weights or inputs a reader must know about, explained once under each table that shows it.

The markers, each derived from a recorded fact, never from a list of rows:

- ``q``: **quantised weights**: the model entry's pretrained weights are a GGUF file (``pretrained.format: gguf``),
  dequantised to float; its quantisation type is read from the file name (``...Q4_1.gguf``, ``...q4_k_m.gguf``).
  Outliers (massive activations, high norms) are what quantisation distorts most.
- ``f``: **fine-tune of another model**: the entry states the model its weights were fine-tuned from
  (``fine_tune_of``) or a lineage that says so (``pretrained.lineage``).
- ``b``: **inputs without a BOS token**: a decoder whose tokenised inputs start with text, not a start token
  (``bos_in_inputs: false``): "the first token" is then a word of the text.
- ``t``: **threshold set after its result**: the row's threshold key has a ``threshold_notes`` record in config.
- ``d``: **decided by the definition**: another reasonable definition of the claim's events (the sensitivity reading
  in the row's detail) gives the model another verdict (the row's ``sensitive`` models, the cell's ``sensitive``).

A row rests on the models its wing reads pretrained weights of (:data:`PRETRAINED_SECTIONS`, or a record whose scope
names pretrained weights) that it names (its items, its value's item or its detail).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from san.claims.record import history

QUANTISED, FINE_TUNE, NO_BOS, LATE_THRESHOLD, DEFINITION = "q", "f", "b", "t", "d"
MARKERS = {
    QUANTISED: "quantised weights (a GGUF file dequantised to float; outliers are what quantisation distorts; "
    "the drift requantising alone causes: docs/results/quantisation.md)",
    FINE_TUNE: "a fine-tune of another model, not the weights the claim's source studied",
    NO_BOS: "inputs without a BOS token (the first token is a word of the text)",
    LATE_THRESHOLD: "threshold set after its result was seen (config threshold_notes)",
    DEFINITION: "the verdict depends on the definition of the events (the sensitivity in the row's detail)",
}
ORDER = (QUANTISED, FINE_TUNE, NO_BOS, LATE_THRESHOLD, DEFINITION)

#: the sections whose rows read pretrained weights (every other row reads random-init or trained-here weights)
PRETRAINED_SECTIONS = ("pretrained_collapse", "pretrained_slower", "first_token_sink", "attention_products",
                       "phenomena")  # fmt: skip
#: rows of other sections that read pretrained weights, by ``section.key``
PRETRAINED_ROWS = (
    "vision.high_norm_tokens",
    "rank_collapse.pure_collapses",
    "rank_collapse.causal_collapses_exponentially",
)

_GGUF_TYPE = re.compile(r"[.\-_]((?:i?q|f|bf)\d+(?:_[a-z0-9]+)*)\.gguf$", re.I)


def gguf_type(file_name: str) -> str:
    """The quantisation type a GGUF file name states (``Q4_1``, ``Q4_K_M``), upper case; "unknown type" without."""
    m = _GGUF_TYPE.search(file_name or "")
    return m.group(1).upper() if m else "unknown type"


#: the keys of a model entry (config ``models.<name>``) its caveats are read from (:func:`model_caveats`): a summary
#: takes only these, so that editing another key (its memory, its dtype) reruns no summary
ENTRY_KEYS = ("pretrained", "fine_tune_of", "bos_in_inputs")


def caveat_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a model entry that :func:`model_caveats` reads (:data:`ENTRY_KEYS`)."""
    return {k: entry[k] for k in ENTRY_KEYS if k in entry}


def model_caveats(entry: Mapping[str, Any] | None) -> dict[str, str]:
    """The caveats of one model entry (config ``models.<name>``): marker -> what it is, for this model."""
    entry = entry or {}
    pretrained = entry.get("pretrained") or {}
    out = {}
    if pretrained.get("format") == "gguf":
        out[QUANTISED] = f"GGUF {gguf_type(pretrained.get('file_name', ''))}"
    lineage = str(pretrained.get("lineage", ""))
    if entry.get("fine_tune_of") or "fine-tuned" in lineage:
        out[FINE_TUNE] = f"fine-tune of {entry['fine_tune_of']}" if entry.get("fine_tune_of") else "fine-tune"
    if entry.get("bos_in_inputs") is False:
        out[NO_BOS] = "no BOS token"
    return out


def facts(entries: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Every model's caveats (model -> marker -> what), only the models with any."""
    return {name: c for name, e in entries.items() if (c := model_caveats(e))}


def named(row: Mapping[str, Any], models: Iterable[str]) -> list[str]:
    """The ``models`` a row names: in its items, its value's item or its detail (longest names first, so that a
    name inside another is not counted twice)."""
    text = " ".join([str(row.get("item", "")), str(row.get("detail", ""))]
                    + [str(i.get("item", "")) for i in row.get("items") or []])  # fmt: skip
    found = []
    for name in sorted(models, key=len, reverse=True):
        if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
            found.append(name)
            text = text.replace(name, " ")
    return sorted(found)


def reads_pretrained(section: str, row: Mapping[str, Any]) -> bool:
    """Whether a row reads pretrained weights (its section, or its record's scope)."""
    training = str((row.get("scope") or {}).get("training", ""))
    return section in PRETRAINED_SECTIONS or f"{section}.{row['key']}" in PRETRAINED_ROWS or "pretrained" in training


def row_caveats(section: str, row: Mapping[str, Any], models: Mapping[str, Mapping[str, str]],
                report: Mapping[str, Any]) -> dict[str, Any]:  # fmt: skip
    """A row's caveats: ``markers`` (in :data:`ORDER`) and ``why`` (marker -> the models or threshold key it is
    for), from the facts of the models it reads pretrained weights of and its threshold's history."""
    why: dict[str, list[str]] = {}
    if reads_pretrained(section, row):
        for name in named(row, models):
            for marker, what in models[name].items():
                why.setdefault(marker, []).append(f"{name} ({what})")
    key = (row.get("threshold") or {}).get("key", "")
    if key and not history(report, key)["set_before"]:
        why.setdefault(LATE_THRESHOLD, []).append(key)
    for note_key in row.get("threshold_keys", []):
        if not history(report, note_key)["set_before"]:
            why.setdefault(LATE_THRESHOLD, []).append(note_key)
    if row.get("sensitive"):
        why.setdefault(DEFINITION, []).extend(row["sensitive"])
    markers = [m for m in ORDER if m in why]
    return {"markers": markers, "why": {m: sorted(set(why[m])) for m in markers}}


def annotate(sections: Mapping[str, Any], entries: Mapping[str, Any], report: Mapping[str, Any]) -> None:
    """Add ``caveats`` to every verdict row of ``sections`` and to every models x claims cell (phenomena), and the
    threshold's ``threshold_history`` to every row with a threshold, in place."""
    models = facts(entries)
    for name, section in sections.items():
        if not isinstance(section, Mapping) or name == "verdicts":
            continue
        for row in section.get("verdicts", []):
            row["caveats"] = row_caveats(name, row, models, report)
            if row.get("threshold", {}).get("key"):
                row["threshold_history"] = history(report, row["threshold"]["key"])
        if section.get("table"):
            section["caveats"] = {m: models[m] for m in section["table"] if m in models}
        for model, cells in (section.get("table") or {}).items():
            for cell in cells.values():
                late = cell.get("threshold_key") and not history(report, cell["threshold_key"])["set_before"]
                marks = {**models.get(model, {}), **({LATE_THRESHOLD: cell["threshold_key"]} if late else {})}
                if cell.get("sensitive"):
                    marks[DEFINITION] = model
                judged = cell.get("verdict") != "n/a"
                cell["caveats"] = [m for m in ORDER if m in marks] if judged else []


def marks(caveats: Mapping[str, Any] | Iterable[str] | None) -> str:
    """The short marker string of a row's or cell's caveats (``q, t``); empty without."""
    if not caveats:
        return ""
    markers = caveats.get("markers", []) if isinstance(caveats, Mapping) else list(caveats)
    return ", ".join(markers)


def legend(rows: Iterable[Mapping[str, Any]] = (), cells: Iterable[Mapping[str, Any]] = (),
           models: Mapping[str, Mapping[str, str]] | None = None) -> str:  # fmt: skip
    """The line under a table explaining the markers it shows (each once), with the models or keys each stands for,
    after a blank line (a line right under a Markdown table would read as one of its rows); empty when the table shows
    none."""
    why: dict[str, set[str]] = {}
    for r in rows:
        for m, items in ((r.get("caveats") or {}).get("why") or {}).items():
            why.setdefault(m, set()).update(items)
    for c in cells:
        for m in c.get("caveats") or []:
            why.setdefault(m, set())
    for m, items in (models or {}).items():
        for marker, what in items.items():
            if marker in why:
                why[marker].add(f"{m} ({what})")
    parts = []
    for m in ORDER:
        if m in why:
            items = sorted(why[m])
            parts.append(f"{m}: {MARKERS[m]}" + (f": {', '.join(items)}" if items else ""))
    return ("\nCaveats: " + "; ".join(parts) + ".\n") if parts else ""
