"""Snakemake entry: Fig. 2 for one model (linear and log y) from its rank_collapse .nc file."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.rank_collapse.plots import rank_collapse_figure

with job_log(snakemake.log[0]):
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    ds = read_netcdf(snakemake.input.data)
    model = snakemake.wildcards.model
    save(rank_collapse_figure(ds, model), snakemake.output.linear, fig_cfg["dpi"])
    save(rank_collapse_figure(ds, model, log_scale=True), snakemake.output.log, fig_cfg["dpi"])
