"""The benchmarks' Markdown tables, rendered from their data (``benchmarks/out/<name>.json``): every cell from the
numbers it shows (:class:`BenchmarkCells`), so that ``python -m san.report.readme verify`` can render a committed
table again from its committed data and find a hand-edited number.
"""

from __future__ import annotations

import operator
import re
import string
from collections.abc import Mapping
from typing import Any

from san.core.markdown import markdown
from san.report.provenance import benchmark_line


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
