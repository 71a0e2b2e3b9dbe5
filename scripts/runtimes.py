"""Snakemake entry: one table of wall time, CPU time and peak memory of every job, from the benchmark files."""

from san.core.jobs import job_log
from san.report.runtimes import runtimes_table

with job_log(snakemake.log[0]):
    runtimes_table(snakemake.params.folder).to_csv(snakemake.output[0], index=False, float_format="%.2f")
