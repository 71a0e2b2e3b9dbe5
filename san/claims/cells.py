"""The cells every table of verdict rows prints (torch-free): the claim, its verdict with its caveat markers, the
measured value with its name, the threshold with its config key, the margin with its unit, the near-miss control and
the power, each in a column of its own, so that no cell reads a margin as a value. Text that never breaks: a missing
number prints "none", never "nan" or an empty pair of parentheses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from san.claims import caveats
from san.core.markdown import fmt

#: the columns of a scientific verdict table, in order
SCIENCE_HEADER = ("claim", "source", "verdict", "caveats", "value", "threshold", "margin", "near-miss control",
                  "power")  # fmt: skip
#: the columns of the regression and demonstration table
CHECK_HEADER = ("check", "kind", "source", "verdict", "caveats", "value", "threshold", "margin")
NONE = "none"


def number(x: Any) -> str:
    """A number as a cell prints it; "none" where there is none (never "nan" or "-")."""
    text = fmt(x)
    return NONE if text in ("-", "nan", "inf", "-inf") else text


def claim_cell(row: Mapping[str, Any]) -> str:
    """The claim: its statement and its name in the summary."""
    return f"{row['statement']} (`{row.get('claim', row['key'])}`)"


def value_cell(row: Mapping[str, Any]) -> str:
    """The measured value with its standard error and what it is of (its item); "none" without a value."""
    if row.get("value") is None:
        return NONE
    text = number(row["value"])
    if row.get("se"):
        text += f" ± {number(row['se'])}"
    return f"{text} ({row['item']})" if row.get("item") else text


def threshold_cell(row: Mapping[str, Any]) -> str:
    """The threshold: the side the claim puts the value on, its value and its config key; "none" without one."""
    t = row.get("threshold") or row.get("bound")
    if not t:
        return NONE
    spread = f"after {number(t['sigmas'])} s.e." if t.get("sigmas") else ""
    where = ", ".join(part for part in (t.get("key") or "", spread) if part)
    return f"{'>' if t['above'] else '<'} {number(t['value'])}" + (f" ({where})" if where else "")


def margin_cell(row: Mapping[str, Any]) -> str:
    """The margin left to the threshold (positive: clears) with its unit (decades for a ratio compared in log), and
    beside it, for a row on quantised weights, how far requantising them alone moves it (san.phenomena.drift)."""
    if row.get("margin") is None:
        return NONE
    log = (row.get("threshold") or row.get("bound") or {}).get("log")
    unit = " decades" if log else ""
    drift = f" (quantisation drift {number(row['drift'])})" if row.get("drift") is not None else ""
    return f"{number(row['margin'])}{unit}{drift}"


def control_text(row: Mapping[str, Any]) -> str:
    """The near-miss control: its wrong reference at the config's setting, its measured value and its verdict."""
    c = row.get("positive_control")
    if not c:
        return NONE
    setting = f" ({c['key']} = {number(c['setting'])})" if c.get("key") else ""
    value = f", measured {number(c['measured_value'])}" if c.get("measured_value") is not None else ""
    return f"{c['reference']}{setting}{value}: {c['verdict']}"


def power_text(row: Mapping[str, Any]) -> str:
    """How far the reference can move before the test fails: "none" when it fails at the claim's own reference,
    ">= x" when it never failed within the scan."""
    c = row.get("positive_control") or {}
    if c.get("power") is None:
        return NONE
    passes = c.get("passes") or []
    never_failed = bool(passes) and all(p == "holds" for p in passes) and len(passes) == len(c.get("scan") or [])
    return f"{'>= ' if never_failed else ''}{number(c['power'])}"


def caveat_cell(row: Mapping[str, Any]) -> str:
    """The row's caveat markers (:mod:`san.claims.caveats`); empty without."""
    return caveats.marks(row.get("caveats"))


def science_cells(row: Mapping[str, Any]) -> list[str]:
    """A scientific row's cells, in the order of :data:`SCIENCE_HEADER`."""
    return [claim_cell(row), row["source"], row["verdict"], caveat_cell(row), value_cell(row), threshold_cell(row),
            margin_cell(row), control_text(row), power_text(row)]  # fmt: skip


def check_cells(row: Mapping[str, Any], kind: str) -> list[str]:
    """A regression or demonstration row's cells, in the order of :data:`CHECK_HEADER`."""
    return [claim_cell(row), kind, row["source"], row["verdict"], caveat_cell(row), value_cell(row),
            threshold_cell(row), margin_cell(row)]  # fmt: skip


def legend(rows: Iterable[Mapping[str, Any]]) -> str:
    """The line under a table of ``rows`` that explains the caveat markers it shows (:func:`caveats.legend`)."""
    return caveats.legend(rows=rows)
