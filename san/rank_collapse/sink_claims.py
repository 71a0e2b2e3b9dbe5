"""The first-token sink claim checked against this run's results (torch-free): in the pretrained decoders, the
pure-attention path's faster collapse is carried by the first token (Gu et al. 2025's attention sink).

It is judged where sinks are: at every layer whose share of sink heads in the unmodified pretrained model (the
``transformer`` variant) exceeds ``report.first_token_sink.sink_layer_share``, a rule fixed in config before the run.
Its positive control is a placebo: the same test with a random token excluded in place of the first
(``residual_ratio_no_random``, :data:`san.rank_collapse.spec.PLACEBO`): if leaving out any one token removes as much of
the faster collapse, the first token carries nothing of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core import verdicts as V
from san.core.sink import sink_share
from san.rank_collapse.pretrained_claims import f_, moved


def carried_share(factor_all: float, factor_excluded: float) -> float:
    """The share of a faster collapse (``factor_all`` < 1: pretrained / init ratio with every token) that the
    excluded token carries: the part of its log-decrease that is gone once that token is excluded
    (``factor_excluded``: the same ratio without it). 1: all of it (no faster collapse without the token), 0: none of
    it, above 1: without the token the pretrained model collapses slower than at initialisation."""
    return 1.0 - float(np.log(factor_excluded) / np.log(factor_all))


def _factors(ds: xr.Dataset, measure: str, layers: list[int]) -> list[float]:
    """The SAN's pretrained / init mean ratio of ``measure`` at each of ``layers`` (NaN where the result lacks the
    measure)."""
    if measure not in ds:
        return [float("nan")] * len(layers)
    m = ds[measure].mean("sample").sel(variant="SAN")
    return [
        f_(m.sel(weights="pretrained", layer=la)) / f_(m.sel(weights="init", layer=la))
        if f_(m.sel(weights="init", layer=la)) > 0
        else float("inf")
        for la in layers
    ]


def _shares(ds: xr.Dataset, variant: str, share_threshold: float) -> xr.DataArray:
    """The share of sink heads (mean attention on the first token above ``share_threshold``) of ``variant``'s
    pretrained weights, per layer (NaN at layer 0)."""
    return sink_share(ds["first_token_attention"].sel(weights="pretrained", variant=variant), share_threshold)


def sink_entry(ds: xr.Dataset, share_threshold: float, sink_layer_share: float) -> dict[str, Any]:
    """One decoder's evidence for :func:`first_token_sink_claims`: its sink layers (the unmodified pretrained
    model's sink share above ``sink_layer_share``), the unmodified model's and the SAN variant's sink shares there,
    and per sink layer the SAN's pretrained / init factor with every token, without the first and without a random
    one, whether it collapses faster there, and the share of that faster collapse the first and the random token
    carry (:func:`carried_share`)."""
    unmodified, pure = _shares(ds, "transformer", share_threshold), _shares(ds, "SAN", share_threshold)
    layers = [int(la) for la in unmodified["layer"].values if f_(unmodified.sel(layer=la)) > sink_layer_share]
    entry: dict[str, Any] = {"sink_layers": layers}
    entry["sink_share"] = {str(la): f_(unmodified.sel(layer=la)) for la in layers}
    entry["san_sink_share"] = {str(la): f_(pure.sel(layer=la)) for la in layers}
    per_layer = {}
    for la, f, first, rand in zip(layers, *(_factors(ds, m, layers) for m in MEASURES), strict=True):
        faster = bool(f < 1)
        per_layer[str(la)] = {"factor": f, "factor_without_first": first, "factor_without_random": rand,
                              "faster": faster, "carried": carried_share(f, first) if faster else None,
                              "carried_random": carried_share(f, rand) if faster else None}  # fmt: skip
    entry["per_layer"] = per_layer
    return entry


#: the measures whose pretrained / init factors the claim compares: every token, without the first, without a random
MEASURES = ("residual_ratio", "residual_ratio_no_first", "residual_ratio_no_random")


def _items(per_model: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The judged (decoder, sink layer) pairs: the sink layers where the SAN collapses faster pretrained."""
    return [(f"{n} layer {la}", e) for n, m in per_model.items() for la, e in m["per_layer"].items() if e["faster"]]


def _detail(per_model: Mapping[str, Any], sink_layer_share: float) -> str:
    """Per decoder: its sink layers, the unmodified model's and the SAN's sink shares there, and per judged layer
    the share carried by the first and by a random token."""
    parts = []
    for n, m in per_model.items():
        shares = ", ".join(f"{la}: {m['sink_share'][la]:.2f} / {m['san_sink_share'][la]:.2f}" for la in m["sink_share"])
        carried = ", ".join(f"{la}: {e['carried']:.2f} / {e['carried_random']:.2f}"
                            for la, e in m["per_layer"].items() if e["faster"])  # fmt: skip
        parts.append(f"{n}: sink layers (unmodified share > {sink_layer_share:g}) {m['sink_layers'] or 'none'}, sink "
                     f"share unmodified / SAN {{{shares}}}; carried first / random where the SAN collapses faster "
                     f"{{{carried or 'nowhere'}}}")  # fmt: skip
    return "; ".join(parts) or "no pretrained decoder"


def first_token_sink_claims(
    results: Mapping[str, xr.Dataset],
    *,
    share_threshold: float,
    min_carried: float,
    sink_layer_share: float,
    random_token_control: float,
    causal: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Whether the pure-attention path's faster collapse in the pretrained decoders is carried by the first token,
    where the decoders have sinks.

    Every causal model with both weights is searched for sink layers (:func:`sink_entry`: a head is a sink head
    when its mean attention on the first token exceeds ``share_threshold``, Gu et al. 2025; a sink layer is one where
    the unmodified pretrained model's share of them exceeds ``sink_layer_share``). At each sink layer where the SAN
    ratio is lower pretrained than at initialisation (a faster collapse), the first token carries it when at least
    ``min_carried`` of its log-decrease is gone without the first token. Holds when it does at every such layer of
    every decoder; not judged without one. Placebo: the share carried by a random token instead, the first token's
    share moved ``random_token_control`` of the way toward it."""
    per_model = {
        name: sink_entry(ds, share_threshold, sink_layer_share)
        for name, ds in results.items()
        if name in causal and {"init", "pretrained"} <= set(map(str, ds["weights"].values))
        and {"SAN", "transformer"} <= set(map(str, ds["variant"].values))
    }  # fmt: skip
    items = _items(per_model)
    threshold = V.Threshold(min_carried, above=True, key="report.first_token_sink.min_carried")

    def statistic(s: float) -> V.Measure:
        return V.worst([V.Measure(moved(e["carried"], e["carried_random"], s), item=n) for n, e in items], threshold)

    row = V.check(
        "carried_in_every_decoder", "in the pretrained decoders the pure-attention path's faster collapse is carried "
        "by the first token", form=V.UNIVERSAL, source="Gu et al. 2025 (attention sinks); Dong et al. 2021, Fig. 2",
        test=f"at every sink layer of every causal model (unmodified pretrained sink share above {sink_layer_share:g}) "
        f"where the pretrained SAN ratio is below its init one, more than {min_carried:g} of the log-decrease is gone "
        "without the first token (margin: smallest share - required)",
        statistic=statistic, threshold=threshold,
        wrong=V.Wrong.toward("a random token excluded in place of the first (the data moved {s:g} of the way to it)",
                             random_token_control, "report.first_token_sink.random_token_control"),
        detail=_detail(per_model, sink_layer_share),
    )  # fmt: skip
    carried = [e["carried"] for _, e in items]
    return {
        "share_threshold": share_threshold,
        "sink_layer_share": sink_layer_share,
        "min_carried": min_carried,
        "carried_in_every_decoder": row["holds"],
        "smallest_carried": min(carried) if carried else float("nan"),
        "judged": sorted({n.rsplit(" layer ", 1)[0] for n, _ in items}, key=list(per_model).index),
        "per_model": per_model,
        "verdicts": [row],
    }
