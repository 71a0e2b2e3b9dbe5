"""A job's params depend on the config's values, never on the order in which a config file wrote its keys: Snakemake
compares params by their text, so an overlay (``--configfile``) that restates config.yaml's values in another order
must rerun nothing (``san.core.config.ordered_like``, applied to the whole config in workflow/rules/common.smk)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from helpers import copy_workflow, job_params, reversed_keys, write_config


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the workflow for the module's overlays (each test writes its own overlay file)."""
    return copy_workflow(tmp_path_factory.mktemp("canonical") / "wf")


@pytest.fixture(scope="module")
def plain(workflow_copy: Path) -> dict[str, list[str]]:
    """Every job's params with config.yaml alone."""
    return job_params(workflow_copy)


def test_an_overlay_in_reverse_key_order_leaves_every_jobs_params_unchanged(workflow_copy, plain, default_config):
    """Every mapping of config.yaml restated in reverse order (models, sweeps and grids, list items included): every
    job of the default workflow gets exactly the params it gets without the overlay."""
    overlay = write_config(workflow_copy, reversed_keys(default_config), "reversed.yaml")
    assert list(yaml.safe_load(overlay.read_text())) == list(reversed(list(default_config)))
    laid_over = job_params(workflow_copy, overlay)
    assert {j.split("[")[0] for j in plain} >= {"acquire_model", "paths_train", "propagation_sweep", "summary"}
    changed = sorted(j for j in plain if laid_over.get(j) != plain[j])
    assert set(laid_over) == set(plain) and not changed, f"params depend on key order: {changed[:5]}"


def test_an_overlay_that_changes_one_value_changes_the_params_of_its_jobs_only(workflow_copy, plain, default_config):
    """The control of the test above: the same reversed overlay with one value changed changes the params of exactly
    the jobs that read it (here the circle's training epochs: every circle_train job and the gather)."""
    changed_config = reversed_keys(default_config)
    changed_config["circle"]["train"]["epochs"] += 1
    overlay = write_config(workflow_copy, changed_config, "changed.yaml")
    laid_over = job_params(workflow_copy, overlay)
    changed = {j.split("[")[0] for j in plain if laid_over[j] != plain[j]}
    assert changed == {"circle_train", "circle_gather"}
