"""Snakemake entry: training loss curves of the circle experiment, from results/circle.nc."""

from san.circle.plots import loss_figure
from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf

with job_log(snakemake.log[0]):
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    save(loss_figure(read_netcdf(snakemake.input.data)), snakemake.output, fig_cfg["dpi"])
