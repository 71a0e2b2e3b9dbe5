"""Snakemake entry: box plot of attention-product residuals over path depth for one model."""

from san.jobs import job_log
from san.plots import apply_style, path_products_figure, save
from san.storage import read_netcdf

with job_log(snakemake.log[0]):
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    save(path_products_figure(read_netcdf(snakemake.input.data), snakemake.wildcards.model), snakemake.output,
         fig_cfg["dpi"])
