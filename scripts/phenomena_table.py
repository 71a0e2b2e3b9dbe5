"""Snakemake entry: the pretrained phenomena's models x claims table (its wing's summary, results/summary/
phenomena.json) as netCDF and CSV."""

import json
from pathlib import Path

from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.phenomena.table import table_dataset, table_frame

with job_log(snakemake.log[0]) as log:
    wing = json.loads(Path(snakemake.input.summary).read_text())
    if wing["sections"].get("phenomena") is None:
        raise ValueError(f"{snakemake.input.summary} has no phenomena section: the run has no model to judge")
    ds = table_dataset(wing["sections"]["phenomena"])
    # the run the table was judged on names its config (the wing summary's record of it)
    write_netcdf(ds, snakemake.output.nc, wing["provenance"])
    table_frame(ds).to_csv(snakemake.output.csv, index=False)
    log.info("%d models x %d claims", ds.sizes["model"], ds.sizes["claim"])
