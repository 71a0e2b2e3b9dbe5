"""Barbero, Arroyo, Gu, Perivolaropoulos, Bronstein, Veličković & Pascanu (COLM 2025), "Why do LLMs attend to the
first token?": sinks help a deep model avoid over-mixing, so a larger (deeper) model of one family needs, and has,
stronger sinks (their experiments on the LLaMa 3.1 family at several sizes; the abstract: "depth ... influence[s]
the sink behaviour"). A trend with size is judged only within a family pretrained at several sizes by one recipe
(``phenomena.size_ladders``, smallest first), pair by pair; a run without such a pair leaves it not judged, saying
what it needs. Every row rests on the pairs it names, and one pair is one pair: the row says so.

On the unmodified decoders' context-length runs (:mod:`san.phenomena.context`): per sequence, the share of sink heads
(Gu et al.'s epsilon, ``report.first_token_sink.share_threshold``) averaged over the layers, at the longest length
both runs hold; the claim holds when in every pair the larger model's share exceeds the smaller's on the same
sequences by ``report.phenomena.size.growth``, after ``report.phenomena.size.sigmas`` standard errors over the
sequences (paired where both runs hold the same sequences). Near miss: one sink profile over relative depth for the
whole family (a trait of its recipe), the deeper model only sampling it more finely: the larger model's share on each
sequence moved toward the smaller model's per-layer shares read at the larger's relative depths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.per_model import Judged, cell, not_about, unjudged_cell
from san.claims.record import Claim, NearMiss, Scope, Settings, item
from san.claims.verdicts import moved
from san.measures.sink import sink_share
from san.phenomena.context import SOURCE, first_token_alpha
from san.phenomena.spec import DECODER, PRETRAINED, PRETRAINED_BY_AUTHORS, label

KEY = "sinks_grow_with_model_size"
NEEDS = ("needs one family pretrained at two sizes by one recipe (phenomena.size_ladders; config/qwen-1.5b.yaml "
         "adds Qwen2.5-Coder-1.5B beside the 0.5B)")  # fmt: skip


def pairs(ladders: Sequence[Sequence[str]], held: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The consecutive (smaller, larger) pairs of each ladder among the models ``held`` (those with context-length
    runs); a ladder member the run does not hold is skipped, so a ladder of three with its middle model missing
    still gives its smallest and largest."""
    out = []
    for ladder in ladders:
        present = [name for name in ladder if name in held]
        out.extend(zip(present, present[1:], strict=False))
    return out


def layer_shares(ds: xr.Dataset, share_threshold: float, length: int) -> xr.DataArray:
    """The pretrained unmodified model's share of sink heads per layer with attention (and per sequence, where the
    run keeps them) at context ``length``."""
    share = sink_share(first_token_alpha(ds, PRETRAINED).sel(seq_len=length), share_threshold)
    return share.dropna("layer", how="all")


def at_relative_depth(profile: xr.DataArray, layers: int) -> np.ndarray:
    """The near miss's prediction: ``profile`` (a model's share per layer, and per sequence where kept) read at the
    relative depths of a model of ``layers`` layers with attention (linear interpolation between the layers'
    relative depths ``l / L``) and averaged over them, per sequence."""
    own = np.arange(1, profile.sizes["layer"] + 1) / profile.sizes["layer"]
    other = np.arange(1, layers + 1) / layers
    values = np.asarray(profile.transpose("layer", ...), dtype=float).reshape(profile.sizes["layer"], -1)
    return np.array([np.interp(other, own, column).mean() for column in values.T])


def pair_shares(small: xr.Dataset, large: xr.Dataset, share_threshold: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:  # fmt: skip
    """At the longest length both runs hold: the smaller and the larger model's sink shares (mean over layers) per
    sequence, the near miss's prediction of the larger's (the smaller's profile at the larger's relative depths), and
    that length (0 without a common length)."""
    lengths = [{int(x) for x in ds["seq_len"].values} for ds in (small, large)]
    common = sorted(lengths[0] & lengths[1])
    if not common:
        return np.array([]), np.array([]), np.array([]), 0
    a, b = (layer_shares(ds, share_threshold, common[-1]) for ds in (small, large))
    flat = (np.atleast_1d(np.asarray(x.mean("layer"), dtype=float)) for x in (a, b))
    return *flat, at_relative_depth(a, b.sizes["layer"]), common[-1]


def _pair(small_name: str, small: xr.Dataset, large_name: str, large: xr.Dataset, share: float) -> Judged:
    """One pair's share of the claim: the larger model's per-sequence sink share minus the smaller's, the larger's
    moved toward the near miss's prediction of it."""
    a, b, depth, length = pair_shares(small, large, share)
    if not length:
        return Judged(DECODER, None, f"no context length both {small_name} and {large_name} were run at")
    paired = a.size == b.size

    def statistic(s: float) -> V.Measure:
        if paired:
            mean, se, n = V.spread(moved(b, depth, s) - a)
        else:
            (mb, sb, nb), (ma, sa, na) = V.spread(moved(b, np.mean(depth), s)), V.spread(a)
            mean, se, n = mb - ma, float(np.hypot(sb, sa)), min(nb, na)
        return V.Measure(mean, se, n, item=f"{small_name} -> {large_name}, {length} tokens")

    note = (f"{small_name} {np.mean(a):.2f} -> {large_name} {np.mean(b):.2f} at {length} tokens "
            f"({'paired over' if paired else 'means of'} {min(a.size, b.size)} sequences; one pair); "
            f"{small_name}'s profile at {large_name}'s relative depths {np.mean(depth):.2f}")  # fmt: skip
    return Judged(DECODER, statistic, note=note)


def size_claim(r: Settings, share_threshold: float) -> Claim:
    """The claim's record, thresholds and near miss from ``r`` (``report.phenomena.size``), sink heads by
    ``share_threshold``."""
    return Claim(
        key=KEY,
        statement="within one family, the larger (deeper) pretrained decoder has the stronger attention sinks",
        words="we ... show how choices such as context length, depth, and data packing influence the sink behaviour",
        source=SOURCE, place="abstract; its experiments on the LLaMa 3.1 family at several sizes",
        form=V.UNIVERSAL,
        scope=Scope((DECODER,), sizes="two or more sizes of one family", training=PRETRAINED_BY_AUTHORS,
                    sweep=("model size within one family",), needs=NEEDS),
        measure="the share of sink heads averaged over the layers, per sequence, at the longest context length",
        test=(f"in every pair of a size ladder, the larger model's share of sink heads (attention on the first token "
              f"above {share_threshold:g}), averaged over its layers, exceeds the smaller's on the same sequences by "
              f"more than {r['growth']:g}, after {r['sigmas']:g} standard errors over the sequences"),
        threshold=r.threshold("growth", above=True, sigmas="sigmas"),
        near_miss=NearMiss(r.wrong("depth_profile_control", "one sink profile over relative depth for the family: the "
                                   "larger model's share moved {s:g} of the way to the smaller's per-layer shares "
                                   "read at the larger's relative depths, on the same sequence"),
                           "sinks could sit at the same relative depths at every size of a family (a trait of its "
                           "recipe), a deeper model then only sampling the same profile more finely"),
        caveats=("rests on the pairs the run holds (one pair: one family, two sizes)",),
    )  # fmt: skip


def size_claims(
    results: Mapping[str, xr.Dataset],
    kinds: Mapping[str, str],
    report: Mapping[str, Any],
    share_threshold: float,
    ladders: Sequence[Sequence[str]],
) -> dict[str, dict[str, Any]]:
    """Barbero et al.'s growth of sinks with model size over the ``ladders`` (families at several sizes, smallest
    first) whose context-length runs are in ``results`` (model -> result), thresholds from ``report``
    (``report.phenomena``), sink heads by ``share_threshold``: its ``row`` and models x claims ``cells`` (a model in a
    judged pair gets its pair's check; a decoder in none, not judged; any other kind, n/a)."""
    claim = size_claim(Settings("report.phenomena", report).section("size"), share_threshold)
    decoders = {name for name, kind in kinds.items() if kind == DECODER}
    held = {n: results[n] for n in results if n in decoders}
    judged = {f"{a} -> {b}": (a, b, _pair(a, results[a], b, results[b], share_threshold))
              for a, b in pairs(ladders, held)}  # fmt: skip
    statistics = {name: m.statistic for name, (_, _, m) in judged.items() if m.statistic is not None}
    if not statistics:
        found = (f"this run's size ladders hold no two sizes with context-length runs ({len(decoders)} decoder(s), "
                 f"ladders: {[list(ladder) for ladder in ladders] or 'none'})")  # fmt: skip
        cells = {name: unjudged_cell(kind, V.NOT_JUDGED, NEEDS) if kind == DECODER else
                 not_about(label(KEY), kind)
                 for name, kind in kinds.items()}  # fmt: skip
        return {KEY: {"row": claim.not_in_scope(found), "cells": cells}}
    cells = {name: unjudged_cell(DECODER, V.NOT_JUDGED, f"no other size of its family in this run; {NEEDS}")
             if kind == DECODER else not_about(label(KEY), kind)
             for name, kind in kinds.items()}  # fmt: skip
    rested = []
    for name, (small, large, m) in judged.items():
        if m.statistic is None:
            pair_cell = unjudged_cell(DECODER, V.NOT_JUDGED, m.reason)
        else:
            pair_cell = cell(claim.judge(m.statistic, m.note), DECODER, m.note)
        for member in (large, small):  # the larger model's own pair first; the smallest keeps its only pair
            if cells[member]["verdict"] == V.NOT_JUDGED:
                cells[member] = {**pair_cell, "note": f"{name}: {pair_cell['note']}"}
        rested.append(item(name, pair_cell["value"], verdict=pair_cell["verdict"]))

    def statistic(s: float) -> V.Measure:
        return V.worst([f(s) for f in statistics.values()], claim.threshold)

    unjudged = "; ".join(f"{name}: not judged ({m.reason})" for name, (_, _, m) in judged.items() if not m.statistic)
    detail = "; ".join(part for part in ("; ".join(m.note for _, _, m in judged.values() if m.statistic), unjudged)
                       if part)  # fmt: skip
    return {KEY: {"row": claim.judge(statistic, detail, rested), "cells": cells}}
