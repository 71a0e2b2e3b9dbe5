"""Snakemake entry: check the paper's claims on this run's results; write summary.json and report captions.

Each wing's ``claims(inputs, params)`` decides which of its claims this run's results can speak to; this script
loops over the wings, adds the verdict table (scientific verdicts apart from regression checks) and the run record."""

import json
from pathlib import Path

from san.circle import claims as circle
from san.core import verdicts as V
from san.core.jobs import job_log
from san.paths import claims as paths
from san.rank_collapse import claims as rank_collapse
from san.report.captions import render_captions
from san.report.claims import propagation_claims, propagation_verdicts
from san.report.provenance import results_config_hash, run_record
from san.theory import claims as theory

WINGS = (rank_collapse.claims, circle.claims, paths.claims, theory.claims, propagation_claims)

with job_log(snakemake.log[0]) as log:
    # every named input as a list of paths (Snakemake gives a single file as a string)
    inputs = {k: [v] if isinstance(v, str) else list(v) for k, v in snakemake.input.items()}
    params = dict(snakemake.params.items())
    claims = {}
    for wing in WINGS:
        claims.update(wing(inputs, params))
    claims["verdicts"] = V.collect(claims, {"propagation": propagation_verdicts(claims["propagation"] or {})})
    # the run's record names its config by the slices its results were computed from (their ``config``
    # attributes): a config edit that changes no result (a figure's style) changes no record and reruns no summary
    claims["provenance"] = run_record(results_config_hash([f for fs in inputs.values() for f in fs]))
    Path(snakemake.output.json).write_text(json.dumps(claims, indent=2, sort_keys=True))
    out_dir = Path(snakemake.output.captions[0]).parent
    written = render_captions(Path(inputs["templates"][0]).parent, out_dir, claims)
    log.info("claims: %s", json.dumps(claims, sort_keys=True)[:2000])
    log.info("wrote %d captions to %s", len(written), out_dir)
