"""Claims the report reads from a wing whose module returns them in its own shape (torch-free)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from san.core import verdicts as V


def propagation_verdicts(section: Mapping[str, list[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The verdict rows of the propagation claims (``{sweep: [claim, ...]}``, each claim with ``paper``,
    ``statement`` and ``holds`` True, False or None): scientific verdicts of the follow-up literature."""
    return [
        V.entry(f"{sweep}.{i}", c["holds"], V.SCIENTIFIC, f"{c['paper']}: {c['statement']}")
        for sweep, cs in section.items()
        for i, c in enumerate(cs)
    ]


def propagation_claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The propagation wing's section (:func:`san.propagation.claims.claims` on ``inputs['propagation']``, sweeps
    ``params['sweeps']``, thresholds ``params['thresholds']['propagation']``); its verdict rows come from
    :func:`propagation_verdicts` (the section is a mapping of sweeps, with no ``verdicts`` key of its own)."""
    from san.core.storage import read_netcdf
    from san.propagation.claims import claims

    datasets = dict(zip(params["sweeps"], map(read_netcdf, inputs["propagation"]), strict=True))
    section = claims(datasets, params["thresholds"]["propagation"])
    return {"propagation": section}
