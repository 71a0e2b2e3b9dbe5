"""The Markdown of the documents' generated tables: numbers as the tables print them, a table, the summary keys a
table reads, and a positive control's cell. Every wing's ``tables`` module builds its tables with these
(:mod:`san.report.readme` writes, publishes and checks them)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


class MissingKey(KeyError):
    """A key that a table needs is missing from the run's summary (the summary changed, or the run is partial)."""

    def __str__(self) -> str:
        return str(self.args[0])


def lookup(summary: Mapping[str, Any], dotted: str | tuple[str, ...], table: str) -> Any:
    """``summary[a][b]...`` for ``dotted`` = ``"a.b..."`` (or the tuple of its parts, for keys that hold a dot
    themselves: a model named ``Qwen2.5-...``); a missing key raises :class:`MissingKey` naming the key, the table
    that needs it and what to do."""
    node: Any = summary
    parts = tuple(dotted) if isinstance(dotted, tuple) else tuple(dotted.split("."))
    dotted = ".".join(parts)
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            raise MissingKey(
                f"summary.json has no key '{dotted}' (missing: '{part}'), which the README table '{table}' needs: "
                f"rerun the workflow's summary, or update the table's wing (its tables module) if the summary's keys "
                f"changed"
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


def control_cell(control: Mapping[str, Any]) -> str:
    """A positive control's cell (:func:`san.claims.verdicts.control`): its wrong reference, whether it failed as it
    must, and the power (the largest wrongness at which the check still passes) where computed."""
    must = {True: "fails as it must", False: "does NOT fail: no power"}.get(
        control.get("fails_as_it_must"), "not judged"
    )
    power = "" if control.get("power") is None else f"; passes up to {fmt(control['power'])}"
    return f"{control['reference']}: {must}{power}"


def measured_cell(row: Mapping[str, Any]) -> str:
    """A verdict row's measured value against its threshold (a row built by :func:`san.claims.verdicts.check`): e.g.
    ``1.1e-06 < 1.0e-03 (decades)``, with the item the value is of and its standard error where there is one; a row
    without a threshold prints its value alone."""
    value = fmt(row.get("value"))
    if row.get("se"):
        value += f" ± {fmt(row['se'])}"
    if row.get("item"):
        value += f" ({row['item']})"
    t = row.get("threshold")
    if not t:
        return value
    side = ">" if t["above"] else "<"
    scale = ", decades" if t["log"] else ""
    spread = f", after {fmt(t['sigmas'])} s.e." if t.get("sigmas") and row.get("se") else ""
    return f"{value} {side} {fmt(t['value'])} ({t['key']}{scale}{spread})"


def wrong_cell(row: Mapping[str, Any]) -> str:
    """A scientific row's positive control: its near-miss wrong reference at the config's setting, the control's
    measured value and its verdict (it must fail)."""
    c = row.get("positive_control")
    if not c:
        return ""
    setting = f" ({c['key']} = {fmt(c['setting'])})" if c.get("key") else ""
    value = f", measured {fmt(c['measured_value'])}" if c.get("measured_value") is not None else ""
    return f"{c['reference']}{setting}{value}: {c['verdict']}"


def power_cell(row: Mapping[str, Any]) -> str:
    """How far a scientific row's reference can move before its test fails (the control's power, read from its
    scan): ``-`` when the test fails at the claim's own reference, ``>= x`` when it never failed within the scan."""
    c = row.get("positive_control") or {}
    if c.get("power") is None:
        return "-"
    passes = c.get("passes") or []
    never_failed = bool(passes) and all(p == "holds" for p in passes) and len(passes) == len(c.get("scan") or [])
    return f"{'>= ' if never_failed else ''}{fmt(c['power'])}"
