"""The depth sweep's claims: Noci et al.'s depth-scaled residual and Giorlandino & Goldt's recursion (exact in the
limit; finite-size gap dominated by T), each one check (:func:`san.claims.verdicts.check`) against a near-miss wrong
reference whose setting comes from config ``report.propagation`` (``t``):

- Noci et al.: placebo, **the unscaled residual** (a = b = 1): every 1/sqrt(L) point's seeds moved toward the
  unscaled residual's at the same grid point (where it runs: the sweep's own depth);
- exact in the limit: **the recursion offset** by ``recursion_offset``;
- finite size: **d and T matter equally per doubling**, T's effect larger only because its range is wider: each
  seed's T effect moved toward its d effect times ``log(T1/T0) / log(d1/d0)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.evidence import has, point_measures
from san.claims.record import Claim, NearMiss, Scope, Settings, item
from san.claims.verdicts import moved
from san.core.storage import read_structured_attr
from san.propagation import theory
from san.propagation.results import fixed_params
from san.propagation.spec import GG, NOCI, SECTION, check, settings


def depth_gaps_by_seed(ds: xr.Dataset) -> xr.DataArray:
    """Largest |simulated cosine - G&G recursion| over layers, per grid point and seed (post-LN points only)."""
    gap = abs(ds["cosine"] - ds["theory_cosine"]).max("layer")
    return gap.where(np.isfinite(ds["theory_cosine"]).any("layer"))


def _last_cosines(ds: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray | None]:
    """The last-layer cosine of the 1/sqrt(L) runs at every model depth and grid point, and that of the unscaled
    residual at the same points (NaN where it does not run: it runs at the sweep's own depth only; None without
    it)."""
    last = ds["final_cosine"] if "final_cosine" in ds else ds["cosine"].isel(layer=-1)
    inv = last.sel(residual="inv_sqrt_depth", drop=True)
    if not has(ds, "residual", "skip"):
        return inv, None
    plain = last.sel(residual="skip", drop=True)
    if not np.isfinite(plain).any():  # stored only at the sweep's own depth
        plain = ds["cosine"].isel(layer=-1, drop=True).sel(residual="skip", drop=True)
        if "model_depth" in inv.dims:
            own = inv["model_depth"] == ds.sizes["layer"] - 1
            plain = plain.expand_dims(model_depth=inv["model_depth"]).where(own)
    return inv, plain.broadcast_like(inv).transpose(*inv.dims)


def _noci_detail(inv: xr.DataArray, plain: xr.DataArray | None, t: Mapping[str, Any]) -> str:
    """Grid points where each scaling collapses (mean + ``sigmas`` s.e. at or above the threshold), and the
    largest 1/sqrt(L) cosine by depth."""
    limit = settings(t).threshold("collapsed_cosine", above=False, sigmas="sigmas")

    def collapsed(x: xr.DataArray) -> str:
        ms = [m for m in point_measures(x) if m.evidence]
        return f"{sum(limit.margin(m) <= 0 for m in ms)} of {len(ms)}"

    depths = [int(d) for d in inv["model_depth"].values] if "model_depth" in inv.dims else [None]
    by_depth = ", ".join(
        f"L = {d}: {V.worst(point_measures(inv if d is None else inv.sel(model_depth=d)), limit).value:.3f}"
        for d in depths
    )
    control = "no unscaled residual in this sweep" if plain is None else f"the unscaled residual at {collapsed(plain)}"
    return f"1/sqrt(L) collapses at {collapsed(inv)} grid points, {control}; largest seed-mean last-layer cosine " \
        f"of the 1/sqrt(L) branches by depth: {by_depth}"  # fmt: skip


def noci_claim(ds: xr.Dataset, t: Mapping[str, Any]) -> dict[str, Any]:
    """Universal over model depths and the depth sweep's grid: every 1/sqrt(L) point keeps its last-layer cosine,
    mean plus ``sigmas`` standard errors over seeds, below ``collapsed_cosine``. Placebo: the unscaled residual
    (:func:`_last_cosines`), reached by moving each seed's cosine ``noci_control`` of the way toward it; where it
    does not run, the point keeps its own reading (no placebo: not judged without one anywhere)."""
    inv, plain = _last_cosines(ds)
    limit = settings(t).threshold("collapsed_cosine", above=False, sigmas="sigmas")

    def statistic(s: float) -> V.Measure:
        if s != 0 and (plain is None or not np.isfinite(plain).any()):
            return V.Measure(float("nan"), 0.0, 0)
        return V.worst(point_measures(inv if s == 0 else moved(inv, plain.fillna(inv), s)), limit)

    depths = [int(d) for d in inv["model_depth"].values] if "model_depth" in inv.dims else [ds.sizes["layer"] - 1]
    return check(
        "depth.noci", NOCI,
        "Scaling the residual branches by 1/sqrt(L) prevents rank collapse: tokens stay apart at any depth.",
        V.UNIVERSAL, "abstract; depth-scaled residual branches",
        test=f"at every model depth L in {depths} and every grid point of the depth sweep, the 1/sqrt(L) runs' "
        f"last-layer cosine, mean + {t['sigmas']} standard errors over seeds, < {t['collapsed_cosine']}",
        statistic=statistic, threshold=limit, detail=_noci_detail(inv, plain, t),
        wrong=settings(t).wrong(
            "noci_control",
            "the unscaled residual (a = b = 1): each seed's last-layer cosine moved {s:g} "
            "of the way from the 1/sqrt(L) run's to the unscaled run's at the same point"),
    )  # fmt: skip


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


def mean_curve_gap(diff: xr.DataArray, offset: float, sigmas: float) -> V.Measure:
    """At one size (``diff`` over residual, beta, layer and seed): the gap of the seed-mean curve to the recursion
    shifted by ``offset`` at the point where that gap plus ``sigmas`` standard errors over seeds is largest (over
    residual scalings, beta and the layers after the input), with its standard error; averaging the seeds first
    leaves out the per-seed sampling noise that a per-seed largest gap adds."""
    later = diff.isel(layer=slice(1, None))  # layer 0: the recursion starts at the measured input
    n = later.sizes["seed"]
    se = later.std("seed", ddof=1) / np.sqrt(n) if n > 1 else 0.0 * later.isel(seed=0)
    gap = abs(later.mean("seed") - offset)
    at = (gap + sigmas * se).argmax(...)
    item = ", ".join(f"{d} = {later[d].values[int(i)]}" for d, i in at.items() if d in later.coords)
    return V.Measure(float(gap[at]), float(se[at]), n, item)


def size_gaps(diff: xr.DataArray, offset: float) -> xr.DataArray:
    """Per size (width d, sequence length T) and seed: the largest gap of the seed's correlation to the recursion
    shifted by ``offset``, over residual scalings, beta and the layers after the input (layer 0: the recursion starts
    at the measured input)."""
    later = abs(diff.isel(layer=slice(1, None)) - offset)
    return later.max([d for d in later.dims if d not in ("width", "seq_len", "seed")])


def limit_fit(diff: xr.DataArray) -> xr.DataArray:
    """The signed gap extrapolated to infinite width and length at every point and seed: the intercept ``a`` of the
    least-squares fit ``gap(d, T) = a + b / d + c / T`` over the sizes run (``diff``: dims width, seq_len and any
    others; the result has the others)."""
    rest = [d for d in diff.dims if d not in ("width", "seq_len")]
    g = diff.transpose("width", "seq_len", *rest)
    d, t = np.meshgrid(g.width.values.astype(float), g.seq_len.values.astype(float), indexing="ij")
    design = np.column_stack([np.ones(d.size), 1.0 / d.ravel(), 1.0 / t.ravel()])
    coef, *_ = np.linalg.lstsq(design, g.values.reshape(d.size, -1), rcond=None)
    return xr.DataArray(coef[0].reshape(g.shape[2:]), dims=rest, coords={k: g[k] for k in rest if k in g.coords})


def limit_gap(diff: xr.DataArray, offset: float, sigmas: float) -> V.Measure:
    """The extrapolated gap (:func:`limit_fit`) to the recursion shifted by ``offset``, at the point (residual
    scaling, beta, layer after the input) where its seed mean's size plus ``sigmas`` standard errors over seeds is
    largest, with that standard error."""
    a = limit_fit(diff.isel(layer=slice(1, None)) - offset)
    n = a.sizes["seed"]
    se = a.std("seed", ddof=1) / np.sqrt(n) if n > 1 else 0.0 * a.isel(seed=0)
    gap = abs(a.mean("seed"))
    at = (gap + sigmas * se).argmax(...)
    where = ", ".join(f"{d} = {a[d].values[int(i)]}" for d, i in at.items() if d in a.coords)
    return V.Measure(float(gap[at]), float(se[at]), n, f"extrapolated to d, T -> infinity ({where})")


def agreement_claim(ds: xr.Dataset, sub: list, t: Mapping[str, Any]) -> dict[str, Any]:
    """The limit statement "exact in the limit of infinite width and length", judged by the trend toward the limit:
    per seed, the largest subcritical gap of the correlation to the recursion at every size (d, T) run, fitted by
    ``a + b/d + c/T`` and extrapolated to d, T -> infinity (:func:`limit_fit`); the claim holds when the mean of the
    extrapolated gaps plus ``sigmas`` standard errors over seeds is at most ``agreement`` (the project's reading of
    "a few hundredths"). Not judged with fewer than four sizes (no error for a three-parameter fit). Wrong
    reference: the recursion offset by ``recursion_offset``. Beside it, per size, the gap of the seed means."""
    r = Settings(SECTION, t)
    sizes = [(int(w), int(n)) for w in ds.width.values for n in ds.seq_len.values]
    claim = Claim(
        key="depth.recursion_exact_in_limit",
        statement=f"{GG}: The recursion for the token correlation through post-LN blocks is exact in the limit of "
        "infinite width and sequence length.",
        words="exact in the limit of infinite width and sequence length", source=GG,
        place="Result 1, Fig. 1 (their setting: d = 720, T up to 512, L = 50, beta 0.5 and 3)", form=V.QUANTITATIVE,
        scope=Scope(("post-LN transformer at random init",), sizes="d, T -> infinity (a limit)",
                    training="random init", sweep=("width d", "sequence length T"),
                    needs="needs the gap at four or more sizes (d, T) to fit its trend toward the limit with an error"),
        measure="the largest subcritical gap of each seed's correlation to the recursion, per size (d, T)",
        test=f"the gap fitted by a + b/d + c/T over the sizes run and extrapolated to d, T -> infinity (per seed), for "
        f"beta < {t['subcritical_fraction']} beta_c(p0): its mean plus {t['sigmas']} standard errors over seeds at "
        f"most {t['agreement']} (our reading of 'a few hundredths', set before the run)",
        threshold=settings(t).threshold("agreement", above=False, sigmas="sigmas"),
        near_miss=NearMiss(r.wrong("recursion_offset", "the recursion offset by {s:+g}"),
                           "a recursion off by a constant still tracks the curve's shape at every finite size"),
    )  # fmt: skip
    if len(sizes) < 4:
        return claim.not_in_scope(f"this run has {len(sizes)} size(s): {sizes}")
    diff = own_start_differences(ds, sub)

    k = t["sigmas"]
    at_sizes = size_gaps(diff, 0.0)
    per_size = [item(f"d = {w}, T = {n}", float(at_sizes.sel(width=w, seq_len=n).mean()), "largest gap (seed mean)",
                     se=V.spread(at_sizes.sel(width=w, seq_len=n).values)[1]) for w, n in sizes]  # fmt: skip
    limit = limit_gap(diff, 0.0, k)
    detail = ("largest gap per size (seed mean): " + ", ".join(f"{i['item']}: {i['value']:.3f}" for i in per_size)
              + f"; extrapolated: {limit.value:.3f} ± {limit.se:.3f} (s.e. over {limit.evidence} seeds)")  # fmt: skip
    return claim.judge(lambda s: limit_gap(diff, s, k), detail, per_size)


def _effects(ds: xr.Dataset, sup: list) -> tuple[np.ndarray, np.ndarray, float]:
    """Per seed, above critical: the drop of the gap to the recursion from the smallest to the largest d (the d
    effect) and T (the T effect), and the ratio of the two ranges in doublings, ``log(T1/T0) / log(d1/d0)``."""
    g = depth_gaps_by_seed(ds).sel(norm="post_ln", beta=sup)
    g = g.mean([d for d in g.dims if d not in ("width", "seq_len", "seed")])
    d_eff = g.isel(width=0).mean("seq_len") - g.isel(width=-1).mean("seq_len")
    t_eff = g.isel(seq_len=0).mean("width") - g.isel(seq_len=-1).mean("width")
    w, n = ds.width.values.astype(float), ds.seq_len.values.astype(float)
    return d_eff.values, t_eff.values, float(np.log(n[-1] / n[0]) / np.log(w[-1] / w[0]))


def finite_size_claim(ds: xr.Dataset, sup: list, t: Mapping[str, Any]) -> dict[str, Any]:
    """T effect minus d effect on the gap, per seed; holds when its mean exceeds ``finite_size_margin`` after
    ``sigmas`` standard errors of the seed spread (not judged with a single seed: no spread to judge by). Wrong
    theory: d and T matter equally per doubling (each seed's T effect moved toward its d effect times the ratio of
    the ranges in doublings, ``finite_size_control`` of the way): a T effect larger only because T's range is
    wider."""
    d_eff, t_eff, ratio = _effects(ds, sup)

    def statistic(s: float) -> V.Measure:
        m = V.Measure(*V.spread(V.toward(t_eff, ratio * d_eff, s) - d_eff))
        return m if m.evidence > 1 else V.Measure(m.value, 0.0, 0)

    wrong = ratio * d_eff
    return check(
        "depth.finite_size_dominated_by_T", f"{GG} (finite-size)",
        "Near and above the critical variance the gap to the infinite-size recursion is dominated by the "
        "sequence length T, not the width d.",
        V.QUANTITATIVE, "Sec. 3 assumptions: the REM limit T -> infinity with logits scaled by sqrt(log T)",
        test="drop of the mean gap from the smallest to the largest T exceeds the drop from the smallest to the "
        f"largest d by more than {t['finite_size_margin']:g} after {t['sigmas']} standard errors over {t_eff.size} "
        "seeds (beta >= beta_c(p0))",
        statistic=statistic, threshold=settings(t).threshold("finite_size_margin", above=True, sigmas="sigmas"),
        wrong=settings(t).wrong(
            "finite_size_control",
            "d and T equal per doubling: each seed's T effect moved {s:g} of the "
            f"way to its d effect x {ratio:.2f} (the ratio of the ranges in doublings)"),
        detail=f"gap drop with T ({ds.seq_len.values[0]}->{ds.seq_len.values[-1]}): {t_eff.mean():+.3f}; with d "
        f"({ds.width.values[0]}->{ds.width.values[-1]}): {d_eff.mean():+.3f}; difference "
        f"{(t_eff - d_eff).mean():+.3f} ± {V.spread(t_eff - d_eff)[1]:.3f} (s.e.); d and T equal per doubling "
        f"predict a T drop of {wrong.mean():+.3f} (difference {(wrong - d_eff).mean():+.3f} ± "
        f"{V.spread(wrong - d_eff)[1]:.3f})",
    )  # fmt: skip


def depth_claims(ds: xr.Dataset, t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The depth sweep's rows: Noci et al. where the sweep has the 1/sqrt(L) scaling; the recursion's two claims
    where it has post-LN points over beta, width and T (the finite-size claim only with several of each size)."""
    out = [noci_claim(ds, t)] if has(ds, "residual", "inv_sqrt_depth") else []
    if not (has(ds, "norm", "post_ln") and all(d in ds.dims for d in ("beta", "width", "seq_len"))):
        return out
    beta_c = theory.critical_beta(float(ds["cosine"].isel(layer=0).mean()))
    sub = [b for b in ds.beta.values if b < t["subcritical_fraction"] * beta_c]
    sup = [b for b in ds.beta.values if b >= beta_c]
    if sub:
        out.append(agreement_claim(ds, sub, t))
    if sup and ds.sizes["width"] > 1 and ds.sizes["seq_len"] > 1:
        out.append(finite_size_claim(ds, sup, t))
    return out
