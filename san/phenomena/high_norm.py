"""High-norm patch tokens in a small pretrained ViT: Darcet, Oquab, Mairal & Bojanowski (ICLR 2024), "Vision
transformers need registers", Sec. 2, Fig. 4: such outliers appear in large models only (ViT-L, -H, -g), around the
middle of the model, in patches that are redundant with their neighbours (Fig. 5a: high cosine similarity with the 4
neighbours right after the patch embedding); Bach et al. (TMLR 2025, "Registers in small vision transformers"):
"smaller ViTs also exhibit high-norm tokens".

On the pretrained image encoders of at most ``report.phenomena.high_norm.small_max_layers`` blocks (ViT-S and ViT-B
have 12; Darcet et al.'s large ones 24 and more), unmodified, on the photographs; an outlier is a patch whose norm
exceeds ``report.phenomena.high_norm.factor`` times its image's median patch norm at that layer:

- **exist** (Bach against Darcet): some block output holds a share of outlier patches of at least
  ``report.phenomena.high_norm.min_share`` (mean over the photographs). Near miss: no outlier population, only the
  upper tail of one lognormal norm distribution (Darcet et al.'s Fig. 3 shows the outliers as a second mode): per
  image and block, the share a lognormal with the image's median and robust log-spread puts above the factor
  (:func:`tail_shares`). The random-init twin's largest share is reported beside it, as is the first block with
  outliers.
- **redundant patches** (Darcet, Fig. 5a): at the block with the most outliers, the outliers' neighbour similarity
  (``patch_neighbour_similarity``, layer 0) exceeds the image's median patch's by
  ``report.phenomena.high_norm.redundant``, after ``sigmas`` standard errors over the photographs. Placebo: patches
  drawn at random in the same number (``control_draws`` draws from ``control_seed``, a CPU generator) in place of
  the outliers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.per_model import Judged, judge
from san.claims.record import Claim, NearMiss, Scope, Settings
from san.claims.verdicts import moved
from san.phenomena.data import lacks, patch_norms, patch_similarity
from san.phenomena.spec import IMAGE_ENCODER, INIT, PRETRAINED, PRETRAINED_BY_AUTHORS, about, label

DARCET = "Darcet et al. 2024 (ICLR), Sec. 2, Fig. 4"
BACH = "Bach et al. 2025 (TMLR)"


def outliers(norms: np.ndarray, factor: float) -> np.ndarray:
    """Which patches are outliers: norm above ``factor`` times the median patch norm of their image and layer
    (``norms``: ``(..., patches)``); boolean, same shape."""
    return norms > factor * np.median(norms, axis=-1, keepdims=True)


def outlier_shares(norms: np.ndarray, factor: float) -> np.ndarray:
    """The share of outlier patches per layer and image: ``(layers + 1, images)`` from ``(layers + 1, images,
    patches)``."""
    return outliers(norms, factor).mean(axis=-1)


def tail_shares(norms: np.ndarray, factor: float) -> np.ndarray:
    """The share of patches that one lognormal norm distribution would put above ``factor`` times the median, per
    layer and image (``norms``: ``(..., patches)``): ``P(Z > ln(factor) / sigma)`` for Z standard normal, with sigma
    the robust spread of the log-norms (1.4826 x their median absolute deviation; scipy), 0 where they do not
    spread."""
    from scipy.stats import norm

    logs = np.log(np.maximum(norms, np.finfo(float).tiny))
    mad = np.median(np.abs(logs - np.median(logs, axis=-1, keepdims=True)), axis=-1)
    sigma = 1.4826 * mad
    with np.errstate(divide="ignore"):
        return np.where(sigma > 0, norm.sf(np.log(factor) / np.where(sigma > 0, sigma, 1.0)), 0.0)


def _depth_reason(ds: xr.Dataset, small_max_layers: int) -> str:
    layers = int(ds.sizes["layer"]) - 1
    return f"{layers} blocks: not a small ViT (at most {small_max_layers})" if layers > small_max_layers else ""


def _exist_model(ds: xr.Dataset, r: Mapping[str, Any]) -> Judged:
    """One small image encoder's share of the existence claim: its largest share of outlier patches over the block
    outputs, the per-image shares moved toward one lognormal distribution's tail (:func:`tail_shares`)."""
    reason = lacks(ds, ("token_norm",), (PRETRAINED,)) or _depth_reason(ds, r["small_max_layers"])
    if reason:
        return Judged(IMAGE_ENCODER, None, reason)
    norms = patch_norms(ds, PRETRAINED)
    pre, tail = outlier_shares(norms, r["factor"])[1:], tail_shares(norms, r["factor"])[1:]

    def statistic(s: float) -> V.Measure:
        shares = moved(pre, tail, s).mean(axis=1)
        at = int(np.argmax(shares))
        return V.Measure(float(shares[at]), evidence=pre.shape[1], item=f"layer {at + 1}")

    mean = pre.mean(axis=1)
    first = np.flatnonzero(mean >= r["min_share"])
    twin = ""
    if INIT in ds["weights"].values:
        twin = f"; init twin's largest share {outlier_shares(patch_norms(ds, INIT), r['factor'])[1:].mean(1).max():.3g}"
    note = (f"most outliers at layer {int(np.argmax(mean)) + 1} of {len(mean)} (share {mean.max():.3g}); first layer "
            f"with a share >= {r['min_share']:g}: {int(first[0]) + 1 if first.size else 'none'}; one lognormal's "
            f"tail at most {tail.mean(axis=1).max():.3g}{twin}")  # fmt: skip
    return Judged(IMAGE_ENCODER, statistic, note=note)


def random_excess(similarity: np.ndarray, size: int, draws: int, rng: np.random.Generator) -> float:
    """The mean, over ``draws`` random sets of ``size`` patches, of their mean ``similarity`` minus the median
    patch's: what the outliers' excess would be if they sat anywhere."""
    picks = np.stack([rng.choice(similarity.size, size=size, replace=False) for _ in range(draws)])
    return float(np.mean(similarity[picks].mean(axis=1)) - np.median(similarity))


def redundancy(norms: np.ndarray, similarity: np.ndarray, r: Mapping[str, Any]) -> tuple[int, np.ndarray, np.ndarray]:
    """At the block output with the most outliers (``norms``: pretrained, ``(layers + 1, images, patches)``): the
    block, and per photograph with outliers the outliers' mean neighbour ``similarity`` minus the median patch's, and
    the same for random patch sets of the same size (:func:`random_excess`, from ``r['control_seed']``)."""
    at = int(np.argmax(outlier_shares(norms, r["factor"])[1:].mean(axis=1))) + 1
    rng = np.random.default_rng(r["control_seed"])
    mask = outliers(norms[at], r["factor"])
    found, placebo = [], []
    for image in np.flatnonzero(mask.any(axis=1)):
        sim = similarity[image]
        found.append(float(sim[mask[image]].mean() - np.median(sim)))
        placebo.append(random_excess(sim, int(mask[image].sum()), r["control_draws"], rng))
    return at, np.asarray(found), np.asarray(placebo)


def _redundant_model(ds: xr.Dataset, r: Mapping[str, Any]) -> Judged:
    """One small image encoder's share of the redundancy claim: its outliers' excess neighbour similarity, moved
    toward random patch sets'."""
    reason = lacks(ds, ("token_norm", "patch_neighbour_similarity"), (PRETRAINED,))
    reason = reason or _depth_reason(ds, r["small_max_layers"])
    if reason:
        return Judged(IMAGE_ENCODER, None, reason)
    at, found, placebo = redundancy(patch_norms(ds, PRETRAINED), patch_similarity(ds, PRETRAINED), r)
    if not found.size:
        return Judged(IMAGE_ENCODER, None, f"no patch above {r['factor']:g} x the median norm at any layer")

    def statistic(s: float) -> V.Measure:
        mean, se, n = V.spread(moved(found, placebo, s))
        return V.Measure(mean, se, n, item=f"layer {at}")

    note = (f"layer {at}: outliers' similarity excess {found.mean():+.3f} over {found.size} photographs, random "
            f"patches' {placebo.mean():+.3f}")  # fmt: skip
    return Judged(IMAGE_ENCODER, statistic, note=note)


def _claims(report: Mapping[str, Any]) -> tuple[Claim, Claim]:
    r = Settings("report.phenomena", report).section("high_norm")
    k, small = r["factor"], r["small_max_layers"]
    scope = Scope((IMAGE_ENCODER,), sizes=f"at most {small} blocks (ViT-S, ViT-B)", training=PRETRAINED_BY_AUTHORS)
    exist = Claim(
        key="small_vit_high_norm",
        statement="high-norm tokens appear in small ViTs too (Bach et al.: \"smaller ViTs also exhibit high-norm "
        "tokens\"; Darcet et al.: only in large models, ViT-L and above): holds for Bach, fails for Darcet",
        words="\"smaller ViTs also exhibit high-norm tokens\"", source=BACH, place="Sec. 4; " + DARCET + "c",
        form=V.EXISTENTIAL, scope=scope,
        measure="the share of outlier patches per block output (mean over the photographs)",
        test=f"some pretrained image encoder of at most {small} blocks (unmodified) has a block output where at least "
        f"{r['min_share']:g} of the patches (mean over the photographs) have a norm above {k:g} x the median patch "
        "norm",
        threshold=r.threshold("min_share", above=True),
        near_miss=NearMiss(r.wrong("tail_control", "the share one lognormal norm distribution (the image's median and "
                                   "log-spread) puts above the factor, moved {s:g} of the way"),
                           "a few large norms are what any heavy-tailed norm distribution gives, without a separate "
                           "population of outliers"),
    )  # fmt: skip
    redundant = Claim(
        key="high_norm_in_redundant_patches",
        statement="high-norm tokens appear in patches that are redundant with their neighbours (high cosine "
        "similarity with the 4 neighbours after the patch embedding)",
        words="high-norm tokens appear in patches that are redundant with their neighbours",
        source="Darcet et al. 2024 (ICLR)", place="Sec. 2, Fig. 5a", form=V.UNIVERSAL, scope=scope,
        measure="the outliers' mean 4-neighbour cosine similarity at layer 0 minus the median patch's",
        test=f"in every pretrained image encoder of at most {small} blocks (unmodified) with outliers (norm above "
        f"{k:g} x the median patch norm), at its block output with the most of them, their mean 4-neighbour "
        f"similarity at layer 0 exceeds the median patch's by more than {r['redundant']:g}, after {r['sigmas']:g} "
        "standard errors over the photographs",
        threshold=r.threshold("redundant", above=True, sigmas="sigmas"),
        near_miss=NearMiss(r.wrong("random_control", "as many patches drawn at random in place of the outliers, "
                                   "moved {s:g} of the way"),
                           "any set of patches of a photograph is similar to its neighbours to some degree"),
        placebo="random patches",
    )  # fmt: skip
    return exist, redundant


def high_norm_claims(
    results: Mapping[str, xr.Dataset], kinds: Mapping[str, str], report: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Darcet et al. against Bach et al. over the image encoders of ``results`` (model -> vision result; ``kinds``:
    model -> kind), thresholds, control settings and seed from ``report`` (``report.phenomena``): per claim key, its
    ``row`` and models x claims ``cells``."""
    r = report["high_norm"]
    exist, redundant = _claims(report)
    out = {}
    for claim, model in ((exist, _exist_model), (redundant, _redundant_model)):
        judged = {name: model(results[name], r) for name in about(claim.key, kinds) if name in results}
        detail = "; ".join(f"{name}: {m.note}" for name, m in judged.items() if m.statistic is not None)
        out[claim.key] = judge(claim, judged, kinds, detail, label(claim.key))
    return out
