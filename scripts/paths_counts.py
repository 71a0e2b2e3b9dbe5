"""Snakemake entry: share of paths of each length, C(L,k) H^k / (H+1)^L, for every listed architecture."""

import numpy as np

from san.core.jobs import job_log
from san.core.storage import write_netcdf
from san.paths.counts import length_distribution

with job_log(snakemake.log[0]) as log:
    archs = snakemake.params.architectures
    ds = length_distribution(archs)
    for name, row in zip(ds["architecture"].values, ds["share"].values, strict=True):
        arch = ds.sel(architecture=name)
        log.info(
            "%s (L=%d, H=%d): mean path length %.2f, most common %d",
            name,
            int(arch["n_layers"]),
            int(arch["n_heads"]),
            float(arch["mean_path_length"]),
            int(np.nanargmax(row)),
        )
    write_netcdf(ds, snakemake.output[0], {"architectures": archs})
