"""The numbers of README.md and docs/ come from generated files, never from typing.

Three steps, each a subcommand of ``python -m san.report.readme``:

1. ``tables RESULTS`` (also the workflow's ``readme_tables`` rule): Markdown tables from a run's
   ``summary.json`` and ``paths/summary.csv`` into ``RESULTS/tables/readme/<name>.md``, one per :data:`TABLES`
   entry, each ending with the line naming its source run (commit, config hash, date, machine: the summary's
   ``provenance``). Each table reads a short, explicit list of keys; a key the summary lacks is an error naming it.
2. ``publish RESULTS``: copy those tables (all from that one run) and the benchmarks' tables
   (``benchmarks/out/<name>.md``, each naming its own run) into the committed snapshot folder ``docs/results/``,
   record what each snapshot was made from in :data:`MANIFEST` (the run, and the sha256 of every copied file), and
   copy the gallery's figures (:data:`GALLERY`) into ``docs/figures/`` at a web-friendly width; then step 3.
3. ``sync`` (``--check``: only report): rewrite every block ``<!-- generated: NAME -->`` ... ``<!-- end -->`` of
   README.md and ``docs/*.md`` with ``docs/results/NAME.md``. The tests run the check, so a hand edit of a block
   fails them.
4. ``verify [RESULTS]``: every snapshot equals the file it was made from (its hash in :data:`MANIFEST`; with
   ``RESULTS``, the run's tables themselves) and names its run; the tests run it, so a hand edit of a snapshot
   fails them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from san.report.captions import yes_no
from san.report.provenance import source_line

SNAPSHOTS = Path("docs/results")
"""The committed copies of the generated tables, relative to the repository root."""
FIGURES = Path("docs/figures")
"""The committed copies of the gallery's figures, relative to the repository root."""
MANIFEST = SNAPSHOTS / "SOURCES.json"
"""What every snapshot was made from: the run of the results tables and the sha256 of each copied file."""
DOCUMENTS = ("README.md", "docs/*.md")
"""The files whose generated blocks ``sync`` rewrites (globs relative to the repository root)."""
BENCHMARK_TABLES = Path("benchmarks/out")
"""Where the benchmark scripts write their tables (``benchmarks/_common.py``)."""
GALLERY = (
    "rank_collapse_overview",
    "rank_collapse_pretrained",
    "circle",
    "path_effectiveness",
    "path_decomposition",
    "theorem_bound",
    "propagation_masks",
)
"""The figures (``results/figures/<name>.png``) that README.md shows, in its order."""
GALLERY_WIDTH_PX = 1200
"""Width in pixels of a gallery copy (a README column; wider figures are scaled down)."""
BLOCK = re.compile(r"(<!-- generated: ([\w-]+) -->\n)(.*?)(<!-- end -->)", re.S)


class MissingKey(KeyError):
    """A key that a table needs is missing from the run's summary (the summary changed, or the run is partial)."""

    def __str__(self) -> str:
        return str(self.args[0])


def lookup(summary: Mapping[str, Any], dotted: str, table: str) -> Any:
    """``summary[a][b]...`` for ``dotted`` = ``"a.b..."``; a missing key raises :class:`MissingKey` naming the key,
    the table that needs it and what to do."""
    node: Any = summary
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise MissingKey(
                f"summary.json has no key '{dotted}' (missing: '{part}'), which the README table '{table}' needs: "
                f"rerun the workflow's summary, or update san/report/readme.py if the summary's keys changed"
            )
        node = node[part]
    return node


def fmt(x: Any, digits: int = 2) -> str:
    """A number as the tables print it: ``digits`` significant digits, scientific below 0.01; NaN and None as '-'."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, (bool, int)):
        return str(x)
    return f"{x:.{digits - 1}e}" if 0 < abs(x) < 1e-2 else f"{x:.{digits}g}"


def markdown(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def rank_collapse_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """Fig. 2: per model and weights, pure attention at ``report.rank_collapse.layer`` and the variants with skips
    at the last layer (mean relative residual over sequences)."""
    name = "rank_collapse"
    layer = lookup(summary, "rank_collapse.layer", name)
    rows = []
    for model, entry in lookup(summary, "rank_collapse.per_model", name).items():
        for weights in entry:
            key = f"rank_collapse.per_model.{model}.{weights}"
            pure = lookup(summary, f"{key}.pure_at_layer", name)
            skip = lookup(summary, f"{key}.skip_at_last", name)
            last = lookup(summary, f"{key}.last_layer", name)
            rows.append([model, weights, last, *(fmt(pure.get(v)) for v in ("SAN", "SAN+MLP"))]
                        + [fmt(skip.get(v)) for v in ("SAN+skip", "transformer")])  # fmt: skip
    header = ["model", "weights", "layers", f"SAN, layer {layer}", f"SAN+MLP, layer {layer}", "SAN+skip, last",
              "transformer, last"]  # fmt: skip
    return markdown(header, rows)


def pretrained_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """Pretrained weights: the first layer where SAN falls below the threshold, SAN and transformer at the last."""
    name = "pretrained"
    section = lookup(summary, "pretrained_collapse", name)
    if section is None:
        return "No model of this run has pretrained weights.\n"
    threshold = lookup(summary, "pretrained_collapse.threshold", name)
    rows = []
    for model in lookup(summary, "pretrained_collapse.per_model", name):
        key = f"pretrained_collapse.per_model.{model}"
        paper = lookup(summary, f"{key}.residual_ratio", name)
        first = paper.get("san_first_below")
        rows.append([model, lookup(summary, f"{key}.depth", name), "never" if first is None else first,
                     fmt(paper.get("san_last")), fmt(paper.get("transformer_last"))])  # fmt: skip
    return markdown(["model", "layers", f"SAN < {fmt(threshold)} at layer", "SAN, last", "transformer, last"], rows)


def paths_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """Fig. 4: per task and number of sampled paths, the mean token accuracy by path length k (mean over seeds),
    next to the full model, the input-blind predictor, and the seeds with the largest range over seeds of an
    accuracy by path length (``results/paths/summary.csv``)."""
    if paths_csv is None:
        return "No path-effectiveness task in this run.\n"
    import pandas as pd

    table = pd.read_csv(paths_csv)
    missing = {"task", "full_model", "chance"} - set(table.columns)
    if missing:
        raise MissingKey(f"{paths_csv} lacks the column(s) {sorted(missing)} that the README table 'paths' needs")
    cells = [(c, *map(int, m.groups())) for c in table.columns if (m := re.fullmatch(r"acc_n(\d+)_k(\d+)", c))]
    ns, ks = sorted({n for _, n, _ in cells}), sorted({k for _, _, k in cells})
    rows = []
    for _, row in table.iterrows():
        for i, n in enumerate(ns):
            spread = f"{int(row.get('n_seeds', 1))} / {row.get('seed_range_max', math.nan):.3f}"
            first = [row["task"], f"{row['full_model']:.3f}", f"{row['chance']:.3f}", spread] if i == 0 else [""] * 4
            rows.append([*first, n, *(f"{row.get(f'acc_n{n}_k{k}', math.nan):.3f}" for k in ks)])
    header = ["task", "full model", "input-blind", "seeds / largest seed range", "paths", *(f"k={k}" for k in ks)]
    return markdown(header, rows)


def path_decomposition_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """The exact decomposition: accuracy truncated at each path length K, and the share of the gain over the
    input-blind level carried by the paths of length <= ``short``; the norm share of those paths, trained / init."""
    name = "path_decomposition"
    section = lookup(summary, "path_decomposition", name)
    if section is None:
        return "No path-effectiveness task in this run.\n"
    short = lookup(summary, "path_decomposition.short", name)
    rows = []
    for task in lookup(summary, "path_decomposition.per_task", name):
        key = f"path_decomposition.per_task.{task}"
        truncated = lookup(summary, f"{key}.truncated", name)
        shares = lookup(summary, f"{key}.norm_share_short", name)
        rows.append([
            task, f"{lookup(summary, f'{key}.full', name):.3f}", f"{lookup(summary, f'{key}.chance', name):.3f}",
            " ".join(f"{truncated[k]:.3f}" for k in sorted(truncated, key=int)),
            fmt(lookup(summary, f"{key}.short_share_of_gain", name)),
            f"{fmt(shares.get('trained'))} / {fmt(shares.get('init'))}",
        ])  # fmt: skip
    header = ["task", "full", "input-blind", "truncated at K = 0, 1, ...", f"gain share, K <= {short}",
              f"norm share of lengths <= {short}, trained / init"]  # fmt: skip
    return markdown(header, rows)


def circle_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """Fig. 3: runs per variant whose two tokens collapsed."""
    per_variant = lookup(summary, "circle.per_variant", "circle")
    rows = []
    for variant in per_variant:
        collapsed = lookup(summary, f"circle.per_variant.{variant}.collapsed", "circle")
        rows.append([variant, f"{collapsed} / {lookup(summary, f'circle.per_variant.{variant}.runs', 'circle')}"])
    return markdown(["variant", "collapsed runs"], rows)


def _control(control: Mapping[str, Any]) -> str:
    """A positive control's cell: its wrong reference, its verdict, whether it failed as it must, and the power
    (the largest wrongness at which the check still passes) where computed."""
    must = {True: "fails as it must", False: "does NOT fail: no power"}.get(
        control.get("fails_as_it_must"), "not judged"
    )
    power = "" if control.get("power") is None else f"; passes up to {fmt(control['power'])}"
    return f"{control['reference']}: {must}{power}"


THEOREM_TABLES = (("theorem_pairs", "no (the theorem)"), ("layernorm_pairs", "yes (outside the theorem)"))
"""The theorem summary's pair tables: the theorem's own pairs and, apart, the LayerNorm pairs."""


def theorem_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """The theorem: (sample, layer) pairs per LayerNorm setting and input that respect / violate the nominal bound,
    with those at the float floor counted apart; the certified check; the adversarial search for gamma and its
    negative controls; the exponents of the Fig. 2 SAN curves."""
    name = "theorem"
    rows = []
    for table, ln in THEOREM_TABLES:
        for kind, counts in lookup(summary, f"theorem.{table}", name).items():
            rows.append([ln, kind] + [str(counts[c]) for c in ("respects", "violates", "undecided", "float_floor")])
    pairs = markdown(["LayerNorm", "input", "respect", "violate", "undecided", "at float floor (apart)"], rows)
    adv = lookup(summary, "theorem.adversarial", name)
    sizes = lookup(summary, "theorem.adversarial.sizes", name)
    nominal = lookup(summary, "theorem.nominal", name)
    certified = lookup(summary, "theorem.certified_control", name)
    checks = [
        ["slack of the nominal bound, no LayerNorm (decades, min / median)", "",
         f"{fmt(lookup(summary, 'theorem.slack_no_ln.min', name))} / "
         f"{fmt(lookup(summary, 'theorem.slack_no_ln.median', name))}", "", "", ""],
        ["nominal bound, gamma = 1, random weights: violating pairs", "regression", str(nominal["violations"]),
         f"<= {nominal['threshold']}", yes_no(nominal["holds"]), _control(nominal["control"])],
        ["certified bound: smallest margin (decades)", "regression",
         fmt(lookup(summary, "theorem.certified_margin_min_no_ln", name)),
         f">= {fmt(lookup(summary, 'theorem.certified_margin_threshold', name))}",
         yes_no(lookup(summary, "theorem.certified_holds_no_ln", name)), _control(certified)],
        [f"adversarial search: largest gamma ({adv['draws']} draws; n = {', '.join(map(str, sizes['n']))}; "
         f"H = {', '.join(map(str, sizes['H']))}; ascent gain {fmt(adv['ascent_gain'])} decades)", "scientific",
         fmt(adv["gamma_max"]), f"<= {fmt(10 ** adv['threshold_log10_gamma'])}", yes_no(adv["holds"]),
         _control(adv["control"])],
    ]  # fmt: skip
    for control, c in adv["controls"].items():
        checks.append([f"negative control {control}: largest log10 gamma", "regression", fmt(c["log10_gamma_max"]),
                       f"> {fmt(adv['negative_control_criterion'])}",
                       {True: "violated (as it must)", False: "NOT violated"}.get(c["violated"], "not judged"),
                       ""])  # fmt: skip
    fig2 = lookup(summary, "theorem.fig2_exponent", name)
    exponents = [[m, w, fmt(x)] for m, by_weights in fig2.items() for w, x in by_weights.items()]
    return (
        pairs
        + "\n"
        + markdown(["check", "kind", "measured", "threshold", "verdict", "positive control (bound / factor)"], checks)
        + "\n"
        + markdown(["Fig. 2 model", "weights", "SAN exponent"], exponents)
    )


PROPAGATION_KEYS = ("source", "statement", "form", "verdict", "detail")
"""The keys of each propagation verdict row that the table prints."""


def propagation_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """The follow-up literature's statements at initialisation: per claim, its verdict here (with its positive
    control) and the measured numbers behind it."""
    rows = []
    for i, claim in enumerate(lookup(summary, "propagation.verdicts", "propagation")):
        missing = [c for c in PROPAGATION_KEYS if c not in claim]
        if missing:
            raise MissingKey(f"summary.json 'propagation.verdicts' row {i} has no {missing}, which the README "
                             f"table 'propagation' needs")  # fmt: skip
        control = _control(claim["positive_control"]) if "positive_control" in claim else ""
        rows.append([claim["source"], claim["statement"], claim["form"], claim["verdict"], control, claim["detail"]])
    return markdown(["source", "statement", "form", "verdict here", "positive control", "measured"], rows)


def verdicts_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """Every verdict of the run by kind: the scientific verdicts (findings the run could refute, each with its
    positive control), the regression checks (true by construction: identities, proven inequalities, controls) and
    the demonstrations (examples built to satisfy an existential claim)."""
    name = "verdicts"
    rows = []
    kinds = (
        ("scientific", "scientific verdict"),
        ("regression", "regression check"),
        ("demonstration", "demonstration"),
    )
    for kind, title in kinds:
        for v in lookup(summary, f"verdicts.{kind}", name):
            control = _control(v["positive_control"]) if "positive_control" in v else ""
            rows.append([title, v["statement"], v["form"], v["verdict"], control])
    return markdown(["kind", "claim", "form", "verdict", "positive control (wrong reference)"], rows)


TABLES: dict[str, Callable[[Mapping[str, Any], Path | None], str]] = {
    "rank_collapse": rank_collapse_table,
    "pretrained": pretrained_table,
    "paths": paths_table,
    "path_decomposition": path_decomposition_table,
    "circle": circle_table,
    "theorem": theorem_table,
    "propagation": propagation_table,
    "verdicts": verdicts_table,
}
"""The tables a run writes for the documents, by block name."""


def write_tables(summary_json: Path, paths_csv: Path | None, out_dir: Path) -> list[Path]:
    """Write every :data:`TABLES` entry to ``out_dir/<name>.md``; all are built before any is written."""
    summary = json.loads(Path(summary_json).read_text())
    source = "\n" + source_line(lookup(summary, "provenance", "every table")) + "\n"
    texts = {name: build(summary, paths_csv) + source for name, build in TABLES.items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (out_dir / f"{name}.md").write_text(text)
    return [out_dir / f"{name}.md" for name in texts]


def documents(root: Path) -> list[Path]:
    """README.md and ``docs/*.md`` (the files that may hold generated blocks)."""
    return [p for pattern in DOCUMENTS for p in sorted(root.glob(pattern))]


def render(text: str, snapshots: Path, where: str = "") -> str:
    """``text`` with every generated block replaced by its snapshot ``snapshots/<name>.md``."""

    def fill(m: re.Match) -> str:
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


def publish(results: Path, root: Path, benchmarks: Path | None = None) -> list[Path]:
    """Copy a run's tables (and the benchmarks' tables in ``benchmarks``) into the snapshot folder, record what
    each was made from in :data:`MANIFEST`, copy the gallery figures into ``docs/figures/``, then :func:`sync`.

    Everything is checked before anything is copied: every table and figure exists, every results table names the
    run of ``results/summary.json`` (one run for all of them), every benchmark table names its own run."""
    tables = [results / "tables" / "readme" / f"{name}.md" for name in TABLES]
    figures = [results / "figures" / f"{name}.png" for name in GALLERY]
    missing = [p for p in tables + figures + [results / "summary.json"] if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"not in the run at {results}: {', '.join(map(str, missing))}")
    record = lookup(json.loads((results / "summary.json").read_text()), "provenance", "every table")
    line = source_line(record)
    foreign = [str(t) for t in tables if line not in t.read_text()]
    if foreign:
        raise ValueError(f"tables not written from {results / 'summary.json'} ({line}): {', '.join(foreign)}; "
                         f"rerun the workflow's readme_tables rule")  # fmt: skip
    bench = sorted(benchmarks.glob("*.md")) if benchmarks is not None and benchmarks.is_dir() else []
    unnamed = [str(b) for b in bench if SOURCE_MARK not in b.read_text()]
    if unnamed:
        raise ValueError(f"benchmark tables that name no run: {', '.join(unnamed)}; rerun those benchmarks")
    (root / SNAPSHOTS).mkdir(parents=True, exist_ok=True)
    (root / FIGURES).mkdir(parents=True, exist_ok=True)
    manifest_path = root / MANIFEST
    before = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    for table in tables + bench:
        shutil.copyfile(table, root / SNAPSHOTS / table.name)
    for figure in figures:
        gallery_copy(figure, root / FIGURES / figure.name)
    manifest = {
        "run": dict(record),
        "tables": {t.name: sha256(t) for t in tables},
        # a benchmark not rerun keeps the entry of the run that wrote its snapshot
        "benchmarks": {**before.get("benchmarks", {}), **{b.name: sha256(b) for b in bench}},
    }
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return sync(root)


def verify(root: Path, results: Path | None = None) -> list[str]:
    """What is wrong with the snapshots (empty when nothing): every ``docs/results/*.md`` is a file that
    :func:`publish` copied (its sha256 in :data:`MANIFEST`), every results table names the manifest's run, every
    benchmark table names its own; with ``results``, every results table equals that run's table."""
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        return [f"{MANIFEST} is missing: publish a run (python -m san.report.readme publish RESULTS)"]
    manifest = json.loads(manifest_path.read_text())
    made = {**manifest.get("tables", {}), **manifest.get("benchmarks", {})}
    problems = []
    for snap in sorted((root / SNAPSHOTS).glob("*.md")):
        if snap.name not in made:
            problems.append(f"{SNAPSHOTS / snap.name} was not published from a run or benchmark")
        elif sha256(snap) != made[snap.name]:
            problems.append(f"{SNAPSHOTS / snap.name} differs from the file it was published from (hand-edited?)")
        elif SOURCE_MARK not in snap.read_text():
            problems.append(f"{SNAPSHOTS / snap.name} names no source run")
    line = source_line(manifest["run"]) if "run" in manifest else None
    for name in manifest.get("tables", {}):
        snap = root / SNAPSHOTS / name
        if snap.is_file() and line not in snap.read_text():
            problems.append(f"{SNAPSHOTS / name} does not name the published run ({line})")
    for name in TABLES:
        if f"{name}.md" not in manifest.get("tables", {}):
            problems.append(f"the run table {name} was not published")
        if results is not None:
            source = results / "tables" / "readme" / f"{name}.md"
            snap = root / SNAPSHOTS / f"{name}.md"
            if not source.is_file() or not snap.is_file() or source.read_text() != snap.read_text():
                problems.append(f"{SNAPSHOTS / snap.name} differs from {source}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m san.report.readme", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    tables = sub.add_parser("tables", help="write a run's tables to RESULTS/tables/readme/")
    tables.add_argument("results", type=Path)
    pub = sub.add_parser("publish", help="copy a run's tables and figures into docs/, then sync")
    pub.add_argument("results", type=Path)
    pub.add_argument("--benchmarks", type=Path, default=BENCHMARK_TABLES, help="the benchmarks' tables folder")
    check = sub.add_parser("sync", help="rewrite the documents' generated blocks from docs/results/")
    check.add_argument("--check", action="store_true", help="only report documents out of sync (exit 1)")
    ver = sub.add_parser("verify", help="check the snapshots against what they were published from (exit 1)")
    ver.add_argument("results", type=Path, nargs="?", default=None, help="the run to compare the tables with")
    for p in (pub, check, ver):
        p.add_argument("--root", type=Path, default=Path("."), help="the repository root")
    args = ap.parse_args(argv)
    if args.command == "tables":
        csv = args.results / "paths" / "summary.csv"
        written = write_tables(args.results / "summary.json", csv if csv.is_file() else None,
                               args.results / "tables" / "readme")  # fmt: skip
    elif args.command == "publish":
        written = publish(args.results, args.root, args.benchmarks)
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
