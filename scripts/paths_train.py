"""Snakemake entry: train the SAN of one path-effectiveness task; write its weights, data and loss per epoch."""

import json

import numpy as np
import torch

from san.device import resolve_device, set_threads
from san.jobs import job_log
from san.san_model import SAN, save_san
from san.tasks import make_task
from san.training import train_model

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    cfg = snakemake.params.task
    name, seed = cfg["task"], cfg["seed"]
    device = resolve_device(snakemake.params.device)
    task = make_task(name, cfg)
    log.info("task %s: %s", name, json.dumps(task.info))
    torch.manual_seed(seed)  # initialisation
    model = SAN(task.model_config)
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model %s (%d parameters) on %s, %d thread(s)", task.model_config, n_params, device, snakemake.threads)

    with open(snakemake.output.train_log, "w", buffering=1) as fh:
        fh.write("epoch\tloss\tlr\tseconds\n")

        def on_epoch(epoch: int, loss: float, lr: float, seconds: float) -> None:
            fh.write(f"{epoch}\t{loss:.8g}\t{lr:.8g}\t{seconds:.6g}\n")
            log.info("epoch %d: loss %.5f lr %.3g (%.2f s)", epoch, loss, lr, seconds)

        result = train_model(model, task.train, cfg["train"], seed=seed, device=device, on_epoch=on_epoch)
    log.info(
        "trained in %.1f s (%.3f s per epoch, setup %.1f s)",
        result.total_seconds,
        sum(result.seconds) / len(result.seconds),
        result.setup_seconds,
    )

    np.savez(snakemake.output.data, **task.train.to_numpy("train"), **task.eval.to_numpy("eval"))
    save_san(
        model,
        snakemake.output.model,
        metadata={
            "task": name,
            "config": json.dumps(cfg, sort_keys=True),
            "data": json.dumps(task.info, sort_keys=True),
            "device": str(device),
            "train_seconds": f"{result.total_seconds:.3f}",
        },
    )
