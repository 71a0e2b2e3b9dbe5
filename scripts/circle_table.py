"""Snakemake entry: the collapse table of the circle experiment (token distance after the report steps, collapsed
seeds) from results/circle.nc."""

from pathlib import Path

from san.circle.results import collapse_table
from san.core.jobs import job_log
from san.core.storage import read_netcdf

with job_log(snakemake.log[0]) as log:
    rep = snakemake.params.report
    table = collapse_table(read_netcdf(snakemake.input.data), rep["steps"], rep["collapse_threshold"])
    out = Path(snakemake.output[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".csv.part")
    table.to_csv(tmp, index=False, float_format="%.6g")
    tmp.replace(out)
    log.info("collapse table:\n%s", table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
