"""Snakemake entry: check the paper's claims on this run's results; write summary.json and report captions."""

import json
from pathlib import Path

import pandas as pd

from san.circle.claims import circle_claims
from san.core.jobs import job_log
from san.core.storage import read_netcdf
from san.models.spec import CAUSAL
from san.paths.claims import over_seeds, path_decomposition_claims, path_effectiveness_claims
from san.propagation.claims import claims as propagation_claims
from san.rank_collapse.claims import (
    path_product_claims,
    pretrained_collapse_claims,
    pretrained_slower_claims,
    rank_collapse_claims,
)
from san.rank_collapse.spec import result_family
from san.report.captions import render_captions
from san.theory.claims import fig2_exponents, theorem_claims

with job_log(snakemake.log[0]) as log:
    inp, p = snakemake.input, snakemake.params
    t = p.thresholds
    rank_collapse = dict(zip(p.models, map(read_netcdf, inp.rank_collapse), strict=True))
    families = {m: result_family(ds.attrs) for m, ds in rank_collapse.items()}  # as recognised at acquisition
    causal = tuple(m for m, family in families.items() if family in CAUSAL)
    fig2 = {
        m: fig2_exponents(ds["residual_ratio"].sel(variant="SAN"), p.theory["float_floor"], p.theory["limit"])
        for m, ds in rank_collapse.items()
    }
    paths = dict(zip(p.tasks, map(read_netcdf, inp.paths), strict=True))
    path_cfg = dict(t["paths"])
    seed_rule = path_cfg.pop("seeds")
    claims = {
        "rank_collapse": rank_collapse_claims(rank_collapse, **t["rank_collapse"], causal=causal) if p.models else None,
        "pretrained_collapse": pretrained_collapse_claims(
            rank_collapse,
            threshold=t["pretrained_collapse"]["threshold"],
            max_layer_fraction=t["pretrained_collapse"]["max_layer_fraction"],
            families=families,
        )
        if any("pretrained" in ds["weights"] for ds in rank_collapse.values())
        else None,
        "pretrained_slower": pretrained_slower_claims(
            rank_collapse,
            layer=t["rank_collapse"]["layer"],
            min_factor=t["pretrained_collapse"]["slower_factor"],
            causal=causal,
        )
        if any("pretrained" in ds["weights"] for ds in rank_collapse.values())
        else None,
        "path_products": path_product_claims(
            dict(zip(p.path_product_models, map(read_netcdf, inp.path_products), strict=True)),
            **t["path_products"],
        )
        if p.path_product_models
        else None,
        "circle": circle_claims(pd.read_csv(inp.circle), **t["circle"]),
        "paths": over_seeds(path_effectiveness_claims, paths, **seed_rule, **path_cfg) if p.tasks else None,
        "path_decomposition": over_seeds(
            path_decomposition_claims,
            dict(zip(p.tasks, map(read_netcdf, inp.paths_exact), strict=True)),
            **seed_rule,
            **path_cfg,
            **t["path_decomposition"],
        )
        if p.tasks
        else None,
        "theorem": theorem_claims(read_netcdf(inp.theorem), t["theorem"], fig2),
        "propagation": propagation_claims(
            dict(zip(p.sweeps, map(read_netcdf, inp.propagation), strict=True)), t["propagation"]
        ),
    }
    Path(snakemake.output.json).write_text(json.dumps(claims, indent=2, sort_keys=True))
    out_dir = Path(snakemake.output.captions[0]).parent
    written = render_captions(Path(inp.templates[0]).parent, out_dir, claims)
    log.info("claims: %s", json.dumps(claims, sort_keys=True)[:2000])
    log.info("wrote %d captions to %s", len(written), out_dir)
