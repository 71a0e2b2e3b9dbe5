"""Every figure rule hands the one figure script (scripts/figure.py) the inputs its figures' registry entries read
(san.figures): an input key the registry names and the rule does not declare fails the job only when it runs."""

from __future__ import annotations

import re

import pytest

from san.figures import FIGURES

from helpers import ROOT

RULE = re.compile(r"^rule (\w+):\n(.*?)(?=^\S|\Z)", re.M | re.S)
SECTION = re.compile(r"^    (\w+):\n(.*?)(?=^    \w+:|\Z)", re.M | re.S)


def _figure_rules() -> dict[str, tuple[set[str], list[str]]]:
    """Rule name -> (its literal input keys, the registry names of the figures it outputs), for the rules that run
    scripts/figure.py with literal input keys."""
    rules = {}
    for path in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        for name, body in RULE.findall(path.read_text()):
            sections = dict(SECTION.findall(body))
            if "figure.py" not in sections.get("script", "") or "**" in sections.get("input", "**"):
                continue
            keys = set(re.findall(r"^        (\w+)=", sections["input"], re.M))
            figures = re.findall(r'figure_report\(\s*"(\w+)"', sections.get("output", ""))
            rules[name] = (keys, figures)
    return rules


def test_the_figure_rules_are_found():
    rules = _figure_rules()
    assert {"rank_collapse_overview", "path_effectiveness", "path_decomposition", "vision"} <= set(rules), rules


@pytest.mark.parametrize("rule", sorted(_figure_rules()))
def test_a_figure_rule_declares_every_input_its_figures_read(rule):
    keys, figures = _figure_rules()[rule]
    assert figures, f"rule {rule} runs the figure script but names no registered figure"
    for name in figures:
        missing = set(FIGURES[name].inputs) - keys
        assert not missing, f"rule {rule}: figure {name} reads inputs {sorted(missing)}, the rule declares {keys}"


def test_a_figure_rule_renamed_by_an_importing_workflow_draws_its_figure():
    from san.figures import figure_names

    assert figure_names("vision") == ["vision"]
    assert figure_names("san_rank_collapse_overview") == ["rank_collapse_overview"]
    assert figure_names("san_training_dynamics_model") == ["training_dynamics_model"]
    assert figure_names("san_propagation", ["propagation_depth"]) == ["propagation_depth"]
    with pytest.raises(KeyError, match="no registered figure"):
        figure_names("san_unknown")
