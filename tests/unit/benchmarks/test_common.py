"""benchmarks/_common.py: ratios measured in alternating order with their spread, tables that name their run and
keep their targets' met / not-met column."""

import sys

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


def test_a_benchmark_table_names_its_command_and_keeps_its_targets(tmp_path, monkeypatch):
    """The table ends with the line naming the command that wrote it (as typed from the checkout's root), not a
    hash of its arguments, and is rendered from the data written beside it, which publish and verify read."""
    import json

    from san.report.readme import benchmark_table

    monkeypatch.setattr(_common, "OUT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["/somewhere/benchmarks/bench_x.py", "--quick", "--models", "a b"])
    path = _common.write_table("bench_x", ["task", "target"], [["a", _common.met(True)], ["b", _common.met(False)]])
    text = path.read_text()
    assert "| a | met |" in text and "| b | NOT met |" in text and _common.met(None) == "-"
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("<sub>Source benchmark: `python benchmarks/bench_x.py --quick --models 'a b'`, commit ")
    assert "config " not in last and last.endswith("CPUs).</sub>")
    data = json.loads(path.with_suffix(".json").read_text())
    assert data["rows"] == [["a", "met"], ["b", "NOT met"]] and benchmark_table(data) == text
    assert _common.command([], "bench_y.py") == "python benchmarks/bench_y.py"
