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

from san.claims import verdicts as V
from san.claims.drift import apply_row_drift, row_drift
from san.claims.record import Claim, NearMiss, Scope, Settings, item
from san.claims.verdicts import moved
from san.core.config import ConfigError

#: the control settings of ``report.vision``: how far the data are moved toward each row's wrong theory
CONTROLS = ("constant_rate_control", "init_twin_control")


def check_config(report: Mapping[str, Any]) -> None:
    """The vision thresholds: SAN's decay bound below SAN+skip's preservation bound (else one ratio could count as
    both decayed and preserved), every control setting positive (at 0 the control is the claim's own test), and a
    threshold note only for a key of ``report.vision``; raises :class:`ConfigError` naming the keys."""
    v = report["vision"]
    if v["decay_below"] >= v["preserved_above"]:
        raise ConfigError(
            f"report.vision.decay_below = {v['decay_below']} must be below report.vision.preserved_above = "
            f"{v['preserved_above']}"
        )
    for key in CONTROLS:
        if not v[key] > 0:
            raise ConfigError(f"report.vision.{key} = {v[key]} must be positive (1: the data moved all the way)")
    unknown = sorted(set(v["threshold_notes"]) - set(v) - {"threshold_notes"})
    if unknown:
        raise ConfigError(f"report.vision.threshold_notes names keys that report.vision lacks: {unknown}")


def _share(ds: xr.Dataset, name: str) -> np.ndarray:
    """The patch high-frequency share of ``name``'s init weights, per layer and image."""
    return ds["residual_ratio_frobenius_patches"].sel(weights="init", variant=name).values


def smoothing_items(results: Mapping[str, xr.Dataset]) -> list[dict[str, Any]]:
    """Per model with init weights of SAN and SAN+skip and per image: SAN's and SAN+skip's last-layer patch share
    over its layer-0 value, and what a SAN+skip decaying at the constant per-layer rate of its first block predicts
    for the latter, ``(share_1 / share_0)^L`` over ``L`` layers."""
    items = []
    for model, ds in results.items():
        if "init" not in ds["weights"].values or not {"SAN", "SAN+skip"} <= set(map(str, ds["variant"].values)):
            continue
        pure, skip = _share(ds, "SAN"), _share(ds, "SAN+skip")
        layers = pure.shape[0] - 1
        for i, image in enumerate(map(str, ds["image"].values)):
            rate = skip[1, i] / skip[0, i]
            items.append({"item": f"{model} {image}", "decay": pure[-1, i] / pure[0, i],
                          "kept": skip[-1, i] / skip[0, i], "constant_rate": rate**layers})  # fmt: skip
    return items


def _both_halves(item: Mapping[str, Any], kept: float, report: Mapping[str, Any]) -> V.Measure:
    """The claim's two halves on one image as one measure against ``preserved_above`` in decades: SAN+skip's share
    ``kept`` where its half clears least, else the value whose margin is SAN's (``log10(decay_below / decay)``)."""
    with np.errstate(divide="ignore"):
        pure_margin = float(np.log10(report["decay_below"]) - np.log10(item["decay"]))
        skip_margin = float(np.log10(kept) - np.log10(report["preserved_above"])) if kept > 0 else -np.inf
    if skip_margin <= pure_margin:
        return V.Measure(float(kept), item=f"{item['item']}: SAN+skip")
    return V.Measure(float(report["preserved_above"] * 10**pure_margin), item=f"{item['item']}: SAN")


def oversmoothing_claim(results: Mapping[str, xr.Dataset], report: Mapping[str, Any]) -> dict[str, Any]:
    """Wang et al. (ICLR 2022), Sec. 3: the high-frequency share of pure attention decays with depth and the skip
    connection preserves it, at initialisation. Per model and image, SAN's patch high-frequency share
    (``residual_ratio_frobenius_patches``) falls below ``report["decay_below"]`` times its layer-0 value and
    SAN+skip's stays above ``report["preserved_above"]`` times it (:func:`_both_halves`: the half that clears least,
    in decades). Positive control: SAN+skip moved ``report["constant_rate_control"]`` of the way toward a decay at
    the constant per-layer rate of its first block (:func:`smoothing_items`): "the skip only slows the decay". Not
    judged without init weights of both variants. A threshold changed after a result was seen says so in the detail
    (``report["threshold_notes"]``)."""
    items = smoothing_items(results)
    threshold = V.Threshold(report["preserved_above"], above=True, key="report.vision.preserved_above", log=True)

    def statistic(s: float) -> V.Measure:
        return V.worst([_both_halves(i, moved(i["kept"], i["constant_rate"], s, log=True), report) for i in items],
                       threshold)  # fmt: skip

    notes = "; ".join(f"report.vision.{k}: {t}" for k, t in report["threshold_notes"].items())
    numbers = ", ".join(f"{i['item']} {i['kept']:.2f} (constant rate {i['constant_rate']:.2f}, SAN {i['decay']:.1e})"
                        for i in items)  # fmt: skip
    return V.check(
        "oversmoothing",
        "the high-frequency share of pure attention decays with depth, and the skip connection preserves it",
        form=V.UNIVERSAL, source="Wang et al. 2022 (ICLR), Sec. 3 and Fig. 1",
        test=f"SAN's last/first patch share < {report['decay_below']:g} and SAN+skip's > "
        f"{report['preserved_above']:g}, every image and model at init (margin in decades, of the half that clears "
        "least)",
        statistic=statistic, threshold=threshold,
        wrong=V.Wrong.toward("SAN+skip decaying at its first block's constant rate (the data moved {s:g} of the way "
                             "to it)", report["constant_rate_control"], "report.vision.constant_rate_control"),
        detail=f"SAN+skip last/first per image: {numbers}" + (f". Threshold history: {notes}" if notes else ""),
    )  # fmt: skip


def _norm_ratio(ds: xr.Dataset, weights: str) -> float:
    """The unmodified model's largest last-layer token norm over the median, the largest over the photographs, with
    ``weights``; NaN without them."""
    if weights not in ds["weights"].values or "transformer" not in ds["variant"].values:
        return float("nan")
    norms = ds["token_norm"].sel(weights=weights, variant="transformer", image=_photos(ds)).values[-1]
    return float(np.max(norms.max(axis=-1) / np.median(norms, axis=-1)))


def high_norm_tokens_claim(results: Mapping[str, xr.Dataset], report: Mapping[str, Any]) -> dict[str, Any]:
    """Darcet et al. (ICLR 2024), Sec. 2: large pretrained ViTs hold a few high-norm tokens. Judged only on the
    image encoders in its scope, those with pretrained weights of at least ``report["large_min_layers"]`` blocks
    (ViT-L and above); not judged, saying what it needs, on a run without one (a small ViT speaks to
    ``phenomena.small_vit_high_norm``, not to this claim). Some such model has, in some photograph, a last-layer
    token whose norm exceeds ``report["high_norm"]`` times the median token norm of the unmodified model (in
    decades). Placebo: the random-init twin (high-norm tokens as a property of the architecture, present before
    training): each model's ratio moved ``report["init_twin_control"]`` of the way toward its init weights' (not
    judged without them)."""
    r = Settings("report.vision", report)
    large = r["large_min_layers"]
    claim = Claim(
        key="high_norm_tokens", statement="large pretrained ViTs hold a few high-norm tokens",
        words="high-norm outlier tokens appear in large models (ViT-L and above), around the middle of training",
        source="Darcet et al. 2024 (ICLR)", place="Sec. 2 and Fig. 3", form=V.EXISTENTIAL,
        scope=Scope(("image encoder",), sizes=f">= {large} blocks (ViT-L/14: 24 blocks, 304M parameters)",
                    training="pretrained",
                    needs=f"needs a pretrained ViT with >= 300M parameters (at least {large} blocks): "
                    "config/vision.yaml adds one (dinov2-large-facebook)"),
        measure="the largest last-layer token norm over the median token norm, per photograph",
        test=f"largest token norm > {r['high_norm']:g} x the median at the last layer, in some photograph of some "
        f"pretrained model of at least {large} blocks (margin in decades)",
        threshold=r.threshold("high_norm", above=True, log=True),
        near_miss=NearMiss(r.wrong("init_twin_control", "the random-init twin (the data moved {s:g} of the way to "
                                   "it)"),
                           "high norms could be a property of the architecture, present before training"),
        placebo="the random-init twin",
    )  # fmt: skip
    pairs = {m: (_norm_ratio(ds, "pretrained"), _norm_ratio(ds, "init")) for m, ds in results.items()}
    pairs = {m: p for m, p in pairs.items() if np.isfinite(p[0])}
    depth = {m: int(results[m].sizes["layer"]) - 1 for m in pairs}
    small = {m: p for m, p in pairs.items() if depth[m] < large}
    pairs = {m: p for m, p in pairs.items() if depth[m] >= large}
    if not pairs:
        found = "; ".join(f"{m}: {depth[m]} blocks, ratio {p:.3g}" for m, (p, _) in small.items())
        return claim.not_in_scope(f"this run's pretrained image encoders: {found}" if found else
                                  "no pretrained image encoder in this run")  # fmt: skip

    def statistic(s: float) -> V.Measure:
        values = {m: moved(pre, init, s, log=True) for m, (pre, init) in pairs.items()}
        finite = {m: v for m, v in values.items() if np.isfinite(v)}
        if not finite or len(finite) < len(values):  # a model without its init twin leaves the control unjudged
            return V.Measure(float("nan"), evidence=0)
        best = max(finite, key=finite.get)
        return V.Measure(finite[best], evidence=len(finite), item=best)

    detail = "; ".join(f"{m}: pretrained {p:.3g}, init {i:.3g}" for m, (p, i) in pairs.items())
    if small:
        detail += "; out of scope (fewer blocks): " + ", ".join(small)
    rested = [item(m, p, "x median", blocks=depth[m]) for m, (p, _) in pairs.items()]
    return claim.judge(statistic, detail, rested)


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
    models' result files, in the order of ``params["vision_models"]``; thresholds from ``params["report"]``. A row
    on the weights of an image encoder with the quantisation control (``inputs["quantisation"]``, in the order of
    ``params["quantisation_models"]``; those of other kinds left out) carries the drift of its margin and prints
    "within quantisation drift" where the margin is no larger (:func:`san.claims.drift.row_drift`)."""
    from san.core.storage import read_netcdf

    models = list(params.get("vision_models", []))
    if not models:
        return {"vision": None}
    results = dict(zip(models, map(read_netcdf, inputs["vision"]), strict=True))
    t = params["report"]["vision"]
    verdicts = _verdicts(results, t)
    named = zip(params.get("quantisation_models", []), inputs.get("quantisation", []), strict=True)
    controls = {name: read_netcdf(file) for name, file in named if name in results}
    if controls:
        margins = row_drift(results, controls, lambda r: {v["key"]: v.get("margin") for v in _verdicts(r, t)})
        apply_row_drift(verdicts, margins)
    return {"vision": {**t, "models": models, "per_model": per_model(results), "verdicts": verdicts}}


def _verdicts(results: Mapping[str, xr.Dataset], t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The wing's verdict rows on the image encoders' ``results`` with the thresholds ``t`` (config
    ``report.vision``)."""
    return [oversmoothing_claim(results, t), high_norm_tokens_claim(results, t)]
