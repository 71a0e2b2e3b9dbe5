"""README.md and docs/: short, free of how the project was made, and every number in their generated blocks equal
to the committed copy of a run's (or a benchmark's) table, which san.report.readme writes and publishes."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from san.claims import verdicts as V
from san.core.markdown import MissingKey
from san.report import published, readme
from san.report.benchmark_tables import benchmark_table
from san.theory.claims import factor_scan

from helpers import ROOT

README_MAX_LINES = 250
HISTORY = re.compile(r"session|issue [0-9#]", re.I)
PRODUCT = ("README.md", "docs", "san", "scripts", "workflow", "benchmarks")


def history(root: Path) -> list[str]:
    """Every line of the product under ``root`` that names a session or an issue (``path:line: text``), as
    ``grep -rniE "session|issue [0-9#]"`` finds them, leaving out the pinned third-party prose of ``san/data/``
    (Python's documentation, not ours) and compiled files."""
    hits = []
    for top in PRODUCT:
        paths = [root / top] if (root / top).is_file() else sorted((root / top).rglob("*"))
        for path in paths:
            parts = path.relative_to(root).parts
            if not path.is_file() or "data" in parts or "__pycache__" in parts:
                continue
            lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
            rel = path.relative_to(root)
            hits += [f"{rel}:{i}: {line}" for i, line in enumerate(lines, 1) if HISTORY.search(line)]
    return hits


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_no_development_history_in_the_product():
    """No line of the product names a session or an issue."""
    hits = history(ROOT)
    assert not hits, "\n".join(hits[:20])


def test_the_history_check_finds_history(tmp_path):
    """The check fails on a document that names a session or an issue (the check can fail), and passes over the
    pinned prose of san/data/."""
    (tmp_path / "README.md").write_text("Measured in the last session (see issue #3).\n")
    (tmp_path / "san" / "data").mkdir(parents=True)
    (tmp_path / "san" / "data" / "prose.txt").write_text("an interactive session\n")
    assert history(tmp_path) == ["README.md:1: Measured in the last session (see issue #3)."]


def test_documents_match_their_generated_snapshots():
    """Every generated block of README.md and docs/*.md equals docs/results/<name>.md: a hand edit fails here;
    `python -m san.report.readme sync` (or `publish` after a run) rewrites the blocks."""
    assert readme.sync(ROOT, check=True) == []


def test_every_block_has_a_snapshot_and_the_readme_quotes_results_and_performance():
    names = {m.group(2) for doc in readme.documents(ROOT) for m in readme.BLOCK.finditer(doc.read_text())}
    snapshots = names - set(readme.FAMILY_TABLES) - set(readme.SENTENCES) - {readme.GALLERY_BLOCK}
    assert all((ROOT / readme.SNAPSHOTS / f"{name}.md").is_file() for name in snapshots), names
    assert set(readme.FAMILY_TABLES) <= names, "a family table that no document quotes"
    text = (ROOT / "README.md").read_text()
    results, performance = text.split("## Results", 1)[1].split("## Performance", 1)
    assert readme.BLOCK.search(results) and readme.BLOCK.search(performance.split("\n## ", 1)[0])
    assert set(readme.tables()) <= names, "a run table that no document quotes"


def _copy_documents(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "README.md", dest / "README.md")
    shutil.copytree(ROOT / "docs", dest / "docs")
    shutil.copytree(ROOT / "config", dest / "config")  # the overlays whose published tables the documents quote
    return dest


def test_a_hand_edited_number_is_out_of_sync(tmp_path):
    root = _copy_documents(tmp_path)
    text = (root / "README.md").read_text()
    block = readme.BLOCK.search(text)
    edited = text[: block.start(3)] + re.sub(r"\d", "7", block.group(3), count=1) + text[block.end(3) :]
    assert edited != text
    (root / "README.md").write_text(edited)
    assert readme.sync(root, check=True) == [root / "README.md"]
    assert readme.sync(root) == [root / "README.md"]  # rewritten from the snapshot
    assert (root / "README.md").read_text() == text


def test_a_block_without_snapshot_is_an_error(tmp_path):
    root = _copy_documents(tmp_path)
    (root / "docs" / "extra.md").write_text("<!-- generated: nowhere -->\n<!-- end -->\n")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        readme.sync(root, check=True)


def test_a_family_table_block_is_rendered_from_the_family_table(tmp_path, monkeypatch):
    """The family tables share the one block syntax and the one sync: a stale block is reported and rewritten with
    the table rendered from the family table, so a family added to the table reaches the documents."""
    import dataclasses

    from san.models import tables
    from san.models.spec import FAMILY_TABLE

    root = _copy_documents(tmp_path)
    (root / "docs" / "extra.md").write_text("a\n<!-- generated: variants -->\nstale\n<!-- end -->\n")
    assert readme.sync(root, check=True) == [root / "docs" / "extra.md"]
    readme.sync(root)
    expected = f"a\n<!-- generated: variants -->\n{tables.variant_table()}<!-- end -->\n"
    assert (root / "docs" / "extra.md").read_text() == expected
    new = {**FAMILY_TABLE, "newfamily": dataclasses.replace(FAMILY_TABLE["llama"], notes="a new family")}
    monkeypatch.setitem(readme.FAMILY_TABLES, "variants", lambda: tables.variant_table(new))
    assert set(readme.sync(root, check=True)) == {root / "docs" / "models.md", root / "docs" / "extra.md"}
    readme.sync(root)
    assert "| `newfamily` |" in (root / "docs" / "extra.md").read_text()


RUN = {"commit": "0123456789abcdef", "config_hash": "abcdef012345", "date": "2026-01-01 00:00 UTC", "machine": "m"}


def control(verdict: bool) -> dict:
    """A positive control's record (san.claims.verdicts.control)."""
    return {
        "reference": "the bound divided by 2",
        "setting": 2.0,
        "verdict": "holds" if verdict else "fails",
        "fails_as_it_must": not verdict,
        "power": 9.1 if verdict else None,
    }


def _adversarial_row() -> dict:
    """A scientific row built by the one check: gamma 0.11 against 1, and the bound divided by a factor that it still
    passes up to 9, beyond the scan's 4 (so at the setting 2 the control holds: no power)."""
    return V.check(
        "adversarial.holds", "gamma <= 1 (adversarial)", form=V.UNIVERSAL, source="Theorem 2.2", test="gamma <= 1",
        statistic=lambda f: V.Measure(0.11 * f), threshold=V.Threshold(1.0, above=False, key="report.theorem.g"),
        wrong=V.Wrong("the bound divided by {s:g}", 1.0, 2.0, "report.theorem.control_factor", factor_scan(2.0)),
    )  # fmt: skip


def _summary() -> dict:
    """A small summary.json with every key the tables read."""
    entry = {"pure_at_layer": {"SAN": 1e-6, "SAN+MLP": 2e-6}, "skip_at_last": {"SAN+skip": 0.5, "transformer": 0.4},
             "last_layer": 12}  # fmt: skip
    group = {"respects": 5, "violates": 0, "undecided": 0, "float_floor": 1}
    claim = V.check(
        "depth.noci", "branches scaled", form=V.UNIVERSAL, source="Noci et al. 2022, abstract", test="cosine < 0.9",
        statistic=lambda s: V.Measure(0.3 + s), threshold=V.Threshold(0.9, above=False, key="report.p.cosine"),
        wrong=V.Wrong.toward("the unscaled residual, {s:g} of the way", 1.0, "report.p.unscaled"), detail="cosine 0.3",
    )  # fmt: skip
    regression = {"kind": "regression", "form": "universal", "source": "Theorem 2.2"}
    sections = {
        "rank_collapse": {
            "layer": 2,
            "per_model": {"bert": {"init": entry}},
            "rate": {"bert": {"init": {"exponent": 1.1, "late_share": 0.48}}},
        },
        "pretrained_collapse": None,
        "training_series": None,
        "path_decomposition": {
            "short": 2,
            "per_task": {
                "sorting": {
                    "full": 0.6,
                    "chance": 0.3,
                    "truncated": {"0": 0.4, "1": 0.6},
                    "short_share_of_gain": 0.9,
                    "norm_share_short": {"trained": 0.9, "init": 0.95},
                }
            },
        },  # fmt: skip
        "circle": {"per_variant": {"SAN": {"collapsed": 3, "runs": 5}}},
        "theorem": {
            "theorem_pairs": {"all": group, "gaussian": group},
            "layernorm_pairs": {"all": group},
            "slack_no_ln": {"min": 6.5, "median": 6.6},
            "certified_margin_min_no_ln": 6.2,
            "certified_margin_threshold": 0.0,
            "certified_holds_no_ln": True,
            "certified_control": control(False),
            "nominal": {"violations": 0, "threshold": 0, "holds": True, "control": control(True)},
            "adversarial": {
                "draws": 240,
                "gamma_max": 0.11,
                "threshold_log10_gamma": 0.0,
                "holds": True,
                "control": control(True),
                "ascent_gain": 0.8,
                "sizes": {"n": [2, 4, 8], "H": [1, 2]},
                "negative_control_criterion": 0.0,
                "controls": {"skip": {"log10_gamma_max": 7.2, "violated": True}},
            },
            "fig2_exponent": {"bert": {"init": 3.3}},
            "verdicts": [
                V.row(
                    "nominal.holds",
                    "nominal bound",
                    holds=True,
                    value=0,
                    margin=0,
                    inclusive=True,
                    bound=V.Threshold(0, above=False, key="report.theorem.nominal_violations_max"),
                    **regression,
                ),
                V.row(
                    "certified_holds_no_ln",
                    "certified bound",
                    holds=True,
                    value=6.2,
                    margin=6.2,
                    inclusive=True,
                    bound=V.Threshold(0, above=True, key="report.theorem.certified_margin_min"),
                    **regression,
                ),
                _adversarial_row(),
            ],
        },  # fmt: skip
        "propagation": {"verdicts": [claim]},
    }
    return {**sections, "verdicts": V.collect(sections), "provenance": RUN, "format": published.FORMAT}


def test_tables_from_a_summary(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(_summary()))
    written = readme.write_tables(tmp_path, tmp_path / "out")
    assert [p.stem for p in written] == list(readme.tables())
    out = {p.stem: p.read_text() for p in written}
    assert "| bert | init | 12 | 1.0e-06 | 2.0e-06 | 0.5 | 0.4 | 1.1 | 0.48 |" in out["rank_collapse"]
    assert "| SAN | 3 / 5 |" in out["circle"]
    assert (
        "| Noci et al. 2022, abstract | branches scaled | universal | holds |  | 0.3 | < 0.9 (report.p.cosine) | 0.6 "
        "| the unscaled residual, 1 of the way: fails as it must; passes up to 0.55 | cosine 0.3 |"
        in out["propagation"]
    )
    assert "| no (the theorem) | gaussian | 5 | 0 | 0 | 1 |" in out["theorem"]
    assert (
        "| adversarial search: largest gamma (240 draws; n = 2, 4, 8; H = 1, 2; ascent gain 0.8 decades) | scientific "
        "| 0.11 | <= 1 | no power | the bound divided by 2: does NOT fail: no power; passes up to 9.1 |"
        in out["theorem"]
    )
    assert (
        "| certified bound: smallest margin (decades) | regression | 6.2 | >= 0 | holds | the bound divided by 2: "
        "fails as it must |" in out["theorem"]
    )
    assert "| negative control skip: largest log10 gamma | regression | 7.2 | > 0 | holds |  |" in out["theorem"]
    assert "no model" in out["pretrained"].lower()
    assert (
        "| gamma <= 1 (adversarial) (`theorem.adversarial.holds`) | Theorem 2.2 | no power |  | 0.11 | < 1 "
        "(report.theorem.g) | 0.89 | the bound divided by 2 (report.theorem.control_factor = 2), measured 0.22: "
        "holds | >= 4 |" in out["verdicts"]
    )
    assert (
        "| certified bound (`theorem.certified_holds_no_ln`) | regression | Theorem 2.2 | holds |  | 6.2 | > 0 "
        "(report.theorem.certified_margin_min) | 6.2 |" in out["verdicts"]
    )
    line = "<sub>Source run: commit 0123456789ab, config abcdef012345, 2026-01-01 00:00 UTC, m.</sub>"
    assert all(text.rstrip().endswith(line) for text in out.values()), "every table names its run"


def test_a_missing_summary_key_names_it_and_writes_nothing(tmp_path):
    summary = _summary()
    del summary["theorem"]["slack_no_ln"]["median"]
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(MissingKey, match=r"'theorem.slack_no_ln.median'.*table 'theorem'"):
        readme.write_tables(tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _png(path: Path, width_in: float) -> None:
    fig, ax = plt.subplots(figsize=(width_in, 2))
    ax.plot([0, 1], [0, 1])
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=300)
    plt.close(fig)


def _results_with_tables(results: Path) -> Path:
    """A run's results folder holding a summary and the README tables written from it."""
    results.mkdir(parents=True)
    (results / "summary.json").write_text(json.dumps(_summary()))
    readme.write_tables(results, results / "tables" / "readme")
    return results


BENCH_RECORD = {
    "command": "python benchmarks/bench_x.py --quick",
    "commit": "0123456789abcdef",
    "date": "d",
    "machine": "m",
}


def _benchmark(folder: Path, name: str, jobs: int = 3) -> Path:
    """A benchmark's output as benchmarks/_common.write_table leaves it: its data (measurements: the whole run's
    jobs, cores and wall time, which the README's run-time sentence reads) and the table rendered from it."""
    folder.mkdir(parents=True, exist_ok=True)
    row = {"jobs": str(jobs), "cores": 2, "wall_s": 60.0 * jobs, "overlay": "config/overlay.yaml"}
    data = {
        "columns": [{"title": "jobs", "cell": "{jobs}"}],
        "rows": [row],
        "note": "After a run.",
        "record": BENCH_RECORD,
    }
    (folder / f"{name}.json").write_text(json.dumps(data))
    (folder / f"{name}.md").write_text(benchmark_table(data))
    return folder / f"{name}.md"


def test_a_benchmark_table_is_rendered_from_its_data_and_names_its_command():
    data = {"header": ["jobs", "wall"], "rows": [["3", "4 s"]], "note": "After a run.", "record": BENCH_RECORD}
    text = benchmark_table(data)
    assert text == (
        "| jobs | wall |\n| --- | --- |\n| 3 | 4 s |\n\nAfter a run.\n\n"
        "<sub>Source benchmark: `python benchmarks/bench_x.py --quick`, commit 0123456789ab, d, m.</sub>\n"
    )
    with pytest.raises(KeyError, match="command"):
        benchmark_table({**data, "record": {k: v for k, v in BENCH_RECORD.items() if k != "command"}})


@pytest.mark.slow
def test_publish_copies_tables_and_web_sized_figures_then_syncs(tmp_path):
    root = _copy_documents(tmp_path / "repo")
    results = _results_with_tables(tmp_path / "results")
    for name in readme.GALLERY:
        _png(results / "figures" / f"{name}.png", width_in=7.2 if name != "circle" else 3.0)  # 2160 px and 900 px
    bench = tmp_path / "bench_out"
    for snap in (root / readme.SNAPSHOTS).glob("bench_*.md"):  # every benchmark rerun with this run
        _benchmark(bench, snap.stem)
    changed = readme.publish(results, root, bench)
    assert root / "README.md" in changed
    assert "| bert | init | 12 |" in (root / "README.md").read_text()
    assert "| jobs |\n| --- |\n| 3 |" in (root / "README.md").read_text()
    for name in readme.GALLERY:
        width = plt.imread(root / readme.FIGURES / f"{name}.png").shape[1]
        assert width == (900 if name == "circle" else readme.GALLERY_WIDTH_PX), (name, width)
    assert readme.sync(root, check=True) == []
    assert readme.verify(root, results) == [], "the snapshots are the run's tables"
    # a hand edit of a snapshot (a number, or a table copied from another run) is found
    snap = root / readme.SNAPSHOTS / "circle.md"
    snap.write_text(snap.read_text().replace("3 / 5", "4 / 5"))
    problems = readme.verify(root, results)
    assert any("circle.md differs from the file it was published from" in p for p in problems)
    assert any("circle.md differs from" in p and "results" in p for p in problems)


def test_publish_refuses_tables_of_another_run_and_unnamed_benchmarks(tmp_path):
    root = _copy_documents(tmp_path / "repo")
    manifest = root / readme.MANIFEST
    before = manifest.read_text() if manifest.exists() else None
    results = _results_with_tables(tmp_path / "results")
    for name in readme.GALLERY:
        _png(results / "figures" / f"{name}.png", width_in=1.0)
    other = json.loads((results / "summary.json").read_text())
    other["provenance"] = {**RUN, "commit": "fedcba9876543210"}
    (results / "summary.json").write_text(json.dumps(other))
    with pytest.raises(ValueError, match="tables not written from"):
        readme.publish(results, root, None)
    (results / "summary.json").write_text(json.dumps(_summary()))
    bench = tmp_path / "bench_out"
    bench.mkdir()
    (bench / "bench_run.md").write_text("| jobs |\n| --- |\n| 3 |\n")
    with pytest.raises(ValueError, match="name no run"):
        readme.publish(results, root, bench)
    _benchmark(bench, "bench_run").with_suffix(".json").unlink()  # a table that names its run, without its data
    with pytest.raises(ValueError, match="no data file bench_run.json"):
        readme.publish(results, root, bench)
    _benchmark(bench, "bench_run")
    table = bench / "bench_run.md"
    table.write_text(table.read_text().replace("| 3 |", "| 4 |"))  # a table that is not its data's
    with pytest.raises(ValueError, match="differs from the table rendered from bench_run.json"):
        readme.publish(results, root, bench)
    assert (manifest.read_text() if manifest.exists() else None) == before, "a refused publish writes nothing"


PUBLISHED_BEFORE_ITS_DATA = "d2de101755eae1d18ab58da024f47ed178543c68"
"""The commit of the one run whose snapshots were published before publish committed the data beside them."""


def test_the_committed_snapshots_are_what_a_run_published():
    """Every docs/results/ file is one that publish copied from a run or a benchmark (its sha256 in
    docs/results/SOURCES.json), and every table equals the one rendered again from the committed data: a hand-edited
    snapshot, even with its hash, fails here. Only the run published before its data was committed may show the
    problems that a new publish fixes, and even then every table has its recorded hash and names its run."""
    problems = readme.verify(ROOT)
    run = json.loads((ROOT / readme.MANIFEST).read_text()).get("run", {})
    if run.get("commit") == PUBLISHED_BEFORE_ITS_DATA:
        assert [p for p in problems if not p.endswith((readme.REPUBLISH, readme.RERUN_BENCHMARK))] == []
    else:
        assert problems == []


def _published(tmp_path: Path, paths_csv: str | None = None) -> tuple[Path, Path]:
    """A repository copy with a run (a synthetic summary, its tables, figures) and a benchmark published into it."""
    root = _copy_documents(tmp_path / "repo")
    for snap in (root / readme.SNAPSHOTS).iterdir():  # the snapshots of this run and benchmark only (overlays kept)
        if snap.is_file():
            snap.unlink()
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.json").write_text(json.dumps(_summary()))
    if paths_csv is not None:
        (results / "paths").mkdir()
        (results / "paths" / "summary.csv").write_text(paths_csv)
    readme.write_tables(results, results / "tables" / "readme")
    for name in readme.GALLERY:
        _png(results / "figures" / f"{name}.png", width_in=1.0)
    bench = tmp_path / "bench_out"
    for name in {m.group(2) for d in readme.documents(root) for m in readme.BLOCK.finditer(d.read_text())}:
        if name.startswith("bench_"):
            _benchmark(bench, name)
    readme.publish(results, root, bench)
    return root, results


def _edit_with_hash(root: Path, name: str, old: str, new: str) -> None:
    """Edit a snapshot and record its new sha256 in the manifest, as a hand edit that hides itself would."""
    snap = root / readme.SNAPSHOTS / name
    text = snap.read_text()
    assert old in text, (name, old)
    snap.write_text(text.replace(old, new, 1))
    manifest = json.loads((root / readme.MANIFEST).read_text())
    for section in manifest.values():
        if name in section:
            section[name] = readme.sha256(snap)
    (root / readme.MANIFEST).write_text(json.dumps(manifest))


PATHS_CSV = "task,full_model,chance,n_seeds,seed_range_max,acc_n1_k0,acc_n1_k1\nsorting,0.9,0.3,2,0.01,0.4,0.8\n"


def test_a_clean_publish_commits_the_runs_data_and_verifies(tmp_path):
    root, results = _published(tmp_path, PATHS_CSV)
    snapshots = root / readme.SNAPSHOTS
    assert json.loads((snapshots / "summary.json").read_text()) == _summary()
    assert (snapshots / "paths_summary.csv").read_text() == PATHS_CSV
    assert "| sorting | 0.900 | 0.300 | 2 / 0.010 | 1 | 0.400 | 0.800 |" in (snapshots / "paths.md").read_text()
    manifest = json.loads((root / readme.MANIFEST).read_text())
    assert manifest["data"] == {n: readme.sha256(snapshots / n) for n in ("summary.json", "paths_summary.csv")}
    assert manifest["run"] == RUN
    assert "bench_run.json" in manifest["benchmarks"] and "bench_run.md" in manifest["benchmarks"]
    assert readme.verify(root) == [] and readme.verify(root, results) == []
    assert readme.sync(root, check=True) == []


def test_an_edited_number_with_its_hash_fails_verify(tmp_path):
    """A number edited in a run table, and its sha256 in SOURCES.json, no longer equals the table rendered from
    the committed summary: verify names the table (and sync --check the documents that quote the old number)."""
    root, _ = _published(tmp_path, PATHS_CSV)
    _edit_with_hash(root, "circle.md", "| SAN | 3 / 5 |", "| SAN | 4 / 5 |")
    problems = readme.verify(root)
    assert any("'circle'" in p and "differs from the one rendered" in p for p in problems), problems
    assert not any("hand-edited" in p for p in problems), "the hash was edited too: only the rendering finds it"
    readme.sync(root)  # the documents quote the edited table: only the rendering still finds the edit
    assert readme.sync(root, check=True) == [] and readme.verify(root) != []


def test_an_edited_paths_number_with_its_hash_fails_verify(tmp_path):
    root, _ = _published(tmp_path, PATHS_CSV)
    _edit_with_hash(root, "paths.md", "| 0.400 | 0.800 |", "| 0.400 | 0.850 |")
    assert any("'paths'" in p for p in readme.verify(root))


@pytest.mark.slow
def test_an_edited_summary_with_its_hash_fails_verify(tmp_path):
    """The data edited with its hash: the tables no longer match it."""
    root, _ = _published(tmp_path, PATHS_CSV)
    _edit_with_hash(root, "summary.json", '"collapsed": 3', '"collapsed": 4')
    problems = readme.verify(root)
    assert any("'circle'" in p and "summary.json" in p for p in problems), problems
    root, _ = _published(tmp_path / "csv", PATHS_CSV)
    _edit_with_hash(root, "paths_summary.csv", "0.4,0.8", "0.4,0.85")
    assert any("'paths'" in p for p in readme.verify(root))


def _republished_with(root: Path, edit) -> None:
    """The committed summary edited by ``edit`` (a function of the parsed summary), its tables rendered again from
    it and every hash updated: a forgery that hides itself from every check but the summary's own numbers."""
    snapshots = root / readme.SNAPSHOTS
    summary = json.loads((snapshots / "summary.json").read_text())
    edit(summary)
    (snapshots / "summary.json").write_text(json.dumps(summary))
    for name, text in readme.build_tables(summary, readme.run_data(snapshots, snapshots=True)).items():
        (snapshots / f"{name}.md").write_text(text)
    manifest = json.loads((root / readme.MANIFEST).read_text())
    for section in manifest.values():
        for name in section if isinstance(section, dict) else ():
            if (snapshots / name).is_file():
                section[name] = readme.sha256(snapshots / name)
    (root / readme.MANIFEST).write_text(json.dumps(manifest))
    readme.sync(root)


def _theorem_rows(summary: dict) -> list[dict]:
    """The rows a forger must edit to keep the verdict table equal to the sections: the section's and the table's."""
    return [r for r in [*summary["theorem"]["verdicts"], *summary["verdicts"]["scientific"]] if r["key"] ==
            "adversarial.holds"]  # fmt: skip


def test_a_flipped_verdict_with_its_numbers_untouched_fails_verify(tmp_path):
    """The adversarial row prints "no power" (its control holds); flipped to "holds" in the section and the verdict
    table, the tables re-rendered and the hashes updated, its own numbers still give "no power"."""
    root, _ = _published(tmp_path, PATHS_CSV)
    assert readme.verify(root) == []

    def flip(summary: dict) -> None:
        for r in _theorem_rows(summary):
            r["verdict"] = "holds"

    _republished_with(root, flip)
    problems = readme.verify(root)
    assert any("prints 'holds' where its check, control and drift give 'no power'" in p for p in problems), problems


def test_a_measured_number_edited_against_its_verdict_fails_verify(tmp_path):
    """The value moved above its threshold with the verdict left as it was: the margin no longer follows."""
    root, _ = _published(tmp_path, PATHS_CSV)

    def move(summary: dict) -> None:
        for r in _theorem_rows(summary):
            r["value"] = 1.5

    _republished_with(root, move)
    assert any("does not follow from its value and threshold" in p for p in readme.verify(root))


def test_a_consistent_edit_of_the_data_itself_passes_verify(tmp_path):
    """What verify cannot catch, as its docstring says: a value, its margin and its verdict changed together (only a
    rerun from the data shows it)."""
    root, _ = _published(tmp_path, PATHS_CSV)

    def forge(summary: dict) -> None:
        for r in _theorem_rows(summary):
            r["value"], r["margin"] = 0.05, 0.95

    _republished_with(root, forge)
    assert readme.verify(root) == []


def test_an_edited_summary_without_its_hash_and_a_stray_snapshot_fail_verify(tmp_path):
    root, _ = _published(tmp_path)
    snap = root / readme.SNAPSHOTS / "summary.json"
    snap.write_text(snap.read_text().replace('"collapsed": 3', '"collapsed": 4'))
    (root / readme.SNAPSHOTS / "extra.md").write_text("| a |\n")
    problems = readme.verify(root)
    assert any("summary.json differs from the file it was published from" in p for p in problems), problems
    assert any("extra.md was not published" in p for p in problems)


@pytest.mark.slow
def test_an_edited_benchmark_number_with_its_hash_fails_verify(tmp_path):
    root, _ = _published(tmp_path)
    _edit_with_hash(root, "bench_run.md", "| 3 |", "| 4 |")
    assert any("bench_run.md differs from its data" in p for p in readme.verify(root))
    root, _ = _published(tmp_path / "data")
    _edit_with_hash(root, "bench_run.json", '"3"', '"4"')
    assert any("bench_run.md differs from its data" in p for p in readme.verify(root))


def test_a_snapshot_set_without_its_data_asks_for_a_new_publish(tmp_path):
    root, _ = _published(tmp_path)
    (root / readme.SNAPSHOTS / "summary.json").unlink()
    manifest = json.loads((root / readme.MANIFEST).read_text())
    del manifest["data"]
    (root / readme.MANIFEST).write_text(json.dumps(manifest))
    problems = readme.verify(root)
    assert problems and all(p.endswith(readme.REPUBLISH) for p in problems), problems
    _edit_with_hash(root, "circle.md", readme.source_line(RUN), readme.source_line({**RUN, "commit": "fedcba98"}))
    assert any("circle.md does not name the published run" in p for p in readme.verify(root))


def test_publish_refuses_a_run_without_the_gallery(tmp_path):
    root = _copy_documents(tmp_path / "repo")
    results = _results_with_tables(tmp_path / "results")
    before = (root / "README.md").read_text(), sorted((root / "docs").rglob("*"))
    with pytest.raises(FileNotFoundError, match="rank_collapse_overview.png"):
        readme.publish(results, root, None)
    assert ((root / "README.md").read_text(), sorted((root / "docs").rglob("*"))) == before


def test_the_readme_gallery_shows_what_publish_writes():
    text = (ROOT / "README.md").read_text()
    shown = re.findall(r"!\[[^\]]*\]\((docs/figures/[\w-]+\.png)\)", text)
    assert shown == [f"{readme.FIGURES}/{name}.png" for name in readme.GALLERY]


def test_a_run_record_names_commit_config_date_and_machine():
    from datetime import UTC, datetime

    from san.report import provenance

    record = provenance.run_record(provenance.config_hash({"a": 1}), datetime(2026, 1, 2, 3, 4, tzinfo=UTC))
    assert record["config_hash"] == provenance.config_hash({"a": 1}) != provenance.config_hash({"a": 2})
    assert record["date"] == "2026-01-02 03:04 UTC" and record["commit"] and record["machine"]
    line = provenance.source_line({**record, "commit": "0123456789abcdef0123+dirty"})
    assert line.startswith("<sub>Source run: commit 0123456789ab+dirty, config ") and "2026-01-02 03:04 UTC" in line
    with pytest.raises(KeyError, match="machine"):
        provenance.source_line({k: v for k, v in record.items() if k != "machine"})


def test_the_runs_config_hash_is_its_results_settings(tmp_path):
    """The run record names the settings the results were computed from: the same result configs give the same
    hash in any order, another result config another hash, and files other than netCDF do not count."""
    import xarray as xr

    from san.report import provenance

    def result(name, cfg):
        path = tmp_path / name
        xr.Dataset(attrs={"config": json.dumps(cfg)}).to_netcdf(path)
        return path

    a, b = result("a.nc", {"x": 1}), result("b.nc", {"y": 2})
    other = tmp_path / "table.csv"
    other.write_text("x\n")
    digest = provenance.results_config_hash([a, b, other])
    assert digest == provenance.results_config_hash([str(b), str(a)])
    result("b.nc", {"y": 3})
    assert provenance.results_config_hash([a, b]) != digest


def test_a_rerun_reproduces_the_config_hash(tmp_path, monkeypatch):
    """Two runs of one config in different folders (results written at other times, config attributes written with
    another key order) get one hash, given as relative or absolute paths; a changed config slice gets another. The
    expected digest is computed here from the slices themselves."""
    import hashlib

    import xarray as xr

    from san.report import provenance

    slices = {"rank_collapse/bert.nc": {"seed": 0, "layers": [1, 2]}, "circle.nc": {"dims": [8], "lr": 0.1}}

    def run(folder: Path, order: int, changed: dict | None = None) -> list[Path]:
        out = []
        for rel, cfg in {**slices, **(changed or {})}.items():
            path = folder / "results" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            keys = sorted(cfg, reverse=bool(order))
            attrs = {"config": json.dumps({k: cfg[k] for k in keys}), "history": f"written at {order}"}
            xr.Dataset(attrs=attrs).to_netcdf(path)
            out.append(path)
        return out

    first, second = run(tmp_path / "one", 0), run(tmp_path / "two", 1)
    expected = hashlib.sha256(json.dumps(slices, sort_keys=True).encode()).hexdigest()[:12]
    assert provenance.results_config_hash(first) == provenance.results_config_hash(second) == expected
    monkeypatch.chdir(tmp_path / "two")
    assert provenance.results_config_hash([p.relative_to(tmp_path / "two") for p in second]) == expected
    changed = run(tmp_path / "three", 0, {"circle.nc": {"dims": [8], "lr": 0.2}})
    assert provenance.results_config_hash(changed) != expected


def test_a_benchmark_is_published_alone_and_the_run_stays(tmp_path):
    """`publish` without a run: the benchmarks' tables with their data join the snapshots, the run's stay as they
    were, and the whole set still verifies; with neither a run nor a benchmark table there is nothing to publish."""
    root, _ = _published(tmp_path)
    before = json.loads((root / readme.MANIFEST).read_text())
    run_files = {n: (root / readme.SNAPSHOTS / n).read_bytes() for n in (*before["tables"], *before["data"])}
    bench = tmp_path / "new_bench"
    _benchmark(bench, "bench_new", jobs=7)
    readme.publish(None, root, bench)
    after = json.loads((root / readme.MANIFEST).read_text())
    assert {k: after[k] for k in ("run", "data", "tables")} == {k: before[k] for k in ("run", "data", "tables")}
    assert set(after["benchmarks"]) == set(before["benchmarks"]) | {"bench_new.md", "bench_new.json"}
    assert {n: (root / readme.SNAPSHOTS / n).read_bytes() for n in run_files} == run_files
    assert "| 7 |" in (root / readme.SNAPSHOTS / "bench_new.md").read_text()
    assert readme.verify(root) == [f"{readme.SNAPSHOTS / 'bench_new.md'} is quoted by no document: add its "
                                   f"generated block where it belongs"]  # fmt: skip
    (root / "docs" / "new.md").write_text("# New\n\n<!-- generated: bench_new -->\n<!-- end -->\n")
    readme.sync(root)
    assert "| 7 |" in (root / "docs" / "new.md").read_text() and readme.verify(root) == []
    with pytest.raises(FileNotFoundError, match="nothing to publish"):
        readme.publish(None, root, tmp_path / "empty")


#: a run time typed by hand: a number with a unit of time, or "in minutes", "a few CPU minutes", "about an hour"
TYPED_TIME = re.compile(
    r"\b\d[\d.,]*\s*(?:sec|seconds?|min|minutes?|hours?)\b|\b(?:in|few|several|CPU) (?:minutes|hours)\b"
    r"|\babout an? (?:minute|hour)\b"
)


def test_the_run_time_sentence_reads_the_published_benchmark(tmp_path):
    """The README's run time is rendered from docs/results/bench_run.json: another measurement, another sentence;
    without the file, an error naming it."""
    data = json.loads((ROOT / readme.SNAPSHOTS / readme.RUN_BENCHMARK).read_text())
    data["rows"][0] |= {"wall_s": 5400.0, "cores": 8, "jobs": 7}
    (tmp_path / readme.RUN_BENCHMARK).write_text(json.dumps(data))
    text = readme.run_time(tmp_path)
    assert text.startswith("The whole default run (7 jobs) took 90 min (5400 s) on 8 CPU cores in the published")
    assert data["record"]["command"] in text and data["record"]["date"] in text
    assert "--configfile" not in text, "no overlay run published here"
    command = "python benchmarks/bench_run.py --overlay config/qwen-1.5b.yaml"
    overlay = {**data, "rows": [{"overlay": "config/qwen-1.5b.yaml", "jobs": 46, "cores": 2, "wall_s": 1800.0}],
               "record": {**data["record"], "command": command}}  # fmt: skip
    (tmp_path / readme.OVERLAY_BENCHMARK).write_text(json.dumps(overlay))
    text = readme.run_time(tmp_path)
    assert "After it, `--configfile config/qwen-1.5b.yaml` ran its 46 new and changed jobs in 30 min (1800 s)" in text
    assert text.count("\n") == 1 and "bench_run.py --overlay config/qwen-1.5b.yaml" in text
    with pytest.raises(FileNotFoundError, match="bench_run.json"):
        readme.run_time(tmp_path / "absent")


def test_no_document_types_a_run_time_of_the_default_run_by_hand():
    """The README states the default run's time only in its generated block, and config.yaml's comments state no
    run time at all (they point to the published benchmark)."""
    text = readme.BLOCK.sub("", (ROOT / "README.md").read_text())
    intro = text.split("## Quick start", 1)[0]
    assert not TYPED_TIME.findall(intro), "the README's opening types a run time"
    assert "run-time" in {m.group(2) for m in readme.BLOCK.finditer((ROOT / "README.md").read_text())}
    comments = "\n".join(
        line for line in (ROOT / "config.yaml").read_text().splitlines() if line.lstrip().startswith("#")
    )
    assert not TYPED_TIME.findall(comments), f"config.yaml's comments type run times: {TYPED_TIME.findall(comments)}"
