"""Snakemake entry: rank-1 residual of attention products along sampled paths (appendix figure)."""

from san.core.device import job_device, memory_budget
from san.core.jobs import job_log
from san.core.storage import read_netcdf, write_netcdf
from san.models.folders import recorded_family
from san.rank_collapse.attention_products import run

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    s = p.settings
    device = job_device(snakemake.params.compute, snakemake.threads)
    models = dict(zip(p.weights, snakemake.input.models, strict=True))
    family, recognition = recorded_family(list(models.values()))
    inputs = {w: read_netcdf(f) for w, f in zip(p.weights, snakemake.input.inputs, strict=True)}
    ds = run(family, models, inputs, s, p.batch_size, device, log, *memory_budget(p.compute))
    cfg = {"family": family, **s}
    write_netcdf(
        ds,
        snakemake.output[0],
        cfg,
        seed=s["seed"],
        model=snakemake.wildcards.model,
        device=str(device),
        recognition=recognition,
    )
