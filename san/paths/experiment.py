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

from san.core.storage import describe
from san.paths.ensemble import EnsembleSAN
from san.paths.evaluate import (
    evaluate_path_sets,
    evaluate_seed_path_sets,
    model_accuracy,
    prefix_tree,
    sample_path_sets,
)
from san.paths.model import SAN
from san.paths.results import VARIABLES
from san.paths.spec import PAD, SKIP, path_counts, path_length_shares
from san.paths.tasks import Task, TaskData, chance_accuracy, make_task
from san.paths.training import Checkpoint, TrainResult, train_ensemble, train_model


@dataclass
class TrainedTask:
    """The trained SANs of a task's seeds with their tasks (data and model config, one per seed) and the
    training's record."""

    models: list[SAN]
    tasks: list[Task]
    seeds: list[int]
    result: TrainResult


def init_model(task: Task, seed: int) -> SAN:
    """The task's SAN at initialisation: torch's global generator seeded with the task's ``seed``, then built."""
    torch.manual_seed(seed)
    return SAN(task.model_config)


def seed_tasks(task_cfg: Mapping[str, Any], tokenizer: Any = None) -> list[Task]:
    """The task (data and architecture) of every seed in ``task_cfg["seeds"]``: a seed draws its own data."""
    return [make_task(task_cfg["task"], {**task_cfg, "seed": s}, tokenizer) for s in task_cfg["seeds"]]


def _train_one_by_one(
    tasks: list[Task], task_cfg: Mapping[str, Any], device: torch.device | str, on_epoch: Any
) -> tuple[list[SAN], TrainResult]:
    """Seeds trained one after the other (``fused: false`` or ``compile: true``: the autograd formulation has no
    seed dimension); the record's per-seed losses and summed seconds merged."""
    models, merged = [], TrainResult()
    for i, (task, seed) in enumerate(zip(tasks, task_cfg["seeds"], strict=True)):
        models.append(init_model(task, seed))
        result = train_model(models[-1], task.train, task_cfg["train"], seed=seed, device=device)
        merged.setup_seconds += result.setup_seconds
        for e, (loss, lr, sec) in enumerate(zip(result.loss, result.lr, result.seconds, strict=True)):
            if i == 0:
                merged.record(loss, lr, sec)
            else:
                merged.loss[e] += loss
                merged.seconds[e] += sec
    if on_epoch is not None:
        for e, (loss, lr, sec) in enumerate(zip(merged.loss, merged.lr, merged.seconds, strict=True)):
            on_epoch(e, loss, lr, sec)
    return models, merged


def train(
    task_cfg: Mapping[str, Any],
    device: torch.device | str = "cpu",
    on_epoch: Callable[[int, list[float], float, float], None] | None = None,
    checkpoint: Checkpoint | None = None,
) -> TrainedTask:
    """Build the data and SANs of one task's seeds from its config slice (:func:`san.paths.spec.task_slices`) and
    train them (each seed drives its data, initialisation, batch order and dropout).

    One seed: :func:`~san.paths.training.train_model`. Several seeds: one :class:`~san.paths.ensemble.EnsembleSAN`
    trained in one batched run (:func:`~san.paths.training.train_ensemble`), each seed's initialisation, data, batch
    order and dropout those of its single-seed run; with ``fused: false`` or ``compile: true`` one after the other
    (no checkpoint then). ``checkpoint``: see :class:`~san.paths.training.Checkpoint`.
    """
    tasks, seeds, tcfg = seed_tasks(task_cfg), list(task_cfg["seeds"]), task_cfg["train"]
    if len(seeds) == 1:
        model = init_model(tasks[0], seeds[0])
        result = train_model(model, tasks[0].train, tcfg, seeds[0], device, on_epoch, checkpoint)
        return TrainedTask([model], tasks, seeds, result)
    if not tcfg.get("fused", True) or tcfg.get("compile"):
        models, result = _train_one_by_one(tasks, task_cfg, device, on_epoch)
        return TrainedTask(models, tasks, seeds, result)
    ensemble = EnsembleSAN(tasks[0].model_config, seeds)
    result = train_ensemble(ensemble, [t.train for t in tasks], tcfg, device, on_epoch, checkpoint)
    return TrainedTask([ensemble.member(i) for i in range(len(seeds))], tasks, seeds, result)


def seed_data(arrays: Mapping[str, Any], seeds: list[int]) -> tuple[list[TaskData], list[TaskData]]:
    """Every seed's training and evaluation split from the ``data.npz`` arrays of a training job."""
    return (
        [TaskData.from_numpy(arrays, f"seed{s}_train") for s in seeds],
        [TaskData.from_numpy(arrays, f"seed{s}_eval") for s in seeds],
    )


def _evaluate_seeds(
    models: list[SAN], evs: list[TaskData], sets: np.ndarray, memory_mb: float
) -> tuple[np.ndarray, np.ndarray]:
    """Full-model accuracy ``(seed,)`` and path-set accuracy ``(seed, n_paths, path_length, repeat)`` of every
    seed's model on its own evaluation set, with the same path sets: all seeds in one batched evaluation
    (:func:`~san.paths.evaluate.evaluate_seed_path_sets`) when there are several of one shape, else seed by seed
    (the same numbers either way)."""
    full = np.array([model_accuracy(m, ev.inputs, ev.labels, ev.mask) for m, ev in zip(models, evs, strict=True)])
    if len(evs) > 1 and len({(ev.inputs.shape, ev.mask is None) for ev in evs}) == 1:
        mask = None if evs[0].mask is None else torch.stack([ev.mask for ev in evs])
        inputs, labels = torch.stack([ev.inputs for ev in evs]), torch.stack([ev.labels for ev in evs])
        return full, evaluate_seed_path_sets(models, inputs, labels, mask, sets, memory_mb).numpy()
    pairs = zip(models, evs, strict=True)
    return full, np.stack(
        [evaluate_path_sets(m, ev.inputs, ev.labels, ev.mask, sets, memory_mb).numpy() for m, ev in pairs]
    )


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
    models: list[SAN],
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
    cfg = models[0].cfg
    sets = sample_path_sets(
        cfg.n_layers, cfg.n_heads, evaluation["n_paths"], evaluation["n_repeats"], evaluation["seed"]
    )
    chance = np.array([chance_accuracy(t.labels, ev.labels, cfg.n_classes) for t, ev in zip(trains, evs, strict=True)])
    if log is not None:
        _log_sets(log, sets, cfg.n_heads)
    t0 = time.perf_counter()
    full, acc = _evaluate_seeds(models, evs, sets, evaluation["memory_mb"])
    eval_seconds = time.perf_counter() - t0
    if log is not None:
        log.info("full model accuracy by seed %s, chance %s", np.round(full, 4).tolist(), np.round(chance, 4).tolist())
        log.info("path evaluation of %d seed(s) in %.1f s", len(models), eval_seconds)
        for i, n in enumerate(evaluation["n_paths"]):
            log.info("n_paths=%d: mean accuracy by path length %s", n, np.round(acc[:, i].mean((0, -1)), 4).tolist())
    ds = _dataset(cfg, seeds, evaluation, sets, acc, full, chance, train_log)
    ds.attrs.update(eval_seconds=eval_seconds, n_eval_inputs=len(evs[0]), n_eval_tokens=int((evs[0].labels >= 0).sum()))
    return ds


def _coords(cfg: Any, seeds: list[int], evaluation: Mapping[str, Any], epochs: np.ndarray) -> dict[str, Any]:
    return {
        "seed": list(seeds),
        "n_paths": list(evaluation["n_paths"]),
        "path_length": np.arange(cfg.n_layers + 1),
        "repeat": np.arange(evaluation["n_repeats"]),
        "epoch": epochs,
    }


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
        coords=_coords(cfg, seeds, evaluation, lr.index.to_numpy()),
        attrs={
            "title": "san: path effectiveness of one task (Dong et al. 2021, Fig. 4)",
            "model_config": json.dumps(cfg.to_dict(), sort_keys=True),
        },
    )
    describe(ds, VARIABLES)
    ds["paths"].attrs.update(flag_values=np.array([SKIP, PAD], dtype=np.int16), flag_meanings="skip no_path")
    return ds
