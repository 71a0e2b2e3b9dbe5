"""Fig. 3 claim of the circle experiment checked against its collapse table and token distances (torch-free).

The claim: pure attention collapses the two sequences, skip connections counteract it. Its positive control is the
near-miss theory "the skip connections only slow the collapse": each skip run's token distance continuing at the
exponential rate of its first ``report.circle.early_steps`` recurrent steps (fitted to the same run), its final
distance moved toward that continuation and the runs counted again (:func:`early_rate_finals`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from san.claims import verdicts as V
from san.core.config import ConfigError
from san.models.spec import PURE_ATTENTION, WITH_SKIP


def _pooled(counts: Mapping[str, tuple[int, int]], variants: Sequence[str]) -> tuple[int, int]:
    """The collapsed runs and the runs of ``variants`` together, from per-variant ``counts`` (collapsed, runs);
    variants without runs count nothing."""
    found = [counts[v] for v in variants if v in counts]
    return sum(c for c, _ in found), sum(n for _, n in found)


def _fractions_and_se(pure_c: int, pure_n: int, skip_c: int, skip_n: int) -> tuple[float, float, float]:
    """The collapsed fractions ``p`` of pure attention and ``q`` of the skip variants (NaN without runs) and the
    binomial standard error of their difference, ``sqrt(p (1 - p) / n + q (1 - q) / m)`` (NaN without runs of both
    kinds)."""
    p = pure_c / pure_n if pure_n else float("nan")
    q = skip_c / skip_n if skip_n else float("nan")
    se = float(np.sqrt(p * (1 - p) / pure_n + q * (1 - q) / skip_n)) if pure_n and skip_n else float("nan")
    return p, q, se


def early_rate_finals(distance: xr.DataArray, early_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per skip run (variants of :data:`WITH_SKIP` in ``distance``, dims variant, hidden_dim, seed, step): its
    starting and final token distance, and the final distance an exponential fitted to its log distance over steps
    ``0 .. early_steps`` (least squares) predicts at the last step. Flat arrays over the runs."""
    last = int(distance["step"].max())
    if early_steps >= last:
        raise ConfigError(f"report.circle.early_steps = {early_steps} must be below the rollout's last step {last}")
    skip = distance.sel(variant=[v for v in map(str, distance["variant"].values) if v in WITH_SKIP])
    runs = skip.stack(run=("variant", "hidden_dim", "seed")).transpose("run", "step")
    steps = runs["step"].values
    early = steps <= early_steps
    log_d = np.log(np.maximum(runs.values, np.finfo(float).tiny))
    slope, intercept = np.polyfit(steps[early], log_d[:, early].T, 1) if runs.sizes["run"] else (np.array([]),) * 2
    return runs.values[:, 0], runs.values[:, -1], np.exp(intercept + slope * steps[-1])


def _skip_collapsed(finals: tuple[np.ndarray, np.ndarray, np.ndarray], threshold: float, s: float) -> int:
    """The skip runs that collapse (final distance below ``threshold`` times the starting one) once each final
    distance is moved ``s`` of the way (in logarithm) toward its early-rate continuation."""
    start, final, continued = finals
    moved = final if s == 0 else V.toward(final, continued, s, log=True)
    return int(np.sum(moved / start < threshold))


def _agree(finals: tuple[np.ndarray, ...], threshold: float, collapsed: int, runs: int) -> None:
    """Raise unless the token distances count the skip runs and their collapses as the collapse table does."""
    counted = _skip_collapsed(finals, threshold, 0.0)
    if (len(finals[0]), counted) != (runs, collapsed):
        raise ValueError(f"the token distances count {counted} of {len(finals[0])} skip runs collapsed, the collapse "
                         f"table {collapsed} of {runs}: rebuild both from one results/circle.nc")  # fmt: skip


def claim_measure(pure: tuple[int, int], skip: tuple[int, int], cfg: Mapping[str, Any]) -> V.Measure:
    """The claim's three parts as one measure against ``cfg["margin"]`` after ``cfg["sigmas"]`` binomial standard
    errors (:func:`san.claims.verdicts.margin`): the difference ``p - q`` of the collapsed fractions where pure
    attention collapses in at least ``pure_fraction_min`` of its runs and the skip variants in at most
    ``skip_fraction_max``; where one of them falls short by ``d``, a value whose margin is ``-d`` (or less)."""
    p, q, se = _fractions_and_se(*pure, *skip)
    shortfall = max(cfg["pure_fraction_min"] - p, q - cfg["skip_fraction_max"], 0.0)
    value = p - q if shortfall == 0 else min(p - q, cfg["margin"] + cfg["sigmas"] * se - shortfall)
    return V.Measure(float(value), float(se), min(pure[1], skip[1]))


def circle_claims(
    table: pd.DataFrame,
    distance: xr.DataArray,
    *,
    collapse_threshold: float,
    pure_fraction_min: float,
    skip_fraction_max: float,
    margin: float,
    sigmas: float,
    early_steps: int,
    early_rate_control: float,
) -> dict[str, Any]:
    """Fig. 3 claim: pure attention collapses the two sequences; skip connections counteract it. Holds when the
    pure-attention variants collapse in at least ``pure_fraction_min`` of their runs, the skip variants in at most
    ``skip_fraction_max``, and pure attention more often than skip by more than ``margin`` after ``sigmas``
    standard errors of the difference of the two fractions over the seeds (binomial, :func:`claim_measure`). Not
    judged without runs of both kinds. Positive control: every skip run's final token distance moved
    ``early_rate_control`` of the way toward the continuation of its early exponential rate
    (:func:`early_rate_finals`), counted collapsed below ``collapse_threshold`` of its start as the table counts.

    ``table`` is the collapse table of the circle experiment (one row per variant and hidden dimension with the
    number of seeds and of collapsed seeds), ``distance`` the token distance of every run and step
    (``results/circle.nc``); the skip runs it counts collapsed must be the table's.
    """
    by_variant = table.groupby("variant")[["n_collapsed", "n_seeds"]].sum()
    counts = {v: (int(r.n_collapsed), int(r.n_seeds)) for v, r in by_variant.iterrows()}
    (pure_c, pure_n), (skip_c, skip_n) = _pooled(counts, PURE_ATTENTION), _pooled(counts, WITH_SKIP)
    finals, threshold = early_rate_finals(distance, early_steps), collapse_threshold
    _agree(finals, threshold, skip_c, skip_n)
    cfg = dict(pure_fraction_min=pure_fraction_min, skip_fraction_max=skip_fraction_max, margin=margin, sigmas=sigmas)
    p, q, se = _fractions_and_se(pure_c, pure_n, skip_c, skip_n)
    moved_c = _skip_collapsed(finals, threshold, early_rate_control)
    row = V.check(
        "pure_collapses_more", "pure attention collapses the two sequences; skip connections counteract it",
        form=V.OBSERVATION, source="Dong et al. 2021, Fig. 3",
        test=f"pure attention collapses in at least {pure_fraction_min:.0%} of its runs, skip variants in at most "
        f"{skip_fraction_max:.0%}, pure more often by more than {margin:g} after {sigmas:g} binomial standard errors "
        "(value: the difference of the fractions, or less by a fraction's shortfall)",
        statistic=lambda s: claim_measure((pure_c, pure_n), (_skip_collapsed(finals, threshold, s), skip_n), cfg),
        threshold=V.Threshold(margin, above=True, key="report.circle.margin", sigmas=sigmas),
        wrong=V.Wrong.toward(f"the skip runs continuing at their first {early_steps} steps' exponential rate (the "
                             "data moved {s:g} of the way to it)", early_rate_control,
                             "report.circle.early_rate_control"),
        detail=f"collapsed: pure attention {pure_c}/{pure_n}, with skips {skip_c}/{skip_n}; difference "
        f"{p - q:.2f} ± {se:.2f} (s.e.); at their early rates {moved_c}/{skip_n} skip runs would collapse",
    )  # fmt: skip
    return {
        "per_variant": {v: {"collapsed": c, "runs": n} for v, (c, n) in counts.items()},
        "pure_collapsed": pure_c,
        "pure_runs": pure_n,
        "skip_collapsed": skip_c,
        "skip_runs": skip_n,
        "skip_collapsed_at_early_rate": moved_c,
        **{k: cfg[k] for k in ("pure_fraction_min", "skip_fraction_max", "margin")},
        "difference": p - q,
        "difference_se": se,
        "pure_collapses_more": row["holds"],
        "caption": "; ".join(f"{v}: {c}/{n} runs collapsed" for v, (c, n) in counts.items()),
        "verdicts": [row],
    }


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of ``report.circle`` the schema cannot express: the skip variants' largest collapsed fraction at
    most pure attention's smallest, else a skip fraction between the two would pass both halves of the claim, and the
    control's setting positive (at 0 it is the claim's own test); raises :class:`~san.core.config.ConfigError`
    naming the keys."""
    c = report["circle"]
    if c["skip_fraction_max"] > c["pure_fraction_min"]:
        raise ConfigError(
            f"report.circle.skip_fraction_max = {c['skip_fraction_max']} must be at most "
            f"report.circle.pure_fraction_min = {c['pure_fraction_min']}"
        )
    if not c["early_rate_control"] > 0:
        raise ConfigError(f"report.circle.early_rate_control = {c['early_rate_control']} must be positive")
    if not c["early_steps"] >= 1:
        raise ConfigError(f"report.circle.early_steps = {c['early_steps']} must be at least 1 (a rate needs two steps)")


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The circle wing's section of summary.json: :func:`circle_claims` on ``inputs['circle']`` (the collapse
    table) and the token distances of ``inputs['circle_result']`` (``results/circle.nc``), with
    ``params['report']['circle']`` and the table's collapse threshold (``params['circle_collapse_threshold']``,
    config ``circle.report.collapse_threshold``)."""
    from san.core.storage import read_netcdf

    distance = read_netcdf(inputs["circle_result"][0])["token_distance"]
    return {
        "circle": circle_claims(
            pd.read_csv(inputs["circle"][0]),
            distance,
            collapse_threshold=params["circle_collapse_threshold"],
            **params["report"]["circle"],
        )
    }
