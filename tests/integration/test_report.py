"""The whole workflow on a minimal config, then `snakemake --report`: the report's structure, whatever the run found.

These tests assert what every run must write (sections, the verdict contract's fields, states among the allowed
labels, captions rendered from this run's summary, one table row per configured model or task, the files the
documents copy), never a particular outcome of this run: a verdict that flips on another machine or seed leaves
them green, a missing field or an unrendered caption turns them red. The outcomes themselves are tested against
independent recomputations in tests/unit/ (the claims modules' tests)."""

import json
import re

import pytest

from helpers import ROOT, snakemake, tiny_config

# Sections of summary.json, one per claim the wings check, plus the verdict table and the run record.
SECTIONS = {
    "rank_collapse",
    "attention_products",
    "pretrained_collapse",
    "pretrained_slower",
    "first_token_sink",
    "training_series",
    "circle",
    "paths",
    "path_decomposition",
    "theorem",
    "propagation",
    "phenomena",
    "verdicts",
    "provenance",
}
# Fields every verdict row carries (san/claims/verdicts.py row() and collect()); rows may carry more.
ROW_FIELDS = {"key", "claim", "verdict", "kind", "form", "source", "statement", "holds"}
CONTROL_FIELDS = {"reference", "setting", "verdict", "fails_as_it_must", "power"}
# The verdict states a row may take: the four of the verdict contract, and the states the verdicts module declares.
STATES = {"holds", "fails", "not judged", "no power"}
KINDS = {"scientific", "regression", "demonstration"}
PROVENANCE = {"commit", "config_hash", "date", "machine"}
# A leftover template expression: a caption that was not rendered (the captions' own delimiters, written with a
# space inside as every template writes them; a measured detail may print a nested list such as [[0, 1]]).
UNRENDERED = re.compile(r"\[\[ |\[% | %\]| \]\]")


@pytest.fixture(scope="module")
def config(default_config):
    return tiny_config(default_config)


@pytest.fixture(scope="module")
def built(tiny_run):
    """The tiny run (shared with the incremental tests) and its report."""
    wf = tiny_run
    report = snakemake(wf, "--report", "results/report.html")
    (wf / "results" / "report.log").write_text(report.stdout + report.stderr)
    return wf


@pytest.fixture(scope="module")
def summary(built):
    return json.loads((built / "results/summary.json").read_text())


def declared_states() -> set[str]:
    """The states the verdicts module declares, which the contract's three must be among."""
    from san.claims import verdicts

    states = set(verdicts.LABELS.values()) | set(getattr(verdicts, "STATES", ()))
    assert states >= STATES, f"the verdicts module lost a state: {sorted(STATES - states)}"
    return states


def verdict_rows(summary: dict) -> list[dict]:
    return [row for rows in summary["verdicts"].values() for row in rows]


def table_rows(text: str) -> list[list[str]]:
    """The cells of the first Markdown table's rows (header and separator left out); fails unless ``text`` opens with
    one whose every row has the header's number of cells."""
    first = text.split("\n\n")[0]  # the first table (the verdict table has a second, of other widths)
    lines = [line for line in first.splitlines() if line.startswith("|")]
    assert len(lines) >= 2 and re.fullmatch(r"\|( --- \|)+", lines[1]), f"not a Markdown table:\n{text}"
    width = lines[1].count("---")
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[2:]]
    assert all(len(r) == width for r in rows), f"a row without {width} cells:\n{text}"
    assert len(lines[0].strip("|").split(" | ")) == width, f"the header has not {width} cells:\n{text}"
    return rows


def test_summary_has_every_section(summary):
    assert set(summary) >= SECTIONS, f"sections missing from summary.json: {sorted(SECTIONS - set(summary))}"
    for name in SECTIONS - {"verdicts", "provenance"}:
        # a section the run's results cannot speak to is null; any other is a mapping of the wing's claims
        assert summary[name] is None or isinstance(summary[name], dict), name


def test_sections_cover_every_configured_model_task_and_sweep(summary, config):
    rc = summary["rank_collapse"]
    assert set(rc["per_model"]) == set(config["rank_collapse"]["models"])
    assert all(isinstance(rc["per_model"][m], dict) and rc["per_model"][m] for m in rc["per_model"])
    assert set(summary["paths"]["per_task"]) == set(config["paths"]["tasks"])
    rows = summary["propagation"]["verdicts"]
    assert {r["key"].split(".")[0] for r in rows} == set(config["propagation"]["sweeps"]), "a sweep checks no claim"
    assert all(r["holds"] is None or isinstance(r["holds"], bool) for r in rows)


def test_every_verdict_row_has_the_contract_fields(summary):
    states = declared_states()
    assert set(summary["verdicts"]) <= KINDS and summary["verdicts"], "verdicts are split by kind"
    rows = verdict_rows(summary)
    assert rows, "the run lists no verdict"
    for kind, kind_rows in summary["verdicts"].items():
        for row in kind_rows:
            missing = ROW_FIELDS - set(row)
            assert not missing, f"verdict row {row.get('claim')} lacks {sorted(missing)}"
            assert row["kind"] == kind, row
            assert row["verdict"] in states, row
            section, _, key = row["claim"].partition(".")
            assert section in summary and key == row["key"], f"claim {row['claim']} names no section of the summary"
            assert isinstance(row["statement"], str) and row["statement"].strip(), row
            assert kind != "scientific" or "positive_control" in row, f"{row['claim']}: no positive control"
            if "positive_control" in row:
                control = row["positive_control"]
                assert set(control) >= CONTROL_FIELDS, f"{row['claim']}: control lacks {CONTROL_FIELDS - set(control)}"
                assert control["verdict"] in states and control["fails_as_it_must"] in (True, False, None), control
    claims = [row["claim"] for row in rows]
    assert len(claims) == len(set(claims)), "a claim is listed twice"
    # every section that keeps its own verdict list is in the table, and only those rows
    listed = {f"{name}.{r['key']}" for name, s in summary.items() if isinstance(s, dict) for r in s.get("verdicts", [])}
    assert listed <= set(claims), f"verdicts missing from the table: {sorted(listed - set(claims))}"


def test_provenance_names_the_run(summary):
    record = summary["provenance"]
    assert set(record) >= PROVENANCE, f"run record lacks {sorted(PROVENANCE - set(record))}"
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?|unknown", record["commit"]), record
    assert re.fullmatch(r"[0-9a-f]{8,}", record["config_hash"]), record
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", record["date"]) and record["machine"], record


def test_every_result_file_labels_every_variable(built):
    """Every netCDF file of the run (every wing's results, model folders' token ids and pixels included) carries the
    CF globals, and ``long_name`` and ``units`` on every data variable and coordinate, read as stored (no CF
    decoding): the one rule of san.core.provenance.unlabelled, "1" where a variable has no physical unit."""
    import xarray as xr

    from san.core.provenance import missing_cf_attrs

    files = sorted((built / "results").rglob("*.nc"))
    assert files, "the run wrote no netCDF file"
    problems = {}
    for path in files:
        with xr.open_dataset(path, engine="netcdf4", decode_cf=False) as ds:
            missing = missing_cf_attrs(ds)
        if missing:
            problems[path.relative_to(built).as_posix()] = missing
    assert not problems, f"result files without their CF labels: {problems}"
    wings = {path.relative_to(built / "results").parts[0] for path in files}
    assert {"circle", "phenomena"} <= wings, f"the run's netCDF files cover {sorted(wings)}"


def test_runtimes_table_has_a_row_per_benchmarked_job(built):
    lines = (built / "results/tables/runtimes.csv").read_text().splitlines()
    assert lines[0].split(",")[:5] == ["rule", "job", "wall_s", "cpu_s", "max_rss_mb"]
    rules = {line.split(",", 1)[0] for line in lines[1:]}
    folder = built / "results/benchmarks"
    benchmarked = {p.relative_to(folder).parts[0].removesuffix(".tsv") for p in folder.rglob("*.tsv")}
    # the runtimes rule reads the benchmark files of every job but its own and those of the documents' tables and of
    # the report's pages, which read the summary beside it
    missing = benchmarked - {"runtimes", "readme_tables", "report_pages"} - rules
    assert not missing, f"jobs without a runtime row: {sorted(missing)}"


def test_every_caption_is_rendered_from_the_summary(built, summary):
    templates = sorted((ROOT / "workflow/report").glob("*.rst"))
    captions = built / "results/report/captions"
    for template in templates:
        if "[[" not in template.read_text() and "[%" not in template.read_text():
            continue
        caption = captions / template.name
        assert caption.is_file(), f"caption {template.name} was not rendered"
        assert not UNRENDERED.search(caption.read_text()), f"caption {template.name} keeps a template delimiter"
    # a caption quotes the summary's number as the summary holds it (formatted here, not by the captions module)
    rc = summary["rank_collapse"]
    if rc is not None:
        text = (captions / "rank_collapse_model.rst").read_text()
        assert "judged by its rate" in text and f"max {rc['pure_max']:.1e}" in text


# What docutils says of a caption it cannot read as written (an undefined substitution, an unclosed emphasis).
DOCUTILS_PROBLEM = re.compile(r"\((?:WARNING|ERROR|SEVERE)/\d\)")


def test_the_report_builds_without_docutils_problems(built):
    """Every caption reads as reStructuredText as written: the measured details a caption quotes, such as
    ``|measured Y - REM limit|``, are text, not substitutions (san.report.captions.rst_text)."""
    log = (built / "results" / "report.log").read_text()
    assert not DOCUTILS_PROBLEM.search(log), [line for line in log.splitlines() if DOCUTILS_PROBLEM.search(line)]
    assert DOCUTILS_PROBLEM.search('<string>:14: (ERROR/3) Undefined substitution referenced: "measured Y".')


def test_report_has_every_figure(built):
    html = (built / "results/report.html").read_text()
    assert "judged by its rate" in html
    figures = sorted((built / "results/figures").glob("*.png"))
    assert figures, "the run drew no figure"
    missing = [f.stem for f in figures if f.stem not in html]
    assert not missing, f"figures missing from the report: {missing}"


def test_the_run_writes_the_documents_tables(built, summary, config):
    """Rule readme_tables: one Markdown table per san.report.readme.tables() entry, from this run's summary, each
    naming the run; the per-model and per-task tables have a row for every configured model and task."""
    from san.report.readme import tables as readme_tables

    tables = {name: (built / f"results/tables/readme/{name}.md").read_text() for name in readme_tables()}
    # a table whose results this run lacks (no pretrained model) is a sentence saying so; the others are tables
    rows = {name: table_rows(tables[name]) for name in ("rank_collapse", "paths", "verdicts")}
    assert {r[0] for r in rows["rank_collapse"]} == set(config["rank_collapse"]["models"])
    assert {r[0] for r in rows["paths"] if r[0]} == set(config["paths"]["tasks"])  # a task's first row names it
    assert len(rows["verdicts"]) == len(summary["verdicts"]["scientific"]), "one row per scientific verdict"
    second = [chunk for chunk in tables["verdicts"].split("\n\n") if chunk.startswith("|")][1]
    checks = table_rows(second)  # then the regression checks and demonstrations (a caveats line may stand between)
    assert len(rows["verdicts"]) + len(checks) == len(verdict_rows(summary)), "one verdicts row per verdict"
    commit = summary["provenance"]["commit"][:12]
    assert all(f"<sub>Source run: commit {commit}" in text for text in tables.values()), "every table names its run"


def test_publish_refreshes_every_document_from_the_run_and_verify_compares_them(built, summary, tmp_path):
    """One publish step copies the run's tables into the documents' snapshots, each naming the run; verify finds
    the snapshots equal to the run's tables, and finds a hand edit."""
    import shutil

    from san.report import readme

    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy2(ROOT / "README.md", root / "README.md")
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copytree(ROOT / "config", root / "config")
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
    commit = summary["provenance"]["commit"][:12]
    assert f"<sub>Source run: commit {commit}" in (root / "docs" / "verdicts.md").read_text()
    snap = root / readme.SNAPSHOTS / "theorem.md"
    lines = snap.read_text().splitlines(keepends=True)
    row = next(i for i, line in enumerate(lines) if i > 1 and line.startswith("| "))
    lines[row] = lines[row].replace(" |", " (edited) |", 1)
    snap.write_text("".join(lines))
    assert any("theorem.md" in p for p in readme.verify(root, built / "results"))
