"""Theorem 2.2 against the measurements, as plain numbers for the report (torch-free; reads ``theorem.nc``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.core.config import ConfigError
from san.theory import bound as B
from san.theory.spec import VERDICT

#: the source of every row of the theorem's checks
THEOREM = "Dong et al. 2021, Theorem 2.2"


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


def _log10_factor(factor: float) -> float:
    """``log10`` of a positive control's tightening factor (a factor above 1 makes the bound tighter)."""
    return float(np.log10(factor))


def nominal_check(ds: xr.Dataset, valid: xr.DataArray, violations_max: int, factor: float) -> dict[str, Any]:
    """The nominal bound with ``gamma = 1`` on the random-weight pairs without LayerNorm (a regression check: the
    theorem proves it): holds when at most ``violations_max`` of the theorem's pairs violate it (the lower end of
    the measured residual above the bound); not judged without a decidable pair. Its positive control counts the
    same violations against the bound divided by ``factor``."""
    no_ln = ds.sel(layernorm=0)
    decided = int(valid.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        log_lo = np.log10(no_ln["residual_lower"])
    violations = int((valid & (log_lo > no_ln["log10_bound"])).sum())
    tight = int((valid & (log_lo > no_ln["log10_bound"] - _log10_factor(factor))).sum())
    return {
        "violations": violations,
        "decided": decided,
        "threshold": violations_max,
        "holds": V.judged(violations <= violations_max, decided),
        "control": V.control(
            f"the bound divided by {factor:g}", factor, V.judged(tight <= violations_max, decided), value=tight
        ),
    }


def certified_check(
    no_ln: xr.DataArray | xr.Dataset, valid: xr.DataArray, margin_min: float, factor: float = 2.0
) -> dict[str, Any]:
    """The certified one-layer bound against the certified lower end of the measured residual, on every valid
    (sample, layer) pair without LayerNorm: holds when every margin ``log10(bound / residual)`` is at least
    ``margin_min``. A pair whose certified bound or residual is missing (NaN) fails: a missing value is never a pass;
    without any valid pair the check is not judged. Its positive control asks the same of the bound divided by
    ``factor`` (every margin smaller by ``log10 factor``)."""
    with np.errstate(divide="ignore"):
        margin = no_ln["log10_bound_certified"] - np.log10(no_ln["residual_lower"])
    judged = margin.where(valid)
    n_valid = int(valid.sum())
    missing = int((valid & ~np.isfinite(margin)).sum())
    smallest = float(judged.min()) if n_valid > missing else float("nan")

    def check(shift: float) -> V.Verdict:
        return V.judged(missing == 0 and bool((judged.fillna(np.inf) - shift >= margin_min).all()), n_valid)

    return {
        "certified_margin_min_no_ln": smallest,
        "certified_margin_threshold": margin_min,
        "certified_missing_no_ln": missing,
        "certified_pairs_no_ln": n_valid,
        "certified_holds_no_ln": check(0.0),
        "certified_control": V.control(
            f"the bound divided by {factor:g}",
            factor,
            check(_log10_factor(factor)),
            power=10 ** (smallest - margin_min) if np.isfinite(smallest) else None,
        ),
    }


def _sizes(g: xr.DataArray) -> list[tuple[int, int]]:
    return [(int(n), int(h)) for n in g["search_tokens"].values for h in g["search_heads"].values]


def adversarial_claims(
    ds: xr.Dataset,
    log10_gamma_max: float,
    *,
    factor: float = 2.0,
    negative_control_log10_gamma: float = 0.0,
    notes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The adversarial search against the bound (:mod:`san.theory.adversarial`): the largest certified ``gamma``
    one pure-attention layer needed over every searched size (holds when ``log10 gamma <= log10_gamma_max``; not
    judged without a measured draw), per size, with the ascent's gain over its starting draws (decades).

    Its check (:func:`adversarial_check`, ``holds`` and ``control`` here): the same comparison against the bound
    divided by ``factor`` must fail; ``power_factor`` is the exact division the search cannot tell from the bound
    (``10^(log10_gamma_max - log10 gamma)``; the check's scan reads it on a grid). Negative controls (layers outside
    the theorem) must each be found violating the bound: a control's largest ``log10 gamma`` above both
    ``negative_control_log10_gamma`` and the theorem layer's largest (``controls_detected``, a regression check of
    the checker); ``notes``: config ``threshold_notes`` (disclosures printed in the check's detail)."""
    g = ds["log10_gamma_adversarial"]
    top = _stats(g)["max"]
    start = ds.get("log10_gamma_start")
    per_size = {}
    for n, h in _sizes(g):
        at = {"search_tokens": n, "search_heads": h}
        after = _stats(g.sel(at))["max"]
        before = _stats(start.sel(at))["max"] if start is not None else float("nan")
        per_size[f"n={n}, H={h}"] = {
            "n": n,
            "H": h,
            "log10_gamma_max": after,
            "log10_gamma_start_max": before,
            "ascent_gain": after - before,
            "draws": int(np.isfinite(g.sel(at)).sum()),
        }
    criterion = max(negative_control_log10_gamma, top) if np.isfinite(top) else negative_control_log10_gamma
    controls = {}
    for c in ds["control"].values:
        worst = _stats(ds["log10_gamma_control"].sel(control=c))["max"]
        controls[str(c)] = {"log10_gamma_max": worst, "violated": V.judged(worst > criterion, int(np.isfinite(worst)))}
    draws = int(np.isfinite(g).sum())
    start_top = _stats(start)["max"] if start is not None else float("nan")
    power = float(10 ** (log10_gamma_max - top)) if draws else float("nan")
    out = {
        "log10_gamma_max": top,
        "gamma_max": float(10**top),
        "log10_gamma_median": _stats(g)["median"],
        "threshold_log10_gamma": log10_gamma_max,
        "power_factor": power,
        "ascent_gain": top - start_top,
        "log10_gamma_start_max": start_top,
        "draws": draws,
        "sizes": {"n": sorted({n for n, _ in _sizes(g)}), "H": sorted({h for _, h in _sizes(g)})},
        "per_size": per_size,
        "settings": {k: np.asarray(g.attrs[k]).item() for k in ("d", "d_qk", "steps", "starts") if k in g.attrs},
        "negative_control_criterion": criterion,
        "controls": controls,
        "controls_detected": V.every(c["violated"] for c in controls.values()),
    }
    row = adversarial_check(out, factor, notes)
    return {**out, "holds": row["holds"], "control": row["positive_control"]}


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


def _random_weight_verdicts(out: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The regression rows of :func:`theorem_claims` on the random weights without LayerNorm: the nominal bound
    (:func:`nominal_check`) and the certified bound (:func:`certified_check`), from their entries in ``out``; the
    theorem proves both, so each checks the code, with the bound tightened as its positive control."""
    nominal, certified_margin = out["nominal"], out["certified_margin_min_no_ln"]
    rows = (
        ("nominal.holds", "random weights respect the proven bound with gamma = 1", nominal["holds"],
         nominal["violations"], nominal["threshold"] - nominal["violations"],
         f"at most {nominal['threshold']} of {nominal['decided']} random-weight pairs without LayerNorm violate the "
         "nominal bound", nominal["control"],
         V.Threshold(nominal["threshold"], above=False, key="report.theorem.nominal_violations_max")),
        ("certified_holds_no_ln", "the certified bound holds on every random-weight pair (a proven inequality)",
         out["certified_holds_no_ln"], certified_margin if not out["certified_missing_no_ln"] else None,
         certified_margin - out["certified_margin_threshold"], f"every certified margin log10(bound / residual) at "
         f"least {out['certified_margin_threshold']:g}", out["certified_control"],
         V.Threshold(out["certified_margin_threshold"], above=True, key="report.theorem.certified_margin_min")),
    )  # fmt: skip
    return [
        V.row(
            key,
            statement,
            kind=V.REGRESSION,
            form=V.UNIVERSAL,
            source=THEOREM,
            holds=holds,
            value=value,
            margin=margin,
            test=test,
            positive_control=control,
            bound=bound,
            inclusive=True,
        )  # fmt: skip
        for key, statement, holds, value, margin, test, control, bound in rows
    ]


def factor_scan(factor: float, steps: int = 20) -> tuple[float, ...]:
    """The factors a bound is divided by in a power scan: geometric from 1 (the bound itself) to ``factor`` squared
    (twice the way to the control's factor, in decades), ``2 steps + 1`` of them."""
    return tuple(float(f) for f in np.logspace(0.0, 2.0 * _log10_factor(factor), 2 * steps + 1))


def _note(notes: Mapping[str, str] | None, key: str) -> str:
    """The disclosure of ``report.theorem.<key>`` (config ``report.theorem.threshold_notes``: a setting changed
    after a result was seen), for a row's detail; empty for a setting fixed before the first run that judged it."""
    note = (notes or {}).get(key)
    return f"; report.theorem.{key}: {note}" if note else ""


def adversarial_check(adv: Mapping[str, Any], factor: float, notes: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The scientific row of the adversarial search (:func:`adversarial_claims` gave ``adv``): no searched layer
    needs gamma above the threshold, one check (:func:`san.claims.verdicts.check`) whose wrong reference is the bound
    divided by a factor (config ``control_factor``; power: the largest factor of a geometric scan at which the search
    still passes); ``notes``: the disclosures of config ``threshold_notes``."""
    top, draws = adv["log10_gamma_max"], adv["draws"]

    def needed(f: float) -> V.Measure:
        # against the bound divided by f, the search's largest draw needs gamma f times larger
        return V.Measure(top + _log10_factor(f), 0.0, draws, f"the largest of {draws} searched draws")

    return V.check(
        "adversarial.holds",
        "no searched layer needs gamma above the threshold (adversarial search)",
        form=V.UNIVERSAL,
        source=THEOREM,
        test=f"the largest certified log10 gamma over {draws} searched draws at most {adv['threshold_log10_gamma']:g}",
        statistic=needed,
        threshold=V.Threshold(adv["threshold_log10_gamma"], above=False, key="report.theorem.log10_gamma_max"),
        wrong=V.Wrong("the bound divided by {s:.3g}", 1.0, float(factor), "report.theorem.control_factor",
                      factor_scan(factor)),
        detail=f"largest gamma {adv['gamma_max']:.3g}; against the bound divided by {factor:g} it needs "
        f"{adv['gamma_max'] * factor:.3g}; passes against the bound divided by up to {adv['power_factor']:.3g} "
        f"(exactly; the scan's grid reads the power at or below it){_note(notes, 'control_factor')}",
    )  # fmt: skip


def _adversarial_verdicts(adv: Mapping[str, Any], thresholds: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of :func:`theorem_claims` on the adversarial search: its check (:func:`adversarial_check`) and the
    negative controls detected (a regression row)."""
    return [
        adversarial_check(adv, thresholds["control_factor"], thresholds.get("threshold_notes")),
        V.row(
            "adversarial.controls_detected",
            "the search finds the bound violated on layers outside the theorem (negative controls)",
            kind=V.REGRESSION,
            form=V.EXISTENTIAL,
            source="this project's adversarial search",
            holds=adv["controls_detected"],
            test=f"each negative control's largest log10 gamma above {adv['negative_control_criterion']:.3g}",
            bound=V.Threshold(adv["negative_control_criterion"], above=True, key=""),
            items=[
                {"item": name, "value": c["log10_gamma_max"], "verdict": V.label(c["violated"]), "must": V.HOLDS}
                for name, c in adv["controls"].items()
            ],
        ),
    ]


def theorem_claims(
    ds: xr.Dataset, thresholds: Mapping[str, float], fig2: Mapping[str, xr.DataArray] | None = None
) -> dict[str, Any]:
    """Theorem 2.2 against this run: the pair tables (:func:`pair_tables`), the nominal bound on random weights
    (:func:`nominal_check`), slack and required ``gamma`` of the random weights, the certified check, the
    adversarial search and its controls, the exponents and (``fig2``: per model, the output of
    :func:`fig2_exponents`) those of the Fig. 2 SAN curves; ``verdicts`` lists them by kind, each theorem check with
    its positive control (the bound tightened by ``control_factor``). ``thresholds``: config ``report.theorem``."""
    valid = ds["verdict"].isin([VERDICT["respects"], VERDICT["violates"], VERDICT["undecided"]])
    no_ln = ds.sel(layernorm=0)
    factor = thresholds["control_factor"]
    out: dict[str, Any] = pair_tables(ds)
    out["nominal"] = nominal_check(ds, valid.sel(layernorm=0), thresholds["nominal_violations_max"], factor)
    out["slack_no_ln"] = _stats(ds["slack"].where(valid).sel(layernorm=0))
    out["log10_gamma_required_no_ln"] = _stats(ds["log10_gamma_required"].where(valid).sel(layernorm=0))
    out.update(certified_check(no_ln, valid.sel(layernorm=0), thresholds["certified_margin_min"], factor))
    verdicts = _random_weight_verdicts(out)
    if "log10_gamma_adversarial" in ds:
        adv = out["adversarial"] = adversarial_claims(
            ds,
            thresholds["log10_gamma_max"],
            factor=factor,
            negative_control_log10_gamma=thresholds["negative_control_log10_gamma"],
            notes=thresholds.get("threshold_notes"),
        )
        verdicts += _adversarial_verdicts(adv, thresholds)
    out.update(exponent_stats(ds))
    if fig2:
        out["fig2_exponent"] = {
            m: {str(w): float(e.sel(weights=w).median()) for w in e["weights"].values} for m, e in fig2.items()
        }
    out["verdicts"] = verdicts
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


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of ``report.theorem`` the schema cannot express; raises :class:`~san.core.config.ConfigError`
    naming the keys: the negative controls' criterion at or above the theorem's own threshold (a layer outside the
    theorem counts as violating the bound only where the theorem's layer would fail), and every disclosure of
    ``threshold_notes`` naming a key of the section."""
    t = report["theorem"]
    if t["negative_control_log10_gamma"] < t["log10_gamma_max"]:
        raise ConfigError(
            f"report.theorem.negative_control_log10_gamma = {t['negative_control_log10_gamma']} must be at least "
            f"report.theorem.log10_gamma_max = {t['log10_gamma_max']}"
        )
    unknown = sorted(set(t.get("threshold_notes", {})) - set(t) - {"threshold_notes"})
    if unknown:
        raise ConfigError(f"report.theorem.threshold_notes names no key of report.theorem: {unknown}")


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The theory wing's section of summary.json: :func:`theorem_claims` on ``inputs['theorem']`` with the Fig. 2
    exponents of every rank-collapse result (``inputs['rank_collapse']``, models ``params['models']``, SAN
    variant; ``params['theory']``: ``float_floor`` and ``limit``) and ``params['report']['theorem']``."""
    from san.core.storage import read_netcdf

    floor, limit = params["theory"]["float_floor"], params["theory"]["limit"]
    fig2 = {
        m: fig2_exponents(read_netcdf(f)["residual_ratio"].sel(variant="SAN"), floor, limit)
        for m, f in zip(params["models"], inputs["rank_collapse"], strict=True)
    }
    return {"theorem": theorem_claims(read_netcdf(inputs["theorem"][0]), params["report"]["theorem"], fig2)}
