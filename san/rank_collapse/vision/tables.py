"""The image encoders' table of README.md and docs/, from a run's summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.core.markdown import fmt, lookup, markdown


def vision_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """Image encoders: per model and weights, each variant's patch high-frequency share at the last layer over its
    layer-0 value (mean over the photographs), and the pure-attention share on the noise images."""
    name = "vision"
    section = summary.get("vision")  # a summary of a run before the image encoders were part of it has none
    if section is None:
        return "No image encoder in this run.\n"
    variants = ("SAN", "SAN+MLP", "SAN+skip", "transformer")
    rows = []
    for model, entry in lookup(summary, "vision.per_model", name).items():
        for weights in entry:
            key = ("vision", "per_model", model, weights)
            share = lookup(summary, (*key, "patch_share"), name)
            noise = lookup(summary, (*key, "noise_patch_share"), name) or {}
            layers = lookup(summary, (*key, "layers"), name)
            rows.append([model, weights, layers, *(fmt(share.get(v)) for v in variants), fmt(noise.get("SAN"))])
    header = ["model", "weights", "layers", *(f"{v}, last / first" for v in variants), "SAN on noise"]
    return markdown(header, rows)


#: the wing's tables, by block name
TABLES = {"vision": vision_table}
