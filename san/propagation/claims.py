"""Published statements about collapse at initialisation, checked on the propagation sweeps (torch-free).

One verdict row (:func:`san.core.verdicts.row`) per statement, worded as the paper words it, with its kind
(scientific, or demonstration for a construction), its form (universal, existential, quantitative or observation),
its source, the test that fits the form, the verdict (not judged when the sweep lacks what the test needs, e.g. a
single size or a single seed), the measured number, its margin and the numbers behind the verdict. Every scientific
row carries its positive control: the same test against a deliberately wrong reference (an offset recursion or
prediction, a mask or residual of the other kind, the effects with alternating signs) that must fail. Every
threshold and every control's setting comes from config ``report.propagation`` (the argument ``t`` below) and is
stated in each row's ``test``; comparisons follow the one spread and margin rule of :mod:`san.core.verdicts`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core import verdicts as V
from san.core.config import ConfigError
from san.core.storage import read_structured_attr
from san.propagation import theory
from san.propagation.results import fixed_params, predicted_critical_beta
from san.propagation.spec import CONSTRUCTION_NORMS, PARAMS

NOCI, GG, WU = "Noci et al. 2022", "Giorlandino & Goldt 2026", "Wu et al. 2024"
NAIT_SAADA = "Nait Saada, Naderi & Tanner 2025"

#: offsets (of a correlation or a participation) scanned for a row's power: the largest at which its test passes
OFFSETS = np.round(np.arange(0.0, 1.0001, 0.005), 3)
#: relative offsets of a predicted statistic scanned for the critical variance's power
RELATIVE_OFFSETS = np.round(np.arange(0.0, 3.0001, 0.01), 2)


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of ``report.propagation`` the schema cannot express: every control's offset must make its
    reference wrong by more than the tolerance it is judged against (else a right answer could not be told from
    the control); raises :class:`~san.core.config.ConfigError` naming the key."""
    t = report["propagation"]
    for offset, tolerance in (("recursion_offset", "agreement"), ("overlap_offset", "overlap_tolerance")):
        if t[offset] <= t[tolerance]:
            raise ConfigError(
                f"report.propagation.{offset} = {t[offset]} must exceed report.propagation.{tolerance} = "
                f"{t[tolerance]}: a control offset within the tolerance is not a wrong reference"
            )


def _row(key: str, paper: str, statement: str, form: str, source: str, **kwargs: Any) -> dict[str, Any]:
    """A scientific row of this wing (:func:`san.core.verdicts.row`), its source naming the paper."""
    kind = kwargs.pop("kind", V.SCIENTIFIC)
    return V.row(key, f"{paper}: {statement}", kind=kind, form=form, source=f"{paper}, {source}", **kwargs)


def _se(values: np.ndarray) -> float:
    """Standard error over seeds (:func:`san.core.verdicts.spread`)."""
    return V.spread(np.asarray(values, dtype=float).ravel())[1]


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


def depth_gaps_by_seed(ds: xr.Dataset) -> xr.DataArray:
    """Largest |simulated cosine - G&G recursion| over layers, per grid point and seed (post-LN points only)."""
    gap = abs(ds["cosine"] - ds["theory_cosine"]).max("layer")
    return gap.where(np.isfinite(ds["theory_cosine"]).any("layer"))


def alternating(values: np.ndarray) -> np.ndarray:
    """Per-seed effects with alternating signs (+, -, +, ...): a null of no effect with the same spread, the
    shuffled control of a comparison over seeds."""
    v = np.asarray(values, dtype=float).ravel()
    return v * np.where(np.arange(v.size) % 2 == 0, 1.0, -1.0)


def _noci_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """Universal over model depths and the depth sweep's grid: every 1/sqrt(L) point keeps its last-layer cosine,
    mean plus ``sigmas`` standard errors over seeds, below ``collapsed_cosine``, at every configured model depth
    (``final_cosine``; the sweep's own depth where it has no other). Positive control: the unscaled residual
    (a = b = 1) through the same test must fail; the detail counts the grid points where each collapses."""
    last = ds["final_cosine"] if "final_cosine" in ds else ds["cosine"].isel(layer=-1)
    depths = [int(d) for d in ds.model_depth.values] if "model_depth" in last.dims else [int(ds.sizes["layer"] - 1)]
    k, limit = t["sigmas"], t["collapsed_cosine"]

    def upper(residual: str) -> xr.DataArray:
        c = last.sel(residual=residual)
        n = c.sizes["seed"]
        return c.mean("seed") + (k * c.std("seed", ddof=1) / np.sqrt(n) if n > 1 else 0.0)

    inv = upper("inv_sqrt_depth")
    worst = float(inv.max())
    m = V.margin(worst, 0.0, k, limit, above=False)
    by_depth = (
        ", ".join(f"L = {d}: {float(inv.sel(model_depth=d).max()):.3f}" for d in depths)
        if "model_depth" in inv.dims
        else f"L = {depths[0]}: {worst:.3f}"
    )
    collapsed, points = int((inv >= limit).sum()), int(np.isfinite(inv).sum())
    if _has(ds, "residual", "skip"):
        plain = upper("skip")
        if not np.isfinite(plain).any():  # the unscaled residual runs only at the sweep's own depth
            last = ds["cosine"].isel(layer=-1)
            plain = upper("skip")
        plain_points = int(np.isfinite(plain).sum())
        plain_collapsed = int((plain >= limit).sum())
        ctrl = V.control("the unscaled residual (a = b = 1) in place of 1/sqrt(L)", None,
                         V.judged(plain_collapsed == 0, plain_points), value=float(plain.max()))  # fmt: skip
        control_detail = f"; the unscaled residual (a = b = 1) collapses at {plain_collapsed} of {plain_points}"
    else:
        ctrl = V.control("the unscaled residual (a = b = 1) in place of 1/sqrt(L)", None, None)
        control_detail = "; no unscaled residual in this sweep (control not judged)"
    return _row(
        "depth.noci",
        NOCI,
        "Scaling the residual branches by 1/sqrt(L) prevents rank collapse: tokens stay apart at any depth.",
        V.UNIVERSAL,
        "abstract; depth-scaled residual branches",
        holds=V.judged(m > 0, points),
        value=worst,
        margin=m,
        test=f"at every model depth L in {depths} and every grid point of the depth sweep, the 1/sqrt(L) runs' "
        f"last-layer cosine, mean + {k} standard errors over seeds, < {limit}",
        detail=f"1/sqrt(L) collapses at {collapsed} of {points} grid points{control_detail}; largest last-layer "
        f"cosine of the 1/sqrt(L) branches (mean + {k} s.e.) by depth: {by_depth}",
        positive_control=ctrl,
    )


def own_start_differences(ds: xr.Dataset, betas: list) -> xr.DataArray:
    """Simulated cosine minus the G&G recursion, per residual scaling, beta, width, T, seed and layer, with the
    recursion started from that seed's own measured input correlation (post-LN points; the stored
    ``theory_cosine`` starts from the seeds' mean, which adds the input's sampling spread to every per-seed gap)."""
    fixed, residuals = fixed_params(ds), read_structured_attr(ds, "residuals")
    depth = int(ds.sizes["layer"] - 1)
    cos = ds["cosine"].sel(norm="post_ln", beta=betas)
    if "residual" not in cos.dims:
        cos = cos.expand_dims(residual=[fixed["residual"]])
    out = xr.full_like(cos, np.nan)
    for res in cos.residual.values:
        r = residuals[str(res)]
        branch = depth**-0.5 if r["branch"] == ds.attrs.get("inv_sqrt_depth") else float(r["branch"])
        block = {"var_v": fixed["var_v"], "var_b": fixed["var_b"], "var_w": fixed["var_w"], "skip": float(r["skip"]),
                 "branch": branch, "mlp": bool(fixed["mlp"])}  # fmt: skip
        for beta in cos.beta.values:
            at = cos.sel(residual=res, beta=beta)
            out.loc[{"residual": res, "beta": beta}] = np.apply_along_axis(
                lambda c, b=float(beta), kw=block: c - theory.recursion(c[0], b, depth, **kw),
                at.get_axis_num("layer"),
                at.values,
            )
    return out


def _mean_curve_gap(diff: xr.DataArray, offset: float, sigmas: float) -> tuple[float, float]:
    """At one size (``diff`` over residual, beta, layer and seed): the largest gap of the seed-mean curve to the
    recursion shifted by ``offset``, each point's gap plus ``sigmas`` standard errors over seeds (the one margin
    rule; averaging the seeds first leaves out the per-seed sampling noise that a per-seed largest gap adds), over
    residual scalings, beta and the layers after the input; with the gap without the spread at that point."""
    later = diff.isel(layer=slice(1, None))  # layer 0: the recursion starts at the measured input
    n = later.sizes["seed"]
    se = later.std("seed", ddof=1) / np.sqrt(n) if n > 1 else 0.0 * later.isel(seed=0)
    gap = abs(later.mean("seed") - offset)
    upper = gap + sigmas * se
    at = upper.argmax(...)
    return float(upper[at]), float(gap[at])


def _agreement_claim(ds: xr.Dataset, sub: list, t: Mapping[str, Any]) -> dict[str, Any]:
    """The claim "exact in the limit", judged at the largest (d, T) against a tolerance set before the run: the
    largest subcritical gap of the seed-mean correlation to the recursion (per seed, the recursion from the seed's
    own input correlation; over residual scalings, beta and layers), each point's gap plus ``sigmas`` standard
    errors over seeds, at most ``agreement`` (the project's reading of "a few hundredths"). Positive control: the
    recursion offset by ``recursion_offset`` must fail the same test; the power is the largest offset at which it
    still passes. Beside it: the same gap at the smallest size, and the mean over seeds of each seed's own largest
    gap (which adds the seed's sampling noise); a trend alone shrinks whatever theory it is compared with."""
    diff = own_start_differences(ds, sub)
    k, tol, offset = t["sigmas"], t["agreement"], t["recursion_offset"]
    large, small = diff.isel(width=-1, seq_len=-1), diff.isel(width=0, seq_len=0)

    def margin(shift: float) -> float:
        return V.margin(_mean_curve_gap(large, shift, k)[0], 0.0, 0.0, tol, above=False)

    upper, at_large = _mean_curve_gap(large, 0.0, k)
    m = margin(0.0)
    per_seed = float(abs(large.isel(layer=slice(1, None))).max([d for d in large.dims if d != "seed"]).mean())
    d0, d1, t0, t1 = ds.width.values[0], ds.width.values[-1], ds.seq_len.values[0], ds.seq_len.values[-1]
    power = V.largest_passing(lambda s: V.clears(margin(s)), OFFSETS)
    control_upper = _mean_curve_gap(large, offset, k)[0]
    return _row(
        "depth.recursion_exact_in_limit",
        GG,
        "The recursion for the token correlation through post-LN blocks is exact in the limit of infinite "
        "width and sequence length.",
        V.QUANTITATIVE,
        "Result 1, Fig. 1 (their setting: d = 720, T up to 512, L = 50, beta 0.5 and 3)",
        holds=V.clears(m),
        value=at_large,
        margin=m,
        test=f"at the largest size (d, T) = ({d1}, {t1}): the largest gap of the seed-mean correlation to the "
        f"recursion for beta < {t['subcritical_fraction']} beta_c(p0), plus {k} standard errors over seeds, at most "
        f"{tol} (our reading of 'a few hundredths', set before the run)",
        detail=f"gap {at_large:.3f} ({upper:.3f} with the spread) at ({d1}, {t1}), "
        f"{_mean_curve_gap(small, 0.0, k)[1]:.3f} at ({d0}, {t0}); each seed's own largest gap at ({d1}, {t1}): "
        f"{per_seed:.3f} on average; against the recursion + {offset}: {control_upper:.3f}; passes up to an offset "
        "of " + ("none" if power is None else f"{power:g}"),
        positive_control=V.control(f"the recursion offset by +{offset}", offset, V.clears(tol - control_upper),
                                   power=power, value=control_upper),
    )  # fmt: skip


def _finite_size_claim(ds: xr.Dataset, sup: list, t: Mapping[str, Any]) -> dict[str, Any]:
    """T effect minus d effect on the gap, per seed; holds when its mean exceeds ``sigmas`` standard errors of the
    seed spread (not judged with a single seed: no spread to judge by). Positive control: the per-seed effects with
    alternating signs (a null of no effect with the same spread) must fail."""
    g = depth_gaps_by_seed(ds).sel(norm="post_ln", beta=sup)
    g = g.mean([d for d in g.dims if d not in ("width", "seq_len", "seed")])
    d_eff = g.isel(width=0).mean("seq_len") - g.isel(width=-1).mean("seq_len")
    t_eff = g.isel(seq_len=0).mean("width") - g.isel(seq_len=-1).mean("width")
    diff = (t_eff - d_eff).values
    k = t["sigmas"]
    mean, se, n = V.spread(diff)
    m = V.margin(mean, se, k, 0.0, above=True)
    null_mean, null_se, _ = V.spread(alternating(diff))
    null = V.margin(null_mean, null_se, k, 0.0, above=True)
    return _row(
        "depth.finite_size_dominated_by_T",
        f"{GG} (finite-size)",
        "Near and above the critical variance the gap to the infinite-size recursion is dominated by the "
        "sequence length T, not the width d.",
        V.QUANTITATIVE,
        "Sec. 3 assumptions: the REM limit T -> infinity with logits scaled by sqrt(log T)",
        holds=V.judged(m > 0, n - 1),
        value=mean,
        margin=m,
        test="drop of the mean gap from the smallest to the largest T exceeds the drop from the smallest to the "
        f"largest d by more than {k} standard errors over {diff.size} seeds (beta >= beta_c(p0))",
        detail=f"gap drop with T ({ds.seq_len.values[0]}->{ds.seq_len.values[-1]}): {float(t_eff.mean()):+.3f}; "
        f"with d ({ds.width.values[0]}->{ds.width.values[-1]}): {float(d_eff.mean()):+.3f}; difference "
        f"{mean:+.3f} ± {se:.3f} (standard error over seeds); with alternating signs {null_mean:+.3f}",
        positive_control=V.control("the per-seed differences with alternating signs (no effect, same spread)",
                                   None, V.judged(null > 0, n - 1), value=null_mean),
    )  # fmt: skip


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


def _with_seq_len(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with a ``seq_len`` dimension (the fixed T where the sweep does not vary it)."""
    return ds if "seq_len" in ds.dims else ds.expand_dims(seq_len=[int({**PARAMS, **fixed_params(ds)}["seq_len"])])


def _critical_rows(ds: xr.Dataset, condensed: float) -> list[dict[str, Any]]:
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
    """The critical statistic within ``critical_tolerance`` of the finite-T recursion's at every T. Positive
    control: the infinite-T recursion's statistic in its place must fail; the power is the largest relative offset
    of the finite-T prediction (up or down) at which every T still passes."""
    rows, tol = _critical_rows(ds, t["condensed"]), t["critical_tolerance"]

    def check(reference: str, scale: float = 1.0) -> V.Verdict:
        verdicts = [critical_agreement(r["observed"], scale * r[reference], tol) for r in rows]
        judged = [v for v in verdicts if v is not None]
        return V.every(judged) if judged else None

    up = V.largest_passing(lambda s: check("finite", 1.0 + s), RELATIVE_OFFSETS)
    down = V.largest_passing(lambda s: check("finite", 1.0 - s), RELATIVE_OFFSETS[RELATIVE_OFFSETS < 1])
    power = None if up is None and down is None else max(up or 0.0, down or 0.0)
    last = rows[-1]
    ratio = last["observed"] / last["finite"] if np.isfinite(last["finite"]) else float("nan")
    return _row(
        "qk_variance.critical_variance",
        GG,
        "Rank collapse below and entropy collapse above a critical query-key variance, at the value the theory "
        "predicts.",
        V.QUANTITATIVE,
        "Result 1 and the REM attention update (their theory_update_relu.py)",
        holds=check("finite"),
        value=ratio,
        margin=tol - float(np.max([abs(r["observed"] / r["finite"] - 1.0) for r in rows])),
        test=f"at every T, the simulation's critical beta (median of beta (1 - Y) over points with last-layer "
        f"participation Y > {t['condensed']}) within {tol:.0%} of the same statistic of the finite-T recursion (no "
        "fitted parameter; the finite-T correction is the T-key softmax in place of its REM limit)",
        detail="; ".join(
            f"T = {r['seq_len']}: observed {r['observed']:.2f} ± {_se(r['per_seed']):.2f} (s.e.), finite-T "
            f"recursion {r['finite']:.2f}, infinite-T recursion {r['infinite']:.2f}"
            for r in rows
        )
        + f"; passes up to a relative offset of the prediction of {'none' if power is None else f'{power:g}'}; "
        f"infinite-T onset at depth {ds.sizes['layer'] - 1}: beta* = {last['beta_star']:.2f}",
        positive_control=V.control("the infinite-T recursion's statistic (the REM limit) in place of the finite-T "
                                   "one", None, check("infinite"), power=power),
    )  # fmt: skip


def _per_layer_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """Each layer's participation against the finite-T prediction at that layer's measured input correlation: the
    gap of the seed means, plus ``sigmas`` standard errors of the measured participation (more noise never helps),
    at most ``overlap_tolerance`` at every T, beta and layer. Positive control: the prediction offset by
    ``overlap_offset`` must fail; the power is the largest offset at which the test still passes."""
    y = ds["attention_overlap"].isel(layer=slice(1, None))
    mean, k, tol, offset = y.mean("seed"), t["sigmas"], t["overlap_tolerance"], t["overlap_offset"]
    se = (y.std("seed", ddof=1) / np.sqrt(y.sizes["seed"])).fillna(0.0) if y.sizes["seed"] > 1 else 0.0 * mean
    predicted = ds["finite_overlap"].isel(layer=slice(1, None)).mean("seed")
    others = [d for d in mean.dims if d != "seq_len"]

    def upper(shift: float) -> xr.DataArray:
        return (abs(mean - predicted - shift) + k * se).max(others)

    worst = float(upper(0.0).max())
    m = V.margin(worst, 0.0, k, tol, above=False)
    power = V.largest_passing(lambda s: V.clears(tol - float(upper(s).max())), OFFSETS)
    control_worst = float(upper(offset).max())
    raw = abs(mean - predicted).max(others)
    to_limit = abs(mean - ds["theory_overlap"].isel(layer=slice(1, None)).mean("seed")).max(others)
    return _row(
        "qk_variance.per_layer_rem",
        GG,
        "The attention participation of each layer follows the REM update at that layer's input correlation.",
        V.QUANTITATIVE,
        "Sec. 3, the self-attention update from the Random Energy Model",
        holds=V.clears(m) if np.isfinite(worst) else None,
        value=worst,
        margin=m,
        test=f"at every T, beta and layer: |measured Y - finite-T prediction at the measured input correlation| (seed "
        f"means), plus {k} standard errors over seeds, <= {tol}",
        detail="; ".join(
            f"T = {int(s)}: largest gap {float(raw.sel(seq_len=s)):.3f} ({float(upper(0.0).sel(seq_len=s)):.3f} with "
            f"the spread; to the REM limit {float(to_limit.sel(seq_len=s)):.3f})"
            for s in ds.seq_len.values
        )
        + f"; against the prediction + {offset}: {control_worst:.3f}; passes up to an offset of "
        + ("none" if power is None else f"{power:g}"),
        positive_control=V.control(f"the finite-T prediction offset by +{offset}", offset,
                                   V.clears(tol - control_worst), power=power, value=control_worst),
    )  # fmt: skip


def _trend_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """The gap to the infinite-T REM participation shrinks as T grows (per seed, smallest against largest T, by
    more than ``sigmas`` standard errors). Positive control: the REM limit offset by ``overlap_offset``, which a
    limit the participation approaches must not be approached by; the power is the largest offset at which the
    trend still passes."""
    y = ds["attention_overlap"].isel(layer=slice(1, None))
    limit = ds["theory_overlap"].isel(layer=slice(1, None))
    k, offset = t["sigmas"], t["overlap_offset"]
    judgeable = ds.sizes["seq_len"] > 1

    def drop(shift: float) -> tuple[float, float, float, xr.DataArray]:
        gap = abs(y - limit - shift)
        per_seed = gap.mean([d for d in gap.dims if d not in ("seq_len", "seed")])
        mean, se, _ = V.spread((per_seed.isel(seq_len=0) - per_seed.isel(seq_len=-1)).values)
        return V.margin(mean, se, k, 0.0, above=True), mean, se, per_seed

    m, mean, se, per_seed = drop(0.0)
    control_margin, control_mean, _, _ = drop(offset)
    power = V.largest_passing(lambda s: V.clears(drop(s)[0]), OFFSETS) if judgeable else None
    t0, t1 = int(ds.seq_len.values[0]), int(ds.seq_len.values[-1])
    return _row(
        "qk_variance.rem_limit_in_T",
        f"{GG} (finite-size)",
        "The REM update is the T -> infinity limit: the participation approaches it as the sequence length grows.",
        V.QUANTITATIVE,
        "Sec. 3 assumptions: the REM limit T -> infinity",
        holds=V.clears(m) if judgeable else None,
        value=mean,
        margin=m,
        test=f"mean |measured Y - REM limit| over beta and layers drops from T = {t0} to T = {t1} by more than {k} "
        f"standard errors over {per_seed.sizes['seed']} seeds",
        detail=", ".join(f"T = {int(s)}: {float(per_seed.sel(seq_len=s).mean()):.3f}" for s in ds.seq_len.values)
        + f"; drop {mean:+.3f} ± {se:.3f} (s.e.); to the REM limit + {offset}: drop {control_mean:+.3f}; passes up "
        "to an offset of " + ("none" if power is None else f"{power:g}"),
        positive_control=V.control(f"the REM limit offset by +{offset}", offset,
                                   V.clears(control_margin) if judgeable else None, power=power, value=control_mean),
    )  # fmt: skip


def _qk_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    ds = _with_seq_len(ds)
    if "finite_recursion_overlap" not in ds:
        return []
    return [_critical_claim(ds, t), _per_layer_claim(ds, t), _trend_claim(ds, t)]


def _rates_by_seed(r: xr.DataArray, mask: str, floor: float) -> np.ndarray:
    """Per-seed decay rate (no LN) of one mask's relative residual."""
    return np.array([decay_rate(r.sel(mask=mask, seed=s).values, floor)[0] for s in r.seed.values])


def _collapses(r: xr.DataArray, mask: str, t: Mapping[str, Any]) -> tuple[bool, float, float, float]:
    """Whether every seed of ``mask`` collapses below ``collapsed_residual`` with a straight-line log decay; with
    the mean rate, the smallest R^2 and the largest last residual."""
    curves = r.sel(mask=mask)
    fits = [decay_rate(curves.sel(seed=s).values, t["residual_floor"]) for s in r.seed.values]
    worst_last, worst_r2 = float(np.nanmax(curves.isel(layer=-1).values)), min(f[1] for f in fits)
    ok = worst_last < t["collapsed_residual"] and worst_r2 > t["linear_r2"]
    return ok, float(np.mean([f[0] for f in fits])), worst_r2, worst_last


def _causal_claim(r: xr.DataArray, t: Mapping[str, Any]) -> dict[str, Any]:
    """Universal: every seed's causal run collapses below ``collapsed_residual`` with a straight-line log decay.
    Positive control: a local mask (one-directional sliding window where swept, else sliding) through the same test
    must fail."""
    ok, rate, worst_r2, worst_last = _collapses(r, "causal", t)
    local = next((m for m in ("sliding_causal", "sliding") if m in r.mask.values), None)
    control_ok = _collapses(r, local, t)[0] if local else None
    return _row(
        "masks.causal_collapse",
        WU,
        "Pure masked (causal) attention still suffers from exponential collapse to a rank-one subspace.",
        V.UNIVERSAL,
        "abstract; Fig. 2 (pure attention)",
        holds=ok,
        value=rate,
        margin=V.margin(worst_last, 0.0, 0.0, t["collapsed_residual"], above=False),
        test=f"every seed (a counterexample refutes): causal, no LN, last-layer relative residual < "
        f"{t['collapsed_residual']} and ln(residual) linear in depth (R^2 > {t['linear_r2']})",
        detail=f"decay rate {rate:.3f} per layer (x{np.exp(-rate):.3f}), smallest R^2 {worst_r2:.3f}, largest last "
        f"{worst_last:.1e} over {r.sizes['seed']} seeds",
        positive_control=V.control(f"the {local} mask in place of the causal one", None, control_ok),
    )


#: each local mask against the global mask of the same direction
LOCAL_PAIRS = (("sliding", "full"), ("sliding_causal", "causal"))


def _local_claim(r: xr.DataArray, t: Mapping[str, Any]) -> dict[str, Any] | None:
    """Each local mask decays slower than its global counterpart by more than ``rate_margin`` per layer after
    ``sigmas`` standard errors over seeds. Positive control: the per-seed differences with alternating signs (no
    effect, same spread) must fail."""
    pairs = [(lo, gl) for lo, gl in LOCAL_PAIRS if lo in r.mask.values and gl in r.mask.values]
    if not pairs:
        return None
    k, rate_margin, floor = t["sigmas"], t["rate_margin"], t["residual_floor"]
    parts, margins, nulls = [], [], []
    for lo, gl in pairs:
        diff = _rates_by_seed(r, gl, floor) - _rates_by_seed(r, lo, floor)
        mean, se, _ = V.spread(diff)
        margins.append(V.margin(mean, se, k, rate_margin, above=True))
        null_mean, null_se, _ = V.spread(alternating(diff))
        nulls.append(V.margin(null_mean, null_se, k, rate_margin, above=True))
        rate_lo, rate_gl = float(_rates_by_seed(r, lo, floor).mean()), float(_rates_by_seed(r, gl, floor).mean())
        parts.append(f"{lo} {rate_lo:.4f} vs {gl} {rate_gl:.3f} per layer (slower by {mean:.3f} ± {se:.3f}; "
                     f"with alternating signs {null_mean:+.3f})")  # fmt: skip
    return _row(
        "masks.local_slows",
        WU,
        "Sparse or local masked attention can provably slow down the collapse rate.",
        V.QUANTITATIVE,
        "abstract; Fig. 2 (sliding and one-directional sliding windows)",
        holds=all(x > 0 for x in margins),
        value=min(float((_rates_by_seed(r, gl, floor) - _rates_by_seed(r, lo, floor)).mean()) for lo, gl in pairs),
        margin=min(margins),
        test=f"each local mask's decay rate (no LN) below its global counterpart's (sliding vs full, one-directional "
        f"sliding vs causal) by more than {rate_margin} per layer plus {k} standard errors over seeds",
        detail="; ".join(parts),
        positive_control=V.control("the per-seed rate differences with alternating signs (no effect, same spread)",
                                   None, all(x > 0 for x in nulls)),
    )  # fmt: skip


def _fig2_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """The Fig. 2 reading at random init, on the paper's mu: with LayerNorm mu(X_L) stays above ``mu_kept`` of
    mu(X_0) for every mask; beside it the scale-free relative residual, which tells rank collapse from shrinking.
    Positive control: the same reading without LayerNorm must fail."""
    kept = (ds["mu"].isel(layer=-1) / ds["mu"].isel(layer=0)).min("seed")  # every seed
    rel = ds["relative_residual"].mean("seed").isel(layer=-1)
    ln, plain = kept.sel(norm="post_ln"), kept.sel(norm="none")
    masks = list(ds.mask.values)
    return _row(
        "masks.layernorm_mu_kept",
        WU,
        "With LayerNorm added to pure attention, mu(X(t)) no longer converges to zero in randomly initialised models.",
        V.OBSERVATION,
        "Fig. 2 (randomly initialised, log-log)",
        holds=all(float(ln.sel(mask=m)) > t["mu_kept"] for m in masks),
        value=float(ln.min()),
        margin=float(ln.min()) - t["mu_kept"],
        test=f"with post-LN, mu(X_L) / mu(X_0) > {t['mu_kept']} for every mask and seed (mu absolute; the relative "
        "residual beside it is scale-free)",
        detail="mu(X_L)/mu(X_0) with LN: "
        + ", ".join(f"{m} {float(ln.sel(mask=m)):.1e}" for m in masks)
        + "; without: "
        + ", ".join(f"{m} {float(plain.sel(mask=m)):.1e}" for m in masks)
        + "; relative residual with LN: "
        + ", ".join(f"{m} {float(rel.sel(norm='post_ln', mask=m)):.1e}" for m in masks),
        positive_control=V.control("the same runs without LayerNorm", None,
                                   all(float(plain.sel(mask=m)) > t["mu_kept"] for m in masks)),
    )  # fmt: skip


def staying_fraction(ratio: np.ndarray, rank2: float) -> float:
    """Fraction of the draws (rows of ``ratio``, draw by layer 1..L) whose s2/s1 stays above ``rank2`` at every
    layer. Rank one is absorbing in exact arithmetic: a draw that fell below the threshold once counts as
    collapsed, and a later s2/s1 above it is round-off of tokens that have shrunk to the float floor. A NaN (all
    tokens equal) counts as collapsed."""
    r = np.nan_to_num(np.atleast_2d(np.asarray(ratio, dtype=float)), nan=0.0)
    return float((r.min(axis=-1) > rank2).mean())


def construction_holds(ratio: np.ndarray, t: Mapping[str, Any]) -> bool:
    """Whether at least ``stay_fraction`` of the inputs near the construction's equilibrium keep a centred rank-2
    ratio above ``rank2_ratio`` at every layer (:func:`staying_fraction`)."""
    return staying_fraction(ratio, t["rank2_ratio"]) >= t["stay_fraction"]


def _layernorm_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """The LayerNorm construction (a demonstration): with the sphere normalisation and with LayerNorm at least
    ``stay_fraction`` of the draws stay rank 2 at every layer, without normalisation fewer do."""
    ratio = ds["construction_ratio"].isel(layer=slice(1, None)).transpose("construction_norm", "draw", "layer")
    frac = {n: staying_fraction(ratio.sel(construction_norm=n).values, t["rank2_ratio"]) for n in CONSTRUCTION_NORMS}
    ok = {n: construction_holds(ratio.sel(construction_norm=n).values, t) for n in CONSTRUCTION_NORMS}
    last = ds["construction_ratio"].isel(layer=-1)
    built = read_structured_attr(ds, "construction")
    return _row(
        "masks.layernorm_construction",
        WU,
        "With LayerNorm, for suitable value matrices, a general class of sequences does not converge to a rank-one "
        "subspace; without LayerNorm it does.",
        V.EXISTENTIAL,
        "abstract and the LayerNorm counterexamples (a construction of this project: causal uniform attention, "
        "V = [[1, 0], [-1, 1/2]] on a plane, see san/propagation/construction.py)",
        kind=V.DEMONSTRATION,
        holds=ok["sphere"] and ok["layer_norm"] and not ok["none"],
        value=frac["layer_norm"],
        margin=min(frac["layer_norm"], frac["sphere"]) - t["stay_fraction"],
        test=f"{built['draws']} inputs within {built['perturbation']} of the rank-2 equilibrium ({built['tokens']} "
        f"tokens, d = {built['width']}), {ds.sizes['layer'] - 1} layers: at least {t['stay_fraction']:.0%} keep s2/s1 "
        f"of the centred tokens > {t['rank2_ratio']} at every layer with the sphere normalisation and with "
        "LayerNorm, fewer without (a draw that fell below once counts as collapsed: later readings are round-off)",
        detail=f"equilibrium s2/s1 {ds.attrs['construction_equilibrium_ratio']:.3f}; staying rank 2: sphere "
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
    """Stable-rank growth from the shortest to the longest T, per seed: with A its mean plus ``sigmas`` standard
    errors stays below ``stable_rank_growth``, with A - 11^T/T its mean minus them exceeds it. Positive control: the
    same test with the two attention matrices exchanged must fail."""
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
    k, g = t["sigmas"], t["stable_rank_growth"]
    plain, centred = growth.sel(centred=0).values, growth.sel(centred=1).values

    def margins(stays: np.ndarray, grows: np.ndarray) -> float:
        a, b = V.spread(stays), V.spread(grows)
        return min(V.margin(a[0], a[1], k, g, above=False), V.margin(b[0], b[1], k, g, above=True))

    m = margins(plain, centred)
    mean = s.mean("seed")
    t0, t1 = int(ds.seq_len[0]), int(ds.seq_len[-1])
    return [
        _row(
            "sequence_length.rank_collapse_in_width",
            NAIT_SAADA,
            "Rank collapse in width: as the sequence length grows the spectral gap of the attention matrix drives "
            "the tokens to rank one; removing the uniform component, A - 11^T/T, cures it.",
            V.QUANTITATIVE,
            "abstract; their configs.py and stable_ranks.py (isometric input, d = T)",
            holds=V.clears(m),
            value=float(mean.sel(centred=1).isel(seq_len=-1) / mean.sel(centred=0).isel(seq_len=-1)),
            margin=m,
            test=f"at {other}: the stable rank's growth from T={t0} to T={t1}, over seeds, with A stays below {g}x "
            f"(mean + {k} s.e.) while with A - 11^T/T it exceeds {g}x (mean - {k} s.e.)",
            detail=f"stable rank after {ds.sizes['layer'] - 1} layers, T={t0} -> T={t1}: A "
            f"{float(mean.sel(centred=0).isel(seq_len=0)):.2f} -> {float(mean.sel(centred=0).isel(seq_len=-1)):.2f} "
            f"(growth {plain.mean():.2f} ± {_se(plain):.2f}); A - 11^T/T "
            f"{float(mean.sel(centred=1).isel(seq_len=0)):.2f} -> {float(mean.sel(centred=1).isel(seq_len=-1)):.2f} "
            f"(growth {centred.mean():.2f} ± {_se(centred):.2f})",
            positive_control=V.control("A and A - 11^T/T exchanged", None, V.clears(margins(centred, plain))),
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


def sweep_claims(results: Mapping[str, xr.Dataset], t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every verdict row that the given sweep results (by sweep name) can test, keys ``<sweep>.<claim>``; ``t``:
    config ``report.propagation``."""
    checks: dict[str, Callable[[xr.Dataset, Mapping[str, Any]], list[dict[str, Any]]]] = CHECKS
    return [r for name, check in checks.items() if name in results for r in check(held(results[name], USES[name]), t)]


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The propagation wing's section of summary.json: :func:`sweep_claims` on ``inputs['propagation']`` (one file
    per sweep of ``params['sweeps']``) with ``params['report']['propagation']``; None without a sweep."""
    if not params["sweeps"]:
        return {"propagation": None}
    from san.core.storage import read_netcdf

    results = dict(zip(params["sweeps"], map(read_netcdf, inputs["propagation"]), strict=True))
    return {"propagation": {"verdicts": sweep_claims(results, params["report"]["propagation"])}}
