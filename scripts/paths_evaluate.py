"""Snakemake entry: evaluate one trained SAN with sampled paths of every length (Fig. 4's data for one task)."""

import numpy as np
import pandas as pd

from san.core.device import resolve_device, set_threads
from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.paths.experiment import run
from san.paths.model import load_san
from san.paths.tasks import TaskData

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    device = resolve_device(snakemake.params.device)
    ecfg, task_cfg = snakemake.params.evaluation, snakemake.params.task
    name = task_cfg.get("name", task_cfg["task"])  # a derived task's name, or the task's
    model, meta = load_san(snakemake.input.model, device)
    with np.load(snakemake.input.data) as arrays:
        train, ev = TaskData.from_numpy(arrays, "train"), TaskData.from_numpy(arrays, "eval")
    log.info(
        "task %s (%s): %d evaluation inputs, L=%d H=%d",
        name,
        meta["task"],
        len(ev),
        model.cfg.n_layers,
        model.cfg.n_heads,
    )
    ds = run(model, train, ev, ecfg, pd.read_csv(snakemake.input.train_log, sep="\t"), log)
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
