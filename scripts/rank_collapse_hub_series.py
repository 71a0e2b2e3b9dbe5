"""Snakemake entry: rank collapse and the first-token sink of every revision of one model's hub series, one revision
on disk at a time (san.rank_collapse.series.experiment.run_hub_series)."""

import json

from san.core.device import job_device
from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.rank_collapse.series.experiment import run_hub_series

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    device = job_device(p.compute, snakemake.threads)
    with open(snakemake.input.corpus) as fh:
        documents = json.load(fh)["documents"]
    model = snakemake.wildcards.model
    ds = run_hub_series(model, p.source, p.folder, documents, p.text, p.settings, device, log)
    log.info("%d revisions, duplicates: %s", ds.sizes["revision"], ds.attrs["series"]["duplicates"])
    write_netcdf(ds, snakemake.output[0], {**p.settings, "source": p.source}, model=model, device=str(device))
