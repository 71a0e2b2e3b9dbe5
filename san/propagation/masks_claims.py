"""The masks sweep's claims (Wu et al. 2024): causal attention still collapses exponentially, local masks slow the
collapse, LayerNorm keeps mu at random init, and the LayerNorm construction (a demonstration); each scientific row
one check (:func:`san.claims.verdicts.check`) against a near-miss wrong reference whose setting comes from config
``report.propagation`` (``t``):

- causal collapse: placebo, **the one-directional sliding window** (local masks slow the collapse): each seed's
  causal curve moved geometrically toward the local mask's (``causal_control``);
- local masks slow the collapse: **local masks only delay it**, collapsing at the global mask's rate after a
  transient of ``delay_transient`` of the layers: each seed's local curve moved geometrically toward that delayed
  curve (``delay_control``), its rate refitted;
- mu kept with LayerNorm: placebo, **the same runs without LayerNorm**: each seed's mu ratio moved geometrically
  toward the run without it (``layernorm_control``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.evidence import halves, has, seed_measure
from san.core.storage import read_structured_attr
from san.propagation.spec import CONSTRUCTION_NORMS, WU, check, settings

#: each local mask against the global mask of the same direction
LOCAL_PAIRS = (("sliding", "full"), ("sliding_causal", "causal"))


def decay_rate(residual: np.ndarray, floor: float) -> tuple[float, float]:
    """Per-layer exponential decay rate of a relative-residual curve (layers 1..L): minus the slope of ln(residual)
    against layer over the layers above the float64 ``floor``, and the R^2 of that straight-line fit."""
    r = np.asarray(residual, dtype=float)
    layers = np.arange(len(r))
    keep = (layers >= 1) & (r > floor) & np.isfinite(r)
    if keep.sum() < 3:
        keep = (layers >= 1) & np.isfinite(r) & (r > 0)
        keep &= np.cumsum(keep) <= 3
    x, y = layers[keep], np.log(r[keep])
    slope, icpt = np.polyfit(x, y, 1)
    ss = ((y - (slope * x + icpt)) ** 2).sum()
    r2 = 1 - ss / max(((y - y.mean()) ** 2).sum(), 1e-300)
    return float(-slope), float(r2)


def _seed_curves(r: xr.DataArray, mask: str) -> np.ndarray:
    """One mask's relative-residual curves, seed by layer."""
    return r.sel(mask=mask).transpose("seed", "layer").values


def collapse_measure(curves: np.ndarray, t: Mapping[str, Any]) -> V.Measure:
    """Whether every seed's curve (seed by layer) collapses exponentially, as one measure (:func:`halves`): the
    largest last-layer residual below ``collapsed_residual`` (in decades) and the smallest R^2 of the straight-line
    log decay (fitted above ``residual_floor``) above ``linear_r2``; the half that clears least."""
    th_last = settings(t).threshold("collapsed_residual", above=False, log=True)
    th_r2 = settings(t).threshold("linear_r2", above=True)
    fits = [decay_rate(c, t["residual_floor"]) for c in curves]
    last = V.worst([V.Measure(float(c[-1]), item=f"seed {i}") for i, c in enumerate(curves)], th_last)
    r2 = V.worst([V.Measure(f[1], item=f"seed {i}") for i, f in enumerate(fits)], th_r2)
    return halves({f"last residual ({last.item})": (last, th_last), f"R^2 ({r2.item})": (r2, th_r2)})


def _rates(curves: np.ndarray, floor: float) -> np.ndarray:
    """Each seed's decay rate (:func:`~decay_rate`)."""
    return np.array([decay_rate(c, floor)[0] for c in curves])


def causal_claim(r: xr.DataArray, t: Mapping[str, Any]) -> dict[str, Any]:
    """Universal: every seed's causal run collapses below ``collapsed_residual`` with a straight-line log decay
    (:func:`collapse_measure`). Placebo: the one-directional sliding window where swept (else the sliding one),
    each seed's causal curve moved geometrically ``causal_control`` of the way toward it."""
    causal = _seed_curves(r, "causal")
    local = next((m for m in ("sliding_causal", "sliding") if m in r.mask.values), None)
    wrong = _seed_curves(r, local) if local else np.full_like(causal, np.nan)
    fits = np.array([decay_rate(c, t["residual_floor"]) for c in causal])
    rate = float(fits[:, 0].mean())
    local_rate = float(_rates(wrong, t["residual_floor"]).mean()) if local else float("nan")
    return check(
        "masks.causal_collapse", WU,
        "Pure masked (causal) attention still suffers from exponential collapse to a rank-one subspace.",
        V.UNIVERSAL, "abstract; Fig. 2 (pure attention)",
        test=f"every seed (a counterexample refutes): causal, no LN, last-layer relative residual < "
        f"{t['collapsed_residual']} and ln(residual) linear in depth (R^2 > {t['linear_r2']}); value: decades to "
        "spare of the half that clears least",
        statistic=lambda s: collapse_measure(V.toward(causal, wrong, s, log=True), t),
        threshold=settings(t).halves("collapsed_residual", "linear_r2"),
        wrong=settings(t).wrong(
            "causal_control",
            f"the {local} mask (a local window slows the collapse): each seed's causal "
            "curve moved {s:g} of the way to it, geometrically"),
        detail=f"causal: decay rate {rate:.3f} per layer (x{np.exp(-rate):.3f}), smallest R^2 {fits[:, 1].min():.3f}, "
        f"largest last {np.nanmax(causal[:, -1]):.1e} over {len(causal)} seeds; the placebo ({local}): rate "
        f"{local_rate:.4f} per layer, largest last {np.nanmax(wrong[:, -1]):.1e}",
    )  # fmt: skip


def delayed(local: np.ndarray, rate: np.ndarray, transient: float) -> np.ndarray:
    """What "a local mask only delays the collapse" predicts for a local mask's curves (seed by layer): each seed's
    own curve through the first ``transient`` of the layers, then decaying at the global mask's per-layer ``rate``
    (that seed's) from where it stands."""
    layers = np.arange(local.shape[-1])
    h = max(1, int(round(transient * (layers[-1]))))
    after = np.exp(-rate[:, None] * np.clip(layers - h, 0, None)[None, :])
    return np.where(layers[None, :] <= h, local, local[:, [h]] * after)


def _pair_measure(r: xr.DataArray, pair: tuple[str, str], s: float, t: Mapping[str, Any]) -> V.Measure:
    """One local mask against its global counterpart: each seed's global rate less the local mask's, the local
    curve moved ``s`` of the way (geometrically) toward :func:`delayed`; the seeds' mean and standard error."""
    floor = t["residual_floor"]
    lo, gl = _seed_curves(r, pair[0]), _seed_curves(r, pair[1])
    rate = _rates(gl, floor)
    local = lo if s == 0 else V.toward(lo, delayed(lo, rate, t["delay_transient"]), s, log=True)
    return seed_measure(rate - _rates(local, floor), f"{pair[0]} vs {pair[1]}")


def local_claim(r: xr.DataArray, t: Mapping[str, Any]) -> dict[str, Any] | None:
    """Each local mask decays slower than its global counterpart by more than ``rate_margin`` per layer after
    ``sigmas`` standard errors over seeds (None without a pair). Wrong theory: local masks only delay the collapse
    (:func:`delayed`), ``delay_control`` of the way."""
    pairs = [(lo, gl) for lo, gl in LOCAL_PAIRS if lo in r.mask.values and gl in r.mask.values]
    if not pairs:
        return None
    limit = settings(t).threshold("rate_margin", above=True, sigmas="sigmas")
    parts = []
    for lo, gl in pairs:
        m, w = _pair_measure(r, (lo, gl), 0.0, t), _pair_measure(r, (lo, gl), t["delay_control"], t)
        rate_lo, rate_gl = (float(_rates(_seed_curves(r, x), t["residual_floor"]).mean()) for x in (lo, gl))
        parts.append(f"{lo} {rate_lo:.4f} vs {gl} {rate_gl:.3f} per layer (slower by {m.value:.3f} ± {m.se:.3f}; "
                     f"delayed only: slower by {w.value:.3f} ± {w.se:.3f})")  # fmt: skip
    return check(
        "masks.local_slows", WU, "Sparse or local masked attention can provably slow down the collapse rate.",
        V.QUANTITATIVE, "abstract; Fig. 2 (sliding and one-directional sliding windows)",
        test=f"each local mask's decay rate (no LN) below its global counterpart's (sliding vs full, one-directional "
        f"sliding vs causal) by more than {t['rate_margin']} per layer plus {t['sigmas']} standard errors over seeds",
        statistic=lambda s: V.worst([_pair_measure(r, p, s, t) for p in pairs], limit), threshold=limit,
        wrong=settings(t).wrong(
            "delay_control",
            "local masks only delay the collapse: each seed's local curve moved {s:g} "
            f"of the way to its own first {t['delay_transient']:.0%} of the layers, then the global mask's "
            "rate, geometrically"),
        detail="; ".join(parts),
    )  # fmt: skip


def mu_kept_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """The Fig. 2 reading at random init, on the paper's mu: with LayerNorm mu(X_L) stays above ``mu_kept`` of
    mu(X_0) for every mask and seed (in decades); beside it the scale-free relative residual, which tells rank
    collapse from shrinking. Placebo: the same runs without LayerNorm, each seed's ratio moved geometrically
    ``layernorm_control`` of the way toward it."""
    kept = ds["mu"].isel(layer=-1) / ds["mu"].isel(layer=0)
    ln, plain = kept.sel(norm="post_ln"), kept.sel(norm="none")
    rel = ds["relative_residual"].mean("seed").isel(layer=-1)
    masks, limit = list(ds.mask.values), settings(t).threshold("mu_kept", above=True, log=True)

    def statistic(s: float) -> V.Measure:
        ratio = V.toward(ln.transpose("mask", "seed").values, plain.transpose("mask", "seed").values, s, log=True)
        return V.worst([V.Measure(float(x), item=f"{m}, seed {j}") for m, row in zip(masks, ratio, strict=True)
                        for j, x in enumerate(row)], limit)  # fmt: skip

    def listed(x: xr.DataArray) -> str:
        return ", ".join(f"{m} {float(x.sel(mask=m).min()):.1e}" for m in masks)

    return check(
        "masks.layernorm_mu_kept", WU,
        "With LayerNorm added to pure attention, mu(X(t)) no longer converges to zero in randomly initialised models.",
        V.OBSERVATION, "Fig. 2 (randomly initialised, log-log)",
        test=f"with post-LN, mu(X_L) / mu(X_0) > {t['mu_kept']} for every mask and seed (mu absolute; the relative "
        "residual beside it is scale-free)",
        statistic=statistic, threshold=limit,
        wrong=settings(t).wrong(
            "layernorm_control",
            "the same runs without LayerNorm: each seed's mu ratio moved {s:g} of the "
            "way to it, geometrically"),
        detail=f"smallest mu(X_L)/mu(X_0) over seeds with LN: {listed(ln)}; without: {listed(plain)}; relative "
        "residual with LN: " + ", ".join(f"{m} {float(rel.sel(norm='post_ln', mask=m)):.1e}" for m in masks),
    )  # fmt: skip


def staying_fraction(ratio: np.ndarray, rank2: float) -> float:
    """Fraction of the draws (rows of ``ratio``, draw by layer 1..L) whose s2/s1 stays above ``rank2`` at every
    layer. Rank one is absorbing in exact arithmetic: a draw that fell below the threshold once counts as
    collapsed, and a later s2/s1 above it is round-off of tokens that have shrunk to the float floor. A NaN (all
    tokens equal) counts as collapsed."""
    r = np.nan_to_num(np.atleast_2d(np.asarray(ratio, dtype=float)), nan=0.0)
    return float((r.min(axis=-1) > rank2).mean())


def construction_holds(ratio: np.ndarray, t: Mapping[str, Any]) -> bool:
    """Whether at least ``stay_fraction`` of the inputs near the construction's equilibrium keep a centred rank-2
    ratio above ``rank2_ratio`` at every layer (:func:`staying_fraction`)."""
    return staying_fraction(ratio, t["rank2_ratio"]) >= t["stay_fraction"]


def construction_row(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """The LayerNorm construction (a demonstration): with the sphere normalisation and with LayerNorm at least
    ``stay_fraction`` of the draws stay rank 2 at every layer, without normalisation fewer do."""
    ratio = ds["construction_ratio"].isel(layer=slice(1, None)).transpose("construction_norm", "draw", "layer")
    frac = {n: staying_fraction(ratio.sel(construction_norm=n).values, t["rank2_ratio"]) for n in CONSTRUCTION_NORMS}
    ok = {n: construction_holds(ratio.sel(construction_norm=n).values, t) for n in CONSTRUCTION_NORMS}
    last = ds["construction_ratio"].isel(layer=-1)
    built = read_structured_attr(ds, "construction")
    return V.row(
        "masks.layernorm_construction",
        f"{WU}: With LayerNorm, for suitable value matrices, a general class of sequences does not converge to a "
        "rank-one subspace; without LayerNorm it does.",
        kind=V.DEMONSTRATION,
        form=V.EXISTENTIAL,
        source=f"{WU}, abstract and the LayerNorm counterexamples (a construction of this project: causal uniform "
        "attention, V = [[1, 0], [-1, 1/2]] on a plane, see san/propagation/construction.py)",
        holds=ok["sphere"] and ok["layer_norm"] and not ok["none"],
        value=frac["layer_norm"],
        margin=min(frac["layer_norm"], frac["sphere"]) - t["stay_fraction"],
        test=f"{built['draws']} inputs within {built['perturbation']} of the rank-2 equilibrium ({built['tokens']} "
        f"tokens, d = {built['width']}), {ds.sizes['layer'] - 1} layers: at least {t['stay_fraction']:.0%} keep s2/s1 "
        f"of the centred tokens > {t['rank2_ratio']} at every layer with the sphere normalisation and with "
        "LayerNorm, fewer without (a draw that fell below once counts as collapsed: later readings are round-off)",
        bound=settings(t).threshold("stay_fraction", above=True),
        inclusive=True,
        items=[
            {"item": n, "value": frac[n], "verdict": V.label(ok[n]), "must": V.FAILS if n == "none" else V.HOLDS}
            for n in CONSTRUCTION_NORMS
        ],
        detail=f"equilibrium s2/s1 {ds.attrs['construction_equilibrium_ratio']:.3f}; staying rank 2: sphere "
        f"{frac['sphere']:.0%}, LayerNorm {frac['layer_norm']:.0%}, none {frac['none']:.0%}; median last s2/s1 "
        + ", ".join(f"{n} {float(np.nanmedian(last.sel(construction_norm=n))):.1e}" for n in CONSTRUCTION_NORMS),
    )


def mask_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The masks sweep's rows, each where the sweep has what it reads."""
    out = []
    if has(ds, "mask", "full", "causal") and has(ds, "norm", "none"):
        r = ds["relative_residual"].sel(norm="none")
        out.append(causal_claim(r, t))
        local = local_claim(r, t)
        if local is not None:
            out.append(local)
        if has(ds, "norm", "post_ln") and "mu" in ds:
            out.append(mu_kept_claim(ds, t))
    if "construction_ratio" in ds:
        out.append(construction_row(ds, t))
    return out
