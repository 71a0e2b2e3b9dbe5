"""What the claims read from the result files (torch-free): per-layer curves of one weight set and variant, the
share of sink heads, the patch tokens' norms and their neighbours' similarity on the photographs.

The results are the rank-collapse job's (text: dims ``weights, variant, layer, sample``), the vision job's (images:
``weights, variant, layer, image``, ``token_norm`` with a ``token`` dim and its ``role`` flags) and the
context-length job's (``weights, seq_len, layer, ...``); a measure is averaged over the inputs (sequences or
photographs) before a claim reads its curve.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from san.measures.sink import sink_share
from san.phenomena.spec import UNMODIFIED

#: the input dimensions a layer's measure is averaged over
INPUT_DIMS = ("sample", "image")
#: the role flag of a patch token in the vision results (``role``'s ``flag_meanings``)
PATCH = "patch"
#: image names of the vision job's noise images (the control without spatial structure) start with this
NOISE_PREFIX = "noise"


def weight_sets(ds: xr.Dataset) -> set[str]:
    """The weight sets a result holds (``init``, ``pretrained``)."""
    return set(map(str, ds["weights"].values))


def variants(ds: xr.Dataset) -> set[str]:
    """The variants a result holds (none for a result of the unmodified model alone)."""
    return set(map(str, ds["variant"].values)) if "variant" in ds.dims else set()


def _select(da: xr.DataArray, weights: str, variant: str) -> xr.DataArray:
    da = da.sel(weights=weights)
    return da.sel(variant=variant) if "variant" in da.dims else da


def per_input(ds: xr.Dataset, name: str, weights: str, variant: str = UNMODIFIED) -> xr.DataArray:
    """Measure ``name`` of one weight set and variant (the unmodified model by default), per layer and input (the
    photographs only, for an image encoder's results: the noise images are the vision job's own control)."""
    da = _select(ds[name], weights, variant)
    if "image" in da.dims:
        da = da.sel(image=photographs(ds))
    return da


def curve(ds: xr.Dataset, name: str, weights: str, variant: str = UNMODIFIED) -> np.ndarray:
    """Measure ``name`` per layer, averaged over the inputs (:func:`per_input`): float array ``(layers + 1,)``."""
    da = per_input(ds, name, weights, variant)
    return np.asarray(da.mean([d for d in INPUT_DIMS if d in da.dims]), dtype=float)


#: the first-token attention of the rank-collapse and context-length results: per sequence, and its mean over them
BY_SAMPLE, MEAN = "first_token_attention_by_sample", "first_token_attention"


def attention_variable(ds: xr.Dataset) -> str:
    """The first-token attention a result keeps: per sequence (:data:`BY_SAMPLE`) where it has it, else the mean
    over the sequences (:data:`MEAN`)."""
    return BY_SAMPLE if BY_SAMPLE in ds else MEAN


def sink_curve(ds: xr.Dataset, weights: str, threshold: float, variant: str = UNMODIFIED) -> np.ndarray:
    """The share of sink heads per layer (:func:`san.measures.sink.sink_share`) of one weight set and variant, counted
    per input sequence (``first_token_attention_by_sample``: the heads one sequence makes sinks) and averaged over
    the inputs; from the attention averaged over the sequences (``first_token_attention``) where a result keeps no
    other."""
    share = sink_share(_select(ds[attention_variable(ds)], weights, variant), threshold)
    return np.asarray(share.mean([d for d in INPUT_DIMS if d in share.dims]), dtype=float)


def photographs(ds: xr.Dataset) -> list[str]:
    """The photographs among an image encoder's inputs (not the noise images)."""
    return [i for i in map(str, ds["image"].values) if not i.startswith(NOISE_PREFIX)]


def patch_tokens(ds: xr.Dataset) -> np.ndarray:
    """The token indices of the patches (``role`` flags of the vision results)."""
    meanings = str(ds["role"].attrs.get("flag_meanings", "")).split()
    flag = meanings.index(PATCH) if PATCH in meanings else None
    if flag is None:
        raise ValueError("the vision result names no patch role (role.flag_meanings)")
    return np.flatnonzero(np.asarray(ds["role"].values) == flag)


def patch_norms(ds: xr.Dataset, weights: str) -> np.ndarray:
    """The unmodified model's patch-token norms on the photographs: array ``(layers + 1, images, patches)``."""
    norms = per_input(ds, "token_norm", weights).isel(token=patch_tokens(ds))
    return np.asarray(norms.transpose("layer", "image", "token"), dtype=float)


def patch_similarity(ds: xr.Dataset, weights: str) -> np.ndarray:
    """Each patch's mean cosine similarity with its 4 neighbours on the patch grid at layer 0 on the photographs
    (``patch_neighbour_similarity``; "redundant" patches score high): array ``(images, patches)``."""
    sim = ds["patch_neighbour_similarity"].sel(weights=weights, image=photographs(ds))
    if "variant" in sim.dims:
        sim = sim.sel(variant=UNMODIFIED)
    return np.asarray(sim.isel(token=patch_tokens(ds)).transpose("image", "token"), dtype=float)


def mode(values: Any) -> tuple[int, int]:
    """The most frequent of integer ``values`` and how often it occurs."""
    found, counts = np.unique(np.asarray(values).ravel(), return_counts=True)
    return int(found[np.argmax(counts)]), int(counts.max())


def lacks(ds: xr.Dataset, names: tuple[str, ...], weights: tuple[str, ...], variant: str = UNMODIFIED) -> str:
    """Why a claim cannot read ``ds``: a missing weight set, variant or measure, in words; empty when nothing is."""
    missing = [w for w in weights if w not in weight_sets(ds)]
    if missing:
        return f"no {' or '.join(missing)} weights in this run"
    if "variant" in ds.dims and variant not in variants(ds):
        return f"no {variant} variant in this run"
    absent = [n for n in names if n not in ds]
    return f"the result has no {', '.join(absent)} (rerun its job)" if absent else ""
