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
SEEDS = {"sorting": [0, 1], "convex_hull": [0, 1], "memorization": [42], "sorting_10k": [0, 1]}  # the tiny config's


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
        assert list(log.columns) == ["epoch", "seed", "loss", "lr", "seconds"] and len(log) == 2 * len(SEEDS[task])
        assert (wf / f"logs/paths_train/{task}.log").is_file()
        assert not (wf / f"results/checkpoints/paths_train/{task}.pt").exists()  # removed with the outputs written


@pytest.mark.parametrize("task", TASKS)
def test_task_results_layout_and_provenance(run, task):
    wf, cfg = run
    ds = read_netcdf(wf / f"results/paths/{task}.nc")
    n_seeds = len(SEEDS[task])
    assert ds["accuracy"].dims == ("seed", "n_paths", "path_length", "repeat")
    assert ds["accuracy"].shape == (n_seeds, len(N_PATHS), 3, REPEATS) and list(ds["seed"].values) == SEEDS[task]
    assert ((ds["accuracy"] >= 0) & (ds["accuracy"] <= 1)).all()
    assert list(ds["n_paths"].values) == N_PATHS and list(ds["path_length"].values) == [0, 1, 2]
    for name in ("full_model_accuracy", "chance_accuracy"):
        assert ds[name].dims == ("seed",) and ((ds[name] >= 0) & (ds[name] <= 1)).all()
    assert ds["train_loss"].dims == ("seed", "epoch") and ds.sizes["epoch"] == 2
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
    # length-0 sets are all identical paths, so every repeat (and set size) of a seed scores the same
    for seed in ds["seed"].values:
        assert np.unique(ds["accuracy"].sel(seed=seed, path_length=0).values).size == 1


def test_memorisation_is_evaluated_on_its_training_sequences(run):
    wf, _ = run
    with np.load(wf / "results/paths/memorization/data.npz") as d:
        assert d["seed42_train_inputs"].shape == (6, 16)
        np.testing.assert_array_equal(d["seed42_train_inputs"], d["seed42_eval_inputs"])
        np.testing.assert_array_equal(d["seed42_train_labels"], d["seed42_eval_labels"])
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
        assert d["seed0_train_inputs"].shape == (48, 8) and b["seed0_train_inputs"].shape == (32, 8)
        # same seed and n_eval: same held-out set; another seed: another set
        np.testing.assert_array_equal(d["seed1_eval_inputs"], b["seed1_eval_inputs"])
        assert not np.array_equal(b["seed0_eval_inputs"], b["seed1_eval_inputs"])
        np.testing.assert_array_equal(np.sort(d["seed0_train_inputs"], -1), d["seed0_train_labels"])


KILL_SCRIPT = """
import sys, torch
from pathlib import Path
from san.paths.experiment import train
from san.paths.training import Checkpoint
torch.set_num_threads(1)
cfg = eval(sys.argv[1])
train(cfg, checkpoint=Checkpoint(Path(sys.argv[2]), 0.0, "kill-test"))
"""


def test_a_killed_training_resumes_to_the_uninterrupted_result(tmp_path):
    """A training process killed (SIGKILL) mid-run leaves its last checkpoint; a rerun resumes from it and ends
    bit-identical to a run that was never interrupted."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import torch

    from san.paths.experiment import train
    from san.paths.training import Checkpoint

    cfg = {
        "task": "sorting",
        "seeds": [0, 1],
        "data": {"seq_len": 6, "vocab_size": 5, "n_train": 24, "n_eval": 8},
        "model": {"n_layers": 2, "n_heads": 2, "dim": 8, "dropout": 0.1},
        "train": {"epochs": 200, "batch_size": 8, "optimizer": "adam", "lr": 1e-3, "betas": [0.9, 0.999],
                  "eps": 1e-8, "weight_decay": 0.0, "schedule": {"kind": "constant"}, "max_grad_norm": 1.0,
                  "shuffle": True, "compile": False, "fused": True},
    }  # fmt: skip
    path = tmp_path / "ckpt.pt"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, repr(cfg), str(path)], env=env)
    deadline = time.monotonic() + 120
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ckpt = Checkpoint(path, 0.0, "kill-test")
    state = ckpt.load()
    assert state is not None and 0 < state["epoch"] < cfg["train"]["epochs"], "the kill must land mid-run"
    torch.set_num_threads(1)
    resumed = train(cfg, checkpoint=ckpt)
    whole = train(cfg)
    assert resumed.result.loss == whole.result.loss
    pairs = zip(whole.model.state_dict().values(), resumed.model.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in pairs)
