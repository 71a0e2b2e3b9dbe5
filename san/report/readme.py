"""The numbers of README.md and docs/ come from generated files, never from typing.

Four steps, each a subcommand of ``python -m san.report.readme``:

1. ``tables RESULTS`` (also the workflow's ``readme_tables`` rule): Markdown tables from a run's
   ``summary.json`` and ``paths/summary.csv`` into ``RESULTS/tables/readme/<name>.md``, one per :data:`TABLES`
   entry, each ending with the line naming its source run (commit, config hash, date, machine: the summary's
   ``provenance``). Each table reads a short, explicit list of keys; a key the summary lacks is an error naming it.
2. ``publish [RESULTS]``: copy the run's data (``summary.json`` and ``paths/summary.csv``, :data:`RUN_DATA`), its
   tables (all from that one run, each equal to the table rendered from that data) and the benchmarks' tables with
   their data (``benchmarks/out/<name>.md`` and ``<name>.json``, each naming the command that wrote it) into the
   committed snapshot folder ``docs/results/``, record the run and the sha256 of every copied file in
   :data:`MANIFEST`, and copy the gallery's figures (:data:`GALLERY`) into ``docs/figures/`` at a web-friendly
   width; then step 3. Without ``RESULTS``, only the benchmarks' tables.
3. ``sync`` (``--check``: only report): rewrite every block ``<!-- generated: NAME -->`` ... ``<!-- end -->`` of
   README.md and ``docs/*.md`` with ``docs/results/NAME.md``. The tests run the check, so a hand edit of a block
   fails them.
4. ``verify [RESULTS]``: every snapshot has the sha256 :data:`MANIFEST` records, and every table equals the one
   rendered again from the committed data (the run's tables from ``docs/results/summary.json``, a benchmark's from
   its ``.json``), so a number edited in a table, even with its hash, fails, and so does one edited in the data;
   with ``RESULTS``, the run's tables themselves are compared too. The tests run it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import operator
import re
import shutil
import string
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from san.report.captions import yes_no
from san.report.provenance import benchmark_line, source_line

SNAPSHOTS = Path("docs/results")
"""The committed copies of the generated tables, relative to the repository root."""
FIGURES = Path("docs/figures")
"""The committed copies of the gallery's figures, relative to the repository root."""
MANIFEST = SNAPSHOTS / "SOURCES.json"
"""What every snapshot was made from: the run of the results tables and the sha256 of each copied file."""
RUN_DATA = {"summary.json": Path("summary.json"), "paths_summary.csv": Path("paths/summary.csv")}
"""The run's data the tables are rendered from, by snapshot name: its path in the results folder. The paths
summary exists only where the run has a path-effectiveness task."""
REPUBLISH = "republish: python -m san.report.readme publish results (after a default run)"
"""How a stale snapshot set is renewed (the end of every :func:`verify` problem that only a new publish fixes)."""
RERUN_BENCHMARK = "rerun the benchmark (the command its table names), then publish"
"""How a benchmark table without its data is renewed (the end of that :func:`verify` problem)."""
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


def training_series_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """The offline training series: per variant and layer, the relative residual at the first and the last checkpoint
    (mean over seeds and sequences), the share of sink heads, and what the model learned (loss against the unigram
    baseline, per seed)."""
    name = "training_series"
    section = summary.get("training_series")  # a summary of a run before the series was part of it has none
    if section is None:
        return "No training series in this run.\n"
    first, last = lookup(summary, "training_series.first", name), lookup(summary, "training_series.last", name)
    at = lookup(summary, "training_series.at", name)
    rows = []
    for variant, by_layer in at[first]["residual_ratio"].items():
        for layer in lookup(summary, "training_series.layers", name):
            rows.append(
                [variant, layer, fmt(by_layer[str(layer)]), fmt(at[last]["residual_ratio"][variant][str(layer)])]
            )
    for variant, share in at[first]["sink_share"].items():
        rows.append([variant, "sink share", fmt(share), fmt(at[last]["sink_share"][variant])])
    table = markdown(["variant", "layer", first, last], rows)
    losses = [
        [seed, fmt(e["final_loss"], 3), fmt(e["unigram_loss"], 3), fmt(e["ratio"])]
        for seed, e in lookup(summary, "training_series.per_seed", name).items()
    ]
    return table + "\n" + markdown(["seed", "loss (last tenth)", "unigram baseline", "ratio"], losses)


def vision_table(summary: Mapping[str, Any], paths_csv: Path | None) -> str:
    """Image encoders: per model and weights, each variant's patch high-frequency share at the last layer over its
    layer-0 value (mean over the photographs), and the pure-attention share on the noise images."""
    name = "vision"
    section = summary.get("vision")  # a summary of a run before the image encoders were part of it has none
    if section is None:
        return "No image encoder in this run.\n"
    variants = ("SAN", "SAN+MLP", "SAN+skip", "transformer")
    rows = []
    for model, entry in lookup(summary, "vision.per_model", name).items():
        for weights in entry:
            key = f"vision.per_model.{model}.{weights}"
            share = lookup(summary, f"{key}.patch_share", name)
            noise = lookup(summary, f"{key}.noise_patch_share", name) or {}
            rows.append([model, weights, lookup(summary, f"{key}.layers", name), *(fmt(share.get(v)) for v in variants),
                         fmt(noise.get("SAN"))])  # fmt: skip
    header = ["model", "weights", "layers", *(f"{v}, last / first" for v in variants), "SAN on noise"]
    return markdown(header, rows)


TABLES: dict[str, Callable[[Mapping[str, Any], Path | None], str]] = {
    "rank_collapse": rank_collapse_table,
    "pretrained": pretrained_table,
    "paths": paths_table,
    "path_decomposition": path_decomposition_table,
    "circle": circle_table,
    "theorem": theorem_table,
    "propagation": propagation_table,
    "training_series": training_series_table,
    "vision": vision_table,
    "verdicts": verdicts_table,
}
"""The tables a run writes for the documents, by block name."""


def build_tables(summary: Mapping[str, Any], paths_csv: Path | None) -> dict[str, str]:
    """Every :data:`TABLES` entry's Markdown from a run's summary (and paths summary), each ending with the line
    naming the summary's run: what ``tables`` writes and what :func:`verify` renders again from the committed data."""
    source = "\n" + source_line(lookup(summary, "provenance", "every table")) + "\n"
    return {name: build(summary, paths_csv) + source for name, build in TABLES.items()}


def write_tables(summary_json: Path, paths_csv: Path | None, out_dir: Path) -> list[Path]:
    """Write every :data:`TABLES` entry to ``out_dir/<name>.md``; all are built before any is written."""
    texts = build_tables(json.loads(Path(summary_json).read_text()), paths_csv)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (out_dir / f"{name}.md").write_text(text)
    return [out_dir / f"{name}.md" for name in texts]


class _Unmeasured(Exception):
    """A benchmark cell reads a field that is null: a quantity its row does not measure (the cell prints '-')."""


class BenchmarkCells(string.Formatter):
    """``str.format`` of a benchmark table's cells from its measurements (:func:`benchmark_table`). Beside Python's
    format specifications, a field may end its spec with ``@UNIT`` (:data:`CELL_UNITS`: the value, in the unit its
    key names, divided by that unit's size, e.g. bytes ``{peak_rss_bytes:.2f@GiB}``), and a spec holding ``?`` is a
    choice: ``{flag:?yes|no}`` for a boolean, ``{ratio:<={target}?met|NOT met}`` for a number against a bound (``<``,
    ``<=``, ``>``, ``>=``), so that a verdict is rendered from its numbers. A null field makes the whole cell '-'."""

    def format_field(self, value: Any, spec: str) -> str:
        if value is None:
            raise _Unmeasured
        if "?" in spec:
            test, choices = spec.split("?", 1)
            yes, sep, no = choices.partition("|")
            bound = re.fullmatch(r"(<=|>=|<|>)(.+)", test)
            if not sep or not (bound or (not test and isinstance(value, bool))):
                raise ValueError(f"the cell spec '{spec}' is neither '?yes|no' on a boolean nor 'OPbound?yes|no'")
            held = CELL_TESTS[bound[1]](float(value), float(bound[2])) if bound else value
            return yes if held else no
        spec, _, unit = spec.partition("@")
        if unit and unit not in CELL_UNITS:
            raise ValueError(f"unknown unit '@{unit}' in a cell spec (known: {', '.join(CELL_UNITS)})")
        return super().format_field(value / CELL_UNITS[unit] if unit else value, spec)

    def cell(self, template: str, fields: Mapping[str, Any]) -> str:
        """``template`` filled from ``fields`` ('-' when it reads a null field); a field missing is an error naming
        it."""
        try:
            return self.vformat(template, (), fields)
        except _Unmeasured:
            return "-"
        except KeyError as err:
            raise KeyError(f"the benchmark cell '{template}' reads {err}, which its row and values lack") from None
        except TypeError as err:
            raise ValueError(f"the benchmark cell '{template}' cannot format its fields: {err}") from None


CELL_UNITS = {"ms": 1e-3, "min": 60.0, "G": 1e9, "MiB": 2.0**20, "GiB": 2.0**30}
"""The units a benchmark cell may show a value in (``{field:SPEC@UNIT}``), by their size in the unit of the field."""
CELL_TESTS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
"""The comparisons of a choice cell (``{field:OPbound?yes|no}``)."""


def benchmark_table(data: Mapping[str, Any]) -> str:
    """A benchmark's Markdown table from its data (``benchmarks/out/<name>.json``, written by the benchmarks'
    ``_common.write_table``), ending with an optional ``note`` and the line naming its ``record``
    (:func:`san.report.provenance.benchmark_line`: the command, commit, date, machine). The data holds the
    measurements: ``rows``, one mapping of numbers (units in the keys), booleans, labels and nulls per row,
    ``values`` the numbers shared by every row (settings, targets), and ``columns`` a title and a cell template per
    column (:class:`BenchmarkCells`; titles and the note are templates of ``values``), so every cell is rendered
    from the numbers. A table of cells as printed (``header`` and ``rows`` of strings) renders as it is."""
    missing = [k for k in ("rows", "record") if k not in data] + ([] if {"columns", "header"} & set(data) else
                                                                   ["columns"])  # fmt: skip
    if missing:
        raise KeyError(f"the benchmark data lacks {missing} (expected columns, rows, values, note, record)")
    values, cells = dict(data.get("values") or {}), BenchmarkCells()
    if "columns" in data:
        header = [cells.cell(c["title"], values) for c in data["columns"]]
        rows = [[cells.cell(c["cell"], {**values, **row}) for c in data["columns"]] for row in data["rows"]]
        note = cells.cell(data.get("note") or "", values)
    else:
        header, note = list(map(str, data["header"])), data.get("note") or ""
        rows = [[str(cell) for cell in row] for row in data["rows"]]
    return markdown(header, rows) + (f"\n{note}\n" if note else "") + (f"\n{benchmark_line(data['record'])}\n")


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
    tables = [results / "tables" / "readme" / f"{name}.md" for name in TABLES]
    figures = [results / "figures" / f"{name}.png" for name in GALLERY]
    missing = [p for p in tables + figures + [results / RUN_DATA["summary.json"]] if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"not in the run at {results}: {', '.join(map(str, missing))}")
    data = {snap: results / rel for snap, rel in RUN_DATA.items() if (results / rel).is_file()}
    summary = json.loads(data["summary.json"].read_text())
    record = dict(lookup(summary, "provenance", "every table"))
    rendered = build_tables(summary, data.get("paths_summary.csv"))
    foreign = [str(t) for t in tables if t.read_text() != rendered[t.stem]]
    if foreign:
        raise ValueError(f"tables not written from {data['summary.json']} ({source_line(record)}): "
                         f"{', '.join(foreign)}; rerun the workflow's readme_tables rule")  # fmt: skip
    return tables, figures, data, record


def publish(results: Path | None, root: Path, benchmarks: Path | None = None) -> list[Path]:
    """Copy a run's data and tables (and the benchmarks' tables with their data, in ``benchmarks``) into the
    snapshot folder, record the run and the sha256 of every copied file in :data:`MANIFEST`, copy the gallery
    figures into ``docs/figures/``, then :func:`sync`. Without ``results``, only the benchmarks' tables are
    published (the run's snapshots stay as they are).

    Everything is checked before anything is copied: every table and figure exists, every results table equals the
    one rendered from ``results/summary.json`` (one run for all of them), every benchmark table names its run and
    equals the one rendered from its data."""
    tables, figures, data, record = _checked_run(results) if results is not None else ([], [], {}, None)
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
        for snap in set(RUN_DATA) - set(data):  # a run without path tasks: no paths summary of an earlier run stays
            (snapshots / snap).unlink(missing_ok=True)
        for figure in figures:
            gallery_copy(figure, root / FIGURES / figure.name)
        manifest |= {
            "run": record,
            "data": {snap: sha256(snapshots / snap) for snap in data},
            "tables": {t.name: sha256(t) for t in tables},
        }
    bench_files = [f for b in bench for f in (b, b.with_suffix(".json"))]
    for table in tables + bench_files:
        shutil.copyfile(table, snapshots / table.name)
    # a benchmark not rerun keeps the entry of the run that wrote its snapshot, while its snapshot is there
    kept = {n: h for n, h in manifest.get("benchmarks", {}).items() if (snapshots / n).is_file()}
    manifest["benchmarks"] = {**kept, **{f.name: sha256(f) for f in bench_files}}
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return sync(root)


def verify(root: Path, results: Path | None = None) -> list[str]:
    """What is wrong with the snapshots (empty when nothing). Every file of ``docs/results/`` is one that
    :func:`publish` copied, with the sha256 :data:`MANIFEST` records; the committed ``summary.json`` is the
    manifest's run; every run table equals the one rendered again from the committed ``summary.json`` (and paths
    summary), and every benchmark table the one rendered from its committed data, so that a number edited in a table
    or in the data fails, with its hash or without; every benchmark table is quoted by a document; with ``results``,
    every run table also equals that run's table. A problem that only a new publish fixes ends with :data:`REPUBLISH`
    (or :data:`RERUN_BENCHMARK`)."""
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
    for name in TABLES:
        if f"{name}.md" not in manifest.get("tables", {}):
            problems.append(f"the run table {name} was not published")
        if results is not None:
            source = results / "tables" / "readme" / f"{name}.md"
            snap = snapshots / f"{name}.md"
            if not source.is_file() or not snap.is_file() or source.read_text() != snap.read_text():
                problems.append(f"{SNAPSHOTS / snap.name} differs from {source}")
    return problems


def _verify_run_tables(root: Path, manifest: Mapping[str, Any]) -> list[str]:
    """:func:`verify`'s check of the run tables: each equals the table rendered from the committed data, which is
    the manifest's run. Without committed data (a snapshot set published before the data was), each table names the
    manifest's run, and the missing data is a problem that a new publish fixes."""
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
    csv = snapshots / "paths_summary.csv"
    try:
        rendered = build_tables(summary, csv if csv.is_file() else None)
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
    tables = sub.add_parser("tables", help="write a run's tables to RESULTS/tables/readme/")
    tables.add_argument("results", type=Path)
    pub = sub.add_parser("publish", help="copy a run's data, tables and figures and the benchmarks' tables into "
                         "docs/, then sync")  # fmt: skip
    pub.add_argument("results", type=Path, nargs="?", default=None, help="the run (without: only the benchmarks)")
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
