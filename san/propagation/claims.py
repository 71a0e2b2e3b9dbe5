"""Published statements about collapse at initialisation, checked on the propagation sweeps (torch-free).

One claim per statement, worded as the paper words it, with ``holds`` (True / False, None when the sweep that tests
it is absent from the results or lacks the grid values it needs) and the measured number. Every threshold comes from
config ``report.propagation`` (the argument ``t`` below) and is stated in each claim's ``test``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core.storage import read_structured_attr
from san.propagation import theory


def _claim(paper: str, statement: str, test: str, holds: bool | None, value: float, detail: str) -> dict[str, Any]:
    return {
        "paper": paper,
        "statement": statement,
        "test": test,
        "holds": None if holds is None else bool(holds),
        "value": float(value),
        "detail": detail,
    }


def fixed_params(ds: xr.Dataset) -> dict[str, Any]:
    """The fixed parameters of a sweep result (its ``fixed`` attribute, a JSON object)."""
    return read_structured_attr(ds, "fixed")


def block_kwargs(ds: xr.Dataset) -> dict[str, Any]:
    """Keyword arguments of :func:`theory.block_step` for the fixed block of a sweep result (qk_variance)."""
    fixed = fixed_params(ds)
    residual = read_structured_attr(ds, "residuals")[fixed["residual"]]
    depth = int(ds.sizes["layer"] - 1)
    branch = depth**-0.5 if residual["branch"] == ds.attrs["inv_sqrt_depth"] else float(residual["branch"])
    return {
        "var_v": fixed["var_v"],
        "var_b": fixed["var_b"],
        "var_w": fixed["var_w"],
        "skip": float(residual["skip"]),
        "branch": branch,
        "mlp": bool(fixed["mlp"]),
    }


def predicted_critical_beta(ds: xr.Dataset) -> float:
    """The predicted critical beta of a qk_variance result: the smallest beta whose last-layer attention condenses
    under the recursion started from the measured input correlation (:func:`theory.critical_beta_at_depth`)."""
    depth = int(ds.sizes["layer"] - 1)
    return theory.critical_beta_at_depth(float(ds["cosine"].isel(layer=0).mean()), depth, **block_kwargs(ds))


def _has(ds: xr.Dataset, dim: str, *values) -> bool:
    return dim in ds.dims and all(v in ds[dim].values for v in values)


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


def depth_gaps(ds: xr.Dataset) -> xr.DataArray:
    """Largest |simulated mean cosine - G&G recursion| over layers, per grid point (post-LN points only)."""
    gap = abs(ds["cosine"].mean("seed") - ds["theory_cosine"]).max("layer")
    return gap.where(np.isfinite(ds["theory_cosine"]).any("layer"))


def depth_gaps_by_seed(ds: xr.Dataset) -> xr.DataArray:
    """Largest |simulated cosine - G&G recursion| over layers, per grid point and seed (post-LN points only)."""
    gap = abs(ds["cosine"] - ds["theory_cosine"]).max("layer")
    return gap.where(np.isfinite(ds["theory_cosine"]).any("layer"))


def _noci_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    last = ds["cosine"].isel(layer=-1).mean("seed")
    inv = float(last.sel(residual="inv_sqrt_depth").max())
    skip = float(last.sel(residual="skip").min()) if _has(ds, "residual", "skip") else float("nan")
    return _claim(
        "Noci et al. 2022",
        "Scaling the residual branches by 1/sqrt(L) prevents rank collapse: tokens stay apart at any depth.",
        f"largest last-layer cosine over the 1/sqrt(L) runs < {t['collapsed_cosine']} (L = {ds.sizes['layer'] - 1})",
        inv < t["collapsed_cosine"],
        inv,
        f"last-layer cosine: 1/sqrt(L) branches at most {inv:.3f}; a = b = 1 at least {skip:.3f}",
    )


def _agreement_claim(ds: xr.Dataset, gaps: xr.DataArray, sub: list, t: Mapping[str, Any]) -> dict[str, Any]:
    g_sub = float(gaps.isel(width=-1, seq_len=-1).sel(beta=sub).max())
    return _claim(
        "Giorlandino & Goldt 2026",
        "The recursion for the token correlation through post-LN blocks is exact in the limit of infinite "
        "width and sequence length (well below the critical variance: agreement to a few hundredths).",
        f"largest gap over layers and residual scalings at the largest d, T for beta < "
        f"{t['subcritical_fraction']} beta_c(p0) <= {t['agreement']}",
        g_sub <= t["agreement"],
        g_sub,
        f"d = {ds.width.values[-1]}, T = {ds.seq_len.values[-1]}, beta in {[float(b) for b in sub]}: "
        f"max gap {g_sub:.3f}",
    )


def _finite_size_claim(ds: xr.Dataset, sup: list, t: Mapping[str, Any]) -> dict[str, Any]:
    """T effect minus d effect on the gap, per seed; holds when its mean exceeds ``finite_size_sigmas`` standard
    errors of the seed spread (None with a single seed: no spread to judge by)."""
    g = depth_gaps_by_seed(ds).sel(norm="post_ln", beta=sup)
    g = g.mean([d for d in g.dims if d not in ("width", "seq_len", "seed")])
    d_eff = g.isel(width=0).mean("seq_len") - g.isel(width=-1).mean("seq_len")
    t_eff = g.isel(seq_len=0).mean("width") - g.isel(seq_len=-1).mean("width")
    diff = (t_eff - d_eff).values
    se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("nan")
    mean = float(diff.mean())
    return _claim(
        "Giorlandino & Goldt 2026 (finite-size)",
        "Near and above the critical variance the gap to the infinite-size recursion is dominated by the "
        "sequence length T, not the width d.",
        "drop of the mean gap from the smallest to the largest T exceeds the drop from the smallest to the largest d "
        f"by more than {t['finite_size_sigmas']} standard errors over {diff.size} seeds (beta >= beta_c(p0))",
        None if diff.size < 2 else mean > t["finite_size_sigmas"] * se,
        mean,
        f"gap drop with T ({ds.seq_len.values[0]}->{ds.seq_len.values[-1]}): {float(t_eff.mean()):+.3f}; "
        f"with d ({ds.width.values[0]}->{ds.width.values[-1]}): {float(d_eff.mean()):+.3f}; difference "
        f"{mean:+.3f} ± {se:.3f} (standard error over seeds)",
    )


def _depth_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = [_noci_claim(ds, t)] if _has(ds, "residual", "inv_sqrt_depth") else []
    if not (_has(ds, "norm", "post_ln") and all(d in ds.dims for d in ("beta", "width", "seq_len"))):
        return out
    gaps = depth_gaps(ds).sel(norm="post_ln")
    beta_c = theory.critical_beta(float(ds["cosine"].isel(layer=0).mean()))
    sub = [b for b in ds.beta.values if b < t["subcritical_fraction"] * beta_c]
    sup = [b for b in ds.beta.values if b >= beta_c]
    if sub:
        out.append(_agreement_claim(ds, gaps, sub, t))
    if sup and ds.sizes["width"] > 1 and ds.sizes["seq_len"] > 1:
        out.append(_finite_size_claim(ds, sup, t))
    return out


def observed_critical_beta(ds: xr.Dataset, condensed: float) -> float:
    """The critical beta read off a qk_variance sweep: the REM participation above the transition is
    ``Y = 1 - beta_c / beta``, so each clearly condensed point (last-layer participation > ``condensed``) gives
    ``beta_c = beta (1 - Y)``; the median over those points (NaN if none is condensed)."""
    y = ds["attention_overlap"].isel(layer=-1).mean("seed")
    est = [float(b) * (1.0 - float(v)) for b, v in zip(ds.beta.values, y.values, strict=True) if v > condensed]
    return float(np.median(est)) if est else float("nan")


def _qk_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    predicted, observed = predicted_critical_beta(ds), observed_critical_beta(ds, t["condensed"])
    last = ds["cosine"].isel(layer=-1).mean("seed")
    ratio = observed / predicted if np.isfinite(predicted) and np.isfinite(observed) else float("nan")
    f = t["critical_factor"]
    return [
        _claim(
            "Giorlandino & Goldt 2026",
            "Rank collapse below and entropy collapse above a critical query-key variance, at the value the theory "
            "predicts.",
            f"observed critical beta (median of beta (1 - Y) over points with last-layer participation Y > "
            f"{t['condensed']}) within a factor {f} of the predicted one",
            bool(np.isfinite(ratio) and 1 / f <= ratio <= f),
            ratio,
            f"predicted beta* = {predicted:.2f}, observed {observed:.2f}; last-layer cosine "
            f"{float(last.isel(beta=0)):.3f} at beta = {float(ds.beta[0]):g} and {float(last.isel(beta=-1)):.3f} at "
            f"beta = {float(ds.beta[-1]):g}",
        )
    ]


def _causal_claim(r: xr.DataArray, rates: dict, t: Mapping[str, Any]) -> dict[str, Any]:
    causal_rate, r2 = rates["causal"]
    causal_last = float(r.sel(mask="causal", norm="none").isel(layer=-1))
    return _claim(
        "Wu et al. 2024",
        "Pure masked (causal) attention still suffers from exponential collapse to a rank-one subspace.",
        f"causal, no LN: last-layer relative residual < {t['collapsed_residual']} and ln(residual) linear in depth "
        f"(R^2 > {t['linear_r2']})",
        causal_last < t["collapsed_residual"] and r2 > t["linear_r2"],
        causal_rate,
        f"decay rate {causal_rate:.3f} per layer (x{np.exp(-causal_rate):.3f}), R^2 {r2:.3f}, last "
        f"{causal_last:.1e}; full mask {rates['full'][0]:.3f} per layer",
    )


def _sliding_claim(rates: dict) -> dict[str, Any]:
    slide, full, causal = rates["sliding"][0], rates["full"][0], rates["causal"][0]
    return _claim(
        "Wu et al. 2024",
        "Sparse or local masked attention can provably slow down the collapse rate.",
        "sliding-window decay rate (no LN) below the full and causal ones",
        slide < min(full, causal),
        slide,
        f"per-layer decay rates: full {full:.3f}, causal {causal:.3f}, sliding {slide:.4f}",
    )


def _layernorm_claim(ds: xr.Dataset, r: xr.DataArray, t: Mapping[str, Any]) -> dict[str, Any]:
    ln_last, plain_last = r.sel(norm="post_ln").isel(layer=-1), r.sel(norm="none").isel(layer=-1)
    c = t["collapsed_residual"]
    return _claim(
        "Wu et al. 2024",
        "With LayerNorm, a general class of sequences may not converge to a rank-one subspace (for suitable "
        "value matrices); LayerNorm can prevent the collapse.",
        f"with random Gaussian value matrices and post-LN, some mask keeps the last-layer relative residual "
        f"> {c} where the same mask without LN falls below it",
        any(float(ln_last.sel(mask=m)) > c and float(plain_last.sel(mask=m)) < c for m in ds.mask.values),
        float(ln_last.max()),
        "last-layer relative residual with LN: "
        + ", ".join(f"{m} {float(ln_last.sel(mask=m)):.1e}" for m in ds.mask.values)
        + "; without: "
        + ", ".join(f"{m} {float(plain_last.sel(mask=m)):.1e}" for m in ds.mask.values),
    )


def _mask_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not (_has(ds, "mask", "full", "causal") and _has(ds, "norm", "none")):
        return []
    r = ds["relative_residual"].mean("seed")
    rates = {m: decay_rate(r.sel(mask=m, norm="none").values, t["residual_floor"]) for m in ds.mask.values}
    out = [_causal_claim(r, rates, t)]
    if "sliding" in rates:
        out.append(_sliding_claim(rates))
    if _has(ds, "norm", "post_ln"):
        out.append(_layernorm_claim(ds, r, t))
    return out


def _gap_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not _has(ds, "centred", 0, 1) or ds.sizes.get("seq_len", 0) < 2:
        return []
    sr = ds["stable_rank"].isel(layer=-1).mean("seed")
    other = {d: ds[d].values[-1] for d in sr.dims if d not in ("seq_len", "centred")}
    if _has(ds, "residual", "skip"):
        other["residual"] = "skip"
    if _has(ds, "norm", "post_ln"):
        other["norm"] = "post_ln"
    s = sr.sel(other)
    plain, centred = s.sel(centred=0), s.sel(centred=1)
    t0, t1 = int(ds.seq_len[0]), int(ds.seq_len[-1])
    grows = float(centred.isel(seq_len=-1) / centred.isel(seq_len=0))
    plain_grows = float(plain.isel(seq_len=-1) / plain.isel(seq_len=0))
    g = t["stable_rank_growth"]
    return [
        _claim(
            "Nait Saada, Naderi & Tanner 2025",
            "Rank collapse in width: as the sequence length grows the spectral gap of the attention matrix drives "
            "the tokens to rank one; removing the uniform component, A - 11^T/T, cures it.",
            f"at {other}: the stable rank with A stays flat in T (growth < {g}x from T={t0} to T={t1}) while with "
            f"A - 11^T/T it grows by more than {g}x",
            plain_grows < g and grows > g,
            float(centred.isel(seq_len=-1) / plain.isel(seq_len=-1)),
            f"stable rank after {ds.sizes['layer'] - 1} layers, T={t0} -> T={t1}: A {float(plain.isel(seq_len=0)):.2f}"
            f" -> {float(plain.isel(seq_len=-1)):.2f}; A - 11^T/T {float(centred.isel(seq_len=0)):.2f} -> "
            f"{float(centred.isel(seq_len=-1)):.2f}",
        )
    ]


CHECKS = {"depth": _depth_claims, "qk_variance": _qk_claims, "masks": _mask_claims, "sequence_length": _gap_claims}


#: the grid dimensions each sweep's claims read; any other swept dimension is held at one value (input: the
#: Gaussian tokens, the papers' setting; otherwise the first value of the grid)
USES = {
    "depth": ("residual", "norm", "beta", "width", "seq_len"),
    "qk_variance": ("beta",),
    "masks": ("mask", "norm"),
    "sequence_length": ("seq_len", "centred", "residual", "norm"),
}


def held(ds: xr.Dataset, keep: tuple[str, ...]) -> xr.Dataset:
    """``ds`` at one value of every swept dimension outside ``keep`` (and layer, seed): Gaussian input where the
    input was swept, else the grid's first value."""
    sel = {}
    for dim in ds.dims:
        if dim in (*keep, "layer", "seed"):
            continue
        values = list(ds[dim].values)
        sel[dim] = "gaussian" if dim == "input" and "gaussian" in values else values[0]
    return ds.sel(sel)


def claims(results: Mapping[str, xr.Dataset], thresholds: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every claim that the given sweep results (by sweep name) can test, by sweep; ``thresholds``: config
    ``report.propagation``."""
    return {
        name: check(held(results[name], USES[name]), thresholds) for name, check in CHECKS.items() if name in results
    }
