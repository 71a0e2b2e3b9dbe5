"""The vision section of summary.json: the claims of the vision literature checked on the image encoders' results
(:mod:`san.rank_collapse.vision`), and the numbers of the README's vision table.

Per model and weights, over the photographs (the noise images are the control and stay apart): the patch tokens'
high-frequency share ``||X - 1 mean(X)||_F / ||X||_F`` at the last layer over its layer-0 value per variant, the same
over all tokens, and Park & Kim's ``Δ log amplitude`` at the last layer. The verdicts: Wang et al.'s oversmoothing
at initialisation and Darcet et al.'s high-norm tokens where pretrained weights are present (otherwise not judged).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core.config import ConfigError
from san.rank_collapse.vision import high_norm_tokens_claim, oversmoothing_claim


def check_config(report: Mapping[str, Any]) -> None:
    """The vision thresholds: SAN's decay bound below SAN+skip's preservation bound (else one ratio could count as
    both decayed and preserved); raises :class:`ConfigError` naming the keys."""
    v = report["vision"]
    if v["decay_below"] >= v["preserved_above"]:
        raise ConfigError(
            f"report.vision.decay_below = {v['decay_below']} must be below report.vision.preserved_above = "
            f"{v['preserved_above']}"
        )


def _photos(ds: xr.Dataset) -> list[str]:
    return [i for i in map(str, ds["image"].values) if not i.startswith("noise")]


def per_model(results: Mapping[str, xr.Dataset]) -> dict[str, dict[str, Any]]:
    """Per model and weights: depth, the last-over-first patch and all-token high-frequency shares per variant (mean
    over the photographs and over the noise images) and the last layer's ``Δ log amplitude`` per variant."""
    out: dict[str, dict[str, Any]] = {}
    for model, ds in results.items():
        photos = _photos(ds)
        noise = [i for i in map(str, ds["image"].values) if i not in photos]
        for weights in map(str, ds["weights"].values):
            entry: dict[str, Any] = {"layers": int(ds.sizes["layer"]) - 1}
            for key, measure, images in (
                ("patch_share", "residual_ratio_frobenius_patches", photos),
                ("all_token_share", "residual_ratio_frobenius", photos),
                ("noise_patch_share", "residual_ratio_frobenius_patches", noise),
            ):
                values = ds[measure].sel(weights=weights, image=images) if images else None
                entry[key] = {
                    str(v): float((values.sel(variant=v).isel(layer=-1) / values.sel(variant=v).isel(layer=0)).mean())
                    for v in ds["variant"].values
                } if values is not None else None  # fmt: skip
            amp = ds["log_amplitude_difference"].sel(weights=weights, image=photos).isel(layer=-1)
            entry["log_amplitude_last"] = {str(v): float(np.nanmean(amp.sel(variant=v))) for v in ds["variant"].values}
            out.setdefault(model, {})[weights] = entry
    return out


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The ``vision`` section of summary.json (None without image encoders in the run): ``inputs["vision"]`` are the
    models' result files, in the order of ``params["vision_models"]``; thresholds from ``params["report"]``."""
    from san.core.storage import read_netcdf

    models = list(params.get("vision_models", []))
    if not models:
        return {"vision": None}
    results = dict(zip(models, map(read_netcdf, inputs["vision"]), strict=True))
    t = params["report"]["vision"]
    return {
        "vision": {
            **t,
            "models": models,
            "per_model": per_model(results),
            "verdicts": [oversmoothing_claim(results, t), high_norm_tokens_claim(results, t)],
        }
    }
