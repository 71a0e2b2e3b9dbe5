"""Snakemake entry: rank collapse and the first-token sink of every checkpoint of the offline series (Fig. 2's
measures with a revision dimension, san.rank_collapse.series)."""

import json
from pathlib import Path

import numpy as np
import xarray as xr

from san.core.device import job_device
from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.core.text import content_hash, tokenize_documents
from san.models.folders import load_tokenizer, recorded_family
from san.models.revisions import revision_name
from san.rank_collapse.series import run_series
from san.series.train import schedule

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    device = job_device(p.compute, snakemake.threads)
    revisions = [revision_name(s) for s in schedule(p.series)]
    series = {
        int(seed): {rev: Path(folder, rev) for rev in revisions}
        for seed, folder in zip(p.series["seeds"], snakemake.input.series, strict=True)
    }
    with open(snakemake.input.corpus) as fh:
        corpus = json.load(fh)
    tokenizer = load_tokenizer(next(iter(series.values()))[revisions[0]])
    text = p.text
    ids = tokenize_documents(tokenizer, corpus["documents"], text["seq_len"], text["n_sequences"], text["seed"])
    inputs = xr.Dataset(
        {"input_ids": (("sample", "token"), ids)},
        coords={"sample": np.arange(ids.shape[0])},
        attrs={"input_sha256": content_hash(ids)},
    )
    family, _ = recorded_family([f for revisions in series.values() for f in revisions.values()])
    ds = run_series(family, series, inputs, p.settings, device, log)
    log.info(
        "SAN at the last layer, mean over seeds and sequences, by step:\n%s",
        ds["residual_ratio"].sel(variant="SAN").isel(layer=-1).mean(("seed", "sample")).to_pandas().to_string(),
    )
    write_netcdf(ds, snakemake.output[0], {**p.settings, "series": p.series}, model="series", device=str(device))
