"""The training series' table of README.md and docs/, from a run's summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.core.markdown import fmt, lookup, markdown

#: the rows of the unmodified model's pretrained phenomena (summary key -> the table's label)
PHENOMENA_ROWS = {"largest_massive_ratio": "largest massive ratio", "mean_matrix_entropy": "mean matrix entropy"}


def training_series_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """The offline training series: per variant and layer, the relative residual at the first and the last checkpoint
    (mean over seeds and sequences), the share of sink heads, the transformer's largest massive ratio over the layers
    and its mean matrix entropy, and what the model learned (loss against the unigram
    baseline, per seed)."""
    name = "training_series"
    section = summary.get("training_series")  # a summary of a run before the series was part of it has none
    if section is None:
        return "No training series in this run.\n"
    first, last = lookup(summary, "training_series.first", name), lookup(summary, "training_series.last", name)
    at = lookup(summary, "training_series.at", name)
    rows = []
    for variant, by_layer in at[first]["residual_ratio"].items():
        for layer in lookup(summary, "training_series.layers", name):
            rows.append(
                [variant, layer, fmt(by_layer[str(layer)]), fmt(at[last]["residual_ratio"][variant][str(layer)])]
            )
    for variant, share in at[first]["sink_share"].items():
        rows.append([variant, "sink share", fmt(share), fmt(at[last]["sink_share"][variant])])
    for key, label in PHENOMENA_ROWS.items():
        for variant, value in lookup(summary, f"training_series.at.{first}.{key}", name).items():
            rows.append(
                [variant, label, fmt(value), fmt(lookup(summary, f"training_series.at.{last}.{key}", name)[variant])]
            )
    table = markdown(["variant", "layer", first, last], rows)
    losses = [
        [seed, fmt(e["final_loss"], 3), fmt(e["unigram_loss"], 3), fmt(e["ratio"])]
        for seed, e in lookup(summary, "training_series.per_seed", name).items()
    ]
    return table + "\n" + markdown(["seed", "loss (last tenth)", "unigram baseline", "ratio"], losses)


#: the wing's tables, by block name
TABLES = {"training_series": training_series_table}
