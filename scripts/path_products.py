"""Snakemake entry: rank-1 residual of attention products along sampled paths (appendix figure)."""

import numpy as np
import torch
import xarray as xr

from san.device import resolve_device, resolve_dtype, set_threads
from san.jobs import job_log
from san.models import load_model, read_manifest
from san.rank_collapse import attention_matrices, path_product_residuals
from san.storage import read_netcdf, write_netcdf

with job_log(snakemake.log[0]) as log:
    set_threads(snakemake.threads)
    p = snakemake.params
    s = p.settings
    device, dtype = resolve_device(p.device), resolve_dtype(s["dtype"])
    results, manifests = [], {}
    for weights, folder, inputs in zip(p.weights, snakemake.input.models, snakemake.input.inputs, strict=True):
        ids = torch.as_tensor(read_netcdf(inputs)["input_ids"].values)[: s["n_sequences"]]
        model = load_model(folder, p.family, dtype).to(device)
        attn = attention_matrices(model, ids, p.batch_size)
        results.append(path_product_residuals(attn, s["n_paths"], s["seed"]))
        manifests[weights] = read_manifest(folder)
        log.info("%s: median rank-1 residual by depth %s", weights, np.median(results[-1]["rank1"], axis=1))
        del model, attn
    dims = ("weights", "depth", "path")
    ds = xr.Dataset(
        {
            "rank1_residual": (
                dims,
                np.stack([r["rank1"] for r in results]),
                {"long_name": "relative residual of the best rank-1 approximation ||P - P_1||_F / ||P||_F",
                 "units": "1"},
            ),
            "uniformity_residual": (
                dims,
                np.stack([r["uniformity"] for r in results]),
                {"long_name": "relative residual ||P - 1 mean_rows(P)||_{1,inf} / ||P||_{1,inf}", "units": "1"},
            ),
            "sequence": (dims, np.stack([r["sequence"] for r in results]), {"long_name": "input sequence index"}),
        },
        coords={
            "weights": list(p.weights),
            "depth": ("depth", np.arange(1, results[0]["rank1"].shape[0] + 1), {"long_name": "path length"}),
            "path": np.arange(s["n_paths"]),
        },
    )
    write_netcdf(
        ds,
        snakemake.output[0],
        {"family": p.family, **s},
        seed=s["seed"],
        model=snakemake.wildcards.model,
        device=str(device),
        manifests=manifests,
    )
