"""Snakemake entry: the path-effectiveness table (full model, chance, mean accuracy by path length)."""

from san.core.jobs import job_log
from san.core.storage import read_netcdf
from san.paths.table import summary_table

with job_log(snakemake.log[0]) as log:
    table = summary_table([read_netcdf(p) for p in snakemake.input.data])
    log.info("path effectiveness:\n%s", table.to_string())
    table.to_csv(snakemake.output[0], float_format="%.4f")
