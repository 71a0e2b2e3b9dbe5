"""The first-token hypothesis checked against this run's results (torch-free): at the layers where the pretrained
decoders have attention sinks, the first token carries the unmodified model's composite residual. This project's
hypothesis, after Gu et al. 2025's attention sinks and Sun et al. 2024's massive activations (a first token whose norm
is tens of times the others' dominates the ``1, inf`` norms of Dong et al.'s ratio); no paper states it.

It is judged where sinks are: at every layer whose share of sink heads in the unmodified pretrained model (the
``transformer`` variant) exceeds ``report.first_token_sink.sink_layer_share``, a rule fixed in config before the run,
on that same model. Its statistic stays finite: how far, in decades, the relative residual moves when the first token
is left out, ``|log10(r_without_first / r_all)|`` (two positive ratios). Its near-miss control is that any one token
would do: the same move with a random token (never the first) left out in its place (``residual_ratio_no_random``,
:data:`san.rank_collapse.spec.PLACEBO`), toward which the first token's move is shifted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.verdicts import moved
from san.measures.sink import sink_share
from san.rank_collapse.pretrained_claims import f_


def moved_decades(ratio_all: float, ratio_without: float) -> float:
    """How far, in decades, the relative residual moves when a token is left out: ``|log10(without / all)|`` (NaN
    unless both are positive)."""
    if not (ratio_all > 0 and ratio_without > 0):
        return float("nan")
    return float(abs(np.log10(ratio_without / ratio_all)))


def _pretrained_means(ds: xr.Dataset, measure: str, layers: list[int]) -> list[float]:
    """The unmodified pretrained model's mean of ``measure`` over the sequences at each of ``layers`` (NaN where the
    result lacks the measure)."""
    if measure not in ds:
        return [float("nan")] * len(layers)
    m = ds[measure].mean("sample").sel(variant=UNMODIFIED, weights="pretrained")
    return [f_(m.sel(layer=la)) for la in layers]


def _shares(ds: xr.Dataset, variant: str, share_threshold: float) -> xr.DataArray:
    """The share of sink heads (mean attention on the first token above ``share_threshold``) of ``variant``'s
    pretrained weights, per layer (NaN at layer 0)."""
    return sink_share(ds["first_token_attention"].sel(weights="pretrained", variant=variant), share_threshold)


def sink_entry(ds: xr.Dataset, share_threshold: float, sink_layer_share: float) -> dict[str, Any]:
    """One decoder's evidence for :func:`first_token_sink_claims`: its sink layers (the unmodified pretrained
    model's sink share above ``sink_layer_share``) with their shares, and per sink layer the unmodified model's
    relative residual with every token, without the first and without a random one, and how far (in decades) leaving
    out either moves it (:func:`moved_decades`)."""
    unmodified = _shares(ds, UNMODIFIED, share_threshold)
    layers = [int(la) for la in unmodified["layer"].values if f_(unmodified.sel(layer=la)) > sink_layer_share]
    entry: dict[str, Any] = {"sink_layers": layers}
    entry["sink_share"] = {str(la): f_(unmodified.sel(layer=la)) for la in layers}
    per_layer = {}
    for la, r, first, rand in zip(layers, *(_pretrained_means(ds, m, layers) for m in MEASURES), strict=True):
        per_layer[str(la)] = {
            "ratio": r,
            "ratio_without_first": first,
            "ratio_without_random": rand,
            "moved_first": moved_decades(r, first),
            "moved_random": moved_decades(r, rand),
        }
    entry["per_layer"] = per_layer
    return entry


#: the measures the claim compares: the relative residual with every token, without the first, without a random one
MEASURES = ("residual_ratio", "residual_ratio_no_first", "residual_ratio_no_random")
#: the variant the claim reads: the model as it was trained, where the sinks are
UNMODIFIED = "transformer"


def _items(per_model: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The judged (decoder, sink layer) pairs: every sink layer of every decoder."""
    return [(f"{n} layer {la}", e) for n, m in per_model.items() for la, e in m["per_layer"].items()]


def _detail(per_model: Mapping[str, Any], sink_layer_share: float) -> str:
    """Per decoder: its sink layers with their sink shares, and per sink layer the relative residual with every token
    and the moves (decades) without the first and without a random token."""
    parts = []
    for n, m in per_model.items():
        moves = ", ".join(f"{la}: share {m['sink_share'][la]:.2f}, r {e['ratio']:.3g}, moved {e['moved_first']:.2f} / "
                          f"{e['moved_random']:.2g}" for la, e in m["per_layer"].items())  # fmt: skip
        where = f"{n}: sink layers (unmodified share > {sink_layer_share:g}) {m['sink_layers'] or 'none'}"
        parts.append(where + (f"; decades moved without the first / a random token {{{moves}}}" if moves else ""))
    return "; ".join(parts) or "no pretrained decoder"


def first_token_sink_claims(
    results: Mapping[str, xr.Dataset],
    *,
    share_threshold: float,
    min_decades: float,
    sink_layer_share: float,
    random_token_control: float,
    causal: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Whether, at the sink layers of the pretrained decoders, the first token carries the unmodified model's
    composite residual (this project's hypothesis; the module docstring).

    Every causal model with pretrained weights is searched for sink layers (:func:`sink_entry`: a head is a sink
    head when its mean attention on the first token exceeds ``share_threshold``, Gu et al. 2025; a sink layer is one
    where the unmodified pretrained model's share of them exceeds ``sink_layer_share``). At each, leaving the first
    token out must move the unmodified model's relative residual by more than ``min_decades``. Holds when it does at
    every sink layer of every decoder; not judged without one. Near-miss control: any one token would do, the first
    token's move shifted ``random_token_control`` of the way toward a random token's."""
    per_model = {
        name: sink_entry(ds, share_threshold, sink_layer_share)
        for name, ds in results.items()
        if name in causal and "pretrained" in set(map(str, ds["weights"].values))
        and UNMODIFIED in set(map(str, ds["variant"].values))
    }  # fmt: skip
    items = _items(per_model)
    threshold = V.Threshold(min_decades, above=True, key="report.first_token_sink.min_decades")

    def statistic(s: float) -> V.Measure:
        return V.worst([V.Measure(moved(e["moved_first"], e["moved_random"], s), item=n) for n, e in items],
                       threshold)  # fmt: skip

    row = V.check(
        "first_token_carries_the_residual", "at the sink layers of the pretrained decoders the first token carries "
        "the composite residual", form=V.UNIVERSAL,
        source="this project's hypothesis (after Gu et al. 2025's attention sinks and Sun et al. 2024's massive "
        "activations)",
        test=f"at every sink layer of every causal model (unmodified pretrained sink share above {sink_layer_share:g})"
        f", leaving the first token out moves the unmodified model's relative residual by more than {min_decades:g} "
        "decades (margin: smallest move - required)",
        statistic=statistic, threshold=threshold,
        wrong=V.Wrong.toward("any one token would do: a random token left out in place of the first (each "
                             "sink layer's move taken {s:g} of the way to the random token's)", random_token_control,
                             "report.first_token_sink.random_token_control"),
        detail=_detail(per_model, sink_layer_share),
    )  # fmt: skip
    moves = [e["moved_first"] for _, e in items if np.isfinite(e["moved_first"])]
    return {
        "share_threshold": share_threshold,
        "sink_layer_share": sink_layer_share,
        "min_decades": min_decades,
        "first_token_carries_the_residual": row["holds"],
        "smallest_move": min(moves) if moves else float("nan"),
        "judged": sorted({n.rsplit(" layer ", 1)[0] for n, _ in items}, key=list(per_model).index),
        "per_model": per_model,
        "verdicts": [row],
    }
