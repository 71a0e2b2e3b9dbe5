"""Snakemake entry: evaluate the trained SAN of one task (every seed) with sampled paths of every length (Fig. 4's
data for one task)."""

import numpy as np
import pandas as pd

from san.core.device import job_device
from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.paths.experiment import run, seed_data
from san.paths.model import SAN

with job_log(snakemake.log[0]) as log:
    device = job_device(snakemake.params.compute, snakemake.threads)
    ecfg, task_cfg = snakemake.params.evaluation, snakemake.params.task
    name = task_cfg.get("name", task_cfg["task"])  # a derived task's name, or the task's
    model, meta = SAN.load(snakemake.input.model, device)
    if model.seeds != list(task_cfg["seeds"]):
        raise ValueError(f"{snakemake.input.model} holds seeds {model.seeds}, the config's are {task_cfg['seeds']}")
    with np.load(snakemake.input.data) as arrays:
        trains, evs = seed_data(arrays, model.seeds)
    cfg = model.cfg
    log.info("task %s (%s), seeds %s: %d evaluation inputs, L=%d H=%d", name, meta["task"], model.seeds, len(evs[0]),
             cfg.n_layers, cfg.n_heads)  # fmt: skip
    ds = run(model, model.seeds, trains, evs, ecfg, pd.read_csv(snakemake.input.train_log, sep="\t"), log)
    write_netcdf(
        ds,
        snakemake.output[0],
        {"task": task_cfg, "evaluation": ecfg},
        seed=ecfg["seed"],
        task=name,
        task_kind=meta["task"],
        data=meta["data"],
        device=str(device),
        train_seconds=float(meta["train_seconds"]),
    )
