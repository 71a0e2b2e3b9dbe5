"""The report's captions: ``workflow/report/*.rst`` templates filled with the claims of this run (every wing's
``claims`` module), for ``snakemake --report``. A caption prints a verdict as its row in summary.json does
(:func:`san.claims.verdicts.verdict_of`: holds, fails, not judged or no power)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from san.claims import cells
from san.claims.verdicts import NOT_JUDGED, verdict_of
from san.report.front import findings, first_verdicts


def yes_no(flag: bool | None) -> str:
    """A verdict as the captions print it; None (the results hold no evidence for the claim) is "not judged",
    neither a yes nor a no (:mod:`san.claims.verdicts`)."""
    return NOT_JUDGED if flag is None else "yes" if flag else "no"


def finite(x: Any) -> bool:
    """Whether ``x`` is a number a sentence can print (not None, NaN or infinite)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def rst_text(text: object) -> str:
    """``text`` as plain reStructuredText: its inline-markup characters (``|`` substitution, ``*`` emphasis, backquote,
    ``_`` reference, and the backslash itself) escaped, so that a measured detail such as ``|measured Y - limit|``
    reads as written instead of as an undefined substitution."""
    return re.sub(r"([\\|*`_])", r"\\\1", str(text))


def verdict_item(row: Mapping[str, Any]) -> str:
    """One verdict row (:func:`san.claims.verdicts.row`) as a caption's list item prints it: its statement, printed
    verdict with its caveat markers, kind, form, source, test and detail (where any), and its positive control with
    its power where computed; the texts escaped (:func:`rst_text`)."""
    control = ""
    if "positive_control" in row:
        c = row["positive_control"]
        power = "" if c.get("power") is None else f", passes up to {c['power']:.3g}"
        control = f"; positive control, {rst_text(c['reference'])}: {c['verdict']}{power}"
    detail = f"; {rst_text(row['detail'])}" if row.get("detail") else ""
    marks = cells.caveat_cell(row)
    caveat = f" [caveats: {marks}]" if marks else ""
    return (
        f'"{rst_text(row["statement"])}" — **{row["verdict"]}**{caveat} ({row["kind"]}, {row["form"]}; source: '
        f"{rst_text(row['source'])}; test: {rst_text(row['test'])}{detail}{control})"
    )


def verdict_table(rows: list[Mapping[str, Any]]) -> str:
    """The scientific verdicts at a glance as a reStructuredText list table, one row each, in the columns of the
    README's table (:data:`san.claims.cells.SCIENCE_HEADER`: the measured value, the threshold and the margin each in
    its own column, the caveat markers beside the verdict), the texts escaped; under it, the caveats its markers
    stand for."""
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 20 12 7 5 14 14 7 14 7", ""]
    body = [list(cells.SCIENCE_HEADER)] + [cells.science_cells(r) for r in rows]
    for row in body:
        lines += [f"   * - {rst_text(row[0])}"] + [f"     - {rst_text(c) if c else 'none'}" for c in row[1:]]
    return "\n".join(lines) + "\n" + rst_text(cells.legend(rows))


def sweep_rows(section: Mapping[str, Any] | None, sweep: str) -> list[Mapping[str, Any]]:
    """The verdict rows of one propagation sweep (keys ``<sweep>.<claim>``); none without a section."""
    return [r for r in (section or {}).get("verdicts", []) if r["key"].startswith(f"{sweep}.")]


def render_captions(templates: Path, out_dir: Path, context: Mapping[str, Any]) -> list[Path]:
    """Fill ``[[ ... ]]`` placeholders of every ``*.rst`` template with this run's numbers.

    Snakemake renders the result a second time at report time (its ``{{ ... }}`` syntax), so templates may keep
    per-figure expressions such as ``{{ snakemake.wildcards.model }}``.
    """
    env = jinja2.Environment(
        variable_start_string="[[",
        variable_end_string="]]",
        block_start_string="[%",
        block_end_string="%]",
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["e"] = lambda x: f"{x:.1e}" if finite(x) else "none"
    env.filters["pct"] = lambda x: f"{100 * x:.1f}%" if finite(x) else "none"
    env.filters["num"] = lambda x, spec=".3g": format(x, spec) if finite(x) else "none"
    env.globals["finite"] = finite
    env.globals["yes_no"] = yes_no
    env.globals["verdict"] = verdict_of
    env.globals["sweep_rows"] = sweep_rows
    env.globals["verdict_item"] = verdict_item
    env.globals["verdict_table"] = verdict_table
    env.globals["findings"] = lambda: findings(context)
    env.globals["first_verdicts"] = lambda: first_verdicts(context)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(Path(templates).glob("*.rst")):
        target = out_dir / path.name
        target.write_text(env.from_string(path.read_text()).render(**context))
        written.append(target)
    return written
