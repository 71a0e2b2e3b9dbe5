"""Fig. 2 and appendix claims of the rank-collapse experiment checked against this run's results (torch-free).

Each function reads result datasets (never recomputes them) and returns plain numbers plus a yes/no verdict, so a
caption can state, e.g., "pure attention: residual < 1e-3 by layer 2: yes, max 2e-07".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core import verdicts as V
from san.core.config import ConfigError
from san.models.spec import CAUSAL, PURE_ATTENTION, WITH_SKIP
from san.rank_collapse.spec import METRICS, result_family


def _f(x: float) -> float:
    return float(np.asarray(x))


def _at_init(m: xr.DataArray, layer: int) -> dict[str, Any]:
    """One model's and weight set's numbers of :func:`rank_collapse_claims` from its mean ratio ``m`` (dims
    variant, layer): the pure variants at ``layer`` (the last layer where the model is shallower), the skip variants
    at the last layer and at ``layer``."""
    at = min(layer, int(m["layer"].max()))
    return {
        "pure_at_layer": {v: _f(m.sel(variant=v, layer=at)) for v in PURE_ATTENTION if v in m["variant"]},
        "skip_at_last": {v: _f(m.sel(variant=v).isel(layer=-1)) for v in WITH_SKIP if v in m["variant"]},
        "skip_at_layer": {v: _f(m.sel(variant=v, layer=at)) for v in WITH_SKIP if v in m["variant"]},
        "last_layer": int(m["layer"].max()),
    }


def _collapse_caption_row(entry: Mapping[str, Any], layer: int) -> str:
    """One model's caption row of :func:`rank_collapse_claims`: per weight set, the pure variants at ``layer`` and
    the skip variants at the last layer."""
    parts = []
    for w, e in entry.items():
        pure = ", ".join(f"{v} {x:.1e}" for v, x in e["pure_at_layer"].items())
        skip = ", ".join(f"{v} {x:.2f}" for v, x in e["skip_at_last"].items())
        parts.append(f"{w}: {pure} at layer {layer}; {skip} at layer {e['last_layer']}")
    return ". ".join(parts) + "."


def _init_values(per_model: Mapping[str, Any], causal: tuple[str, ...], key: str) -> list[float]:
    """The values ``key`` (``pure_at_layer``, ``skip_at_last``, ``skip_at_layer``) of every bidirectional model's
    initialisation, over its variants."""
    return [x for name, e in per_model.items() if "init" in e and name not in causal for x in e["init"][key].values()]


def _rank_collapse_verdicts(
    pure: list[float], skip: list[float], skip_early: list[float], *, layer: int, threshold: float, floor: float
) -> list[dict[str, Any]]:
    """The verdict rows of :func:`rank_collapse_claims` from the pure variants' ratios at ``layer``, the skip
    variants' at the last layer and at ``layer`` (``skip_early``, the positive control: the variants with skip
    connections through the same test, "below the threshold by the layer", must fail)."""
    collapses = V.judged(bool(pure) and max(pure) < threshold, len(pure))
    survives = V.judged(bool(skip) and min(skip) > floor, len(skip))
    control = V.control(
        "the variants with skip connections in place of pure attention",
        None,
        V.judged(bool(skip_early) and max(skip_early) < threshold, len(skip_early)),
        value=max(skip_early) if skip_early else None,
    )
    pure_max = max(pure) if pure else float("nan")
    return [
        V.row("pure_collapses", "pure attention loses rank doubly exponentially with depth", kind=V.SCIENTIFIC,
              form=V.UNIVERSAL, source="Dong et al. 2021, Fig. 2", holds=collapses, value=pure_max,
              margin=np.log10(threshold / pure_max) if pure and pure_max > 0 else None,
              test=f"pure attention at initialisation below {threshold:g} by layer {layer} in every bidirectional "
              "model (margin in decades)",
              detail=f"largest {pure_max:.1e}; the skip variants at that layer: "
              + (f"smallest {min(skip_early):.2f}" if skip_early else "none"),
              positive_control=control),
        V.row("skip_survives",
              f"the skip control: variants with skip connections stay above {floor:g} at the last layer",
              kind=V.REGRESSION, form=V.UNIVERSAL, source="Dong et al. 2021, Fig. 2", holds=survives,
              value=min(skip) if skip else None, margin=min(skip) - floor if skip else None,
              test=f"every skip variant's last-layer ratio above {floor:g}"),
    ]  # fmt: skip


def rank_collapse_claims(
    results: Mapping[str, xr.Dataset], *, layer: int, threshold: float, floor: float, causal: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Fig. 2 claims: at init, SAN and SAN+MLP fall below ``threshold`` by ``layer``; skip variants stay > ``floor``.

    Pretrained weights are reported separately (:func:`pretrained_slower_claims`: the paper shows slower, but still
    fast, collapse there). The models
    named in ``causal`` (decoders with causal masks, outside the paper's bidirectional setting: a causal SAN keeps
    its first token's direction and collapses only exponentially) get their rows but stay out of the verdicts.
    """
    per_model: dict[str, Any] = {}
    for name, ds in results.items():
        mean = ds["residual_ratio"].mean("sample")
        per_model[name] = {str(w): _at_init(mean.sel(weights=w), layer) for w in mean["weights"].values}
    pure = _init_values(per_model, causal, "pure_at_layer")
    skip = _init_values(per_model, causal, "skip_at_last")
    verdicts = _rank_collapse_verdicts(
        pure, skip, _init_values(per_model, causal, "skip_at_layer"), layer=layer, threshold=threshold, floor=floor
    )
    return {
        "layer": layer,
        "threshold": threshold,
        "floor": floor,
        "pure_collapses": verdicts[0]["holds"],
        "pure_max": max(pure) if pure else float("nan"),
        "skip_survives": verdicts[1]["holds"],
        "skip_min": min(skip) if skip else float("nan"),
        "judged": [name for name in per_model if name not in causal],
        "causal": [name for name in per_model if name in causal],
        "per_model": per_model,
        "caption_rows": {name: _collapse_caption_row(entry, layer) for name, entry in per_model.items()},
        "verdicts": verdicts,
    }


def first_layer_below(curve: xr.DataArray, threshold: float) -> int | None:
    """The first layer (dim ``layer``) at which ``curve`` is below ``threshold``; None if it never is."""
    below = np.flatnonzero(np.asarray(curve) < threshold)
    return int(curve["layer"].values[below[0]]) if below.size else None


def _pretrained_row(e: Mapping[str, Any]) -> str:
    """One model's caption row of :func:`pretrained_collapse_claims`: per measure, SAN's first layer below the
    threshold, its last value and the transformer's."""
    return (
        "; ".join(
            f"{metric.removeprefix('residual_ratio').strip('_') or 'paper'}: SAN below at layer "
            f"{e[metric]['san_first_below'] if e[metric]['san_first_below'] is not None else 'never'} of "
            f"{e['depth']} (last {e[metric]['san_last']:.1e}), transformer last {e[metric]['transformer_last']:.2f}"
            for metric in METRICS
            if metric in e and e[metric]["san_last"] is not None and e[metric]["transformer_last"] is not None
        )
        + "."
    )


def _pretrained_entry(sel: xr.Dataset, threshold: float) -> dict[str, Any]:
    """One model's numbers of :func:`pretrained_collapse_claims` from its pretrained results ``sel``: its depth and,
    per measure of :data:`METRICS`, SAN's first layer below ``threshold``, SAN's and the transformer's last value."""
    entry: dict[str, Any] = {"depth": int(sel["layer"].max())}
    for metric in (m for m in METRICS if m in sel):
        mean = sel[metric].mean("sample")
        san = "SAN" in mean["variant"]
        entry[metric] = {
            "san_first_below": first_layer_below(mean.sel(variant="SAN"), threshold) if san else None,
            "san_last": _f(mean.sel(variant="SAN").isel(layer=-1)) if san else None,
            "transformer_last": _f(mean.sel(variant="transformer").isel(layer=-1))
            if "transformer" in mean["variant"]
            else None,
        }
    return entry


def _fast(firsts: list[int | None], depths: list[int], max_layer_fraction: float) -> V.Verdict:
    """Whether every first layer below the threshold is at most ``max_layer_fraction`` of its model's depth (a
    model that never falls below fails); not judged without a model."""
    return V.judged(
        all(f is not None and f <= max_layer_fraction * d for f, d in zip(firsts, depths, strict=True)), len(firsts)
    )


def _transformer_fast(
    results: Mapping[str, xr.Dataset], judged: Mapping[str, Any], threshold: float, max_layer_fraction: float
) -> V.Verdict:
    """The positive control of :func:`pretrained_collapse_claims`: the full transformer (the variant with skip
    connections and MLPs) of every ``judged`` model through the same test (:func:`_fast`)."""
    with_transformer = [n for n in judged if "transformer" in results[n]["variant"]]
    firsts = [
        first_layer_below(
            results[n].sel(weights="pretrained")["residual_ratio"].mean("sample").sel(variant="transformer"), threshold
        )
        for n in with_transformer
    ]
    return _fast(firsts, [judged[n]["depth"] for n in with_transformer], max_layer_fraction)


def pretrained_collapse_claims(
    results: Mapping[str, xr.Dataset],
    *,
    threshold: float,
    max_layer_fraction: float,
    causal: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Today's architectures: in every model with pretrained weights, does pure attention (the SAN variant, mean
    over sequences) fall below ``threshold``, and within how many layers (of how many), by each measure of
    :data:`METRICS`; and does the full transformer stay above it at the last layer. The claim "pure attention
    collapses below the threshold within N layers in every pretrained model" holds with N the largest of the
    per-model first layers (by the paper's measure) and, to count as fast, every model's first layer at most
    ``max_layer_fraction`` of its depth. The models named in ``causal`` get their rows but stay out of the verdict,
    as in :func:`rank_collapse_claims` and :func:`pretrained_slower_claims` (one rule for causal decoders); without a
    judged model the verdict is not judged."""
    per_model: dict[str, Any] = {
        name: {**_pretrained_entry(ds.sel(weights="pretrained"), threshold), "causal": name in causal}
        for name, ds in results.items()
        if "pretrained" in set(map(str, ds["weights"].values))
    }
    judged = {n: e for n, e in per_model.items() if "residual_ratio" in e and not e["causal"]}
    firsts = [e["residual_ratio"]["san_first_below"] for e in judged.values()]
    depths = [e["depth"] for e in judged.values()]
    collapses = _fast(firsts, depths, max_layer_fraction)
    control = V.control(
        "the full transformer in place of pure attention",
        None,
        _transformer_fast(results, judged, threshold, max_layer_fraction),
    )
    return {
        "threshold": threshold,
        "max_layer_fraction": max_layer_fraction,
        "pure_collapses_in_every_model": collapses,
        "within_layers": max(firsts) if collapses else None,
        "judged": list(judged),
        "causal": [n for n, e in per_model.items() if e["causal"]],
        "per_model": per_model,
        "caption_rows": {name: _pretrained_row(e) for name, e in per_model.items()},
        "verdicts": [
            V.row("pure_collapses_in_every_model", "with pretrained weights pure attention collapses slower, but still "
                  "fast", kind=V.SCIENTIFIC, form=V.UNIVERSAL, source="Dong et al. 2021, Fig. 2 (pretrained)",
                  holds=collapses, value=max((f for f in firsts if f is not None), default=None),
                  test=f"pretrained pure attention falls below {threshold:g} within {max_layer_fraction:g} of the "
                  "depth in every bidirectional model",
                  detail="first layer below / depth: " + ", ".join(
                      f"{n} {'never' if f is None else f} / {d}" for n, f, d in zip(judged, firsts, depths, strict=True)
                  ), positive_control=control),
        ],
    }  # fmt: skip


def attention_product_claims(results: Mapping[str, xr.Dataset], *, max_ratio: float) -> dict[str, Any]:
    """Appendix claim: products along longer paths are closer to rank 1: for every model and weights, the median
    residual of the longest paths is at most ``max_ratio`` times that of the shortest."""
    per_model = {}
    for name, ds in results.items():
        med = ds["rank1_residual"].median("path")
        per_model[name] = {
            str(w): {
                "shortest": _f(med.sel(weights=w).isel(depth=0)),
                "longest": _f(med.sel(weights=w).isel(depth=-1)),
                "depth": int(ds["depth"].max()),
            }
            for w in ds["weights"].values
        }
    pairs = [v for e in per_model.values() for v in e.values()]
    closer = V.judged(all(v["longest"] <= max_ratio * v["shortest"] for v in pairs), len(pairs))
    # positive control: the path lengths exchanged (the shortest paths judged as if they were the longest) must fail
    swapped = V.judged(all(v["shortest"] <= max_ratio * v["longest"] for v in pairs), len(pairs))
    worst = max((v["longest"] / v["shortest"] for v in pairs if v["shortest"] > 0), default=float("nan"))
    rows = {
        name: "; ".join(
            f"{w}: {v['shortest']:.1e} → {v['longest']:.1e} (length 1 → {v['depth']})" for w, v in e.items()
        )
        for name, e in per_model.items()
    }
    return {
        "max_ratio": max_ratio,
        "longer_paths_closer_to_rank1": closer,
        "per_model": per_model,
        "caption_rows": {name: row + "." for name, row in rows.items()},
        "verdicts": [
            V.row("longer_paths_closer_to_rank1", "products along longer attention paths are closer to rank 1",
                  kind=V.SCIENTIFIC, form=V.UNIVERSAL, source="Dong et al. 2021, appendix (path products)",
                  holds=closer, value=worst, margin=max_ratio - worst,
                  test=f"the longest paths' median rank-1 residual at most {max_ratio:g} of the shortest's, for every "
                  "model and weights",
                  positive_control=V.control("the shortest and longest paths exchanged", None, swapped)),
        ],
    }  # fmt: skip


def pretrained_slower_claims(
    results: Mapping[str, xr.Dataset], *, layer: int, min_factor: float, causal: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The paper's "slower, but still fast" collapse of pretrained weights: in every (non-causal) model with both
    weights, the SAN variant's mean ratio at ``layer`` is at least ``min_factor`` times larger pretrained than at
    initialisation (a decrease, or a smaller increase, fails)."""
    per_model: dict[str, Any] = {}
    for name, ds in results.items():
        weights = set(map(str, ds["weights"].values))
        if name in causal or not {"init", "pretrained"} <= weights or "SAN" not in ds["variant"]:
            continue
        m = ds["residual_ratio"].mean("sample").sel(variant="SAN")
        at = min(layer, int(m["layer"].max()))
        init, pre = _f(m.sel(weights="init", layer=at)), _f(m.sel(weights="pretrained", layer=at))
        per_model[name] = {"init": init, "pretrained": pre, "factor": pre / init if init > 0 else float("inf")}
    factors = [e["factor"] for e in per_model.values()]
    slower = V.judged(all(f >= min_factor for f in factors), len(factors))
    # positive control: the full transformer's pretrained / init ratio through the same test must fail
    t_factors = []
    for name in per_model:
        ds = results[name]
        if "transformer" in ds["variant"]:
            m = ds["residual_ratio"].mean("sample").sel(variant="transformer")
            at = min(layer, int(m["layer"].max()))
            init, pre = _f(m.sel(weights="init", layer=at)), _f(m.sel(weights="pretrained", layer=at))
            t_factors.append(pre / init if init > 0 else float("inf"))
    control = V.control(
        "the full transformer in place of pure attention",
        None,
        V.judged(all(f >= min_factor for f in t_factors), len(t_factors)),
        value=min(t_factors) if t_factors else None,
    )
    return {
        "layer": layer,
        "min_factor": min_factor,
        "slower_in_every_model": slower,
        "smallest_factor": min(factors) if factors else float("nan"),
        "judged": list(per_model),
        "causal": [n for n in results if n in causal],
        "per_model": per_model,
        "verdicts": [
            V.row("slower_in_every_model", "pretrained pure attention collapses slower than at initialisation",
                  kind=V.SCIENTIFIC, form=V.UNIVERSAL, source="Dong et al. 2021, Fig. 2 (pretrained)", holds=slower,
                  value=min(factors) if factors else None,
                  margin=min(factors) / min_factor if factors else None,
                  test=f"pretrained pure attention at layer {layer} at least {min_factor:g}x above init in every "
                  "bidirectional model (margin: smallest factor / required)",
                  positive_control=control),
        ],
    }  # fmt: skip


def _factor(ds: xr.Dataset, measure: str, variant: str, layer: int) -> float:
    """Pretrained / init mean ratio of ``measure`` for ``variant`` at ``layer`` (the last layer if fewer)."""
    m = ds[measure].mean("sample").sel(variant=variant)
    at = min(layer, int(m["layer"].max()))
    init, pre = _f(m.sel(weights="init", layer=at)), _f(m.sel(weights="pretrained", layer=at))
    return pre / init if init > 0 else float("inf")


def carried_share(factor_all: float, factor_excluded: float) -> float:
    """The share of a faster collapse (``factor_all`` < 1: pretrained / init ratio with every token) that the first
    token carries: the part of its log-decrease that is gone once the first token is excluded (``factor_excluded``:
    the same ratio without it). 1: all of it (no faster collapse without the first token), 0: none of it, above 1:
    without the first token the pretrained model collapses slower than at initialisation."""
    return 1.0 - float(np.log(factor_excluded) / np.log(factor_all))


def _sink_entry(ds: xr.Dataset, layer: int, share_threshold: float) -> dict[str, Any]:
    """One decoder's evidence for :func:`first_token_sink_claims`: the SAN's pretrained / init factor at ``layer``
    with every token and without the first, whether it collapses faster, the share the first token carries, and the
    share of SAN sink heads (``share_threshold``) at ``layer`` and over all layers of each weight set."""
    from san.rank_collapse.sink import sink_share

    entry: dict[str, Any] = {"factor": _factor(ds, "residual_ratio", "SAN", layer)}
    entry["factor_without_first"] = _factor(ds, "residual_ratio_no_first", "SAN", layer)
    entry["faster"] = bool(entry["factor"] < 1)
    entry["carried"] = carried_share(entry["factor"], entry["factor_without_first"]) if entry["faster"] else None
    if "first_token_attention" in ds:
        share = sink_share(ds["first_token_attention"].sel(variant="SAN"), share_threshold)
        at = min(layer, int(share["layer"].max()))
        entry["sink_share"] = {str(w): _f(share.sel(weights=w, layer=at)) for w in share["weights"].values}
        entry["sink_share_all_layers"] = {
            str(w): _f(share.sel(weights=w).mean("layer", skipna=True)) for w in share["weights"].values
        }
    return entry


def first_token_sink_claims(
    results: Mapping[str, xr.Dataset],
    *,
    layer: int,
    share_threshold: float,
    min_carried: float,
    causal: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Whether the pure-attention path's faster collapse in the pretrained decoders is carried by the first token.

    A causal model with both weights whose SAN ratio at ``layer`` is lower pretrained than at initialisation (a
    faster collapse) is judged: the first token carries the collapse when at least ``min_carried`` of its
    log-decrease is gone without the first token (:func:`carried_share`, from the ``residual_ratio_no_first``
    measure). Holds when it does in every judged decoder; not judged without one. Also recorded per model: the share
    of sink heads (mean attention on the first token above ``share_threshold``, Gu et al. 2025) at ``layer`` and
    over all layers, with each weight set. Positive control: the same test with no token excluded (the full ratio in
    place of the one without the first token) carries nothing and must fail."""
    per_model: dict[str, Any] = {}
    for name, ds in results.items():
        weights = set(map(str, ds["weights"].values))
        if name not in causal or not {"init", "pretrained"} <= weights or "SAN" not in ds["variant"]:
            continue
        per_model[name] = _sink_entry(ds, layer, share_threshold)
    judged = {n: e for n, e in per_model.items() if e["faster"]}
    carried = [e["carried"] for e in judged.values()]
    holds = V.judged(all(c >= min_carried for c in carried), len(carried))
    wrong = [carried_share(e["factor"], e["factor"]) if e["factor"] != 1 else 0.0 for e in judged.values()]
    control = V.control(
        "no token excluded (the full ratio in place of the one without the first token)",
        None,
        V.judged(all(c >= min_carried for c in wrong), len(wrong)),
        value=max(wrong) if wrong else None,
    )
    smallest = min(carried) if carried else None
    return {
        "layer": layer,
        "share_threshold": share_threshold,
        "min_carried": min_carried,
        "carried_in_every_decoder": holds,
        "smallest_carried": smallest if smallest is not None else float("nan"),
        "judged": list(judged),
        "per_model": per_model,
        "verdicts": [
            V.row("carried_in_every_decoder", "in the pretrained decoders the pure-attention path's faster collapse "
                  "is carried by the first token", kind=V.SCIENTIFIC, form=V.UNIVERSAL,
                  source="Gu et al. 2025 (attention sinks); Dong et al. 2021, Fig. 2", holds=holds,
                  value=smallest, margin=smallest - min_carried if smallest is not None else None,
                  test=f"in every causal model whose pretrained SAN ratio at layer {layer} is below its init one, at "
                  f"least {min_carried:g} of the log-decrease is gone without the first token (margin: smallest "
                  "share - required)",
                  positive_control=control),
        ],
    }  # fmt: skip


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of the rank-collapse wing's report keys the schema cannot express: the skip variants' floor
    above the collapse threshold (else one ratio could count as collapsed and as surviving); raises
    :class:`~san.core.config.ConfigError` naming the keys."""
    if report["rank_collapse"]["floor"] <= report["rank_collapse"]["threshold"]:
        raise ConfigError(
            f"report.rank_collapse.floor = {report['rank_collapse']['floor']} must exceed "
            f"report.rank_collapse.threshold = {report['rank_collapse']['threshold']}"
        )


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The rank-collapse wing's sections of summary.json, each only where this run's results can speak to it (else
    None): Fig. 2 at initialisation, pretrained collapse ("still fast") and "slower", the path products, and the
    first-token sink of the pretrained decoders.

    ``inputs``: the summary rule's files (``rank_collapse``, ``attention_products``); ``params``: its ``models``,
    ``attention_product_models`` and ``report`` (config ``report``); the causal decoders (one rule for them in
    every verdict) are the results whose recorded family is causal."""
    from san.core.storage import read_netcdf

    t = params["report"]
    results = dict(zip(params["models"], map(read_netcdf, inputs["rank_collapse"]), strict=True))
    # the causal decoders, by the family each result records (as recognised when its weights were acquired)
    causal = tuple(m for m, ds in results.items() if result_family(ds.attrs) in CAUSAL)
    pretrained = any("pretrained" in ds["weights"] for ds in results.values())
    products = dict(
        zip(params["attention_product_models"], map(read_netcdf, inputs["attention_products"]), strict=True)
    )
    p = t["pretrained_collapse"]
    return {
        "rank_collapse": rank_collapse_claims(results, **t["rank_collapse"], causal=causal) if results else None,
        "pretrained_collapse": pretrained_collapse_claims(
            results, threshold=p["threshold"], max_layer_fraction=p["max_layer_fraction"], causal=causal
        )
        if pretrained
        else None,
        "pretrained_slower": pretrained_slower_claims(
            results, layer=t["rank_collapse"]["layer"], min_factor=p["slower_factor"], causal=causal
        )
        if pretrained
        else None,
        "attention_products": attention_product_claims(products, **t["attention_products"]) if products else None,
        "first_token_sink": first_token_sink_claims(
            results, layer=t["rank_collapse"]["layer"], **t["first_token_sink"], causal=causal
        )
        if pretrained
        else None,
    }
