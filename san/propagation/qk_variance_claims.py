"""The query-key variance sweep's claims (Giorlandino & Goldt): the critical variance where the finite-T recursion
puts it, each layer's participation following the REM update, and the REM update as the T -> infinity limit; each
one check (:func:`san.claims.verdicts.check`) against a near-miss wrong reference whose setting comes from config
``report.propagation`` (``t``):

- critical variance: **the infinite-T recursion** (the REM limit), the prediction moved from the finite-T
  recursion's statistic (0) to the infinite-T one's (``critical_control``, 1: the limit itself);
- per layer, and the limit in T: **the prediction (the limit) offset** by ``overlap_offset``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.evidence import point_measures
from san.propagation import theory
from san.propagation.results import fixed_params, predicted_critical_beta
from san.propagation.spec import GG, PARAMS, check, settings


def with_seq_len(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with a ``seq_len`` dimension (the fixed T where the sweep does not vary it)."""
    return ds if "seq_len" in ds.dims else ds.expand_dims(seq_len=[int({**PARAMS, **fixed_params(ds)}["seq_len"])])


def critical_rows(ds: xr.Dataset, condensed: float) -> list[dict[str, Any]]:
    """Per T: the critical statistic of the simulation (mean over seeds, and per seed), of the finite-T recursion and
    of the infinite-T recursion (the same statistic on each), and the infinite-T depth-L onset beta*."""
    rows = []
    for seq_len in ds.seq_len.values:
        at = ds.sel(seq_len=seq_len)

        def stat(y: np.ndarray, at: xr.Dataset = at) -> float:
            return theory.critical_statistic(at.beta.values, y, condensed)

        y = at["attention_overlap"].isel(layer=-1)
        rows.append(
            {
                "seq_len": int(seq_len),
                "observed": stat(y.mean("seed").values),
                "per_seed": np.array([stat(y.isel(seed=i).values) for i in range(y.sizes["seed"])]),
                "finite": stat(at["finite_recursion_overlap"].isel(layer=-1).values),
                "infinite": stat(at["recursion_overlap"].isel(layer=-1).values),
                "beta_star": predicted_critical_beta(at),
            }
        )
    return rows


def relative_miss(observed: float, predicted: float) -> float:
    """How far ``observed`` lies from ``predicted``, relative to it: ``|observed / predicted - 1|`` (NaN when either
    is)."""
    return float(abs(observed / predicted - 1.0))


def critical_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """The critical statistic within ``critical_tolerance`` of the finite-T recursion's at every T where both are
    measured. Wrong reference: the infinite-T recursion's statistic, the prediction moved ``critical_control`` of the
    way to it (:func:`san.claims.verdicts.toward`; the tolerance's disclosure, if any, in the detail)."""
    rows = [r for r in critical_rows(ds, t["condensed"]) if np.isfinite(r["observed"]) and np.isfinite(r["finite"])]

    def statistic(s: float) -> V.Measure:
        return V.worst([V.Measure(relative_miss(r["observed"], V.toward(r["finite"], r["infinite"], s)), 0.0, 1,
                                  f"T = {r['seq_len']}") for r in rows], tol)  # fmt: skip

    tol = settings(t).threshold("critical_tolerance", above=False)
    beta_star = predicted_critical_beta(ds.isel(seq_len=-1))
    return check(
        "qk_variance.critical_variance", GG,
        "Rank collapse below and entropy collapse above a critical query-key variance, at the value the theory "
        "predicts.",
        V.QUANTITATIVE, "Result 1 and the REM attention update (their theory_update_relu.py)",
        test=f"at every T, the simulation's critical beta (median of beta (1 - Y) over points with last-layer "
        f"participation Y > {t['condensed']}, the seed-mean curve) within {t['critical_tolerance']:.0%} of the same "
        "statistic of the finite-T recursion (no fitted parameter; the finite-T correction is the T-key softmax in "
        "place of its REM limit)",
        statistic=statistic, threshold=tol,
        wrong=settings(t).wrong(
            "critical_control",
            "the infinite-T recursion (the REM limit): the prediction moved {s:g} of "
            "the way from the finite-T recursion's statistic to the infinite-T one's"),
        detail="; ".join(
            f"T = {r['seq_len']}: observed {r['observed']:.2f} ± {V.spread(r['per_seed'])[1]:.2f} (s.e. over seeds), "
            f"finite-T recursion {r['finite']:.2f} (off by {relative_miss(r['observed'], r['finite']):.1%}), "
            f"infinite-T recursion {r['infinite']:.2f} (off by {relative_miss(r['observed'], r['infinite']):.1%})"
            for r in rows
        )
        + f"; infinite-T onset at depth {ds.sizes['layer'] - 1}: beta* = {beta_star:.2f}"
        + settings(t).note("critical_tolerance"),
    )  # fmt: skip


def per_layer_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """Each layer's participation against the finite-T prediction at that layer's measured input correlation: the
    gap of the seed means, plus ``sigmas`` standard errors of the measured participation (more noise never helps),
    at most ``overlap_tolerance`` at every T, beta and layer. Wrong reference: the prediction offset by
    ``overlap_offset``."""
    y = ds["attention_overlap"].isel(layer=slice(1, None))
    predicted = ds["finite_overlap"].isel(layer=slice(1, None)).mean("seed")
    limit = ds["theory_overlap"].isel(layer=slice(1, None)).mean("seed")
    tol = settings(t).threshold("overlap_tolerance", above=False, sigmas="sigmas")

    def statistic(s: float) -> V.Measure:
        return V.worst(gaps(y - predicted - s), tol)

    return check(
        "qk_variance.per_layer_rem", GG,
        "The attention participation of each layer follows the REM update at that layer's input correlation.",
        V.QUANTITATIVE, "Sec. 3, the self-attention update from the Random Energy Model",
        test=f"at every T, beta and layer: |measured Y - finite-T prediction at the measured input correlation| (seed "
        f"means), plus {t['sigmas']} standard errors over seeds, <= {t['overlap_tolerance']}",
        statistic=statistic, threshold=tol,
        wrong=settings(t).wrong("overlap_offset", "the finite-T prediction offset by {s:+g}"),
        detail="; ".join(
            f"T = {int(n)}: largest gap {_largest(y - predicted, tol, n)} (to the REM limit "
            f"{_largest(y - limit, tol, n)})" for n in ds.seq_len.values
        ) + f"; against the prediction + {t['overlap_offset']}: {_largest(y - predicted - t['overlap_offset'], tol)}",
    )  # fmt: skip


def gaps(differences: xr.DataArray) -> list[V.Measure]:
    """Per grid point, the gap ``|seed mean of differences|`` with the standard error of the seeds
    (:func:`~san.claims.evidence.point_measures`)."""
    return [V.Measure(abs(m.value), m.se, m.evidence, m.item) for m in point_measures(differences)]


def _largest(differences: xr.DataArray, tol: V.Threshold, seq_len: Any = None) -> str:
    """The gap that clears ``tol`` least (at ``seq_len``, or over every T), with its standard error, for a
    detail."""
    m = V.worst(gaps(differences if seq_len is None else differences.sel(seq_len=seq_len)), tol)
    return f"{m.value:.3f} ± {m.se:.3f}"


def _gap_by_seed(y: xr.DataArray, limit: xr.DataArray, shift: float) -> xr.DataArray:
    """Per T and seed: the mean over beta and layers of ``|Y - (limit + shift)|``."""
    gap = abs(y - limit - shift)
    return gap.mean([d for d in gap.dims if d not in ("seq_len", "seed")])


def trend_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """The gap to the infinite-T REM participation shrinks as T grows: per seed, smallest against largest T, by
    more than ``rem_drop_margin`` after ``sigmas`` standard errors (not judged with one T). Wrong reference: the REM
    limit offset by ``overlap_offset``, which a limit the participation approaches must not be approached by."""
    y, limit = ds["attention_overlap"].isel(layer=slice(1, None)), ds["theory_overlap"].isel(layer=slice(1, None))

    def statistic(s: float) -> V.Measure:
        if ds.sizes["seq_len"] < 2:
            return V.Measure(float("nan"), 0.0, 0)
        by_seed = _gap_by_seed(y, limit, s)
        return V.Measure(*V.spread((by_seed.isel(seq_len=0) - by_seed.isel(seq_len=-1)).values))

    t0, t1, offset = int(ds.seq_len.values[0]), int(ds.seq_len.values[-1]), t["overlap_offset"]
    at, off = _gap_by_seed(y, limit, 0.0), statistic(offset)
    return check(
        "qk_variance.rem_limit_in_T", f"{GG} (finite-size)",
        "The REM update is the T -> infinity limit: the participation approaches it as the sequence length grows.",
        V.QUANTITATIVE, "Sec. 3 assumptions: the REM limit T -> infinity",
        test=f"mean |measured Y - REM limit| over beta and layers drops from T = {t0} to T = {t1} by more than "
        f"{t['rem_drop_margin']:g} after {t['sigmas']} standard errors over {ds.sizes['seed']} seeds",
        statistic=statistic, threshold=settings(t).threshold("rem_drop_margin", above=True, sigmas="sigmas"),
        wrong=settings(t).wrong("overlap_offset", "the REM limit offset by {s:+g}"),
        detail=", ".join(f"T = {int(n)}: {float(at.sel(seq_len=n).mean()):.3f}" for n in ds.seq_len.values)
        + f"; to the REM limit + {offset}: drop {off.value:+.3f} ± {off.se:.3f} (s.e.)",
    )  # fmt: skip


def qk_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The query-key variance sweep's rows, where it has the finite-T recursion."""
    ds = with_seq_len(ds)
    if "finite_recursion_overlap" not in ds:
        return []
    return [critical_claim(ds, t), per_layer_claim(ds, t), trend_claim(ds, t)]
