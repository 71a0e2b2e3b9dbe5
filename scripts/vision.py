"""Snakemake entry: the image encoders' figure from their results/vision/<model>.nc."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.rank_collapse.vision.plots import vision_figure

with job_log(snakemake.log[0]) as log:
    apply_style(snakemake.params.figures)
    datasets = dict(zip(snakemake.params.models, map(read_netcdf, snakemake.input.data), strict=True))
    save(vision_figure(datasets), list(snakemake.output))
    log.info("figure of %d image encoders", len(datasets))
