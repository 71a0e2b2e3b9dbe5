"""The committed benchmark snapshots (docs/results/bench_*.json): each holds its measurements as numbers (bytes,
seconds, ratios; units in the keys), booleans, labels and nulls, and its table (bench_*.md) is the one rendered
from them, so that re-rendering a table checks its numbers."""

import json
import re

import pytest

from san.report.benchmark_tables import benchmark_table
from san.report.readme import SNAPSHOTS

from helpers import ROOT

DATA = sorted((ROOT / SNAPSHOTS).glob("bench_*.json"))
PRINTED_NUMBER = re.compile(r"^\s*[-+]?(\d|\.\d)")
"""A label that starts like a number ("3.42 GB", "84.8"): a measurement stored as its printed form."""


@pytest.mark.parametrize("path", DATA, ids=[p.stem for p in DATA])
def test_a_committed_benchmark_holds_numbers_and_its_table_is_rendered_from_them(path):
    data = json.loads(path.read_text())
    assert "columns" in data and "header" not in data, f"{path.name} holds its table's printed cells"
    for row in [*data["rows"], data.get("values") or {}]:
        assert isinstance(row, dict), f"{path.name}: a row is a mapping of measurements, not printed cells"
        printed = {k: v for k, v in row.items() if isinstance(v, str) and PRINTED_NUMBER.match(v)}
        assert not printed, f"{path.name} stores measurements as text: {printed}"
    assert benchmark_table(data) == path.with_suffix(".md").read_text()


def test_every_benchmark_snapshot_has_its_data():
    tables = sorted((ROOT / SNAPSHOTS).glob("bench_*.md"))
    assert tables and [t.with_suffix(".json") for t in tables] == DATA


def test_the_gpu_tolerance_table_covers_every_measure_of_the_gpu_jobs():
    """Every quantity that the jobs of the rules the default config lets use a GPU write (by the experiments' own
    lists of their measures) has a measured tolerance in the committed table, each variant of a per-variant one:
    a measure added to an experiment fails here until the table is measured again (python benchmarks/bench_gpu.py
    --tolerances, the command the table names)."""
    from san.propagation.experiment import MEASURES as PROPAGATION
    from san.rank_collapse.spec import METRICS, PLACEBO
    from san.rank_collapse.vision.experiment import MEASURES as VISION

    rank_collapse = {*METRICS, *PLACEBO, "first_token_attention"}
    expected = {
        "rank_collapse": rank_collapse,
        "rank_collapse_series": rank_collapse,
        "attention_products": {"rank1_residual", "uniformity_residual"},
        "propagation": {*PROPAGATION, "construction_ratio", "final_cosine"},
        "vision": {*VISION, "token_norm"},
    }
    tabled: dict[str, set[str]] = {}
    for row in json.loads((ROOT / SNAPSHOTS / "bench_gpu_tolerance.json").read_text())["rows"]:
        kind = row["result"].split("/")[1].removesuffix(".nc")
        tabled.setdefault(kind, set()).add(row["variable"].split("[")[0])
    missing = {kind: sorted(names - tabled.get(kind, set())) for kind, names in expected.items()}
    assert not any(missing.values()), f"measures without a measured tolerance: {missing}"
