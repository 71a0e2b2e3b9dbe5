"""Snakemake entry: the quantisation control of one model's pretrained weights, the measures of the experiment its
rule names (``params.experiment``: rank collapse for text models, vision for image encoders; the rules
quantisation_drift and vision_quantisation_drift share it) on the weights and on their copies requantised to each
of ``params.kinds`` (san.rank_collapse.quantisation), one result with a weight set per copy; the summaries judge
each copy's claims (san.phenomena.drift). The copies are written to a temporary folder and removed."""

import tempfile
from pathlib import Path

from san.core.device import JobPlace, job_device, memory_budget
from san.core.jobs import job_log
from san.core.storage import read_netcdf, write_netcdf
from san.models.folders import recorded_family
from san.rank_collapse.quantisation import quantisation_control

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    folder = Path(snakemake.input.models[0])
    family, recognition = recorded_family([folder])
    device = job_device(p.compute, snakemake.threads)
    with tempfile.TemporaryDirectory(prefix="san-quantised-") as work:
        result = quantisation_control(
            family,
            folder,
            read_netcdf(snakemake.input.inputs[0]),
            p.settings,
            p.kinds,
            Path(work),
            experiment=p.experiment,
            job=JobPlace(device, log, *memory_budget(p.compute)),
        )
    log.info("weight sets measured: %s", list(result["weights"].values))
    write_netcdf(
        result,
        snakemake.output[0],
        {"family": family, "kinds": list(p.kinds), **p.settings},
        model=snakemake.wildcards.model,
        device=str(device),
        recognition=recognition,
    )
