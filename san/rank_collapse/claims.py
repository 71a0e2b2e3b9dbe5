"""Fig. 2 and appendix claims of the rank-collapse experiment checked against this run's results (torch-free).

Each function reads result datasets (never recomputes them) and returns plain numbers plus a yes/no verdict, so a
caption can state, e.g., "pure attention: residual < 1e-3 by layer 2: yes, max 2e-07".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.models.spec import CAUSAL, PURE_ATTENTION, WITH_SKIP
from san.rank_collapse.spec import METRICS


def _f(x: float) -> float:
    return float(np.asarray(x))


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
        entry: dict[str, Any] = {}
        for w in mean["weights"].values:
            m = mean.sel(weights=w)
            entry[str(w)] = {
                "pure_at_layer": {
                    v: _f(m.sel(variant=v, layer=min(layer, int(m["layer"].max()))))
                    for v in PURE_ATTENTION
                    if v in m["variant"]
                },
                "skip_at_last": {v: _f(m.sel(variant=v).isel(layer=-1)) for v in WITH_SKIP if v in m["variant"]},
                "last_layer": int(m["layer"].max()),
            }
        per_model[name] = entry
    rows = {}
    for name, entry in per_model.items():
        parts = []
        for w, e in entry.items():
            pure = ", ".join(f"{v} {x:.1e}" for v, x in e["pure_at_layer"].items())
            skip = ", ".join(f"{v} {x:.2f}" for v, x in e["skip_at_last"].items())
            parts.append(f"{w}: {pure} at layer {layer}; {skip} at layer {e['last_layer']}")
        rows[name] = ". ".join(parts) + "."
    init = [e["init"] for name, e in per_model.items() if "init" in e and name not in causal]
    pure = [x for e in init for x in e["pure_at_layer"].values()]
    skip = [x for e in init for x in e["skip_at_last"].values()]
    return {
        "layer": layer,
        "threshold": threshold,
        "floor": floor,
        "pure_collapses": bool(pure) and max(pure) < threshold,
        "pure_max": max(pure) if pure else float("nan"),
        "skip_survives": bool(skip) and min(skip) > floor,
        "skip_min": min(skip) if skip else float("nan"),
        "judged": [name for name in per_model if name not in causal],
        "causal": [name for name in per_model if name in causal],
        "per_model": per_model,
        "caption_rows": rows,
    }


def first_layer_below(curve: xr.DataArray, threshold: float) -> int | None:
    """The first layer (dim ``layer``) at which ``curve`` is below ``threshold``; None if it never is."""
    below = np.flatnonzero(np.asarray(curve) < threshold)
    return int(curve["layer"].values[below[0]]) if below.size else None


def pretrained_collapse_claims(
    results: Mapping[str, xr.Dataset],
    *,
    threshold: float,
    max_layer_fraction: float,
    families: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Today's architectures: in every model with pretrained weights, does pure attention (the SAN variant, mean
    over sequences) fall below ``threshold``, and within how many layers (of how many), by each measure of
    :data:`METRICS`; and does the full transformer stay above it at the last layer. The claim "pure attention
    collapses below the threshold within N layers in every pretrained model" holds with N the largest of the
    per-model first layers (by the paper's measure) and, to count as fast, every model's first layer at most
    ``max_layer_fraction`` of its depth."""
    per_model: dict[str, Any] = {}
    for name, ds in results.items():
        if "pretrained" not in set(map(str, ds["weights"].values)):
            continue
        sel = ds.sel(weights="pretrained")
        entry: dict[str, Any] = {"depth": int(sel["layer"].max())}
        for metric in (m for m in METRICS if m in sel):
            mean = sel[metric].mean("sample")
            entry[metric] = {
                "san_first_below": first_layer_below(mean.sel(variant="SAN"), threshold)
                if "SAN" in mean["variant"]
                else None,
                "san_last": _f(mean.sel(variant="SAN").isel(layer=-1)) if "SAN" in mean["variant"] else None,
                "transformer_last": _f(mean.sel(variant="transformer").isel(layer=-1))
                if "transformer" in mean["variant"]
                else None,
            }
        if families is not None:
            entry["causal"] = families.get(name) in CAUSAL
        per_model[name] = entry
    firsts = [e["residual_ratio"]["san_first_below"] for e in per_model.values() if "residual_ratio" in e]
    depths = [e["depth"] for e in per_model.values() if "residual_ratio" in e]
    collapses = bool(firsts) and all(
        f is not None and f <= max_layer_fraction * d for f, d in zip(firsts, depths, strict=True)
    )
    rows = {
        name: "; ".join(
            f"{metric.removeprefix('residual_ratio').strip('_') or 'paper'}: SAN below at layer "
            f"{e[metric]['san_first_below'] if e[metric]['san_first_below'] is not None else 'never'} of "
            f"{e['depth']} (last {e[metric]['san_last']:.1e}), transformer last {e[metric]['transformer_last']:.2f}"
            for metric in METRICS
            if metric in e and e[metric]["san_last"] is not None and e[metric]["transformer_last"] is not None
        )
        + "."
        for name, e in per_model.items()
    }
    return {
        "threshold": threshold,
        "max_layer_fraction": max_layer_fraction,
        "pure_collapses_in_every_model": collapses,
        "within_layers": max(firsts) if collapses else None,
        "per_model": per_model,
        "caption_rows": rows,
    }


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
    shrinks = [v["longest"] <= max_ratio * v["shortest"] for e in per_model.values() for v in e.values()]
    rows = {
        name: "; ".join(
            f"{w}: {v['shortest']:.1e} → {v['longest']:.1e} (length 1 → {v['depth']})" for w, v in e.items()
        )
        for name, e in per_model.items()
    }
    return {
        "max_ratio": max_ratio,
        "longer_paths_closer_to_rank1": bool(shrinks) and all(shrinks),
        "per_model": per_model,
        "caption_rows": {name: row + "." for name, row in rows.items()},
    }


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
    return {
        "layer": layer,
        "min_factor": min_factor,
        "slower_in_every_model": bool(factors) and all(f >= min_factor for f in factors),
        "smallest_factor": min(factors) if factors else float("nan"),
        "per_model": per_model,
    }
