"""Snakemake entry: gather every wing's claims (results/summary/<wing>.json) into summary.json with the verdict
table (san.report.claims.gather); write the report's captions."""

import json
from pathlib import Path

from san.core.jobs import job_log
from san.report.captions import render_captions
from san.report.claims import gather
from san.report.provenance import results_config_hash, run_record

with job_log(snakemake.log[0]) as log:
    wings = {Path(f).stem: json.loads(Path(f).read_text()) for f in snakemake.input.wings}
    claims = gather({name: w["sections"] for name, w in wings.items()})
    # the run's record names its config by the slices its results were computed from (their ``config``
    # attributes): a config edit that changes no result (a figure's style) changes no record and reruns no summary
    files = {f for w in wings.values() for fs in w["inputs"].values() for f in fs}
    claims["provenance"] = run_record(results_config_hash(files))
    Path(snakemake.output.json).write_text(json.dumps(claims, indent=2, sort_keys=True))
    out_dir = Path(snakemake.output.captions[0]).parent
    templates = [snakemake.input.templates] if isinstance(snakemake.input.templates, str) else snakemake.input.templates
    written = render_captions(Path(templates[0]).parent, out_dir, claims)
    log.info("claims: %s", json.dumps(claims, sort_keys=True)[:2000])
    log.info("wrote %d captions to %s", len(written), out_dir)
