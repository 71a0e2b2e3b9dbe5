"""Snakemake entry: evaluate one trained SAN with sampled paths of every length (Fig. 4's data for one task)."""

import json
import time

import numpy as np
import pandas as pd
import torch
import xarray as xr

from san.device import resolve_device, set_threads
from san.jobs import job_log
from san.paths import (
    PAD,
    SKIP,
    evaluate_path_sets,
    model_accuracy,
    path_counts,
    path_length_shares,
    prefix_tree,
    sample_path_sets,
)
from san.san_model import load_san
from san.storage import write_netcdf
from san.tasks import TaskData, chance_accuracy

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    device = resolve_device(snakemake.params.device)
    ecfg = snakemake.params.evaluation
    task_cfg = snakemake.params.task
    name = task_cfg.get("name", task_cfg["task"])  # a variant's name, or the task's
    model, meta = load_san(snakemake.input.model, device)
    cfg = model.cfg
    with np.load(snakemake.input.data) as arrays:
        train, ev = TaskData.from_numpy(arrays, "train"), TaskData.from_numpy(arrays, "eval")
    log.info("task %s (%s): %d evaluation inputs, L=%d H=%d", name, meta["task"], len(ev), cfg.n_layers, cfg.n_heads)

    full = model_accuracy(model, ev.inputs, ev.labels, ev.mask)
    chance = chance_accuracy(train.labels, ev.labels, cfg.n_classes)
    log.info("full model accuracy %.4f, chance (input-blind positional mode) %.4f", full, chance)

    sets = sample_path_sets(cfg.n_layers, cfg.n_heads, ecfg["n_paths"], ecfg["n_repeats"], ecfg["seed"])
    real = sets[..., 0] != PAD
    tree = prefix_tree(torch.as_tensor(sets[real]), cfg.n_heads)
    log.info(
        "%d paths in %d sets; %d single-head evaluations per input after prefix sharing (%d without)",
        int(real.sum()),
        real[..., 0].size,
        tree.n_head_evaluations,
        int((sets[real] != SKIP).sum()),
    )
    t0 = time.perf_counter()
    acc = evaluate_path_sets(model, ev.inputs, ev.labels, ev.mask, sets, ecfg["memory_mb"]).numpy()
    eval_seconds = time.perf_counter() - t0
    log.info("path evaluation in %.1f s", eval_seconds)
    for i, n in enumerate(ecfg["n_paths"]):
        log.info("n_paths=%d: mean accuracy by path length %s", n, np.round(acc[i].mean(-1), 4).tolist())

    train_log = pd.read_csv(snakemake.input.train_log, sep="\t")
    n_layers = cfg.n_layers
    ds = xr.Dataset(
        {
            "accuracy": (
                ("n_paths", "path_length", "repeat"),
                acc,
                {"long_name": "token accuracy of the model restricted to a set of sampled paths", "units": "1"},
            ),
            "full_model_accuracy": ((), full, {"long_name": "token accuracy of the full model (all paths)"}),
            "chance_accuracy": (
                (),
                chance,
                {"long_name": "token accuracy of the input-blind predictor: most frequent training label per position"},
            ),
            "paths": (
                ("n_paths", "path_length", "repeat", "path", "layer"),
                sets.astype(np.int16),
                {"long_name": "sampled paths: head index per layer", "flag_values": f"{SKIP}: skip, {PAD}: no path"},
            ),
            "path_share": (
                ("path_length",),
                path_length_shares(n_layers, cfg.n_heads),
                {"long_name": "share of all paths that have this length, C(L,k) H^k / (H+1)^L"},
            ),
            "path_count": (
                ("path_length",),
                np.asarray(path_counts(n_layers, cfg.n_heads), dtype=np.float64),
                {"long_name": "number of paths of this length, C(L,k) H^k"},
            ),
            "train_loss": (("epoch",), train_log["loss"].to_numpy(), {"long_name": "mean training loss of the epoch"}),
            "train_lr": (("epoch",), train_log["lr"].to_numpy(), {"long_name": "learning rate of the epoch"}),
            "train_seconds": (("epoch",), train_log["seconds"].to_numpy(), {"long_name": "epoch wall time (s)"}),
        },
        coords={
            "n_paths": ("n_paths", list(ecfg["n_paths"]), {"long_name": "paths per evaluated set"}),
            "path_length": ("path_length", np.arange(n_layers + 1), {"long_name": "layers where a path takes a head"}),
            "repeat": ("repeat", np.arange(ecfg["n_repeats"]), {"long_name": "independent sample of the set"}),
            "epoch": ("epoch", train_log["epoch"].to_numpy()),
        },
    )
    write_netcdf(
        ds,
        snakemake.output[0],
        {"task": task_cfg, "evaluation": ecfg},
        seed=ecfg["seed"],
        task=name,
        task_kind=meta["task"],
        model_config=json.dumps(cfg.to_dict(), sort_keys=True),
        data=meta["data"],
        device=str(device),
        train_seconds=float(meta["train_seconds"]),
        eval_seconds=eval_seconds,
        n_eval_inputs=len(ev),
        n_eval_tokens=int((ev.labels >= 0).sum()),
    )
