"""Snakemake entry: train the SAN of one path-effectiveness task (all its seeds stacked in one network); write its
weights, the data of every seed and the loss per epoch and seed. A checkpoint outside the outputs lets a rerun after
a kill resume (only with the same config, code, torch and device); it is removed once the outputs are written."""

import json
from datetime import timedelta
from pathlib import Path

from san.core.device import job_device
from san.core.jobs import job_log
from san.paths.experiment import train, write_training
from san.paths.training import Checkpoint

with job_log(snakemake.log[0]) as log:
    cfg = snakemake.params.task
    device = job_device(snakemake.params.compute, snakemake.threads, train=True)
    log.info(
        "task %s (%s), seeds %s, on %s, %d thread(s)",
        cfg.get("name", cfg["task"]),
        cfg["task"],
        cfg["seeds"],
        device,
        snakemake.threads,
    )
    n_epochs, elapsed = int(cfg["train"]["epochs"]), [0.0]

    def on_epoch(epoch: int, losses: list[float], lr: float, seconds: float) -> None:
        done, elapsed[0] = epoch + 1, elapsed[0] + seconds
        eta = timedelta(seconds=round(elapsed[0] / done * (n_epochs - done)))
        log.info("epoch %d/%d: loss by seed %s lr %.3g (%.2f s); ETA %s", done, n_epochs, losses, lr, seconds, eta)

    checkpoint = Checkpoint(Path(snakemake.params.checkpoint), 60.0 * snakemake.params.checkpoint_minutes)
    trained = train(cfg, device, on_epoch, checkpoint)
    log.info("data %s; model %s", json.dumps([t.info for t in trained.tasks]), trained.model.cfg)
    log.info("trained in %.1f s (setup %.1f s)", trained.result.total_seconds, trained.result.setup_seconds)
    write_training(trained, cfg, device, dict(snakemake.output.items()))
    checkpoint.remove()
