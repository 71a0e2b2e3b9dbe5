"""Snakemake entry: the verdicts that apply to one model alone (san.report.model_report.model_verdicts), as JSON."""

import json
from pathlib import Path

from san.core.jobs import job_log
from san.report.model_report import model_verdicts

with job_log(snakemake.log[0]) as log:
    inputs = {k: [v] if isinstance(v, str) else list(v) for k, v in snakemake.input.items()}
    verdicts = model_verdicts(inputs, {"model": snakemake.params.model, "report": snakemake.params.report})
    Path(snakemake.output[0]).write_text(json.dumps(verdicts, indent=2, sort_keys=True))
    log.info("%d verdict rows", sum(len(rows) for rows in verdicts["verdicts"].values()))
