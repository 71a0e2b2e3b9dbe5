"""The quantisation control's hook into the verdicts: a verdict that rests on quantised weights is printed with the
drift that quantisation alone causes in the statistic it compares (the same statistic measured on the weights and on
their requantised copies, :func:`measure_drift`) beside its margin, and a margin no
larger than that drift is printed as :data:`WITHIN_DRIFT`, never as holds or fails: quantisation could have moved
the statistic across its threshold.

Torch-free (xarray): the claims call it with the margin of their row (:func:`san.claims.verdicts.margin`) and the
drift in the margin's units (the statistic's, or decades for a logarithmic threshold: :func:`drift_in_decades`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

#: the printed state of a verdict whose margin is no larger than the drift quantisation alone causes
WITHIN_DRIFT = "within quantisation drift"


#: the weight sets of a rank-collapse result: the pretrained weights (what the control requantises) and the init twin
PRETRAINED, INIT = "pretrained", "init"
#: a wing's judge of its verdict rows: (model -> rank-collapse result) -> (row key -> margin)
RowJudge = Callable[[Mapping[str, xr.Dataset]], Mapping[str, float | None]]
#: the printed states a drift can overturn (a verdict that compared a statistic with its threshold)
DECIDED = ("holds", "fails", "no power")


def _finite(x: float | None) -> bool:
    """Whether ``x`` is a number (not None, NaN or infinite)."""
    return x is not None and bool(np.isfinite(x))


def against_drift(printed: str, margin: float | None, drift: float | None) -> str:
    """The verdict ``printed`` (holds, fails, no power) of a row with ``margin`` on quantised weights whose margin
    quantisation alone moves by ``drift`` (in the margin's units): :data:`WITHIN_DRIFT` when ``|margin| <= drift``,
    else ``printed`` unchanged (also when either is unknown, and for a row that compared nothing: not judged)."""
    if printed not in DECIDED or not all(map(_finite, (margin, drift))):
        return printed
    return WITHIN_DRIFT if abs(margin) <= drift else printed


def crosses(printed: str, value: float | None, threshold: float | None, drift: float | None) -> str:
    """The state of a table cell ``printed`` (holds, fails, no power) whose statistic ``value`` quantisation alone
    moves by ``drift``: :data:`WITHIN_DRIFT` when the interval ``value +- drift`` reaches ``threshold`` (quantisation
    could have put the statistic on the threshold's other side, whether the threshold is compared in decades or
    not), else ``printed``; unchanged for a cell without a verdict or a number to compare (not judged, n/a)."""
    if printed not in DECIDED or not all(map(_finite, (value, threshold, drift))):
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


#: integer coordinates stored as variables (a token's and a dimension's index), not measures
NOT_MEASURES = ("massive_token", "massive_dim")
#: the dimensions a measure is averaged over before its drift is taken: the inputs (text sequences, images) and heads
AVERAGED = ("sample", "image", "head")


def measure_drift(ds: xr.Dataset, reference: str = PRETRAINED) -> xr.Dataset:
    """Per measure of a rank-collapse or vision result ``ds`` whose weight sets are ``reference`` and its quantised
    copies: ``|mean(copy) - mean(reference)|`` over the inputs (text sequences or images) and, for the first-token
    attention, the heads (:data:`AVERAGED`), on the dims ``(copy, variant, layer)``, and ``max_drift``-prefixed
    variables with the largest over the copies. A measure that is NaN on the reference (the first-token attention at
    layer 0) stays NaN."""
    if reference not in ds["weights"].values:
        raise ValueError(f"the result has no weight set {reference!r} (has {list(ds['weights'].values)})")
    copies = [str(w) for w in ds["weights"].values if w != reference]
    if not copies:
        raise ValueError(f"the result has no quantised copy of {reference!r}")
    out: dict[str, xr.DataArray] = {}
    for name, var in ds.data_vars.items():
        if name in NOT_MEASURES or "weights" not in var.dims or not np.issubdtype(var.dtype, np.floating):
            continue
        over = [d for d in var.dims if d in AVERAGED]
        mean = var.mean(over)
        drift = abs(mean.sel(weights=copies) - mean.sel(weights=reference)).rename(weights="copy")
        out[name] = drift
        out[f"max_drift_{name}"] = drift.max("copy", skipna=False)
    result = xr.Dataset(out)
    result.attrs = {
        "title": "san: the drift quantisation alone causes in the rank-collapse measures",
        "reference": reference,
    }
    return result


def as_pretrained(result: xr.Dataset, control: xr.Dataset, weights: str) -> xr.Dataset:
    """``result`` (a rank-collapse result with ``init`` and ``pretrained`` weights) with its pretrained weights
    replaced by weight set ``weights`` of the quantisation control's result ``control``: what the claims would read
    had the model been that copy. Its attributes (the recorded family) are ``result``'s."""
    copy = control.sel(weights=[weights]).assign_coords(weights=[PRETRAINED])
    out = xr.concat([result.sel(weights=[INIT]), copy], dim="weights", data_vars="all", join="exact")
    out.attrs = dict(result.attrs)
    return out


def row_drift(text: Mapping[str, xr.Dataset], controls: Mapping[str, xr.Dataset], judge: RowJudge) -> dict:
    """Per verdict row (by key), the largest change of its margin when one model's weights (of ``controls``, model ->
    its quantisation control's result) are replaced by a requantised copy, the other models of ``text`` kept: each
    copy and the control's own ``pretrained`` judged by ``judge`` (:func:`as_pretrained`), the largest over the copies
    and the models (a control of a model ``text`` lacks, one of another kind, is left out). None where no model's
    margin is a number on every copy: the row was not judged, or ``judge`` does not judge it (the context-length rows
    read no measure the control recomputes: judged without them, they are not judged, so their drift is not
    measured)."""
    drift: dict[str, float | None] = {}
    for name, control in controls.items():
        if name not in text:
            continue
        sets = [str(w) for w in control["weights"].values]
        margins = {w: judge({**text, name: as_pretrained(text[name], control, w)}) for w in sets}
        for key, reference in margins[PRETRAINED].items():
            values = [margins[w].get(key) for w in sets]
            if all(map(_finite, values)):
                drift[key] = max(drift.get(key) or 0.0, *(abs(v - reference) for v in values))
            else:
                drift.setdefault(key, None)
    return drift


def merge_drift(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> dict[str, float | None]:
    """Two :func:`row_drift` results (of disjoint models) as one: per row the larger drift, None only where neither
    has a number."""
    out = dict(a)
    for key, drift in b.items():
        known = [d for d in (out.get(key), drift) if d is not None]
        out[key] = max(known) if known else None
    return out


def apply_row_drift(rows: list[dict[str, Any]], drift: Mapping[str, float | None]) -> None:
    """Record in each verdict row of ``rows`` resting on the models of the control its margin's ``drift``
    (:func:`row_drift`; rows without one get None) and print it "within quantisation drift" where its margin is no
    larger (:func:`san.claims.drift.against_drift`)."""
    for row in rows:
        row["drift"] = drift.get(row["key"])
        row["verdict"] = against_drift(row["verdict"], row.get("margin"), row["drift"])
