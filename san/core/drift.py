"""The quantisation control's hook into the verdicts: a verdict that rests on quantised weights is printed with the
drift that quantisation alone causes in the statistic it compares (the same statistic measured on the weights and on
their requantised copies, :func:`san.rank_collapse.quantisation.measure_drift`) beside its margin, and a margin no
larger than that drift is printed as :data:`WITHIN_DRIFT`, never as holds or fails: quantisation could have moved
the statistic across its threshold.

Torch-free: the claims call it with the margin of their row (:func:`san.core.verdicts.margin`) and the drift in the
margin's units (the statistic's, or decades for a logarithmic threshold: :func:`drift_in_decades`).
"""

from __future__ import annotations

import math

#: the printed state of a verdict whose margin is no larger than the drift quantisation alone causes
WITHIN_DRIFT = "within quantisation drift"


def against_drift(printed: str, margin: float | None, drift: float | None) -> str:
    """The verdict ``printed`` (holds, fails, ...) of a row with ``margin`` on quantised weights whose statistic
    quantisation alone moves by ``drift``: :data:`WITHIN_DRIFT` when ``|margin| <= drift``, else ``printed``
    unchanged (also when either is unknown: no margin, or no drift measured)."""
    if margin is None or drift is None or not (math.isfinite(margin) and math.isfinite(drift)):
        return printed
    return WITHIN_DRIFT if abs(margin) <= drift else printed


def crosses(printed: str, value: float | None, threshold: float | None, drift: float | None) -> str:
    """The state of a table cell ``printed`` (holds, fails, no power) whose statistic ``value`` quantisation alone
    moves by ``drift``: :data:`WITHIN_DRIFT` when the interval ``value +- drift`` reaches ``threshold`` (quantisation
    could have put the statistic on the threshold's other side, whether the threshold is compared in decades or
    not), else ``printed``; unchanged for a cell without a verdict or a number to compare (not judged, n/a)."""
    numbers = (value, threshold, drift)
    if printed not in ("holds", "fails", "no power") or any(x is None or not math.isfinite(x) for x in numbers):
        return printed
    return WITHIN_DRIFT if abs(value - threshold) <= drift else printed


def drift_cell(margin: float | None, drift: float | None) -> str:
    """The cell a table prints beside such a verdict: the margin and the drift, e.g. ``margin 0.12, drift 0.031``
    (``-`` for an unknown number)."""

    def fmt(x: float | None) -> str:
        return "-" if x is None or not math.isfinite(x) else f"{x:.2g}"

    return f"margin {fmt(margin)}, drift {fmt(drift)}"


def drift_in_decades(value: float, drift: float) -> float:
    """A drift of ``drift`` around ``value`` in decades, for a margin measured in decades (``log10``): the larger of
    the two sides' distances, ``log10(value + drift) - log10(value)`` and ``log10(value) - log10(value - drift)``
    (infinite when the drift reaches zero)."""
    if value <= 0:
        raise ValueError(f"a drift in decades needs a positive value, got {value}")
    if drift >= value:
        return math.inf
    return max(math.log10(value + drift) - math.log10(value), math.log10(value) - math.log10(value - drift))
