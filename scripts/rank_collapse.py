"""Snakemake entry: relative residual per layer for every weights x variant of one model (Fig. 2)."""

import numpy as np
import torch
import xarray as xr

from san.device import resolve_device, resolve_dtype, set_threads
from san.jobs import job_log
from san.models import load_model, read_manifest
from san.rank_collapse import residuals_by_variant
from san.storage import read_netcdf, write_netcdf

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    p = snakemake.params
    s = p.settings
    device, dtype = resolve_device(p.device), resolve_dtype(s["dtype"])
    data, manifests, hashes = [], {}, {}
    for weights, folder, inputs in zip(p.weights, snakemake.input.models, snakemake.input.inputs, strict=True):
        ids_ds = read_netcdf(inputs)
        ids = torch.as_tensor(ids_ds["input_ids"].values)
        model = load_model(folder, p.family, dtype).to(device)
        log.info("%s weights on %s in %s: %s", weights, device, dtype, type(model).__name__)
        data.append(residuals_by_variant(model, p.family, ids, s["variants"], s["batch_size"], s["albert_no_mlp"]))
        manifests[weights] = read_manifest(folder)
        hashes[weights] = ids_ds.attrs["input_sha256"]
        del model
    arr = np.stack(data)
    ds = xr.Dataset(
        {
            "residual_ratio": (
                ("weights", "variant", "layer", "sample"),
                arr,
                {
                    "long_name": "relative residual ||res(X_l)||_{1,inf} / ||X_l||_{1,inf}",
                    "units": "1",
                    "description": "res(X) = X - 1 mean_tokens(X); layer 0 is the input of the first layer",
                },
            )
        },
        coords={
            "weights": list(p.weights),
            "variant": list(s["variants"]),
            "layer": ("layer", np.arange(arr.shape[2]), {"long_name": "layer index", "units": "1"}),
            "sample": ("sample", np.arange(arr.shape[3]), {"long_name": "input sequence", "units": "1"}),
        },
    )
    means = ds["residual_ratio"].mean("sample")
    log.info("per-layer means:\n%s", means.to_pandas().to_string() if means.ndim <= 2 else means)
    write_netcdf(
        ds,
        snakemake.output[0],
        {"family": p.family, **s},
        model=snakemake.wildcards.model,
        device=str(device),
        manifests=manifests,
        input_sha256=hashes,
    )
