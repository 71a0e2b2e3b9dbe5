"""Snakemake entry: train the SANs of one path-effectiveness task (all its seeds in one batched run); write their
weights, the data of every seed and the loss per epoch and seed. A checkpoint outside the outputs lets a rerun after
a kill resume; it is removed once the outputs are written."""

import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from san.core.device import job_device
from san.core.jobs import job_log
from san.paths.experiment import train
from san.paths.model import save_seeds
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

    checkpoint = Checkpoint(
        Path(snakemake.params.checkpoint),
        60.0 * snakemake.params.checkpoint_minutes,
        json.dumps(cfg, sort_keys=True),
    )
    trained = train(cfg, device, on_epoch, checkpoint)
    result = trained.result
    log.info("data %s; model %s", json.dumps([t.info for t in trained.tasks]), trained.tasks[0].model_config)
    log.info("trained in %.1f s (setup %.1f s)", result.total_seconds, result.setup_seconds)
    rows = [
        (epoch, seed, loss[i], result.lr[epoch], result.seconds[epoch])
        for epoch, loss in enumerate(result.loss)
        for i, seed in enumerate(trained.seeds)
    ]
    pd.DataFrame(rows, columns=["epoch", "seed", "loss", "lr", "seconds"]).to_csv(
        snakemake.output.train_log, sep="\t", index=False, float_format="%.8g"
    )
    arrays = {}
    for seed, task in zip(trained.seeds, trained.tasks, strict=True):
        arrays |= task.train.to_numpy(f"seed{seed}_train") | task.eval.to_numpy(f"seed{seed}_eval")
    np.savez(snakemake.output.data, **arrays)
    save_seeds(
        trained.models,
        trained.seeds,
        snakemake.output.model,
        metadata={
            "task": cfg["task"],
            "config": json.dumps(cfg, sort_keys=True),
            "data": json.dumps({str(s): t.info for s, t in zip(trained.seeds, trained.tasks, strict=True)}),
            "device": str(device),
            "train_seconds": f"{result.total_seconds:.3f}",
        },
    )
    checkpoint.remove()
