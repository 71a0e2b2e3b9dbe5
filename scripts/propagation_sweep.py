"""Snakemake entry: one sweep of the signal-propagation study (random blocks at initialisation vs theory)."""

import torch

from san.core.device import job_device
from san.core.jobs import job_log
from san.core.storage import read_netcdf, write_netcdf
from san.propagation.experiment import prose_embeddings, run

with job_log(snakemake.log[0]) as log:
    p, sweep = snakemake.params, snakemake.wildcards.sweep
    device = job_device(snakemake.params.compute, snakemake.threads)
    prose = None
    if snakemake.input.get("inputs"):
        ids = read_netcdf(snakemake.input.inputs)["input_ids"].values
        prose = prose_embeddings(snakemake.input.model, ids, device)
        log.info("prose embeddings %s", tuple(prose.shape))
    log.info("sweep %s on %s (%s threads)", sweep, device, torch.get_num_threads())
    ds = run(sweep, p.sweep, device, prose, log=log)
    log.info("CPU seconds: %.1f", ds.attrs["cpu_seconds"])
    write_netcdf(ds, snakemake.output[0], p.sweep)  # run() records the device in the attributes
