"""Snakemake entry: pixel values of the pinned photographs and noise images by one model's own image processor."""

from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.rank_collapse.vision.experiment import pixel_inputs

with job_log(snakemake.log[0]) as log:
    settings = snakemake.params.settings
    ds = pixel_inputs(snakemake.input.model, settings)
    log.info("%d images %s, pixel values %s, sha256 %s", ds.sizes["image"], list(ds["image"].values),
             ds["pixel_values"].shape, ds.attrs["input_sha256"])  # fmt: skip
    write_netcdf(ds, snakemake.output[0], settings, model=snakemake.wildcards.model)
