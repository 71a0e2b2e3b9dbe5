"""Every near-miss control reads the data it tests: on the tiny run, each wing's claims judged again on a perturbed
copy of its own results (every float measure of every netCDF and CSV input multiplied by its own seeded noise of a
few per cent, coordinates, labels and integers kept) move the measured value of every scientific row's control. A
control whose value stays put is a constant or a placebo that does not depend on the data tested, and cannot stand
for power; the one exception is a count at its bound (:data:`BOUNDED`), which no small perturbation moves.

Rows the tiny run cannot judge (no pretrained weights, no large model) have no control value to move: the test lists
them and requires that the rows it checks include at least one of every wing that judges any."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from perturb import control_values, perturbed

from san import experiments
from san.report.claims import wing_summary

#: controls whose value is a count of runs that may sit at its bound on the tiny run, by row: the bounds
BOUNDED = {
    # the difference of the collapsed-run fractions (pure minus skip moved toward its early rate): on the tiny run's
    # one seed and 10 steps every run collapses under the control, 1, and stays so under any perturbation
    "circle.pure_collapses_more": (-1.0, 1.0),
}


@pytest.fixture(scope="module")
def wings(tiny_run: Path) -> dict[str, dict]:
    """Every wing summary of the tiny run (results/summary/<wing>.json), by wing."""
    folder = tiny_run / "results" / "summary"
    return {w.name: json.loads((folder / f"{w.name}.json").read_text()) for w in experiments.WINGS}


@pytest.mark.parametrize("wing", [w.name for w in experiments.WINGS])
def test_every_control_moves_with_the_data_it_tests(tiny_run: Path, wings: dict, wing: str, tmp_path: Path) -> None:
    record = wings[wing]
    before = control_values(record["sections"])
    if not before:
        pytest.skip(f"the tiny run judges no scientific row of wing {wing} with a control value")
    inputs = {key: [str(perturbed(tiny_run / f, tmp_path)) for f in files] for key, files in record["inputs"].items()}
    after = control_values(wing_summary(wing, inputs, record["params"]))
    assert set(after) == set(before), f"rows judged differently on the perturbed data: {set(after) ^ set(before)}"
    still = sorted(k for k in before if np.isclose(before[k], after[k], rtol=1e-9, atol=0)
                   and before[k] not in BOUNDED.get(k, ()))  # fmt: skip
    assert not still, f"controls that do not read the data they test (the same value on perturbed data): {still}"


def test_the_tiny_run_judges_rows_of_the_wings_with_controls(wings: dict) -> None:
    """The test above covers rows of most wings on the tiny run (a regression would leave it skipping)."""
    covered = [w for w, record in wings.items() if control_values(record["sections"])]
    assert len(covered) >= 5, covered
