"""The rate claims of the rank-collapse wing, each judged by its rate on the models its source speaks of (torch-free).

- Dong et al. 2021 (Thm. 2.2, Fig. 2): pure attention loses rank *doubly exponentially* with depth. Judged on the
  SAN variant of every bidirectional model (the paper's setting), at every weight set, by the contraction exponent
  (:func:`san.rank_collapse.rate.contraction_exponent`: 3 for the theorem's cubic rate, 1 for an exponential decay);
  the near-miss control is the exponential decay fitted to the same layers, which a careful reader of Fig. 2 could
  hold (both look like a cliff on a log axis).
- Wu et al. 2024 (Thm. 1): pure *causal* attention still collapses *exponentially*. Judged on the SAN variant of
  every decoder, at every weight set, by the late share of the collapse
  (:func:`san.rank_collapse.rate.late_share`: 1/2 for an exponential decay); the near-miss control is the power
  law through the same first and last layers, a collapse that slows with depth.

Each row's statistic is per item (model and weights) over its sequences; the claim is universal over its items.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.rank_collapse import rate as R

__all__ = ["RATE_VARIANT", "causal_exponential_row", "doubly_exponential_row", "rate_claims", "rate_table"]

#: the variant the rate claims speak of: pure attention, no MLP and no skip (the paper's SAN)
RATE_VARIANT = "SAN"


def _curves(ds: xr.Dataset, weights: str) -> np.ndarray:
    """The SAN variant's relative residual per sequence and layer (sample x layer) of one weight set."""
    return ds["residual_ratio"].sel(weights=weights, variant=RATE_VARIANT).transpose("sample", "layer").values


def _items(results: Mapping[str, xr.Dataset], models: tuple[str, ...]) -> list[tuple[str, np.ndarray]]:
    """``(model weights, curves)`` of every weight set of ``models`` (in the results' order)."""
    return [(f"{name} {w}", _curves(ds, str(w))) for name, ds in results.items() if name in models
            for w in ds["weights"].values]  # fmt: skip


def _exponents(curves: np.ndarray, floor: float, limit: float, s: float) -> list[float]:
    """Per sequence: the contraction exponent of its final descent, moved ``s`` of the way (in log) towards the
    exponential decay fitted to the same layers."""
    out = []
    for c in curves:
        layers = R.fitted_layers(c, floor, limit)
        moved = V.toward(c, R.exponential_fit(c, layers), s, log=True)
        out.append(R.contraction_exponent(moved, layers).value)
    return out


def _shares(curves: np.ndarray, floor: float, s: float) -> list[float]:
    """Per sequence: the late share of its collapse from layer 1 to the floor, moved ``s`` of the way (in log)
    towards the power law through the same first and last layers."""
    out = []
    for c in curves:
        layers = R.fitted_layers(c, floor, np.inf, first=1)
        moved = V.toward(c, R.power_law_fit(c, layers), s, log=True)
        out.append(R.late_share(moved, layers).value)
    return out


def _median(values: list[float], item: str) -> V.Measure:
    """The median over sequences of a measure (no standard error: it varies little between sequences and is
    reported with its quartiles)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    return V.Measure(float(np.median(v)) if v.size else float("nan"), 0.0, int(v.size), item)


def _statistic(items: list[tuple[str, np.ndarray]], measure: Callable[[np.ndarray, float], list[float]],
               threshold: V.Threshold) -> Callable[[float], V.Measure]:  # fmt: skip
    """The universal statistic over ``items``: the item whose median clears ``threshold`` least."""

    def statistic(s: float) -> V.Measure:
        return V.worst([_median(measure(curves, s), item) for item, curves in items], threshold)

    return statistic


def _quartiles(values: list[float]) -> str:
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if not v.size:
        return "no sequence with enough layers in range"
    q1, q2, q3 = np.percentile(v, [25, 50, 75])
    return f"{q2:.3g} [{q1:.3g}, {q3:.3g}] over {v.size} sequences"


def doubly_exponential_row(
    results: Mapping[str, xr.Dataset],
    bidirectional: tuple[str, ...],
    *,
    exponent_min: float,
    floor: float,
    limit: float,
    exponential_control: float,
    note: str = "",
) -> dict[str, Any]:
    """Dong et al.'s rate, judged by its exponent: every bidirectional model's SAN (init and pretrained) has a
    median contraction exponent of at least ``exponent_min`` over its final descent (ratios in ``(floor,
    limit)``); the control moves every curve ``exponential_control`` of the way towards the exponential decay
    fitted to the same layers (exponent 1). Not judged without a bidirectional model. ``note``: the threshold's
    history (``report.rank_collapse.threshold_notes``), printed in the detail."""
    items = _items(results, bidirectional)
    threshold = V.Threshold(exponent_min, above=True, key="report.rank_collapse.exponent_min")
    detail = "; ".join(f"{item}: {_quartiles(_exponents(curves, floor, limit, 0.0))}" for item, curves in items)
    return V.check(
        "pure_collapses", "pure attention loses rank doubly exponentially with depth", form=V.UNIVERSAL,
        source="Dong et al. 2021, Thm. 2.2 and Fig. 2",
        test=f"the SAN's contraction exponent (slope of log r_(l+1) against log r_l over the layers with r_l in "
        f"({floor:g}, {limit:g}); 3 for the theorem's cubic rate, 1 for an exponential decay) at least "
        f"{exponent_min:g}, median over sequences, in every bidirectional model and weight set",
        statistic=_statistic(items, lambda c, s: _exponents(c, floor, limit, s), threshold), threshold=threshold,
        wrong=V.Wrong.toward("an exponential decay fitted to the same layers, exponent 1 (the data moved {s:g} of "
                             "the way to it)", exponential_control, "report.rank_collapse.exponential_control"),
        detail=(f"exponent median [quartiles]: {detail}" if items else "no bidirectional model in this run")
        + (f"; threshold {note}" if note else ""),
    )  # fmt: skip


def causal_exponential_row(
    results: Mapping[str, xr.Dataset],
    causal: tuple[str, ...],
    *,
    late_share_min: float,
    floor: float,
    power_law_control: float,
) -> dict[str, Any]:
    """Wu et al.'s rate for causal masks: every decoder's SAN (init and pretrained) collapses at least
    exponentially, its later half of layers carrying a median share of at least ``late_share_min`` of the fall of
    ``ln r`` (1/2: exponential); the control moves every curve ``power_law_control`` of the way towards the power
    law through the same first and last layers. Not judged without a decoder."""
    items = _items(results, causal)
    threshold = V.Threshold(late_share_min, above=True, key="report.rank_collapse.late_share_min")
    detail = "; ".join(f"{item}: {_quartiles(_shares(curves, floor, 0.0))}" for item, curves in items)
    return V.check(
        "causal_collapses_exponentially", "pure masked (causal) attention still suffers from exponential collapse "
        "to a rank-one subspace", form=V.UNIVERSAL, source="Wu et al. 2024, Thm. 1",
        test=f"the causal SAN's later half of layers (layer 1 to the first at or below {floor:g}) carries at least "
        f"{late_share_min:g} of the fall of ln r (1/2: exponential; a power law's share falls with depth), median "
        "over sequences, in every decoder and weight set",
        statistic=_statistic(items, lambda c, s: _shares(c, floor, s), threshold), threshold=threshold,
        wrong=V.Wrong.toward("a power law through the same first and last layers, a collapse that slows with depth "
                             "(the data moved {s:g} of the way to it)", power_law_control,
                             "report.rank_collapse.power_law_control"),
        detail=f"late share median [quartiles]: {detail}" if items else "no decoder in this run",
    )  # fmt: skip


def rate_table(results: Mapping[str, xr.Dataset], *, floor: float, limit: float) -> dict[str, dict[str, Any]]:
    """Per model and weights, the SAN's rate measures (medians over sequences): the contraction exponent, the late
    share of its collapse, the mean contraction factor per layer (``exp`` of the mean fall of ``ln r``) and the R^2
    of the log-linear fit, each over the layers its rule reads (None where too few)."""

    def med(values: list[float]) -> float | None:
        v = [x for x in values if np.isfinite(x)]
        return float(np.median(v)) if v else None

    table: dict[str, dict[str, Any]] = {}
    for name, ds in results.items():
        for w in map(str, ds["weights"].values):
            curves = _curves(ds, w)
            factors, r2 = [], []
            for c in curves:
                layers = R.fitted_layers(c, floor, np.inf, first=1)
                logs = np.log(c[layers])
                factors.append(float(np.exp(np.diff(logs).mean())) if layers.size > 1 else float("nan"))
                r2.append(R.log_linear_r2(c, layers))
            table.setdefault(name, {})[w] = {
                "exponent": med(_exponents(curves, floor, limit, 0.0)),
                "late_share": med(_shares(curves, floor, 0.0)),
                "factor": med(factors),
                "r2": med(r2),
            }
    return table


def rate_claims(
    results: Mapping[str, xr.Dataset],
    causal: tuple[str, ...],
    *,
    exponent_min: float,
    exponent_limit: float,
    rate_floor: float,
    exponential_control: float,
    late_share_min: float,
    power_law_control: float,
    notes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The rate part of the rank-collapse section (keys of ``report.rank_collapse``): the doubly exponential row on
    the models not in ``causal``, Wu et al.'s row on those in it, their smallest statistics and thresholds, and the
    per-model rate table (:func:`rate_table`); ``notes``: the section's ``threshold_notes``."""
    bidirectional = tuple(name for name in results if name not in causal)
    dong = doubly_exponential_row(results, bidirectional, exponent_min=exponent_min, floor=rate_floor,
                                  limit=exponent_limit, exponential_control=exponential_control,
                                  note=(notes or {}).get("exponent_min", ""))  # fmt: skip
    wu = causal_exponential_row(results, causal, late_share_min=late_share_min, floor=rate_floor,
                                power_law_control=power_law_control)  # fmt: skip
    return {
        "exponent_min": exponent_min,
        "late_share_min": late_share_min,
        "exponent_value": float("nan") if dong["value"] is None else dong["value"],
        "late_share_value": float("nan") if wu["value"] is None else wu["value"],
        "pure_collapses": dong["holds"],
        "causal_collapses_exponentially": wu["holds"],
        "rate": rate_table(results, floor=rate_floor, limit=exponent_limit),
        "verdicts": [dong, wu],
    }
