"""Snakemake entry: one decoder's first-token sink and first-token norm at several context lengths, unmodified model
(san.rank_collapse.context)."""

from san.core.device import JobPlace, job_device, memory_budget
from san.core.jobs import job_log
from san.core.storage import read_netcdf, write_netcdf
from san.models.folders import recorded_family
from san.rank_collapse.context import run

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    device = job_device(p.compute, snakemake.threads)
    models = dict(zip(p.weights, snakemake.input.models, strict=True))
    family, recognition = recorded_family(list(models.values()))
    inputs = {w: read_netcdf(f) for w, f in zip(p.weights, snakemake.input.inputs, strict=True)}
    ds = run(family, models, inputs, p.settings, JobPlace(device, log, *memory_budget(p.compute)))
    means = ds["first_token_attention"].mean(("layer", "head"))
    log.info("first-token attention, mean over layers and heads:\n%s", means.to_pandas().to_string())
    write_netcdf(
        ds,
        snakemake.output[0],
        {"family": family, **p.settings},
        model=snakemake.wildcards.model,
        device=str(device),
        recognition=recognition,
    )
