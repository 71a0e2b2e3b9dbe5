"""Sun, Chen, Kolter & Liu (COLM 2024), "Massive activations in large language models", Sec. 2 ("Which layers?"):
in LLaMA2-7B massive activations "first appear in layer 2 and remain nearly constant values until layer 30"; they
"emerge very rapidly from one layer of computation", not "as a result of gradual accumulation through many layers".
Their criterion of a massive activation: far above the median magnitude of its layer (about 1,000 times).

Two rows on the unmodified pretrained decoders, from the massive ratio per layer (``massive_ratio``: the largest
activation magnitude of the layer's hidden state over the median magnitude, mean over the sequences), both read at
the **onset**: the first block whose ratio reaches ``report.phenomena.massive.onset_ratio`` (Sun et al.'s 1,000)
from below it:

- **appear abruptly**: the rise into the onset block, if at least ``report.phenomena.massive.jump``, carries at
  least ``report.phenomena.massive.one_block_share`` of the rise over it and its neighbouring blocks (the share of
  the positive log-rises; 0 without such a rise). Near-miss wrong theory, Sun et al.'s own contrast ("gradual
  accumulation"): the same rise spread over two blocks, which carries about half. The random-init twin (massive
  activations as an architectural property present before training) is its placebo, named in the row and decided by
  nothing. The row's detail reads the onset under the levels of ``onset_sensitivity`` and at the largest first-half
  rise too, and says when a level would change the verdict.
- **plateau**: from the onset to the last ``tail`` blocks, the ratio stays within a factor
  ``report.phenomena.massive.plateau`` of its median over those layers. Near-miss wrong theory: a transient spike,
  the ratio back at its level before the rise from the next layer on (as an outlier of one layer would be).
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
from san.phenomena.data import curve, lacks, mode, per_input
from san.phenomena.spec import DECODER, INIT, PRETRAINED, PRETRAINED_BY_AUTHORS, about, label

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


def onset(ratio: np.ndarray, level: float) -> int | None:
    """The onset of massive activations in a per-layer ``ratio`` (layers 0 .. L): the first block whose ratio reaches
    ``level`` from below it (block l: ``ratio[l - 1] < level <= ratio[l]``); None when the ratio never does so."""
    for block in range(1, len(ratio)):
        if ratio[block - 1] < level <= ratio[block]:
            return block
    return None


def one_block_share(ratio: np.ndarray, jump: float, block: int | None = None, window: int = 1) -> tuple[int, float]:
    """The share of the positive log-rises of the blocks within ``window`` of ``block`` (by default the block of the
    largest first-half rise, :func:`largest_rise`) that ``block`` carries (1: the whole rise in one block, 1/2: the
    same rise spread evenly over two), with that block; 0 where its rise is below ``jump`` (no massive rise there)."""
    if block is None:
        block = largest_rise(ratio)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        rise = float(ratio[block] / ratio[block - 1])
    if not rise >= jump:
        return block, 0.0
    up = np.clip(np.nan_to_num(rises(ratio), nan=0.0), 0.0, None)
    near = up[max(0, block - 1 - window) : block + window]
    return block, float(up[block - 1] / near.sum())


def onset_share(ratio: np.ndarray, jump: float, level: float) -> tuple[int | None, float]:
    """The onset block at ``level`` (:func:`onset`) and the share of the rise around it that it carries
    (:func:`one_block_share`; 0 without an onset)."""
    block = onset(ratio, level)
    return (block, 0.0) if block is None else one_block_share(ratio, jump, block)


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


def _sensitivity(pre: np.ndarray, r: Mapping[str, Any]) -> tuple[str, bool]:
    """The appearance read under each definition of its block: the onset at every level of ``onset_sensitivity``
    and of ``onset_ratio``, and the largest first-half rise; with the verdict each gives, and a warning where they
    differ (a verdict decided by the definition); and whether they do."""
    readings, verdicts = [], []
    for level in sorted({*r["onset_sensitivity"], r["onset_ratio"]}):
        block, share = onset_share(pre, r["jump"], level)
        if block is None:
            readings.append(f"ratio >= {level:g}: never reached")
            continue
        verdicts.append(share >= r["one_block_share"])
        readings.append(f"ratio >= {level:g}: block {block}, x{pre[block] / pre[block - 1]:.3g}, share {share:.2f}")
    block, share = one_block_share(pre, r["jump"])
    verdicts.append(share >= r["one_block_share"])
    readings.append(f"largest first-half rise: block {block}, share {share:.2f}")
    return sensitivity(readings, verdicts)


def _appear_model(ds: xr.Dataset, r: Mapping[str, Any]) -> Judged:
    """One decoder's share of the "appear abruptly" claim: the share of the rise around its onset that the onset
    block carries, against the same rise spread over two blocks."""
    reason = lacks(ds, (MEASURE,), (PRETRAINED,))
    if reason:
        return Judged(DECODER, None, reason)
    pre = curve(ds, MEASURE, PRETRAINED)
    level, jump = r["onset_ratio"], r["jump"]
    block = onset(pre, level)
    if block is None:
        where = "already at layer 0" if pre[0] >= level else f"largest {np.nanmax(pre):.3g}"
        return Judged(DECODER, None, f"no onset: the mean massive ratio never rises to {level:g} ({where})")
    wrong = spread_over_two(pre, block)

    def statistic(s: float) -> V.Measure:
        at, share = onset_share(moved(pre, wrong, s, log=True), jump, level)
        return V.Measure(share, item=f"block {at}")

    share = one_block_share(pre, jump, block)[1]
    around = ", ".join(f"x{10**x:.3g}" for x in rises(pre)[max(0, block - 2) : block + 1])
    note = f"onset at block {block} ({pre[block - 1]:.3g} -> {pre[block]:.3g}), share {share:.2f} of blocks "
    reading, sensitive = _sensitivity(pre, r)
    note += f"{max(1, block - 1)}-{min(len(pre) - 1, block + 1)} ({around}); {reading}"
    if INIT in set(map(str, ds["weights"].values)):
        note += f"; init twin's largest x{largest_rise(curve(ds, MEASURE, INIT))[1]:.3g} (placebo)"
    return Judged(DECODER, statistic, note=note, sensitive=sensitive)


def _plateau_model(ds: xr.Dataset, tail: int, level: float) -> Judged:
    """One decoder's share of the plateau claim: how far its ratio strays over the layers from its onset at
    ``level``, against a transient spike (the ratio back at its level before the rise from the layer after it)."""
    reason = lacks(ds, (MEASURE,), (PRETRAINED,))
    if reason:
        return Judged(DECODER, None, reason)
    pre = curve(ds, MEASURE, PRETRAINED)
    block = onset(pre, level)
    if block is None:
        return Judged(DECODER, None, f"no onset: the mean massive ratio never rises to {level:g}")
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
    its ``row`` and its models x claims ``cells`` (:func:`san.claims.per_model.judge`)."""
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
        test=f"in every pretrained decoder (unmodified), at the onset (the first block whose mean massive ratio, "
        f"largest / median activation magnitude, reaches {r['onset_ratio']:g} from below) the ratio rises at least "
        f"x{r['jump']:g} in one block and that block carries at least {r['one_block_share']:g} of the positive "
        "log-rises of it and its neighbouring blocks (share 0 without such a rise)",
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
        measure="the mean massive ratio per block, from its onset",
        test=f"in every pretrained decoder (unmodified), from the onset (ratio {r['onset_ratio']:g}) to the last "
        f"{r['tail']} blocks (excluded), the mean massive ratio stays within x{r['plateau']:g} of its median there "
        "(margin in decades)",
        threshold=r.threshold("plateau", above=False, log=True),
        near_miss=NearMiss(r.wrong("transient_control", "a transient spike: from the layer after the rise the ratio "
                                   "back at its level before it, moved {s:g} of the way (log)"),
                           "an abrupt rise is just as consistent with a spike that decays again a layer later"),
    )  # fmt: skip
    judged_appear = {name: _appear_model(results[name], r) for name in about(appear.key, kinds) if name in results}
    judged_plateau = {
        name: _plateau_model(results[name], r["tail"], r["onset_ratio"])
        for name in about(plateau.key, kinds)
        if name in results
    }
    return {
        appear.key: judge(appear, judged_appear, kinds, _detail(judged_appear), label(appear.key)),
        plateau.key: judge(plateau, judged_plateau, kinds, _detail(judged_plateau), label(plateau.key)),
    }
