"""Path effectiveness (the paper's Fig. 4): train one task's SAN, and evaluate it with sampled paths of each length.

:func:`train` builds the data of every seed of a task and their SAN (one network stacked on a seed axis) from the
task's config slice and trains it, so the library alone reproduces a training job (:func:`write_training` writes its
outputs); :func:`run` evaluates the trained network of every seed on its own evaluation set with sets of sampled
paths of every length (the authors' protocol, :mod:`san.paths.evaluate`) and returns Fig. 4's data.
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

from san.core.storage import describe
from san.paths.evaluate import evaluate_path_sets, model_accuracy, prefix_tree, sample_path_sets
from san.paths.model import SAN
from san.paths.results import VARIABLES
from san.paths.spec import PAD, SKIP, path_counts, path_length_shares
from san.paths.tasks import Task, TaskData, chance_accuracy, make_task
from san.paths.training import Checkpoint, TrainResult, training_key
from san.paths.training import train as fit


@dataclass
class TrainedTask:
    """The trained SAN of a task's seeds, their tasks (data and model config, one per seed), the training's record."""

    model: SAN
    tasks: list[Task]
    seeds: list[int]
    result: TrainResult


def seed_tasks(task_cfg: Mapping[str, Any], tokenizer: Any = None) -> list[Task]:
    """The task (data and architecture) of every seed in ``task_cfg["seeds"]``: a seed draws its own data."""
    return [make_task(task_cfg["task"], {**task_cfg, "seed": s}, tokenizer) for s in task_cfg["seeds"]]


def train(
    task_cfg: Mapping[str, Any],
    device: torch.device | str = "cpu",
    on_epoch: Callable[[int, list[float], float, float], None] | None = None,
    checkpoint: Checkpoint | None = None,
) -> TrainedTask:
    """Build the data and the SAN of one task's seeds from its config slice (:func:`san.paths.spec.task_slices`) and
    train them as one stacked network (:func:`san.paths.training.train`; each seed drives its data,
    initialisation, batch order and dropout). ``checkpoint``: see :class:`~san.paths.training.Checkpoint`."""
    tasks, seeds = seed_tasks(task_cfg), list(task_cfg["seeds"])
    if len({t.model_config for t in tasks}) != 1:
        raise ValueError(f"the seeds {seeds} of task {task_cfg['task']!r} draw data of different architectures")
    model = SAN(tasks[0].model_config, seeds)
    if checkpoint is not None and not checkpoint.key:
        checkpoint.key = training_key(task_cfg, device)
    result = fit(model, [t.train for t in tasks], task_cfg["train"], device, on_epoch, checkpoint)
    return TrainedTask(model, tasks, seeds, result)


def write_training(
    trained: TrainedTask, task_cfg: Mapping[str, Any], device: torch.device | str, outputs: Mapping[str, str]
) -> None:
    """A training job's ``train_log`` (TSV: loss, learning rate, seconds per epoch and seed), ``data`` (npz: every
    seed's splits) and ``model`` (:meth:`SAN.save`; task, config, data records, device, training time)."""
    result = trained.result
    rows = [
        (epoch, seed, loss[i], result.lr[epoch], result.seconds[epoch])
        for epoch, loss in enumerate(result.loss)
        for i, seed in enumerate(trained.seeds)
    ]
    pd.DataFrame(rows, columns=["epoch", "seed", "loss", "lr", "seconds"]).to_csv(
        outputs["train_log"], sep="\t", index=False, float_format="%.8g"
    )
    arrays = {}
    for seed, task in zip(trained.seeds, trained.tasks, strict=True):
        arrays |= task.train.to_numpy(f"seed{seed}_train") | task.eval.to_numpy(f"seed{seed}_eval")
    np.savez(outputs["data"], **arrays)
    trained.model.save(
        outputs["model"],
        metadata={
            "task": task_cfg["task"],
            "config": json.dumps(task_cfg, sort_keys=True),
            "data": json.dumps({str(s): t.info for s, t in zip(trained.seeds, trained.tasks, strict=True)}),
            "device": str(device),
            "train_seconds": f"{result.total_seconds:.3f}",
        },
    )


def seed_data(arrays: Mapping[str, Any], seeds: list[int]) -> tuple[list[TaskData], list[TaskData]]:
    """Every seed's training and evaluation split from the ``data.npz`` arrays of a training job."""
    return (
        [TaskData.from_numpy(arrays, f"seed{s}_train") for s in seeds],
        [TaskData.from_numpy(arrays, f"seed{s}_eval") for s in seeds],
    )


def stack_data(data: list[TaskData]) -> TaskData:
    """Every seed's split stacked on a leading seed dimension (all of one shape; mask: all or none)."""
    if len({(d.inputs.shape, d.mask is None) for d in data}) != 1:
        raise ValueError("the seeds' evaluation sets differ in shape or padding; a SAN evaluates its seeds together")
    mask = None if data[0].mask is None else torch.stack([d.mask for d in data])
    return TaskData(torch.stack([d.inputs for d in data]), torch.stack([d.labels for d in data]), mask)


def _log_sets(log: Any, sets: np.ndarray, n_heads: int) -> None:
    real = sets[..., 0] != PAD
    tree = prefix_tree(torch.as_tensor(sets[real]), n_heads)
    log.info(
        "%d paths in %d sets; %d single-head evaluations per input after prefix sharing (%d without)",
        int(real.sum()),
        real[..., 0].size,
        tree.n_head_evaluations,
        int((sets[real] != SKIP).sum()),
    )


def run(
    model: SAN,
    seeds: list[int],
    trains: list[TaskData],
    evs: list[TaskData],
    evaluation: Mapping[str, Any],
    train_log: pd.DataFrame,
    log: Any = None,
) -> xr.Dataset:
    """Fig. 4's data for one trained task, every seed: the accuracy of sets of ``n_paths`` sampled paths of each
    length (all repeats; the same sets for every seed), the full model's accuracy, the input-blind chance level, the
    sampled paths, the share and count of paths of each length and the training curves. ``evaluation`` is the
    ``paths.evaluation`` config slice; the time of the path evaluation goes into the ``eval_seconds`` attribute."""
    cfg = model.cfg
    sets = sample_path_sets(
        cfg.n_layers, cfg.n_heads, evaluation["n_paths"], evaluation["n_repeats"], evaluation["seed"]
    )
    chance = np.array([chance_accuracy(t.labels, ev.labels, cfg.n_classes) for t, ev in zip(trains, evs, strict=True)])
    if log is not None:
        _log_sets(log, sets, cfg.n_heads)
    t0 = time.perf_counter()
    ev = stack_data(evs)
    full = model_accuracy(model, ev.inputs, ev.labels, ev.mask)
    acc = evaluate_path_sets(model, ev.inputs, ev.labels, ev.mask, sets, evaluation["memory_mb"]).numpy()
    eval_seconds = time.perf_counter() - t0
    if log is not None:
        log.info("full model accuracy by seed %s, chance %s", np.round(full, 4).tolist(), np.round(chance, 4).tolist())
        log.info("path evaluation of %d seed(s) in %.1f s", len(seeds), eval_seconds)
        for i, n in enumerate(evaluation["n_paths"]):
            log.info("n_paths=%d: mean accuracy by path length %s", n, np.round(acc[:, i].mean((0, -1)), 4).tolist())
    ds = _dataset(cfg, seeds, evaluation, sets, acc, full, chance, train_log)
    ds.attrs.update(eval_seconds=eval_seconds, n_eval_inputs=len(evs[0]), n_eval_tokens=int((evs[0].labels >= 0).sum()))
    return ds


def _dataset(
    cfg: Any,
    seeds: list[int],
    evaluation: Mapping[str, Any],
    sets: np.ndarray,
    acc: np.ndarray,
    full: np.ndarray,
    chance: np.ndarray,
    train_log: pd.DataFrame,
) -> xr.Dataset:
    """The results of :func:`run` as a dataset over ``seed``, ``n_paths``, ``path_length``, ``repeat``, ``epoch``."""
    losses = train_log.pivot(index="epoch", columns="seed", values="loss")[list(seeds)]
    lr = train_log.groupby("epoch")["lr"].first()
    ds = xr.Dataset(
        {
            "accuracy": (("seed", "n_paths", "path_length", "repeat"), acc),
            "full_model_accuracy": (("seed",), full),
            "chance_accuracy": (("seed",), chance),
            "paths": (("n_paths", "path_length", "repeat", "path", "layer"), sets.astype(np.int16)),
            "path_share": (("path_length",), path_length_shares(cfg.n_layers, cfg.n_heads)),
            "path_count": (("path_length",), np.asarray(path_counts(cfg.n_layers, cfg.n_heads), dtype=np.float64)),
            "train_loss": (("seed", "epoch"), losses.to_numpy().T),
            "train_lr": (("epoch",), lr.to_numpy()),
        },
        coords={
            "seed": list(seeds),
            "n_paths": list(evaluation["n_paths"]),
            "path_length": np.arange(cfg.n_layers + 1),
            "repeat": np.arange(evaluation["n_repeats"]),
            "epoch": lr.index.to_numpy(),
        },
        attrs={
            "title": "san: path effectiveness of one task (Dong et al. 2021, Fig. 4)",
            "model_config": json.dumps(cfg.to_dict(), sort_keys=True),
        },
    )
    describe(ds, VARIABLES)
    ds["paths"].attrs.update(flag_values=np.array([SKIP, PAD], dtype=np.int16), flag_meanings="skip no_path")
    return ds
