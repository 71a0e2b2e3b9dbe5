"""Snakemake entry: one model's rank-collapse measures per layer for every weights x variant, by the ``run`` of the
experiment its rule names (``params.experiment``: san.rank_collapse.experiment for text models, Fig. 2;
san.rank_collapse.vision.experiment for image encoders); the rules rank_collapse and vision_model share it."""

import importlib

from san.core.device import JobPlace, job_device, memory_budget
from san.core.jobs import job_log
from san.core.storage import read_netcdf, write_netcdf
from san.models.folders import recorded_family

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    run = importlib.import_module(p.experiment).run
    device = job_device(p.compute, snakemake.threads)
    models = dict(zip(p.weights, snakemake.input.models, strict=True))
    family, recognition = recorded_family(list(models.values()))
    inputs = {w: read_netcdf(f) for w, f in zip(p.weights, snakemake.input.inputs, strict=True)}
    ds = run(family, models, inputs, p.settings, JobPlace(device, log, *memory_budget(p.compute)))
    first = ds[next(iter(ds.data_vars))]
    means = first.mean(first.dims[-1])  # over the input sequences or images
    log.info("%s per layer, mean over the inputs:\n%s", first.name, means.to_pandas().to_string() if means.ndim <= 2
             else means)  # fmt: skip
    write_netcdf(
        ds,
        snakemake.output[0],
        {"family": family, **p.settings},
        model=snakemake.wildcards.model,
        device=str(device),
        recognition=recognition,
    )
