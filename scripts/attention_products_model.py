"""Snakemake entry: box plot of attention-product residuals over path depth for one model."""

from san.core.jobs import job_log
from san.core.plotting import apply_style, save
from san.core.storage import read_netcdf
from san.rank_collapse.plots import attention_products_figure

with job_log(snakemake.log[0]):
    fig_cfg = snakemake.params.figures
    apply_style(fig_cfg)
    save(
        attention_products_figure(read_netcdf(snakemake.input.data), snakemake.wildcards.model),
        snakemake.output,
        fig_cfg["dpi"],
    )
