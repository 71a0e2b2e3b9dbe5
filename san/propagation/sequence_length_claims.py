"""The sequence-length sweep's claim (Nait Saada, Naderi & Tanner 2025): rank collapse in width, cured by removing
the uniform component of the attention, ``A - 11^T/T``; one check (:func:`san.claims.verdicts.check`) against a
near-miss wrong theory whose setting comes from config ``report.propagation`` (``t``): **a partial cure**, A's
stable rank grows in T too, at a share ``partial_cure`` of the log-rate of A - 11^T/T's (each seed's growth with A
moved geometrically toward its growth with A - 11^T/T; at 1 the theory would be "no difference", a negation, so
the setting lies below 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import xarray as xr

from san.claims import verdicts as V
from san.claims.evidence import halves, has, seed_measure
from san.propagation.spec import NAIT_SAADA, check, settings


def _growth(ds: xr.Dataset) -> tuple[xr.DataArray, dict[str, Any]]:
    """The last layer's stable rank (per T, centring and seed) at the grid point the claim reads (the skip residual
    and post-LN where swept, else the grid's last value), and that point."""
    sr = ds["stable_rank"].isel(layer=-1)
    other = {d: ds[d].values[-1] for d in sr.dims if d not in ("seq_len", "centred", "seed")}
    if has(ds, "residual", "skip"):
        other["residual"] = "skip"
    if has(ds, "norm", "post_ln"):
        other["norm"] = "post_ln"
    s = sr.sel(other)
    return s, other


def gap_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Stable-rank growth from the shortest to the longest T, per seed: with A its mean plus ``sigmas`` standard
    errors stays below ``stable_rank_growth``, with A - 11^T/T its mean minus them exceeds it (the half that clears
    least, in decades). Wrong theory: a partial cure (the module docstring)."""
    if not has(ds, "centred", 0, 1) or ds.sizes.get("seq_len", 0) < 2:
        return []
    s, other = _growth(ds)
    growth = s.isel(seq_len=-1) / s.isel(seq_len=0)  # (centred, seed)
    plain, centred = growth.sel(centred=0).values, growth.sel(centred=1).values
    stays = settings(t).threshold("stable_rank_growth", above=False, log=True, sigmas="sigmas")
    grows = settings(t).threshold("stable_rank_growth", above=True, log=True, sigmas="sigmas")

    def statistic(x: float) -> V.Measure:
        a = seed_measure(V.toward(plain, centred, x, log=True), "A stays")
        return halves({"with A": (a, stays), "with A - 11^T/T": (seed_measure(centred, "A - 11^T/T grows"), grows)})

    mean, (t0, t1) = s.mean("seed"), (int(ds.seq_len[0]), int(ds.seq_len[-1]))
    a, c = seed_measure(plain), seed_measure(centred)
    w = seed_measure(V.toward(plain, centred, t["partial_cure"], log=True))
    return [
        check(
            "sequence_length.rank_collapse_in_width", NAIT_SAADA,
            "Rank collapse in width: as the sequence length grows the spectral gap of the attention matrix drives "
            "the tokens to rank one; removing the uniform component, A - 11^T/T, cures it.",
            V.QUANTITATIVE, "abstract; their configs.py and stable_ranks.py (isometric input, d = T)",
            test=f"at {other}: the stable rank's growth from T={t0} to T={t1}, over seeds, with A stays below "
            f"{t['stable_rank_growth']}x (mean + {t['sigmas']} s.e.) while with A - 11^T/T it exceeds it (mean - "
            f"{t['sigmas']} s.e.); value: decades to spare of the half that clears least",
            statistic=statistic, threshold=settings(t).halves("stable_rank_growth"),
            wrong=settings(t).wrong("partial_cure", "a partial cure: A's stable rank grows too, at {s:g} of the "
                               "log-rate of A - 11^T/T's"),
            detail=f"stable rank after {ds.sizes['layer'] - 1} layers, T={t0} -> T={t1}: A "
            f"{float(mean.sel(centred=0).isel(seq_len=0)):.2f} -> {float(mean.sel(centred=0).isel(seq_len=-1)):.2f} "
            f"(growth {a.value:.2f} ± {a.se:.2f}); A - 11^T/T {float(mean.sel(centred=1).isel(seq_len=0)):.2f} -> "
            f"{float(mean.sel(centred=1).isel(seq_len=-1)):.2f} (growth {c.value:.2f} ± {c.se:.2f}); the partial "
            f"cure at {t['partial_cure']:g} predicts growth {w.value:.2f} ± {w.se:.2f} with A",
        )
    ]  # fmt: skip
