"""The wings' registry (san.experiments): a wing registered there once reaches the config check, summary.json with
its verdicts, the documents' tables and their data, and the Snakefile's includes; every real wing has its rules
files (the wings' order and contract: tests/unit/claims/test_verdicts.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from san import experiments
from san.claims import verdicts as V
from san.core.markdown import lookup, markdown
from san.experiments import wing_inputs
from san.report import readme
from san.report.claims import gather, summary, wing_summary

from helpers import ROOT

SCHEMAS = ROOT / "workflow" / "schemas"
RUN = {"commit": "0123456789abcdef", "config_hash": "abcdef012345", "date": "2026-01-01 00:00 UTC", "machine": "m"}


def fake_wing(calls: list) -> experiments.Wing:
    """A wing of its own modules: its config check records the config it saw, its claims read the one file named
    ``fake`` among the summary's inputs, its table prints the section's value and reads a data file of its own."""

    def claims(inputs, params):
        holds = Path(inputs["fake"][0]).read_text() == "ok"
        row = V.row("works", "the fake wing reads its result", kind=V.REGRESSION, form=V.UNIVERSAL, source="a test",
                    holds=holds)  # fmt: skip
        return {"fake": {"value": params["fake_value"], "verdicts": [row]}}

    def table(summary, data):
        return markdown(["value", "data"], [[lookup(summary, "fake.value", "fake"), Path(data["fake.csv"]).name]])

    return experiments.Wing(
        "fake",
        spec=SimpleNamespace(check_config=lambda config, schemas: calls.append(("spec", sorted(config))) or "slices"),
        claims=SimpleNamespace(check_config=lambda report: calls.append(("report", sorted(report))), claims=claims),
        tables=SimpleNamespace(TABLES={"fake": table}, DATA={"fake.csv": Path("fake/table.csv")}),
        inputs=("fake",),
        params=("fake_value",),
        report=("fake",),
    )


def test_a_wing_registered_once_reaches_checks_claims_tables_and_rules(monkeypatch, default_config, tmp_path):
    calls: list = []
    monkeypatch.setattr(experiments, "WINGS", (*experiments.WINGS, fake_wing(calls)))
    cfg = copy.deepcopy(default_config)
    derived = experiments.check_config(cfg, SCHEMAS)
    assert derived["fake"] == "slices" and list(derived)[-1] == "fake"
    # after every wing's own check, on the report sections it declares (config has no `report.fake`)
    assert calls == [("spec", sorted(cfg)), ("report", [])]
    assert experiments.rules_files()[-1] == "rules/fake.smk"

    monkeypatch.setattr(experiments, "WINGS", experiments.WINGS[-1:])  # the fake wing alone for its claims
    (tmp_path / "fake.nc").write_text("ok")
    inputs = {"fake": [str(tmp_path / "fake.nc")], "other": ["unread.nc"]}
    sections = summary(inputs, {"report": {"fake": {}, "other": {}}, "fake_value": 7, "unread": 1})
    assert calls[-1] == ("report", ["fake"])  # its own report section only
    assert sections["fake"]["value"] == 7
    assert [(r["claim"], r["verdict"]) for r in sections["verdicts"]["regression"]] == [("fake.works", "holds")]

    assert list(readme.tables()) == ["fake", "verdicts"]
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "table.csv").write_text("x\n")
    (tmp_path / "summary.json").write_text(json.dumps({**sections, "provenance": RUN}))
    assert readme.run_data(tmp_path) == {
        "summary.json": tmp_path / "summary.json",
        "fake.csv": tmp_path / "fake/table.csv",
    }
    written = readme.write_tables(tmp_path, tmp_path / "out")
    assert [p.name for p in written] == ["fake.md", "verdicts.md"]
    assert "| 7 | table.csv |" in written[0].read_text()
    row = "| the fake wing reads its result (`fake.works`) | regression | a test | holds |  | none | none | none |"
    assert row in written[1].read_text()


def test_two_wings_naming_one_table_are_refused(monkeypatch):
    calls: list = []
    monkeypatch.setattr(experiments, "WINGS", (*experiments.WINGS, fake_wing(calls), fake_wing(calls)))
    with pytest.raises(ValueError, match=r"wing 'fake' names the table\(s\) \['fake'\] of another wing"):
        experiments.tables()


def test_every_wing_has_its_rules_files_and_the_snakefile_includes_them():
    assert all((ROOT / "workflow" / path).is_file() for path in experiments.rules_files())
    snakefile = (ROOT / "workflow" / "Snakefile").read_text()
    assert "for wing_rules in WING_RULES:" in snakefile and "include: wing_rules" in snakefile
    shared = {"common.smk", "report.smk", "model_report.smk"}  # the rules of no wing: config, report, one model's
    listed = {p.name for p in (ROOT / "workflow" / "rules").glob("*.smk")} - shared
    assert listed == {Path(p).name for p in experiments.rules_files()}, "a rules file of no wing"


def test_each_wing_reads_only_what_it_names(monkeypatch, tmp_path):
    """A wing's summary job gets the inputs, params and report sections its registry entry names, nothing else; its
    verdicts are the same as when judged among every wing."""
    calls: list = []
    monkeypatch.setattr(experiments, "WINGS", (fake_wing(calls),))
    (tmp_path / "fake.nc").write_text("ok")
    inputs = {"fake": [str(tmp_path / "fake.nc")], "other": ["unread.nc"]}
    params = {"report": {"fake": {"x": 1}, "other": {}}, "fake_value": 7, "unread": 1, "model_entries": {"m": {}}}
    own, values = wing_inputs("fake", inputs, params)
    assert own == {"fake": inputs["fake"]}
    assert values == {"fake_value": 7, "report": {"fake": {"x": 1}}, "model_entries": {"m": {}}}
    alone = gather({"fake": wing_summary("fake", own, values)})
    assert alone == summary(inputs, params)
    with pytest.raises(KeyError, match=r"no summary of the wing\(s\) \['fake'\]"):
        gather({})
    with pytest.raises(KeyError, match="no wing 'nope'"):
        experiments.named("nope")


def test_a_threshold_outside_the_wings_report_sections_is_refused(monkeypatch, tmp_path):
    """A row judged against a threshold of a report section its wing does not declare would read no history (its
    `t` marker lost): refused, naming the key."""
    calls: list = []
    fake = fake_wing(calls)

    def claims(inputs, params):
        row = V.row("works", "reads another section's threshold", kind=V.REGRESSION, form=V.UNIVERSAL,
                    source="a test", holds=True)  # fmt: skip
        row["threshold"] = {"key": "report.other.limit", "value": 1.0}
        return {"fake": {"verdicts": [row]}}

    fake = experiments.Wing(**{**fake.__dict__, "claims": SimpleNamespace(check_config=lambda r: None, claims=claims)})
    monkeypatch.setattr(experiments, "WINGS", (fake,))
    with pytest.raises(ValueError, match=r"thresholds \['report.other.limit'\] outside the report sections it reads"):
        wing_summary("fake", {}, {"report": {"fake": {}}})


def test_every_wings_declared_report_sections_exist_in_config(default_config):
    for w in experiments.WINGS:
        assert set(w.report) <= set(default_config["report"]), w.name


def test_the_report_sections_of_config_yaml_follow_the_wings():
    """``report:`` in config.yaml lists each wing's threshold sections in the order of the registry, so a reader
    finds a wing's thresholds together and in the order of summary.json's verdicts."""
    sections = list(yaml.safe_load((ROOT / "config.yaml").read_text())["report"])
    wings = list(dict.fromkeys(s for w in experiments.WINGS for s in w.report))
    assert sections == [s for s in wings if s in sections] and set(sections) == set(wings)
