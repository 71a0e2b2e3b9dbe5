"""The paper's pretrained claims of Fig. 2 checked against this run's results (torch-free): with pretrained weights
pure attention collapses "slower, but still fast". Two rows, each built by :func:`san.claims.verdicts.check` with a
near-miss wrong theory calibrated on the same model: a pretrained SAN that stops collapsing after its first block
(against "still fast"), and one that decays at the initialisation's rate from its own layer-0 value (against
"slower": then only the embedding output would differ)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.record import Scope, item
from san.claims.verdicts import moved
from san.rank_collapse.spec import METRICS

SOURCE = "Dong et al. 2021, Fig. 2 (pretrained; the paper's models: BERT, ALBERT, XLNet as released)"
#: the paper's pretrained models: bidirectional encoders as their authors released them; a fine-tune of one (a
#: sentence-embedding model) is read with its caveat (san/claims/caveats.py), never as the paper's model
PAPER_MODELS = Scope(("encoder",), sizes="base size (12 layers)", training="pretrained by their authors (BERT, "
                     "ALBERT, XLNet as released); fine-tunes are other models, read with their caveat")  # fmt: skip


def f_(x: Any) -> float:
    """A 0-d array (an xarray selection) as a float."""
    return float(np.asarray(x))


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
            "san_last": f_(mean.sel(variant="SAN").isel(layer=-1)) if san else None,
            "transformer_last": f_(mean.sel(variant="transformer").isel(layer=-1))
            if "transformer" in mean["variant"]
            else None,
        }
    return entry


def crossing(values: np.ndarray, threshold: float) -> float | None:
    """Where a curve ``values`` (one per layer 0, 1, ...) first falls below ``threshold``, between layers: the first
    layer ``f`` below it less the share of the block ``f`` that the log-linear interpolation from layer ``f - 1``
    takes to reach it (a value in ``(f - 1, f]``; 0 when layer 0 is below); None when it never falls below. Below a
    threshold ``k`` that is a whole number of layers the crossing lies exactly when the first layer below does."""
    below = np.flatnonzero(values < threshold)
    if not below.size:
        return None
    f = int(below[0])
    if f == 0:
        return 0.0
    with np.errstate(divide="ignore"):
        high, low = np.log(values[f - 1]), np.log(values[f])
    return float(f - 1 + (high - np.log(threshold)) / (high - low)) if np.isfinite(high - low) else float(f)


def plateau_fraction(curve: xr.DataArray, threshold: float, s: float) -> float:
    """The crossing of ``threshold`` (:func:`crossing`) as a fraction of the depth, of the SAN ``curve`` (dim
    ``layer``) moved ``s`` of the way (in logarithm) toward a plateau after its first block (``r_l = r_1`` for every
    ``l >= 1``); a curve that never falls below counts as crossing at layer depth + 1."""
    depth = int(curve["layer"].max())
    values = np.asarray(curve, dtype=float).copy()
    values[1:] = [moved(v, values[1], s, log=True) for v in values[1:]]
    at = crossing(values, threshold)
    return (depth + 1 if at is None else at) / depth


def _collapse_row(curves: Mapping[str, xr.DataArray], threshold: float, fraction: float, control: float) -> dict:
    """The "still fast" row from the judged models' pretrained SAN curves (:func:`plateau_fraction`)."""
    limit = V.Threshold(fraction, above=False, key="report.pretrained_collapse.max_layer_fraction")

    def statistic(s: float) -> V.Measure:
        return V.worst([V.Measure(plateau_fraction(c, threshold, s), item=n) for n, c in curves.items()], limit)

    def crossings(s: float) -> str:
        return ", ".join(f"{n} {plateau_fraction(c, threshold, s) * int(c['layer'].max()):.2f} / "
                         f"{int(c['layer'].max())}" for n, c in curves.items())  # fmt: skip

    plateau = ", ".join(f"{n} {f_(c.sel(layer=1)):.2g}" for n, c in curves.items())
    row = V.check(
        "pure_collapses_in_every_model", "with pretrained weights pure attention collapses slower, but still fast",
        form=V.UNIVERSAL, source=SOURCE,
        test=f"pretrained pure attention falls below {threshold:g} within {fraction:g} of the depth in every "
        "bidirectional model (value: the largest crossing of the threshold, interpolated in log between the layers, "
        "over the depth; never: depth + 1)",
        statistic=statistic, threshold=limit,
        wrong=V.Wrong.toward("a plateau after the first block (the data moved {s:g} of the way to it)", control,
                             "report.pretrained_collapse.plateau_control"),
        detail=f"crossing / depth: {crossings(0.0)}; the plateau at the first block's value ({plateau}) crosses at "
        f"{crossings(control)} (depth + 1: never)",
    )  # fmt: skip
    rested = [item(n, plateau_fraction(c, threshold, 0.0), "of the depth") for n, c in curves.items()]
    return {**row, "scope": PAPER_MODELS.record(), "items": rested}


def pretrained_collapse_claims(
    results: Mapping[str, xr.Dataset],
    *,
    threshold: float,
    max_layer_fraction: float,
    plateau_control: float,
    causal: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Today's architectures: in every model with pretrained weights, does pure attention (the SAN variant, mean
    over sequences) fall below ``threshold``, and within how many layers (of how many), by each measure of
    :data:`METRICS`; and does the full transformer stay above it at the last layer. The claim "pure attention
    collapses below the threshold within N layers in every pretrained model" holds with N the largest of the
    per-model first layers (by the paper's measure) and, to count as fast, every model's crossing of the threshold
    (:func:`crossing`) within ``max_layer_fraction`` of its depth. Positive control: the same test on the curves
    moved ``plateau_control`` of the way toward a plateau after the first block (:func:`plateau_fraction`). The models
    named in ``causal`` get their rows but stay out of the verdict, as in the other rank-collapse claims; without a
    judged model the verdict is not judged."""
    per_model: dict[str, Any] = {
        name: {**_pretrained_entry(ds.sel(weights="pretrained"), threshold), "causal": name in causal}
        for name, ds in results.items()
        if "pretrained" in set(map(str, ds["weights"].values))
    }
    judged = {n: e for n, e in per_model.items() if "residual_ratio" in e and not e["causal"]}
    curves = {
        n: results[n]["residual_ratio"].sel(weights="pretrained", variant="SAN").mean("sample")
        for n in judged
        if "SAN" in results[n]["variant"]
    }
    row = _collapse_row(curves, threshold, max_layer_fraction, plateau_control)
    firsts = [e["residual_ratio"]["san_first_below"] for e in judged.values()]
    return {
        "threshold": threshold,
        "max_layer_fraction": max_layer_fraction,
        "pure_collapses_in_every_model": row["holds"],
        "within_layers": max((f for f in firsts if f is not None), default=None) if row["holds"] else None,
        "judged": list(judged),
        "causal": [n for n, e in per_model.items() if e["causal"]],
        "per_model": per_model,
        "caption_rows": {name: _pretrained_row(e) for name, e in per_model.items()},
        "verdicts": [row],
    }


def _at(m: xr.DataArray, weights: str, layer: int) -> float:
    """The mean ratio ``m`` (dims weights, layer) of ``weights`` at ``layer`` (the last layer if fewer)."""
    return f_(m.sel(weights=weights, layer=min(layer, int(m["layer"].max()))))


def slower_items(results: Mapping[str, xr.Dataset], layer: int, causal: tuple[str, ...]) -> dict[str, Any]:
    """Per bidirectional model with both weights: the SAN's mean ratio at init and pretrained at ``layer`` and their
    factor, and the factor a pretrained SAN decaying at the initialisation's per-layer rate from its own layer-0
    value would show there: ``pretrained_0 / init_0`` (only the embedding output differs)."""
    per_model: dict[str, Any] = {}
    for name, ds in results.items():
        weights = set(map(str, ds["weights"].values))
        if name in causal or not {"init", "pretrained"} <= weights or "SAN" not in ds["variant"]:
            continue
        m = ds["residual_ratio"].mean("sample").sel(variant="SAN")
        init, pre = _at(m, "init", layer), _at(m, "pretrained", layer)
        init0, pre0 = _at(m, "init", 0), _at(m, "pretrained", 0)
        per_model[name] = {"init": init, "pretrained": pre, "factor": pre / init if init > 0 else float("inf"),
                           "init_rate_factor": pre0 / init0 if init0 > 0 else float("inf")}  # fmt: skip
    return per_model


def pretrained_slower_claims(
    results: Mapping[str, xr.Dataset],
    *,
    layer: int,
    min_factor: float,
    init_rate_control: float,
    causal: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The paper's "slower, but still fast" collapse of pretrained weights: in every (non-causal) model with both
    weights, the SAN variant's mean ratio at ``layer`` is at least ``min_factor`` times larger pretrained than at
    initialisation (in decades; a decrease, or a smaller increase, fails). Positive control: each factor moved
    ``init_rate_control`` of the way toward the one of a pretrained SAN decaying at the initialisation's rate
    (:func:`slower_items`)."""
    per_model = slower_items(results, layer, causal)
    threshold = V.Threshold(min_factor, above=True, key="report.pretrained_collapse.slower_factor", log=True)

    def statistic(s: float) -> V.Measure:
        items = per_model.items()
        return V.worst([V.Measure(moved(e["factor"], e["init_rate_factor"], s, log=True), item=n) for n, e in items],
                       threshold)  # fmt: skip

    row = V.check(
        "slower_in_every_model", "pretrained pure attention collapses slower than at initialisation",
        form=V.UNIVERSAL, source=SOURCE,
        test=f"pretrained pure attention at layer {layer} at least {min_factor:g}x above init in every bidirectional "
        "model (margin in decades)",
        statistic=statistic, threshold=threshold,
        wrong=V.Wrong.toward("the initialisation's decay rate from the pretrained layer-0 value (the data moved "
                             "{s:g} of the way to it)", init_rate_control,
                             "report.pretrained_collapse.init_rate_control"),
        detail="; ".join(f"{n}: pretrained {e['pretrained']:.2g} / init {e['init']:.2g} = {e['factor']:.3g} (at the "
                         f"initialisation's rate: {e['init_rate_factor']:.3g})" for n, e in per_model.items()),
    )  # fmt: skip
    row.update(scope=PAPER_MODELS.record(),
               items=[item(n, e["factor"], "x init", layer=layer) for n, e in per_model.items()])  # fmt: skip
    factors = [e["factor"] for e in per_model.values()]
    return {
        "layer": layer,
        "min_factor": min_factor,
        "slower_in_every_model": row["holds"],
        "smallest_factor": min(factors) if factors else float("nan"),
        "judged": list(per_model),
        "causal": [n for n in results if n in causal],
        "per_model": per_model,
        "verdicts": [row],
    }
