"""Fig. 2 and appendix claims of the rank-collapse experiment checked against this run's results (torch-free).

Each function reads result datasets (never recomputes them) and returns plain numbers plus its verdict rows, so a
caption can state, e.g., "pure attention: residual < 1e-3 by layer 2: yes, max 2e-07". Every scientific row is built
by :func:`san.claims.verdicts.check`: the claim's test, and the same test on what a near-miss wrong theory predicts
from the same data (its setting from ``report:``), whose failure gives the row its power. The pretrained rows are
:mod:`san.rank_collapse.pretrained_claims`', the first-token sink's :mod:`san.rank_collapse.sink_claims`'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.drift import apply_row_drift, row_drift
from san.claims.verdicts import moved
from san.core.config import ConfigError
from san.models.folders import result_family
from san.models.spec import CAUSAL, PURE_ATTENTION, WITH_SKIP
from san.rank_collapse.pretrained_claims import f_, pretrained_collapse_claims, pretrained_slower_claims
from san.rank_collapse.rate_claims import rate_claims
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


def _pure_falls_row(per_model: Mapping[str, Any], causal: tuple[str, ...], layer: int, threshold: float) -> dict:
    """Fig. 2's picture, as a demonstration row: every bidirectional model's pure variants at initialisation below
    ``threshold`` by ``layer``. It shows the collapse is fast; whether it is doubly exponential is the rate row's
    (:func:`san.rank_collapse.rate_claims.doubly_exponential_row`): an exponential decay at a steep factor passes
    this test too."""
    bound = V.Threshold(threshold, above=False, key="report.rank_collapse.threshold", log=True)
    items = [(f"{name} {v}", x) for name, e in per_model.items() if "init" in e and name not in causal
             for v, x in e["init"]["pure_at_layer"].items()]  # fmt: skip
    worst = max(items, key=lambda i: i[1]) if items else None
    value = worst[1] if worst else float("nan")
    return V.row(
        "pure_falls_by_layer", f"pure attention at initialisation falls below {threshold:g} by layer {layer}",
        kind=V.DEMONSTRATION, form=V.UNIVERSAL, source="Dong et al. 2021, Fig. 2",
        holds=V.judged(value < threshold, len(items)), value=value,
        margin=bound.margin(V.Measure(value)) if items else None,
        test=f"every bidirectional model's SAN and SAN+MLP at initialisation below {threshold:g} at layer {layer} "
        "(margin in decades)",
        detail=f"largest: {worst[0]} {value:.2g}" if worst else "no bidirectional model at initialisation",
        bound=bound,
    )  # fmt: skip


def rank_collapse_claims(
    results: Mapping[str, xr.Dataset],
    *,
    layer: int,
    threshold: float,
    floor: float,
    causal: tuple[str, ...] = (),
    threshold_notes: Mapping[str, str] | None = None,
    **rate_keys: float,
) -> dict[str, Any]:
    """Fig. 2 claims (the keys of ``report.rank_collapse``): the rate rows (:func:`rate_claims`, from
    ``rate_keys``: doubly exponential by the contraction exponent on the bidirectional models, exponential on the
    decoders); at init, SAN and SAN+MLP fall below ``threshold`` by ``layer`` (a
    demonstration row: Fig. 2's picture); skip variants stay above ``floor`` (a regression row).

    Pretrained weights are reported separately (:func:`pretrained_slower_claims`: the paper shows slower, but still
    fast, collapse there). The models named in ``causal`` (decoders with causal masks, outside the paper's
    bidirectional setting: a causal SAN keeps its first token's direction) are judged by Wu et al.'s exponential
    rate instead of the paper's rows.
    """
    per_model: dict[str, Any] = {}
    for name, ds in results.items():
        mean = ds["residual_ratio"].mean("sample")
        per_model[name] = {str(w): _at_init(mean.sel(weights=w), layer) for w in mean["weights"].values}
    pure = _init_values(per_model, causal, "pure_at_layer")
    skip = _init_values(per_model, causal, "skip_at_last")
    rate = rate_claims(results, causal, notes=threshold_notes or {}, **rate_keys)
    falls = _pure_falls_row(per_model, causal, layer, threshold)
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
        **{k: v for k, v in rate.items() if k != "verdicts"},
        "pure_falls_by_layer": falls["holds"],
        "pure_max": max(pure) if pure else float("nan"),
        "skip_survives": survives["holds"],
        "skip_min": min(skip) if skip else float("nan"),
        "judged": [name for name in per_model if name not in causal],
        "causal": [name for name in per_model if name in causal],
        "per_model": per_model,
        "caption_rows": {name: _collapse_caption_row(entry, layer) for name, entry in per_model.items()},
        "verdicts": [*rate["verdicts"], falls, survives],
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
    ("rank_collapse", "power_law_control"),
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
    rc = report["rank_collapse"]
    if rc["exponent_limit"] <= rc["rate_floor"]:
        raise ConfigError(
            f"report.rank_collapse.exponent_limit = {rc['exponent_limit']} must exceed report.rank_collapse.rate_floor"
            f" = {rc['rate_floor']}: the exponent is read between the two"
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

    ``inputs``: the summary rule's files (``rank_collapse``, ``attention_products`` and the quantisation control's
    ``quantisation``); ``params``: its ``models``, ``attention_product_models``, ``quantisation_models`` and
    ``report`` (config ``report``); the causal decoders (one rule for them in every verdict) are the results whose
    recorded family is causal. A row on the weights of a model with the quantisation control carries the drift of
    its margin and prints "within quantisation drift" where the margin is no larger
    (:func:`san.claims.drift.row_drift`)."""
    from san.core.storage import read_netcdf

    t = params["report"]
    results = dict(zip(params["models"], map(read_netcdf, inputs["rank_collapse"]), strict=True))
    products = dict(
        zip(params["attention_product_models"], map(read_netcdf, inputs["attention_products"]), strict=True)
    )
    sections = _sections(results, products, t)
    # the quantisation control (san.claims.drift): each row's margin judged again with one model's pretrained
    # weights replaced by each requantised copy (the path products are not recomputed: their rows get no drift)
    controls = dict(
        zip(params.get("quantisation_models", []), map(read_netcdf, inputs.get("quantisation", [])), strict=True)
    )
    if controls:

        def margins(swapped: Mapping[str, Any]) -> dict[str, float | None]:
            judged = _sections(dict(swapped), {}, t)
            return {f"{name}.{r['key']}": r.get("margin") for name, section in judged.items()
                    for r in (section or {}).get("verdicts", [])}  # fmt: skip

        drift = row_drift(results, controls, margins)
        for name, section in sections.items():
            rows = (section or {}).get("verdicts", [])
            apply_row_drift(rows, {r["key"]: drift.get(f"{name}.{r['key']}") for r in rows})
    return sections


def _sections(results: Mapping[str, Any], products: Mapping[str, Any], t: Mapping[str, Any]) -> dict[str, Any]:
    """The wing's sections judged on the rank-collapse ``results`` and attention ``products`` (model -> result)
    with the thresholds of config ``report`` ``t``."""
    # the causal decoders, by the family each result records (as recognised when its weights were acquired)
    causal = tuple(m for m, ds in results.items() if result_family(ds.attrs) in CAUSAL)
    pretrained = any("pretrained" in ds["weights"] for ds in results.values())
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
        "first_token_sink": first_token_sink_claims(
            results, **{k: v for k, v in t["first_token_sink"].items() if k != "threshold_notes"}, causal=causal
        )
        if pretrained else None,
    }  # fmt: skip
