"""Snakemake entry: share of paths of each length, C(L,k) H^k / (H+1)^L, for every listed architecture."""

import numpy as np
import xarray as xr

from san.jobs import job_log
from san.paths import path_counts, path_length_shares
from san.storage import write_netcdf

with job_log(snakemake.log[0]) as log:
    archs = snakemake.params.architectures
    max_len = max(a["layers"] for a in archs)
    share = np.full((len(archs), max_len + 1), np.nan)
    count = np.full((len(archs), max_len + 1), np.nan)
    for i, a in enumerate(archs):
        share[i, : a["layers"] + 1] = path_length_shares(a["layers"], a["heads"])
        count[i, : a["layers"] + 1] = [float(c) for c in path_counts(a["layers"], a["heads"])]
        mean = a["layers"] * a["heads"] / (a["heads"] + 1)
        log.info(
            "%s (L=%d, H=%d): mean path length %.2f, most common %d",
            a["name"],
            a["layers"],
            a["heads"],
            mean,
            int(np.nanargmax(share[i])),
        )
    layers = np.array([a["layers"] for a in archs])
    heads = np.array([a["heads"] for a in archs])
    ds = xr.Dataset(
        {
            "share": (
                ("architecture", "path_length"),
                share,
                {"long_name": "share of paths of this length, C(L,k) H^k / (H+1)^L (NaN beyond L)", "units": "1"},
            ),
            "count": (
                ("architecture", "path_length"),
                count,
                {"long_name": "number of paths of this length, C(L,k) H^k (float64)"},
            ),
            "n_layers": (("architecture",), layers, {"long_name": "self-attention layers L"}),
            "n_heads": (("architecture",), heads, {"long_name": "heads per layer H"}),
            "mean_path_length": (
                ("architecture",),
                layers * heads / (heads + 1),
                {"long_name": "expected length of a uniformly drawn path, L H / (H+1)"},
            ),
            "source": (("architecture",), [a["source"] for a in archs], {"long_name": "where the entry comes from"}),
        },
        coords={
            "architecture": [a["name"] for a in archs],
            "path_length": ("path_length", np.arange(max_len + 1), {"long_name": "layers where a path takes a head"}),
        },
    )
    write_netcdf(ds, snakemake.output[0], {"architectures": archs})
