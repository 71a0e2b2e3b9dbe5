"""Queipo-de-Llano, Arroyo, Barbero, Dong, Bronstein, LeCun & Shwartz-Ziv (2025, arXiv 2510.06477), abstract and
Fig. 1: "when the beginning-of-sequence token develops extreme activation norms in the middle layers, both compression
valleys and attention sinks emerge simultaneously".

On the unmodified pretrained decoders, each event is read at its **onset**: the first block where its measure has
moved from the embedding output (layer 0) by more than the random-init twin's measure moves anywhere, plus a margin
set in config (``report.phenomena.colocation``):

- the norm spike: the first token's norm over the median token norm (``first_token_norm_ratio``), its rise in
  decades, margin ``norm_decades``;
- the compression valley: the drop of the normalised matrix entropy (``matrix_entropy``), margin ``entropy_drop``;
- the sinks: the share of sink heads (Gu et al.'s epsilon ``report.first_token_sink.share_threshold``; none at layer
  0), counted per input sequence and averaged over them (one head's mean over the sequences decides nothing),
  margin ``sink_share``.

The claim holds on a model when its three onsets lie less than ``window`` blocks apart; a model without a norm onset
is not judged (the claim is about models whose first token develops extreme norms). Near-miss wrong theory: the
valley and the sinks follow the norm spike ``window`` blocks later (close, not simultaneous): their curves delayed by
``window`` blocks. The detail reads the onsets under the margins scaled by each factor of ``sensitivity`` and at each
curve's largest one-block change, and says when a definition changes the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.per_model import Judged, judge, sensitivity
from san.claims.record import Claim, NearMiss, Scope, Settings
from san.claims.verdicts import moved
from san.phenomena.data import curve, lacks, sink_curve
from san.phenomena.spec import DECODER, INIT, PRETRAINED, PRETRAINED_BY_AUTHORS, about, label

QUEIPO = "Queipo-de-Llano et al. 2025 (arXiv 2510.06477)"
MEASURES = ("first_token_norm_ratio", "matrix_entropy", "first_token_attention")
#: the three events, in the order of their curves and margins
EVENTS = ("norm spike", "valley", "sinks")
#: the config keys of the three margins, in that order
MARGINS = ("norm_decades", "entropy_drop", "sink_share")


def event_layers(norm: np.ndarray, entropy: np.ndarray, sink: np.ndarray) -> tuple[int, int, int]:
    """The blocks of the norm spike (largest rise of log ``norm``), the entropy valley's onset (largest drop of
    ``entropy``) and the sink rise (largest rise of the ``sink`` share, 0 before the first block) of per-layer curves
    (layers 0 .. L; block l writes layer l): the largest-change reading of the three events."""
    with np.errstate(divide="ignore", invalid="ignore"):
        spike = np.diff(np.log(norm))
    drop = -np.diff(entropy)
    rise = np.diff(np.concatenate([[0.0], np.nan_to_num(sink[1:], nan=0.0)]))
    return tuple(int(np.nanargmax(np.where(np.isfinite(x), x, -np.inf))) + 1 for x in (spike, drop, rise))


def moves(norm: np.ndarray, entropy: np.ndarray, sink: np.ndarray) -> np.ndarray:
    """How far each measure has moved from the embedding output per layer: the first token's norm ratio's rise in
    decades, the entropy's drop, the sink share (none at layer 0): array ``(3, layers + 1)``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rise = np.log10(norm / norm[0])
    share = np.nan_to_num(np.asarray(sink, dtype=float), nan=0.0)
    share[0] = 0.0
    return np.nan_to_num(np.stack([rise, entropy[0] - entropy, share]), nan=0.0, posinf=0.0, neginf=0.0)


def onsets(pre: np.ndarray, levels: np.ndarray) -> tuple[int | None, ...]:
    """The first block (1 .. L) where each row of ``pre`` (:func:`moves`) reaches its level, None where none does."""
    found = []
    for row, level in zip(pre, levels, strict=True):
        above = np.flatnonzero(row[1:] >= level)
        found.append(int(above[0]) + 1 if above.size else None)
    return tuple(found)


def levels(init: np.ndarray | None, margins: np.ndarray) -> np.ndarray:
    """The onset level of each measure: the largest move of the random-init twin's (:func:`moves`; 0 without a twin)
    plus its margin."""
    twin = np.zeros(len(margins)) if init is None else np.clip(init.max(axis=1), 0.0, None)
    return twin + margins


def spread(layers: tuple[int | None, ...], depth: int) -> int:
    """How many blocks separate the earliest and the latest of ``layers`` (the whole ``depth`` when an event after
    the norm spike never happens)."""
    if any(la is None for la in layers):
        return depth
    return int(max(layers) - min(layers))


def delayed(curves: np.ndarray, blocks: int) -> np.ndarray:
    """The near-miss of co-location: ``curves`` (:func:`moves`) with the valley's and the sinks' rows delayed by
    ``blocks`` (their layer-0 value before), the norm's unchanged."""
    out = np.asarray(curves, dtype=float).copy()
    if blocks > 0:
        for i in (1, 2):
            out[i, blocks:] = curves[i, :-blocks]
            out[i, :blocks] = curves[i, 0]
    return out


def _text(layers: tuple[int | None, ...]) -> str:
    return ", ".join(f"{e} {'never' if la is None else la}" for e, la in zip(EVENTS, layers, strict=True))


def _sensitivity(pre: np.ndarray, init: np.ndarray | None, margins: np.ndarray, r: Mapping[str, Any],
                 largest: tuple[int, int, int]) -> tuple[str, bool]:  # fmt: skip
    """The onsets under the margins scaled by each factor of ``sensitivity`` and the largest-change reading, with the
    spread each gives, and a warning where the verdicts differ (a verdict decided by the definition); and whether
    they do."""
    depth = pre.shape[1] - 1
    readings, verdicts = [], []
    for factor in sorted({1.0, *r["sensitivity"]}):
        found = onsets(pre, levels(init, margins * factor))
        if found[0] is None:
            readings.append(f"margins x{factor:g}: no norm onset")
            continue
        verdicts.append(spread(found, depth) < r["window"])
        readings.append(f"margins x{factor:g}: {_text(found)} (spread {spread(found, depth)})")
    verdicts.append(spread(largest, depth) < r["window"])
    readings.append(f"largest changes: {_text(largest)} (spread {spread(largest, depth)})")
    return sensitivity(readings, verdicts)


def _model(ds: xr.Dataset, share_threshold: float, r: Mapping[str, Any]) -> Judged:
    """One decoder's share of the co-location claim: the spread of its three onsets, its valley and sink curves
    delayed toward the near miss."""
    reason = lacks(ds, MEASURES, (PRETRAINED,))
    if reason:
        return Judged(DECODER, None, reason)

    def curves(weights: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (curve(ds, "first_token_norm_ratio", weights), curve(ds, "matrix_entropy", weights),
                sink_curve(ds, weights, share_threshold))  # fmt: skip

    raw = curves(PRETRAINED)
    pre = moves(*raw)
    init = moves(*curves(INIT)) if INIT in set(map(str, ds["weights"].values)) else None
    margins = np.array([float(r[k]) for k in MARGINS])
    at = levels(init, margins)
    found = onsets(pre, at)
    if found[0] is None:
        return Judged(DECODER, None, f"no norm onset: the first token's norm never rises {at[0]:.2g} decades above "
                      "the embedding output's")  # fmt: skip
    depth = pre.shape[1] - 1
    wrong = delayed(pre, int(np.ceil(r["window"])))

    def statistic(s: float) -> V.Measure:
        layers = onsets(moved(pre, wrong, s), at)
        return V.Measure(float(spread(layers, depth)), item=_text(layers))

    twin = "" if init is None else " (the init twin's largest moves {:.2g}, {:.2g}, {:.2g})".format(*init.max(axis=1))
    reading, sensitive = _sensitivity(pre, init, margins, r, event_layers(*raw))
    note = (f"onsets {_text(found)} (levels {at[0]:.2g} decades, entropy drop {at[1]:.2g}, sink share {at[2]:.2g}"
            f"{twin}); {reading}")  # fmt: skip
    return Judged(DECODER, statistic, note=note, sensitive=sensitive)


def colocation_claims(
    results: Mapping[str, xr.Dataset], kinds: Mapping[str, str], report: Mapping[str, Any], share_threshold: float
) -> dict[str, dict[str, Any]]:
    """Queipo-de-Llano et al.'s co-location over the decoders of ``results`` (model -> rank-collapse result;
    ``kinds``: model -> kind), window, margins and control setting from ``report`` (``report.phenomena``), the sink
    heads by ``share_threshold``: its ``row`` and models x claims ``cells`` by claim key."""
    r = Settings("report.phenomena", report).section("colocation")
    claim = Claim(
        key="colocated",
        statement="\"when the beginning-of-sequence token develops extreme activation norms in the middle layers, "
        "both compression valleys and attention sinks emerge simultaneously\"",
        words="\"when the beginning-of-sequence token develops extreme activation norms in the middle layers, both "
        "compression valleys and attention sinks emerge simultaneously\"",
        source=QUEIPO, place="abstract and Fig. 1", form=V.UNIVERSAL,
        scope=Scope((DECODER,), training=PRETRAINED_BY_AUTHORS),
        measure="the onsets of the first token's norm spike, of the entropy valley and of the sinks",
        test=f"in every pretrained decoder (unmodified) whose first token's norm rises, the onsets (the first block "
        f"where a measure has moved from the embedding output by more than the random-init twin's does anywhere, "
        f"plus {r['norm_decades']:g} decades of the first token's norm over the median, {r['entropy_drop']:g} of the "
        f"normalised matrix entropy, {r['sink_share']:g} of the share of sink heads with attention on the first "
        f"token above {share_threshold:g}) lie less than {r['window']:g} blocks apart (statistic: the latest minus "
        "the earliest)",
        threshold=r.threshold("window", above=False),
        near_miss=NearMiss(r.wrong("delay_control", f"the valley and the sinks {r['window']:g} blocks after the norm "
                                   "spike, moved {s:g} of the way"),
                           "the valley and the sinks could follow the norm spike closely without emerging with it"),
    )  # fmt: skip
    judged = {name: _model(results[name], share_threshold, r) for name in about(claim.key, kinds) if name in results}
    detail = "; ".join(f"{name}: {m.note}" for name, m in judged.items() if m.statistic is not None)
    return {claim.key: judge(claim, judged, kinds, detail, label(claim.key))}
