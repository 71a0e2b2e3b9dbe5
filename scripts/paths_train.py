"""Snakemake entry: train the SAN of one path-effectiveness task; write its weights, data and loss per epoch."""

import json
from datetime import timedelta

import numpy as np

from san.core.device import resolve_device, set_threads
from san.core.jobs import job_log
from san.paths.experiment import train
from san.paths.model import save_san

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    cfg = snakemake.params.task
    device = resolve_device(snakemake.params.device)
    log.info("task %s (%s) on %s, %d thread(s)", cfg.get("name", cfg["task"]), cfg["task"], device, snakemake.threads)

    n_epochs, elapsed = int(cfg["train"]["epochs"]), [0.0]

    with open(snakemake.output.train_log, "w", buffering=1) as fh:
        fh.write("epoch\tloss\tlr\tseconds\n")

        def on_epoch(epoch: int, loss: float, lr: float, seconds: float) -> None:
            fh.write(f"{epoch}\t{loss:.8g}\t{lr:.8g}\t{seconds:.6g}\n")
            done, elapsed[0] = epoch + 1, elapsed[0] + seconds
            eta = elapsed[0] / done * (n_epochs - done)
            log.info(
                "epoch %d/%d: loss %.5f lr %.3g (%.2f s); elapsed %s, ETA %s",
                done,
                n_epochs,
                loss,
                lr,
                seconds,
                timedelta(seconds=round(elapsed[0])),
                timedelta(seconds=round(eta)),
            )

        trained = train(cfg, device, on_epoch)
    task, result = trained.task, trained.result
    log.info("data %s; model %s", json.dumps(task.info), task.model_config)
    log.info(
        "trained in %.1f s (%.3f s per epoch, setup %.1f s)",
        result.total_seconds,
        sum(result.seconds) / len(result.seconds),
        result.setup_seconds,
    )
    np.savez(snakemake.output.data, **task.train.to_numpy("train"), **task.eval.to_numpy("eval"))
    save_san(
        trained.model,
        snakemake.output.model,
        metadata={
            "task": cfg["task"],
            "config": json.dumps(cfg, sort_keys=True),
            "data": json.dumps(task.info, sort_keys=True),
            "device": str(device),
            "train_seconds": f"{result.total_seconds:.3f}",
        },
    )
