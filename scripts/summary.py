"""Snakemake entry: check the paper's claims on this run's results; write summary.json and report captions."""

import json
from pathlib import Path

import pandas as pd

from san.core.jobs import job_log
from san.core.storage import read_netcdf
from san.report.claims import (
    circle_claims,
    path_effectiveness_claims,
    path_product_claims,
    rank_collapse_claims,
    render_captions,
)

with job_log(snakemake.log[0]) as log:
    inp, p = snakemake.input, snakemake.params
    t = p.thresholds
    claims = {
        "rank_collapse": rank_collapse_claims(
            dict(zip(p.models, map(read_netcdf, inp.rank_collapse), strict=True)), **t["rank_collapse"]
        )
        if p.models
        else None,
        "path_products": path_product_claims(dict(zip(p.models, map(read_netcdf, inp.path_products), strict=True)))
        if p.models
        else None,
        "circle": circle_claims(pd.read_csv(inp.circle)),
        "paths": path_effectiveness_claims(dict(zip(p.tasks, map(read_netcdf, inp.paths), strict=True)), **t["paths"])
        if p.tasks
        else None,
    }
    Path(snakemake.output.json).write_text(json.dumps(claims, indent=2, sort_keys=True))
    out_dir = Path(snakemake.output.captions[0]).parent
    written = render_captions(Path(inp.templates[0]).parent, out_dir, claims)
    log.info("claims: %s", json.dumps(claims, sort_keys=True)[:2000])
    log.info("wrote %d captions to %s", len(written), out_dir)
