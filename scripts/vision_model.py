"""Snakemake entry: the vision measures per layer and image for every weights x variant of one image encoder."""

from san.core.device import job_device
from san.core.jobs import job_log
from san.core.storage import read_netcdf, write_netcdf
from san.models.folders import recorded_family
from san.rank_collapse.vision import run

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    device = job_device(p.compute, snakemake.threads)
    models = dict(zip(p.weights, snakemake.input.models, strict=True))
    family, recognition = recorded_family(list(models.values()))
    inputs = {w: read_netcdf(f) for w, f in zip(p.weights, snakemake.input.inputs, strict=True)}
    ds = run(family, models, inputs, p.settings, device)
    share = ds["residual_ratio_frobenius_patches"].mean("image")
    log.info("patch high-frequency share per layer:\n%s", share.to_pandas().to_string() if share.ndim <= 2 else share)
    write_netcdf(
        ds,
        snakemake.output[0],
        {"family": family, **p.settings},
        model=snakemake.wildcards.model,
        device=str(device),
        recognition=recognition,
    )
