"""Snakemake entry: the Markdown tables of this run's numbers that README.md and docs/ quote (san.report.readme)."""

from pathlib import Path

from san.core.jobs import job_log
from san.report.readme import write_tables

with job_log(snakemake.log[0]) as log:
    out_dir = Path(snakemake.output[0]).parent
    written = write_tables(Path(snakemake.input.summary).parent, out_dir)
    log.info("wrote %d tables to %s", len(written), out_dir)
