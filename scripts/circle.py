"""Snakemake entry: the circle trajectory grid (the paper's Fig. 3) from results/circle.nc."""

from san.circle.plots import trajectory_figure
from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf

with job_log(snakemake.log[0]):
    fig_cfg, plot = snakemake.params.figures, snakemake.params.plot
    apply_style(fig_cfg)
    fig = trajectory_figure(read_netcdf(snakemake.input.data), seed=plot["seed"], axis_limit=plot["axis_limit"])
    save(fig, snakemake.output, fig_cfg["dpi"])
