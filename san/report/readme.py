"""The numbers of README.md and docs/ come from generated files, never from typing.

Four steps, each a subcommand of ``python -m san.report.readme``:

1. ``tables RESULTS`` (also the workflow's ``readme_tables`` rule): Markdown tables from a run's
   ``summary.json`` (and the data its wings' tables read, :func:`data_files`) into ``RESULTS/tables/readme/<name>.md``,
   one per :func:`tables` entry (every wing's tables, :func:`san.experiments.tables`, and the verdict table), each
   ending with the line naming its source run (commit, config hash, date, machine: the summary's
   ``provenance``). Each table reads a short, explicit list of keys; a key the summary lacks is an error naming it.
2. ``publish [RESULTS]``: copy the run's data (``summary.json`` and the paths summary, :func:`data_files`), its
   tables (all from that one run, each equal to the table rendered from that data) and the benchmarks' tables with
   their data (``benchmarks/out/<name>.md`` and ``<name>.json``, each naming the command that wrote it) into the
   committed snapshot folder ``docs/results/``, record the run and the sha256 of every copied file in
   :data:`MANIFEST`, and copy the gallery's figures (:data:`GALLERY`) into ``docs/figures/`` at a web-friendly
   width; then step 3. Without ``RESULTS``, only the benchmarks' tables.
3. ``sync`` (``--check``: only report): rewrite every block ``<!-- generated: NAME -->`` ... ``<!-- end -->`` of
   README.md and ``docs/*.md`` with ``docs/results/NAME.md``, or, for a family table (:data:`FAMILY_TABLES`, the
   README's family list and docs/models.md's tables), with the table rendered from the family table, the
   ``gallery`` block with the figure registry's gallery (:func:`san.figures.gallery_markdown`), or, for a sentence
   of :data:`SENTENCES` (the default run's time), with the sentence rendered from a benchmark's data. The one
   syntax and the one sync of every generated block; the tests run the check, so a hand edit of a block fails them.
4. ``verify [RESULTS]``: every snapshot has the sha256 :data:`MANIFEST` records; every verdict of the committed
   ``summary.json`` follows from its own numbers (:func:`san.claims.verdicts.rederive_summary`: each row's margin from
   its value, spread and threshold, its check from its margin, its control's from the control's measure, its power
   from its scan, its printed state from its check and control, and the verdict table from the sections' rows); and
   every table equals the one rendered again from the committed data (the run's tables from
   ``docs/results/summary.json``, a benchmark's from its ``.json``). So a number edited in a table fails, with its
   hash or without; a verdict flipped in the data with its numbers untouched fails; a measured number edited in the
   data so that its verdict no longer follows fails. What it cannot catch is an edit of the data that is consistent
   with itself (a value, its margin and its verdict changed together, the tables re-rendered and the hashes updated):
   only a rerun of the workflow (and ``python -m san.core.compare`` against it) shows that. With ``RESULTS``, the
   run's tables themselves are compared too. The tests run it.

``publish-overlay RESULTS --overlay config/<name>.yaml`` publishes an overlay run's verdicts and models x claims
table beside the default run's (:mod:`san.report.overlays`); ``verify`` checks them the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from san.claims import cells
from san.core.cli import add_verbose, quiet_libraries
from san.core.markdown import lookup, markdown
from san.experiments import Table, table_data
from san.experiments import tables as wing_tables
from san.figures import gallery, gallery_markdown, gallery_source
from san.models.tables import TABLES as FAMILY_TABLES
from san.report import overlays, published
from san.report.benchmark_tables import BenchmarkCells, benchmark_table
from san.report.provenance import source_line

SNAPSHOTS = Path("docs/results")
"""The committed copies of the generated tables, relative to the repository root."""
FIGURES = Path("docs/figures")
"""The committed copies of the gallery's figures, relative to the repository root."""
MANIFEST = SNAPSHOTS / "SOURCES.json"
"""What every snapshot was made from: the run of the results tables and the sha256 of each copied file."""
SUMMARY = "summary.json"
"""The run's summary: its snapshot name and its path in the results folder."""


def data_files() -> dict[str, Path]:
    """The run's data the tables are rendered from, by snapshot name: its path in the results folder (the summary and
    what the wings' tables read besides, :func:`san.experiments.table_data`, which exists only where the run has that
    wing's jobs)."""
    return {SUMMARY: Path(SUMMARY), **table_data()}


REPUBLISH = "republish: python -m san.report.readme publish results (after a default run)"
"""How a stale snapshot set is renewed (the end of every :func:`verify` problem that only a new publish fixes)."""
RERUN_BENCHMARK = "rerun the benchmark (the command its table names), then publish"
"""How a benchmark table without its data is renewed (the end of that :func:`verify` problem)."""
DOCUMENTS = ("README.md", "docs/*.md")
"""The files whose generated blocks ``sync`` rewrites (globs relative to the repository root)."""
BENCHMARK_TABLES = Path("benchmarks/out")
"""Where the benchmark scripts write their tables (``benchmarks/_common.py``)."""
GALLERY = tuple(gallery())
"""The figures that README.md shows, in its order: the figure registry's gallery (:func:`san.figures.gallery`)."""
GALLERY_BLOCK = "gallery"
"""The generated block of README.md that shows the gallery (rendered from the figure registry, no snapshot)."""
GALLERY_WIDTH_PX = 1200
"""Width in pixels of a gallery copy (a README column; wider figures are scaled down)."""
RUN_BENCHMARK = "bench_run.json"
"""The published benchmark of the whole default run (``benchmarks/bench_run.py``): every run time a document states."""
OVERLAY_BENCHMARK = "bench_run_overlay.json"
"""The published benchmark of an overlay run after a default run (``benchmarks/bench_run.py --overlay``), where one
is published: the larger models' run time."""


def run_time(snapshots: Path) -> str:
    """The sentence that states the default run's time, read from the published benchmark (:data:`RUN_BENCHMARK`):
    its wall time, cores and jobs, and the command, date and machine that measured it; and, where an overlay's run
    after it is published (:data:`OVERLAY_BENCHMARK`), that run's jobs and wall time."""
    path = snapshots / RUN_BENCHMARK
    if not path.is_file():
        raise FileNotFoundError(f"the run-time sentence reads {path}, which is missing: {RERUN_BENCHMARK}")
    data = json.loads(path.read_text())
    row, record = data["rows"][0], data["record"]
    wall = BenchmarkCells().cell("{wall_s:.0f@min} min ({wall_s:.0f} s)", row)
    text = (
        f"The whole default run ({row['jobs']} jobs) took {wall} on {row['cores']} CPU cores in the published "
        f"benchmark (`{record['command']}`, {record['date']})."
    )
    overlay = snapshots / OVERLAY_BENCHMARK
    if overlay.is_file():
        data = json.loads(overlay.read_text())
        row, record = data["rows"][0], data["record"]
        wall = BenchmarkCells().cell("{wall_s:.0f@min} min ({wall_s:.0f} s)", row)
        text += (
            f" After it, `--configfile {row['overlay']}` ran its {row['jobs']} new and changed jobs in {wall} on "
            f"{row['cores']} cores (`{record['command']}`, {record['date']})."
        )
    return text + "\n"


SENTENCES = {"run-time": run_time}
"""Generated blocks that are a sentence rendered from a snapshot's data, by block name: ``name(snapshots) -> text``."""
BLOCK = re.compile(r"(<!-- generated: ([\w./-]+) -->\n)(.*?)(<!-- end -->)", re.S)


def verdicts_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """Every verdict of the run at a glance: the scientific verdicts as one table (claim, source, verdict, caveat
    markers, the measured value, the threshold, the margin, the near-miss control at its config setting with its
    verdict, and the power: how far the reference can move before the test fails), then the regression checks (true
    by construction: identities, proven inequalities, controls) and the demonstrations (examples built to satisfy an
    existential claim) with their checks; under each table, the caveats its markers stand for
    (:mod:`san.claims.cells`)."""
    name = "verdicts"
    science = list(lookup(summary, "verdicts.scientific", name))
    checks = [(kind, v) for kind in ("regression", "demonstration") for v in lookup(summary, f"verdicts.{kind}", name)]
    return (
        markdown(cells.SCIENCE_HEADER, [cells.science_cells(v) for v in science])
        + cells.legend(science)
        + "\n"
        + markdown(cells.CHECK_HEADER, [cells.check_cells(v, kind) for kind, v in checks])
        + cells.legend([v for _, v in checks])
    )


def tables() -> dict[str, Table]:
    """The tables a run writes for the documents, by block name: every wing's (:func:`san.experiments.tables`) and
    the verdict table of them all."""
    return {**wing_tables(), "verdicts": verdicts_table}


def run_data(folder: Path, snapshots: bool = False) -> dict[str, Path]:
    """The run's data files in ``folder`` by snapshot name (:func:`data_files`, those present): a results folder, or
    with ``snapshots`` the snapshot folder, where each lies under its snapshot name."""
    found = {snap: folder / (snap if snapshots else rel) for snap, rel in data_files().items()}
    return {snap: path for snap, path in found.items() if path.is_file()}


def build_tables(summary: Mapping[str, Any], data: Mapping[str, Path]) -> dict[str, str]:
    """Every :func:`tables` entry's Markdown from a run's summary (and its other data, :func:`run_data`), each ending
    with the line naming the summary's run: what ``tables`` writes and what :func:`verify` renders again from the
    committed data."""
    source = "\n" + source_line(lookup(summary, "provenance", "every table")) + "\n"
    return {name: build(summary, data) + source for name, build in tables().items()}


def write_tables(results: Path, out_dir: Path) -> list[Path]:
    """Write every :func:`tables` entry of the run in ``results`` to ``out_dir/<name>.md``; all are built before any
    is written."""
    data = run_data(results)
    texts = build_tables(json.loads(data["summary.json"].read_text()), data)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (out_dir / f"{name}.md").write_text(text)
    return [out_dir / f"{name}.md" for name in texts]


def documents(root: Path) -> list[Path]:
    """README.md and ``docs/*.md`` (the files that may hold generated blocks)."""
    return [p for pattern in DOCUMENTS for p in sorted(root.glob(pattern))]


def render(text: str, snapshots: Path, where: str = "") -> str:
    """``text`` with every generated block replaced by its body: a family table of :mod:`san.models.tables` rendered
    from the family table, a sentence of :data:`SENTENCES` from its snapshot's data, any other block its snapshot
    ``snapshots/<name>.md``."""

    def fill(m: re.Match) -> str:
        if m.group(2) in FAMILY_TABLES:
            return m.group(1) + FAMILY_TABLES[m.group(2)]() + m.group(4)
        if m.group(2) == GALLERY_BLOCK:
            return m.group(1) + gallery_markdown(str(FIGURES)) + m.group(4)
        if m.group(2) in SENTENCES:
            return m.group(1) + SENTENCES[m.group(2)](snapshots) + m.group(4)
        path = snapshots / f"{m.group(2)}.md"
        if not path.is_file():
            raise FileNotFoundError(f"{where}: the generated block '{m.group(2)}' has no snapshot {path}")
        return m.group(1) + path.read_text() + m.group(4)

    return BLOCK.sub(fill, text)


def sync(root: Path, check: bool = False) -> list[Path]:
    """Rewrite the generated blocks of every document from the snapshots (``check``: only list the documents whose
    blocks differ from them). Returns the documents that changed (or would)."""
    stale = []
    for doc in documents(root):
        text = doc.read_text()
        new = render(text, root / SNAPSHOTS, str(doc.relative_to(root)))
        if new != text:
            stale.append(doc)
            if not check:
                doc.write_text(new)
    return stale


def gallery_copy(src: Path, dest: Path, width_px: int = GALLERY_WIDTH_PX) -> None:
    """Copy a PNG figure to ``dest``, scaled down to ``width_px`` wide when it is wider (aspect kept)."""
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    image = mpimg.imread(src)
    height, width = image.shape[:2]
    if width <= width_px:
        shutil.copyfile(src, dest)
        return
    dpi = 100
    fig = plt.figure(figsize=(width_px / dpi, height * width_px / width / dpi), dpi=dpi)
    fig.figimage(_downscale(image, width / width_px), resize=True)
    fig.savefig(dest, dpi=dpi)
    plt.close(fig)


def _downscale(image: Any, factor: float) -> Any:
    """``image`` (rows x cols x channels) scaled down by ``factor`` with area averaging (scipy's zoom after a
    box blur of the factor's width), so that thin lines do not vanish."""
    import numpy as np
    from scipy import ndimage

    size = (max(1, round(factor)), max(1, round(factor)), 1)
    blurred = ndimage.uniform_filter(np.asarray(image, dtype=float), size=size)
    scaled = ndimage.zoom(blurred, (1 / factor, 1 / factor, 1), order=1)
    return np.clip(scaled, 0.0, 1.0)


def sha256(path: Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


SOURCE_MARK = "<sub>Source"
"""How the line naming a table's run starts (:func:`san.report.provenance.source_line`)."""


def _benchmark_problems(tables: Iterable[Path]) -> list[str]:
    """What keeps benchmark tables from being published: a table that names no run, or has no data file
    (``<name>.json`` beside it) whose rendering (:func:`benchmark_table`) it equals."""
    problems = []
    for table in tables:
        data = table.with_suffix(".json")
        if SOURCE_MARK not in table.read_text():
            problems.append(f"{table} names no run")
        elif not data.is_file():
            problems.append(f"{table} has no data file {data.name}")
        elif benchmark_table(json.loads(data.read_text())) != table.read_text():
            problems.append(f"{table} differs from the table rendered from {data.name}")
    return problems


def _checked_run(results: Path) -> tuple[list[Path], list[Path], dict[str, Path], dict[str, Any]]:
    """A run's tables, gallery figures, data (by snapshot name) and record, after checking that every one exists
    and every table equals the one rendered from the run's ``summary.json`` (one run for all of them)."""
    written = [results / "tables" / "readme" / f"{name}.md" for name in tables()]
    figures = [gallery_source(results / "figures", name) for name in GALLERY]
    missing = [p for p in written + figures + [results / SUMMARY] if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"not in the run at {results}: {', '.join(map(str, missing))}")
    data = run_data(results)
    summary = json.loads(data["summary.json"].read_text())
    record = dict(lookup(summary, "provenance", "every table"))
    rendered = build_tables(summary, data)
    foreign = [str(t) for t in written if t.read_text() != rendered[t.stem]]
    if foreign:
        raise ValueError(f"tables not written from {data['summary.json']} ({source_line(record)}): "
                         f"{', '.join(foreign)}; rerun the workflow's readme_tables rule")  # fmt: skip
    return written, figures, data, record


def publish(results: Path | None, root: Path, benchmarks: Path | None = None) -> list[Path]:
    """Copy a run's data and tables (and the benchmarks' tables with their data, in ``benchmarks``) into the
    snapshot folder, record the run and the sha256 of every copied file in :data:`MANIFEST`, copy the gallery
    figures into ``docs/figures/``, then :func:`sync`. Without ``results``, only the benchmarks' tables are
    published (the run's snapshots stay as they are).

    Everything is checked before anything is copied: every table and figure exists, every results table equals the
    one rendered from ``results/summary.json`` (one run for all of them), every benchmark table names its run and
    equals the one rendered from its data."""
    run_tables, figures, data, record = _checked_run(results) if results is not None else ([], [], {}, None)
    bench = sorted(benchmarks.glob("*.md")) if benchmarks is not None and benchmarks.is_dir() else []
    unfit = _benchmark_problems(bench)
    if unfit:
        raise ValueError(f"benchmark tables that name no run or lack their data: {'; '.join(unfit)}; rerun those "
                         f"benchmarks")  # fmt: skip
    if results is None and not bench:
        raise FileNotFoundError(f"nothing to publish: no run given and no benchmark table in {benchmarks}")
    snapshots = root / SNAPSHOTS
    snapshots.mkdir(parents=True, exist_ok=True)
    (root / FIGURES).mkdir(parents=True, exist_ok=True)
    manifest_path = root / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    if results is not None:
        for snap, src in data.items():
            shutil.copyfile(src, snapshots / snap)
        for snap in set(data_files()) - set(data):  # a run without path tasks: no paths summary of an earlier run stays
            (snapshots / snap).unlink(missing_ok=True)
        for name, figure in zip(GALLERY, figures, strict=True):
            gallery_copy(figure, root / FIGURES / f"{name}.png")
        manifest |= {
            "run": record,
            "data": {snap: sha256(snapshots / snap) for snap in data},
            "tables": {t.name: sha256(t) for t in run_tables},
        }
    bench_files = [f for b in bench for f in (b, b.with_suffix(".json"))]
    for table in run_tables + bench_files:
        shutil.copyfile(table, snapshots / table.name)
    # a benchmark not rerun keeps the entry of the run that wrote its snapshot, while its snapshot is there
    kept = {n: h for n, h in manifest.get("benchmarks", {}).items() if (snapshots / n).is_file()}
    manifest["benchmarks"] = {**kept, **{f.name: sha256(f) for f in bench_files}}
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return sync(root)


def verify(root: Path, results: Path | None = None) -> list[str]:
    """What is wrong with the snapshots (empty when nothing). Every file of ``docs/results/`` is one that
    :func:`publish` copied, with the sha256 :data:`MANIFEST` records; the committed ``summary.json`` is the manifest's
    run; every run table equals the one rendered again from the committed ``summary.json`` (and paths summary), and
    every benchmark table the one rendered from its committed data, so that a number edited in a table fails, with its
    hash or without; every verdict of the committed summary follows from its own numbers (module docstring: what that
    catches and what it cannot, a consistent edit of the data itself); every benchmark table is quoted by a document;
    with ``results``, every run table also equals that run's table. A problem that only a new publish fixes ends with
    :data:`REPUBLISH` (or :data:`RERUN_BENCHMARK`)."""
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        return [f"{MANIFEST} is missing: {REPUBLISH}"]
    manifest = json.loads(manifest_path.read_text())
    made = {**manifest.get("data", {}), **manifest.get("tables", {}), **manifest.get("benchmarks", {})}
    snapshots = root / SNAPSHOTS
    problems = []
    for snap in sorted(p for p in snapshots.iterdir() if p.is_file() and p != manifest_path):
        if snap.name not in made:
            problems.append(f"{SNAPSHOTS / snap.name} was not published from a run or benchmark")
        elif sha256(snap) != made[snap.name]:
            problems.append(f"{SNAPSHOTS / snap.name} differs from the file it was published from (hand-edited?)")
        elif snap.suffix == ".md" and SOURCE_MARK not in snap.read_text():
            problems.append(f"{SNAPSHOTS / snap.name} names no source run")
    problems += [f"{MANIFEST} lists {SNAPSHOTS / n}, which is missing" for n in made if not (snapshots / n).is_file()]
    problems += _verify_run_tables(root, manifest)
    problems += [f"{doc.relative_to(root)}: a generated block differs from its snapshot (python -m san.report.readme "
                 "sync)" for doc in sync(root, check=True)]  # fmt: skip
    quoted = {m.group(2) for doc in documents(root) for m in BLOCK.finditer(doc.read_text())}
    for name in sorted(n for n in manifest.get("benchmarks", {}) if n.endswith(".md")):
        table, data = snapshots / name, snapshots / Path(name).with_suffix(".json").name
        if not table.is_file():
            continue
        if table.stem not in quoted:
            problems.append(f"{SNAPSHOTS / name} is quoted by no document: add its generated block where it belongs")
        if not data.is_file():
            problems.append(f"{SNAPSHOTS / name} has no data file {data.name} to render it from: {RERUN_BENCHMARK}")
            continue
        try:
            text = benchmark_table(json.loads(data.read_text()))
        except (KeyError, ValueError) as err:
            problems.append(f"{SNAPSHOTS / data.name} cannot render its table: {err}")
            continue
        if text != table.read_text():
            problems.append(f"the benchmark table {SNAPSHOTS / name} differs from its data {SNAPSHOTS / data.name}")
    problems += overlays.problems(root, tables(), quoted)
    for name in tables():
        if f"{name}.md" not in manifest.get("tables", {}):
            problems.append(f"the run table {name} was not published")
        if results is not None:
            source = results / "tables" / "readme" / f"{name}.md"
            snap = snapshots / f"{name}.md"
            if not source.is_file() or not snap.is_file() or source.read_text() != snap.read_text():
                problems.append(f"{SNAPSHOTS / snap.name} differs from {source}")
    return problems


def _verify_run_tables(root: Path, manifest: Mapping[str, Any]) -> list[str]:
    """:func:`verify`'s check of the run tables: every verdict of the committed summary follows from its own numbers
    (:func:`san.claims.verdicts.rederive_summary`), and each table equals the table rendered from the committed data,
    which is the manifest's run. Without committed data (a snapshot set published before the data was), each table names
    the manifest's run, and the missing data is a problem that a new publish fixes."""
    snapshots = root / SNAPSHOTS
    summary_path = snapshots / "summary.json"
    if not summary_path.is_file():
        problems = [f"{SNAPSHOTS / 'summary.json'} is missing, so no table can be rendered from it: {REPUBLISH}"]
        line = source_line(manifest["run"]) if "run" in manifest else None
        for name in manifest.get("tables", {}):
            snap = snapshots / name
            if snap.is_file() and (line is None or line not in snap.read_text()):
                problems.append(f"{SNAPSHOTS / name} does not name the published run ({line})")
        return problems
    try:
        summary = json.loads(summary_path.read_text())
    except json.JSONDecodeError as err:
        return [f"{SNAPSHOTS / 'summary.json'} is not JSON: {err}"]
    problems = []
    if summary.get("provenance") != manifest.get("run"):
        problems.append(f"{SNAPSHOTS / 'summary.json'} is not the run {MANIFEST} records")
    problems += [f"{SNAPSHOTS / 'summary.json'}: {p}" for p in published.summary_problems(summary, root)]
    try:
        rendered = build_tables(summary, run_data(snapshots, snapshots=True))
    except (KeyError, ValueError) as err:
        return [*problems, f"the tables cannot be rendered from {SNAPSHOTS / 'summary.json'}: {err}"]
    for name, text in rendered.items():
        snap = snapshots / f"{name}.md"
        if snap.is_file() and snap.read_text() != text:
            problems.append(f"the table '{name}' ({SNAPSHOTS / snap.name}) differs from the one rendered from the "
                            f"committed {SNAPSHOTS / 'summary.json'}")  # fmt: skip
    return problems


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m san.report.readme", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    run_tables = sub.add_parser("tables", help="write a run's tables to RESULTS/tables/readme/")
    run_tables.add_argument("results", type=Path)
    pub = sub.add_parser("publish", help="copy a run's data, tables and figures and the benchmarks' tables into "
                         "docs/, then sync")  # fmt: skip
    pub.add_argument("results", type=Path, nargs="?", default=None, help="the run (without: only the benchmarks)")
    pub.add_argument("--benchmarks", type=Path, default=BENCHMARK_TABLES, help="the benchmarks' tables folder")
    over = sub.add_parser("publish-overlay", help="copy an overlay run's summary and tables into "
                          "docs/results/overlays/<name>/")  # fmt: skip
    over.add_argument("results", type=Path, help="the results folder of the overlay run")
    over.add_argument("--overlay", type=Path, required=True, help="the overlay config, e.g. config/qwen-1.5b.yaml")
    check = sub.add_parser("sync", help="rewrite the documents' generated blocks from docs/results/")
    check.add_argument("--check", action="store_true", help="only report documents out of sync (exit 1)")
    ver = sub.add_parser("verify", help="check the snapshots against what they were published from (exit 1)")
    ver.add_argument("results", type=Path, nargs="?", default=None, help="the run to compare the tables with")
    for p in (pub, over, check, ver):
        p.add_argument("--root", type=Path, default=Path("."), help="the repository root")
    for p in (run_tables, pub, over, check, ver):
        add_verbose(p)
    args = ap.parse_args(argv)
    quiet_libraries(args.verbose)
    if args.command == "tables":
        written = write_tables(args.results, args.results / "tables" / "readme")
    elif args.command == "publish":
        written = publish(args.results, args.root, args.benchmarks)
    elif args.command == "publish-overlay":
        written = [*overlays.publish(args.results, args.overlay, args.root, tables()), *sync(args.root)]
    elif args.command == "verify":
        problems = verify(args.root, args.results)
        print("\n".join(problems), file=sys.stderr)
        return 1 if problems else 0
    else:
        written = sync(args.root, check=args.check)
        if args.check and written:
            print("out of sync with docs/results/: " + ", ".join(map(str, written)), file=sys.stderr)
            return 1
    print("\n".join(map(str, written)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
