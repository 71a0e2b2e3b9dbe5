"""Fig. 3 claim of the circle experiment checked against its collapse table (torch-free)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from san.models.spec import PURE_ATTENTION, WITH_SKIP


def circle_claims(table: pd.DataFrame, *, pure_fraction_min: float, skip_fraction_max: float) -> dict[str, Any]:
    """Fig. 3 claim: pure attention collapses the two sequences; skip connections counteract it. Holds when the
    pure-attention variants collapse in at least ``pure_fraction_min`` of their runs, the skip variants in at most
    ``skip_fraction_max``, and pure attention more often than skip.

    ``table`` is the collapse table of the circle experiment (one row per variant and hidden dimension with the
    number of seeds and of collapsed seeds).
    """
    by_variant = table.groupby("variant")[["n_collapsed", "n_seeds"]].sum()
    counts = {v: (int(r.n_collapsed), int(r.n_seeds)) for v, r in by_variant.iterrows()}
    pure = [counts[v] for v in PURE_ATTENTION if v in counts]
    skip = [counts[v] for v in WITH_SKIP if v in counts]
    pure_c, pure_n = sum(c for c, _ in pure), sum(n for _, n in pure)
    skip_c, skip_n = sum(c for c, _ in skip), sum(n for _, n in skip)
    return {
        "per_variant": {v: {"collapsed": c, "runs": n} for v, (c, n) in counts.items()},
        "pure_collapsed": pure_c,
        "pure_runs": pure_n,
        "skip_collapsed": skip_c,
        "skip_runs": skip_n,
        "pure_fraction_min": pure_fraction_min,
        "skip_fraction_max": skip_fraction_max,
        "pure_collapses_more": pure_n > 0
        and skip_n > 0
        and pure_c / pure_n > skip_c / skip_n
        and pure_c / pure_n >= pure_fraction_min
        and skip_c / skip_n <= skip_fraction_max,
        "caption": "; ".join(f"{v}: {c}/{n} runs collapsed" for v, (c, n) in counts.items()),
    }
