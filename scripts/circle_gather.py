"""Snakemake entry: gather the circle runs into results/circle.nc (dims variant, hidden_dim, seed, ...)."""

from itertools import product

from san.circle_results import describe_variables, gather
from san.jobs import job_log
from san.storage import read_netcdf, write_netcdf

with job_log(snakemake.log[0]) as log:
    p = snakemake.params
    keys = list(product(p.variants, p.hidden_dims, p.seeds))  # the order of expand() in the rule
    runs = {key: read_netcdf(path) for key, path in zip(keys, snakemake.input.runs, strict=True)}
    for (v, d, s), ds in runs.items():  # guard against a mismatch of paths and keys
        found = (ds.attrs["variant"], int(ds.attrs["hidden_dim"]), int(ds.attrs["seed"]))
        if found != (v, d, s):
            raise ValueError(f"run file for {(v, d, s)} holds {found}")
    seconds = {f"{v}/d{d}/seed{s}": float(ds.attrs["train_seconds"]) for (v, d, s), ds in runs.items()}
    ds = gather(runs)
    ds = describe_variables(ds, p.settings["data"]["n_points"], p.settings["data"]["radius"])
    final = ds["token_distance"].isel(step=-1).median("seed").to_pandas()
    log.info("median final token distance over seeds:\n%s", final.to_string())
    write_netcdf(ds, snakemake.output[0], p.settings, device=p.device, seeds=list(p.seeds), train_seconds=seconds)
