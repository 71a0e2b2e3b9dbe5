"""The rank-collapse wing's tables of README.md and docs/ (Fig. 2 as numbers), from a run's summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.core.markdown import fmt, lookup, markdown


def rank_collapse_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """Fig. 2: per model and weights, pure attention at ``report.rank_collapse.layer`` and the variants with skips
    at the last layer (mean relative residual over sequences), then the SAN's rate (medians over sequences): its
    contraction exponent (3: cubic, 1: exponential) and the later half's share of its collapse (1/2: exponential);
    a dash where the curve has too few layers in range."""
    name = "rank_collapse"
    layer = lookup(summary, "rank_collapse.layer", name)
    rows = []
    for model, entry in lookup(summary, "rank_collapse.per_model", name).items():
        for weights in entry:
            key = ("rank_collapse", "per_model", model, weights)
            pure = lookup(summary, (*key, "pure_at_layer"), name)
            skip = lookup(summary, (*key, "skip_at_last"), name)
            last = lookup(summary, (*key, "last_layer"), name)
            # a summary from before the rate measures has none: dashes
            rate = (lookup(summary, ("rank_collapse",), name).get("rate") or {}).get(model, {}).get(weights, {})
            rows.append([model, weights, last, *(fmt(pure.get(v)) for v in ("SAN", "SAN+MLP"))]
                        + [fmt(skip.get(v)) for v in ("SAN+skip", "transformer")]
                        + [fmt(rate.get("exponent")), fmt(rate.get("late_share"))])  # fmt: skip
    header = ["model", "weights", "layers", f"SAN, layer {layer}", f"SAN+MLP, layer {layer}", "SAN+skip, last",
              "transformer, last", "SAN exponent", "SAN late share"]  # fmt: skip
    return markdown(header, rows) + rate_line(lookup(summary, ("rank_collapse",), name))


def rate_line(section: Mapping[str, Any]) -> str:
    """The line under the Fig. 2 table on the rate rows (none in a summary from before them): the verdict on
    "doubly exponential" with the range of the bidirectional models' exponents, and Wu et al.'s on the decoders."""
    rows = {r["key"]: r for r in section.get("verdicts", [])}
    if "pure_collapses" not in rows or "rate" not in section:
        return ""
    judged = [e.get("exponent") for m in section.get("judged", []) for e in section["rate"].get(m, {}).values()]
    judged = [x for x in judged if x is not None]
    spread = f", medians {fmt(min(judged))} to {fmt(max(judged))}" if judged else ""
    verdict = rows["pure_collapses"]["verdict"]
    text = (
        f"\nBy its rate: doubly exponential (`rank_collapse.pure_collapses`: exponent at least "
        f"{fmt(section['exponent_min'])} in every bidirectional model{spread}): **{verdict}**"
    )
    wu = rows.get("causal_collapses_exponentially")
    if wu is not None and section.get("causal"):
        text += (
            f"; exponential in the decoders (Wu et al. 2024, `rank_collapse.causal_collapses_exponentially`): "
            f"**{wu['verdict']}**"
        )
    return text + ".\n"


def pretrained_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """Pretrained weights: the first layer where SAN falls below the threshold, SAN and transformer at the last."""
    name = "pretrained"
    section = lookup(summary, "pretrained_collapse", name)
    if section is None:
        return "No model of this run has pretrained weights.\n"
    threshold = lookup(summary, "pretrained_collapse.threshold", name)
    rows = []
    for model in lookup(summary, "pretrained_collapse.per_model", name):
        key = ("pretrained_collapse", "per_model", model)
        paper = lookup(summary, (*key, "residual_ratio"), name)
        first = paper.get("san_first_below")
        rows.append([model, lookup(summary, (*key, "depth"), name), "never" if first is None else first,
                     fmt(paper.get("san_last")), fmt(paper.get("transformer_last"))])  # fmt: skip
    return markdown(["model", "layers", f"SAN < {fmt(threshold)} at layer", "SAN, last", "transformer, last"], rows)


#: the wing's tables, by block name
TABLES = {"rank_collapse": rank_collapse_table, "pretrained": pretrained_table}
