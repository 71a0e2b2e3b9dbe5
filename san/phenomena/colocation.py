"""Queipo-de-Llano, Arroyo, Barbero, Dong, Bronstein, LeCun & Shwartz-Ziv (2025, arXiv 2510.06477), abstract and
Fig. 1: "when the beginning-of-sequence token develops extreme activation norms in the middle layers, both compression
valleys and attention sinks emerge simultaneously".

On the unmodified pretrained decoders: the layer of the norm spike (the largest one-block rise of the first token's
norm over the median token norm, ``first_token_norm_ratio``, in decades), the valley's onset (the largest one-block
drop of the normalised matrix entropy, ``matrix_entropy``) and the sink rise (the largest one-block rise of the share
of sink heads, Gu et al.'s epsilon ``report.first_token_sink.share_threshold``; no sink before the first block) lie
less than ``report.phenomena.colocation.window`` blocks apart. Placebo: the random-init twin, the three pretrained
curves moved toward its three (the norm geometrically): the three layers as they fall without training.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims.record import Claim, NearMiss, Scope, Settings
from san.core import verdicts as V
from san.phenomena.checks import Judged, about, judge, moved
from san.phenomena.data import curve, lacks, sink_curve
from san.phenomena.spec import DECODER, INIT, PRETRAINED, PRETRAINED_BY_AUTHORS

QUEIPO = "Queipo-de-Llano et al. 2025 (arXiv 2510.06477)"
MEASURES = ("first_token_norm_ratio", "matrix_entropy", "first_token_attention")


def event_layers(norm: np.ndarray, entropy: np.ndarray, sink: np.ndarray) -> tuple[int, int, int]:
    """The blocks of the norm spike (largest rise of log ``norm``), the entropy valley's onset (largest drop of
    ``entropy``) and the sink rise (largest rise of the ``sink`` share, 0 before the first block) of per-layer curves
    (layers 0 .. L; block l writes layer l)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        spike = np.diff(np.log(norm))
    drop = -np.diff(entropy)
    rise = np.diff(np.concatenate([[0.0], np.nan_to_num(sink[1:], nan=0.0)]))
    return tuple(int(np.nanargmax(np.where(np.isfinite(x), x, -np.inf))) + 1 for x in (spike, drop, rise))


def spread(layers: tuple[int, ...]) -> int:
    """How many blocks separate the earliest and the latest of ``layers``."""
    return int(max(layers) - min(layers))


def _curves(ds: xr.Dataset, weights: str, share_threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (curve(ds, "first_token_norm_ratio", weights), curve(ds, "matrix_entropy", weights),
            sink_curve(ds, weights, share_threshold))  # fmt: skip


def _model(ds: xr.Dataset, share_threshold: float) -> Judged:
    """One decoder's share of the co-location claim: the spread of its three layers, its curves moved toward its
    init twin's."""
    reason = lacks(ds, MEASURES, (PRETRAINED, INIT))
    if reason:
        return Judged(DECODER, None, reason)
    pre, init = _curves(ds, PRETRAINED, share_threshold), _curves(ds, INIT, share_threshold)

    def statistic(s: float) -> V.Measure:
        norm = moved(pre[0], init[0], s, log=True)
        layers = event_layers(norm, moved(pre[1], init[1], s), moved(pre[2], init[2], s))
        return V.Measure(float(spread(layers)), item="spike {}, valley {}, sink {}".format(*layers))

    found, twin = event_layers(*pre), event_layers(*init)
    note = ("norm spike, entropy valley, sink rise at blocks {}, {}, {} (first-token norm / median {:.3g}, entropy "
            "{:.2f}, sink share {:.2f} there); init twin's at {}, {}, {}").format(
        *found, pre[0][found[0]], pre[1][found[1]], np.nan_to_num(pre[2][found[2]]), *twin)  # fmt: skip
    return Judged(DECODER, statistic, note=note)


def colocation_claims(
    results: Mapping[str, xr.Dataset], kinds: Mapping[str, str], report: Mapping[str, Any], share_threshold: float
) -> dict[str, dict[str, Any]]:
    """Queipo-de-Llano et al.'s co-location over the decoders of ``results`` (model -> rank-collapse result;
    ``kinds``: model -> kind), window and control setting from ``report`` (``report.phenomena``), the sink heads
    by ``share_threshold``: its ``row`` and models x claims ``cells`` by claim key."""
    r = Settings("report.phenomena", report).section("colocation")
    claim = Claim(
        key="colocated",
        statement="\"when the beginning-of-sequence token develops extreme activation norms in the middle layers, "
        "both compression valleys and attention sinks emerge simultaneously\"",
        words="\"when the beginning-of-sequence token develops extreme activation norms in the middle layers, both "
        "compression valleys and attention sinks emerge simultaneously\"",
        source=QUEIPO, place="abstract and Fig. 1", form=V.UNIVERSAL,
        scope=Scope((DECODER,), training=PRETRAINED_BY_AUTHORS),
        measure="the blocks of the first token's norm spike, of the entropy valley and of the sink rise",
        test=f"in every pretrained decoder (unmodified), the blocks of the largest rise of the first token's norm over "
        f"the median (log), of the largest drop of the normalised matrix entropy and of the largest rise of the share "
        f"of sink heads (attention on the first token above {share_threshold:g}) lie less than {r['window']:g} "
        "blocks apart (statistic: the latest minus the earliest)",
        threshold=r.threshold("window", above=False),
        near_miss=NearMiss(r.wrong("init_control", "the random-init twin's three curves, moved {s:g} of the way"),
                           "the three events could line up by the architecture alone, before any training"),
        placebo="the random-init twin",
    )  # fmt: skip
    judged = {name: _model(results[name], share_threshold) for name in about(claim.key, kinds) if name in results}
    detail = "; ".join(f"{name}: {m.note}" for name, m in judged.items() if m.statistic is not None)
    return {claim.key: judge(claim, judged, kinds, detail)}
