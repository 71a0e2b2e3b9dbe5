"""Snakemake entry: the pretrained phenomena's figure (models x claims, coloured by verdict) from
results/phenomena/table.nc."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.phenomena.plots import phenomena_figure

with job_log(snakemake.log[0]):
    apply_style(snakemake.params.figures)
    save(phenomena_figure(read_netcdf(snakemake.input.data)), list(snakemake.output), snakemake.params.figures["dpi"])
