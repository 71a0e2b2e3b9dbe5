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

from san.core import verdicts as V
from san.core.config import ConfigError


def check_config(report: Mapping[str, Any]) -> None:
    """The vision thresholds: SAN's decay bound below SAN+skip's preservation bound (else one ratio could count as
    both decayed and preserved); raises :class:`ConfigError` naming the keys."""
    v = report["vision"]
    if v["decay_below"] >= v["preserved_above"]:
        raise ConfigError(
            f"report.vision.decay_below = {v['decay_below']} must be below report.vision.preserved_above = "
            f"{v['preserved_above']}"
        )


def _last_over_first(ds: xr.Dataset, weights: str, name: str, measure: str) -> np.ndarray:
    """A measure's last layer over its layer 0, per image, for one weight set and variant."""
    values = ds[measure].sel(weights=weights, variant=name).values
    return values[-1] / values[0]


def oversmoothing_claim(results: Mapping[str, xr.Dataset], report: Mapping[str, Any]) -> dict[str, Any]:
    """Wang et al. (ICLR 2022), Sec. 3: the high-frequency share of pure attention decays with depth and the skip
    connection preserves it, at initialisation. Per model and image, SAN's patch high-frequency share
    (``residual_ratio_frobenius_patches``) falls below ``report["decay_below"]`` times its layer-0 value and
    SAN+skip's stays above ``report["preserved_above"]`` times it. Positive control: the same test with the two
    variants swapped (SAN+skip as the pure attention), which must fail. Not judged without init weights of both
    variants."""

    def check(pure: str, skip: str) -> tuple[bool | None, float]:
        verdicts, decays = [], []
        for ds in results.values():
            variants = set(map(str, ds["variant"].values))
            if "init" not in ds["weights"].values or not {pure, skip} <= variants:
                continue
            decay = _last_over_first(ds, "init", pure, "residual_ratio_frobenius_patches")
            kept = _last_over_first(ds, "init", skip, "residual_ratio_frobenius_patches")
            verdicts.append(bool(np.all(decay < report["decay_below"]) and np.all(kept > report["preserved_above"])))
            decays.extend(decay.tolist())
        return (V.every(verdicts) if verdicts else None), (max(decays) if decays else float("nan"))

    holds, worst = check("SAN", "SAN+skip")
    wrong, _ = check("SAN+skip", "SAN")
    return V.row(
        "oversmoothing",
        "the high-frequency share of pure attention decays with depth, and the skip connection preserves it",
        kind=V.SCIENTIFIC, form=V.UNIVERSAL, source="Wang et al. 2022 (ICLR), Sec. 3 and Fig. 1", holds=holds,
        value=worst, test=f"SAN's last/first patch share < {report['decay_below']} and SAN+skip's > "
        f"{report['preserved_above']}, every image and model at init",
        positive_control=V.control("SAN and SAN+skip swapped", None, wrong),
    )  # fmt: skip


def high_norm_tokens_claim(results: Mapping[str, xr.Dataset], report: Mapping[str, Any]) -> dict[str, Any]:
    """Darcet et al. (ICLR 2024), Sec. 2: large pretrained ViTs hold a few high-norm tokens. Per model with
    pretrained weights, the unmodified model's last layer has a token whose norm exceeds ``report["high_norm"]``
    times the median token norm, in some photograph. Positive control: the same test against the threshold
    multiplied by ``report["high_norm_control_factor"]``, which must fail. Not judged without pretrained weights."""

    def check(threshold: float) -> tuple[bool | None, float]:
        ratios = []
        for ds in results.values():
            if "pretrained" not in ds["weights"].values or "transformer" not in ds["variant"].values:
                continue
            photos = [i for i in map(str, ds["image"].values) if not i.startswith("noise")]
            norms = ds["token_norm"].sel(weights="pretrained", variant="transformer", image=photos).values[-1]
            ratios.append(float(np.max(norms.max(axis=-1) / np.median(norms, axis=-1))))
        if not ratios:
            return None, float("nan")
        return bool(max(ratios) > threshold), max(ratios)

    holds, value = check(report["high_norm"])
    wrong, _ = check(report["high_norm"] * report["high_norm_control_factor"])
    return V.row(
        "high_norm_tokens",
        "large pretrained ViTs hold a few high-norm tokens",
        kind=V.SCIENTIFIC, form=V.EXISTENTIAL, source="Darcet et al. 2024 (ICLR), Sec. 2 and Fig. 3", holds=holds,
        value=value, test=f"largest token norm > {report['high_norm']} x the median at the last layer",
        detail="" if holds is not None else "not judged: no pretrained weights in this run",
        positive_control=V.control(
            "threshold times high_norm_control_factor", report["high_norm_control_factor"], wrong
        ),
    )  # fmt: skip


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
            # -inf where pure attention left no amplitude at the highest frequency: None (JSON has no infinity)
            means = {str(v): float(np.mean(amp.sel(variant=v))) for v in ds["variant"].values}
            entry["log_amplitude_last"] = {v: m if np.isfinite(m) else None for v, m in means.items()}
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
