"""Snakemake entry: check one wing's claims on its own results (san.report.claims.wing_summary); write
results/summary/<wing>.json: its sections, the files they were judged on and the run's record of them."""

import json
from pathlib import Path

from san.core.jobs import job_log
from san.report.claims import wing_summary
from san.report.provenance import results_config_hash, run_record

with job_log(snakemake.log[0]) as log:
    # every named input as a list of paths (Snakemake gives a single file as a string)
    inputs = {k: [v] if isinstance(v, str) else list(v) for k, v in snakemake.input.items()}
    sections = wing_summary(snakemake.wildcards.wing, inputs, snakemake.params.claims)
    files = sorted(f for fs in inputs.values() for f in fs)
    # the record names the config slices the results were computed from (their ``config`` attributes)
    out = {"sections": sections, "inputs": files, "provenance": run_record(results_config_hash(files))}
    # in the order the wing wrote its sections: the order of summary.json's verdict lists
    Path(snakemake.output[0]).write_text(json.dumps(out, indent=2))
    log.info("wing %s: %s", snakemake.wildcards.wing, json.dumps(sections, sort_keys=True)[:2000])
