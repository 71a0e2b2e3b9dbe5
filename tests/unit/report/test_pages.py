"""The report's pages: the front page's findings in plain words from summary.json, and the self-contained verdicts
page and interactive view."""

import json
import re

import pytest

from san.report.front import findings, first_verdicts

from helpers import ROOT, synthetic_pretrained, synthetic_rank_collapse

SUMMARY = json.loads((ROOT / "docs/results/summary.json").read_text())


def _row(verdict: str, source: str, statement: str, item: str = "bert") -> dict:
    return {"verdict": verdict, "source": source, "statement": statement, "item": item}


def test_findings_say_which_of_the_papers_claims_reproduce_which_do_not_and_why_some_cannot_be_decided():
    rows = [
        _row("holds", "Dong et al. 2021, Fig. 2", "pure attention collapses"),
        _row("fails", "Dong et al. 2021, Fig. 4", "short paths reach most", "sorting, seed 1"),
        _row("no power", "Dong et al. 2021, Fig. 3", "the circle collapses"),
        _row("fails", "Wu et al. 2024, Fig. 2", "LayerNorm stops collapse"),
        _row("holds", "Noci et al. 2022", "1/sqrt(L) branches keep rank"),
        _row("within quantisation drift", "Sun et al. 2024", "massive activations appear abruptly"),
    ]
    text = findings({"verdicts": {"scientific": rows}})
    assert "Of the 3 claims of the paper this run tests, 1 reproduce, 1 do not, 1 cannot be decided." in text
    assert "Reproduces: pure attention collapses (Fig. 2)." in text
    assert "Does not reproduce: short paths reach most (Fig. 4, on sorting, seed 1)." in text
    assert "Cannot be decided: the circle collapses (Fig. 3): the test cannot tell the claim from its near-miss" in text
    assert (
        "Of the 3 later claims this run tests, 1 reproduce, 1 do not, 1 cannot be decided. Those that do not hold "
        "here: Wu et al. 2024." in text
    )
    assert findings({}) == "" and first_verdicts({}) == ""


def test_the_first_verdicts_are_the_summarys_first_rows_escaped():
    table = first_verdicts(SUMMARY, n=2)
    rows = SUMMARY["verdicts"]["scientific"][:2]
    assert table.count("   * - ") == 3 and all(f"**{r['verdict']}**" in table for r in rows)
    assert "\\_" in first_verdicts({"verdicts": {"scientific": [_row("holds", "a_b", "x_y")]}})


@pytest.mark.slow
def test_the_interactive_view_is_self_contained_and_the_verdicts_page_renders():
    from san.report.pages import claims_view, rst_page

    html = claims_view(SUMMARY, {"a": synthetic_pretrained([0.5, 0.1, 0.01]), "b": synthetic_rank_collapse(1e-4, 0.5)})
    assert not re.search(r"<script[^>]+src=", html), "every script is inlined (the report works offline)"
    assert html.count("Plotly.newPlot") == 2 and "SAN, init weights" in html and "dinov2-small" in html
    page = rst_page("Every verdict\n=============\n\n- **holds**: a claim\n", "Verdicts")
    assert "<strong>holds</strong>" in page and "<link" not in page
