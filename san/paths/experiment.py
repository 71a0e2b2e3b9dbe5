"""Path effectiveness (the paper's Fig. 4): train one task's SAN, and evaluate it with sampled paths of each length.

:func:`train` builds the task's data and SAN from its config slice, seeds the initialisation and trains it, so the
library alone reproduces a training job; :func:`run` evaluates the trained model on the task's evaluation set with
sets of sampled paths of every length (the authors' protocol, :mod:`san.paths.evaluate`) and returns Fig. 4's data.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
import xarray as xr

from san.paths.evaluate import evaluate_path_sets, model_accuracy, prefix_tree, sample_path_sets
from san.paths.model import SAN
from san.paths.spec import PAD, SKIP, path_counts, path_length_shares
from san.paths.tasks import Task, TaskData, chance_accuracy, make_task
from san.paths.training import TrainResult, train_model


@dataclass
class TrainedTask:
    """A trained SAN with its task (data and model config) and the training's record."""

    model: SAN
    task: Task
    result: TrainResult


def init_model(task: Task, seed: int) -> SAN:
    """The task's SAN at initialisation: torch's global generator seeded with the task's ``seed``, then built."""
    torch.manual_seed(seed)
    return SAN(task.model_config)


def train(
    task_cfg: Mapping[str, Any],
    device: torch.device | str = "cpu",
    on_epoch: Callable[[int, float, float, float], None] | None = None,
) -> TrainedTask:
    """Build the data and SAN of one task from its config slice (:func:`san.paths.spec.task_slices`) and train it
    at the config's settings (the seed drives the data, the initialisation, the batch order and dropout)."""
    task = make_task(task_cfg["task"], dict(task_cfg))
    model = init_model(task, task_cfg["seed"])
    result = train_model(model, task.train, task_cfg["train"], seed=task_cfg["seed"], device=device, on_epoch=on_epoch)
    return TrainedTask(model, task, result)


def run(
    model: SAN,
    train: TaskData,
    ev: TaskData,
    evaluation: Mapping[str, Any],
    train_log: pd.DataFrame,
    log: Any = None,
) -> xr.Dataset:
    """Fig. 4's data for one trained task: the accuracy of sets of ``n_paths`` sampled paths of each length (all
    repeats), the full model's accuracy, the input-blind chance level, the sampled paths, the share and count of
    paths of each length and the training curve. ``evaluation`` is the ``paths.evaluation`` config slice; the time
    of the path evaluation goes into the ``eval_seconds`` attribute."""
    cfg = model.cfg
    full = model_accuracy(model, ev.inputs, ev.labels, ev.mask)
    chance = chance_accuracy(train.labels, ev.labels, cfg.n_classes)
    sets = sample_path_sets(
        cfg.n_layers, cfg.n_heads, evaluation["n_paths"], evaluation["n_repeats"], evaluation["seed"]
    )
    real = sets[..., 0] != PAD
    tree = prefix_tree(torch.as_tensor(sets[real]), cfg.n_heads)
    if log is not None:
        log.info("full model accuracy %.4f, chance (input-blind positional mode) %.4f", full, chance)
        log.info(
            "%d paths in %d sets; %d single-head evaluations per input after prefix sharing (%d without)",
            int(real.sum()),
            real[..., 0].size,
            tree.n_head_evaluations,
            int((sets[real] != SKIP).sum()),
        )
    t0 = time.perf_counter()
    acc = evaluate_path_sets(model, ev.inputs, ev.labels, ev.mask, sets, evaluation["memory_mb"]).numpy()
    eval_seconds = time.perf_counter() - t0
    if log is not None:
        log.info("path evaluation in %.1f s", eval_seconds)
        for i, n in enumerate(evaluation["n_paths"]):
            log.info("n_paths=%d: mean accuracy by path length %s", n, np.round(acc[i].mean(-1), 4).tolist())
    n_layers = cfg.n_layers
    return xr.Dataset(
        {
            "accuracy": (
                ("n_paths", "path_length", "repeat"),
                acc,
                {"long_name": "token accuracy of the model restricted to a set of sampled paths", "units": "1"},
            ),
            "full_model_accuracy": (
                (),
                full,
                {"long_name": "token accuracy of the full model (all paths)", "units": "1"},
            ),
            "chance_accuracy": (
                (),
                chance,
                {
                    "long_name": "accuracy of the input-blind predictor: most frequent training label per position",
                    "units": "1",
                },
            ),
            "paths": (
                ("n_paths", "path_length", "repeat", "path", "layer"),
                sets.astype(np.int16),
                {
                    "long_name": "sampled paths: head index per layer",
                    "units": "1",
                    "flag_values": np.array([SKIP, PAD], dtype=np.int16),
                    "flag_meanings": "skip no_path",
                },
            ),
            "path_share": (
                ("path_length",),
                path_length_shares(n_layers, cfg.n_heads),
                {"long_name": "share of all paths that have this length, C(L,k) H^k / (H+1)^L", "units": "1"},
            ),
            "path_count": (
                ("path_length",),
                np.asarray(path_counts(n_layers, cfg.n_heads), dtype=np.float64),
                {"long_name": "number of paths of this length, C(L,k) H^k", "units": "1"},
            ),
            "train_loss": (
                ("epoch",),
                train_log["loss"].to_numpy(),
                {"long_name": "mean training loss of the epoch", "units": "1"},
            ),
            "train_lr": (
                ("epoch",),
                train_log["lr"].to_numpy(),
                {"long_name": "learning rate of the epoch", "units": "1"},
            ),
        },
        coords={
            "n_paths": ("n_paths", list(evaluation["n_paths"]), {"long_name": "paths per evaluated set", "units": "1"}),
            "path_length": (
                "path_length",
                np.arange(n_layers + 1),
                {"long_name": "layers where a path takes a head", "units": "1"},
            ),
            "repeat": (
                "repeat",
                np.arange(evaluation["n_repeats"]),
                {"long_name": "independent sample of the set", "units": "1"},
            ),
            "epoch": ("epoch", train_log["epoch"].to_numpy(), {"long_name": "training epoch", "units": "1"}),
        },
        attrs={
            "title": "san: path effectiveness of one task (Dong et al. 2021, Fig. 4)",
            "model_config": json.dumps(cfg.to_dict(), sort_keys=True),
            "eval_seconds": eval_seconds,
            "n_eval_inputs": len(ev),
            "n_eval_tokens": int((ev.labels >= 0).sum()),
        },
    )
