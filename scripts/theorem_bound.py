"""Snakemake entry: the theorem figure (measured vs bound per layer; the empirical exponent)."""

from san.core.jobs import job_log
from san.core.plotting import apply_style
from san.core.storage import read_netcdf
from san.theory.plots import plot_theorem

with job_log(snakemake.log[0]) as log:
    apply_style(snakemake.params.figures)
    plot_theorem(read_netcdf(snakemake.input.data), list(snakemake.output), dpi=snakemake.params.figures["dpi"])
