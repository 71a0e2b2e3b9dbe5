"""The distribution of path lengths of common architectures (the paper's Fig. 4, right): ``C(L, k) H^k / (H+1)^L``.

Free of torch, so its job starts fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from san.core.storage import describe
from san.paths.results import VARIABLES
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
    ds = xr.Dataset(
        {
            "share": (("architecture", "path_length"), share),
            "count": (("architecture", "path_length"), count),
            "n_layers": (("architecture",), layers),
            "n_heads": (("architecture",), heads),
            "mean_path_length": (("architecture",), layers * heads / (heads + 1)),
            "source": (("architecture",), [a["source"] for a in architectures]),
        },
        coords={"architecture": [a["name"] for a in architectures], "path_length": np.arange(max_len + 1)},
        attrs={"title": "san: path-length distribution of common architectures (Dong et al. 2021, Fig. 4)"},
    )
    return describe(ds, VARIABLES)
