"""The whole workflow on a minimal config, then `snakemake --report`: captions carry this run's numbers."""

import json

import pytest

from helpers import copy_workflow, snakemake, tiny_config, write_config


@pytest.fixture(scope="module")
def built(tmp_path_factory, default_config):
    wf = copy_workflow(tmp_path_factory.mktemp("report") / "wf")
    write_config(wf, tiny_config(default_config))
    snakemake(wf, "--cores", "2")
    snakemake(wf, "--report", "results/report.html")
    return wf


def test_summary_checks_the_claims(built):
    summary = json.loads((built / "results/summary.json").read_text())
    assert set(summary) == {
        "rank_collapse",
        "attention_products",
        "pretrained_collapse",
        "pretrained_slower",
        "circle",
        "paths",
        "path_decomposition",
        "theorem",
        "propagation",
    }
    rc = summary["rank_collapse"]
    assert rc["pure_collapses"] is True and rc["pure_max"] < 1e-3
    assert isinstance(rc["skip_survives"], bool) and rc["per_model"]["tiny-bert"]["init"]["last_layer"] == 3
    assert rc["judged"] == ["tiny-bert"] and rc["causal"] == []
    assert summary["pretrained_collapse"] is None  # no model of the tiny config has pretrained weights
    assert summary["pretrained_slower"] is None
    assert summary["paths"]["per_task"]["sorting"]["n_paths"] == 3
    assert summary["path_decomposition"]["exact"] is True  # every tiny SAN reconstructed to round-off
    theorem = summary["theorem"]
    assert theorem["theorem_pairs"]["all"]["violates"] == 0 and theorem["theorem_pairs"]["all"]["respects"] > 0
    assert theorem["certified_holds_no_ln"] is True and theorem["certified_missing_no_ln"] == 0
    assert theorem["adversarial"]["draws"] > 0 and theorem["adversarial"]["controls_detected"] is True
    assert set(summary["propagation"]) == {"depth", "qk_variance", "masks", "sequence_length"}
    assert all(isinstance(c["holds"], bool | None) for cs in summary["propagation"].values() for c in cs)
    runtimes = (built / "results/tables/runtimes.csv").read_text().splitlines()
    assert runtimes[0] == "rule,job,wall_s,cpu_s,max_rss_mb" and any(r.startswith("rank_collapse,") for r in runtimes)


def test_report_has_every_figure_with_measured_captions(built):
    html = (built / "results/report.html").read_text()
    assert len(html) > 50_000
    assert "measured in this run" in html
    rc = json.loads((built / "results/summary.json").read_text())["rank_collapse"]
    assert f"max {rc['pure_max']:.1e}" in (built / "results/report/captions/rank_collapse_model.rst").read_text()
    figures = (
        "rank_collapse_model_tiny-bert",
        "rank_collapse_overview",
        "attention_products_model_tiny-bert",
        "circle",
    )
    figures += ("path_effectiveness", "path_decomposition", "theorem_bound", "propagation_masks", "runtimes")
    for name in figures:
        assert name in html, name


def test_the_run_writes_the_documents_tables(built):
    """Rule readme_tables: one Markdown table per san.report.readme.TABLES entry, from this run's summary."""
    from san.report.readme import TABLES

    tables = {name: (built / f"results/tables/readme/{name}.md").read_text() for name in TABLES}
    assert (
        tables["rank_collapse"].startswith("| model | weights |")
        and "| tiny-bert | init | 3 |" in tables["rank_collapse"]
    )
    assert "| sorting |" in tables["paths"] and "| SAN |" in tables["circle"]
