"""Snakemake entry: exact path-length decomposition of one trained SAN and of its initialisation (Fig. 4, exact)."""

import json
import time

import numpy as np
import torch

from san.core.device import set_threads
from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.paths.decomposition import initial_model, run
from san.paths.model import load_san
from san.paths.tasks import TaskData, chance_accuracy

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    task_cfg = snakemake.params.task
    name = task_cfg.get("name", task_cfg["task"])  # a derived task's name, or the task's
    t0 = time.process_time()
    model, meta = load_san(snakemake.input.model, "cpu")
    if json.loads(meta["config"])["seed"] != task_cfg["seed"]:
        raise ValueError(f"{snakemake.input.model} was trained with another seed than the config's {task_cfg['seed']}")
    with np.load(snakemake.input.data) as arrays:
        train, ev = TaskData.from_numpy(arrays, "train"), TaskData.from_numpy(arrays, "eval")
    cfg = model.cfg
    log.info("task %s: %d evaluation inputs, L=%d H=%d d=%d", name, len(ev), cfg.n_layers, cfg.n_heads, cfg.dim)
    chance = chance_accuracy(train.labels, ev.labels, cfg.n_classes)
    init = initial_model(model, task_cfg["seed"])
    with torch.no_grad():
        ds = run(model, ev.inputs, ev.labels, ev.mask, init_model=init, chance=chance)
    cpu_seconds = time.process_time() - t0
    log.info("decomposition of both states in %.1f CPU s", cpu_seconds)
    write_netcdf(
        ds,
        snakemake.output[0],
        {"task": task_cfg},
        seed=task_cfg["seed"],
        task=name,
        task_kind=meta["task"],
        model_config=json.dumps(cfg.to_dict(), sort_keys=True),
        data=meta["data"],
        cpu_seconds=cpu_seconds,
        n_eval_inputs=len(ev),
        n_eval_tokens=int((ev.labels >= 0).sum()),
    )
