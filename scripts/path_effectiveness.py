"""Snakemake entry: Fig. 4 (accuracy of sampled path sets by path length, one panel per task)."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.paths.plots import path_effectiveness_figure

with job_log(snakemake.log[0]):
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    fig = path_effectiveness_figure([read_netcdf(p) for p in snakemake.input.data], snakemake.params.titles)
    save(fig, snakemake.output, fig_cfg["dpi"])
