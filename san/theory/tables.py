"""The theorem's table of README.md and docs/ (Theorem 2.2 measured against its bound), from a run's summary.json.
Its verdict column prints the verdict vocabulary of :mod:`san.claims.verdicts` (holds, fails, not judged, no power)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.claims.verdicts import label
from san.core.markdown import MissingKey, control_cell, fmt, lookup, markdown

#: the theorem summary's pair tables: the theorem's own pairs and, apart, the LayerNorm pairs
PAIR_TABLES = (("theorem_pairs", "no (the theorem)"), ("layernorm_pairs", "yes (outside the theorem)"))
NAME = "theorem"


def _verdict(summary: Mapping[str, Any], key: str) -> str:
    """The printed verdict of the theorem's row ``key`` (as summary.json's verdict table prints it)."""
    for row in lookup(summary, "theorem.verdicts", NAME):
        if row.get("key") == key:
            return row["verdict"]
    raise MissingKey(f"summary.json 'theorem.verdicts' has no row '{key}', which the README table 'theorem' needs")


def _pairs(summary: Mapping[str, Any]) -> str:
    """(sample, layer) pairs per LayerNorm setting and input that respect / violate the nominal bound, with those at
    the float floor counted apart."""
    rows = []
    for table, ln in PAIR_TABLES:
        for kind, counts in lookup(summary, f"theorem.{table}", NAME).items():
            rows.append([ln, kind] + [str(counts[c]) for c in ("respects", "violates", "undecided", "float_floor")])
    return markdown(["LayerNorm", "input", "respect", "violate", "undecided", "at float floor (apart)"], rows)


def _checks(summary: Mapping[str, Any]) -> str:
    """The slack of the nominal bound, the nominal and certified checks on random weights, the adversarial search
    for gamma and its negative controls (each must find the bound violated)."""
    adv = lookup(summary, "theorem.adversarial", NAME)
    sizes = lookup(summary, "theorem.adversarial.sizes", NAME)
    nominal = lookup(summary, "theorem.nominal", NAME)
    certified = lookup(summary, "theorem.certified_control", NAME)
    checks = [
        ["slack of the nominal bound, no LayerNorm (decades, min / median)", "",
         f"{fmt(lookup(summary, 'theorem.slack_no_ln.min', NAME))} / "
         f"{fmt(lookup(summary, 'theorem.slack_no_ln.median', NAME))}", "", "", ""],
        ["nominal bound, gamma = 1, random weights: violating pairs", "regression", str(nominal["violations"]),
         f"<= {nominal['threshold']}", _verdict(summary, "nominal.holds"), control_cell(nominal["control"])],
        ["certified bound: smallest margin (decades)", "regression",
         fmt(lookup(summary, "theorem.certified_margin_min_no_ln", NAME)),
         f">= {fmt(lookup(summary, 'theorem.certified_margin_threshold', NAME))}",
         _verdict(summary, "certified_holds_no_ln"), control_cell(certified)],
        [f"adversarial search: largest gamma ({adv['draws']} draws; n = {', '.join(map(str, sizes['n']))}; "
         f"H = {', '.join(map(str, sizes['H']))}; ascent gain {fmt(adv['ascent_gain'])} decades)", "scientific",
         fmt(adv["gamma_max"]), f"<= {fmt(10 ** adv['threshold_log10_gamma'])}", _verdict(summary, "adversarial.holds"),
         control_cell(adv["control"])],
    ]  # fmt: skip
    for control, c in adv["controls"].items():
        checks.append([f"negative control {control}: largest log10 gamma", "regression",
                       fmt(c["log10_gamma_max"]), f"> {fmt(adv['negative_control_criterion'])}", label(c["violated"]),
                       ""])  # fmt: skip
    header = ["check", "kind", "measured", "threshold", "verdict", "positive control (bound / factor)"]
    return markdown(header, checks)


def theorem_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """The theorem: the pairs that respect / violate the nominal bound (:func:`_pairs`), the checks
    (:func:`_checks`), the exponents of the Fig. 2 SAN curves."""
    fig2 = lookup(summary, "theorem.fig2_exponent", NAME)
    exponents = [[m, w, fmt(x)] for m, by_weights in fig2.items() for w, x in by_weights.items()]
    return "\n".join(
        [_pairs(summary), _checks(summary), markdown(["Fig. 2 model", "weights", "SAN exponent"], exponents)]
    )


#: the wing's tables, by block name
TABLES = {"theorem": theorem_table}
