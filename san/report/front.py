"""The report's front page in plain words: which of the paper's claims this run reproduces, which it does not, on
what, and with which caveats, written from ``summary.json``'s verdict rows; and its first verdict rows.

The front page (``workflow/report/workflow.rst``) stays short, so that a reader lands on the title, the findings and
the first verdicts in the first screen of the report (Snakemake's template centres the page in a window-high box);
every verdict with its value, threshold, near-miss control and power is on the report's verdicts page
(``workflow/report/verdicts.rst``, :mod:`san.report.pages`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from san.claims.drift import WITHIN_DRIFT
from san.claims.verdicts import FAILS, HOLDS, NO_POWER, NOT_JUDGED

PAPER = "Dong et al. 2021"
"""The source prefix of the reproduced paper's own claims (every other source is the follow-up literature)."""
FIRST_ROWS = 5
"""How many scientific verdict rows the front page shows before linking to all of them."""
CAVEATS = {
    NO_POWER: "the test cannot tell the claim from its near-miss control, so the run neither confirms nor refutes it",
    NOT_JUDGED: "this run holds no evidence for it",
    WITHIN_DRIFT: "requantising the weights it rests on moves its margin as far, so quantised weights cannot decide it",
}
"""What a verdict without a decision means, in words."""


def _escape(text: object) -> str:
    """``text`` as plain reStructuredText: its inline-markup characters escaped (as the captions' ``rst_text``)."""
    return re.sub(r"([\\|*`_])", r"\\\1", str(text))


def _claim(row: Mapping[str, Any], deciding: bool = False) -> str:
    """A verdict row's claim as a reader names it: its statement and where the paper makes it, with (``deciding``)
    the case that decided it (the row's ``item``: the model, task or sweep point nearest to the threshold)."""
    where = str(row["source"]).removeprefix(PAPER).strip(" ,") or "the paper"
    on = f", on {row['item']}" if deciding and row.get("item") else ""
    return f"{_escape(row['statement'])} ({_escape(where)}{_escape(on)})"


def _authors(rows: Sequence[Mapping[str, Any]]) -> str:
    """The first source of each row, without its section, once each: ``"Wu et al. 2024; Sun et al. 2024"``."""
    names = [re.split(r"[,;(:]", str(r["source"]))[0].strip() for r in rows]
    return "; ".join(_escape(n) for n in dict.fromkeys(names))


def _count(rows: Sequence[Mapping[str, Any]], state: str) -> int:
    return sum(r["verdict"] == state for r in rows)


def _summary_line(rows: Sequence[Mapping[str, Any]], what: str) -> str:
    """``"Of the paper's 11 claims this run tests, 6 reproduce, 4 do not, 1 cannot be decided."``"""
    parts = [f"{_count(rows, HOLDS)} reproduce", f"{_count(rows, FAILS)} do not"]
    undecided = sum(_count(rows, state) for state in CAVEATS)
    if undecided:
        parts.append(f"{undecided} cannot be decided")
    return f"Of the {len(rows)} {what} this run tests, " + ", ".join(parts) + "."


def findings(summary: Mapping[str, Any]) -> str:
    """The run's findings as a reStructuredText list in plain words: a line for the paper's own claims and one per
    claim (reproduces, does not reproduce, or cannot be decided, with what it was measured on and the caveat), then
    a line for the follow-up literature's claims with those that do not hold. Empty without a verdict table."""
    rows = list((summary.get("verdicts") or {}).get("scientific", []))
    if not rows:
        return ""
    paper = [r for r in rows if str(r["source"]).startswith(PAPER)]
    later = [r for r in rows if not str(r["source"]).startswith(PAPER)]
    lines = []
    if paper:
        lines += [f"- **The paper.** {_summary_line(paper, 'claims of the paper')}", ""]
        for state, words in ((HOLDS, "Reproduces"), (FAILS, "Does not reproduce")):
            claims = [_claim(r, deciding=state == FAILS) for r in paper if r["verdict"] == state]
            if claims:
                lines.append(f"  - {words}: " + "; ".join(claims) + ".")
        lines += [
            f"  - Cannot be decided: {_claim(r)}: {CAVEATS[r['verdict']]}." for r in paper if r["verdict"] in CAVEATS
        ]
        lines.append("")
    if later:
        failing = [r for r in later if r["verdict"] == FAILS]
        line = f"- **The follow-up literature.** {_summary_line(later, 'later claims')}"
        if failing:
            line += f" Those that do not hold here: {_authors(failing)}."
        lines.append(line)
    lines.append(
        "- **Caveats.** Each verdict stands beside a near-miss control that must fail; where the control passes too, "
        "the verdict reads \"no power\". Models, weights and sweeps are the config's (each figure's caption)."
    )
    return "\n".join(lines) + "\n"


def first_verdicts(summary: Mapping[str, Any], n: int = FIRST_ROWS) -> str:
    """The first ``n`` scientific verdict rows as a short reStructuredText list table: claim, source, verdict."""
    rows = list((summary.get("verdicts") or {}).get("scientific", []))[:n]
    if not rows:
        return ""
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 55 30 15", "", "   * - claim", "     - source",
             "     - verdict"]  # fmt: skip
    for r in rows:
        lines += [f"   * - {_escape(r['statement'])}", f"     - {_escape(r['source'])}", f"     - **{r['verdict']}**"]
    return "\n".join(lines) + "\n"
