"""What ``verify`` re-derives of everything published beyond the scientific rows' own numbers (torch-free).

:func:`problems` checks a committed summary against itself and the repository's config:

- **every row of every kind**: a regression or demonstration row's check from its value and its recorded bound (a
  value on an inclusive bound passes), a check over several parts from its items (each item's verdict from its value
  and the bound, the row's check from the items' verdicts against the verdicts they must have), a row without a value
  never "holds";
- **every models x claims cell**: its printed verdict from its own value, standard error and threshold (the side,
  decades and spread rule of its claim's row) and its control's value: the same rule as the row's
  (:func:`san.claims.verdicts.printed`);
- **every threshold against config.yaml**: each row's threshold or bound, each control's setting and each cell's
  threshold equals the value config.yaml (defaults filled in) holds at the key the row names, and each row's
  threshold history says what the config's ``threshold_notes`` say;
- **every power scan against its recorded steps**: a scan is the grid from the claim's own reference to twice the way
  to the control's setting, in the steps of :meth:`san.claims.verdicts.Wrong.toward` (linear, or geometric for a
  factor), stopped at its first setting that does not pass and no later.

Every number a README or docs table prints is checked by the tables' re-rendering from the committed data and by
the documents' generated blocks equal to the snapshots (:func:`san.report.readme.verify`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from san.claims import verdicts as V
from san.claims.drift import crosses
from san.claims.record import history

#: the summary format whose rows carry what this module re-derives (bounds, parts, cells' numbers, record fields):
#: written by :func:`san.report.claims.summary` as the summary's ``format``; a summary of an earlier format predates
#: them and is checked by its own numbers alone until it is published again from a run
FORMAT = 2

#: the steps of a scan from the claim's reference to the control's setting (:meth:`san.claims.verdicts.Wrong.toward`)
SCAN_STEPS = 20


def config_of(root: Path) -> dict[str, Any]:
    """The repository's ``config.yaml`` with the schema's defaults filled in."""
    from san.core.config import load_yaml, with_defaults

    return with_defaults(load_yaml(root / "config.yaml"), root / "workflow" / "schemas" / "config.schema.yaml")


def _rows(summary: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for kind in V.KINDS:
        yield from (summary.get("verdicts") or {}).get(kind, [])


def _at(config: Mapping[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def _close(a: Any, b: Any) -> bool:
    try:
        return bool(np.isclose(float(a), float(b), rtol=1e-12, atol=0.0))
    except (TypeError, ValueError):
        return a == b


def _clears(value: float | None, bound: Mapping[str, Any], inclusive: bool) -> V.Verdict:
    if value is None or not np.isfinite(value):
        return None
    t = V.Threshold(**bound)
    m = t.margin(V.Measure(float(value)))
    return None if not np.isfinite(m) else bool(m > 0 or (inclusive and m == 0))


def row_problems(summary: Mapping[str, Any]) -> list[str]:
    """The checks of the regression and demonstration rows (and of any row with a bound) that do not follow from
    their recorded values, bounds and items."""
    problems = []
    for r in _rows(summary):
        name = r.get("claim", r["key"])
        if "bound" not in r:
            if r["kind"] != V.SCIENTIFIC:
                problems.append(f"{name}: a {r['kind']} row without the bound its check is re-derived from")
            continue
        parts = [i for i in r.get("items") or [] if "must" in i]
        if parts:
            for i in parts:
                got = V.label(_clears(i["value"], r["bound"], r.get("inclusive", False)))
                if got != i["verdict"]:
                    problems.append(f"{name}: item {i['item']} prints '{i['verdict']}' where its value gives '{got}'")
            want = V.every(i["verdict"] == i["must"] for i in parts)
        else:
            want = _clears(r.get("value"), r["bound"], r.get("inclusive", False))
            if want is None and r["holds"] is not True:
                want = r["holds"]  # no value: any check but "holds" is what the row can say
        if r["holds"] != want:
            problems.append(f"{name}: check {V.label(r['holds'])} does not follow from its value and bound "
                            f"({V.label(want)})")  # fmt: skip
    return problems


def cell_problems(summary: Mapping[str, Any]) -> list[str]:
    """The models x claims cells whose printed verdict does not follow from their own numbers (a cell with a
    quantisation drift that reaches its threshold prints "within quantisation drift": san.phenomena.drift)."""
    section = summary.get("phenomena") or {}
    rows = {r["key"]: r for r in section.get("verdicts", [])}
    problems = []
    for model, cells in (section.get("table") or {}).items():
        for key, cell in cells.items():
            if cell.get("value") is None:
                if cell["verdict"] in (V.HOLDS, V.FAILS, V.NO_POWER):
                    problems.append(f"phenomena.table.{model}.{key}: prints '{cell['verdict']}' without a value")
                continue
            t = {**rows[key]["threshold"], "value": cell["threshold"]}
            holds = V.clears(V.Threshold(**t).margin(V.Measure(cell["value"], cell.get("se") or 0.0)))
            if cell.get("control_value") is None:
                control = None
            else:
                moved = V.Measure(cell["control_value"], cell.get("control_se") or 0.0)
                control = V.clears(V.Threshold(**t).margin(moved))
            want = V.printed(holds, {"fails_as_it_must": None if control is None else not control})
            want = crosses(want, cell["value"], cell["threshold"], cell.get("drift"))
            if cell["verdict"] != want:
                problems.append(f"phenomena.table.{model}.{key}: prints '{cell['verdict']}' where its value, "
                                f"threshold and control give '{want}'")  # fmt: skip
    return problems


def threshold_problems(summary: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """The thresholds, control settings and threshold histories of the rows and cells that differ from config."""
    problems = []

    def against(name: str, key: str, value: Any) -> None:
        try:
            want = _at(config, key)
        except KeyError:
            problems.append(f"{name}: names the config key '{key}', which config.yaml does not have")
            return
        if not _close(value, want):
            problems.append(f"{name}: threshold {key} = {value} where config.yaml has {want}: rerun the summary and "
                            "republish")  # fmt: skip

    for r in _rows(summary):
        name = r.get("claim", r["key"])
        for field in ("threshold", "bound"):
            t = r.get(field) or {}
            halves = str(t.get("key", "")).endswith("margin)")
            keys = [k for k in str(t.get("key", "")).split(" (")[0].split(" and ") if k]
            if len(keys) == 1 and not halves:
                against(name, keys[0], t["value"])
            elif keys:
                for k in keys:
                    try:
                        _at(config, k)
                    except KeyError:
                        problems.append(f"{name}: names the config key '{k}', which config.yaml does not have")
            recorded = r.get("threshold_history") or {}
            for k in keys:
                if k == recorded.get("key") and recorded["set_before"] != history(config["report"], k)["set_before"]:
                    problems.append(f"{name}: the history of {k} differs from config.yaml's threshold_notes")
        pc = r.get("positive_control") or {}
        if pc.get("key") and pc.get("setting") is not None:
            against(f"{name} (control)", pc["key"], pc["setting"])
    for model, cells in ((summary.get("phenomena") or {}).get("table") or {}).items():
        for key, cell in cells.items():
            if cell.get("threshold_key"):
                against(f"phenomena.table.{model}.{key}", cell["threshold_key"], cell["threshold"])
    return problems


def _grids(right: float, setting: float) -> list[np.ndarray]:
    """The scan grids a control at ``setting`` may have: linear from ``right`` (Wrong.toward), or geometric (a
    factor from 1)."""
    steps = np.linspace(0.0, 2.0, 2 * SCAN_STEPS + 1)
    grids = [right + (setting - right) * steps]
    if right > 0 and setting > 0:
        grids.append(right * (setting / right) ** steps)
    return grids


def scan_problems(summary: Mapping[str, Any]) -> list[str]:
    """The scientific rows whose power scan is not the recorded grid stopped at its first setting that does not
    pass."""
    problems = []
    for r in _rows(summary):
        pc = r.get("positive_control") or {}
        if "scan" not in pc:
            continue
        name = r.get("claim", r["key"])
        scan, passes = pc["scan"], pc["passes"]
        right = pc.get("right", scan[0] if scan else 0.0)
        fits = any(len(scan) <= len(g) and np.allclose(scan, g[: len(scan)], rtol=1e-9, atol=1e-12)
                   and _close(pc["scanned_to"], g[-1]) for g in _grids(right, pc["setting"]))  # fmt: skip
        if not fits:
            problems.append(f"{name}: its power scan is not the grid from {right:g} to twice the way to the "
                            f"control's setting {pc['setting']:g} in {2 * SCAN_STEPS} steps")  # fmt: skip
        stops = [i for i, p in enumerate(passes) if p != V.HOLDS]
        if stops and stops[0] != len(passes) - 1:
            problems.append(f"{name}: its power scan goes on after a setting that does not pass")
        if not stops and fits and len(scan) != 2 * SCAN_STEPS + 1:
            problems.append(f"{name}: its power scan stops at a setting that passes")
    return problems


def summary_problems(summary: Mapping[str, Any], root: Path) -> list[str]:
    """Everything ``verify`` re-derives of one committed summary: every verdict from its own numbers
    (:func:`san.claims.verdicts.rederive_summary`) and, for a summary with claim records (:data:`FORMAT`), what
    :func:`problems` checks."""
    found = V.rederive_summary(summary)
    return found + (problems(summary, root) if summary.get("format", 1) >= FORMAT else [])


def problems(summary: Mapping[str, Any], root: Path) -> list[str]:
    """Everything :mod:`this module <san.report.published>` re-derives of a committed summary, against the config of
    the repository at ``root`` (a snapshot folder copied without its repository's config is checked against
    itself alone)."""
    config = config_of(root) if (root / "config.yaml").is_file() else None
    against = threshold_problems(summary, config) if config is not None else []
    return row_problems(summary) + cell_problems(summary) + against + scan_problems(summary)
