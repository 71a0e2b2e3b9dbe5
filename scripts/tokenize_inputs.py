"""Snakemake entry: token ids of the input sequences for one model's tokenizer (a model folder's, or a training
series checkpoint's: params.checkpoint inside the series folder)."""

import json
from pathlib import Path

import numpy as np
import xarray as xr

from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.core.text import content_hash, tokenize_documents
from san.models.folders import load_tokenizer, read_manifest

with job_log(snakemake.log[0]) as log:
    text = snakemake.params.text
    with open(snakemake.input.corpus) as fh:
        corpus = json.load(fh)
    folder = Path(snakemake.input.model, snakemake.params.checkpoint)
    tokenizer = load_tokenizer(folder)
    ids = tokenize_documents(tokenizer, corpus["documents"], text["seq_len"], text["n_sequences"], text["seed"])
    digest = content_hash(ids)
    log.info("tokenised %s sequences of %s tokens, sha256 %s", *ids.shape, digest)
    ds = xr.Dataset(
        {"input_ids": (("sample", "token"), ids, {"long_name": "token id", "units": "1"})},
        coords={
            "sample": ("sample", np.arange(ids.shape[0]), {"long_name": "input sequence", "units": "1"}),
            "token": ("token", np.arange(ids.shape[1]), {"long_name": "token position", "units": "1"}),
        },
        attrs={"title": "san: token ids of the input sequences for one model's tokenizer"},
    )
    ds["input_ids"].attrs["tokenizer"] = read_manifest(folder).get("tokenizer", "model's own")
    origin = {
        f"text_{key}": corpus[key] for key in ("source", "dataset", "revision", "commit", "sha256") if key in corpus
    }
    write_netcdf(ds, snakemake.output[0], text, seed=text["seed"], input_sha256=digest, **origin)
