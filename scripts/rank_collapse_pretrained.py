"""Snakemake entry: every pretrained model side by side (SAN and transformer, depth 0..1, three measures, log y)."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.rank_collapse.plots import pretrained_collapse_figure

with job_log(snakemake.log[0]) as log:
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    datasets = {m: read_netcdf(path) for m, path in zip(snakemake.params.models, snakemake.input.data, strict=True)}
    save(pretrained_collapse_figure(datasets), snakemake.output, fig_cfg["dpi"])
    log.info("drew the pretrained weights of %d models: %s", len(datasets), ", ".join(datasets))
