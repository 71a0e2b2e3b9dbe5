"""Snakemake entry: Fig. 2 as one figure, a panel per model and weights (log y), from the rank_collapse .nc files."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.rank_collapse.plots import rank_collapse_overview_figure

with job_log(snakemake.log[0]) as log:
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    datasets = {m: read_netcdf(path) for m, path in zip(snakemake.params.models, snakemake.input.data, strict=True)}
    save(rank_collapse_overview_figure(datasets), snakemake.output, fig_cfg["dpi"])
    log.info("drew %d models: %s", len(datasets), ", ".join(datasets))
