"""An overlay run's published tables: published from its summary, quoted by a document, and verified like the
default run's snapshots; a forger's edit of a table, of a verdict in the summary (tables re-rendered, hashes updated)
or of the overlay's models fails, and a summary that is not the overlay's run is refused before anything is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from san.models.folders import sha256_file
from san.report import overlays, readme

REPO = Path(__file__).resolve().parents[3]
SUMMARY = REPO / "docs" / "results" / "summary.json"
BLOCKS = "".join(f"<!-- generated: overlays/extra/{t} -->\n<!-- end -->\n\n" for t in overlays.TABLES)


def _setup(tmp_path: Path, model: str = "Qwen2.5-Coder-0.5B-Instruct") -> tuple[Path, Path, Path]:
    results, root = tmp_path / "results", tmp_path / "repo"
    results.mkdir()
    (root / "config").mkdir(parents=True)
    (root / "docs").mkdir()
    shutil.copyfile(SUMMARY, results / "summary.json")
    overlay = root / "config" / "extra.yaml"
    overlay.write_text(f"models:\n  {model}:\n    family: qwen2\n")
    (root / "docs" / "extra.md").write_text("# With the overlay\n\n" + BLOCKS)
    return results, root, overlay


def _publish(results: Path, root: Path, overlay: Path) -> None:
    overlays.publish(results, overlay, root, readme.tables())
    readme.sync(root)


def _quoted(root: Path) -> set[str]:
    return {m.group(2) for doc in readme.documents(root) for m in readme.BLOCK.finditer(doc.read_text())}


def _problems(root: Path) -> list[str]:
    return overlays.problems(root, readme.tables(), _quoted(root))


def _rehash(root: Path) -> None:
    folder = root / overlays.OVERLAYS / "extra"
    sources = json.loads((folder / overlays.SOURCES).read_text())
    sources["files"] = {f: sha256_file(folder / f) for f in sources["files"]}
    (folder / overlays.SOURCES).write_text(json.dumps(sources))


@pytest.mark.slow
def test_a_published_overlay_is_quoted_and_verifies(tmp_path: Path) -> None:
    results, root, overlay = _setup(tmp_path)
    _publish(results, root, overlay)
    doc = (root / "docs" / "extra.md").read_text()
    assert "| Qwen2.5-Coder-0.5B-Instruct |" in doc and "Source run (overlay)" in doc
    assert _problems(root) == []
    assert readme.sync(root, check=True) == []


@pytest.mark.slow
def test_a_forged_table_or_verdict_fails_with_its_hash_updated(tmp_path: Path) -> None:
    results, root, overlay = _setup(tmp_path)
    _publish(results, root, overlay)
    folder = root / overlays.OVERLAYS / "extra"
    table = folder / "phenomena.md"
    table.write_text(table.read_text().replace("| fails", "| holds", 1))
    _rehash(root)
    assert any("differs from the one rendered" in p for p in _problems(root))

    _publish(results, root, overlay)
    summary = json.loads((folder / "summary.json").read_text())
    row = summary["verdicts"]["scientific"][0]
    row["verdict"] = "holds" if row["verdict"] != "holds" else "fails"
    (folder / "summary.json").write_text(json.dumps(summary))
    for name, text in overlays.render(summary, readme.tables()).items():
        (folder / f"{name}.md").write_text(text)
    _rehash(root)
    assert any(p.startswith("docs/results/overlays/extra/summary.json: ") for p in _problems(root))


@pytest.mark.slow
def test_an_unquoted_table_a_foreign_file_and_another_overlay_fail(tmp_path: Path) -> None:
    results, root, overlay = _setup(tmp_path)
    _publish(results, root, overlay)
    (root / "docs" / "extra.md").write_text("# nothing quoted\n")
    (root / overlays.OVERLAYS / "extra" / "notes.md").write_text("hand-written\n")
    overlay.write_text("models:\n  Qwen2.5-Coder-1.5B-Instruct:\n    family: qwen2\n")
    found = _problems(root)
    assert any("judges no model Qwen2.5-Coder-1.5B-Instruct" in p for p in found)
    assert any("phenomena.md is quoted by no document" in p for p in found)
    assert any("notes.md was not published from the overlay run" in p for p in found)


def test_a_summary_without_the_overlays_model_is_refused_before_writing(tmp_path: Path) -> None:
    results, root, overlay = _setup(tmp_path, model="Qwen2.5-Coder-1.5B-Instruct")
    with pytest.raises(ValueError, match="judges none of Qwen2.5-Coder-1.5B-Instruct"):
        overlays.publish(results, overlay, root, readme.tables())
    assert not (root / overlays.OVERLAYS).exists()
