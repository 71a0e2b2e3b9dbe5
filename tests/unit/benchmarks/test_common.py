"""benchmarks/_common.py: ratios measured in alternating order with their spread, tables that name their run and
are rendered from their measurements (numbers with their units in their keys), their targets' verdicts included."""

import re
import sys

import numpy as np
import pytest

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts' own folder, as when they run

import _common  # noqa: E402


def test_ratios_alternate_their_order_and_report_the_spread():
    """The clock is a counter: each call of ``first`` takes 2 ticks, of ``second`` 1, plus a cold-cache tick for
    whichever runs first in a pair. Alternating the order, the penalty falls on each side in turn, so the ratio's
    range shows it; a fixed order would report 3/1 every time."""
    ticks, calls = [0.0], []

    def clock() -> float:
        return ticks[0]

    def run(name: str, cost: float):
        def fn():
            ticks[0] += cost + (1.0 if len(calls) % 2 == 0 else 0.0)  # the first of each pair pays a cold start
            calls.append(name)

        return fn

    r = _common.alternating_ratio(run("a", 2.0), run("b", 1.0), pairs=4, clock=clock)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert (r["low"], r["high"], r["pairs"]) == (1.0, 3.0, 4) and r["median"] == 2.0
    assert _common.ratio_cell(r) == "2.00 (1.00-3.00, 4 pairs)"
    with pytest.raises(ValueError, match="pairs"):
        _common.alternating_ratio(run("a", 1), run("b", 1), pairs=0, clock=clock)


def test_a_benchmark_table_names_its_command_and_is_rendered_from_its_measurements(tmp_path, monkeypatch):
    """The table ends with the line naming the command that wrote it (as typed from the checkout's root), not a
    hash of its arguments, and is rendered from the data written beside it, which publish and verify read: the
    measurements as numbers (bytes, seconds, ratios), a target's verdict rendered from the number and the target."""
    import json

    from san.report.benchmark_tables import benchmark_table

    monkeypatch.setattr(_common, "OUT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["/somewhere/benchmarks/bench_x.py", "--quick", "--models", "a b"])
    columns = [("task", "{task}"), ("peak", "{peak_rss_bytes:.2f@GiB} GiB"), ("wall", "{wall_s:.1f@ms} ms"),
               ("target < {target_s:g} s", "{wall_s:<{target_s}?met|NOT met}")]  # fmt: skip
    rows = [{"task": "a", "peak_rss_bytes": 3 * 2**30, "wall_s": np.float64(0.25)},
            {"task": "b", "peak_rss_bytes": 2**29, "wall_s": 2.0}, {"task": "c", "peak_rss_bytes": None,
            "wall_s": float("nan")}]  # fmt: skip
    path = _common.write_table("bench_x", columns, rows, values={"target_s": 1.0}, note="Target {target_s:g} s.")
    text = path.read_text()
    assert "| task | peak | wall | target < 1 s |" in text
    assert re.search(r"\nTarget 1 s\. Load average [0-9.]+ at the start, [0-9.]+ at the end, on \d+ CPUs\.\n", text)
    assert "| a | 3.00 GiB | 250.0 ms | met |" in text and "| b | 0.50 GiB | 2000.0 ms | NOT met |" in text
    assert "| c | - | - | - |" in text, "not measured (null, NaN): '-'"
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("<sub>Source benchmark: `python benchmarks/bench_x.py --quick --models 'a b'`, commit ")
    assert "config " not in last and last.endswith("CPUs).</sub>")
    data = json.loads(path.with_suffix(".json").read_text())
    assert data["rows"][0] == {"task": "a", "peak_rss_bytes": 3 * 2**30, "wall_s": 0.25}
    assert data["rows"][2]["wall_s"] is None and data["values"]["target_s"] == 1.0
    assert set(data["values"]) == {"target_s", "load_start", "load_end", "cpus"}
    assert benchmark_table(data) == text
    data["rows"][1]["wall_s"] = 0.5  # an edited number changes the table, its verdict included
    assert "| b | 0.50 GiB | 500.0 ms | met |" in benchmark_table(data)
    assert _common.command([], "bench_y.py") == "python benchmarks/bench_y.py"
    with pytest.raises(TypeError, match="number, boolean, label or null"):
        _common.write_table("bench_x", columns, [{"task": object()}])


def test_a_ratio_is_stored_as_its_numbers_and_rendered_as_printed():
    r = {"median": 1.02, "low": 0.99, "high": 1.07, "pairs": 3}
    from san.report.benchmark_tables import BenchmarkCells

    cell = BenchmarkCells().cell(_common.ratio_template("evaluation"), _common.ratio_fields("evaluation", r))
    assert cell == _common.ratio_cell(r) == "1.02 (0.99-1.07, 3 pairs)"


def test_a_cell_that_cannot_be_rendered_from_its_data_is_an_error_naming_it():
    """verify reports these (san.report.readme.verify catches KeyError and ValueError): a field the row lacks, a unit
    or a choice that the cell language does not know, a text where a number is compared."""
    from san.report.benchmark_tables import BenchmarkCells

    cells = BenchmarkCells()
    with pytest.raises(KeyError, match="reads 'wall_s'"):
        cells.cell("{wall_s:.1f} s", {"peak": 1})
    with pytest.raises(ValueError, match="unknown unit '@GB'"):
        cells.cell("{peak:.1f@GB}", {"peak": 1})
    with pytest.raises(ValueError, match="neither"):
        cells.cell("{ratio:?met}", {"ratio": 1.0})
    with pytest.raises(ValueError, match="neither"):
        cells.cell("{ratio:?yes|no}", {"ratio": 1.0})  # a number needs a bound
    with pytest.raises(ValueError):
        cells.cell("{label:<1?yes|no}", {"label": "a"})
    assert cells.cell("{ratio:>=1.5?met|NOT met}", {"ratio": 1.5}) == "met"
    assert cells.cell("{ratio:>1.5?met|NOT met}", {"ratio": 1.5}) == "NOT met"
    assert cells.cell("{t:.0f@min} min", {"t": 3000.0}) == "50 min"
