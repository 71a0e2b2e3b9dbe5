"""The distribution of path lengths of common architectures (the paper's Fig. 4, right): ``C(L, k) H^k / (H+1)^L``.

Free of torch, so its job starts fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from san.paths.spec import path_counts, path_length_shares


def length_distribution(architectures: Sequence[dict[str, Any]]) -> xr.Dataset:
    """Share and count of paths of each length for every architecture ``{name, layers, heads, source}``, padded
    with NaN beyond an architecture's depth, with its mean path length ``L H / (H+1)``."""
    max_len = max(a["layers"] for a in architectures)
    share = np.full((len(architectures), max_len + 1), np.nan)
    count = np.full((len(architectures), max_len + 1), np.nan)
    for i, a in enumerate(architectures):
        share[i, : a["layers"] + 1] = path_length_shares(a["layers"], a["heads"])
        count[i, : a["layers"] + 1] = [float(c) for c in path_counts(a["layers"], a["heads"])]
    layers = np.array([a["layers"] for a in architectures])
    heads = np.array([a["heads"] for a in architectures])
    return xr.Dataset(
        {
            "share": (
                ("architecture", "path_length"),
                share,
                {"long_name": "share of paths of this length, C(L,k) H^k / (H+1)^L (NaN beyond L)", "units": "1"},
            ),
            "count": (
                ("architecture", "path_length"),
                count,
                {"long_name": "number of paths of this length, C(L,k) H^k (float64)", "units": "1"},
            ),
            "n_layers": (("architecture",), layers, {"long_name": "self-attention layers L", "units": "1"}),
            "n_heads": (("architecture",), heads, {"long_name": "heads per layer H", "units": "1"}),
            "mean_path_length": (
                ("architecture",),
                layers * heads / (heads + 1),
                {"long_name": "expected length of a uniformly drawn path, L H / (H+1)", "units": "1"},
            ),
            "source": (
                ("architecture",),
                [a["source"] for a in architectures],
                {"long_name": "where the entry comes from", "units": "1"},
            ),
        },
        coords={
            "architecture": (
                "architecture",
                [a["name"] for a in architectures],
                {"long_name": "architecture name", "units": "1"},
            ),
            "path_length": (
                "path_length",
                np.arange(max_len + 1),
                {"long_name": "layers where a path takes a head", "units": "1"},
            ),
        },
        attrs={"title": "san: path-length distribution of common architectures (Dong et al. 2021, Fig. 4)"},
    )
