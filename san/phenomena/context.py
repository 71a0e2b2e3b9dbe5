"""Barbero, Arroyo, Gu, Perivolaropoulos, Bronstein, Veličković & Pascanu (COLM 2025), "Why do LLMs attend to the
first token?": attention sinks help a deep model avoid over-mixing, and they grow with the context length the models
are pretrained at. That claim needs models pretrained at several context lengths: a run without them leaves it not
judged, saying so. What a run can measure is one pretrained decoder read at several lengths of the same sequences, a
position effect at inference: a row of its own, credited to no paper.

On the unmodified decoders, from the context-length runs (the attention on the first token per sequence length,
layer, head and sequence, ``first_token_attention_by_sample``; its mean over the sequences, ``first_token_attention``,
where a run has no other): per sequence, the share of sink heads (Gu et al.'s epsilon,
``report.first_token_sink.share_threshold``) averaged over the layers; the claim holds when the pretrained decoder's
share at the longest length exceeds the shortest's by ``report.phenomena.context.growth``, after
``report.phenomena.context.sigmas`` standard errors over the sequences (paired: the same sequences cut to each length).
Near miss: dilution alone, a sink being a fixed share of each head's attention that spreads over a longer prefix as
uniform causal attention does (query k puts 1/k on the first token: the mean over a sequence of T tokens is
H_T / T): each head's attention at the shortest length scaled by that ratio, and each sequence's growth moved
toward the growth of that prediction. Placebo (in the detail): the random-init twin's growth.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.per_model import Judged, judge, not_about, unjudged_cell
from san.claims.record import Claim, NearMiss, Scope, Settings
from san.claims.verdicts import moved
from san.measures.sink import sink_share
from san.phenomena.data import attention_variable, lacks
from san.phenomena.spec import DECODER, INIT, PRETRAINED, PRETRAINED_BY_AUTHORS, UNMODIFIED, about, label

SOURCE, PLACE = "Barbero et al. 2025 (COLM), 'Why do LLMs attend to the first token?'", "the context-length experiment"
PROJECT = "this project's measurement (no paper states it)"


def first_token_alpha(ds: xr.Dataset, weights: str) -> xr.DataArray:
    """The unmodified model's attention on the first token of one weight set: per sequence where the result keeps
    them (:data:`san.phenomena.data.BY_SAMPLE`), else their mean (:func:`san.phenomena.data.attention_variable`)."""
    alpha = ds[attention_variable(ds)].sel(weights=weights)
    return alpha.sel(variant=UNMODIFIED) if "variant" in alpha.dims else alpha


def sink_by_length(ds: xr.Dataset, weights: str, share_threshold: float) -> xr.DataArray:
    """The share of sink heads averaged over the layers with attention, per sequence length and sequence (dims
    ``seq_len, sample``; ``seq_len`` alone from a result that keeps only the mean over the sequences)."""
    return sink_share(first_token_alpha(ds, weights), share_threshold).mean("layer", skipna=True)


def growth(share: xr.DataArray) -> np.ndarray:
    """The share at the longest length minus the share at the shortest, per sequence (one value without a
    ``sample`` dim)."""
    lengths = sorted(int(x) for x in share["seq_len"].values)
    diff = share.sel(seq_len=lengths[-1]) - share.sel(seq_len=lengths[0])
    return np.atleast_1d(np.asarray(diff, dtype=float))


def uniform_first_token(length: int) -> float:
    """The attention on the first token that uniform causal attention gives, averaged over the queries of a sequence
    of ``length`` tokens: query k attends 1/k to it, so ``H_length / length`` (``H`` the harmonic number)."""
    return float(np.sum(1.0 / np.arange(1, length + 1)) / length)


def diluted_growth(ds: xr.Dataset, share_threshold: float) -> np.ndarray:
    """The near miss's growth per sequence: every head's attention on the first token at the shortest length scaled
    as uniform causal attention dilutes from the shortest to the longest length (:func:`uniform_first_token`), its
    share of sink heads at the longest length minus the measured one at the shortest."""
    alpha = first_token_alpha(ds, PRETRAINED)
    lengths = sorted(int(x) for x in ds["seq_len"].values)
    short = alpha.sel(seq_len=lengths[0])
    predicted = (short * uniform_first_token(lengths[-1]) / uniform_first_token(lengths[0])).clip(max=1.0)
    diff = sink_share(predicted, share_threshold).mean("layer", skipna=True) - sink_share(short, share_threshold).mean(
        "layer", skipna=True
    )
    return np.atleast_1d(np.asarray(diff, dtype=float))


def _model(ds: xr.Dataset, share_threshold: float) -> Judged:
    """One decoder's share of the claim: its per-sequence growth of the sink share, moved toward the growth that
    dilution alone predicts from its own attention at the shortest length (:func:`diluted_growth`); the init twin's
    growth, a placebo, in the note."""
    reason = lacks(ds, (attention_variable(ds),), (PRETRAINED, INIT))
    if not reason and ds.sizes.get("seq_len", 0) < 2:
        reason = "fewer than two sequence lengths in the context-length runs"
    if reason:
        return Judged(DECODER, None, reason)
    pre_share, init_share = (sink_by_length(ds, w, share_threshold) for w in (PRETRAINED, INIT))
    pre, init, diluted = growth(pre_share), growth(init_share), diluted_growth(ds, share_threshold)
    lengths = sorted(int(x) for x in ds["seq_len"].values)

    def statistic(s: float) -> V.Measure:
        mean, se, n = V.spread(moved(pre, diluted, s))
        return V.Measure(mean, se, n, item=f"{lengths[0]} -> {lengths[-1]} tokens")

    by_length = ", ".join(f"{length}: {float(pre_share.sel(seq_len=length).mean()):.2f}" for length in lengths)
    note = (f"sink share by length {{{by_length}}}; growth by dilution alone {float(np.mean(diluted)):+.3f}; "
            f"init twin's growth {float(np.mean(init)):+.3f} (placebo)")  # fmt: skip
    return Judged(DECODER, statistic, note=note)


def dilution_near_miss(r: Settings) -> NearMiss:
    """The inference-context row's near miss (:func:`diluted_growth`), its setting from ``r``
    (``report.phenomena.context``)."""
    return NearMiss(r.wrong("dilution_control", "the growth that dilution alone predicts (each head's first-token "
                            "attention at the shortest length scaled as uniform causal attention's, H_T / T), "
                            "moved {s:g} of the way"),
                    "a sink could be a fixed share of each head's attention that spreads over a longer prefix as "
                    "uniform causal attention does, so the share of sink heads would change with the length by "
                    "dilution alone")  # fmt: skip


def context_claims(
    results: Mapping[str, xr.Dataset], kinds: Mapping[str, str], report: Mapping[str, Any], share_threshold: float
) -> dict[str, dict[str, Any]]:
    """Barbero et al.'s growth of sinks with the pretraining context (not judged: no run holds decoders pretrained at
    several context lengths) and, as a row of its own credited to no paper, the sink share of each decoder
    (``kinds``: model -> kind) whose context-length runs are in ``results`` (model -> result; a decoder without one
    is not judged) on longer prefixes of the same sequences, thresholds and control setting from ``report``
    (``report.phenomena``), sink heads by ``share_threshold``: per claim key, its ``row`` and models x claims
    ``cells``."""
    r = Settings("report.phenomena", report).section("context")
    threshold = r.threshold("growth", above=True, sigmas="sigmas")
    near_miss = NearMiss(r.wrong("init_control", "the random-init twin's growth, moved {s:g} of the way"),
                         "uniform causal attention dilutes with the length, so a share could change with the prefix "
                         "without any training")  # fmt: skip
    test = (
        f"in every pretrained decoder (unmodified), the share of sink heads (attention on the first token above "
        f"{share_threshold:g}), averaged over the layers, is larger at the longest sequence length than at the "
        f"shortest by more than {r['growth']:g}, after {r['sigmas']:g} standard errors over the sequences"
    )
    barbero = Claim(
        key="sinks_grow_with_context",
        statement="attention sinks grow with the context length the model is pretrained at",
        words="sinks grow with the context length (models pretrained at several context lengths)",
        source=SOURCE, place=PLACE, form=V.UNIVERSAL,
        scope=Scope((DECODER,), training="pretrained at several context lengths (one architecture, one recipe)",
                    sweep=("pretraining context length",),
                    needs="needs models pretrained at several context lengths"),
        measure="the share of sink heads of each model, against its pretraining context length",
        test="the sink share rises with the pretraining context length over models that differ in nothing else",
        threshold=threshold, near_miss=near_miss,
    )  # fmt: skip
    dilution = dilution_near_miss(r)
    inference = Claim(
        key="sinks_at_longer_inference_context",
        statement="a pretrained decoder's share of sink heads grows when it reads longer prefixes of the same "
        "sequences (a position effect at inference, not Barbero et al.'s pretraining context)",
        words="", source=PROJECT, place="", form=V.UNIVERSAL,
        scope=Scope((DECODER,), training=PRETRAINED_BY_AUTHORS, sweep=("inference prefix length",)),
        measure="the share of sink heads averaged over the layers, per sequence, at the shortest and longest prefix",
        test=test, threshold=threshold, near_miss=dilution, placebo="the random-init twin (its growth in the detail)",
    )  # fmt: skip
    decoders = about(barbero.key, kinds)
    cells = {name: unjudged_cell(kind, V.NOT_JUDGED, barbero.scope.needs) if name in decoders else
             not_about(label(barbero.key), kind)
             for name, kind in kinds.items()}  # fmt: skip
    found = (
        f"this run reads {len(decoders)} decoder(s) each pretrained at one context length"
        if decoders
        else ("no decoder in this run")
    )
    judged = {
        name: _model(results[name], share_threshold)
        if name in results
        else Judged(DECODER, None, "no context-length run of this model (rule sink_context)")
        for name in about(inference.key, kinds)
    }
    detail = "; ".join(f"{name}: {m.note}" for name, m in judged.items() if m.statistic is not None)
    return {barbero.key: {"row": barbero.not_in_scope(found), "cells": cells},
            inference.key: judge(inference, judged, kinds, detail, label(inference.key))}  # fmt: skip
