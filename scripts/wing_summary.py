"""Snakemake entry: check one wing's claims on its own results (san.report.claims.wing_summary); write
results/summary/<wing>.json: its sections, the files and settings they were judged on (by name, as the wing's claims
read them) and the run's record of them."""

import json
from pathlib import Path

from san.core.jobs import job_log
from san.experiments import named
from san.report.claims import wing_summary
from san.report.provenance import results_config_hash, run_record

with job_log(snakemake.log[0]) as log:
    # the files the wing's claims read (not the library modules), each as a list of paths (Snakemake gives a single
    # file as a string)
    reads = named(snakemake.wildcards.wing).inputs
    inputs = {k: [v] if isinstance(v, str) else list(v) for k, v in snakemake.input.items() if k in reads}
    params = dict(snakemake.params.claims)
    sections = wing_summary(snakemake.wildcards.wing, inputs, params)
    files = sorted(f for fs in inputs.values() for f in fs)
    # the record names the config slices the results were computed from (their ``config`` attributes)
    record = run_record(results_config_hash(files))
    out = {"sections": sections, "inputs": inputs, "params": params, "provenance": record}
    # in the order the wing wrote its sections: the order of summary.json's verdict lists
    Path(snakemake.output[0]).write_text(json.dumps(out, indent=2))
    log.info("wing %s: %s", snakemake.wildcards.wing, json.dumps(sections, sort_keys=True)[:2000])
