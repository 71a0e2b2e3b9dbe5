"""Snakemake entry: exact path-length decomposition of the trained SANs of one task (every seed) and of their
initialisations (Fig. 4, exact)."""

import json
import time

import numpy as np
import torch

from san.core.device import set_threads
from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.paths.decomposition import initial_model, run
from san.paths.experiment import seed_data
from san.paths.model import SAN
from san.paths.tasks import chance_accuracy

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    task_cfg = snakemake.params.task
    name = task_cfg.get("name", task_cfg["task"])  # a derived task's name, or the task's
    t0 = time.process_time()
    model, meta = SAN.load(snakemake.input.model, "cpu")
    seeds, cfg = model.seeds, model.cfg
    if seeds != list(task_cfg["seeds"]):
        raise ValueError(f"{snakemake.input.model} holds seeds {seeds}, the config's are {task_cfg['seeds']}")
    with np.load(snakemake.input.data) as arrays:
        trains, evs = seed_data(arrays, seeds)
    log.info("task %s, seeds %s: %d evaluation inputs, L=%d H=%d d=%d", name, seeds, len(evs[0]), cfg.n_layers,
             cfg.n_heads, cfg.dim)  # fmt: skip
    chances = [chance_accuracy(t.labels, ev.labels, cfg.n_classes) for t, ev in zip(trains, evs, strict=True)]
    with torch.no_grad():
        ds = run(model, evs, initial_model(model), chances)
    cpu_seconds = time.process_time() - t0
    log.info("decomposition of both states of %d seed(s) in %.1f CPU s", len(seeds), cpu_seconds)
    write_netcdf(
        ds,
        snakemake.output[0],
        {"task": task_cfg},
        seeds=json.dumps(seeds),
        task=name,
        task_kind=meta["task"],
        model_config=json.dumps(cfg.to_dict(), sort_keys=True),
        data=meta["data"],
        cpu_seconds=cpu_seconds,
        n_eval_inputs=len(evs[0]),
        n_eval_tokens=int((evs[0].labels >= 0).sum()),
    )
