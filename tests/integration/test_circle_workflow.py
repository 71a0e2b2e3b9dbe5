"""End to end: the circle rules (the paper's Fig. 3) on a tiny config, in a copy of the workflow."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
import torch

from san.circle.experiment import Variant, run_circle
from san.core.storage import read_netcdf

from helpers import built_workflow, tiny_config, write_config
from helpers import planned_jobs as dry_run_jobs

VARIANTS = ["SAN", "transformer"]  # one without, one with MLP and skips
DIMS, SEEDS = [4], [0, 1]


def circle_targets(cfg: dict) -> list[str]:
    exts = cfg["figures"]["formats"]
    stems = ("circle", "circle_distance", "circle_loss")
    return ["results/circle.nc", "results/tables/circle_collapse.csv"] + [
        f"results/figures/{s}.{e}" for s in stems for e in exts
    ]


def tiny(default: dict) -> dict:
    """The tiny config with two seeds in one job (the job trains them one after the other)."""
    cfg = tiny_config(default)
    c = cfg["circle"]
    assert list(c["variants"]) == VARIANTS
    c.update(hidden_dims=DIMS, seeds=SEEDS, seeds_per_job=2)
    c["data"]["n_points"] = 16
    return cfg


@pytest.fixture(scope="module")
def run(tmp_path_factory, default_config):
    cfg = tiny(default_config)
    return built_workflow(tmp_path_factory.mktemp("circle") / "wf", cfg, circle_targets(cfg)), cfg


def planned_jobs(wf, cfg) -> dict[str, int]:
    return dry_run_jobs(wf, *circle_targets(cfg))


def test_outputs_labels_and_provenance(run):
    wf, cfg = run
    for t in circle_targets(cfg):
        assert (wf / t).is_file() and (wf / t).stat().st_size > 0, t
    ds = read_netcdf(wf / "results/circle.nc")
    assert ds["trajectory"].dims == ("variant", "hidden_dim", "seed", "step", "token", "coord")
    assert ds["trajectory"].shape == (2, 1, 2, 11, 2, 2)
    assert ds["token_distance"].dims == ("variant", "hidden_dim", "seed", "step")
    assert ds["centre_distance"].dims == ("variant", "hidden_dim", "seed", "step", "token")
    assert ds["loss"].dims == ("variant", "hidden_dim", "seed", "epoch") and ds.sizes["epoch"] == 2
    assert list(ds.variant.values) == VARIANTS and list(ds.seed.values) == SEEDS
    assert "description" in ds["token_distance"].attrs
    for key in ("config", "package_versions", "git_commit", "device", "train_seconds"):
        assert key in ds.attrs, key
    assert json.loads(ds.attrs["config"])["train"]["lr"] == cfg["circle"]["train"]["lr"]
    for v in VARIANTS:  # one job trains both seeds
        run_file = wf / f"results/circle/{v}/d4/seeds0_1.nc"
        assert list(read_netcdf(run_file)["seed"].values) == SEEDS
        assert (wf / f"logs/circle_train/{v}/d4/seeds0_1.log").is_file()
        assert (wf / f"results/benchmarks/circle_train/{v}/d4/seeds0_1.tsv").is_file()
    table = pd.read_csv(wf / "results/tables/circle_collapse.csv")
    assert list(table["variant"]) == VARIANTS and set(table["n_collapsed"]) <= {0, 1, 2}
    assert {"dist_5_mean", "dist_10_mean", "dist_10_std"} <= set(table.columns)


def test_job_result_equals_the_library_call(run):
    """The rule passes its config slice through unchanged: the job's numbers are those of a direct call of one seed
    (seed 1, trained after seed 0 in the same job)."""
    wf, cfg = run
    c = cfg["circle"]
    torch.set_num_threads(1)
    ds = read_netcdf(wf / "results/circle.nc")
    direct = run_circle(
        Variant.from_config(c["variants"]["transformer"]),
        4,
        1,
        n_points=16,
        radius=c["data"]["radius"],
        n_heads=c["model"]["n_heads"],
        init_std=c["model"]["init_std"],
        mlp_ratio=c["model"]["mlp_ratio"],
        ln_eps=c["model"]["ln_eps"],
        epochs=2,
        batch_size=4,
        lr=c["train"]["lr"],
        train_dtype=torch.float32,
        steps=10,
        rollout_dtype=torch.float64,
    )
    got = ds["trajectory"].sel(variant="transformer", hidden_dim=4, seed=1).values
    assert np.array_equal(got, direct["trajectory"].values)


def test_config_edits_rerun_only_what_they_touch(run):
    wf, cfg = run
    assert planned_jobs(wf, cfg) == {}
    edits = {
        # the table's steps: only the table
        "report": (lambda c: c["circle"]["report"].update(steps=[3, 10]), {"circle_table": 1}),
        # the MLP width: only the runs with an MLP, and what gathers them
        "mlp_ratio": (
            lambda c: c["circle"]["model"].update(mlp_ratio=2.0),
            {
                "circle_train": 1,  # one job trains both seeds of the MLP variant
                "circle_gather": 1,
                "circle_table": 1,
                "circle": 1,
                "circle_distance": 1,
                "circle_loss": 1,
            },
        ),
        # figure styling: only the figures
        "dpi": (
            lambda c: c["figures"].update(dpi=31),
            {"circle": 1, "circle_distance": 1, "circle_loss": 1},
        ),
    }
    for name, (edit, expected) in edits.items():
        edited = copy.deepcopy(cfg)
        edit(edited)
        write_config(wf, edited)
        try:
            jobs = planned_jobs(wf, edited)
        finally:
            write_config(wf, cfg)
        jobs.pop("all", None)
        assert jobs == expected, name
