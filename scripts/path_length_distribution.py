"""Snakemake entry: distribution of path lengths of common architectures (log-scale path length)."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.paths.plots import path_length_distribution_figure

with job_log(snakemake.log[0]):
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    save(path_length_distribution_figure(read_netcdf(snakemake.input.data)), snakemake.output, fig_cfg["dpi"])
