"""Snakemake entry: the report's verdicts page and its interactive models x claims x layers view (san.report.pages)."""

import json
from pathlib import Path

from san.core.jobs import job_log
from san.core.storage import read_netcdf
from san.report.pages import claims_view, rst_page

with job_log(snakemake.log[0]) as log:
    summary = json.loads(Path(snakemake.input.summary).read_text())
    rst = Path(snakemake.input.verdicts).read_text()
    Path(snakemake.output.verdicts).write_text(rst_page(rst, "Every verdict of this run"))
    datasets = {m: read_netcdf(p) for m, p in zip(snakemake.params.models, snakemake.input.rank_collapse, strict=True)}
    Path(snakemake.output.view).write_text(claims_view(summary, datasets))
    log.info("verdicts page and the models x claims x layers view of %d models", len(datasets))
