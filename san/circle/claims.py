"""Fig. 3 claim of the circle experiment checked against its collapse table (torch-free)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from san.core import verdicts as V
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


def circle_claims(
    table: pd.DataFrame,
    *,
    pure_fraction_min: float,
    skip_fraction_max: float,
    margin: float = 0.0,
    sigmas: float = 0.0,
) -> dict[str, Any]:
    """Fig. 3 claim: pure attention collapses the two sequences; skip connections counteract it. Holds when the
    pure-attention variants collapse in at least ``pure_fraction_min`` of their runs, the skip variants in at most
    ``skip_fraction_max``, and pure attention more often than skip by more than ``margin`` after ``sigmas``
    standard errors of the difference of the two fractions over the seeds (binomial:
    ``sqrt(p (1 - p) / n + q (1 - q) / m)``). Not judged without runs of both kinds.

    ``table`` is the collapse table of the circle experiment (one row per variant and hidden dimension with the
    number of seeds and of collapsed seeds).
    """
    by_variant = table.groupby("variant")[["n_collapsed", "n_seeds"]].sum()
    counts = {v: (int(r.n_collapsed), int(r.n_seeds)) for v, r in by_variant.iterrows()}
    (pure_c, pure_n), (skip_c, skip_n) = _pooled(counts, PURE_ATTENTION), _pooled(counts, WITH_SKIP)
    p, q, se = _fractions_and_se(pure_c, pure_n, skip_c, skip_n)
    m = V.margin(p - q, se, sigmas, margin, above=True)
    holds = V.judged(V.clears(m) is True and p >= pure_fraction_min and q <= skip_fraction_max, min(pure_n, skip_n))
    # positive control: the variants with skip connections through pure attention's test ("collapses in at least
    # pure_fraction_min of its runs") must fail
    control = V.control(
        "the variants with skip connections in place of pure attention",
        None,
        V.judged(q >= pure_fraction_min, skip_n),
        value=q,
    )
    caption = "; ".join(f"{v}: {c}/{n} runs collapsed" for v, (c, n) in counts.items())
    return {
        "per_variant": {v: {"collapsed": c, "runs": n} for v, (c, n) in counts.items()},
        "pure_collapsed": pure_c,
        "pure_runs": pure_n,
        "skip_collapsed": skip_c,
        "skip_runs": skip_n,
        "pure_fraction_min": pure_fraction_min,
        "skip_fraction_max": skip_fraction_max,
        "margin": margin,
        "difference": p - q,
        "difference_se": se,
        "pure_collapses_more": holds,
        "caption": caption,
        "verdicts": [
            V.row("pure_collapses_more",
                  "pure attention collapses the two sequences; skip connections counteract it",
                  kind=V.SCIENTIFIC, form=V.OBSERVATION, source="Dong et al. 2021, Fig. 3", holds=holds,
                  value=p - q, margin=m,
                  test=f"pure attention collapses in at least {pure_fraction_min:.0%} of its runs, skip variants in "
                  f"at most {skip_fraction_max:.0%}, pure more often by more than {margin:g} after {sigmas:g} "
                  "binomial standard errors",
                  detail=f"collapsed: pure attention {pure_c}/{pure_n}, with skips {skip_c}/{skip_n}; difference "
                  f"{p - q:.2f} ± {se:.2f} (s.e.)", positive_control=control),
        ],
    }  # fmt: skip


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of ``report.circle`` the schema cannot express: the skip variants' largest collapsed fraction at
    most pure attention's smallest, else a skip fraction between the two would pass the claim's skip half and its
    positive control alike; raises :class:`~san.core.config.ConfigError` naming the keys."""
    c = report["circle"]
    if c["skip_fraction_max"] > c["pure_fraction_min"]:
        raise ConfigError(
            f"report.circle.skip_fraction_max = {c['skip_fraction_max']} must be at most "
            f"report.circle.pure_fraction_min = {c['pure_fraction_min']}"
        )


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The circle wing's section of summary.json: :func:`circle_claims` on ``inputs['circle']`` (the collapse
    table) with ``params['report']['circle']``."""
    return {"circle": circle_claims(pd.read_csv(inputs["circle"][0]), **params["report"]["circle"])}
