"""Snakemake entry: token distance against recurrent step for the circle experiment, from results/circle.nc."""

from san.circle.plots import distance_figure
from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf

with job_log(snakemake.log[0]):
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    fig = distance_figure(read_netcdf(snakemake.input.data), snakemake.params.collapse_threshold)
    save(fig, snakemake.output, fig_cfg["dpi"])
