"""The published tables of an overlay run: a config laid over config.yaml after a finished default run
(``snakemake --configfile config/qwen-1.5b.yaml``), whose own verdicts and models x claims table differ from the
default run's (a second size of a family, a size ladder judged).

``python -m san.report.readme publish-overlay RESULTS --overlay config/<name>.yaml`` copies the overlay run's
``summary.json`` into ``docs/results/overlays/<name>/``, renders the tables of :data:`TABLES` from it (each ending
with the line naming the overlay run) and records the overlay, the run and the sha256 of every file in that
folder's ``SOURCES.json``. A document quotes a table in a generated block named ``overlays/<name>/<table>``.
``verify`` checks every overlay folder as it checks the default run's snapshots (:func:`problems`): each file has its
recorded hash, the summary is the recorded run and names the overlay's models, every verdict follows from its own
numbers, every table equals the one rendered again from the committed summary, and every table is quoted.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from san.core.config import load_yaml
from san.models.folders import sha256_file
from san.report import published
from san.report.provenance import source_line

OVERLAYS = Path("docs/results/overlays")
"""The committed overlay snapshots, one folder per overlay (named by its config file's stem)."""
TABLES = ("phenomena", "verdicts")
"""The tables an overlay publishes: the models x claims table and the verdict table (the claims judged on its
models)."""
SOURCES = "SOURCES.json"
SUMMARY = "summary.json"

Table = Callable[[Mapping[str, Any], Mapping[str, Path]], str]


def block(name: str, table: str) -> str:
    """The generated block name that quotes an overlay's table."""
    return f"{OVERLAYS.relative_to('docs/results')}/{name}/{table}"


def render(summary: Mapping[str, Any], tables: Mapping[str, Table]) -> dict[str, str]:
    """The overlay's tables (:data:`TABLES`) from its run's summary, each ending with the line naming that run."""
    line = "\n" + source_line(summary["provenance"], "Source run (overlay)") + "\n"
    return {name: tables[name](summary, {}) + line for name in TABLES}


def overlay_models(overlay: Path) -> list[str]:
    """The models an overlay config adds or sets (its ``models:`` keys)."""
    return sorted((load_yaml(overlay) or {}).get("models") or {})


def _missing_models(summary: Mapping[str, Any], models: Iterable[str]) -> list[str]:
    judged = set((summary.get("phenomena") or {}).get("models") or {})
    return [m for m in models if m not in judged]


def publish(results: Path, overlay: Path, root: Path, tables: Mapping[str, Table]) -> list[Path]:
    """Copy the overlay run's summary and its tables into ``docs/results/overlays/<overlay stem>/`` with their
    record. Everything is checked before anything is written: the summary exists, names every model the overlay
    sets and renders every table."""
    source = results / SUMMARY
    if not source.is_file():
        raise FileNotFoundError(f"{source} is missing: run `snakemake --configfile {overlay}` first")
    if not overlay.is_file():
        raise FileNotFoundError(f"the overlay config {overlay} is missing")
    summary = json.loads(source.read_text())
    missing = _missing_models(summary, overlay_models(overlay))
    if missing:
        raise ValueError(f"{source} is not a run of {overlay}: it judges none of {', '.join(missing)}")
    texts = render(summary, tables)
    folder = root / OVERLAYS / overlay.stem
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, folder / SUMMARY)
    for name, text in texts.items():
        (folder / f"{name}.md").write_text(text)
    files = [SUMMARY, *(f"{name}.md" for name in texts)]
    record = {"overlay": overlay.as_posix(), "run": summary["provenance"],
              "files": {f: sha256_file(folder / f) for f in files}}  # fmt: skip
    (folder / SOURCES).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return [folder / f for f in files]


def problems(root: Path, tables: Mapping[str, Table], quoted: set[str]) -> list[str]:
    """What is wrong with the overlay snapshots under ``root`` (empty when nothing); ``quoted``: the generated block
    names the documents hold."""
    base = root / OVERLAYS
    folders = sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    return [p for folder in folders for p in _folder_problems(root, folder, tables, quoted)]


def _folder_problems(root: Path, folder: Path, tables: Mapping[str, Table], quoted: set[str]) -> list[str]:
    where = (OVERLAYS / folder.name).as_posix()
    manifest_path = folder / SOURCES
    if not manifest_path.is_file():
        return [f"{where}/{SOURCES} is missing: publish the overlay again"]
    manifest = json.loads(manifest_path.read_text())
    made = manifest.get("files", {})
    out = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.name != SOURCES):
        if path.name not in made:
            out.append(f"{where}/{path.name} was not published from the overlay run")
        elif sha256_file(path) != made[path.name]:
            out.append(f"{where}/{path.name} differs from the file it was published from (hand-edited?)")
    out += [f"{where}/{n} is listed in its {SOURCES} but missing" for n in made if not (folder / n).is_file()]
    summary_path = folder / SUMMARY
    if not summary_path.is_file():
        return out
    summary = json.loads(summary_path.read_text())
    if summary.get("provenance") != manifest.get("run"):
        out.append(f"{where}/{SUMMARY} is not the run its {SOURCES} records")
    overlay = root / manifest.get("overlay", "")
    if overlay.is_file():
        out += [f"{where}/{SUMMARY} judges no model {m} of {overlay.name}" for m in _missing_models(
            summary, overlay_models(overlay))]  # fmt: skip
    else:
        out.append(f"{where}: the overlay config {manifest.get('overlay')} it was published from is missing")
    out += [f"{where}/{SUMMARY}: {p}" for p in published.summary_problems(summary, root)]
    for name, text in render(summary, tables).items():
        snap = folder / f"{name}.md"
        if snap.is_file() and snap.read_text() != text:
            out.append(f"the table {where}/{name}.md differs from the one rendered from the committed {SUMMARY}")
        if block(folder.name, name) not in quoted:
            out.append(f"{where}/{name}.md is quoted by no document: add its generated block where it belongs")
    return out
