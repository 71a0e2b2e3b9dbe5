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
        "verdicts",
        "provenance",
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
    assert theorem["adversarial"]["sizes"] == {"n": [2, 4, 8], "H": [1, 2]}
    verdicts = summary["verdicts"]
    kinds = {v["claim"]: kind for kind, rows in verdicts.items() for v in rows}
    assert kinds["theorem.adversarial.holds"] == "scientific" and kinds["theorem.certified_holds_no_ln"] == "regression"
    assert kinds["path_decomposition.exact"] == "regression" and kinds["rank_collapse.skip_survives"] == "regression"
    assert kinds["paths.short_beats_long"] == "scientific" and any(c.startswith("propagation.") for c in kinds)
    rows = [v for kind in verdicts.values() for v in kind]
    # every scientific row carries its positive control; every row one of the four printed states
    assert all("positive_control" in v for v in verdicts["scientific"])
    assert {"theorem.nominal.holds", "theorem.certified_holds_no_ln"} <= {
        v["claim"] for v in rows if "positive_control" in v
    }
    assert all(v["verdict"] in ("holds", "fails", "not judged", "no power") for v in rows)
    assert kinds["propagation.masks.layernorm_construction"] == "demonstration"
    assert set(summary["provenance"]) == {"commit", "config_hash", "date", "machine"}
    sweeps = {r["key"].split(".")[0] for r in summary["propagation"]["verdicts"]}
    assert sweeps == {"depth", "qk_variance", "masks", "sequence_length"}
    assert all(isinstance(c["holds"], bool | None) for c in summary["propagation"]["verdicts"])
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
    assert "| scientific verdict |" in tables["verdicts"] and "| regression check |" in tables["verdicts"]
    commit = json.loads((built / "results/summary.json").read_text())["provenance"]["commit"][:12]
    assert all(f"<sub>Source run: commit {commit}" in text for text in tables.values()), "every table names its run"


def test_publish_refreshes_every_document_from_the_run_and_verify_compares_them(built, tmp_path):
    """One publish step copies the run's tables into the documents' snapshots, each naming the run; verify finds
    the snapshots equal to the run's tables, and finds a hand edit."""
    import shutil

    from san.report import readme

    from helpers import ROOT

    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy2(ROOT / "README.md", root / "README.md")
    shutil.copytree(ROOT / "docs", root / "docs")
    for snap in (root / readme.SNAPSHOTS).glob("bench_*.md"):
        snap.unlink()  # benchmarks are published from their own runs; none here
    for doc in readme.documents(root):
        text = doc.read_text()
        doc.write_text(readme.BLOCK.sub(lambda m: m.group(0) if not m.group(2).startswith("bench_") else "", text))
    figures = built / "results" / "figures"
    for name in readme.GALLERY:  # the tiny run has no pretrained model: a stand-in for the figure it does not draw
        if not (figures / f"{name}.png").is_file():
            shutil.copyfile(figures / "rank_collapse_overview.png", figures / f"{name}.png")
    readme.publish(built / "results", root, None)
    assert readme.verify(root, built / "results") == []
    commit = json.loads((built / "results/summary.json").read_text())["provenance"]["commit"][:12]
    assert f"<sub>Source run: commit {commit}" in (root / "docs" / "verdicts.md").read_text()
    snap = root / readme.SNAPSHOTS / "theorem.md"
    snap.write_text(snap.read_text().replace("| no (the theorem) |", "| no |", 1))
    assert any("theorem.md" in p for p in readme.verify(root, built / "results"))
