"""End to end: the path-effectiveness rules (the paper's Fig. 4) on a tiny config, in a copy of the workflow."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

from san.core.storage import read_netcdf
from san.paths.spec import PAD, SKIP, path_length_shares

from helpers import built_workflow, tiny_config, write_config
from helpers import planned_jobs as dry_run_jobs

TASKS = ["sorting", "convex_hull", "memorization", "sorting_10k"]  # the last: a task derived from sorting
KINDS = {"sorting_10k": "sorting"}
N_PATHS, REPEATS = [2, 3], 2


def tiny(default: dict) -> dict:
    """The tiny config with every task and a derived task listed."""
    cfg = tiny_config(default)
    cfg["paths"]["tasks"] = TASKS
    cfg["paths"]["derived_tasks"]["sorting_10k"].update(data={"n_train": 48}, train={"epochs": 2})
    assert cfg["paths"]["evaluation"]["n_paths"] == N_PATHS and cfg["paths"]["evaluation"]["n_repeats"] == REPEATS
    return cfg


def targets(cfg: dict) -> list[str]:
    exts = cfg["figures"]["formats"]
    out = [f"results/paths/{t}.nc" for t in TASKS] + [f"results/paths/{t}/model.safetensors" for t in TASKS]
    out += ["results/path_counts.nc", "results/paths/summary.csv"]
    return out + [f"results/figures/{s}.{e}" for s in ("path_effectiveness", "path_length_distribution") for e in exts]


@pytest.fixture(scope="module")
def run(tmp_path_factory, default_config):
    cfg = tiny(default_config)
    return built_workflow(tmp_path_factory.mktemp("paths") / "wf", cfg, targets(cfg)), cfg


def planned_jobs(wf, cfg) -> dict[str, int]:
    return dry_run_jobs(wf, *targets(cfg))


def test_outputs_exist(run):
    wf, cfg = run
    for t in targets(cfg):
        assert (wf / t).is_file() and (wf / t).stat().st_size > 0, t
    for task in TASKS:
        log = pd.read_csv(wf / f"results/paths/{task}/train_log.tsv", sep="\t")
        assert list(log.columns) == ["epoch", "loss", "lr", "seconds"] and len(log) == 2
        assert (wf / f"logs/paths_train/{task}.log").is_file()


@pytest.mark.parametrize("task", TASKS)
def test_task_results_layout_and_provenance(run, task):
    wf, cfg = run
    ds = read_netcdf(wf / f"results/paths/{task}.nc")
    assert ds["accuracy"].dims == ("n_paths", "path_length", "repeat")
    assert ds["accuracy"].shape == (len(N_PATHS), 3, REPEATS)
    assert ((ds["accuracy"] >= 0) & (ds["accuracy"] <= 1)).all()
    assert list(ds["n_paths"].values) == N_PATHS and list(ds["path_length"].values) == [0, 1, 2]
    for name in ("full_model_accuracy", "chance_accuracy"):
        assert ds[name].dims == () and 0 <= float(ds[name]) <= 1
    assert ds["train_loss"].dims == ("epoch",) and ds.sizes["epoch"] == 2
    paths = ds["paths"].values
    assert paths.shape == (len(N_PATHS), 3, REPEATS, max(N_PATHS), 2)
    real = paths[..., 0] != PAD
    assert (real.sum(-1) == np.array(N_PATHS)[:, None, None]).all()
    lengths = (paths != SKIP).sum(-1)
    assert (lengths[real] == np.broadcast_to(np.arange(3)[None, :, None, None], real.shape)[real]).all()
    np.testing.assert_allclose(ds["path_share"].values, path_length_shares(2, 2))
    for key in ("config", "package_versions", "git_commit", "seed", "device", "train_seconds", "eval_seconds"):
        assert key in ds.attrs, key
    recorded = json.loads(ds.attrs["config"])
    assert recorded["evaluation"]["n_repeats"] == REPEATS and recorded["task"]["task"] == KINDS.get(task, task)
    assert recorded["task"]["train"]["epochs"] == 2
    assert ds.attrs["task"] == task and ds.attrs["task_kind"] == KINDS.get(task, task)
    # length-0 sets are all identical paths, so every repeat (and set size) scores the same
    assert np.unique(ds["accuracy"].sel(path_length=0).values).size == 1


def test_memorisation_is_evaluated_on_its_training_sequences(run):
    wf, _ = run
    with np.load(wf / "results/paths/memorization/data.npz") as d:
        assert d["train_inputs"].shape == (6, 16)
        np.testing.assert_array_equal(d["train_inputs"], d["eval_inputs"])
        np.testing.assert_array_equal(d["train_labels"], d["eval_labels"])
    ds = read_netcdf(wf / "results/paths/memorization.nc")
    assert ds.attrs["n_eval_tokens"] == 6 * 16


def test_path_counts_cover_paper_config_and_tasks(run):
    wf, cfg = run
    ds = read_netcdf(wf / "results/path_counts.nc")
    names = list(ds["architecture"].values)
    assert "GPT-3" in names and "DeiT-T" in names
    for model in cfg["models"]:
        assert model in names
    # the tasks' SANs, one entry per architecture (all four tasks are L2 H2 here)
    assert "SAN (sorting, convex_hull, memorization, sorting_10k)" in names
    np.testing.assert_allclose(ds["share"].sum("path_length", skipna=True), 1.0)
    gpt3 = ds.sel(architecture="GPT-3")
    assert int(gpt3["n_layers"]) == 96 and int(gpt3["n_heads"]) == 96
    assert float(gpt3["mean_path_length"]) == pytest.approx(96 * 96 / 97)


def test_summary_table(run):
    wf, _ = run
    table = pd.read_csv(wf / "results/paths/summary.csv", index_col="task")
    assert list(table.index) == TASKS
    assert {"full_model", "chance", "acc_n2_k0", "acc_n3_k2"} <= set(table.columns)


def test_evaluation_settings_rerun_only_the_evaluation(run):
    wf, cfg = run
    assert planned_jobs(wf, cfg) == {}
    edited = copy.deepcopy(cfg)
    edited["paths"]["evaluation"]["n_repeats"] = REPEATS + 1
    write_config(wf, edited)
    try:
        jobs = planned_jobs(wf, edited)
    finally:
        write_config(wf, cfg)
    assert jobs.get("paths_evaluate") == len(TASKS) and "paths_train" not in jobs and "paths_counts" not in jobs


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # a task's setting reaches the tasks derived from it too
        (lambda p: p["sorting"]["train"].update(lr=1e-4), {"paths_train": 2, "paths_evaluate": 2}),
        # a derived task's own setting reruns only that task
        (
            lambda p: p["derived_tasks"]["sorting_10k"]["train"].update(epochs=3),
            {"paths_train": 1, "paths_evaluate": 1},
        ),
        # a panel title is the figure's concern only
        (
            lambda p: p["derived_tasks"]["sorting_10k"].update(title="Sorting, long"),
            {"paths_train": 0, "path_effectiveness": 1},
        ),
    ],
)
def test_task_and_derived_task_edits_rerun_what_they_touch(run, edit, expected):
    wf, cfg = run
    edited = copy.deepcopy(cfg)
    edit(edited["paths"])
    write_config(wf, edited)
    try:
        jobs = planned_jobs(wf, edited)
    finally:
        write_config(wf, cfg)
    for rule, count in expected.items():
        assert jobs.get(rule, 0) == count, jobs


def test_derived_task_trains_on_its_own_data_with_its_task_settings(run):
    wf, _ = run
    with np.load(wf / "results/paths/sorting_10k/data.npz") as d, np.load(wf / "results/paths/sorting/data.npz") as b:
        assert d["train_inputs"].shape == (48, 8) and b["train_inputs"].shape == (32, 8)
        np.testing.assert_array_equal(d["eval_inputs"], b["eval_inputs"])  # same seed and n_eval: same held-out set
        np.testing.assert_array_equal(np.sort(d["train_inputs"], -1), d["train_labels"])
