"""The run's config hash covers the circle's settings: the summary rule reads the circle's gathered result, whose
``config`` attribute is the circle's slice, beside its collapse table (which carries no config)."""

from __future__ import annotations

import copy
import re

import pandas as pd
import xarray as xr

from san import experiments
from san.core.storage import write_netcdf
from san.report.provenance import results_config_hash

from helpers import ROOT

CIRCLE_KEYS = ("variants", "data", "model", "train", "rollout")


def _circle_inputs(folder, circle: dict) -> list:
    """The circle's files of a summary job: the gathered result (written with its config slice, as the
    ``circle_gather`` rule writes it) and the collapse table."""
    result = write_netcdf(
        xr.Dataset(attrs={"title": "circle"}), folder / "circle.nc", {k: circle[k] for k in CIRCLE_KEYS}
    )
    table = folder / "tables" / "circle_collapse.csv"
    table.parent.mkdir(parents=True)
    pd.DataFrame({"variant": ["SAN"], "hidden_dim": [8], "n_seeds": [1], "n_collapsed": [1]}).to_csv(table)
    return [result, table]


def test_a_changed_circle_config_changes_the_runs_config_hash(tmp_path, default_config):
    circle = default_config["circle"]
    changed = copy.deepcopy(circle)
    changed["train"]["epochs"] += 1
    a = results_config_hash(_circle_inputs(tmp_path / "a", circle))
    a_again = results_config_hash(_circle_inputs(tmp_path / "a_again", circle))
    b = results_config_hash(_circle_inputs(tmp_path / "b", changed))
    assert a == a_again != b
    # the collapse table alone carries no config: it could not tell the two runs apart
    tables = [results_config_hash([tmp_path / r / "tables" / "circle_collapse.csv"]) for r in ("a", "b")]
    assert tables[0] == tables[1]


def test_the_circle_wings_summary_reads_the_circles_gathered_result():
    """The circle wing's summary job, whose netCDF inputs the hash reads, includes the circle's gathered result: the
    circle's rules file registers it among the summaries' inputs, and the circle wing names it among those it reads."""
    report = (ROOT / "workflow" / "rules" / "report.smk").read_text()
    rule = re.search(r"^rule wing_summary:\n(.*?)^\s+output:", report, re.S | re.M).group(1)
    assert "wing_inputs(w.wing, SUMMARY_INPUTS" in rule and "from san.experiments import WINGS, wing_inputs" in report
    circle = (ROOT / "workflow" / "rules" / "circle.smk").read_text()
    registered = re.search(r"^SUMMARY_INPUTS\.update\((.*?)\)$", circle, re.S | re.M).group(1)
    assert "circle_result=rules.circle_gather.output" in registered
    assert "circle_result" in experiments.named("circle").inputs
