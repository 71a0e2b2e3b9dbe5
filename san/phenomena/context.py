"""Barbero, Arroyo, Gu, Perivolaropoulos, Bronstein, Veličković & Pascanu (COLM 2025), "Why do LLMs attend to the
first token?": attention sinks help a deep model avoid over-mixing, and they grow with the context length (the
paper pretrains models at several context lengths; offline, one pretrained decoder is read at several lengths of the
same sequences).

On the unmodified decoders, from the context-length runs (the attention on the first token per sequence length,
layer, head and sequence, ``first_token_attention_by_sample``; its mean over the sequences, ``first_token_attention``,
where a run has no other): per sequence, the share of sink heads (Gu et al.'s epsilon,
``report.first_token_sink.share_threshold``) averaged over the layers; the claim holds when the pretrained decoder's
share at the longest length exceeds the shortest's by ``report.phenomena.context.growth``, after
``report.phenomena.context.sigmas`` standard errors over the sequences (paired: the same sequences cut to each length).
Placebo: the random-init twin, whose attention spreads over the context (uniform causal attention puts 1/k on the
first token for query k, so its share can only fall with the length): each sequence's growth moved toward the init
twin's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core import verdicts as V
from san.core.sink import sink_share
from san.phenomena.checks import Claim, Judged, about, judge, moved
from san.phenomena.data import lacks
from san.phenomena.spec import DECODER, INIT, PRETRAINED, UNMODIFIED

SOURCE = "Barbero et al. 2025 (COLM), 'Why do LLMs attend to the first token?', the context-length experiment"


#: the context-length runs' attention on the first token per sequence, and its mean over the sequences
BY_SAMPLE, MEAN = "first_token_attention_by_sample", "first_token_attention"


def sink_by_length(ds: xr.Dataset, weights: str, share_threshold: float) -> xr.DataArray:
    """The share of sink heads averaged over the layers with attention, per sequence length and sequence (dims
    ``seq_len, sample``; ``seq_len`` alone from a result that keeps only the mean over the sequences)."""
    alpha = ds[BY_SAMPLE if BY_SAMPLE in ds else MEAN].sel(weights=weights)
    if "variant" in alpha.dims:
        alpha = alpha.sel(variant=UNMODIFIED)
    return sink_share(alpha, share_threshold).mean("layer", skipna=True)


def growth(share: xr.DataArray) -> np.ndarray:
    """The share at the longest length minus the share at the shortest, per sequence (one value without a
    ``sample`` dim)."""
    lengths = sorted(int(x) for x in share["seq_len"].values)
    diff = share.sel(seq_len=lengths[-1]) - share.sel(seq_len=lengths[0])
    return np.atleast_1d(np.asarray(diff, dtype=float))


def _model(ds: xr.Dataset, share_threshold: float) -> Judged:
    """One decoder's share of the claim: its per-sequence growth of the sink share, moved toward its init twin's."""
    reason = lacks(ds, (BY_SAMPLE if BY_SAMPLE in ds else MEAN,), (PRETRAINED, INIT))
    if not reason and ds.sizes.get("seq_len", 0) < 2:
        reason = "fewer than two sequence lengths in the context-length runs"
    if reason:
        return Judged(DECODER, None, reason)
    pre_share, init_share = (sink_by_length(ds, w, share_threshold) for w in (PRETRAINED, INIT))
    pre, init = growth(pre_share), growth(init_share)
    lengths = sorted(int(x) for x in ds["seq_len"].values)

    def statistic(s: float) -> V.Measure:
        mean, se, n = V.spread(moved(pre, init, s))
        return V.Measure(mean, se, n, item=f"{lengths[0]} -> {lengths[-1]} tokens")

    by_length = ", ".join(f"{length}: {float(pre_share.sel(seq_len=length).mean()):.2f}" for length in lengths)
    note = f"sink share by length {{{by_length}}}; init twin's growth {float(np.mean(init)):+.3f}"
    return Judged(DECODER, statistic, note=note)


def context_claims(
    results: Mapping[str, xr.Dataset], kinds: Mapping[str, str], report: Mapping[str, Any], share_threshold: float
) -> dict[str, dict[str, Any]]:
    """Barbero et al.'s growth of sinks with the context length over the decoders (``kinds``: model -> kind) whose
    context-length runs are in ``results`` (model -> result; a decoder without one is not judged), thresholds and
    control setting from ``report`` (``report.phenomena``), sink heads by ``share_threshold``: its ``row`` and models
    x claims ``cells`` by claim key."""
    r = report["context"]
    claim = Claim(
        "sinks_grow_with_context", "attention sinks grow with the context length (the paper pretrains at several "
        "context lengths; here the same pretrained decoder reads the first L tokens of the same sequences)",
        V.UNIVERSAL, SOURCE,
        f"in every pretrained decoder (unmodified), the share of sink heads (attention on the first token above "
        f"{share_threshold:g}), averaged over the layers, is larger at the longest sequence length than at the "
        f"shortest by more than {r['growth']:g}, after {r['sigmas']:g} standard errors over the sequences",
        V.Threshold(r["growth"], above=True, key="report.phenomena.context.growth", sigmas=r["sigmas"]),
        V.Wrong.toward("the random-init twin's growth, moved {s:g} of the way", r["init_control"],
                       "report.phenomena.context.init_control"),
    )  # fmt: skip
    judged = {
        name: _model(results[name], share_threshold)
        if name in results
        else Judged(DECODER, None, "no context-length run of this model (rule sink_context)")
        for name in about(claim.key, kinds)
    }
    detail = "; ".join(f"{name}: {m.note}" for name, m in judged.items() if m.statistic is not None)
    return {claim.key: judge(claim, judged, kinds, detail)}
