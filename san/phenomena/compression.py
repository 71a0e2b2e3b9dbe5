"""Compression is not rank collapse: at a layer that is nearly rank one in the spectral sense (the largest singular
value carries most of the energy, as one massive token makes it, Queipo-de-Llano et al. 2025: X close to e_0 x_0^T),
the other tokens stay apart in Dong et al.'s sense (they are not close to one vector, 1 x^T: the rank collapse of
Dong, Cordonnier & Loukas 2021, Sec. 2).

Stated this way because the residual of the whole matrix cannot fail the test: for X = e_0 x_0^T its relative
residual is about 1 by construction (the massive row is far from the mean of the rows). What the claim can refute is
that compression hides a collapse of the remaining tokens: so on every pretrained text model (unmodified), at every
block output whose ``sigma1_share`` (s_1^2 / ||X||_F^2) is at least ``report.phenomena.compression.compressed``,
Dong's relative residual without the massive tokens (``residual_ratio_no_massive``) stays above
``report.phenomena.compression.not_collapsed`` (in decades); beside it the whole matrix's (``residual_ratio``).
Near-miss wrong theory: compression is Dong's rank collapse, as pure attention (the SAN variant of the same
pretrained weights) produces it: the residual at those layers moved toward the SAN's there (geometrically). If the SAN
stays above the threshold too, the test cannot tell compression from rank collapse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.claims.per_model import Judged, judge, layers_text
from san.claims.record import Claim, NearMiss, Scope, Settings
from san.claims.verdicts import moved
from san.phenomena.data import curve, lacks, variants
from san.phenomena.spec import DECODER, ENCODER, PRETRAINED, PRETRAINED_BY_AUTHORS, PURE, about, label

SOURCE = (
    "this workbench's reading of Queipo-de-Llano et al. 2025 (arXiv 2510.06477), abstract (massive activations "
    "necessarily compress) against Dong et al. 2021, Sec. 2 (rank collapse to 1 x^T)"
)


def compressed_layers(share: np.ndarray, compressed: float) -> list[int]:
    """The block outputs (layers 1 .. L) whose ``sigma1_share`` is at least ``compressed``."""
    return [la for la in range(1, len(share)) if share[la] >= compressed]


def _model(ds: xr.Dataset, kind: str, compressed: float) -> Judged:
    """One model's share of the claim: the smallest residual without the massive tokens over its compressed layers,
    moved toward the SAN's."""
    reason = lacks(ds, ("sigma1_share", "residual_ratio", "residual_ratio_no_massive"), (PRETRAINED,))
    if not reason and PURE not in variants(ds):
        reason = f"no {PURE} variant in this run (the near-miss theory's prediction)"
    if reason:
        return Judged(kind, None, reason)
    share = curve(ds, "sigma1_share", PRETRAINED)
    layers = compressed_layers(share, compressed)
    if not layers:
        return Judged(kind, None, f"no layer with sigma1 share >= {compressed:g} (largest {np.nanmax(share[1:]):.3g})")
    others = curve(ds, "residual_ratio_no_massive", PRETRAINED)[layers]
    pure = curve(ds, "residual_ratio_no_massive", PRETRAINED, PURE)[layers]

    def statistic(s: float) -> V.Measure:
        values = moved(others, pure, s, log=True)
        at = int(np.nanargmin(values)) if np.isfinite(values).any() else 0
        return V.Measure(float(values[at]), item=f"layer {layers[at]}")

    at = int(np.nanargmin(others)) if np.isfinite(others).any() else 0
    whole = curve(ds, "residual_ratio", PRETRAINED)[layers]
    note = (f"compressed layers {layers_text(layers)}; smallest residual without the massive tokens {others[at]:.3g} "
            f"at layer {layers[at]} (sigma1 share {share[layers[at]]:.3g}, the whole matrix's {whole[at]:.3g}; "
            f"{PURE} there {pure[at]:.3g})")  # fmt: skip
    return Judged(kind, statistic, note=note)


def compression_claims(
    results: Mapping[str, xr.Dataset], kinds: Mapping[str, str], report: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """The claim that compression is not rank collapse, over the text models of ``results`` (model -> rank-collapse
    result; ``kinds``: model -> kind), thresholds and control setting from ``report`` (``report.phenomena``): its
    ``row`` and models x claims ``cells`` by claim key."""
    r = Settings("report.phenomena", report).section("compression")
    claim = Claim(
        key="compression_is_not_collapse",
        statement="compression is not rank collapse: where a massive token compresses a representation to nearly rank "
        "one (X close to e_0 x_0^T), the other tokens stay apart (not close to one vector, Dong et al.'s 1 x^T)",
        words="", source=SOURCE, place="", form=V.UNIVERSAL,
        scope=Scope((DECODER, ENCODER), training=PRETRAINED_BY_AUTHORS),
        measure="Dong et al.'s relative residual without the massive tokens at the compressed block outputs",
        test=f"in every pretrained text model (unmodified), at every block output whose largest singular value "
        f"carries at least {r['compressed']:g} of the energy (s_1^2 / ||X||_F^2), Dong's relative residual "
        f"||res(X)||_(1,inf) / ||X||_(1,inf) of the tokens other than the massive ones stays above "
        f"{r['not_collapsed']:g} (margin in decades)",
        threshold=r.threshold("not_collapsed", above=True, log=True),
        near_miss=NearMiss(r.wrong("collapse_control", f"rank collapse as pure attention ({PURE}, the same weights) "
                                   "produces it at those layers, moved {s:g} of the way (log)"),
                           "a matrix of nearly rank one looks like a collapsed one to a spectral measure"),
    )  # fmt: skip
    judged = {
        name: _model(results[name], kinds[name], r["compressed"]) for name in about(claim.key, kinds) if name in results
    }
    detail = "; ".join(f"{name}: {m.note}" for name, m in judged.items() if m.statistic is not None)
    return {claim.key: judge(claim, judged, kinds, detail, label(claim.key))}
