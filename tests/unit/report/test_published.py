"""verify over everything published: a forger's edit of a regression or demonstration row, a models x claims cell, a
row's threshold, a power scan or a config threshold fails, each with the rest of the summary edited to match (what
a re-render of the tables and updated hashes would hide)."""

from __future__ import annotations

import copy
import json

import pytest

from san.claims import verdicts as V
from san.claims.per_model import cell
from san.report import published

NOTES = {"stay": "set to 0.8 before the first run; raised after it"}
CONFIG = {"report": {"x": {"floor": 0.05, "jump": 10.0, "init_control": 1.0, "stay": 0.9, "threshold_notes": NOTES}}}


def _science() -> dict:
    return V.check(
        "jump", "massive activations appear abruptly", form=V.UNIVERSAL, source="Sun et al. 2024", test="rise > x10",
        statistic=lambda s: V.Measure(100.0 * (1 - s) + s, item="block 1"),
        threshold=V.Threshold(10.0, above=True, key="report.x.jump", log=True),
        wrong=V.Wrong.toward("the twin, {s:g} of the way", 1.0, "report.x.init_control"),
    )  # fmt: skip


def _summary() -> dict:
    science = _science()
    skip = V.row("skip", "skip survives", kind=V.REGRESSION, form=V.UNIVERSAL, source="s", holds=True, value=0.19,
                 margin=0.14, bound=V.Threshold(0.05, above=True, key="report.x.floor"))  # fmt: skip
    built = V.row(
        "built", "a construction", kind=V.DEMONSTRATION, form=V.EXISTENTIAL, source="s", holds=True, value=0.95,
        bound=V.Threshold(0.9, above=True, key="report.x.stay"), inclusive=True,
        items=[{"item": "ln", "value": 0.95, "verdict": V.HOLDS, "must": V.HOLDS},
               {"item": "none", "value": 0.1, "verdict": V.FAILS, "must": V.FAILS}],
    )  # fmt: skip
    sections = {
        "x": {"verdicts": [skip, built]},
        "phenomena": {"verdicts": [science], "table": {"m": {"jump": cell(science, "decoder")}}},
    }
    return {**sections, "verdicts": V.collect(sections)}


def _problems(summary: dict, config: dict = CONFIG) -> list[str]:
    return (published.row_problems(summary) + published.cell_problems(summary)
            + published.threshold_problems(summary, config) + published.scan_problems(summary))  # fmt: skip


def _rows(summary: dict, key: str) -> list[dict]:
    """Every copy of row ``key``: its section's and the verdict table's (a forger edits both)."""
    found = [r for s in summary.values() if isinstance(s, dict) for r in s.get("verdicts", []) if r["key"] == key]
    return found + [r for rows in summary["verdicts"].values() for r in rows if r["key"] == key]


def test_the_untouched_summary_passes():
    assert _problems(_summary()) == []


def test_a_flipped_regression_row_fails():
    summary = _summary()
    for r in _rows(summary, "skip"):
        r["holds"], r["verdict"] = False, "fails"
    assert any("skip: check fails does not follow" in p for p in _problems(summary))


def test_a_flipped_demonstration_row_fails_by_its_items():
    summary = _summary()
    for r in _rows(summary, "built"):
        r["holds"], r["verdict"] = False, "fails"
    assert any("built: check fails" in p for p in _problems(summary))
    summary = _summary()
    for r in _rows(summary, "built"):
        r["items"][1]["verdict"] = V.HOLDS  # the part that must fail edited to hold: its value says otherwise
    assert any("item none prints 'holds'" in p for p in _problems(summary))


def test_a_flipped_models_x_claims_cell_fails():
    summary = _summary()
    summary["phenomena"]["table"]["m"]["jump"]["verdict"] = "fails"
    assert any("phenomena.table.m.jump: prints 'fails'" in p for p in _problems(summary))


def test_a_threshold_edited_in_a_row_fails_against_config():
    summary = _summary()
    for r in _rows(summary, "jump"):  # the threshold lowered with its margin: consistent with itself
        r["threshold"]["value"] = 5.0
        r["margin"] = V.Threshold(**r["threshold"]).margin(V.Measure(r["value"]))
    assert any("threshold report.x.jump = 5.0 where config.yaml has 10.0" in p for p in _problems(summary))


def test_a_config_threshold_changed_fails_against_the_published_rows():
    config = copy.deepcopy(CONFIG)
    config["report"]["x"]["floor"] = 0.1
    assert any("report.x.floor = 0.05 where config.yaml has 0.1" in p for p in _problems(_summary(), config))


def test_an_extended_power_scan_fails():
    summary = _summary()
    for r in _rows(summary, "jump"):
        pc = r["positive_control"]
        pc["scan"] = [*pc["scan"], pc["scan"][-1] + 0.05]
        pc["passes"] = [V.HOLDS] * len(pc["scan"])
        pc["power"] = pc["scan"][-1]
    problems = _problems(summary)
    assert any("jump: its power scan" in p for p in problems), problems


@pytest.mark.parametrize("drop", ["bound", "items"])
def test_a_row_stripped_of_what_it_is_re_derived_from_fails(drop):
    summary = _summary()
    for r in _rows(summary, "built"):
        del r[drop]
        r["holds"] = None if drop == "bound" else r["holds"]
    problems = _problems(summary)
    if drop == "bound":
        assert any("built: a demonstration row without the bound" in p for p in problems)
    else:  # without its parts the row is judged by its value alone: 0.95 clears 0.9
        assert problems == []


@pytest.mark.slow
def test_verify_fails_on_a_config_threshold_changed_after_the_committed_run(tmp_path):
    """The committed results pass verify; with report.vision.high_norm edited in a copy of config.yaml (no rerun,
    no republish) they fail it, naming the key."""
    import shutil

    from san.report import readme

    from helpers import ROOT

    root = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copytree(ROOT / "config", root / "config")
    shutil.copytree(ROOT / "workflow" / "schemas", root / "workflow" / "schemas")
    shutil.copy2(ROOT / "README.md", root / "README.md")
    config = (ROOT / "config.yaml").read_text()
    (root / "config.yaml").write_text(config)
    committed = json.loads((root / readme.SNAPSHOTS / "summary.json").read_text())
    if committed.get("format", 1) < published.FORMAT:
        pytest.skip("the committed summary predates the claim records: python -m san.report.readme publish results")
    assert readme.verify(root) == []
    assert "    high_norm: 10.0\n" in config
    (root / "config.yaml").write_text(config.replace("    high_norm: 10.0\n", "    high_norm: 12.0\n", 1))
    problems = readme.verify(root)
    assert any("report.vision.high_norm = 10.0 where config.yaml has 12.0" in p for p in problems), problems
