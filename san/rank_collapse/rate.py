"""The rate of rank collapse, read off a curve of relative residuals ``r_l`` per layer (Fig. 2), torch-free.

Two rates the literature states, each with the measure that tells it from its nearest rival:

- **Doubly exponential** (Dong et al. 2021, Thm. 2.2 and Cor. 2.3): ``||res(X_{l+1})|| <= C ||res(X_l)||^3``, so
  ``log r_{l+1} ~ log C + 3 log r_l`` once the residual is small. The *contraction exponent* is the slope of
  ``log r_{l+1}`` against ``log r_l`` over consecutive layers: ``b`` for any ``r_{l+1} = C r_l^b`` (3 for the
  theorem's cubic rate), and exactly 1 for an exponential decay ``r_{l+1} = c r_l`` whatever its factor ``c``
  (:func:`contraction_exponent`). The slope, unlike the ratio ``log r_{l+1} / log r_l``, does not depend on ``C``.
- **Exponential** (Wu et al. 2024, causal masks): ``log r_l`` falls by the same amount per layer. The *late share*
  is the later half's share of the mean fall per layer (:func:`late_share`): 1/2 for an exponential decay, above it
  for a faster one, and well below it for a power law ``r_l ~ l^-p`` (``ln 2 / ln n`` over ``n`` layers), whose
  collapse slows with depth.

Each measure is read per sequence over the layers whose ratio lies strictly between a rounding floor (below it the
float type's noise, not attention, sets the value) and a limit (above it the curve has not left its start), and has
a near-miss rival curve fitted to the same layers (:func:`exponential_fit`, :func:`power_law_fit`), towards which a
claim's positive control moves the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "Fit",
    "contraction_exponent",
    "exponential_fit",
    "fitted_layers",
    "late_share",
    "log_linear_r2",
    "power_law_fit",
]

#: the fewest consecutive-layer pairs a contraction exponent is fitted from (a slope and its intercept)
MIN_PAIRS = 2
#: the fewest layers a late share is read from (two layer-to-layer falls in each half)
MIN_LAYERS = 5


@dataclass(frozen=True)
class Fit:
    """One curve's measure: its ``value`` (NaN where the curve has too few layers in range), the standard error of
    the fit behind it (NaN where not defined) and the number of layers it rests on."""

    value: float
    se: float
    layers: int


def fitted_layers(curve: np.ndarray, floor: float, limit: float, *, first: int = 0) -> np.ndarray:
    """The layers of ``curve``'s final descent: the contiguous run of layers (from ``first`` on) whose ratio lies
    strictly between ``floor`` and ``limit`` and that ends where the curve first reaches the floor (or at its last
    layer). A pretrained curve that dips below the limit and climbs back contributes only its last run, the regime
    a rate of convergence speaks about. Empty when the layer before the floor is not in range."""
    r = np.asarray(curve, dtype=float)
    inside = np.isfinite(r) & (r > floor) & (r < limit)
    inside[:first] = False
    at_floor = np.flatnonzero(np.isfinite(r) & (r <= floor))
    end = int(at_floor[0]) - 1 if at_floor.size else r.size - 1
    start = end
    while start >= 0 and inside[start]:
        start -= 1
    return np.arange(start + 1, end + 1)


def contraction_exponent(curve: np.ndarray, layers: np.ndarray) -> Fit:
    """The slope of ``log r_{l+1}`` against ``log r_l`` over the consecutive pairs of ``layers`` (least squares,
    with its standard error): the ``b`` of ``r_{l+1} = C r_l^b``, 1 for an exponential decay. NaN with fewer than
    :data:`MIN_PAIRS` pairs, or where every ``r_l`` of the pairs is the same."""
    logs = np.log(np.asarray(curve, dtype=float)[layers])
    if logs.size - 1 < MIN_PAIRS or np.ptp(logs[:-1]) == 0:
        return Fit(float("nan"), float("nan"), int(logs.size))
    fit = stats.linregress(logs[:-1], logs[1:])
    se = float(fit.stderr) if logs.size - 1 > MIN_PAIRS else float("nan")
    return Fit(float(fit.slope), se, int(logs.size))


def late_share(curve: np.ndarray, layers: np.ndarray) -> Fit:
    """The later half's share of the fall of ``ln r_l`` over ``layers`` (the middle fall left out for an odd count):
    ``late / (early + late)`` of the two halves' mean falls per layer. 1/2 for an exponential decay, below it where
    the collapse slows with depth (``ln 2 / ln n`` for a power law over ``n`` layers), above it where it speeds up
    (above 1 where the earlier half rises). 0 where the curve does not fall over ``layers`` at all (no collapse to
    share). NaN with fewer than :data:`MIN_LAYERS` layers. Its standard error is not defined (one number per
    curve)."""
    logs = np.log(np.asarray(curve, dtype=float)[layers])
    if logs.size < MIN_LAYERS:
        return Fit(float("nan"), float("nan"), int(logs.size))
    falls = -np.diff(logs)
    half = falls.size // 2
    early, late = float(falls[:half].mean()), float(falls[-half:].mean())
    value = late / (early + late) if early + late > 0 else 0.0
    return Fit(value, float("nan"), int(logs.size))


def exponential_fit(curve: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """The exponential decay ``r_l = a c^l`` fitted to ``curve`` at ``layers`` (least squares in ``ln r``), over
    every layer of ``curve``: the near-miss rival of a doubly exponential rate (its contraction exponent is 1)."""
    out = np.full(np.shape(curve), np.nan)
    if layers.size < 2:
        return out
    fit = stats.linregress(layers.astype(float), np.log(np.asarray(curve, dtype=float)[layers]))
    out[layers] = np.exp(fit.intercept + fit.slope * layers)
    return out


def power_law_fit(curve: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """The power law ``r_l = r_a (l - a + 1)^-p`` through the first (``a``) and last of ``layers``, over every layer
    of ``curve``: the near-miss rival of an exponential rate, a collapse that slows with depth."""
    out = np.full(np.shape(curve), np.nan)
    if layers.size < 2:
        return out
    r = np.asarray(curve, dtype=float)
    a, b = int(layers[0]), int(layers[-1])
    p = (np.log(r[a]) - np.log(r[b])) / np.log(b - a + 1)
    out[layers] = r[a] * (layers - a + 1.0) ** -p
    return out


def log_linear_r2(curve: np.ndarray, layers: np.ndarray) -> float:
    """The R^2 of the straight line through ``ln r_l`` against ``l`` at ``layers`` (1: an exact exponential decay);
    NaN with fewer than three layers."""
    if layers.size < 3:
        return float("nan")
    fit = stats.linregress(layers.astype(float), np.log(np.asarray(curve, dtype=float)[layers]))
    return float(fit.rvalue**2)
