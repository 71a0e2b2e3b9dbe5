"""What a verdict row rests on when its data are a grid of seeds (torch-free): one grid point's seed spread
(:func:`seed_measure`, the one spread rule :func:`san.claims.verdicts.spread`), every point's at once
(:func:`point_measures`), and a claim of several halves read as one measure (:func:`halves`, with its threshold
:meth:`san.claims.record.Settings.halves`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V


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
