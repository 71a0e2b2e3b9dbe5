"""Snakemake entry: check the paper's claims on this run's results; write summary.json and report captions.

Every wing's ``claims(inputs, params)`` decides which of its claims this run's results can speak to
(:func:`san.report.claims.summary` loops over the wings); this script adds the run record."""

import json
from pathlib import Path

from san.core.jobs import job_log
from san.report.captions import render_captions
from san.report.claims import summary
from san.report.provenance import results_config_hash, run_record

with job_log(snakemake.log[0]) as log:
    # every named input as a list of paths (Snakemake gives a single file as a string)
    inputs = {k: [v] if isinstance(v, str) else list(v) for k, v in snakemake.input.items()}
    claims = summary(inputs, dict(snakemake.params.items()))
    # the run's record names its config by the slices its results were computed from (their ``config``
    # attributes): a config edit that changes no result (a figure's style) changes no record and reruns no summary
    claims["provenance"] = run_record(results_config_hash([f for fs in inputs.values() for f in fs]))
    Path(snakemake.output.json).write_text(json.dumps(claims, indent=2, sort_keys=True))
    out_dir = Path(snakemake.output.captions[0]).parent
    written = render_captions(Path(inputs["templates"][0]).parent, out_dir, claims)
    log.info("claims: %s", json.dumps(claims, sort_keys=True)[:2000])
    log.info("wrote %d captions to %s", len(written), out_dir)
