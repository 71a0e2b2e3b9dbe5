"""Theorem 2.2 against the measurements, as plain numbers for the report (torch-free; reads ``theorem.nc``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.theory import bound as B
from san.theory.spec import VERDICT


def _fraction(verdict: xr.DataArray) -> dict[str, Any]:
    """Counts of the verdicts and the fraction respecting the bound among the decidable pairs above the floor."""
    counts = {name: int((verdict == code).sum()) for name, code in VERDICT.items()}
    decided = counts["respects"] + counts["violates"] + counts["undecided"]
    return {**counts, "fraction_respects": counts["respects"] / decided if decided else float("nan")}


def certified_check(no_ln: xr.DataArray | xr.Dataset, valid: xr.DataArray) -> dict[str, Any]:
    """The certified one-layer bound against the certified lower end of the measured residual, on every valid
    (sample, layer) pair without LayerNorm. A pair whose certified bound or residual is missing (NaN) fails: a
    missing value is never a pass."""
    with np.errstate(divide="ignore"):
        margin = no_ln["log10_bound_certified"] - np.log10(no_ln["residual_lower"])
    judged = margin.where(valid)
    missing = int((valid & ~np.isfinite(margin)).sum())
    return {
        "certified_margin_min_no_ln": float(judged.min()),
        "certified_missing_no_ln": missing,
        "certified_holds_no_ln": bool(missing == 0 and bool((judged.fillna(0) >= 0).all())),
    }


def theorem_claims(ds: xr.Dataset, fig2: Mapping[str, xr.DataArray] | None = None) -> dict[str, Any]:
    """Fraction of (sample, layer) pairs respecting the nominal bound (overall, per LayerNorm and input kind), slack,
    required gamma, the empirical exponent near the limit, and the exponents of the Fig. 2 SAN curves (``fig2``:
    per model, the output of :func:`fig2_exponents`)."""
    valid = ds["verdict"].isin([VERDICT["respects"], VERDICT["violates"], VERDICT["undecided"]])
    slack = ds["slack"].where(valid)
    out: dict[str, Any] = {"overall": _fraction(ds["verdict"])}
    for ln in ds["layernorm"].values:
        for kind in ds["input"].values:
            sel = {"layernorm": ln, "input": kind}
            s = slack.sel(sel).values
            s = s[np.isfinite(s)]
            out[f"{kind}_ln{int(ln)}"] = {
                **_fraction(ds["verdict"].sel(sel)),
                "slack_min": float(s.min()) if s.size else float("nan"),
                "slack_median": float(np.median(s)) if s.size else float("nan"),
            }
    no_ln = ds.sel(layernorm=0)
    s = slack.sel(layernorm=0).values
    s = s[np.isfinite(s)]
    out["slack_min"] = float(s.min()) if s.size else float("nan")
    out["slack_median"] = float(np.median(s)) if s.size else float("nan")
    g = ds["log10_gamma_required"].where(valid).sel(layernorm=0).values
    g = g[np.isfinite(g)]
    out["log10_gamma_required_max_no_ln"] = float(g.max()) if g.size else float("nan")
    out.update(certified_check(no_ln, valid.sel(layernorm=0)))
    for name, var in (("exponent", "exponent"), ("exponent_scaled", "exponent_scaled")):
        e = ds[var].where(ds["near_limit"] == 1)
        out[f"{name}_near_limit"] = {
            f"ln{int(ln)}": {
                "median": float(e.sel(layernorm=ln).median()),
                "min": float(e.sel(layernorm=ln).min()),
                "pairs": int(np.isfinite(e.sel(layernorm=ln)).sum()),
            }
            for ln in ds["layernorm"].values
        }
    ratio = (ds["residual"] / ds["residual_lower"]).where(ds["verdict"].isin([0, 1, -1]) | (ds["layer"] == 0))
    out["bracket_ratio_median"] = float(ratio.median())
    out["bracket_ratio_max"] = float(ratio.max())
    if fig2:
        out["fig2_exponent"] = {
            m: {str(w): float(e.sel(weights=w).median()) for w in e["weights"].values} for m, e in fig2.items()
        }
    return out


def fig2_exponents(ratio: xr.DataArray, floor: float = 1e-13, limit: float = 1e-2) -> xr.DataArray:
    """Empirical exponent ``log y_{l+1} / log y_l`` of stored Fig. 2 curves, at the deepest pair near the limit.

    ``ratio``: ``residual_ratio`` (dims ``weights, variant, layer, sample``) of ``results/rank_collapse/<model>.nc``:
    the *token-mean* residual relative to ``||X_l||_{1,inf}`` (a ratio, not the theorem's absolute residual with
    the optimal ``x``). Pairs with ``y_l < limit`` and ``y_{l+1} >= floor``; NaN where no pair qualifies.
    """
    expo = xr.apply_ufunc(B.exponent, ratio, input_core_dims=[["layer"]], output_core_dims=[["pair"]])
    y = ratio.transpose(..., "layer").values
    ok = (y[..., :-1] < limit) & (y[..., 1:] >= floor)
    vals = expo.transpose(..., "pair").values
    deepest = np.where(ok.any(axis=-1), ok.shape[-1] - 1 - np.argmax(ok[..., ::-1], axis=-1), -1)
    picked = np.take_along_axis(vals, np.maximum(deepest, 0)[..., None], axis=-1)[..., 0]
    picked = np.where(deepest >= 0, picked, np.nan)
    dims = [d for d in ratio.transpose(..., "layer").dims if d != "layer"]
    return xr.DataArray(picked, dims=dims, coords={d: ratio[d] for d in dims})
