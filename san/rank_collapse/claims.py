"""Fig. 2 and appendix claims of the rank-collapse experiment checked against this run's results (torch-free).

Each function reads result datasets (never recomputes them) and returns plain numbers plus its verdict rows, so a
caption can state, e.g., "pure attention: residual < 1e-3 by layer 2: yes, max 2e-07". Every scientific row is built
by :func:`san.core.verdicts.check`: the claim's test, and the same test on what a near-miss wrong theory predicts
from the same data (its setting from ``report:``), whose failure gives the row its power. The pretrained rows are
:mod:`san.rank_collapse.pretrained_claims`', the first-token sink's :mod:`san.rank_collapse.sink_claims`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core import verdicts as V
from san.core.config import ConfigError
from san.models.folders import result_family
from san.models.spec import CAUSAL, PURE_ATTENTION, WITH_SKIP
from san.rank_collapse.pretrained_claims import f_, moved, pretrained_collapse_claims, pretrained_slower_claims
from san.rank_collapse.sink_claims import first_token_sink_claims

__all__ = [
    "attention_product_claims",
    "check_config",
    "claims",
    "first_token_sink_claims",
    "pretrained_collapse_claims",
    "pretrained_slower_claims",
    "rank_collapse_claims",
]


def _at_init(m: xr.DataArray, layer: int) -> dict[str, Any]:
    """One model's and weight set's numbers of :func:`rank_collapse_claims` from its mean ratio ``m`` (dims
    variant, layer): the pure variants at ``layer`` (the last layer where the model is shallower), the skip variants
    at the last layer and at ``layer``."""
    at = min(layer, int(m["layer"].max()))
    return {
        "pure_at_layer": {v: f_(m.sel(variant=v, layer=at)) for v in PURE_ATTENTION if v in m["variant"]},
        "skip_at_last": {v: f_(m.sel(variant=v).isel(layer=-1)) for v in WITH_SKIP if v in m["variant"]},
        "skip_at_layer": {v: f_(m.sel(variant=v, layer=at)) for v in WITH_SKIP if v in m["variant"]},
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


def exponential_items(results: Mapping[str, xr.Dataset], layer: int, causal: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per bidirectional model and pure variant at initialisation: the mean ratio at layers 0 and 1 and at ``layer``
    (the last where the model is shallower), and what an exponential decay continuing the first block's rate
    predicts there, ``r_1 (r_1 / r_0)^(layer - 1)``."""
    items = []
    for name, ds in results.items():
        if name in causal or "init" not in set(map(str, ds["weights"].values)):
            continue
        m = ds["residual_ratio"].sel(weights="init").mean("sample")
        at = min(layer, int(m["layer"].max()))
        for v in (v for v in PURE_ATTENTION if v in m["variant"]):
            r0, r1, r_at = (f_(m.sel(variant=v, layer=la)) for la in (0, 1, at))
            predicted = r1 * (r1 / r0) ** (at - 1) if r0 > 0 else float("nan")
            items.append({"item": f"{name} {v}", "r0": r0, "r1": r1, "r_layer": r_at, "exponential": predicted})
    return items


def _pure_collapses_row(items: list[dict[str, Any]], report: Mapping[str, Any], skip_early: list[float]) -> dict:
    """Fig. 2's scientific row: every pure variant below the threshold by the layer (in decades), against an
    exponential decay at the first block's rate moved ``s`` of the way in (:func:`exponential_items`)."""
    threshold = V.Threshold(report["threshold"], above=False, key="report.rank_collapse.threshold", log=True)

    def statistic(s: float) -> V.Measure:
        return V.worst([V.Measure(moved(i["r_layer"], i["exponential"], s, log=True), item=i["item"]) for i in items],
                       threshold)  # fmt: skip

    detail = "; ".join(
        f"{i['item']}: r_0 {i['r0']:.2g}, r_1 {i['r1']:.2g}, r_{report['layer']} {i['r_layer']:.2g} (exponential "
        f"{i['exponential']:.2g})"
        for i in items
    )
    skips = f"smallest {min(skip_early):.2f}" if skip_early else "none"
    return V.check(
        "pure_collapses", "pure attention loses rank doubly exponentially with depth", form=V.UNIVERSAL,
        source="Dong et al. 2021, Fig. 2",
        test=f"pure attention at initialisation below {report['threshold']:g} by layer {report['layer']} in every "
        "bidirectional model (margin in decades)",
        statistic=statistic, threshold=threshold,
        wrong=V.Wrong.toward("an exponential decay at the first block's rate (the data moved {s:g} of the way "
                             "to it)", report["exponential_control"], "report.rank_collapse.exponential_control"),
        detail=f"{detail}; the skip variants at that layer: {skips}",
    )  # fmt: skip


def rank_collapse_claims(
    results: Mapping[str, xr.Dataset],
    *,
    layer: int,
    threshold: float,
    floor: float,
    exponential_control: float,
    causal: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Fig. 2 claims (the keys of ``report.rank_collapse``): at init, SAN and SAN+MLP fall below ``threshold`` by
    ``layer`` (the positive control: an exponential decay continuing the first block's rate, moved
    ``exponential_control`` of the way in, which a test at an early layer may not tell from a doubly exponential
    one); skip variants stay above ``floor`` (a regression row).

    Pretrained weights are reported separately (:func:`pretrained_slower_claims`: the paper shows slower, but still
    fast, collapse there). The models named in ``causal`` (decoders with causal masks, outside the paper's
    bidirectional setting: a causal SAN keeps its first token's direction and collapses only exponentially) get their
    rows but stay out of the verdicts.
    """
    report = {"layer": layer, "threshold": threshold, "exponential_control": exponential_control}
    per_model: dict[str, Any] = {}
    for name, ds in results.items():
        mean = ds["residual_ratio"].mean("sample")
        per_model[name] = {str(w): _at_init(mean.sel(weights=w), layer) for w in mean["weights"].values}
    pure = _init_values(per_model, causal, "pure_at_layer")
    skip = _init_values(per_model, causal, "skip_at_last")
    collapses = _pure_collapses_row(
        exponential_items(results, layer, causal), report, _init_values(per_model, causal, "skip_at_layer")
    )
    survives = V.row("skip_survives",
                     f"the skip control: variants with skip connections stay above {floor:g} at the last layer",
                     kind=V.REGRESSION, form=V.UNIVERSAL, source="Dong et al. 2021, Fig. 2",
                     holds=V.judged(bool(skip) and min(skip) > floor, len(skip)),
                     value=min(skip) if skip else None, margin=min(skip) - floor if skip else None,
                     test=f"every skip variant's last-layer ratio above {floor:g}",
                     bound=V.Threshold(floor, above=True, key="report.rank_collapse.floor"))  # fmt: skip
    return {
        "layer": layer,
        "threshold": threshold,
        "floor": floor,
        "pure_collapses": collapses["holds"],
        "pure_max": max(pure) if pure else float("nan"),
        "skip_survives": survives["holds"],
        "skip_min": min(skip) if skip else float("nan"),
        "judged": [name for name in per_model if name not in causal],
        "causal": [name for name in per_model if name in causal],
        "per_model": per_model,
        "caption_rows": {name: _collapse_caption_row(entry, layer) for name, entry in per_model.items()},
        "verdicts": [collapses, survives],
    }


def product_items(results: Mapping[str, xr.Dataset]) -> dict[str, dict[str, dict[str, float]]]:
    """Per model and weights, from the rank-1 residuals of the sampled paths: the shortest and the longest paths'
    medians, the longest depth ``D``, and what "a product is only as close to rank 1 as its best factor" predicts
    for the longest paths: the ``1 / (D + 1)`` quantile of the single matrices' residuals (the expected best of ``D``
    of them)."""
    per_model = {}
    for name, ds in results.items():
        med = ds["rank1_residual"].median("path")
        depth = int(ds["depth"].max())
        per_model[name] = {
            str(w): {
                "shortest": f_(med.sel(weights=w).isel(depth=0)),
                "longest": f_(med.sel(weights=w).isel(depth=-1)),
                "depth": depth,
                "best_factor": float(np.quantile(ds["rank1_residual"].sel(weights=w).isel(depth=0), 1 / (depth + 1))),
            }
            for w in ds["weights"].values
        }
    return per_model


def attention_product_claims(
    results: Mapping[str, xr.Dataset], *, max_ratio: float, best_factor_control: float
) -> dict[str, Any]:
    """Appendix claim: products along longer paths are closer to rank 1: for every model and weights, the median
    residual of the longest paths is at most ``max_ratio`` times that of the shortest (in decades). Positive
    control: the longest paths moved ``best_factor_control`` of the way toward what a product without compounding
    predicts (:func:`product_items`)."""
    per_model = product_items(results)
    pairs = [(f"{n} {w}", v) for n, e in per_model.items() for w, v in e.items()]
    threshold = V.Threshold(max_ratio, above=False, key="report.attention_products.max_ratio", log=True)

    def statistic(s: float) -> V.Measure:
        ratios = [moved(v["longest"], v["best_factor"], s, log=True) / v["shortest"] for _, v in pairs]
        return V.worst([V.Measure(x, item=n) for (n, _), x in zip(pairs, ratios, strict=True)], threshold)

    row = V.check(
        "longer_paths_closer_to_rank1", "products along longer attention paths are closer to rank 1",
        form=V.UNIVERSAL, source="Dong et al. 2021, appendix (path products)",
        test=f"the longest paths' median rank-1 residual at most {max_ratio:g} of the shortest's, for every "
        "model and weights (margin in decades)",
        statistic=statistic, threshold=threshold,
        wrong=V.Wrong.toward("no compounding: the longest paths as close to rank 1 as the best of their factors "
                             "(the data moved {s:g} of the way to it)", best_factor_control,
                             "report.attention_products.best_factor_control"),
        detail="; ".join(f"{n}: shortest {v['shortest']:.2g}, longest {v['longest']:.2g} (depth {v['depth']}), best "
                         f"of {v['depth']} single matrices {v['best_factor']:.2g}" for n, v in pairs),
    )  # fmt: skip
    rows = {
        name: "; ".join(
            f"{w}: {v['shortest']:.1e} → {v['longest']:.1e} (length 1 → {v['depth']})" for w, v in e.items()
        )
        for name, e in per_model.items()
    }
    return {
        "max_ratio": max_ratio,
        "longer_paths_closer_to_rank1": row["holds"],
        "per_model": per_model,
        "caption_rows": {name: r + "." for name, r in rows.items()},
        "verdicts": [row],
    }


#: every control setting of the wing's report keys (section, key): a near-miss wrong theory reached by moving the
#: data ``s`` of the way towards it, meaningless at ``s <= 0``
CONTROLS = (
    ("rank_collapse", "exponential_control"),
    ("pretrained_collapse", "plateau_control"),
    ("pretrained_collapse", "init_rate_control"),
    ("attention_products", "best_factor_control"),
    ("first_token_sink", "random_token_control"),
)


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of the rank-collapse wing's report keys the schema cannot express: the skip variants' floor
    above the collapse threshold (else one ratio could count as collapsed and as surviving), and every control
    setting positive (at 0 the control is the claim's own test, below it a theory on the claim's far side); raises
    :class:`~san.core.config.ConfigError` naming the keys."""
    if report["rank_collapse"]["floor"] <= report["rank_collapse"]["threshold"]:
        raise ConfigError(
            f"report.rank_collapse.floor = {report['rank_collapse']['floor']} must exceed "
            f"report.rank_collapse.threshold = {report['rank_collapse']['threshold']}"
        )
    for section, key in CONTROLS:
        if not report[section][key] > 0:
            raise ConfigError(
                f"report.{section}.{key} = {report[section][key]} must be positive: it moves the data towards the "
                "control's wrong theory (1: all the way)"
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
            results, threshold=p["threshold"], max_layer_fraction=p["max_layer_fraction"],
            plateau_control=p["plateau_control"], causal=causal,
        ) if pretrained else None,
        "pretrained_slower": pretrained_slower_claims(
            results, layer=t["rank_collapse"]["layer"], min_factor=p["slower_factor"],
            init_rate_control=p["init_rate_control"], causal=causal,
        ) if pretrained else None,
        "attention_products": attention_product_claims(products, **t["attention_products"]) if products else None,
        "first_token_sink": first_token_sink_claims(results, **t["first_token_sink"], causal=causal)
        if pretrained else None,
    }  # fmt: skip
