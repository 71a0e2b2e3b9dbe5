"""Sun, Chen, Kolter & Liu (COLM 2024), "Massive activations in large language models", Sec. 2 ("Which layers?"):
in LLaMA2-7B massive activations "first appear in layer 2 and remain nearly constant values until layer 30"; they
"emerge very rapidly from one layer of computation", not "as a result of gradual accumulation through many layers".

Two rows on the unmodified pretrained decoders, from the massive ratio per layer (``massive_ratio``: the largest
activation magnitude of the layer's hidden state over the median magnitude, mean over the sequences):

- **appear abruptly**: the largest one-block rise of the ratio among the blocks of the first half of the depth, if at
  least ``report.phenomena.massive.jump``, carries at least ``report.phenomena.massive.one_block_share`` of the rise
  over it and its neighbouring blocks (the share of the positive log-rises; 0 without such a rise). Near-miss wrong
  theory, Sun et al.'s own contrast ("gradual accumulation"): the same rise spread over two blocks, which carries
  about half. The random-init twin (massive activations as an architectural property present before training) is
  its placebo, named in the row and decided by nothing.
- **plateau**: from the layer of that rise to the last ``tail`` blocks, the ratio stays within a factor
  ``report.phenomena.massive.plateau`` of its median over those layers. Near-miss wrong theory: a transient spike,
  the ratio back at its level before the rise from the next layer on (as an outlier of one layer would be).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims.record import Claim, NearMiss, Scope, Settings
from san.core import verdicts as V
from san.phenomena.checks import Judged, about, judge, moved
from san.phenomena.data import curve, lacks, mode, per_input
from san.phenomena.spec import DECODER, INIT, PRETRAINED, PRETRAINED_BY_AUTHORS

SUN, PLACE = "Sun et al. 2024 (COLM)", "Sec. 2, 'Which layers?'"
MEASURE = "massive_ratio"


def first_half(layers: int) -> int:
    """The last block of the first half of a model of ``layers`` blocks (blocks 1 .. this one)."""
    return max(1, int(np.ceil(layers / 2)))


def largest_rise(ratio: np.ndarray) -> tuple[int, float]:
    """The block of the largest one-block rise of a per-layer ``ratio`` (layers 0 .. L) among the blocks of the first
    half of the depth, and that rise as a factor (block l: ratio[l] / ratio[l - 1])."""
    last = first_half(len(ratio) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rises = ratio[1 : last + 1] / ratio[:last]
    block = int(np.nanargmax(rises)) + 1 if np.isfinite(rises).any() else 1
    return block, float(rises[block - 1])


def rises(ratio: np.ndarray) -> np.ndarray:
    """The one-block rises of a per-layer ``ratio`` in decades (block l at index l - 1: log10 ratio[l] / ratio[l-1])."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log10(ratio[1:] / ratio[:-1])


def one_block_share(ratio: np.ndarray, jump: float, window: int = 1) -> tuple[int, float]:
    """The block of the largest first-half rise of ``ratio`` (:func:`largest_rise`) and the share of the positive
    log-rises of the blocks within ``window`` of it that this block carries (1: the whole rise in one block, 1/2: the
    same rise spread evenly over two); 0 where that rise is below ``jump`` (no massive rise to locate)."""
    block, rise = largest_rise(ratio)
    if not rise >= jump:
        return block, 0.0
    up = np.clip(np.nan_to_num(rises(ratio), nan=0.0), 0.0, None)
    near = up[max(0, block - 1 - window) : block + window]
    return block, float(up[block - 1] / near.sum())


def spread_over_two(ratio: np.ndarray, block: int) -> np.ndarray:
    """The near-miss of an abrupt rise: ``ratio`` with the rise at ``block`` spread evenly (geometrically) over that
    block and the next, the layers from ``block + 1`` on unchanged."""
    out = np.asarray(ratio, dtype=float).copy()
    if block + 1 < len(out):
        out[block] = np.sqrt(out[block - 1] * out[block])
    return out


def plateau_layers(block: int, layers: int, tail: int) -> list[int]:
    """The layers from ``block`` (the appearance) to the last ``tail`` blocks, excluded."""
    return list(range(block, layers - tail + 1))


def plateau_factor(values: np.ndarray) -> float:
    """The largest factor by which ``values`` (positive) stray from their median, above or below it."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(10 ** np.max(np.abs(np.log10(values / np.median(values)))))


def carriers(ds: xr.Dataset, layers: list[int]) -> str:
    """Which token and dimension carry the largest activation at ``layers`` (pretrained, unmodified): the most
    frequent ones over the (sequence, layer) pairs, with their counts."""
    if not layers or "massive_token" not in ds or "massive_dim" not in ds:
        return "carriers not recorded"
    token, n_token = mode(per_input(ds, "massive_token", PRETRAINED).sel(layer=layers).values)
    dim, n_dim = mode(per_input(ds, "massive_dim", PRETRAINED).sel(layer=layers).values)
    total = per_input(ds, "massive_token", PRETRAINED).sel(layer=layers).size
    return f"token {token} in {n_token}/{total}, dimension {dim} in {n_dim}/{total} (sequence, layer) pairs"


def _appear_model(ds: xr.Dataset, jump: float) -> Judged:
    """One decoder's share of the "appear abruptly" claim: its largest first-half rise's share of the rise around it,
    against the same rise spread over two blocks."""
    reason = lacks(ds, (MEASURE,), (PRETRAINED,))
    if reason:
        return Judged(DECODER, None, reason)
    pre = curve(ds, MEASURE, PRETRAINED)
    block, rise = largest_rise(pre)
    wrong = spread_over_two(pre, block)

    def statistic(s: float) -> V.Measure:
        at, share = one_block_share(moved(pre, wrong, s, log=True), jump)
        return V.Measure(share, item=f"block {at}")

    share = one_block_share(pre, jump)[1]
    around = ", ".join(f"x{10**r:.3g}" for r in rises(pre)[max(0, block - 2) : block + 1])
    note = f"rise x{rise:.3g} at block {block} ({pre[block - 1]:.3g} -> {pre[block]:.3g}), share {share:.2f} of blocks "
    note += f"{max(1, block - 1)}-{min(len(pre) - 1, block + 1)} ({around})"
    if INIT in set(map(str, ds["weights"].values)):
        note += f"; init twin's largest x{largest_rise(curve(ds, MEASURE, INIT))[1]:.3g} (placebo)"
    return Judged(DECODER, statistic, note=note)


def _plateau_model(ds: xr.Dataset, tail: int) -> Judged:
    """One decoder's share of the plateau claim: how far its ratio strays over the plateau layers, against a
    transient spike (the ratio back at its level before the rise from the layer after it)."""
    reason = lacks(ds, (MEASURE,), (PRETRAINED,))
    if reason:
        return Judged(DECODER, None, reason)
    pre = curve(ds, MEASURE, PRETRAINED)
    block, _ = largest_rise(pre)
    layers = plateau_layers(block, len(pre) - 1, tail)
    if len(layers) < 2:
        return Judged(DECODER, None, f"fewer than 2 layers from the rise at block {block} to the last {tail} blocks")
    values = pre[layers]
    transient = np.where(np.arange(len(layers)) == 0, values[0], pre[block - 1])

    def statistic(s: float) -> V.Measure:
        return V.Measure(plateau_factor(moved(values, transient, s, log=True)), item=f"layers {block}-{layers[-1]}")

    note = (f"layers {block}-{layers[-1]}: {values.min():.3g} to {values.max():.3g} (before the rise "
            f"{pre[block - 1]:.3g}); {carriers(ds, layers)}")  # fmt: skip
    return Judged(DECODER, statistic, note=note)


def _detail(judged: Mapping[str, Judged]) -> str:
    return "; ".join(f"{name}: {m.note}" for name, m in judged.items() if m.statistic is not None)


def massive_claims(
    results: Mapping[str, xr.Dataset], kinds: Mapping[str, str], report: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """The two rows of Sun et al.'s claim over the decoders of ``results`` (model -> rank-collapse result; ``kinds``:
    model -> kind), thresholds and control settings from ``report`` (``report.phenomena.massive``): per claim key,
    its ``row`` and its models x claims ``cells`` (:func:`san.phenomena.checks.judge`)."""
    r = Settings("report.phenomena", report).section("massive")
    scope = Scope((DECODER,), training=PRETRAINED_BY_AUTHORS)
    appear = Claim(
        key="massive_appear_abruptly",
        statement="massive activations \"emerge very rapidly from one layer of computation\", not \"as a result of "
        "gradual accumulation through many layers\", in an early layer",
        words="\"emerge very rapidly from one layer of computation\", not \"as a result of gradual accumulation "
        "through many layers\"",
        source=SUN, place=PLACE, form=V.UNIVERSAL, scope=scope,
        measure="the mean massive ratio (largest / median activation magnitude of a block output) per block",
        test=f"in every pretrained decoder (unmodified), the largest one-block rise of the mean massive ratio (largest "
        f"/ median activation magnitude) among the blocks of the first half of the depth is at least x{r['jump']:g} "
        f"and carries at least {r['one_block_share']:g} of the positive log-rises of it and its neighbouring blocks "
        "(share 0 without such a rise)",
        threshold=r.threshold("one_block_share", above=True),
        near_miss=NearMiss(r.wrong("spread_control", "the same rise spread over two blocks, moved {s:g} of the way "
                                   "(log)"),
                           "Sun et al. contrast one layer with \"gradual accumulation\"; a rise over two blocks is "
                           "just as fast on a log axis of 30 layers"),
        placebo="the random-init twin (its largest rise is in the row's detail)",
    )  # fmt: skip
    plateau = Claim(
        key="massive_plateau",
        statement="massive activations \"first appear in layer 2 and remain nearly constant values until layer 30\" "
        "(LLaMA2-7B, 32 layers): once they appear they stay nearly constant until the last few layers",
        words="\"first appear in layer 2 and remain nearly constant values until layer 30\"",
        source=SUN, place=PLACE, form=V.UNIVERSAL, scope=scope,
        measure="the mean massive ratio per block, after its largest first-half rise",
        test=f"in every pretrained decoder (unmodified), from the block of the largest first-half rise to the last "
        f"{r['tail']} blocks (excluded), the mean massive ratio stays within x{r['plateau']:g} of its median there "
        "(margin in decades)",
        threshold=r.threshold("plateau", above=False, log=True),
        near_miss=NearMiss(r.wrong("transient_control", "a transient spike: from the layer after the rise the ratio "
                                   "back at its level before it, moved {s:g} of the way (log)"),
                           "an abrupt rise is just as consistent with a spike that decays again a layer later"),
    )  # fmt: skip
    judged_appear = {
        name: _appear_model(results[name], r["jump"]) for name in about(appear.key, kinds) if name in results
    }
    judged_plateau = {
        name: _plateau_model(results[name], r["tail"]) for name in about(plateau.key, kinds) if name in results
    }
    return {
        appear.key: judge(appear, judged_appear, kinds, _detail(judged_appear)),
        plateau.key: judge(plateau, judged_plateau, kinds, _detail(judged_plateau)),
    }
