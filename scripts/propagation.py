"""Snakemake entry: the figures of the propagation sweeps, one per results/propagation/<sweep>.nc."""

from san.core.jobs import job_log
from san.core.plotting import apply_style
from san.core.storage import read_netcdf
from san.propagation.plots import PLOTS

with job_log(snakemake.log[0]) as log:
    apply_style(snakemake.params.figures)
    for sweep, data in snakemake.input.items():
        if sweep in PLOTS:
            PLOTS[sweep](read_netcdf(data), list(snakemake.output[sweep]))
            log.info("figure %s", sweep)
