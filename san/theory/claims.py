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
    return {**counts, "decided": decided, "fraction_respects": counts["respects"] / decided if decided else np.nan}


def _stats(values: xr.DataArray) -> dict[str, float]:
    """Minimum, median and maximum of the finite values (NaN when there are none)."""
    v = np.asarray(values).ravel()
    v = v[np.isfinite(v)]
    return {
        k: float(f(v)) if v.size else float("nan") for k, f in (("min", np.min), ("median", np.median), ("max", np.max))
    }


def pair_tables(ds: xr.Dataset) -> dict[str, Any]:
    """Verdict counts of the (sample, layer) pairs: the theorem's own pairs (no LayerNorm) in total and per input
    kind, with the pairs at the float64 floor counted apart (never in a total), and the LayerNorm pairs (outside the
    theorem) in a table of their own."""
    tables: dict[str, Any] = {}
    for ln, name in ((0, "theorem_pairs"), (1, "layernorm_pairs")):
        if ln in ds["layernorm"].values:
            sel = ds["verdict"].sel(layernorm=ln)
            tables[name] = {"all": _fraction(sel), **{str(k): _fraction(sel.sel(input=k)) for k in ds["input"].values}}
    return tables


def certified_check(no_ln: xr.DataArray | xr.Dataset, valid: xr.DataArray, margin_min: float) -> dict[str, Any]:
    """The certified one-layer bound against the certified lower end of the measured residual, on every valid
    (sample, layer) pair without LayerNorm: holds when every margin ``log10(bound / residual)`` is at least
    ``margin_min``. A pair whose certified bound or residual is missing (NaN) fails: a missing value is never a pass."""
    with np.errstate(divide="ignore"):
        margin = no_ln["log10_bound_certified"] - np.log10(no_ln["residual_lower"])
    judged = margin.where(valid)
    missing = int((valid & ~np.isfinite(margin)).sum())
    return {
        "certified_margin_min_no_ln": float(judged.min()),
        "certified_margin_threshold": margin_min,
        "certified_missing_no_ln": missing,
        "certified_holds_no_ln": bool(missing == 0 and bool((judged.fillna(margin_min) >= margin_min).all())),
    }


def adversarial_claims(ds: xr.Dataset, log10_gamma_max: float) -> dict[str, Any]:
    """The adversarial search against the bound: the largest certified ``gamma`` one pure-attention layer needed
    (holds when ``log10 gamma <= log10_gamma_max``; NaN, no measured draw, fails), and the negative controls, which
    must each be found violating the bound (``controls_detected``): a checker that never says violated is no
    evidence."""
    g = ds["log10_gamma_adversarial"]
    top = _stats(g)["max"]
    controls = {
        str(c): {
            "log10_gamma_max": _stats(ds["log10_gamma_control"].sel(control=c))["max"],
            "violated": bool(ds["control_violated"].sel(control=c) == 1),
        }
        for c in ds["control"].values
    }
    return {
        "log10_gamma_max": top,
        "gamma_max": float(10**top),
        "log10_gamma_median": _stats(g)["median"],
        "threshold_log10_gamma": log10_gamma_max,
        "holds": bool(np.isfinite(top) and top <= log10_gamma_max),
        "draws": int(np.isfinite(g).sum()),
        "settings": {
            k: np.asarray(g.attrs[k]).item() for k in ("n", "d", "H", "d_qk", "steps", "starts") if k in g.attrs
        },
        "controls": controls,
        "controls_detected": bool(controls) and all(c["violated"] for c in controls.values()),
    }


def exponent_stats(ds: xr.Dataset) -> dict[str, Any]:
    """The empirical exponents near the limit (per LayerNorm setting) and the width of the ``res`` bracket."""
    out: dict[str, Any] = {}
    for name in ("exponent", "exponent_scaled"):
        e = ds[name].where(ds["near_limit"] == 1)
        out[f"{name}_near_limit"] = {
            f"ln{int(ln)}": {**_stats(e.sel(layernorm=ln)), "pairs": int(np.isfinite(e.sel(layernorm=ln)).sum())}
            for ln in ds["layernorm"].values
        }
    ratio = (ds["residual"] / ds["residual_lower"]).where(ds["verdict"].isin([0, 1, -1]) | (ds["layer"] == 0))
    out["bracket_ratio_median"] = float(ratio.median())
    out["bracket_ratio_max"] = float(ratio.max())
    return out


def theorem_claims(
    ds: xr.Dataset, thresholds: Mapping[str, float], fig2: Mapping[str, xr.DataArray] | None = None
) -> dict[str, Any]:
    """Theorem 2.2 against this run: the pair tables (:func:`pair_tables`), the nominal bound (holds when at most
    ``nominal_violations_max`` of the theorem's pairs violate it), slack and required ``gamma`` of the random
    weights, the certified check, the adversarial search and its controls, the exponents and (``fig2``: per model,
    the output of :func:`fig2_exponents`) those of the Fig. 2 SAN curves. ``thresholds``: config ``report.theorem``."""
    valid = ds["verdict"].isin([VERDICT["respects"], VERDICT["violates"], VERDICT["undecided"]])
    no_ln = ds.sel(layernorm=0)
    out: dict[str, Any] = pair_tables(ds)
    violations = out["theorem_pairs"]["all"]["violates"]
    out["nominal"] = {
        "violations": violations,
        "threshold": thresholds["nominal_violations_max"],
        "holds": violations <= thresholds["nominal_violations_max"] and out["theorem_pairs"]["all"]["decided"] > 0,
    }
    out["slack_no_ln"] = _stats(ds["slack"].where(valid).sel(layernorm=0))
    out["log10_gamma_required_no_ln"] = _stats(ds["log10_gamma_required"].where(valid).sel(layernorm=0))
    out.update(certified_check(no_ln, valid.sel(layernorm=0), thresholds["certified_margin_min"]))
    if "log10_gamma_adversarial" in ds:
        out["adversarial"] = adversarial_claims(ds, thresholds["log10_gamma_max"])
    out.update(exponent_stats(ds))
    if fig2:
        out["fig2_exponent"] = {
            m: {str(w): float(e.sel(weights=w).median()) for w in e["weights"].values} for m, e in fig2.items()
        }
    return out


def fig2_exponents(ratio: xr.DataArray, floor: float, limit: float) -> xr.DataArray:
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
