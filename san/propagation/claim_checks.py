"""What every claim of the propagation wing shares: the papers it cites, the row built by the one check
(:func:`san.claims.verdicts.check`) with the paper in its statement and source, the settings of config
``report.propagation`` (``t``, :func:`settings`), the seed spread of a grid point, the decay-rate fit, and the
disclosure of a threshold set after a result was seen (``report.propagation.threshold_notes``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.record import Settings

NOCI, GG, WU = "Noci et al. 2022", "Giorlandino & Goldt 2026", "Wu et al. 2024"
NAIT_SAADA = "Nait Saada, Naderi & Tanner 2025"
SECTION = "report.propagation"
#: how the key of a threshold of :func:`halves` ends: its value is 0 (each half's margin), not a config value
HALVES = "(each half's margin)"


def check(key: str, paper: str, statement: str, form: str, source: str, **kwargs: Any) -> dict[str, Any]:
    """A scientific row of this wing (:func:`san.claims.verdicts.check`), its statement and source naming the paper;
    ``kwargs``: ``test``, ``statistic``, ``threshold``, ``wrong`` and ``detail``."""
    return V.check(key, f"{paper}: {statement}", form=form, source=f"{paper}, {source}", **kwargs)


def settings(t: Mapping[str, Any]) -> Settings:
    """The thresholds and control settings of config ``report.propagation`` (``t``), each read by its name with its
    full key (:class:`san.claims.record.Settings`: ``threshold(name, above=..., sigmas="sigmas")`` widens a
    threshold by the seed spread's standard errors, ``wrong(name, reference)`` the near-miss reference)."""
    return Settings(SECTION, t)


def note(t: Mapping[str, Any], key: str) -> str:
    """The disclosure of ``report.propagation.<key>`` (``threshold_notes``: a setting changed after a result was
    seen), for a row's detail; empty for a setting fixed before the first run that judged it."""
    text = t.get("threshold_notes", {}).get(key)
    return f"; {SECTION}.{key} = {t[key]:g}: {text}" if text else ""


def has(ds: xr.Dataset, dim: str, *values: Any) -> bool:
    """Whether ``ds`` has dimension ``dim`` with every one of ``values``."""
    return dim in ds.dims and all(v in ds[dim].values for v in values)


def seed_measure(values: Any, item: str = "") -> V.Measure:
    """The one spread rule on one grid point's seeds: their mean, its standard error and their count
    (:func:`san.claims.verdicts.spread`)."""
    mean, se, n = V.spread(np.asarray(values, dtype=float).ravel())
    return V.Measure(mean, se, n, item)


def point_measures(values: xr.DataArray) -> list[V.Measure]:
    """:func:`seed_measure` of every grid point of ``values`` (every dimension but ``seed``), each named by its
    coordinates: the one spread rule, vectorised over the points."""
    others = [d for d in values.dims if d != "seed"]
    v = values.transpose(*others, "seed").values.reshape(-1, values.sizes["seed"]) if "seed" in values.dims else \
        values.values.reshape(-1, 1)  # fmt: skip
    finite = np.isfinite(v)
    n = finite.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, np.where(finite, v, 0.0).sum(axis=1) / np.maximum(n, 1), np.nan)
        dev = np.where(finite, v - mean[:, None], 0.0)
        se = np.where(n > 1, np.sqrt((dev**2).sum(axis=1) / np.maximum(n - 1, 1)) / np.sqrt(np.maximum(n, 1)), 0.0)
    index = np.ndindex(*[values.sizes[d] for d in others])
    names = [", ".join(f"{d} = {values[d].values[i]}" if d in values.coords else f"{d} {i}" for d, i in
                       zip(others, at, strict=True)) for at in index]  # fmt: skip
    return [V.Measure(float(m), float(e), int(k), name) for m, e, k, name in zip(mean, se, n, names, strict=True)]


def halves(parts: Mapping[str, tuple[V.Measure, V.Threshold]]) -> V.Measure:
    """A claim of two (or more) halves as one measure: the margin of the half that clears least (its item names the
    half, its own value and its threshold, so that a table never reads the margin as the value), each half's margin
    as its own threshold measures it (:meth:`san.claims.verdicts.Threshold.margin`: in decades for a threshold with
    ``log``), so that the measure clears 0 exactly when every half clears its own. As :func:`san.claims.verdicts.worst`:
    a failing half fails the claim, otherwise a half without evidence leaves it not judged."""
    margins = {name: th.margin(m) if m.evidence > 0 else float("nan") for name, (m, th) in parts.items()}
    judged = {n: x for n, x in margins.items() if np.isfinite(x)}
    if not judged or (len(judged) < len(margins) and min(judged.values()) > 0):
        return V.Measure(float("nan"), 0.0, 0)
    name = min(judged, key=judged.__getitem__)
    m, th = parts[name]
    unit = ", margin in decades" if th.log else ""
    item = f"least margin: {name} = {m.value:.3g} against {'>' if th.above else '<'} {th.value:g}{unit}"
    return V.Measure(judged[name], 0.0, sum(m.evidence for m, _ in parts.values()), item)


def margins_above_zero(key: str, *keys: str) -> V.Threshold:
    """The threshold of :func:`halves`: the least margin above 0; ``key`` (and ``keys``) name the config keys of
    the halves' thresholds."""
    keys_text = " and ".join(f"{SECTION}.{k}" for k in (key, *keys))
    return V.Threshold(0.0, above=True, key=f"{keys_text} {HALVES}")


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


Statistic = Callable[[float], V.Measure]
