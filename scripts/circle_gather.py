"""Snakemake entry: gather the circle runs into results/circle.nc (dims variant, hidden_dim, seed, ...)."""

import json

from san.circle.results import describe_variables, gather
from san.circle.spec import chunk_seeds
from san.core.jobs import job_log
from san.core.storage import read_netcdf, write_netcdf

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    runs, seconds = {}, {}
    for (variant, hidden_dim, label), path in zip(p.jobs, snakemake.input.runs, strict=True):
        ds = read_netcdf(path)
        found = (ds.attrs["variant"], int(ds.attrs["hidden_dim"]), [int(s) for s in ds["seed"].values])
        if found != (variant, hidden_dim, chunk_seeds(label)):  # guard against a mismatch of paths and keys
            raise ValueError(f"run file {path} holds {found}")
        for seed, secs in json.loads(ds.attrs["train_seconds"]).items():
            runs[(variant, hidden_dim, int(seed))] = ds.sel(seed=int(seed), drop=True)
            seconds[f"{variant}/d{hidden_dim}/seed{seed}"] = secs
    ds = describe_variables(gather(runs), p.settings["data"]["n_points"], p.settings["data"]["radius"])
    final = ds["token_distance"].isel(step=-1).median("seed").to_pandas()
    log.info("median final token distance over seeds:\n%s", final.to_string())
    write_netcdf(ds, snakemake.output[0], p.settings, device=p.device, seeds=list(p.seeds), train_seconds=seconds)
