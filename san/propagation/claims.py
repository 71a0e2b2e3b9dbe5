"""Published statements about collapse at initialisation, checked on the propagation sweeps (torch-free).

One claim per statement, worded as the paper words it, with its kind (universal, existential, quantitative or
observation) and source, the test that fits the kind, ``holds`` (True / False; None, verdict "not judged", when the
sweep lacks what the test needs, e.g. a single size for a trend or a single seed for a spread) and the measured
number. Every threshold comes from
config ``report.propagation`` (the argument ``t`` below) and is stated in each claim's ``test``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core.storage import read_structured_attr
from san.propagation import theory
from san.propagation.spec import CONSTRUCTION_NORMS, PARAMS

#: the verdict strings of a claim: ``holds`` True, False, None
VERDICTS = {True: "holds", False: "fails", None: "not judged"}


def _claim(
    paper: str,
    statement: str,
    kind: str,
    source: str,
    test: str,
    holds: bool | None,
    value: float,
    detail: str,
) -> dict[str, Any]:
    """One claim: the paper's statement, its ``kind`` (universal: refuted by one counterexample; existential: shown
    by a construction, never refuted by a random draw; quantitative: compared with the theory's prediction of the same
    statistic at the same finite size; observation: a figure's reading, replicated), where the paper states it
    (``source``), the test that fits the kind, the verdict (``holds`` None and ``verdict`` "not judged" when the test
    judges nothing), the measured number and the numbers behind the verdict."""
    holds = None if holds is None else bool(holds)
    return {
        "paper": paper,
        "statement": statement,
        "kind": kind,
        "source": source,
        "test": test,
        "holds": holds,
        "verdict": VERDICTS[holds],
        "value": float(value),
        "detail": detail,
    }


def _spread(values: np.ndarray) -> float:
    """Standard error of the mean over seeds (0 for a single seed: no spread to widen the margin)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0


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


NOCI, GG, WU = "Noci et al. 2022", "Giorlandino & Goldt 2026", "Wu et al. 2024"


def _noci_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """Universal over model depths and the depth sweep's grid: every 1/sqrt(L) point keeps its last-layer cosine,
    mean plus ``spread_sigmas`` standard errors over seeds, below ``collapsed_cosine``, at every configured model
    depth (``final_cosine``; the sweep's own depth where it has no other)."""
    if "final_cosine" in ds:
        inv = ds["final_cosine"].sel(residual="inv_sqrt_depth")
        depths = [int(d) for d in ds.model_depth.values]
    else:
        inv = ds["cosine"].isel(layer=-1).sel(residual="inv_sqrt_depth")
        depths = [int(ds.sizes["layer"] - 1)]
    k, n = t["spread_sigmas"], inv.sizes["seed"]
    upper = inv.mean("seed") + (k * inv.std("seed", ddof=1) / np.sqrt(n) if n > 1 else 0.0)
    worst = float(upper.max())
    by_depth = (
        ", ".join(f"L = {d}: {float(upper.sel(model_depth=d).max()):.3f}" for d in depths)
        if "model_depth" in upper.dims
        else f"L = {depths[0]}: {worst:.3f}"
    )
    last = ds["cosine"].isel(layer=-1)
    skip = float(last.sel(residual="skip").mean("seed").min()) if _has(ds, "residual", "skip") else float("nan")
    return _claim(
        NOCI,
        "Scaling the residual branches by 1/sqrt(L) prevents rank collapse: tokens stay apart at any depth.",
        "universal",
        "abstract; depth-scaled residual branches",
        f"at every model depth L in {depths} and every grid point of the depth sweep, the 1/sqrt(L) runs' last-layer "
        f"cosine, mean + {k} standard errors over {n} seeds, < {t['collapsed_cosine']}",
        worst < t["collapsed_cosine"],
        worst,
        f"largest last-layer cosine of the 1/sqrt(L) branches (mean + {k} s.e.) by depth: {by_depth}; a = b = 1 at "
        f"L = {ds.sizes['layer'] - 1} at least {skip:.3f}",
    )


def own_start_gaps(ds: xr.Dataset, betas: list) -> xr.DataArray:
    """Largest |simulated cosine - G&G recursion| over layers, per residual scaling, beta, width, T and seed, with the
    recursion started from that seed's own measured input correlation (post-LN points; the stored ``theory_cosine``
    starts from the seeds' mean, which adds the input's sampling spread to every per-seed gap)."""
    fixed, residuals = fixed_params(ds), read_structured_attr(ds, "residuals")
    depth = int(ds.sizes["layer"] - 1)
    cos = ds["cosine"].sel(norm="post_ln", beta=betas)
    if "residual" not in cos.dims:
        cos = cos.expand_dims(residual=[fixed["residual"]])
    out = xr.full_like(cos.isel(layer=0), np.nan)
    for res in cos.residual.values:
        r = residuals[str(res)]
        branch = depth**-0.5 if r["branch"] == ds.attrs.get("inv_sqrt_depth") else float(r["branch"])
        block = {"var_v": fixed["var_v"], "var_b": fixed["var_b"], "var_w": fixed["var_w"], "skip": float(r["skip"]),
                 "branch": branch, "mlp": bool(fixed["mlp"])}  # fmt: skip
        for beta in cos.beta.values:
            at = cos.sel(residual=res, beta=beta)
            curves = np.apply_along_axis(
                lambda c, b=float(beta), kw=block: np.abs(c - theory.recursion(c[0], b, depth, **kw)).max(),
                at.get_axis_num("layer"),
                at.values,
            )
            out.loc[{"residual": res, "beta": beta}] = curves
    return out


def _agreement_claim(ds: xr.Dataset, sub: list, t: Mapping[str, Any]) -> dict[str, Any]:
    """A limit statement judged as a trend: the largest subcritical gap to the recursion (over residual scalings,
    beta and layers; per seed, the recursion from the seed's own input correlation) shrinks from the smallest (d, T)
    to the largest by more than ``spread_sigmas`` standard errors over seeds. The gap at the largest size is reported
    beside ``agreement`` (the project's reading of "a few hundredths", not a threshold of the paper)."""
    g = own_start_gaps(ds, sub)
    g = g.max([d for d in g.dims if d not in ("width", "seq_len", "seed")])
    small, large = g.isel(width=0, seq_len=0), g.isel(width=-1, seq_len=-1)
    drop = (small - large).values
    mean, se, k = float(drop.mean()), _spread(drop), t["spread_sigmas"]
    judged = ds.sizes["width"] > 1 or ds.sizes["seq_len"] > 1
    at_large = float(large.mean())
    d0, d1, t0, t1 = ds.width.values[0], ds.width.values[-1], ds.seq_len.values[0], ds.seq_len.values[-1]
    return _claim(
        GG,
        "The recursion for the token correlation through post-LN blocks is exact in the limit of infinite "
        "width and sequence length.",
        "quantitative (a limit)",
        "Result 1, Fig. 1 (their setting: d = 720, T up to 512, L = 50, beta 0.5 and 3)",
        f"largest gap to the recursion for beta < {t['subcritical_fraction']} beta_c(p0) shrinks from (d, T) = "
        f"({d0}, {t0}) to ({d1}, {t1}) by more than {k} standard errors over seeds; the gap at the largest size is "
        f"shown beside {t['agreement']} (our reading of 'a few hundredths', not the paper's threshold)",
        (mean > k * se) if judged else None,
        mean,
        f"gap {float(small.mean()):.3f} at ({d0}, {t0}) -> {at_large:.3f} at ({d1}, {t1}): drop {mean:+.3f} ± {se:.3f} "
        f"(s.e.); at the largest size {'within' if at_large <= t['agreement'] else 'above'} {t['agreement']}",
    )


def _finite_size_claim(ds: xr.Dataset, sup: list, t: Mapping[str, Any]) -> dict[str, Any]:
    """T effect minus d effect on the gap, per seed; holds when its mean exceeds ``spread_sigmas`` standard errors
    of the seed spread (not judged with a single seed: no spread to judge by)."""
    g = depth_gaps_by_seed(ds).sel(norm="post_ln", beta=sup)
    g = g.mean([d for d in g.dims if d not in ("width", "seq_len", "seed")])
    d_eff = g.isel(width=0).mean("seq_len") - g.isel(width=-1).mean("seq_len")
    t_eff = g.isel(seq_len=0).mean("width") - g.isel(seq_len=-1).mean("width")
    diff = (t_eff - d_eff).values
    se, mean, k = _spread(diff), float(diff.mean()), t["spread_sigmas"]
    return _claim(
        f"{GG} (finite-size)",
        "Near and above the critical variance the gap to the infinite-size recursion is dominated by the "
        "sequence length T, not the width d.",
        "quantitative (finite size)",
        "Sec. 3 assumptions: the REM limit T -> infinity with logits scaled by sqrt(log T)",
        "drop of the mean gap from the smallest to the largest T exceeds the drop from the smallest to the largest d "
        f"by more than {k} standard errors over {diff.size} seeds (beta >= beta_c(p0))",
        None if diff.size < 2 else mean > k * se,
        mean,
        f"gap drop with T ({ds.seq_len.values[0]}->{ds.seq_len.values[-1]}): {float(t_eff.mean()):+.3f}; "
        f"with d ({ds.width.values[0]}->{ds.width.values[-1]}): {float(d_eff.mean()):+.3f}; difference "
        f"{mean:+.3f} ± {se:.3f} (standard error over seeds)",
    )


def _depth_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = [_noci_claim(ds, t)] if _has(ds, "residual", "inv_sqrt_depth") else []
    if not (_has(ds, "norm", "post_ln") and all(d in ds.dims for d in ("beta", "width", "seq_len"))):
        return out
    beta_c = theory.critical_beta(float(ds["cosine"].isel(layer=0).mean()))
    sub = [b for b in ds.beta.values if b < t["subcritical_fraction"] * beta_c]
    sup = [b for b in ds.beta.values if b >= beta_c]
    if sub:
        out.append(_agreement_claim(ds, sub, t))
    if sup and ds.sizes["width"] > 1 and ds.sizes["seq_len"] > 1:
        out.append(_finite_size_claim(ds, sup, t))
    return out


def observed_critical_beta(ds: xr.Dataset, condensed: float) -> float:
    """The critical beta read off a qk_variance sweep (:func:`theory.critical_statistic` of the measured last-layer
    participation, mean over seeds)."""
    y = ds["attention_overlap"].isel(layer=-1).mean("seed")
    return theory.critical_statistic(ds.beta.values, y.values, condensed)


def _with_seq_len(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with a ``seq_len`` dimension (the fixed T where the sweep does not vary it)."""
    return ds if "seq_len" in ds.dims else ds.expand_dims(seq_len=[int({**PARAMS, **fixed_params(ds)}["seq_len"])])


def _critical_rows(ds: xr.Dataset, condensed: float) -> list[dict[str, float]]:
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


def critical_agreement(observed: float, predicted: float, tolerance: float) -> bool | None:
    """Whether ``observed`` lies within the relative ``tolerance`` of ``predicted`` (None when either is NaN)."""
    if not (np.isfinite(observed) and np.isfinite(predicted)):
        return None
    return bool(abs(observed / predicted - 1.0) <= tolerance)


def _critical_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    rows, tol = _critical_rows(ds, t["condensed"]), t["critical_tolerance"]
    verdicts = [critical_agreement(r["observed"], r["finite"], tol) for r in rows]
    judged = [v for v in verdicts if v is not None]
    controls = [critical_agreement(r["infinite"], r["finite"], tol) for r in rows]
    last = rows[-1]
    return _claim(
        GG,
        "Rank collapse below and entropy collapse above a critical query-key variance, at the value the theory "
        "predicts.",
        "quantitative",
        "Result 1 and the REM attention update (their theory_update_relu.py)",
        f"at every T, the simulation's critical beta (median of beta (1 - Y) over points with last-layer "
        f"participation Y > {t['condensed']}) within {tol:.0%} of the same statistic of the finite-T recursion (no "
        "fitted parameter; the finite-T correction is the T-key softmax in place of its REM limit)",
        all(judged) if judged else None,
        last["observed"] / last["finite"] if np.isfinite(last["finite"]) else float("nan"),
        "; ".join(
            f"T = {r['seq_len']}: observed {r['observed']:.2f} ± {_spread(r['per_seed']):.2f} (s.e.), finite-T "
            f"recursion {r['finite']:.2f}, infinite-T recursion {r['infinite']:.2f}"
            for r in rows
        )
        + f"; the infinite-T statistic {'fails' if not any(c for c in controls if c is not None) else 'passes'} the "
        f"same comparison; infinite-T onset at depth {ds.sizes['layer'] - 1}: beta* = {last['beta_star']:.2f}",
    )


def _per_layer_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """Each layer's participation against the finite-T prediction at that layer's measured input correlation: the
    gap of the seed means, less ``spread_sigmas`` standard errors of the measured participation, at most
    ``overlap_tolerance`` at every T, beta and layer."""
    y = ds["attention_overlap"].isel(layer=slice(1, None))
    mean, k = y.mean("seed"), t["spread_sigmas"]
    se = (y.std("seed", ddof=1) / np.sqrt(y.sizes["seed"])).fillna(0.0) if y.sizes["seed"] > 1 else 0.0 * mean
    gap = abs(mean - ds["finite_overlap"].isel(layer=slice(1, None)).mean("seed"))
    gap_inf = abs(mean - ds["theory_overlap"].isel(layer=slice(1, None)).mean("seed"))
    beyond = (gap - k * se).clip(min=0.0)
    others = [d for d in gap.dims if d != "seq_len"]
    by_t, by_t_raw, by_t_inf = beyond.max(others), gap.max(others), gap_inf.max(others)
    worst, tol = float(by_t.max()), t["overlap_tolerance"]
    return _claim(
        GG,
        "The attention participation of each layer follows the REM update at that layer's input correlation.",
        "quantitative",
        "Sec. 3, the self-attention update from the Random Energy Model",
        f"at every T, beta and layer: |measured Y - finite-T prediction at the measured input correlation| (seed "
        f"means), less {k} standard errors over seeds, <= {tol}",
        worst <= tol if np.isfinite(worst) else None,
        worst,
        "; ".join(
            f"T = {int(s)}: largest gap {float(by_t_raw.sel(seq_len=s)):.3f} ({float(by_t.sel(seq_len=s)):.3f} beyond "
            f"the spread; to the REM limit {float(by_t_inf.sel(seq_len=s)):.3f})"
            for s in ds.seq_len.values
        ),
    )


def _trend_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """The gap to the infinite-T REM participation shrinks as T grows (per seed, smallest against largest T)."""
    y = ds["attention_overlap"].isel(layer=slice(1, None))
    gap = abs(y - ds["theory_overlap"].isel(layer=slice(1, None)))
    per_seed = gap.mean([d for d in gap.dims if d not in ("seq_len", "seed")])
    drop = (per_seed.isel(seq_len=0) - per_seed.isel(seq_len=-1)).values
    mean, se, k = float(drop.mean()), _spread(drop), t["spread_sigmas"]
    t0, t1 = int(ds.seq_len.values[0]), int(ds.seq_len.values[-1])
    return _claim(
        f"{GG} (finite-size)",
        "The REM update is the T -> infinity limit: the participation approaches it as the sequence length grows.",
        "quantitative (a limit)",
        "Sec. 3 assumptions: the REM limit T -> infinity",
        f"mean |measured Y - REM limit| over beta and layers drops from T = {t0} to T = {t1} by more than {k} standard "
        f"errors over {drop.size} seeds",
        (mean > k * se) if ds.sizes["seq_len"] > 1 else None,
        mean,
        ", ".join(f"T = {int(s)}: {float(per_seed.sel(seq_len=s).mean()):.3f}" for s in ds.seq_len.values)
        + f"; drop {mean:+.3f} ± {se:.3f} (s.e.)",
    )


def _qk_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    ds = _with_seq_len(ds)
    if "finite_recursion_overlap" not in ds:
        return []
    return [_critical_claim(ds, t), _per_layer_claim(ds, t), _trend_claim(ds, t)]


def _rates_by_seed(r: xr.DataArray, mask: str, floor: float) -> np.ndarray:
    """Per-seed decay rate (no LN) of one mask's relative residual."""
    return np.array([decay_rate(r.sel(mask=mask, seed=s).values, floor)[0] for s in r.seed.values])


def _causal_claim(r: xr.DataArray, t: Mapping[str, Any]) -> dict[str, Any]:
    """Universal: every seed's causal run collapses below ``collapsed_residual`` with a straight-line log decay."""
    causal = r.sel(mask="causal")
    fits = [decay_rate(causal.sel(seed=s).values, t["residual_floor"]) for s in r.seed.values]
    lasts = causal.isel(layer=-1).values
    worst_last, worst_r2 = float(np.nanmax(lasts)), min(f[1] for f in fits)
    rate = float(np.mean([f[0] for f in fits]))
    return _claim(
        WU,
        "Pure masked (causal) attention still suffers from exponential collapse to a rank-one subspace.",
        "universal",
        "abstract; Fig. 2 (pure attention)",
        f"every seed (a counterexample refutes): causal, no LN, last-layer relative residual < "
        f"{t['collapsed_residual']} and ln(residual) linear in depth (R^2 > {t['linear_r2']})",
        worst_last < t["collapsed_residual"] and worst_r2 > t["linear_r2"],
        rate,
        f"decay rate {rate:.3f} per layer (x{np.exp(-rate):.3f}), smallest R^2 {worst_r2:.3f}, largest last "
        f"{worst_last:.1e} over {r.sizes['seed']} seeds",
    )


#: each local mask against the global mask of the same direction
LOCAL_PAIRS = (("sliding", "full"), ("sliding_causal", "causal"))


def _local_claim(r: xr.DataArray, t: Mapping[str, Any]) -> dict[str, Any] | None:
    pairs = [(lo, gl) for lo, gl in LOCAL_PAIRS if lo in r.mask.values and gl in r.mask.values]
    if not pairs:
        return None
    k, margin, floor = t["spread_sigmas"], t["rate_margin"], t["residual_floor"]
    parts, oks = [], []
    for lo, gl in pairs:
        diff = _rates_by_seed(r, gl, floor) - _rates_by_seed(r, lo, floor)
        mean, se = float(diff.mean()), _spread(diff)
        oks.append(mean - k * se > margin)
        rate_lo, rate_gl = float(_rates_by_seed(r, lo, floor).mean()), float(_rates_by_seed(r, gl, floor).mean())
        parts.append(f"{lo} {rate_lo:.4f} vs {gl} {rate_gl:.3f} per layer (slower by {mean:.3f} ± {se:.3f})")
    return _claim(
        WU,
        "Sparse or local masked attention can provably slow down the collapse rate.",
        "quantitative (comparison)",
        "abstract; Fig. 2 (sliding and one-directional sliding windows)",
        f"each local mask's decay rate (no LN) below its global counterpart's (sliding vs full, one-directional "
        f"sliding vs causal) by more than {margin} per layer plus {k} standard errors over seeds",
        all(oks),
        min(float((_rates_by_seed(r, gl, floor) - _rates_by_seed(r, lo, floor)).mean()) for lo, gl in pairs),
        "; ".join(parts),
    )


def _fig2_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """The Fig. 2 reading at random init, on the paper's mu: with LayerNorm mu(X_L) stays above ``mu_kept`` of
    mu(X_0) for every mask; beside it the scale-free relative residual, which tells rank collapse from shrinking."""
    kept = (ds["mu"].isel(layer=-1) / ds["mu"].isel(layer=0)).min("seed")  # every seed
    rel = ds["relative_residual"].mean("seed").isel(layer=-1)
    ln, plain = kept.sel(norm="post_ln"), kept.sel(norm="none")
    masks = list(ds.mask.values)
    return _claim(
        WU,
        "With LayerNorm added to pure attention, mu(X(t)) no longer converges to zero in randomly initialised models.",
        "observation",
        "Fig. 2 (randomly initialised, log-log)",
        f"with post-LN, mu(X_L) / mu(X_0) > {t['mu_kept']} for every mask and seed (mu absolute; the relative "
        "residual beside it is scale-free)",
        all(float(ln.sel(mask=m)) > t["mu_kept"] for m in masks),
        float(ln.min()),
        "mu(X_L)/mu(X_0) with LN: "
        + ", ".join(f"{m} {float(ln.sel(mask=m)):.1e}" for m in masks)
        + "; without: "
        + ", ".join(f"{m} {float(plain.sel(mask=m)):.1e}" for m in masks)
        + "; relative residual with LN: "
        + ", ".join(f"{m} {float(rel.sel(norm='post_ln', mask=m)):.1e}" for m in masks),
    )


def staying_fraction(ratio_last: np.ndarray, rank2: float) -> float:
    """Fraction of the draws whose last-layer ratio exceeds ``rank2`` (a NaN counts as collapsed)."""
    r = np.nan_to_num(np.asarray(ratio_last, dtype=float), nan=0.0)
    return float((r > rank2).mean())


def construction_holds(ratio_last: np.ndarray, t: Mapping[str, Any]) -> bool:
    """Whether at least ``stay_fraction`` of the inputs near the construction's equilibrium keep a centred rank-2
    ratio above ``rank2_ratio`` at the last layer."""
    return staying_fraction(ratio_last, t["rank2_ratio"]) >= t["stay_fraction"]


def _layernorm_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    last = ds["construction_ratio"].isel(layer=-1)
    frac = {n: staying_fraction(last.sel(construction_norm=n).values, t["rank2_ratio"]) for n in
            CONSTRUCTION_NORMS}  # fmt: skip
    ok = {n: construction_holds(last.sel(construction_norm=n).values, t) for n in CONSTRUCTION_NORMS}
    built = read_structured_attr(ds, "construction")
    return _claim(
        WU,
        "With LayerNorm, for suitable value matrices, a general class of sequences does not converge to a rank-one "
        "subspace; without LayerNorm it does.",
        "existential",
        "abstract and the LayerNorm counterexamples (a construction of this project: causal uniform attention, "
        "V = [[1, 0], [-1, 1/2]] on a plane, see san/propagation/construction.py)",
        f"{built['draws']} inputs within {built['perturbation']} of the rank-2 equilibrium ({built['tokens']} tokens, "
        f"d = {built['width']}), {ds.sizes['layer'] - 1} layers: at least {t['stay_fraction']:.0%} keep s2/s1 of the "
        f"centred tokens > {t['rank2_ratio']} with the sphere normalisation and with LayerNorm, fewer without",
        ok["sphere"] and ok["layer_norm"] and not ok["none"],
        frac["layer_norm"],
        f"equilibrium s2/s1 {ds.attrs['construction_equilibrium_ratio']:.3f}; staying rank 2: sphere "
        f"{frac['sphere']:.0%}, LayerNorm {frac['layer_norm']:.0%}, none {frac['none']:.0%}; median last s2/s1 "
        + ", ".join(f"{n} {float(np.nanmedian(last.sel(construction_norm=n))):.1e}" for n in CONSTRUCTION_NORMS),
    )


def _mask_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    if _has(ds, "mask", "full", "causal") and _has(ds, "norm", "none"):
        r = ds["relative_residual"].sel(norm="none")
        out.append(_causal_claim(r, t))
        local = _local_claim(r, t)
        if local is not None:
            out.append(local)
        if _has(ds, "norm", "post_ln") and "mu" in ds:
            out.append(_fig2_claim(ds, t))
    if "construction_ratio" in ds:
        out.append(_layernorm_claim(ds, t))
    return out


def _gap_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Stable-rank growth from the shortest to the longest T, per seed: with A its mean plus ``spread_sigmas``
    standard errors stays below ``stable_rank_growth``, with A - 11^T/T its mean minus them exceeds it."""
    if not _has(ds, "centred", 0, 1) or ds.sizes.get("seq_len", 0) < 2:
        return []
    sr = ds["stable_rank"].isel(layer=-1)
    other = {d: ds[d].values[-1] for d in sr.dims if d not in ("seq_len", "centred", "seed")}
    if _has(ds, "residual", "skip"):
        other["residual"] = "skip"
    if _has(ds, "norm", "post_ln"):
        other["norm"] = "post_ln"
    s = sr.sel(other)
    growth = s.isel(seq_len=-1) / s.isel(seq_len=0)  # (centred, seed)
    k, g = t["spread_sigmas"], t["stable_rank_growth"]
    plain, centred = growth.sel(centred=0).values, growth.sel(centred=1).values
    plain_hi, centred_lo = plain.mean() + k * _spread(plain), centred.mean() - k * _spread(centred)
    mean = s.mean("seed")
    t0, t1 = int(ds.seq_len[0]), int(ds.seq_len[-1])
    return [
        _claim(
            "Nait Saada, Naderi & Tanner 2025",
            "Rank collapse in width: as the sequence length grows the spectral gap of the attention matrix drives "
            "the tokens to rank one; removing the uniform component, A - 11^T/T, cures it.",
            "quantitative (comparison)",
            "abstract; their configs.py and stable_ranks.py (isometric input, d = T)",
            f"at {other}: the stable rank's growth from T={t0} to T={t1}, over seeds, with A stays below {g}x (mean + "
            f"{k} s.e.) while with A - 11^T/T it exceeds {g}x (mean - {k} s.e.)",
            bool(plain_hi < g and centred_lo > g),
            float(mean.sel(centred=1).isel(seq_len=-1) / mean.sel(centred=0).isel(seq_len=-1)),
            f"stable rank after {ds.sizes['layer'] - 1} layers, T={t0} -> T={t1}: A "
            f"{float(mean.sel(centred=0).isel(seq_len=0)):.2f} -> {float(mean.sel(centred=0).isel(seq_len=-1)):.2f} "
            f"(growth {plain.mean():.2f} ± {_spread(plain):.2f}); A - 11^T/T "
            f"{float(mean.sel(centred=1).isel(seq_len=0)):.2f} -> {float(mean.sel(centred=1).isel(seq_len=-1)):.2f} "
            f"(growth {centred.mean():.2f} ± {_spread(centred):.2f})",
        )
    ]


CHECKS = {"depth": _depth_claims, "qk_variance": _qk_claims, "masks": _mask_claims, "sequence_length": _gap_claims}


#: the grid dimensions each sweep's claims read; any other swept dimension is held at one value (input: the
#: Gaussian tokens, the papers' setting; otherwise the first value of the grid)
USES = {
    "depth": ("residual", "norm", "beta", "width", "seq_len", "model_depth"),
    "qk_variance": ("beta", "seq_len"),
    "masks": ("mask", "norm", "construction_norm", "draw"),
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
