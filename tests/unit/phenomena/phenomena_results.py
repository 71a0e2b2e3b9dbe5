"""Synthetic results with the names and dims of the rank-collapse, vision and context-length jobs, for the pretrained
phenomena's claims: every curve is given per weight set (and variant), the rest is a flat default."""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import xarray as xr

from san.claims import verdicts as V

FAMILY = {"decoder": "llama", "encoder": "bert", "image encoder": "dinov2"}
#: flat defaults of the text measures (per layer)
TEXT_DEFAULTS = {
    "residual_ratio": 0.5,
    "residual_ratio_no_massive": 0.5,
    "massive_ratio": 5.0,
    "first_token_norm_ratio": 1.0,
    "matrix_entropy": 0.8,
    "sigma1_share": 0.5,
}
#: the report settings of config.yaml (the schema's defaults)
REPORT = {
    "first_token_sink": {"share_threshold": 0.3, "min_decades": 0.1},
    "phenomena": {
        # onsets at the scale of the synthetic curves (ratios 5 to 500), not at config.yaml's 1,000
        "massive": {"onset_ratio": 100.0, "onset_sensitivity": [20.0, 400.0], "jump": 10.0, "one_block_share": 0.7,
                    "plateau": 3.0, "tail": 2, "spread_control": 1.0,
                    "transient_control": 1.0},
        "colocation": {"window": 3, "norm_decades": 0.5, "entropy_drop": 0.2, "sink_share": 0.5,
                       "sensitivity": [0.5, 2.0], "delay_control": 1.0},
        "compression": {"compressed": 0.9, "not_collapsed": 1.0e-3, "collapse_control": 1.0},
        "context": {"growth": 0.05, "sigmas": 2.0, "init_control": 1.0, "dilution_control": 1.0},
        "size": {"growth": 0.05, "sigmas": 2.0, "depth_profile_control": 1.0},
        "high_norm": {"factor": 4.0, "min_share": 0.01, "small_max_layers": 12, "redundant": 0.05, "sigmas": 2.0,
                      "tail_control": 1.0, "random_control": 1.0, "control_seed": 0, "control_draws": 20},
    },
}  # fmt: skip


def attrs(kind: str) -> dict[str, str]:
    """The attributes a job writes: its config slice naming the family."""
    return {"config": json.dumps({"family": FAMILY[kind]})}


def text_result(
    kind: str = "decoder",
    curves: Mapping[tuple[str, str], Mapping[str, np.ndarray]] | None = None,
    alpha: Mapping[tuple[str, str], np.ndarray] | None = None,
    *,
    layers: int = 8,
    samples: int = 3,
    heads: int = 4,
    weights: tuple[str, ...] = ("init", "pretrained"),
    variants: tuple[str, ...] = ("SAN", "transformer"),
) -> xr.Dataset:
    """A rank-collapse result: per (weights, variant), the curves of ``curves`` (per layer, 0 .. ``layers``; the
    sequences differ by 1 % steps around it) over :data:`TEXT_DEFAULTS`, and the first-token attention of ``alpha`` (per
    layer, or per layer and head; 0.1 by default, NaN at layer 0)."""
    curves, alpha = curves or {}, alpha or {}
    shape = (len(weights), len(variants), layers + 1, samples)
    spread = 1.0 + 0.01 * (np.arange(samples) - (samples - 1) / 2)  # the mean over the sequences is the curve
    data = {name: np.empty(shape) for name in TEXT_DEFAULTS}
    att = np.full((len(weights), len(variants), layers + 1, heads), 0.1)
    for i, w in enumerate(weights):
        for j, v in enumerate(variants):
            for name, default in TEXT_DEFAULTS.items():
                values = np.broadcast_to(np.asarray(curves.get((w, v), {}).get(name, default), float), (layers + 1,))
                data[name][i, j] = values[:, None] * spread
            if (w, v) in alpha:
                a = np.asarray(alpha[(w, v)], float)
                att[i, j] = a if a.ndim == 2 else a[:, None]
    att[:, :, 0] = np.nan
    dims = ("weights", "variant", "layer", "sample")
    ds = xr.Dataset(
        {**{n: (dims, x) for n, x in data.items()}, "first_token_attention": (dims[:3] + ("head",), att),
         "massive_token": (dims, np.zeros(shape, dtype=np.int64)), "massive_dim": (dims, np.full(shape, 7))},
        coords={"weights": list(weights), "variant": list(variants), "layer": np.arange(layers + 1),
                "sample": np.arange(samples), "head": np.arange(heads)},
        attrs=attrs(kind),
    )  # fmt: skip
    return ds


def vision_result(
    norms: Mapping[str, np.ndarray], similarity: np.ndarray | None = None, *, layers: int = 4, images: int = 3
) -> xr.Dataset:
    """A vision result: ``token_norm`` of the unmodified model per weight set from ``norms`` (array ``(layers + 1,
    images, patches)``; the class token's norm 1, a noise image after the photographs, the SAN variant a copy), and
    ``patch_neighbour_similarity`` (``(images, patches)``, the same for both weight sets; NaN at the class token)."""
    weights = list(norms)
    patches = next(iter(norms.values())).shape[-1]
    tokens = patches + 1
    names = [f"photo{i}" for i in range(images)] + ["noise0"]
    arr = np.ones((len(weights), 2, layers + 1, images + 1, tokens))
    for i, w in enumerate(weights):
        arr[i, :, :, :images, 1:] = norms[w]
    sim = np.full((len(weights), images + 1, tokens), np.nan)
    if similarity is not None:
        sim[:, :images, 1:] = similarity
        sim[:, images, 1:] = 0.0
    dims = ("weights", "variant", "layer", "image")
    ds = xr.Dataset(
        {"token_norm": ((*dims, "token"), arr), "patch_neighbour_similarity": (("weights", "image", "token"), sim)},
        coords={"weights": weights, "variant": ["SAN", "transformer"], "layer": np.arange(layers + 1), "image": names,
                "token": np.arange(tokens), "role": ("token", np.array([0] + [3] * patches, dtype=np.int8))},
        attrs=attrs("image encoder"),
    )  # fmt: skip
    ds["role"].attrs.update(flag_values=np.arange(4, dtype=np.int8), flag_meanings="class distillation register patch")
    if similarity is None:
        ds = ds.drop_vars("patch_neighbour_similarity")
    return ds


def context_result(
    alpha: Mapping[str, np.ndarray], seq_lens: tuple[int, ...] = (16, 32, 64), *, layers: int = 4, heads: int = 4
) -> xr.Dataset:
    """A context-length run: the attention on the first token per weight set from ``alpha`` (array ``(seq_lens,
    samples)``, the same on every layer and head; NaN at layer 0), per sequence (``first_token_attention_by_sample``)
    and its mean over the sequences (``first_token_attention``)."""
    weights = list(alpha)
    samples = np.asarray(next(iter(alpha.values()))).shape[1]
    arr = np.empty((len(weights), len(seq_lens), layers + 1, samples, heads))
    for i, w in enumerate(weights):
        arr[i] = np.asarray(alpha[w], float)[:, None, :, None]
    arr[:, :, 0] = np.nan
    dims = ("weights", "seq_len", "layer", "sample", "head")
    return xr.Dataset(
        {"first_token_attention_by_sample": (dims, arr),
         "first_token_attention": (dims[:3] + dims[4:], arr.mean(axis=3))},
        coords={"weights": weights, "seq_len": np.asarray(seq_lens, dtype=np.int64), "layer": np.arange(layers + 1),
                "head": np.arange(heads), "sample": np.arange(samples)},
        attrs=attrs("decoder"),
    )  # fmt: skip


def assert_rederived(row: Mapping) -> None:
    """The row's verdict follows from its own numbers."""
    assert V.rederive(row) == [], V.rederive(row)
