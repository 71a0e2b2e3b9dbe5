"""Snakemake entry: exact path-length decomposition per task (norm share by length; truncated accuracy)."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.paths.plots import path_decomposition_figure

with job_log(snakemake.log[0]):
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    exact = [read_netcdf(p) for p in snakemake.input.exact]
    sampled = [read_netcdf(p) for p in snakemake.input.sampled]
    save(path_decomposition_figure(exact, sampled, snakemake.params.titles), snakemake.output, fig_cfg["dpi"])
